"""
Tests for provenance (modelio/provenance.py; docs/evaluation.md): the weights' fingerprint against an independent
hash of the tensors, its sensitivity, and the chain hub base -> sft -> grpo -> eval on a hub cache laid
out as huggingface_hub writes it, with two fine-tunes of one base whose eval results must not be mixed.
Also the model-side messages: a mistyped hub id, an uncached revision, a `hf download --local-dir` copy.

Run: python -m pytest tests/test_provenance.py -q
"""
import hashlib
import json
import os
import subprocess
import sys

import huggingface_hub
import pytest
import torch
from huggingface_hub._local_folder import write_download_metadata
from safetensors.torch import load_file

from conftest import REPO, write_hub_cache
from modelio.checkpoint import from_pretrained, make_tiny, save_pretrained, stored_dtype
from modelio.hub import resolve_model
from modelio.model_files import copy_model_files
from modelio.provenance import fingerprint, sampled_hash, saved_hash

LLADA = "GSAI-ML/LLaDA-8B-Instruct"
COMMIT_A = "a" * 40
SMALL = dict(d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)


def independent_hash(model_dir):
    """The weights hash computed from the files: every tensor read back by safetensors, its bytes hashed."""
    lines = []
    for name in sorted(os.listdir(model_dir)):
        if name.endswith(".safetensors"):
            for key, t in load_file(os.path.join(model_dir, name)).items():
                data = t.contiguous().view(torch.uint8).numpy().tobytes()
                lines.append(f"{key} {str(t.dtype)[6:]} {list(t.shape)} {hashlib.sha256(data).hexdigest()}\n")
    return hashlib.sha256("".join(sorted(lines)).encode()).hexdigest()


def test_a_save_records_the_hash_of_what_it_wrote_whatever_the_sharding(tmp_path):
    a = make_tiny(tmp_path / "a", **SMALL)
    assert saved_hash(a) == independent_hash(a)
    model = from_pretrained(a)
    save_pretrained(model, tmp_path / "sharded", max_shard_bytes=20_000)  # the same tensors in several shards
    assert len(list((tmp_path / "sharded").glob("*.safetensors"))) > 2
    assert saved_hash(tmp_path / "sharded") == saved_hash(a)
    assert sampled_hash(tmp_path / "sharded") != sampled_hash(a)  # the sampled one reads the files as they are
    # another seed: other weights, other hashes
    b = make_tiny(tmp_path / "b", seed=1, **SMALL)
    assert saved_hash(b) != saved_hash(a) and sampled_hash(b) != sampled_hash(a)
    # a directory not written yet (eval.py fingerprints the tiny default before load() makes it): no hashes
    assert fingerprint(tmp_path / "not-yet") == {"weights_sha256": None, "sampled": None}
    # shards readable like every other file of the save (safetensors alone creates them 0600)
    old = os.umask(0o022)
    try:
        save_pretrained(model, tmp_path / "mode")
    finally:
        os.umask(old)
    modes = {f.name: f.stat().st_mode & 0o777 for f in (tmp_path / "mode").iterdir()}
    assert set(modes.values()) == {0o644}, modes


