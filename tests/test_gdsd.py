"""
Tests for GDSD (methods/gdsd.py): its loss against a hand computation in python floats, and its loss and
gradient against its released compute_loss (GaryBall/GDSD at 3fb6780, gdsd/trainers/gdsd_trainer_batchll.py)
on the same likelihoods; its masks against its forward_process under the same seed; its likelihood against
its released _compute_denoise_probs_from_masked_batch arithmetic on the same masks; Δ = 0 at the first inner
step; it runs through python -m methods.grpo. Tiny random models, CPU, seconds.

Run: python -m pytest tests/test_gdsd.py -q
"""
import math
import sys

import torch
import torch.nn.functional as F

from conftest import REPO, run, tiny_model, write_digit_model
from grpo import group_advantages
from methods import gdsd
from methods import grpo as field
from ops.metrics import read_metrics
from test_objectives import MASK, rollout_batch

GDSD = ["--objective", "gdsd", "--gen-length", "8", "--block-length", "4", "--diffusion-steps", "4"]


def test_gdsd_loss_matches_hand_computation():
    seq = [[-3.0, -2.5], [-1.0, -4.0], [-2.0, -2.2], [-5.0, -0.5]]  # (b 4, M 2)
    old = [[-3.1, -2.0], [-1.0, -4.4], [-2.3, -2.2], [-4.9, -0.6]]
    ref = [[-2.9, -2.6], [-1.5, -3.5], [-2.0, -2.0], [-5.2, -0.4]]
    rewards, N, psi, beta, low, high = [1.0, 0.0, 0.5, 2.0], 8, 10.0, 0.01, 0.2, 0.3
    G = 2
    adv = []
    for i, r in enumerate(rewards):  # leave-one-out within groups of 2
        group = rewards[i // G * G:i // G * G + G]
        adv.append(r - (sum(group) - r) / (G - 1))
    total, kl = 0.0, 0.0
    for i in range(4):
        for m in range(2):
            d = min(max(seq[i][m] - old[i][m], math.log(1 - low)), math.log(1 + high))
            total += (d / N - psi * adv[i]) ** 2
            kl += 0.5 * (seq[i][m] - ref[i][m]) ** 2
    expected = total / 4 + beta * kl / (4 * 2 * N)
    f64 = torch.float64  # python floats are doubles: compare in float64
    a = gdsd.leave_one_out(torch.tensor(rewards, dtype=f64), G)
    assert torch.allclose(a, torch.tensor(adv, dtype=f64))
    loss, st = gdsd.gdsd_loss(torch.tensor(seq, dtype=f64), torch.tensor(old, dtype=f64), torch.tensor(ref, dtype=f64),
                              a, N, psi, low, high, beta)
    assert abs(loss.item() - expected) < 1e-9
    assert abs(st["kl"] - kl / (4 * 2 * N)) < 1e-6


def test_the_rounds_advantage_times_g_over_g_minus_one_is_leave_one_out():
    r = torch.rand(24, generator=torch.Generator().manual_seed(1))
    for scale in (False, True):
        for G in (2, 3, 6):
            assert torch.allclose(group_advantages(r, G, scale) * (G / (G - 1)), gdsd.leave_one_out(r, G, scale),
                                  atol=1e-6)


def released_compute_loss(per_token_logps, old, ref, rewards, num_generations, logits_to_keep, psi, eps_low,
                          eps_high, beta, scale_rewards=False):
    """compute_loss and the advantages of _generate_and_score_completions, written here from that code:
    per_token_logps / old / ref [batch_size, num_mc, 1], leave_one_out = True."""
    rewards_grouped = rewards.view(-1, num_generations)
    sum_group = rewards_grouped.sum(dim=1, keepdim=True)
    baseline = (sum_group - rewards_grouped) / (num_generations - 1)
    advantages = (rewards_grouped - baseline).view(-1)
    std_grouped_rewards = rewards_grouped.std(dim=1, keepdim=True).repeat_interleave(num_generations, 1).view(-1)
    if scale_rewards:
        advantages = advantages / (std_grouped_rewards + 1e-4)
    batch_size, num_mc = per_token_logps.shape[:2]
    logits_diff = (per_token_logps - old).clamp(math.log(1 - eps_low), math.log(1 + eps_high))
    loss = ((logits_diff / logits_to_keep - psi * advantages.view(-1, 1, 1)) ** 2).sum() / batch_size
    if beta != 0.0:
        kl = (per_token_logps - ref) ** 2 / 2.0  # compute_approx_kl, "k2"
        loss += beta * kl.sum() / (batch_size * num_mc * logits_to_keep)
    return loss


def test_gdsd_loss_and_gradient_equal_its_released_code():
    g = torch.Generator().manual_seed(0)
    for scale in (False, True):
        seq = (-torch.rand(6, 3, generator=g) * 20).requires_grad_()
        old = seq.detach() + 0.3 * torch.randn(6, 3, generator=g)  # some log-ratios beyond the clamp
        ref = seq.detach() + 0.2 * torch.randn(6, 3, generator=g)
        rewards = torch.tensor([1.0, 0.0, 0.5, 2.0, 2.0, 0.0])
        theirs = released_compute_loss(seq[..., None], old[..., None], ref[..., None], rewards, 3, 16, 10.0, 0.1,
                                       0.2, 1e-3, scale)
        (g_theirs,) = torch.autograd.grad(theirs, seq)
        ours, st = gdsd.gdsd_loss(seq, old, ref, gdsd.leave_one_out(rewards, 3, scale), 16, 10.0, 0.1, 0.2, 1e-3)
        (g_ours,) = torch.autograd.grad(ours, seq)
        assert torch.allclose(ours, theirs, atol=1e-6) and torch.allclose(g_ours, g_theirs, atol=1e-6)
        assert 0 < st["clip_frac"] < 1
        # without the KL term, no gradient exactly where the clamp holds
        bare, _ = gdsd.gdsd_loss(seq, old, None, gdsd.leave_one_out(rewards, 3, scale), 16, 10.0, 0.1, 0.2, 0.0)
        (g_bare,) = torch.autograd.grad(bare, seq)
        held = ((seq - old) <= math.log(0.9)) | ((seq - old) >= math.log(1.2))
        assert held.any() and torch.all(g_bare[held] == 0) and torch.all(g_bare[~held] != 0)


def released_forward_process(batch, prompt_index, mask_id, seed):
    """forward_process, written here from that code; set_seed(seed) seeds torch's global CPU RNG."""
    torch.manual_seed(seed)
    b, l = batch.shape
    target_len = (l - prompt_index.sum()).item()
    k = torch.randint(0, target_len + 1, (), device=batch.device)
    x = torch.round(torch.linspace(float(k), k + (b - 1) * ((target_len + 1) / b), steps=b)).long()
    x = x % (target_len + 1)
    indices = torch.arange(target_len).repeat(b, 1)
    is_mask = indices < x.unsqueeze(1)
    for i in range(b):
        is_mask[i] = is_mask[i][torch.randperm(target_len)]
    is_mask = torch.cat((torch.zeros(b, prompt_index.sum(), dtype=torch.bool), is_mask), dim=1)
    return torch.where(is_mask, mask_id, batch), is_mask


def test_masks_are_its_forward_process():
    P, N, b = 3, 11, 6
    prompt_index = torch.arange(P + N) < P
    for seed in (0, 7, 4095):
        _, theirs = released_forward_process(torch.zeros(b, P + N, dtype=torch.long), prompt_index, MASK, seed)
        ours = gdsd.forward_masks(b, N, torch.Generator().manual_seed(seed))
        assert torch.equal(ours, theirs[:, P:]) and not theirs[:, :P].any()
        assert sorted(ours.sum(1).tolist()) != [0] * b  # counts spread over the rows


def test_likelihood_is_its_released_denoise_arithmetic():
    # _compute_denoise_probs_from_masked_batch with reduce_var=True on the same masks: CE where view 1 masks,
    # CE where the coupled view masks the rest, averaged, summed over the canvas
    model = tiny_model(10)
    g = torch.Generator().manual_seed(3)
    prompt, completion = torch.randint(0, 48, (4, 5), generator=g), torch.randint(0, 49, (4, 7), generator=g)
    with torch.no_grad():
        ours = gdsd.denoise_logprobs(model, prompt, completion, draws=2, generator=torch.Generator().manual_seed(9))
        gen = torch.Generator().manual_seed(9)
        theirs = []
        for _ in range(2):
            m1 = gdsd.forward_masks(4, 7, gen)
            expanded = torch.cat([prompt, completion], 1)
            perturbed = expanded.clone()
            perturbed[:, 5:] = torch.where(m1, MASK, completion)
            loss = torch.zeros(4, 7)
            logits = model(perturbed)[:, -7:].float()
            loss[m1] = F.cross_entropy(logits[m1], completion[m1], reduction="none")
            coupled = expanded.clone()
            coupled[:, 5:] = torch.where(m1, coupled[:, 5:], MASK)
            coupled_logits = model(coupled)[:, -7:].float()
            coupled_loss = torch.zeros_like(loss)
            coupled_loss[~m1] = F.cross_entropy(coupled_logits[~m1], completion[~m1], reduction="none")
            theirs.append(-((loss + coupled_loss) / 2).sum(-1))
    assert torch.allclose(ours, torch.stack(theirs, 1), atol=1e-5)


def test_the_log_ratio_is_zero_at_the_first_inner_step():
    model = tiny_model(10)
    b, r = rollout_batch(model, GDSD + ["--beta", "0.04", "--gdsd-draws", "2"])
    r.old_ref(model, None, torch.no_grad, [b], [3, 4], r.hp, torch.no_grad)
    assert b.old[0].shape == (4, 2) and len(b.ref) == 2
    model.eval()
    seq = r.obj.logprobs(model, b, field.grpo.mask_generator(3, b.index), r.hp, MASK)
    loss, st = r.obj.loss(seq, b, 0, r.hp)
    assert st["delta_mean"] == 0.0 and st["clip_frac"] == 0.0 and math.isfinite(loss.item())


def test_gdsd_runs_through_the_field_entry_point(tmp_path):
    model_dir = tmp_path / "tiny"
    write_digit_model(model_dir)
    out = tmp_path / "gdsd"
    run([sys.executable, "-m", "methods.grpo", "--objective", "gdsd", "--model-dir", str(model_dir),
         "--out-dir", str(out), "--num-examples", "8", "--prompts-per-step", "2", "--groups-per-micro", "1",
         "--num-generations", "3", "--num-iterations", "2", "--diffusion-steps", "4", "--rounds", "2",
         "--lr", "1e-2", "--beta", "0.01", "--epsilon", "0.2"], REPO)
    rows = read_metrics(str(out))
    assert [r["step"] for r in rows] == [1, 2] and all("delta_mean" in r for r in rows)
