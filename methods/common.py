"""
What the objectives share: the record an objective is registered as (Objective), masked means,
PPO's clipped surrogate, and the k2 / k3 estimators of a KL divergence, each written once and used
by grpo.py (d1's diffu-GRPO) and by every file of methods/.

    per_token = clipped_surrogate(ratio, adv, eps)     # -min(ρA, clip(ρ, 1-ε_low, 1+ε_high) A)
    loss = masked_mean(per_token + beta * k3(ref, logp), mask)
"""
from dataclasses import dataclass
from typing import Callable

import torch


def one_token_a_step(gen_length):
    """A preset's --diffusion-steps that follows the task's canvas: one token unmasked per step
    (JustGRPO's left-to-right sampler, ESPO's 256 steps for 256 tokens); ops/trainers.py resolves it."""
    return gen_length


@dataclass(frozen=True)
class Objective:
    """An RL objective for grpo.py's step 5, and what it asks of the round before it.

    loss(logp, b, j, hp) -> (loss, stats): the loss of micro-batch b at inner step j, from `logp`,
        what `logprobs` gave for b under step j's masks; b.old[j] / b.ref[j] hold the same for θ_old /
        θ_ref when needs_old / needs_ref (b.old[0] / b.ref[0] when not `seeded`).
    logprobs(model, b, generator, hp, mask_id) -> tensor: the likelihood the loss reads, drawing its
        masks from `generator` (rebuilt from the same key for θ, θ_old, θ_ref). None: the per-token
        estimate of --estimator (d1's one-step estimator by default; methods/estimators.py the others).
    needs_old / needs_ref: step 4 scores θ_old / θ_ref (the latter only when β > 0).
    seeded: the likelihood draws masks, so old / ref are scored once per mask seed (μ times); False:
        once, for all μ steps.
    trace: the sampler records each token's commit step and log-prob (b.trace, methods/sampling.py).
    policy_pass(model, b, j, generator, hp, mask_id, accum, amp, loss) -> stats: the objective runs its
        own forwards and backwards for micro-batch b (JustGRPO: a chunk of positions at a time; the
        trajectory: a segment at a time, with `loss`), so memory stays flat in the length. None:
        logprobs -> loss -> backward, once.
    calls(hp) / rows(hp): model calls per scoring of a micro-batch, and forward rows per scored
        sequence (the cost: lab/cost.analytic_passes). None: 1 / --estimator's rows.
    flags(parser): the objective's own flags; options: their names, which the round reads as hp.own[name];
        check(args): its checks of the flags, raising ValueError (one line).
    `hp` is grpo.Hyper, the round's hyper-parameters (hp.epsilon, hp.beta, hp.p_mask, hp.G, hp.steps, ...).
    """
    loss: Callable
    logprobs: Callable = None
    needs_old: bool = True
    needs_ref: bool = True
    seeded: bool = True
    trace: bool = False
    policy_pass: Callable = None
    calls: Callable = None
    rows: Callable = None
    flags: Callable = None
    options: tuple = ()
    check: Callable = None


def masked_mean(x, mask):
    """Σ x·mask / Σ mask over every entry (one count for the whole micro-batch, never 0 / 0)."""
    return (x * mask).sum() / mask.sum().clamp(min=1)


def clipped_surrogate(ratio, adv, eps_low, eps_high=None):
    """PPO's pessimistic surrogate, -min(ρA, clip(ρ, 1 - ε_low, 1 + ε_high) A), elementwise. For A > 0
    the clip removes any gain from raising ρ above 1 + ε_high; for A < 0, from lowering it below
    1 - ε_low. -> (loss terms, where the clip binds: the min picks the clipped term, no gradient)."""
    eps_high = eps_low if eps_high is None else eps_high
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv
    return -torch.min(unclipped, clipped), unclipped > clipped


def k3(ref, logp):
    """Schulman's k3 estimator of KL(π_θ || π_ref) from log-probs: e^(ref - θ) - (ref - θ) - 1 >= 0."""
    d = ref - logp
    return torch.exp(d) - d - 1


def k2(ref, logp):
    """The k2 estimator: ½ (θ - ref)², whose gradient is the log-ratio itself (no exponential)."""
    return 0.5 * (logp - ref) ** 2
