"""
Tests for the objectives beside d1's (methods/): each loss against a hand computation in python
floats, each likelihood against an independent one (a plain loop over positions or steps, the sampler's
own record, exact enumeration through lab/exact.py), ρ = 1 at the first inner step, and each memory-
flat policy pass against the one-forward gradient. Tiny random models, CPU, seconds.

Run: python -m pytest tests/test_objectives.py -q
"""
import math
from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch

import grpo
from conftest import tiny_model
from grpo import MicroBatch, completion_mask, group_advantages, policy_step
from lab.exact import conditional_table, exact_elbo, exact_eubo, exact_logprob
from logprob import noisy_prompt, one_step_logprobs
from methods import espo, justgrpo, spg, trajectory
from methods import grpo as field
from methods.wd1 import wd1_loss
from methods.sampling import generate

MASK = 49  # tiny_model's mask id (EOS 48)


def rollout_batch(model, flags, b=4, P=5, seed=0):
    """A micro-batch sampled as the field's entry point samples it (methods/grpo.py), under `flags`, with the
    sampler's record and random rewards' advantages. -> (MicroBatch, the round: .args, .hp, .obj, .old_ref,
    .micro)."""
    args = field.parse_args(["--num-generations", "2", *flags])
    obj = field.objective_of(args)
    hp = field.hyper(args, obj)
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, 48, (b // 2, P), generator=g).repeat_interleave(2, 0)  # (b, P): groups of 2
    completion, record = field.rollout_of(args, obj)(model, prompt, g, nullcontext, hp)  # (b, N)
    adv = group_advantages(torch.tensor([1.0, 0.0, 0.5, 2.0])[:b], 2, args.scale_std)
    batch = MicroBatch(0, [], prompt, completion, completion_mask(completion, 48), record=record, adv=adv)
    return batch, SimpleNamespace(args=args, hp=hp, obj=obj, old_ref=field.old_ref_of(obj),
                                  micro=field.micro_of(obj))


def flat_grad(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


# -----------------------------------------------------------------------------
# wd1


def test_wd1_loss_matches_hand_computation():
    # wd1 (arXiv 2507.08838): per group, -Σ softmax(A)_i ℓ_i + Σ softmax(-A)_i ℓ_i with ℓ_i the completion's summed
    # token log-probs; a mean over the groups of the micro-batch. Written out with python floats
    g = torch.Generator().manual_seed(1)
    logp = (-torch.rand(6, 5, generator=g) * 2).requires_grad_()
    mask = torch.tensor([[1, 1, 1, 0, 0], [1] * 5, [1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1] * 5, [1, 1, 1, 1, 0]]).float()
    adv = torch.tensor([0.5, -1.0, 0.5, 2.0, -1.0, -1.0])
    loss, stats = wd1_loss(logp, adv, mask, 3)
    ell = [sum(l * m for l, m in zip(lr, mr)) for lr, mr in zip(logp.tolist(), mask.tolist())]
    expected = 0.0
    for grp in (range(0, 3), range(3, 6)):
        pos = [math.exp(adv[i].item()) for i in grp]
        neg = [math.exp(-adv[i].item()) for i in grp]
        expected += sum((neg[k] / sum(neg) - pos[k] / sum(pos)) * ell[i] for k, i in enumerate(grp)) / 2
    assert abs(loss.item() - expected) < 1e-5 and abs(stats["seq_logp"] - sum(ell) / 6) < 1e-5
    loss.backward()
    # the best completion of each group is pushed up (negative gradient), the worst down; masked tokens get none
    assert torch.all(logp.grad[3][:2] < 0) and torch.all(logp.grad[4][:5] > 0)
    assert torch.all(logp.grad[mask == 0] == 0)
    # a group of equal rewards: the two softmaxes are equal and the loss has no gradient
    flat = logp.detach().requires_grad_()
    wd1_loss(flat, torch.zeros(6), mask, 3)[0].backward()
    assert torch.all(flat.grad == 0)


# -----------------------------------------------------------------------------
# JustGRPO

AR = ["--objective", "justgrpo", "--gen-length", "6", "--block-length", "1", "--diffusion-steps", "6",
      "--temperature", "1.0", "--scale-std", "--epsilon", "0.2"]


def test_ar_likelihood_is_the_brute_force_product_of_left_to_right_conditionals():
    model = tiny_model(3).eval()
    g = torch.Generator().manual_seed(0)
    prompt, completion = torch.randint(0, 48, (3, 4), generator=g), torch.randint(0, 48, (3, 6), generator=g)
    with torch.no_grad():
        lp = justgrpo.ar_logprobs(model, prompt, completion)  # (3, 6)
        for i in range(3):
            total = 0.0
            for t in range(6):  # one full forward per position, the canvas [q | o_<t | M ...], its whole logits
                x = torch.cat([prompt[i], completion[i, :t], torch.full((6 - t,), MASK)])[None]
                p = torch.softmax(model(x)[0, 4 + t].double(), -1)[completion[i, t]].item()
                assert abs(lp[i, t].item() - math.log(p)) < 1e-5
                total += math.log(p)
            assert abs(lp[i].sum().item() - total) < 1e-4
        # a subset of positions reads the same numbers
        assert torch.allclose(justgrpo.ar_logprobs(model, prompt, completion, [4, 1]), lp[:, [4, 1]], atol=1e-6)


def test_the_sampler_records_the_ar_likelihood_so_rho_is_one_at_the_first_step():
    model = tiny_model(4)
    b, r = rollout_batch(model, AR)
    with torch.no_grad():
        recomputed = justgrpo.ar_logprobs(model.eval(), b.prompt, b.completion)
    assert torch.allclose(b.record["token_logp"], recomputed, atol=1e-5)
    assert torch.equal(b.record["commit_step"], torch.arange(6).expand(4, 6))  # position t written at step t
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    st = policy_step(model, [b], 0, 5, opt, list(model.parameters()), r.hp, nullcontext, MASK, accum=1,
                     micro=r.micro)
    assert abs(st["ratio_mean"] - 1) < 1e-5 and st["ratio_dev"] < 1e-5 and st["clip_frac"] == 0.0


def test_justgrpo_loss_matches_hand_computation():
    logp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -0.1, -2.5], [-1.2, -0.7, -0.9]])
    old = torch.tensor([[-1.1, -1.0, -0.5], [-0.3, -0.4, -2.0], [-1.0, -0.7, -1.9]])
    adv = torch.tensor([1.5, -0.5, 0.0])
    loss, st = justgrpo.justgrpo_loss(logp, old, adv, 0.2)
    total = 0.0
    for i in range(3):
        for t in range(3):
            r = math.exp(logp[i, t].item() - old[i, t].item())
            a = adv[i].item()
            total += -min(r * a, min(max(r, 0.8), 1.2) * a)
    assert abs(loss.item() - total / (3 * (2 + 1e-5))) < 1e-6  # N = 3 positions, V̄ = 2 completions with A != 0
    # additive over chunks of positions: the parts sum to the whole
    parts = [justgrpo.justgrpo_loss(logp[:, c], old, adv, 0.2, c)[0].item() for c in ([0, 1], [2])]
    assert abs(sum(parts) - loss.item()) < 1e-6


