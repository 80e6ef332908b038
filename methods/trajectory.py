"""
Trajectory likelihoods: d2's StepMerge (Wang et al., arXiv 2509.21474; code kuleshov-group/d2 at
381b9f1, d2StepMergeTrainer) and TraceRL's for full-attention models (arXiv 2509.06949; code
Gen-Verse/dLLM-RL at 10b4fd1, its "shrink"). d1 scores a completion as if every token were predicted
at once from a fully masked canvas; the sampler wrote it over S steps, each token on the canvas of its
step. These score each token on the canvas the sampler actually wrote it on, merged into N segments:

    segment n holds the steps b_n <= s < b_{n+1},  b_n = floor(n S / N)   (d2's boundaries; S = --diffusion-steps)
    (d2 computes b_n in floats, int(n * (S / N)): the same at its settings, docs/differences.md)
    log π(o | q) ≈ Σ_n Σ_{k written in segment n} log p_θ(o_k | q', o_<segment n, the rest masked)

one forward per segment, on [q' | the tokens written before the segment's first step, the others
masked], read only at the segment's own tokens. q' is d1's masked prompt (--p-mask, 0.15: d2 masks the
prompt for every N, one q' shared by all segments and by θ, θ_old, θ_ref). N = 1 is d1's one-step
estimator exactly (tested bit for bit); N = S scores every token on its own step's canvas, the
sampler's own conditionals (tested against the log-probs it records). TraceRL's shrink s is N = S / s
with --p-mask 0 (it never masks the prompt); its loss differs from d2's (a clip of 0.2, a mean per
merged step, the KL to θ_old, z-scored advantages), which is not reproduced here.

The canvases are rebuilt from each token's commit step (methods/sampling.generate, record=True). The
loss on top is d1's diffu-GRPO, unchanged, as d2's is. The policy pass runs one segment at a time,
forward and backward, so activations are d1's (d2: one segment per micro-step); the cost is N times d1's.
"""
from dataclasses import replace

import torch

from logprob import canvas_mask, noisy_prompt, token_logprobs


def segments(commit_step, steps, n_segments):
    """(b, N) segment index of each token: d2's boundaries floor(n S / N), n = 1..N-1, the step that
    reaches a boundary opening the next segment."""
    bounds = torch.tensor([n * steps // n_segments for n in range(1, n_segments)], device=commit_step.device)
    return torch.searchsorted(bounds, commit_step, right=True)  # (b, N) in 0..N-1


def segment_logprobs(model, prompt, completion, segment, n, q, mask_id, attention_mask=None):
    """log p of the tokens of segment n on the canvas at its start (b, N); other entries are meaningless.
    attention_mask: the prompt's (b, P) key-padding mask (Dream's hidden pads) or None."""
    P, N = prompt.shape[1], completion.shape[1]
    canvas = torch.where(segment < n, completion, mask_id)  # written before segment n: visible
    am = canvas_mask(attention_mask, P + N)  # (b, P+N), or None
    logits = model(torch.cat([q, canvas], dim=1), attention_mask=am)[:, P:]  # (b, N, V), as d1's estimator reads it
    return token_logprobs(logits, completion)  # (b, N)


def stepmerge_logprobs(model, prompt, completion, commit_step, steps, n_segments, p_mask=0.15, generator=None,
                       mask_id=None, attention_mask=None):
    """(b, N) per-token log-probs, each token scored in its segment of the `steps` sampler steps it was
    written in (commit_step (b, N), methods/sampling.py's record): n_segments forwards of b rows."""
    mask_id = model.config.mask_token_id if mask_id is None else mask_id
    seg = segments(commit_step, steps, n_segments)  # (b, N)
    q = noisy_prompt(prompt, p_mask, generator, mask_id)
    out = torch.zeros(completion.shape, device=completion.device)
    for n in range(n_segments):
        lp = segment_logprobs(model, prompt, completion, seg, n, q, mask_id, attention_mask)  # (b, N)
        out = torch.where(seg == n, lp, out)
    return out


def trajectory_logprobs(model, b, generator, hp, mask_id=None):
    """The objective's likelihood of micro-batch b: stepmerge_logprobs under the round's hyper-parameters."""
    return stepmerge_logprobs(model, b.prompt, b.completion, b.record["commit_step"], hp.steps,
                              hp.own["trajectory_segments"], hp.p_mask, generator, mask_id, b.pad_mask)


def policy_pass(model, b, j, generator, hp, mask_id, accum, amp, loss):
    """One segment at a time: its tokens' share of `loss` (d1's token mean), backpropagated at once; the
    shares add up to d1's loss over all the micro-batch's tokens."""
    n_segments = hp.own["trajectory_segments"]
    seg = segments(b.record["commit_step"], hp.steps, n_segments)
    q = noisy_prompt(b.prompt, hp.p_mask, generator, mask_id)
    total, stats = b.mask.sum().clamp(min=1), {}
    for n in range(n_segments):
        part = b.mask * (seg == n)  # (b, N) this segment's tokens that the loss counts
        if not part.any():  # every call must still run under FSDP: a forward of nothing is skipped only here
            continue
        with amp():
            logp = segment_logprobs(model, b.prompt, b.completion, seg, n, q, mask_id, b.pad_mask)
        share = part.sum() / total
        value, st = loss(logp, replace(b, mask=part), j, hp)
        ((value * share) / accum).backward()
        for k, v in {"loss": value.item(), **st}.items():
            stats[k] = stats.get(k, 0.0) + v * share.item()
    return stats


def add_flags(parser):
    g = parser.add_argument_group("trajectory (methods/trajectory.py)")
    g.add_argument("--trajectory-segments", type=int, default=8, help="N: segments of the sampler's steps, one "
                   "forward each (d2: 8 for GSM8K, 16 for MATH and Countdown; 1 = d1's estimator)")


def check(args):
    if not 1 <= args.trajectory_segments <= args.diffusion_steps:
        raise ValueError(f"--trajectory-segments must be in [1, --diffusion-steps {args.diffusion_steps}], got "
                         f"{args.trajectory_segments}")


# what grpo.py puts on d1's objective (common.Objective's fields): this likelihood instead of d1's one-step estimate
LIKELIHOOD = dict(logprobs=trajectory_logprobs, trace=True, policy_pass=policy_pass,
                  calls=lambda hp: hp.own["trajectory_segments"], rows=lambda hp: hp.own["trajectory_segments"],
                  flags=add_flags, options=("trajectory_segments",), check=check)
