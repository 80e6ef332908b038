"""
Tests for --fsdp (FSDP2 full fine-tuning) and --autocast in sft.py and grpo.py, on CPU with gloo:
two sharded processes end with the weights of one plain process on the same global batch, the
gathered checkpoint is exactly the official layout, a sharded GRPO run resumes on another world
size, autocast really computes in bf16, and --fsdp with LoRA is refused.

Run: python -m pytest tests/test_fsdp.py -q
"""
import json
import re
import subprocess
import sys

import pytest
import torch
from safetensors import safe_open

from conftest import REPO, run, tiny_model, torchrun, write_digit_model
from modelio.checkpoint import from_pretrained, make_tiny
from logprob import one_step_logprobs

BF16_EPS = torch.finfo(torch.bfloat16).eps  # 2^-7: bf16's spacing just above 1.0 (8 significant bits)


def official_keys(path):
    """Every tensor name in a checkpoint directory's shards, and the index's weight map."""
    index = json.loads((path / "model.safetensors.index.json").read_text())["weight_map"]
    found = set()
    for f in sorted(path.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as sf:
            found |= set(sf.keys())
    return found, set(index)


def max_diff(a, b):
    return max((a[k] - b[k]).abs().max().item() for k in a)


def test_sft_fsdp_two_processes_equal_plain_one_process(tmp_path):
    # 2 layers, so two blocks are sharded and gathered; the FSDP run also checkpoints inside its
    # sharded blocks, and evaluates twice (the best-eval save is decided on all ranks, gathered on all)
    model_dir = make_tiny(tmp_path / "tiny", d_model=32, n_heads=4, n_kv_heads=4, n_layers=2, mlp_hidden_size=64)
    common = ["--model-dir", str(model_dir), "--num-examples", "40", "--max-steps", "3", "--batch-size", "4",
              "--grad-accum", "2", "--max-length", "52", "--cut-labels", "--eval-every", "2", "--eval-fraction", "0.1",
              "--lr", "1e-2"]
    run([sys.executable, str(REPO / "sft.py"), *common, "--out-dir", str(tmp_path / "plain")], REPO)
    run(torchrun(2) + [str(REPO / "sft.py"), *common, "--fsdp", "--gradient-checkpointing",
                       "--out-dir", str(tmp_path / "fsdp")], REPO)
    # the gathered checkpoint is the official layout: same tensor names, index and config as a plain save
    plain_keys, plain_index = official_keys(tmp_path / "plain")
    fsdp_keys, fsdp_index = official_keys(tmp_path / "fsdp")
    assert fsdp_keys == plain_keys == fsdp_index == plain_index
    assert all(k.startswith("model.transformer.") for k in fsdp_keys)
    assert json.loads((tmp_path / "fsdp" / "config.json").read_text()) == \
        json.loads((tmp_path / "plain" / "config.json").read_text())  # fp32 on CPU, as the plain run
    # and it loads (strictly: any missing or extra key raises) with the plain run's weights
    start, plain, fsdp = (from_pretrained(p).state_dict()
                          for p in (model_dir, tmp_path / "plain", tmp_path / "fsdp"))
    assert max_diff(plain, start) > 1e-3  # it trained
    for k in plain:
        torch.testing.assert_close(fsdp[k], plain[k], atol=1e-5, rtol=1e-4)


def test_grpo_fsdp_with_reference_and_resume_across_world_sizes_equals_plain_run(tmp_path):
    # Plain: 2 rounds in one process. FSDP: round 1 on a 1-rank FSDP group (no torchrun), then
    # --resume for round 2 on 2 ranks with gradient checkpointing. Both FSDP phases shard the policy
    # AND the frozen reference (β > 0). Equal weights need the sharded update and reference passes,
    # and a save's trainer_state.pt (fp32 masters + AdamW state, broadcast from rank 0 and re-sharded on
    # resume) that does not depend on the world size. lr 1e-3: both rounds have groups with
    # reward variance, and the KL term stays O(1).
    model_dir = tmp_path / "tiny"
    write_digit_model(model_dir)
    common = ["--model-dir", str(model_dir), "--task", "toy", "--num-examples", "32", "--toy-blanks", "6,8",
              "--prompts-per-step", "4", "--groups-per-micro", "1", "--num-generations", "3",
              "--num-iterations", "2", "--gen-length", "16", "--block-length", "16", "--diffusion-steps", "4",
              "--beta", "0.04", "--lr", "1e-3", "--save-every", "1"]
    fsdp_dir = str(tmp_path / "fsdp")
    run([sys.executable, str(REPO / "grpo.py"), *common, "--rounds", "2", "--out-dir", str(tmp_path / "plain")], REPO)
    run([sys.executable, str(REPO / "grpo.py"), *common, "--fsdp", "--rounds", "1", "--out-dir", fsdp_dir], REPO)
    state = torch.load(tmp_path / "fsdp" / "saves" / "step-000001" / "trainer_state.pt", weights_only=False)
    assert state["fsdp"] and state["step"] == 1
    assert set(state["masters"]) == set(from_pretrained(model_dir).state_dict())  # full, unsharded
    out = run(torchrun(2) + [str(REPO / "grpo.py"), *common, "--fsdp", "--gradient-checkpointing", "--rounds", "2",
                             "--resume", "--out-dir", fsdp_dir], REPO)
    assert "resumed from" in out and "round 2:" in out and "round 1:" not in out
    start, plain, fsdp = (from_pretrained(p).state_dict() for p in (model_dir, tmp_path / "plain", fsdp_dir))
    assert max_diff(plain, start) > 1e-3, out[-2000:]  # it trained
    for k in plain:
        torch.testing.assert_close(fsdp[k], plain[k], atol=1e-5, rtol=1e-4)


def test_autocast_logprobs_are_bf16_close_but_not_identical():
    model = tiny_model(seed=3).eval()  # init std 0.3: logits of magnitude ~6, a non-trivial distribution
    g = torch.Generator().manual_seed(0)
    prompt, completion = torch.randint(0, 48, (8, 12), generator=g), torch.randint(0, 48, (8, 8), generator=g)

    def logp():
        return one_step_logprobs(model, prompt, completion, mask_id=49, p_mask_prompt=0.3,
                                 generator=torch.Generator().manual_seed(1))  # (8, 8)

    with torch.no_grad():
        fp32, fp32_again = logp(), logp()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = logp()
            logits = model(prompt)
    assert torch.equal(fp32, fp32_again)  # so any difference below comes from autocast alone
    assert logits.dtype == torch.bfloat16 and next(model.parameters()).dtype == torch.float32
    diff = (bf16 - fp32).abs()
    # Scale: logits in [4, 8) are bf16 numbers 4 * eps = 0.031 apart, so rounding the logits alone
    # moves a log-prob by up to ~0.016 each way; the 2 blocks' matmuls add their own roundings.
    # Measured on this input: mean |diff| 0.022, max 0.096; over model seeds 0-9: mean
    # 0.012-0.031, max 0.035-0.155, against log-probs that spread with a std of ~1.5-2.
    assert diff.mean() > 1e-3  # not bit-identical: autocast really ran the matmuls in bf16
    assert diff.mean() < 8 * BF16_EPS and diff.max() < 0.4  # close: 2x / 2.6x the worst seed


def test_sft_fsdp_autocast_one_process_trains(tmp_path):
    # a 1-rank FSDP group (no torchrun) with bf16 autocast over the fp32 shards: the loss goes down,
    # the saved weights moved and are finite
    model_dir = make_tiny(tmp_path / "tiny", d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)
    out = run([sys.executable, str(REPO / "sft.py"), "--model-dir", str(model_dir), "--num-examples", "40",
               "--max-steps", "4", "--batch-size", "8", "--max-length", "52", "--cut-labels", "--eval-every", "1",
               "--eval-fraction", "0.2", "--lr", "1e-2", "--warmup-steps", "1", "--fsdp", "--autocast",
               "--out-dir", str(tmp_path / "out")], REPO)
    evals = [float(v) for v in re.findall(r"eval loss ([0-9.]+),", out)]  # fixed noise: comparable
    assert len(evals) == 4 and evals[-1] < evals[0], out[-2000:]
    start, trained = (from_pretrained(p).state_dict() for p in (model_dir, tmp_path / "out"))
    assert all(torch.isfinite(v).all() for v in trained.values())
    assert max_diff(trained, start) > 1e-3


@pytest.mark.parametrize("script", ["sft.py", "grpo.py"])
def test_fsdp_with_lora_is_refused(script):
    res = subprocess.run([sys.executable, str(REPO / script), "--fsdp", "--lora-r", "8"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    # refused up front (checks.upfront): one line, exit 2, no traceback
    assert res.returncode == 2 and res.stderr.startswith(f"{script}: error: --fsdp is full fine-tuning"), res.stderr[-2000:]
    assert "Traceback" not in res.stderr
