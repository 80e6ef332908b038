"""bench.py: the counted model calls of one diffu-GRPO round equal the analytic cost model."""
import runpy
import sys
from pathlib import Path

import pytest
import torch

from bench import analytic_passes, bench
from model import LLaDA, LLaDAConfig

BENCH = str(Path(__file__).resolve().parents[1] / "bench.py")


def micro_model():
    """d_model 32, 1 layer, vocab 64 (EOS 62, mask 63): a round costs milliseconds."""
    torch.manual_seed(0)
    return LLaDA(LLaDAConfig(d_model=32, n_heads=2, n_kv_heads=2, n_layers=1, mlp_hidden_size=64,
                             vocab_size=64, embedding_size=64, eos_token_id=62, pad_token_id=62,
                             mask_token_id=63, max_sequence_length=64))


def test_analytic_passes_table():
    assert analytic_passes(128, 12, 0.04) == dict(rollout_fwd=128, old_fwd=12, ref_fwd=12, policy_fwd=12, policy_bwd=12)
    assert analytic_passes(8, 2, 0.0) == dict(rollout_fwd=8, old_fwd=2, ref_fwd=0, policy_fwd=2, policy_bwd=2)
    assert analytic_passes(4, 1, 0.1)["ref_fwd"] == 1


# full fine-tuning (reference = frozen copy) over the β × μ grid; one LoRA case (reference = adapters
# off, same module, so its forwards must not be counted as old or policy passes)
@pytest.mark.parametrize("beta,mu,lora_r", [(0.0, 1, 0), (0.04, 1, 0), (0.0, 3, 0), (0.04, 3, 0), (0.04, 2, 4)])
def test_counted_passes_equal_analytic(beta, mu, lora_r):
    res = bench(micro_model(), batch_size=2, prompt_len=4, gen_length=4, block_length=2, steps=2,
                num_iterations=mu, beta=beta, lora_r=lora_r, repeats=1)
    assert res["passes"] == analytic_passes(2, mu, beta) == res["analytic"]
    assert res["sampler_tokens_per_s"] > 0 and res["forward_passes_per_sample"] == 2


def run_cli(monkeypatch, *argv):
    monkeypatch.setattr(sys, "argv", ["bench.py", *argv])
    runpy.run_path(BENCH, run_name="__main__")


def test_cli_tiny_prints_table(monkeypatch, capsys, tmp_path):
    # the tiny preset with small overrides, to stay fast on 2 cores
    run_cli(monkeypatch, "--preset", "tiny", "--device", "cpu", "--prompt-len", "8", "--gen-length", "4",
            "--block-length", "4", "--steps", "2", "--num-iterations", "1", "--batch-size", "2",
            "--json", str(tmp_path / "b.json"))
    out = capsys.readouterr().out
    assert "tokens/s" in out and "passes" in out and "cpu (" in out and "MISMATCH" not in out
    assert (tmp_path / "b.json").exists()


def test_cli_8b_refuses_cpu(monkeypatch):
    with pytest.raises(SystemExit) as e:
        run_cli(monkeypatch, "--preset", "8b", "--device", "cpu")
    assert "GPU" in str(e.value.code)
