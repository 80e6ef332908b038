"""
Tests for grpo.py's math (loss, advantages, masks) against hand computations, and the DDP
equivalence of a 2-process gloo run with 1 process on the same global batch.

Run: python -m pytest tests/test_grpo.py -q
"""
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grpo import completion_mask, grpo_loss, group_advantages, mask_generator, pad_left
from logprob import one_step_logprobs
from model import LLaDA, LLaDAConfig, add_lora, lora_disabled

REPO = Path(__file__).resolve().parents[1]


def test_completion_mask_keeps_up_to_and_including_first_eos():
    E = 9
    comp = torch.tensor([[1, 2, E, E, E], [1, E, 3, E, 4], [1, 2, 3, 4, 5], [E, E, 1, 2, 3]])
    expected = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]).float()
    assert torch.equal(completion_mask(comp, E), expected)


def test_group_advantages_hand_computed_and_zero_mean():
    r = torch.tensor([1.0, 0.0, 0.5, 2.0, 2.0, 2.0])
    adv = group_advantages(r, 3)
    torch.testing.assert_close(adv, torch.tensor([0.5, -0.5, 0.0, 0.0, 0.0, 0.0]))
    r = torch.randn(40)
    adv = group_advantages(r, 8)
    assert adv.view(5, 8).mean(1).abs().max() < 1e-6
    scaled = group_advantages(r, 8, scale_std=True)
    torch.testing.assert_close(scaled.view(5, 8).std(1), torch.ones(5) * (1 - 1e-3), atol=1e-3, rtol=0)


def hand_loss(logp, old, ref, adv, mask, eps, beta):
    """The diffu-GRPO objective written token by token with python floats (d1-spec §4.2)."""
    num, den, kl_sum = 0.0, 0.0, 0.0
    for i in range(len(logp)):
        for k in range(len(logp[0])):
            if mask[i][k] == 0:
                continue
            rho = math.exp(logp[i][k] - old[i][k])
            term = -min(rho * adv[i], min(max(rho, 1 - eps), 1 + eps) * adv[i])
            d = ref[i][k] - logp[i][k]
            kl = math.exp(d) - d - 1
            num += term + beta * kl
            kl_sum += kl
            den += 1
    return num / den, kl_sum / den


def test_grpo_loss_matches_hand_computation():
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(4, 6, generator=g) * 3
    old = logp + 0.6 * torch.randn(4, 6, generator=g)  # ratios well outside [0.5, 1.5] too
    ref = logp + 0.3 * torch.randn(4, 6, generator=g)
    adv = torch.tensor([1.0, -0.5, 0.25, -0.75])
    mask = torch.tensor([[1, 1, 1, 0, 0, 0], [1] * 6, [1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]]).float()
    for beta in (0.0, 0.04):
        loss, stats = grpo_loss(logp, old, ref, adv, mask, epsilon=0.5, beta=beta)
        expected, kl = hand_loss(logp.tolist(), old.tolist(), ref.tolist(), adv.tolist(), mask.tolist(), 0.5, beta)
        assert abs(loss.item() - expected) < 1e-5
        if beta:
            assert abs(stats["kl"] - kl) < 1e-5
    assert 0 < stats["clip_frac"] < 1


def test_zero_variance_group_gives_zero_gradient_and_sign_is_right():
    logp = (-torch.rand(6, 5)).requires_grad_()
    adv = group_advantages(torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 0.0]), 3)  # group 1: all equal
    loss, _ = grpo_loss(logp, logp.detach(), None, adv, torch.ones(6, 5), 0.5, 0.0)
    loss.backward()
    assert torch.all(logp.grad[:3] == 0)  # no signal from a group whose rewards are all equal
    # positive advantage: raising the token's log-prob lowers the loss (gradient is negative)
    assert torch.all(logp.grad[3] < 0) and torch.all(logp.grad[4:] > 0)


def tiny_model(seed=0):
    cfg = LLaDAConfig(d_model=32, n_heads=4, n_kv_heads=4, n_layers=2, mlp_hidden_size=64, vocab_size=50,
                      embedding_size=50, mask_token_id=49, eos_token_id=48, pad_token_id=48,
                      max_sequence_length=64, init_std=0.3)
    torch.manual_seed(seed)
    return LLaDA(cfg)


