"""
Fault injection into a model directory: each test copies a tiny LLaDA or Dream (methods/dream.py) written by
make_tiny, breaks one thing, and checks that the loader, or the up-front check of the entry scripts,
refuses it in ONE line that names the file and the field or tensor:
  - a NaN or inf weight (fp32 and bf16 shards): refused at load, naming the tensor and its shard; before,
    training skipped every step and blamed the learning rate, and eval scored 0% without a word;
  - a config.json field of the wrong type ("n_layers": "two" was a TypeError traceback) or missing (a
    missing n_layers became LLaDA-8B's 32, then 252 "missing keys"); optional fields stay optional;
  - tokenizer.json missing, not JSON, or JSON but not a tokenizer, and a tokenizer_config.json that is not
    JSON (transformers' tracebacks, after the model had loaded).
End to end, sft.py and eval.py exit 2 with one stderr line, no traceback, and --out-dir never created.
CPU only, a few seconds each.

Run: python -m pytest tests/test_model_faults.py -q
"""
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

import methods.dream  # noqa: F401  (registers the Dream family: make_tiny(family="dream"))
from conftest import REPO
from modelio.checkpoint import from_pretrained, make_tiny, verify
from modelio.tokenizer import check_tokenizer_files, load_tokenizer
from ops.checks import InputError, check_model_dir

# one block, 32 wide: the smallest shape make_tiny writes in each family's layout
SHAPE = dict(d_model=32, n_heads=4, n_layers=1, mlp_hidden_size=64)
# per family: its layer-count key, and a block tensor under the checkpoint's own name
FAMILY = {"llada": ("n_layers", "model.transformer.blocks.0.k_proj.weight"),
          "dream": ("num_hidden_layers", "model.layers.0.mlp.up_proj.weight")}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """family -> a healthy tiny model directory, written once; tests break copies of it."""
    root = tmp_path_factory.mktemp("tiny")
    return {"llada": make_tiny(root / "llada", **SHAPE, n_kv_heads=4),
            "dream": make_tiny(root / "dream", family="dream", **SHAPE, n_kv_heads=1)}


def copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def shard_of(path):
    (shard,) = path.glob("*.safetensors")  # make_tiny writes one
    return shard


def edit_config(path, change):
    cfg = json.loads((path / "config.json").read_text())
    change(cfg)
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return path


def one_line_error(fn, *args, kind=ValueError):
    with pytest.raises(kind) as e:
        fn(*args)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


# -----------------------------------------------------------------------------
# Non-finite weights