def test_the_sampled_hash_sees_a_changed_tensor_and_nothing_else(tmp_path):
    a = make_tiny(tmp_path / "a", **SMALL)
    before = fingerprint(a)
    shard = next(a.glob("*.safetensors"))
    n = int.from_bytes(shard.read_bytes()[:8], "little")
    header = json.loads(shard.read_bytes()[8:8 + n])
    key = sorted(k for k in header if k != "__metadata__")[0]
    begin, end = header[key]["data_offsets"]
    data = bytearray(shard.read_bytes())
    # one byte in the middle of the first tensor (a sampled window), as a different fine-tune would differ
    data[8 + n + (begin + end) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    after = fingerprint(a)
    assert after["sampled"] != before["sampled"]
    assert after["weights_sha256"] == before["weights_sha256"]  # the recorded hash is what was written
    assert independent_hash(a) != before["weights_sha256"]  # ... and no longer what is there


# -----------------------------------------------------------------------------
# the model side: hub ids that are not there, a --local-dir copy


def test_a_mistyped_or_uncached_hub_id_names_what_the_cache_holds(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    write_hub_cache(tmp_path / "cache", LLADA, make_tiny(tmp_path / "src", **SMALL), COMMIT_A)
    with pytest.raises(FileNotFoundError, match=f"which holds {LLADA}: did you mean --model-dir {LLADA}\\?$"):
        resolve_model("GSAI-ML/LLaDA-8B-Instrct", cache_dir=tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match=f"which holds {LLADA} at main, {COMMIT_A} but not at v2"):
        resolve_model(f"{LLADA}@v2", cache_dir=tmp_path / "cache")
    # nothing close: how to download it, and what the cache does hold
    with pytest.raises(FileNotFoundError, match=f"hf download other/model.*the cache holds {LLADA}"):
        resolve_model("other/model", cache_dir=tmp_path / "cache")
    assert [r.repo_id for r in huggingface_hub.scan_cache_dir(tmp_path / "cache").repos] == [LLADA]


def test_a_local_dir_download_keeps_its_commit(tmp_path):
    d = make_tiny(tmp_path / "LLaDA-8B-Instruct", **SMALL)
    assert resolve_model(str(d)).revision is None
    write_download_metadata(d, "config.json", COMMIT_A, "etag")  # what `hf download --local-dir` leaves
    assert resolve_model(str(d)).revision == COMMIT_A


# -----------------------------------------------------------------------------
# the chain, through the scripts


def script(cmd, env):
    return subprocess.run([sys.executable, *cmd], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_two_fine_tunes_of_one_hub_base_keep_their_chain_and_their_results_apart(tmp_path):
    # the base: a bf16 tiny LLaDA in a hub cache at commit A (LLaDA-8B-Instruct stores bf16)
    src = make_tiny(tmp_path / "src", **SMALL)
    bf16 = tmp_path / "bf16"
    copy_model_files(src, bf16)
    save_pretrained(from_pretrained(src, dtype=torch.bfloat16), bf16)
    # the released config.json names no torch_dtype: the shards' headers say bf16
    config = json.loads((bf16 / "config.json").read_text())
    del config["torch_dtype"]
    (bf16 / "config.json").write_text(json.dumps(config))
    assert stored_dtype(bf16) == "bfloat16" and stored_dtype(src) == "float32"
    cache = tmp_path / "cache"
    snap = write_hub_cache(cache, LLADA, bf16, COMMIT_A)
    assert not huggingface_hub.scan_cache_dir(cache).warnings
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    sft = ["sft.py", "--model-dir", LLADA, "--max-steps", "2", "--eval-every", "2", "--batch-size", "4",
           "--num-examples", "40"]
    for name, seed in (("a", "1"), ("b", "2")):
        res = script([*sft, "--out-dir", str(tmp_path / name), "--seed", seed], env)
        assert res.returncode == 0, res.stderr[-3000:]
        # the CPU run trains in fp32 from a bf16 base: said, with what keeps the base's dtype
        assert f"note: {LLADA} stores bfloat16; this run trains and saves float32 on cpu" in res.stdout
    base = {"typed": LLADA, "path": str(snap), "id": LLADA, "commit": COMMIT_A, "fingerprint": fingerprint(snap)}
    for name in ("a", "b"):
        info = json.loads((tmp_path / name / "save_info.json").read_text())
        assert info["provenance"]["base"] == base and info["provenance"]["model"] == base
        assert json.loads((tmp_path / name / "train_args.json").read_text())["provenance"] == info["provenance"]
    assert fingerprint(tmp_path / "a") != fingerprint(tmp_path / "b")
    # grpo.py from out/a on a data file: the base is still the hub commit; its start model and data are named
    data = tmp_path / "gsm8k.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"question": ["What is 2 + 3?", "What is 4 + 4?"],
                             "answer": ["2 + 3 = 5\n#### 5", "4 + 4 = 8\n#### 8"]}), data)
    res = script(["grpo.py", "--task", "gsm8k", "--data", str(data), "--model-dir", str(tmp_path / "a"),
                  "--out-dir", str(tmp_path / "rl"), "--preset", "tiny", "--num-examples", "2", "--prompts-per-step",
                  "1", "--groups-per-micro", "1", "--num-generations", "2", "--gen-length", "8", "--block-length",
                  "8", "--diffusion-steps", "2", "--rounds", "1", "--max-prompt-length", "48"], env)
    assert res.returncode == 0, res.stderr[-3000:]
    prov = json.loads((tmp_path / "rl" / "save_info.json").read_text())["provenance"]
    assert prov["base"] == base
    assert prov["model"]["path"] == str(tmp_path / "a") and prov["model"]["fingerprint"] == fingerprint(tmp_path / "a")
    assert prov["data"] == [{"typed": str(data), "path": str(data),
                             "sha256": hashlib.sha256(data.read_bytes()).hexdigest()}]
    # eval of out/a: its manifest keeps today's fields and names the hub commit at the chain's start
    ev = ["eval.py", "--model-dir", str(tmp_path / "a"), "--limit", "4", "--out-dir", str(tmp_path / "eval")]
    res = script(ev, env)
    assert res.returncode == 0, res.stderr[-3000:]
    (manifest,) = [json.loads(p.read_text()) for p in (tmp_path / "eval").glob("*/manifest.json")]
    assert manifest["model_revision"] is None and manifest["model_spec"] == str(tmp_path / "a")
    assert manifest["provenance"]["base"] == base
    assert manifest["model_fingerprint"]["weights"] == fingerprint(tmp_path / "a")
    # the other fine-tune of the same base into out/a's result dir, resumed or not: refused in one line that
    # advises its own --out-dir, never the --resume that would be refused next
    for resume in (["--resume"], []):
        res = script([*ev[:2], str(tmp_path / "b"), *ev[3:], *resume], env)
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1, res.stderr[-2000:]
        assert "holds results of other weights" in lines[0] and str(tmp_path / "b") in lines[0]
        assert "its own --out-dir" in lines[0] and "--resume continues" not in lines[0]
    assert script([*ev, "--resume"], env).returncode == 0  # the same weights resume