class Spy(torch.nn.Module):
    """Records every input the wrapped model sees."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config, self.seen = model, model.config, []

    def forward(self, ids, attention_mask=None):
        self.seen.append(ids.clone())
        return self.model(ids, attention_mask)


def test_ratio_is_one_at_theta_old_and_masks_identical_for_policy_old_ref():
    model = tiny_model()
    add_lora(model, r=4, alpha=8, dropout=0.0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.3)  # the adapted policy differs from the reference
    spy = Spy(model)
    prompt = torch.randint(0, 48, (4, 10))
    completion = torch.randint(0, 49, (4, 6))
    seed, micro = 1234, 3
    with torch.no_grad():
        old = one_step_logprobs(spy, prompt, completion, p_mask_prompt=0.5, generator=mask_generator(seed, micro))
        with lora_disabled(model):
            ref = one_step_logprobs(spy, prompt, completion, p_mask_prompt=0.5, generator=mask_generator(seed, micro))
    logp = one_step_logprobs(spy, prompt, completion, p_mask_prompt=0.5, generator=mask_generator(seed, micro))
    assert torch.equal(spy.seen[0], spy.seen[1]) and torch.equal(spy.seen[0], spy.seen[2])
    assert (spy.seen[0][:, :10] == 49).any()  # some prompt tokens really were masked
    assert torch.equal(logp.detach(), old)  # ratio exactly 1 at the first inner step
    assert (ref - old).abs().max() > 1e-3  # and the reference really is another model
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    loss, stats = grpo_loss(logp, old, ref, adv, torch.ones(4, 6), 0.5, 0.04)
    assert stats["clip_frac"] == 0.0
    loss.backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if "lora_A" in n)
    # another micro-batch index gives another mask
    other = one_step_logprobs(spy, prompt, completion, p_mask_prompt=0.5, generator=mask_generator(seed, micro + 1))
    assert not torch.equal(spy.seen[-1], spy.seen[0]) and other.shape == old.shape


def test_pad_left():
    assert pad_left([[1, 2], [3], [4, 5, 6]], 0).tolist() == [[0, 1, 2], [0, 0, 3], [4, 5, 6]]


def write_digit_model(path):
    """A tiny model whose LM head favours the digits 1-4, so toy rollouts get varied rewards and
    the update is not trivially zero."""
    from model import make_tiny
    make_tiny(path, d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)
    model = LLaDA.from_pretrained(path)
    with torch.no_grad():
        model.transformer.ff_out.weight[ord("1"):ord("5")] += torch.randn(4, 32)
    model.save_pretrained(path)


def run(cmd, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout


def torchrun(n):
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}"]


@pytest.mark.parametrize("lora", [False, True])
def test_ddp_two_processes_equal_one_process(tmp_path, lora):
    model_dir = tmp_path / "tiny"
    write_digit_model(model_dir)
    common = ["--model-dir", str(model_dir), "--task", "toy", "--num-examples", "32", "--rounds", "2", "--toy-blanks", "6,8",
              "--prompts-per-step", "4", "--groups-per-micro", "1", "--num-generations", "3",
              "--num-iterations", "2", "--gen-length", "16", "--block-length", "16", "--diffusion-steps", "4",
              "--beta", "0.04", "--lr", "1e-2", "--save-every", "100"]
    if lora:
        common += ["--lora-r", "4", "--lora-alpha", "8", "--lora-dropout", "0"]
    out1 = run([sys.executable, str(REPO / "grpo.py"), *common, "--out-dir", str(tmp_path / "one")], REPO)
    run(torchrun(2) + [str(REPO / "grpo.py"), *common, "--out-dir", str(tmp_path / "two")], REPO)
    start, one, two = (LLaDA.from_pretrained(p).state_dict() for p in (model_dir, tmp_path / "one", tmp_path / "two"))
    moved = max((one[k] - start[k]).abs().max().item() for k in one)
    assert moved > 1e-3, out1[-2000:]  # the run really trained
    for k in one:
        torch.testing.assert_close(one[k], two[k], atol=1e-5, rtol=1e-4)


def test_resume_continues_the_same_run(tmp_path):
    model_dir = tmp_path / "tiny"
    write_digit_model(model_dir)
    common = ["--model-dir", str(model_dir), "--num-examples", "16", "--prompts-per-step", "2", "--toy-blanks", "6,8",
              "--groups-per-micro", "2", "--num-generations", "3", "--num-iterations", "2", "--gen-length", "16",
              "--block-length", "16", "--diffusion-steps", "4", "--lr", "1e-2", "--save-every", "1",
              "--lora-r", "4", "--lora-alpha", "8", "--lora-dropout", "0", "--beta", "0.04"]
    grpo = [sys.executable, str(REPO / "grpo.py")]
    run(grpo + common + ["--rounds", "2", "--out-dir", str(tmp_path / "straight")], REPO)
    run(grpo + common + ["--rounds", "1", "--out-dir", str(tmp_path / "resumed")], REPO)
    out = run(grpo + common + ["--rounds", "2", "--resume", "--out-dir", str(tmp_path / "resumed")], REPO)
    assert "resumed from" in out and "round 2:" in out and "round 1:" not in out
    a, b = (LLaDA.from_pretrained(tmp_path / p).state_dict() for p in ("straight", "resumed"))
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=1e-5)