def released_justgrpo_loss(token_logps, advantages, valid_per_rank, gen_length, eps=0.2):
    """JustGRPO's loss as its released code computes it (LeapLabTHU/JustGRPO at eebe50e, grpo.py
    logprob_loss, called by train.py with gain 1.0), written here from that code: per position t, the
    ratio exp(logp - logp.detach()) (their θ_old is the detached current policy, μ = 1), -min(ρA, clip(ρ)A)
    summed over the batch and scaled by gain / gen_length / (V̄ + 1e-5), V̄ the ranks' mean count of nonzero
    advantages (accelerator.gather(...).mean()); the positions' backwards add up, so their sum is the loss."""
    scale = 1.0 / gen_length / (torch.tensor(valid_per_rank, dtype=torch.float).mean().item() + 1e-5)
    total = 0.0
    for t in range(gen_length):
        lp = token_logps[:, t]
        ratio = (lp - lp.detach()).exp()
        total = total + (-torch.min(ratio * advantages, ratio.clamp(1 - eps, 1 + eps) * advantages)).mul(scale).sum()
    return total


def test_justgrpo_loss_equals_its_released_code():
    # docs/objectives.md: at their μ = 1 (θ_old = the current policy, detached) the loss and its gradient agree; on one rank
    # and with V̄ averaged over 2 ranks (ours passes the gathered mean as `valid`)
    g = torch.Generator().manual_seed(13)
    lp = (-torch.rand(6, 8, generator=g) * 3).requires_grad_()
    adv = torch.tensor([1.2, -0.6, 0.0, 0.0, 0.9, -0.5])  # 4 of 6 nonzero; not summing to 0, so the loss is not 0
    for ranks in ([4], [4, 1]):
        valid = torch.tensor(sum(ranks) / len(ranks))
        ours, _ = justgrpo.justgrpo_loss(lp, lp.detach(), adv, 0.2, valid=valid)
        theirs = released_justgrpo_loss(lp, adv, ranks, 8)
        assert abs(ours.item() - theirs.item()) < 1e-6
        assert torch.allclose(*(torch.autograd.grad(x, lp)[0] for x in (ours, theirs)), atol=1e-7)


@pytest.mark.parametrize("chunk", [1, 4, 6])
def test_justgrpo_chunked_pass_has_the_one_forward_gradient(chunk):
    model = tiny_model(5)
    b, r = rollout_batch(model, AR + ["--ar-chunk", str(chunk)])
    model.train()
    loss, _ = justgrpo.OBJECTIVE.loss(justgrpo.ar_logprobs(model, b.prompt, b.completion), b, 0, r.hp)
    loss.backward()
    whole = flat_grad(model)
    model.zero_grad()
    st = justgrpo.policy_pass(model, b, 0, None, r.hp, MASK, 1, nullcontext)
    assert torch.allclose(flat_grad(model), whole, atol=1e-6) and abs(st["loss"] - loss.item()) < 1e-6
    # docs/objectives.md: their micro-batches' gradients add up (train.py's accumulation), so `accum` divides nothing
    model.zero_grad()
    justgrpo.policy_pass(model, b, 0, None, r.hp, MASK, 8, nullcontext)
    assert torch.allclose(flat_grad(model), whole, atol=1e-6)