@pytest.mark.parametrize("family", ["llada", "dream"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_a_non_finite_weight_is_refused_naming_tensor_and_shard(tiny, tmp_path, family, bad, dtype):
    path, key = copy(tiny[family], tmp_path / "bad"), FAMILY[family][1]
    tensors = {k: v.to(dtype) for k, v in load_file(shard_of(path)).items()}
    tensors[key].view(-1)[[0, 7, -1]] = bad  # three values, the first and last included
    save_file(tensors, shard_of(path), metadata={"format": "pt"})
    edit_config(path, lambda c: c.update(torch_dtype=str(dtype).removeprefix("torch.")))
    verify(path)  # the headers are fine: only reading the weights can tell
    msg = one_line_error(from_pretrained, path)
    assert msg.startswith(f"{shard_of(path)}: tensor {key} holds 3 NaN or inf values"), msg
    # the 4-bit path and a cast read the same stored tensor first
    assert key in one_line_error(from_pretrained, path, torch.float32)


def test_finite_extremes_load(tiny, tmp_path):
    # the largest finite bf16 values are weights, not faults
    path = copy(tiny["llada"], tmp_path / "big")
    tensors = {k: v.to(torch.bfloat16) for k, v in load_file(shard_of(path)).items()}
    big = torch.finfo(torch.bfloat16).max
    tensors[FAMILY["llada"][1]].view(-1)[:2] = torch.tensor([big, -big])
    save_file(tensors, shard_of(path), metadata={"format": "pt"})
    edit_config(path, lambda c: c.update(torch_dtype="bfloat16"))
    assert from_pretrained(path).transformer.blocks[0].k_proj.weight.abs().max() == big


# -----------------------------------------------------------------------------
# config.json: a field of the wrong type, or missing


@pytest.mark.parametrize("family, key, value, says", [
    ("llada", "n_layers", "two", '"n_layers" must be a positive integer, got "two"'),
    ("llada", "n_layers", True, '"n_layers" must be a positive integer, got true'),
    ("llada", "n_heads", 0, '"n_heads" must be a positive integer, got 0'),  # was a ZeroDivisionError
    ("llada", "d_model", 32.5, '"d_model" must be a positive integer, got 32.5'),
    ("llada", "n_kv_heads", "4", '"n_kv_heads" must be a positive integer or null, got "4"'),
    ("llada", "rope_theta", "5e5", '"rope_theta" must be a positive finite number, got "5e5"'),
    ("llada", "rms_norm_eps", None, '"rms_norm_eps" must be a finite number, got null'),
    ("llada", "include_bias", "false", '"include_bias" must be true or false, got "false"'),
    ("llada", "block_type", ["llama"], '"block_type" must be a string, got ["llama"]'),
    ("llada", "model_type", ["llada"], "model_type ['llada'] is not a family"),
    ("llada", "torch_dtype", ["bfloat16"], '"torch_dtype" must be a string or null, got ["bfloat16"]'),
    ("dream", "num_hidden_layers", "two", '"num_hidden_layers" must be a positive integer, got "two"'),
    ("dream", "hidden_size", None, '"hidden_size" must be a positive integer, got null'),
    ("dream", "rope_theta", float("nan"), '"rope_theta" must be a positive finite number, got NaN'),
])
def test_a_config_field_of_the_wrong_type_is_one_line_naming_file_and_field(tiny, tmp_path, family, key, value, says):
    path = edit_config(copy(tiny[family], tmp_path / "bad"), lambda c: c.update({key: value}))
    assert one_line_error(verify, path).startswith(f"{path / 'config.json'}: {says}")


@pytest.mark.parametrize("family, keys, says", [
    ("llada", ["n_layers"], '"n_layers" is missing (LLaDA-8B has 32)'),
    ("llada", ["rope_theta"], '"rope_theta" is missing (LLaDA-8B has 500000.0)'),
    ("llada", ["mask_token_id", "d_model"], '"d_model" is missing (LLaDA-8B has 4096); "mask_token_id" is missing'),
    ("llada", ["mlp_hidden_size", "mlp_ratio"], '"mlp_hidden_size" is missing (LLaDA-8B has 12288)'),
    ("dream", ["num_hidden_layers"], '"num_hidden_layers" is missing (Dream-7B has 28)'),
    ("dream", ["num_key_value_heads"], '"num_key_value_heads" is missing (Dream-7B has 4)'),
    ("dream", ["rope_theta"], '"rope_theta" is missing (Dream-7B has 1000000.0)'),
])
def test_a_missing_config_field_is_named_not_guessed(tiny, tmp_path, family, keys, says):
    path = edit_config(copy(tiny[family], tmp_path / "bad"), lambda c: [c.pop(k) for k in keys])
    msg = one_line_error(verify, path)
    assert msg.startswith(f"{path / 'config.json'}: {says}") and "missing keys" not in msg, msg


@pytest.mark.parametrize("family, keys", [
    ("llada", ["rms_norm_eps", "init_std", "max_sequence_length", "pad_token_id", "n_kv_heads", "block_type",
               "weight_tying", "clip_qkv"]),
    ("llada", ["embedding_size"]),  # the vocabulary size, as wte's shape says
    ("llada", ["mlp_hidden_size"]),  # mlp_ratio x d_model (OLMo's rule), set below to the same width
    ("dream", ["rms_norm_eps", "max_position_embeddings", "initializer_range", "pad_token_id"]),
])
def test_optional_config_fields_stay_optional(tiny, tmp_path, family, keys):
    def change(cfg):
        if "mlp_hidden_size" in keys:
            cfg["mlp_ratio"] = cfg["mlp_hidden_size"] // cfg["d_model"]
        for k in keys:
            cfg.pop(k)
    path = edit_config(copy(tiny[family], tmp_path / "ok"), change)
    model = from_pretrained(path)
    assert model.config.hidden_size == 64 and model.config.padded_vocab == model.config.vocab_size


# -----------------------------------------------------------------------------
# The tokenizer files


def no_tokenizer_json(path):
    (path / "tokenizer.json").unlink()


def not_json(name):
    return lambda path: (path / name).write_text('{"version": "1.0", "model": ')  # a copy cut short


@pytest.mark.parametrize("family", ["llada", "dream"])
@pytest.mark.parametrize("damage, says", ids=["missing", "not-json", "not-a-tokenizer", "config-not-json",
                                               "config-not-object"], argvalues=[
    (no_tokenizer_json, "no tokenizer in {path}: tokenizer.json is missing"),
    (not_json("tokenizer.json"), "{path}/tokenizer.json is not valid JSON (Expecting value: line 1 column 29"),
    (lambda p: (p / "tokenizer.json").write_text('{"model": {"type": "BPE"}}'),
     "{path}/tokenizer.json is JSON but not a tokenizer"),
    (not_json("tokenizer_config.json"), "{path}/tokenizer_config.json is not valid JSON"),
    (lambda p: (p / "tokenizer_config.json").write_text("[]"), "{path}/tokenizer_config.json is not a JSON object"),
])
def test_a_broken_tokenizer_is_refused_up_front_naming_the_file(tiny, tmp_path, family, damage, says):
    path = copy(tiny[family], tmp_path / "bad")
    damage(path)
    says = says.format(path=path)
    # the up-front check of the scripts (inside upfront: one line, exit 2), and load_tokenizer's own
    assert says in one_line_error(check_model_dir, str(path), kind=InputError)
    kind = FileNotFoundError if damage is no_tokenizer_json else ValueError
    assert one_line_error(load_tokenizer, path, kind=kind).startswith(says)


def test_a_healthy_tokenizer_passes_and_special_tokens_map_stays_tolerated(tiny, tmp_path):
    path = copy(tiny["llada"], tmp_path / "ok")
    # LLaDA-8B-Base's special_tokens_map.json is not JSON and is read around (modelio/tokenizer.py)
    (path / "special_tokens_map.json").write_text('{"mask_token": "<|mdm_mask|>" "eos_token": 1}')
    check_tokenizer_files(path)
    assert check_model_dir(str(path)).n_layers == 1


# -----------------------------------------------------------------------------
# End to end: the entry scripts' error path


def nan_weight(path):
    tensors = load_file(shard_of(path))
    tensors[FAMILY["llada"][1]][0, 0] = float("nan")
    save_file(tensors, shard_of(path), metadata={"format": "pt"})


@pytest.mark.parametrize("script, damage, says", ids=["sft-nan", "eval-type", "sft-missing", "eval-tokenizer"],
                         argvalues=[
    ("sft.py", nan_weight, f"tensor {FAMILY['llada'][1]} holds 1 NaN or inf values"),
    ("eval.py", lambda p: edit_config(p, lambda c: c.update(n_layers="two")),
     '/config.json: "n_layers" must be a positive integer, got "two"'),
    ("sft.py", lambda p: edit_config(p, lambda c: c.pop("n_layers")), '/config.json: "n_layers" is missing'),
    ("eval.py", no_tokenizer_json, "tokenizer.json is missing"),
])
def test_an_entry_script_refuses_in_one_line_and_writes_nothing(tiny, tmp_path, script, damage, says):
    path = copy(tiny["llada"], tmp_path / "model")
    damage(path)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    flags = ["--max-steps", "2"] if script == "sft.py" else ["--limit", "4"]
    res = subprocess.run([sys.executable, script, "--task", "toy", "--model-dir", str(path), "--out-dir",
                          str(tmp_path / "out"), *flags], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr[-3000:]
    assert lines[0].startswith(f"{script}: error: ") and says in lines[0] and "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()
