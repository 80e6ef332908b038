"""
JustGRPO (Ni et al., "The Flexibility Trap", arXiv 2601.15165, ICML 2026; code LeapLabTHU/JustGRPO at
eebe50e): plain GRPO on a diffusion LM made to write left to right during RL, so that the likelihood of
a rollout is exact. Rollout: blocks of ONE token, one step each, temperature 1: at step t the canvas is
[q | o_<t | M^(N-t)]. Likelihood, exact for that policy, one forward per completion position:

    log π_θ(o | q) = Σ_t log p_θ(o_t | q, o_<t, M^(N-t))        (the canvas the sampler wrote o_t on)

Loss (their logprob_loss): token-level PPO with the group-normalised advantage, no KL,

    A_i = (r_i - mean_G r) / (std_G r + 1e-4)                   (--scale-std)
    L = Σ_i Σ_{t<N} -min(ρ_it A_i, clip(ρ_it, 1-ε, 1+ε) A_i) / (N · V̄),   ε = 0.2

summed over EVERY canvas position (their code has no completion mask), divided by N (V̄ + 1e-5), V̄ the
completions of the micro-batch whose advantage is not 0, averaged over the ranks (`valid_samples`). As in
their train.py the micro-batches' gradients are SUMMED, and AdamW's β2 is theirs, 0.999: PRESET.

θ_old: the sampler records each token's log-prob as it writes it (methods/sampling.generate, record=True),
log p_θold(o_t | q, o_<t, M^(N-t)), so no old pass runs; their code (μ = 1) uses the detached current
log-prob, equal at the first inner step (tested; docs/differences.md). The policy pass runs --ar-chunk
positions per forward and backpropagates each chunk at once: memory flat in N. check() refuses a sampler
that is not one token a step left to right, and a KL term.
"""
import math

import torch
import torch.distributed as dist

from logprob import canvas_mask, token_logprobs
from methods.common import Objective, clipped_surrogate, one_token_a_step

# LeapLabTHU/JustGRPO's run (train.py: TrainConfig), for LLaDA-8B-Instruct on GSM8K / MATH-500 / code:
# 64 prompts x G 16 a step, μ 1, 125 steps, full fine-tuning at a constant 5e-6, AdamW (0.9, 0.999), max grad
# norm 1.0 on the summed gradient. Their prompts are the bare question (no d1 system prompt) and their math
# reward is ±1; nano-d1 keeps d1's prompts and rewards
PRESET = dict(objective="justgrpo", num_generations=16, prompts_per_step=64, groups_per_micro=1, num_iterations=1,
              epsilon=0.2, beta=0.0, scale_std=True, p_mask=0.0, lr=5e-6, weight_decay=0.0, grad_clip=1.0,
              block_length=1, diffusion_steps=one_token_a_step, temperature=1.0, max_prompt_length=200,
              lora_r=0, lora_alpha=64.0, load_in_4bit=False, rounds=125, adam_beta2=0.999)


def ar_logprobs(model, prompt, completion, positions=None, mask_id=None, attention_mask=None):
    """log p_θ(o_t | q, o_<t, M^(N-t)) for each t of `positions` (default: all N), in ONE forward of
    len(positions) · b rows, each the canvas the AR sampler wrote o_t on, with only column P + t going
    through the head. prompt (b, P), completion (b, N) -> (b, len(positions)) fp32. attention_mask: the
    prompt's (b, P) key-padding mask (Dream's hidden pads) or None."""
    mask_id = model.config.mask_token_id if mask_id is None else mask_id
    (b, P), N = prompt.shape, completion.shape[1]
    pos = torch.arange(N, device=completion.device) if positions is None else \
        torch.as_tensor(positions, device=completion.device)  # (C,)
    later = torch.arange(N, device=completion.device)[None, :] >= pos[:, None]  # (C, N): t and after are masked
    canvas = torch.where(later[:, None, :], mask_id, completion[None])  # (C, b, N)
    x = torch.cat([prompt[None].expand(len(pos), b, P), canvas], dim=2).reshape(-1, P + N)  # (C·b, P+N)
    cols = (P + pos).repeat_interleave(b)[:, None]  # (C·b, 1): row (t, i) reads column P + t
    am = canvas_mask(attention_mask, P + N, times=len(pos))  # (C·b, P+N): rows (t, i), or None
    logits = model(x, attention_mask=am, logits_at=cols)  # (C·b, 1, V)
    targets = completion[:, pos].T.reshape(-1, 1)  # (C·b, 1): o_t of sequence i
    return token_logprobs(logits, targets).view(len(pos), b).T  # (b, C)