def test_justgrpo_presets_their_optimizer():
    args = field.parse_args(["--preset", "justgrpo"])
    assert (args.adam_beta2, args.grad_clip) == (0.999, 1.0)  # AdamW (0.9, 0.999), max norm 1.0 on the sum
    assert field.parse_args([]).adam_beta2 == 0.99  # d1's


def test_justgrpo_refuses_a_sampler_that_is_not_left_to_right():
    with pytest.raises(ValueError, match="--block-length 1 --diffusion-steps 16"):
        justgrpo.check(field.parse_args(["--objective", "justgrpo"]))
    with pytest.raises(ValueError, match="no KL term"):
        justgrpo.check(field.parse_args(AR + ["--beta", "0.04"]))
    justgrpo.check(field.parse_args(["--preset", "justgrpo"]))  # the paper's own settings pass


# -----------------------------------------------------------------------------
# SPG


def test_spg_bounds_and_loss_match_hand_computation():
    # 2 sequences, m = 2 views, N = 4, lengths 4 and 3 (the second's last position is after its EOS)
    lp = torch.tensor([[[-1.0, -2.0, -0.5, -1.5], [-0.8, -1.9, -0.6, -1.4]],
                       [[-0.2, -0.3, -0.4, -9.0], [-0.25, -0.35, -0.45, -9.0]]])
    scored = torch.tensor([[[1, 1, 0, 0], [0, 1, 1, 1]], [[1, 0, 0, 0], [1, 1, 1, 0]]], dtype=torch.bool)
    lengths, beta = torch.tensor([4, 3]), 1.5
    elbo, eubo = spg.bounds(lp, scored, lengths, beta)
    for i in range(2):
        L = lengths[i].item()
        t = [scored[i, j].sum().item() / L for j in range(2)]
        e = sum(sum(lp[i, j, k].item() for k in range(4) if scored[i, j, k]) / t[j] for j in range(2)) / 2
        assert abs(elbo[i].item() - e) < 1e-5
        logs = []
        for k in range(4):
            a = sum(math.exp(beta * lp[i, j, k].item()) / t[j] for j in range(2) if scored[i, j, k]) / 2
            if a > 0:
                logs.append(math.log(a) / beta)
        assert abs(eubo[i].item() - L * sum(logs) / len(logs)) < 1e-5
    adv = torch.tensor([0.7, -0.7])
    loss, _ = spg.spg_loss(lp, scored, lengths, adv, beta, 0.5)
    ell = [elbo[0].item(), 0.5 * eubo[1].item() + 0.5 * elbo[1].item()]  # ELBO for A > 0, the mixture for A < 0
    assert abs(loss.item() - (-(0.7 * ell[0] - 0.7 * ell[1]) / 7)) < 1e-5


def test_spg_block_views_follow_the_semi_ar_blocks():
    g = torch.Generator().manual_seed(0)
    prompt, completion = torch.randint(0, 48, (3, 5), generator=g), torch.randint(0, 48, (3, 12), generator=g)
    lengths = torch.tensor([12, 7, 2])
    for _ in range(20):
        x, scored = spg.block_views(prompt, completion, lengths, 4, 2, 0.0, MASK, g)  # no light perturbation
        for i, L in enumerate(lengths.tolist()):
            for j in range(2):
                m = x[i, j, 5:] == MASK
                assert not (x[i, j, :5] == MASK).any()  # p_mask 0: the prompt untouched
                first = int(m.nonzero()[0])  # the chosen block: clean before it, k >= 1 of it masked
                start = first // 4 * 4
                assert not m[:start].any() and start < L
                end = min(start + 4, L)  # the block's completion tokens; everything after them is masked
                assert m[end:].all() and 1 <= m[start:end].sum() <= end - start
                assert torch.equal(scored[i, j], m & (torch.arange(12) < L))  # after the EOS: masked, never scored
    # with p_mask 0.15 the visible positions (prompt and clean blocks) are masked at that rate, and scored
    x, scored = spg.block_views(prompt.repeat(200, 1), completion.repeat(200, 1), torch.full((600,), 12), 4, 2, 0.15,
                                MASK, g)
    rate = (x[:, :, :5] == MASK).float().mean().item()
    assert abs(rate - 0.15) < 0.02


