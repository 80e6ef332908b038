"""
Tests for checkpoint.py: strict loading names every problem, save -> load is bit-exact with the
official keys and shards, LoRA adapters are merged on the fly when saving, and save_merged puts
adapters trained on a 4-bit base onto the original weights. The checkpoint these read is written
independently of checkpoint.py (write_checkpoint in tests/conftest.py). Saves that other tools can
read: a training save carries the base's remote code, tokenizer and generation config byte for byte
(a hub-like base of symlinks into blobs/), with an auto_map that names only code that is there.

Run: python -m pytest tests/test_checkpoint.py -q
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from conftest import REPO, SMALL, official_keys, run, write_checkpoint
from modelio.adapters import LoRALinear, add_lora, lora_state_dict
from modelio.checkpoint import from_pretrained, make_tiny, save_merged, save_pretrained, verify
from modelio.tokenizer import BOS_TOKEN, EOS_TOKEN


@pytest.mark.parametrize("corruption, needle", [
    (dict(drop="model.transformer.blocks.1.up_proj.weight"), "missing keys (1): model.transformer.blocks.1.up_proj"),
    (dict(add="model.transformer.blocks.0.q_proj.bias"), "unexpected keys (1): model.transformer.blocks.0.q_proj.bias"),
    (dict(reshape="model.transformer.ln_f.weight"), "model.transformer.ln_f.weight: checkpoint (2, 2) vs model (32,)"),
])
def test_strict_loading_names_the_problem(tmp_path, corruption, needle):
    write_checkpoint(tmp_path, SMALL, **corruption)
    with pytest.raises(ValueError) as e:
        from_pretrained(tmp_path)
    assert needle in str(e.value)


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        from_pretrained(tmp_path)


def test_save_load_is_bit_exact_with_official_keys(tmp_path, ckpt):
    path, _ = ckpt
    model = from_pretrained(path, dtype=torch.bfloat16)
    save_pretrained(model, tmp_path / "out", max_shard_bytes=6000)  # force several shards
    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(official_keys(SMALL))
    assert len(set(index["weight_map"].values())) > 2
    again = from_pretrained(tmp_path / "out")
    for (k1, a), (k2, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert k1 == k2 and a.dtype == b.dtype == torch.bfloat16 and torch.equal(a, b)
    # saving again with one shard replaces the old shards instead of leaving stale files
    save_pretrained(again, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").glob("*.safetensors")) == ["model-00001-of-00001.safetensors"]
    assert json.loads((tmp_path / "out" / "config.json").read_text())["init_fn"] == "mitchell"


def test_save_with_adapters_merges_on_the_fly_and_keeps_training_state(tmp_path, ckpt):
    path, _ = ckpt
    model = from_pretrained(path).eval()
    add_lora(model, r=4, alpha=8, dropout=0.0)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, LoRALinear):
                m.lora_B.normal_(0, 0.5)
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        adapted = model(ids)
    save_pretrained(model, tmp_path / "merged")
    assert isinstance(model.transformer.blocks[0].q_proj, LoRALinear)  # the model is untouched
    index = json.loads((tmp_path / "merged" / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(official_keys(SMALL))  # no lora / base keys leak out
    with torch.no_grad():
        torch.testing.assert_close(from_pretrained(tmp_path / "merged")(ids), adapted, atol=1e-4, rtol=1e-4)


def test_save_merged_puts_4bit_trained_adapters_on_the_original_weights(tmp_path, ckpt):
    path, _ = ckpt
    q = from_pretrained(path, load_in_4bit=True)
    add_lora(q, r=4, alpha=8, dropout=0.0, targets=("q_proj", "up_proj"))
    with torch.no_grad():
        for n, p in q.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    save_merged(q, path, tmp_path / "merged")
    # expected: the full-precision base with the very same adapters
    full = from_pretrained(path)
    add_lora(full, r=4, alpha=8, dropout=0.0, targets=("q_proj", "up_proj"))
    full.load_state_dict(lora_state_dict(q), strict=False)
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        torch.testing.assert_close(from_pretrained(tmp_path / "merged")(ids), full(ids), atol=1e-4, rtol=1e-4)


def test_tiny_ids_are_the_tiny_tokenizers(tmp_path):
    # model.TINY_IDS (random tiny models in lab/ and model.py's demo) must be what make_tiny reads off the tokenizer
    from model import TINY_IDS
    config = from_pretrained(make_tiny(tmp_path / "tiny")).config
    assert {k: getattr(config, k) for k in TINY_IDS} == TINY_IDS


# -----------------------------------------------------------------------------
# Saves that other tools can read: the base's non-weight files, byte for byte

# Stand-ins for the remote code LLaDA-8B-Instruct ships. The config module is a real transformers
# PretrainedConfig, so AutoConfig(trust_remote_code=True) reads a save as an outside tool would.
REMOTE_CODE = {"configuration_llada.py": "from transformers import PretrainedConfig\n\n\n"
                                         "class LLaDAConfig(PretrainedConfig):\n    model_type = 'llada'\n",
               "modeling_llada.py": "class LLaDAModelLM:  # a stand-in: no test imports it\n    pass\n"}
AUTO_MAP = {"AutoConfig": "configuration_llada.LLaDAConfig", "AutoModel": "modeling_llada.LLaDAModelLM",
            "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM"}
# what a save must carry from hub_base, spelt out here rather than taken from model_files.MODEL_FILES
CARRIED = {*REMOTE_CODE, "generation_config.json", "special_tokens_map.json", "tokenizer.json",
           "tokenizer_config.json", "chat_template.jinja"}
NEVER = {"README.md", ".gitattributes"}  # the base's model card would be false for a fine-tune
WEIGHTS = {"config.json", "model.safetensors.index.json", "model-00001-of-00001.safetensors"}
SHAPE = dict(d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)
SFT = ["--num-examples", "40", "--max-steps", "2", "--batch-size", "4", "--max-length", "52", "--cut-labels", "--eval-every", "1",
       "--eval-fraction", "0.1", "--lr", "1e-2", "--lora-r", "4", "--lora-alpha", "8"]
# an outside tool reading a save's config.json: transformers, running the save's own configuration_llada.py
READ_CONFIG = ("import sys, transformers\nc = transformers.AutoConfig.from_pretrained(sys.argv[1], "
               "trust_remote_code=True)\nprint(type(c).__module__, type(c).__name__, c.d_model)")


@pytest.fixture(scope="module")
def hub_base(tmp_path_factory):
    """The tiny model laid out like the hub cache's LLaDA-8B-Instruct: config.json with its auto_map,
    remote code, tokenizer files, chat template, generation config, model card; every file of the
    snapshot a relative symlink into the repo's blobs/ folder, named by its hash."""
    root = tmp_path_factory.mktemp("hub")
    staging = make_tiny(root / "staging", **SHAPE)
    config = json.loads((staging / "config.json").read_text())
    (staging / "config.json").write_text(json.dumps({**config, "auto_map": AUTO_MAP}, indent=2))
    for name, text in REMOTE_CODE.items():
        (staging / name).write_text(text)
    (staging / "special_tokens_map.json").write_text(json.dumps({"bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN}))
    (staging / "README.md").write_text("# LLaDA-8B-Instruct\n")
    (staging / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
    repo = root / "models--GSAI-ML--LLaDA-8B-Instruct"
    snapshot = repo / "snapshots" / ("ab" * 20)
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for f in sorted(staging.iterdir()):
        blob = repo / "blobs" / hashlib.sha256(f.read_bytes()).hexdigest()
        os.replace(f, blob)
        (snapshot / f.name).symlink_to(os.path.relpath(blob, snapshot))
    assert {f.name for f in snapshot.iterdir()} == CARRIED | NEVER | WEIGHTS  # nothing else to carry
    return snapshot


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory, hub_base):
    """A real training save: sft.py, 2 LoRA steps on the toy task, a save (and eval) after each."""
    out = tmp_path_factory.mktemp("sft") / "run"
    run([sys.executable, "sft.py", "--model-dir", str(hub_base), "--out-dir", str(out), *SFT], REPO)
    return out


def assert_carries(base, out):
    """out holds every file of CARRIED as a plain file with the base's bytes, and none of NEVER."""
    for name in CARRIED:
        assert not (out / name).is_symlink() and (out / name).read_bytes() == (base / name).read_bytes(), name
    assert not NEVER & {f.name for f in out.iterdir()}


def saved_config(path):
    return json.loads((path / "config.json").read_text())


def test_a_training_save_carries_the_base_files_and_loads_in_transformers(tmp_path, hub_base, sft_run):
    saves = sorted((sft_run / "saves").glob("step-*"))
    assert [d.name for d in saves] == ["step-000001", "step-000002"]
    for d in [*saves, sft_run]:  # each save, and the run's model that publish() linked to the top
        assert_carries(hub_base, d)
        assert saved_config(d)["auto_map"] == AUTO_MAP
        verify(d)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}  # remote code goes to HF_HOME
    res = subprocess.run([sys.executable, "-c", READ_CONFIG, str(sft_run)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    module, name, d_model = res.stdout.split()
    assert module.endswith("configuration_llada") and name == "LLaDAConfig" and int(d_model) == SHAPE["d_model"]


def test_a_lora_save_on_a_4bit_base_carries_the_same_files(tmp_path, hub_base):
    q = from_pretrained(hub_base, load_in_4bit=True)
    add_lora(q, r=4, alpha=8, dropout=0.0)
    save_merged(q, hub_base, tmp_path / "merged")
    assert_carries(hub_base, tmp_path / "merged")
    assert {f.name for f in (tmp_path / "merged").iterdir()} == CARRIED | WEIGHTS
    assert saved_config(tmp_path / "merged")["auto_map"] == AUTO_MAP


def test_auto_map_names_only_the_code_a_save_holds(tmp_path):
    base = make_tiny(tmp_path / "tiny", **SHAPE)
    # make_tiny's own model has no remote code, and its config.json names none
    assert "auto_map" not in saved_config(base) and not list(base.glob("*.py"))
    save_merged(from_pretrained(base), base, tmp_path / "plain")
    assert "auto_map" not in saved_config(tmp_path / "plain") and saved_config(tmp_path / "plain")["model_type"] == "llada"
    # a config that names code the base lacks (here: configuration_llada.py only): the absent modules' entries go
    (base / "configuration_llada.py").write_text(REMOTE_CODE["configuration_llada.py"])
    model = from_pretrained(base)
    model.config.extra["auto_map"] = AUTO_MAP
    save_merged(model, base, tmp_path / "some")
    assert saved_config(tmp_path / "some")["auto_map"] == {"AutoConfig": AUTO_MAP["AutoConfig"]}


def test_a_run_directory_as_base_gives_its_model_files_not_its_run_files(tmp_path, hub_base, sft_run):
    # the next stage starts from a run's top (grpo.py --model-dir out/sft): a run's files stay behind
    base = shutil.copytree(sft_run, tmp_path / "sft")
    (base / "STOPPED").write_text("step 2\n")
    torch.save({"step": 2}, base / "trainer_state.pt")  # the older run layout kept it at the top
    assert {"saves", "save_info.json", "train_args.json", "metrics.jsonl"} <= {f.name for f in base.iterdir()}
    save_merged(from_pretrained(base), base, tmp_path / "next")
    assert {f.name for f in (tmp_path / "next").iterdir()} == CARRIED | WEIGHTS
    assert_carries(hub_base, tmp_path / "next")
    assert saved_config(tmp_path / "next")["auto_map"] == AUTO_MAP