def valid_samples(advantages):
    """V̄: the completions of the micro-batch whose advantage is not 0, averaged over the ranks as their
    accelerator.gather(valid_samples).mean() does (a collective: every rank calls it once per micro-batch)."""
    valid = (advantages != 0).sum().float()
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(valid)
        valid = valid / dist.get_world_size()
    return valid


def justgrpo_loss(logp, old_logp, advantages, epsilon, positions=None, valid=None):
    """Σ over the given positions of -min(ρA, clip(ρ)A), / (N · (V̄ + 1e-5)). logp, old_logp (b, C) for
    positions (default: all N of the canvas); advantages (b,); valid: V̄ (default: valid_samples).
    Additive over chunks of positions. -> (loss, stats)."""
    n_total = old_logp.shape[1]  # N: the constant per-sequence normaliser
    valid = valid_samples(advantages) if valid is None else valid  # their `valid_samples`
    old = old_logp if positions is None else old_logp[:, positions]
    ratio = torch.exp(logp - old)  # (b, C)
    per_token, clipped = clipped_surrogate(ratio, advantages[:, None], epsilon)
    loss = per_token.sum() / (n_total * (valid + 1e-5))  # their scale: gain / gen_length / (V̄ + 1e-5)
    with torch.no_grad():
        share = logp.numel() / (old_logp.numel())  # this part's share of the positions, for the means below
        stats = {"clip_frac": clipped.float().mean().item() * share, "ratio_mean": ratio.mean().item() * share,
                 "ratio_dev": (ratio - 1).abs().mean().item() * share}
    return loss, stats


def policy_pass(model, b, j, generator, hp, mask_id, accum, amp, loss=None):
    """The policy's forwards and backwards for micro-batch b, --ar-chunk positions at a time, each chunk's share
    of the loss backpropagated at once. Not divided by `accum`: their gradients add up. -> the pass's stats."""
    N, stats = b.completion.shape[1], {}
    chunk = hp.own["ar_chunk"]
    valid = valid_samples(b.adv)  # once per micro-batch: a collective under torchrun
    for t0 in range(0, N, chunk):
        positions = list(range(t0, min(N, t0 + chunk)))
        with amp():
            logp = ar_logprobs(model, b.prompt, b.completion, positions, mask_id, b.pad_mask)  # (b, C)
        loss, st = justgrpo_loss(logp, b.record["token_logp"], b.adv, hp.epsilon, positions, valid)
        loss.backward()  # summed over micro-batches, as their gradient accumulation
        for k, v in {"loss": loss.item(), **st}.items():
            stats[k] = stats.get(k, 0.0) + v
    return stats


def check(args):
    """JustGRPO's likelihood is the sampler's only if it writes one token per step, left to right."""
    if args.block_length != 1 or args.diffusion_steps != args.gen_length:
        raise ValueError(f"--objective justgrpo samples left to right, one token per step: give --block-length 1 "
                         f"--diffusion-steps {args.gen_length} (or --preset justgrpo), not --block-length "
                         f"{args.block_length} --diffusion-steps {args.diffusion_steps}")
    if args.rollout_cache != "none" or args.rollout_threshold:
        raise ValueError("--objective justgrpo: a cached or threshold rollout is not the AR policy it scores; "
                         "drop --rollout-cache / --rollout-threshold")
    if args.beta:
        raise ValueError(f"--objective justgrpo has no KL term (β = 0 in the paper's code), got --beta {args.beta}")
    if args.ar_chunk < 1:
        raise ValueError(f"--ar-chunk must be >= 1, got {args.ar_chunk}")


def add_flags(parser):
    g = parser.add_argument_group("justgrpo (methods/justgrpo.py)")
    g.add_argument("--ar-chunk", type=int, default=16, help="completion positions per forward of the exact AR "
                   "likelihood (rows = micro-batch x chunk); its memory, not its result")


OBJECTIVE = Objective(
    lambda logp, b, j, hp: justgrpo_loss(logp, b.record["token_logp"], b.adv, hp.epsilon),
    logprobs=lambda model, b, g, hp, mask_id: ar_logprobs(model, b.prompt, b.completion, mask_id=mask_id,
                                                          attention_mask=b.pad_mask),
    needs_old=False, needs_ref=False, seeded=False, trace=True, policy_pass=policy_pass,
    calls=lambda hp: math.ceil(hp.gen_length / hp.own["ar_chunk"]), rows=lambda hp: hp.gen_length,
    flags=add_flags, options=("ar_chunk",), check=check)