def released_diffu_grpo_loss(per_token_logps, old, ref, advantages, completion_mask, epsilon, beta):
    """d1's diffu-GRPO loss as its trainer computes it (its compute_loss; read in the copy
    kuleshov-group/d2 keeps of d1's trainer, diffu-grpo/diffu_grpo_trainer.py), written here from that code:
    coef_1 = exp(logp - old), coef_2 its clamp, -min(coef_1 A, coef_2 A) + β k3 per token, summed over the
    completion mask and divided by its total."""
    coef_1 = torch.exp(per_token_logps - old)
    coef_2 = torch.clamp(coef_1, 1 - epsilon, 1 + epsilon)
    per_token = -torch.min(coef_1 * advantages[:, None], coef_2 * advantages[:, None])
    if beta:
        per_token = per_token + beta * (torch.exp(ref - per_token_logps) - (ref - per_token_logps) - 1)
    return (per_token * completion_mask).sum() / completion_mask.sum()


def test_diffu_grpo_loss_equals_d1s_released_code():
    g = torch.Generator().manual_seed(9)
    for beta in (0.0, 0.04):
        lp = (-torch.rand(6, 10, generator=g) * 4).requires_grad_()
        old = lp.detach() + torch.randn(6, 10, generator=g) * 0.6  # ratios inside and outside [0.5, 1.5]
        ref = lp.detach() + torch.randn(6, 10, generator=g) * 0.3
        mask = (torch.arange(10)[None] < torch.randint(1, 11, (6, 1), generator=g)).float()
        adv = torch.randn(6, generator=g)
        ours, _ = grpo.grpo_loss(lp, old, ref, adv, mask, 0.5, beta)
        theirs = released_diffu_grpo_loss(lp, old, ref, adv, mask, 0.5, beta)
        assert abs(ours.item() - theirs.item()) < 1e-6
        assert torch.allclose(*(torch.autograd.grad(x, lp)[0] for x in (ours, theirs)), atol=1e-7)


def released_wd1_loss(per_token_logps, completion_mask, advantages):
    """wd1's loss as its released code computes it (xiaohangt/wd1 wd1/trainers/rev_grpo_trainer.py compute_loss), written
    here from that code for one micro-batch (one group in their runs): the completions' summed log-probs
    weighted by softmax(A) raised, by softmax(-A) lowered."""
    seq = (per_token_logps * completion_mask).sum(-1)
    return -(seq * torch.softmax(advantages, dim=0)).sum() + (seq * torch.softmax(-advantages, dim=0)).sum()


def test_wd1_loss_equals_its_released_code():
    # docs/objectives.md: one group of G = 6, then two groups in one micro-batch (theirs: one group per micro-batch, so
    # ours is their loss per group, averaged over the micro-batch's groups)
    g = torch.Generator().manual_seed(5)
    lp = (-torch.rand(12, 10, generator=g) * 4).requires_grad_()
    mask = (torch.arange(10)[None] < torch.randint(1, 11, (12, 1), generator=g)).float()
    adv = torch.randn(12, generator=g)
    ours, _ = wd1_loss(lp[:6], adv[:6], mask[:6], 6)
    theirs = released_wd1_loss(lp[:6], mask[:6], adv[:6])
    assert abs(ours.item() - theirs.item()) < 1e-5
    assert torch.allclose(*(torch.autograd.grad(x, lp)[0] for x in (ours, theirs)), atol=1e-6)
    both, _ = wd1_loss(lp, adv, mask, 6)
    halves = (released_wd1_loss(lp[:6], mask[:6], adv[:6]) + released_wd1_loss(lp[6:], mask[6:], adv[6:])) / 2
    assert abs(both.item() - halves.item()) < 1e-5


def released_spg_loss(per_token_logps, perturb, completion_mask, advantages, beta, omega):
    """SPG's loss as its released code computes it (facebookresearch/SPG spg/spg_trainer.py: _get_per_seq_logps with
    logp_estimation "mix", then compute_loss), written here from that code for one inner step: per view the
    mean log-prob of its masked completion tokens, averaged over views (A > 0); for A <= 0, ω times the mean
    over covered tokens of (1/β) log of the views' mean of p^β / t (t: the view's masked share, zero where
    the view keeps the token) plus (1 - ω) times the former; the loss -A * that * L summed over the batch, / Σ L.
    per_token_logps (b, m, N), perturb (b, m, N) bool, completion_mask (b, N), advantages (b,)."""
    b, m, n = per_token_logps.shape
    cm = completion_mask[:, None, :].expand(b, m, n).float()  # (b, m, N)
    pm = perturb.float()
    per_view = (per_token_logps * cm * pm).sum(-1) / (cm * pm).sum(-1)  # (b, m)
    positive = per_view.mean(1)  # (b,)
    t = (cm * pm).sum(-1) / cm.sum(-1)  # (b, m) the empirical t
    avg_p = (per_token_logps.exp() ** beta * pm * cm / t[..., None]).mean(1)  # (b, N): zeros where no view masks
    covered = avg_p > 0
    logs = torch.where(covered, avg_p, torch.ones_like(avg_p)).log()
    eubo = (logs * covered).sum(-1) / covered.sum(-1) / beta  # (b,)
    negative = omega * eubo + (1 - omega) * positive
    per_seq = torch.where(advantages > 0, positive, negative)
    length = completion_mask.sum(-1).float()
    return (-advantages * per_seq * length).sum() / length.sum()


