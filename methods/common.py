"""
What the objectives of methods/ share: the record an objective is registered as (Objective, read by
methods/grpo.py), PPO's clipped surrogate and the k2 estimator of a KL divergence.

    per_token, binds = clipped_surrogate(ratio, adv, eps)   # -min(ρA, clip(ρ, 1-ε_low, 1+ε_high) A)
    kl = k2(ref, seq)                                       # ½ (θ - ref)²
"""
from dataclasses import dataclass
from typing import Callable

import torch


def one_token_a_step(gen_length):
    """A preset's --diffusion-steps that follows the task's canvas: one token unmasked per step
    (JustGRPO's left-to-right sampler, ESPO's 256 steps for 256 tokens); ops/trainers.parse_with_preset
    calls a preset's callable value with the canvas length."""
    return gen_length


@dataclass(frozen=True)
class Objective:
    """An RL objective for grpo.py's step 5, and what it asks of the round before it (methods/grpo.py
    turns it into the phase functions grpo.train takes).

    loss(logp, b, j, hp) -> (loss, stats): the loss of micro-batch b at inner step j, from `logp`,
        what `logprobs` gave for b under step j's masks; b.old[j] / b.ref[j] hold the same for θ_old /
        θ_ref when needs_old / needs_ref (b.old[0] / b.ref[0] when not `seeded`).
    logprobs(model, b, generator, hp, mask_id) -> tensor: the likelihood the loss reads, drawing its
        masks from `generator` (rebuilt from the same key for θ, θ_old, θ_ref). None: the per-token
        estimate of --estimator (grpo.one_step, d1's, by default; methods/estimators.py the others).
    needs_old / needs_ref: step 4 scores θ_old / θ_ref (the latter only when β > 0).
    seeded: the likelihood draws masks, so old / ref are scored once per mask seed (μ times); False:
        once, for all μ steps.
    trace: the sampler records each token's commit step and log-prob (b.record, methods/sampling.py).
    policy_pass(model, b, j, generator, hp, mask_id, accum, amp, loss) -> stats: the objective runs its
        own forwards and backwards for micro-batch b (JustGRPO: a chunk of positions at a time; the
        trajectory: a segment at a time, with `loss`), so memory stays flat in the length. None:
        logprobs -> loss -> backward, once.
    calls(hp) / rows(hp): model calls per scoring of a micro-batch, and forward rows per scored
        sequence (the cost: lab/cost.analytic_passes). None: 1 / --estimator's rows.
    flags(parser): the objective's own flags; options: their names, which the round reads as hp.own[name];
        check(args): its checks of the flags, raising ValueError (one line).
    `hp` is methods.grpo.Hyper: grpo.Hyper, the round's hyper-parameters (hp.epsilon, hp.beta, hp.p_mask,
    hp.G, hp.steps, ...), and `own`, the objective's flags by name.
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


def clipped_surrogate(ratio, adv, eps_low, eps_high=None):
    """PPO's pessimistic surrogate, -min(ρA, clip(ρ, 1 - ε_low, 1 + ε_high) A), elementwise. For A > 0
    the clip removes any gain from raising ρ above 1 + ε_high; for A < 0, from lowering it below
    1 - ε_low. -> (loss terms, where the clip binds: the min picks the clipped term, no gradient)."""
    eps_high = eps_low if eps_high is None else eps_high
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv
    return -torch.min(unclipped, clipped), unclipped > clipped


def k2(ref, logp):
    """The k2 estimator: ½ (θ - ref)², whose gradient is the log-ratio itself (no exponential)."""
    return 0.5 * (logp - ref) ** 2