def test_spg_loss_equals_its_released_code():
    # docs/objectives.md: the same masks and log-probs through the released code's arithmetic and through spg_loss: the
    # loss and its gradient with respect to every log-prob agree (our bounds carry L inside, theirs outside)
    g = torch.Generator().manual_seed(7)
    b, m, n = 6, 2, 12
    lengths = torch.tensor([12, 9, 4, 12, 1, 7])
    cm = (torch.arange(n)[None] < lengths[:, None]).float()  # (b, N) up to and including the first EOS
    perturb = torch.rand(b, m, n, generator=g) < 0.5
    perturb[..., 0] = True  # every view masks at least one completion token
    adv = torch.tensor([0.8, -0.4, 0.0, -0.4, 0.5, -0.5])
    for beta, omega in ((1.5, 0.5), (1.0, 1.0), (2.0, 0.0)):
        lp = (-torch.rand(b, m, n, generator=g) * 3).requires_grad_()
        ours, _ = spg.spg_loss(lp, perturb & cm.bool()[:, None, :], lengths, adv, beta, omega)
        (g_ours,) = torch.autograd.grad(ours, lp)
        theirs = released_spg_loss(lp, perturb, cm, adv, beta, omega)
        (g_theirs,) = torch.autograd.grad(theirs, lp)
        assert abs(ours.item() - theirs.item()) < 1e-5
        assert torch.allclose(g_ours, g_theirs, atol=1e-6)


def released_espo_loss(seq, old, ref, advantages, n_canvas, epsilon, beta):
    """ESPO's loss as its released code computes it (ML-GSAI/ESPO espo/espo_trainer.py compute_loss), written here
    from that code: coef_1 = exp((S - S_old) / logits_to_keep), coef_2 its clamp to [1 - ε, 1 + ε], the loss
    -Σ min(coef_1 A, coef_2 A) / batch_size, plus β Σ ½ (S - S_ref)² / (batch_size · logits_to_keep)."""
    coef_1 = torch.exp((seq - old) / n_canvas)
    coef_2 = torch.clamp(coef_1, 1 - epsilon, 1 + epsilon)
    loss = -torch.min(coef_1 * advantages, coef_2 * advantages).sum() / seq.shape[0]
    return loss + beta * ((seq - ref) ** 2 / 2).sum() / (seq.shape[0] * n_canvas)


def test_espo_loss_equals_its_released_code():
    # docs/objectives.md: the same sequence ELBOs through the released code's arithmetic and through espo_loss, ratios
    # inside and outside the clip range, both signs of A: the loss and its gradient agree
    g = torch.Generator().manual_seed(11)
    for beta in (0.0, 1e-3, 0.5):
        seq = (torch.randn(8, generator=g) * 20 - 60).requires_grad_()
        old = seq.detach() + torch.randn(8, generator=g) * 8  # ratios up to ~exp(8 / 16): some clipped
        ref = seq.detach() + torch.randn(8, generator=g) * 5
        adv = torch.randn(8, generator=g)
        ours, _ = espo.espo_loss(seq, old, ref, adv, 16, 0.2, beta)
        (g_ours,) = torch.autograd.grad(ours, seq)
        theirs = released_espo_loss(seq, old, ref, adv, 16, 0.2, beta)
        (g_theirs,) = torch.autograd.grad(theirs, seq)
        assert abs(ours.item() - theirs.item()) < 1e-6 and torch.allclose(g_ours, g_theirs, atol=1e-7)


def test_spg_light_masks_fall_only_before_the_chosen_block():
    # docs/objectives.md: SPG's forward process lightly masks the prompt and the clean blocks, never the chosen block's
    # visible tokens. The draws are the same at any p_mask (the light mask is drawn whole), so from the chosen
    # block on a view at p 0.9 must equal the view at p 0, and before it only light masks may differ
    prompt, completion = torch.randint(0, 48, (50, 5)), torch.randint(0, 48, (50, 12))
    lengths = torch.randint(1, 13, (50,))
    x0, _ = spg.block_views(prompt, completion, lengths, 4, 2, 0.0, MASK, torch.Generator().manual_seed(3))
    x9, _ = spg.block_views(prompt, completion, lengths, 4, 2, 0.9, MASK, torch.Generator().manual_seed(3))
    for i in range(50):
        for j in range(2):
            start = int((x0[i, j, 5:] == MASK).nonzero()[0]) // 4 * 4  # the chosen block's first position
            assert torch.equal(x9[i, j, 5 + start:], x0[i, j, 5 + start:])
    # the count of masked, scored tokens a view against its exact expectation: L 12, block 4, p 0.5. The chosen
    # block is uniform over the 3 (start s = 0, 4, 8), k ~ U{1..4} of it (mean 2.5), the 8 - s after it, and
    # Binomial(s, 0.5) of the clean ones: 2.5 + 4 + 0.5 * 4 = 8.5 (the old light masks on the chosen block's
    # 4 - k visible tokens added 0.75: 9.25). 4,000 views: standard error ~0.05
    n = 2000
    _, scored = spg.block_views(torch.zeros(n, 5, dtype=torch.long), torch.ones(n, 12, dtype=torch.long),
                                torch.full((n,), 12), 4, 2, 0.5, MASK, torch.Generator().manual_seed(4))
    assert abs(scored.sum(-1).float().mean().item() - 8.5) < 0.25


@pytest.mark.parametrize("scale", [1.0, 5.0, 20.0])
def test_spg_exact_bounds_sandwich_the_elbo_side(scale):
    # with every mask enumerated (lab/exact.py): ELBO <= log p (Jensen), and the EUBO, a power mean of order β of each
    # token's conditionals, lies above the ELBO and rises with β; on models whose conditionals depend on the context
    model = tiny_model(6)
    with torch.no_grad():
        model.transformer.ff_out.weight *= scale
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        q, o = torch.randint(0, 48, (4,), generator=g), torch.randint(0, 48, (6,), generator=g)
        with torch.no_grad():
            table = conditional_table(model, q, o)
        logp, elbo = exact_logprob(table).item(), exact_elbo(table).item()
        eubo = [exact_eubo(table, beta).item() for beta in (1.0, 1.5, 2.0)]
        assert elbo <= logp + 1e-9 and elbo <= eubo[0] <= eubo[1] <= eubo[2]


def test_the_practical_eubo_is_not_an_upper_bound():
    # The paper's EUBO >= log p (β >= 1) needs its θ-free constant C(T); the EUBO it trains with drops it. Two tokens,
    # each certain given the other but one of them unlikely alone: p(o) = (p(o1) p(o2|o1) + p(o2) p(o1|o2)) / 2
    # = (1 · 1 + 0.01 · 0.01) / 2 ≈ 0.5, while EUBO(1) = log((1 + 0.01)/2) + log((0.01 + 1)/2) = log 0.255
    table = torch.zeros(4, 2, dtype=torch.float64)  # rows: the masked set as a bitmask, ∅, {0}, {1}, {0, 1}
    table[1, 0] = math.log(0.01)  # token 0 with token 1 visible
    table[2, 1] = math.log(1.0)  # token 1 with token 0 visible
    table[3, 0], table[3, 1] = math.log(1.0), math.log(0.01)  # both masked
    assert exact_eubo(table, 1.0).item() < exact_logprob(table).item() - 0.6  # -1.37 < -0.69


# -----------------------------------------------------------------------------
# ESPO


def test_espo_coupled_elbo_is_unbiased_for_the_exact_elbo():
    # each draw is a complementary pair: every token scored once, weights (N+1)/x and (N+1)/(N-x); averaged over
    # draws the estimate is the exact ELBO (lab/exact.py), within 4 standard errors
    model = tiny_model(7).eval()
    g = torch.Generator().manual_seed(2)
    q, o = torch.randint(0, 48, (4,), generator=g), torch.randint(0, 48, (5,), generator=g)
    with torch.no_grad():
        exact = exact_elbo(conditional_table(model, q, o)).item()
        draws = torch.stack([espo.coupled_elbo(model, q[None], o[None], 1, g)[0] for _ in range(600)]).double()
    assert abs(draws.mean().item() - exact) < 4 * draws.std().item() / 600 ** 0.5


def test_espo_counts_are_stratified_over_the_micro_batch():
    g = torch.Generator().manual_seed(0)
    counts = torch.stack([espo.coupled_counts(4, 9, g) for _ in range(3000)])  # (3000, 4), values in 0..9
    assert counts.min() >= 0 and counts.max() <= 9
    assert torch.equal((counts[:, 1] - counts[:, 0]) % 10, torch.full((3000,), 3))  # offsets round(r · 10 / 4)
    freq = torch.bincount(counts[:, 2], minlength=10).double() / 3000
    assert (freq - 0.1).abs().max() < 0.025  # each row uniform on 0..N


def test_espo_loss_matches_hand_computation():
    seq, old, ref = torch.tensor([-10.0, -12.0, -8.0]), torch.tensor([-10.5, -11.0, -8.0]), torch.tensor([-9.0, -12.5, -8.2])
    adv, N, eps, beta = torch.tensor([1.0, -1.0, 0.5]), 4, 0.2, 0.1
    loss, st = espo.espo_loss(seq, old, ref, adv, N, eps, beta)
    pg, kl = 0.0, 0.0
    for i in range(3):
        r = math.exp((seq[i].item() - old[i].item()) / N)
        a = adv[i].item()
        pg += -min(r * a, min(max(r, 1 - eps), 1 + eps) * a) / 3
        kl += 0.5 * (seq[i].item() - ref[i].item()) ** 2 / (3 * N)
    assert abs(loss.item() - (pg + beta * kl)) < 1e-6 and abs(st["kl"] - kl) < 1e-6


# -----------------------------------------------------------------------------
# the trajectory


def test_recording_the_trajectory_changes_no_sample():
    model = tiny_model(11).eval()
    prompt = torch.randint(0, 48, (3, 4), generator=torch.Generator().manual_seed(0))
    run = lambda record, stats: generate(model, prompt, gen_length=8, block_length=4, steps=4, temperature=1.0,
                                         generator=torch.Generator().manual_seed(3), stats=stats, record=record)
    plain, stats = run(False, {}), {}
    assert torch.equal(run(True, stats), plain) and set(stats) == {"model_calls", "commit_step", "token_logp"}
    steps = stats["commit_step"]
    # two tokens a step (4 steps, 8 tokens), the blocks in order: steps 0-1 write block 0, steps 2-3 block 1
    assert steps.min() >= 0 and (steps[:, :4] < 2).all() and (steps[:, 4:] >= 2).all()
    assert all(torch.bincount(row, minlength=4).tolist() == [2, 2, 2, 2] for row in steps)


def test_segments_follow_d2s_boundaries():
    steps = torch.arange(8)[None]  # steps 0..7, N = 3: boundaries floor(8/3) = 2 and floor(16/3) = 5
    assert trajectory.segments(steps, 8, 3).tolist() == [[0, 0, 1, 1, 1, 2, 2, 2]]
    assert trajectory.segments(steps, 8, 1).tolist() == [[0] * 8] and trajectory.segments(steps, 8, 8).tolist() == [
        list(range(8))]


TRAJ = ["--objective", "trajectory", "--gen-length", "8", "--block-length", "4", "--diffusion-steps", "4"]


def test_one_segment_is_d1s_one_step_estimator_bit_for_bit():
    model = tiny_model(8).eval()
    b, r = rollout_batch(model, TRAJ + ["--trajectory-segments", "1", "--p-mask", "0.15"])
    with torch.no_grad():
        ours = trajectory.trajectory_logprobs(model, b, torch.Generator().manual_seed(11), r.hp)
        d1 = one_step_logprobs(model, b.prompt, b.completion, p_mask_prompt=0.15, generator=torch.Generator().manual_seed(11))
    assert torch.equal(ours, d1)


def test_one_segment_per_step_is_the_samplers_own_conditionals():
    # N = S, no prompt mask: each token on the canvas of the step that wrote it. Against the sampler's record, and
    # against a plain loop that rebuilds each step's canvas from the commit steps
    model = tiny_model(9).eval()
    b, r = rollout_batch(model, TRAJ + ["--trajectory-segments", "4", "--p-mask", "0"])
    commit = b.record["commit_step"]
    with torch.no_grad():
        ours = trajectory.trajectory_logprobs(model, b, None, r.hp)
        loop = torch.zeros_like(ours)
        for s in range(4):
            x = torch.cat([b.prompt, torch.where(commit < s, b.completion, MASK)], dim=1)
            lp = torch.log_softmax(model(x)[:, 5:].double(), -1).gather(-1, b.completion[..., None])[..., 0]
            loop = torch.where(commit == s, lp.float(), loop)
    assert torch.allclose(ours, loop, atol=1e-5) and torch.allclose(ours, b.record["token_logp"], atol=1e-5)


def released_stepmerge(model, q, completion, commit_step, steps, n_segments):
    """d2's StepMerge as its released code computes it (kuleshov-group/d2 diffu-grpo/diffu_grpo_trainer.py,
    d2StepMergeTrainer), written here from that code: generate's bookkeeping replayed from the sampler's
    commit steps (boundaries int(n · (S / N)) in floats; a snapshot of the canvas each time the step count
    reaches the next one; each step's tokens marked in the mask of the snapshot being written), then
    _get_per_token_logps_oldandref (each snapshot's completion after the masked prompt q', its log-probs
    kept on its own tokens, summed). -> ((b, N) log-probs, the snapshots' canvases, their token masks)."""
    boundaries = [int(n * (steps / n_segments)) for n in range(1, n_segments)]
    canvas = torch.full_like(completion, MASK)
    snapshots, masks = [canvas.clone()], [torch.zeros_like(completion, dtype=torch.bool) for _ in range(n_segments)]
    for total, s in enumerate(range(steps), start=1):
        written = commit_step == s
        canvas[written] = completion[written]
        masks[len(snapshots) - 1] |= written
        if len(snapshots) < n_segments and total == boundaries[len(snapshots) - 1]:
            snapshots.append(canvas.clone())
    P = q.shape[1]
    logp = torch.zeros(completion.shape)
    for snap, m in zip(snapshots, masks):
        logits = model(torch.cat([q, snap], dim=1))[:, P:]
        lp = -torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), completion.reshape(-1),
                                                reduction="none").view(completion.shape)
        logp = logp + lp * m
    return logp, snapshots, masks


def released_stepmerge_loss(model, q, completion, completion_mask, snapshots, masks, old, ref, adv, epsilon, beta):
    """d2StepMergeTrainer.compute_loss, one micro-step per segment j: d1's clipped token loss (+ β k3) on the
    tokens of segment j, scored on snapshot j, summed and scaled by N / (the micro-batch's completion
    tokens); the trainer accumulates the N micro-steps of a batch, each divided by the accumulation steps
    (N when one batch's segments make one optimizer step, as here). Returns that accumulated loss."""
    P, N = q.shape[1], len(snapshots)
    total = 0.0
    for snap, m in zip(snapshots, masks):
        logits = model(torch.cat([q, snap], dim=1))[:, P:]
        lp = -torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), completion.reshape(-1),
                                                reduction="none").view(completion.shape)
        coef_1 = torch.exp(lp - old)
        coef_2 = torch.clamp(coef_1, 1 - epsilon, 1 + epsilon)
        per_token = -torch.min(coef_1 * adv[:, None], coef_2 * adv[:, None])
        per_token = per_token + beta * (torch.exp(ref - lp) - (ref - lp) - 1)
        total = total + (per_token * (m & completion_mask.bool())).sum() * N / completion_mask.sum() / N
    return total


@pytest.mark.parametrize("steps,n_segments", [(4, 3), (8, 3), (8, 8)])
def test_trajectory_equals_d2s_released_stepmerge(steps, n_segments):
    # docs/objectives.md: the same rollout, the same masked prompt q', through d2's bookkeeping and loss and through
    # methods/trajectory.py: each token's log-prob, the snapshots (each = the canvas before its segment), and the
    # loss's gradient (old and ref perturbed so that the clip binds on some tokens, β 0.04) agree
    model = tiny_model(12)
    b, r = rollout_batch(model, ["--objective", "trajectory", "--gen-length", "8", "--block-length", "4",
                                 "--diffusion-steps", str(steps), "--trajectory-segments", str(n_segments),
                                 "--beta", "0.04"])
    commit = b.record["commit_step"]
    q = noisy_prompt(b.prompt, r.hp.p_mask, torch.Generator().manual_seed(5), MASK)
    model.eval()
    with torch.no_grad():
        ours = trajectory.trajectory_logprobs(model, b, torch.Generator().manual_seed(5), r.hp, MASK)
        theirs, snapshots, masks = released_stepmerge(model, q, b.completion, commit, steps, n_segments)
    assert torch.allclose(ours, theirs, atol=1e-6)
    seg = trajectory.segments(commit, steps, n_segments)
    for n, (snap, m) in enumerate(zip(snapshots, masks)):
        assert torch.equal(m, seg == n) and torch.equal(snap, torch.where(seg < n, b.completion, MASK))
    g = torch.Generator().manual_seed(6)
    b.old = [ours + torch.randn(ours.shape, generator=g) * 0.5]
    b.ref = [ours + torch.randn(ours.shape, generator=g) * 0.3]
    model.zero_grad()
    trajectory.policy_pass(model, b, 0, torch.Generator().manual_seed(5), r.hp, MASK, 1, nullcontext, r.obj.loss)
    mine = flat_grad(model)
    model.zero_grad()
    released_stepmerge_loss(model, q, b.completion, b.mask, snapshots, masks, b.old[0], b.ref[0], b.adv,
                            r.hp.epsilon, r.hp.beta).backward()
    assert torch.allclose(mine, flat_grad(model), atol=1e-6)


def test_d2s_float_boundaries_equal_ours_at_d2s_settings():
    # d2 computes its boundaries as int(n * (S / N)) in floats; ours are floor(n S / N) in integers. They agree at
    # every setting d2 runs (S 128 or 256, N a power of two up to 64) and differ only where the float product
    # falls just below an integer (e.g. S 30, N 22): docs/differences.md says so
    for steps in (128, 256):
        for n in (1, 2, 4, 8, 16, 32, 64):
            assert [int(k * (steps / n)) for k in range(1, n)] == [k * steps // n for k in range(1, n)]
    assert [int(k * (30 / 22)) for k in range(1, 22)] != [k * 30 // 22 for k in range(1, 22)]


@pytest.mark.parametrize("flags", [TRAJ + ["--trajectory-segments", "3", "--beta", "0.04"],
                                   ["--objective", "espo", "--gen-length", "8", "--block-length", "4",
                                    "--diffusion-steps", "4", "--beta", "0.04"]])
def test_ratio_is_one_at_the_first_step_and_the_segmented_pass_has_the_one_forward_gradient(flags):
    model = tiny_model(10)
    b, r = rollout_batch(model, flags)
    r.old_ref(model, None, nullcontext, [b], [3, 4], r.hp, nullcontext)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    st = policy_step(model, [b], 0, 3, opt, list(model.parameters()), r.hp, nullcontext, MASK, accum=1,
                     micro=r.micro)
    assert st["ratio_mean"] == pytest.approx(1.0, abs=1e-6) and st["ratio_dev"] < 1e-6
    if r.args.objective == "trajectory":  # one segment at a time adds up to the loss of one forward
        model.zero_grad()
        model.train()
        logp = r.obj.logprobs(model, b, grpo.mask_generator(3, b.index), r.hp, MASK)
        r.obj.loss(logp, b, 0, r.hp)[0].backward()
        whole = flat_grad(model)
        model.zero_grad()
        trajectory.policy_pass(model, b, 0, grpo.mask_generator(3, b.index), r.hp, MASK, 1, nullcontext, r.obj.loss)
        assert torch.allclose(flat_grad(model), whole, atol=1e-6)
