"""
The field's samplers beside d1's: sample.py's semi-autoregressive loop with the options later work
added, built from sample.py's pieces. With every option off it IS sample.generate, token for token
(tests/test_sample.py). docs/fast-rollouts.md gives the measurements and the two threshold rules.

Fast-dLLM (arXiv 2505.22618), both approximations:
  cache="prefix": at each block's first step run the full canvas once and keep every layer's keys and
      values (model.py's return_kv / past_kv); later steps forward only [block start, end of canvas).
  cache="dual": also reuse the masked suffix's keys/values: later steps forward only the block's columns.
  threshold=τ: each step also writes every blank of the block the model is sure of (Fast-dLLM: τ = 0.9);
      a block whose blanks run out skips its remaining steps. "Sure" (threshold_rule): "certainty" (ours)
      the sampling distribution softmax(logits / T) peaks at >= τ; "fast_dllm" the sampled token's
      temperature-1 probability is >= τ. Its forward count depends on the data: not under FSDP.

Dream's decoding orders (Dream-v0-Instruct-7B's diffusion_generate, its `alg`): remasking="origin" |
"maskgit_plus" | "topk_margin" | "entropy", with `eps` and `alg_temp`. Step i goes from noise level
t = ts[i] to s = ts[i + 1], ts = linspace(1, eps, steps_per_block + 1). "origin" writes each blank with
probability 1 - s/t; the others write dream_transfer_tokens' count of blanks with the best
dream_confidence (alg_temp > 0: drawn from softmax(confidence / alg_temp)). block_length = gen_length is
Dream's own sampler; the model aligns Dream's shifted logits (model.py), so any order runs on any model.
Not with cache or threshold.

`stats` receives "model_calls", and with record=True (methods/trajectory.py, justgrpo.py) "commit_step" and
"token_logp" (B, gen_length): the step each position was written at, its token's temperature-1 log-prob.

    from methods.sampling import generate
    out = generate(model, prompt, gen_length=256, block_length=32, steps=128, cache="dual", threshold=0.9)

Run a tiny demo on CPU (sample.py's, with these options; a Dream --model-dir too, methods/dream.py):
    python -m methods.sampling --gen-length 256 --block-length 32 --steps 128 --cache dual --threshold 0.9
    python -m methods.sampling --gen-length 64 --block-length 64 --steps 64 --remasking entropy --eps 1e-3
"""
from functools import partial

import torch
import torch.nn.functional as F

import methods.dream  # noqa: F401  (registers the Dream family: a Dream --model-dir loads)
from model import SHIFT_NO_CACHE
from modelio.families import read_config
from modelio.hub import config_dir
from sample import (REMASKING_STRATEGIES, block_logits, check_generate_args, demo, demo_parser, new_canvas,
                    num_transfer_tokens, predict, remasking_confidence, select_top_k, uniform)

# Dream's `alg` values: "origin" writes each blank by a coin flip, the other three rank a confidence
DREAM_CONFIDENCES = ("maskgit_plus", "topk_margin", "entropy")
DREAM_ORDERS = ("origin", *DREAM_CONFIDENCES)
ORDERS = (*REMASKING_STRATEGIES, *DREAM_ORDERS)  # LLaDA's (with its even schedule), then Dream's
THRESHOLD_RULES = ("certainty", "fast_dllm")
CACHE_MODES = (None, "prefix", "dual")  # None = every step runs the full canvas, as d1's sampler


def dream_transfer_tokens(mask_count: torch.Tensor, steps: int, eps: float) -> torch.Tensor:
    """Dream's counts (diffusion_generate): going from noise level t = ts[i] to s = ts[i + 1], ts =
    linspace(1, eps, steps + 1), step i writes int(n * (1 - s / t)) of the n blanks left, the last step all
    of them (10 over 4 -> 2, 2, 2, 4). mask_count (B,) -> (B, steps) long. As in Dream, n is the batch
    AVERAGE (in generate() every row starts a block with the same count, so the average is each row's)."""
    ts = torch.linspace(1, eps, steps + 1, device=mask_count.device)        # (steps + 1,) fp32, as Dream's
    n = mask_count.sum() / mask_count.shape[0]                              # () fp32: Dream's num_mask_token
    counts = []
    for i in range(steps):
        # in fp32 like Dream, so int() floors the same products; every row writes k, so n drops by k exactly
        k = (n * (1 - ts[i + 1] / ts[i])).long() if i < steps - 1 else n.long()  # ()
        counts.append(k)
        n = n - k
    return torch.stack(counts).expand(mask_count.shape[0], steps)           # (B, steps)


def dream_confidence(logits: torch.Tensor, x0: torch.Tensor, order: str, temperature: float) -> torch.Tensor:
    """Dream's confidences (its sample_tokens), read off the distribution x0 was drawn from: softmax(logits / T),
    softmax(logits) at T = 0, over the whole vocabulary (mask token included, as in Dream).
    logits (B, K, V) fp32, x0 (B, K) -> (B, K) fp32, higher = written sooner."""
    probs = F.softmax(logits / temperature if temperature > 0 else logits, dim=-1)  # (B, K, V)
    # the drawn token's probability: Dream's max prob at T = 0 unless the mask token is the argmax (x0 never is)
    if order == "maskgit_plus":
        return probs.gather(-1, x0[..., None]).squeeze(-1)                  # (B, K)
    if order == "topk_margin":  # how far the best token leads the runner-up
        top2 = probs.topk(2, dim=-1).values                                 # (B, K, 2)
        return top2[..., 0] - top2[..., 1]                                  # (B, K)
    # "entropy": sum p log p, minus the entropy, so the most peaked positions go first (+1e-10 as in Dream)
    return (probs * torch.log(probs + 1e-10)).sum(dim=-1)                   # (B, K)


def check_options(model, remasking, cache, threshold, threshold_rule, eps, alg_temp):
    """The combinations of this file's options that have no meaning, refused before any forward."""
    if cache not in CACHE_MODES:
        raise ValueError(f"cache must be one of {CACHE_MODES}, got {cache!r}")
    if cache and getattr(model.config, "logit_shift", False):  # Dream: column `start` reads column start - 1
        raise ValueError(f"cache={cache!r} does not apply to a model with shifted logits (Dream): {SHIFT_NO_CACHE}")
    if threshold is not None and (remasking != "low_confidence" or not 0.0 < threshold <= 1.0):
        raise ValueError(f"threshold must be in (0, 1] and needs remasking='low_confidence' (it is a "
                         f"confidence), got threshold={threshold}, remasking={remasking!r}")
    # Dream's diffusion_generate has no cache
    if remasking in DREAM_ORDERS and cache is not None:
        raise ValueError(f"remasking={remasking!r} (Dream's) takes no cache, got {cache=}")
    if not 0.0 <= eps < 1.0:
        raise ValueError(f"eps (Dream's schedule runs linspace(1, eps)) must be in [0, 1), got {eps}")
    if alg_temp < 0 or (alg_temp > 0 and remasking not in DREAM_CONFIDENCES):
        raise ValueError(f"alg_temp must be >= 0 and > 0 only with {DREAM_CONFIDENCES}, got {alg_temp=}, {remasking=}")
    if threshold_rule not in THRESHOLD_RULES:
        raise ValueError(f"threshold_rule must be one of {THRESHOLD_RULES}, got {threshold_rule!r}")


def check_cache_applies(model_dir, cache):
    """Up front, before a model loads: the key/value cache (--rollout-cache, --cache) has no meaning on a
    model with shifted logits (Dream) -> one ValueError. Read from config.json alone, where it is at hand
    (none, or a broken one: the core's checks say so later)."""
    path = config_dir(model_dir) if model_dir and cache not in (None, "", "none") else None
    if path is None:
        return
    try:
        config = read_config(path)[2]
    except (ValueError, OSError):
        return
    if config.logit_shift:
        raise ValueError(f"--model-dir {model_dir} has shifted logits (Dream): the KV cache ({cache}) does not "
                         f"apply to it ({SHIFT_NO_CACHE}); run the exact sampler")


def step_logits(model, x, attention_mask, prompt_index, mask_id, cache, kv, i, start, end):
    """One step's fp32 logits of the block's columns (B, K, V), and the block's key/value cache. Exact: the
    whole canvas, every step. Cached: at a block's first step one full forward that also keeps every layer's
    k, v; later steps forward only the window, and the columns outside it use the first step's keys and
    values. Those go stale as the block fills (attention is bidirectional): the approximation, reset at
    every block. prefix reuses the prompt + finished blocks; dual also the all-mask suffix right of the block."""
    if cache is None:
        return block_logits(model, x, attention_mask, prompt_index, mask_id, 0.0, start, end), None
    if i == 0:  # the refresh: an exact full forward that also returns each layer's (k, v)
        full, kv = model(x, attention_mask=attention_mask, return_kv=True)  # (B, L, V)
        return full[:, start:end].float(), kv
    stop = end if cache == "dual" else x.shape[1]  # prefix: the block and the masked suffix
    # the window starts at the block, so its first K columns of logits are the block's
    window = model(x[:, start:stop], attention_mask=attention_mask, past_kv=kv, start=start)  # (B, W, V)
    return window[:, :end - start].float(), kv


@torch.no_grad()
def generate(model, prompt, attention_mask=None, gen_length=128, block_length=32, steps=64, temperature=0.0,
             remasking="low_confidence", generator=None, cache=None, threshold=None, threshold_rule="certainty",
             eps=1e-3, alg_temp=0.0, record=False, stats=None):
    """sample.generate with the field's options (this file's docstring); with all of them off, the same
    tokens. prompt (B, P) -> (B, P + gen_length); `stats`, a dict, receives the model calls made and, with
    record=True, each position's commit step and log-prob. No classifier-free guidance here."""
    mask_id = model.config.mask_token_id
    num_blocks, steps_per_block = check_generate_args(prompt, attention_mask, gen_length, block_length, steps,
                                                      temperature, remasking, mask_id, ORDERS)
    check_options(model, remasking, cache, threshold, threshold_rule, eps, alg_temp)
    B, P = prompt.shape
    x, attention_mask = new_canvas(prompt, attention_mask, gen_length, mask_id)  # (B, L)
    prompt_index = x != mask_id                                             # (B, L)
    # Dream's noise levels for one block's steps ("origin" reads them): step i goes from t = ts[i] to s = ts[i + 1]
    ts = torch.linspace(1, eps, steps_per_block + 1, device=x.device) if remasking == "origin" else None  # (S + 1,)
    if record:  # filled as positions are written; -1 / 0 never survive (every position is written)
        commit = torch.full((B, gen_length), -1, dtype=torch.long, device=x.device)  # (B, gen_length)
        token_logp = torch.zeros((B, gen_length), device=x.device)  # (B, gen_length) fp32
    calls = 0  # forward passes made: num_blocks * steps_per_block unless `threshold` ends blocks early
    for b in range(num_blocks):
        start, end = P + b * block_length, P + (b + 1) * block_length
        count = (x[:, start:end] == mask_id).sum(dim=1)                     # (B,)
        # Dream's orders bring Dream's schedule (unused by "origin", which flips a coin per blank)
        schedule = dream_transfer_tokens(count, steps_per_block, eps) if remasking in DREAM_ORDERS else \
            num_transfer_tokens(count, steps_per_block)                     # (B, S)
        kv = None  # the block's key/value cache (cached modes), made at its first step
        for i in range(steps_per_block):
            block_mask = x[:, start:end] == mask_id                         # (B, K)
            # only with `threshold` can a block finish before its last step (checked only then: a GPU -> CPU sync)
            if threshold is not None and not block_mask.any():
                break
            logits, kv = step_logits(model, x, attention_mask, prompt_index, mask_id, cache, kv, i, start, end)
            x0, choice_logits = predict(logits, mask_id, temperature, generator)  # (B, K), (B, K, V)
            if remasking == "origin":
                # every blank independently, with probability 1 - s/t. Dream draws tokens only for the blanks it
                # writes; we draw all (same distribution, another RNG stream)
                p = 1 - ts[i + 1] / ts[i] if i < steps_per_block - 1 else 1.0  # () or 1: all at the last step
                transfer = (uniform(block_mask.shape, generator, x.device) < p) & block_mask  # (B, K)
            else:
                confidence = dream_confidence(logits, x0, remasking, temperature) if remasking in DREAM_ORDERS \
                    else remasking_confidence(logits, x0, remasking, generator)  # (B, K)
                confidence = confidence.masked_fill(~block_mask, float("-inf"))  # (B, K)
                if alg_temp > 0:
                    # Dream draws k positions from softmax(confidence / alg_temp) without replacement; the top k
                    # of confidence / alg_temp + Gumbel noise is the same draw. float64: u = 0 practically never
                    u = uniform(block_mask.shape, generator, x.device, torch.float64)  # (B, K)
                    confidence = confidence.double() / alg_temp - torch.log(-torch.log(u))  # (B, K)
                # the schedule: the k most confident blanks. & block_mask: after early extra writes, k can
                # exceed the blanks left, and top-k would then also pick -inf (already written) positions
                transfer = select_top_k(confidence, schedule[:, i]) & block_mask  # (B, K)
            if threshold is not None:  # parallel unmasking: also every blank the model is sure of
                # certainty: how likely the draw at this position is its mode, whichever token was drawn
                sure = confidence if threshold_rule == "fast_dllm" or temperature == 0 else \
                    F.softmax(choice_logits / temperature, dim=-1).amax(dim=-1)  # (B, K)
                transfer |= (sure >= threshold) & block_mask                # (B, K)
            x[:, start:end] = torch.where(transfer, x0, x[:, start:end])    # (B, K)
            if record:  # the step each position is written at, and its token's log-prob there (log_softmax, as
                # logprob.token_logprobs computes it, so a recomputation on the same canvas gives the same value)
                lp = torch.log_softmax(logits, dim=-1).gather(-1, x0[..., None]).squeeze(-1)  # (B, K)
                cols = slice(start - P, end - P)
                commit[:, cols] = torch.where(transfer, b * steps_per_block + i, commit[:, cols])
                token_logp[:, cols] = torch.where(transfer, lp, token_logp[:, cols])
            calls += 1
    if stats is not None:
        stats["model_calls"] = calls
        if record:
            stats["commit_step"], stats["token_logp"] = commit, token_logp
    return x                                                                # (B, P + gen_length)


# grpo.py's rollouts with these options (docs/fast-rollouts.md)
def add_rollout_flags(parser):
    """grpo.py's Fast-dLLM rollout options; off by default, which is d1's exact sampler."""
    r = parser.add_argument_group("fast rollouts (methods/sampling.py, docs/fast-rollouts.md)")
    r.add_argument("--rollout-cache", type=str, default="none", choices=["none", "prefix", "dual"],
                   help="Fast-dLLM key-value cache; none = d1's exact sampler")
    r.add_argument("--rollout-threshold", type=float, default=0.0, help="0 = off; else also write every token the "
                   "model is this sure of at once (Fast-dLLM: 0.9)")
    r.add_argument("--rollout-threshold-rule", type=str, default="certainty", choices=THRESHOLD_RULES,
                   help="sure: the position's sampling peak (ours) or its draw's probability (Fast-dLLM)")


def rollout_sampler(cache="none", threshold=0.0, threshold_rule="certainty", record=False):
    """grpo.py's rollout sampler for these flags: None when d1's exact sampler does (no option, no record),
    else generate with them bound. A fast rollout changes only WHICH completions are sampled: the
    estimator scores them, so ρ = 1 still at the first inner step (tested)."""
    if cache == "none" and not threshold and not record:
        return None
    return partial(generate, cache=None if cache == "none" else cache, threshold=threshold or None,
                   threshold_rule=threshold_rule, record=record)


if __name__ == "__main__":
    parser = demo_parser("Sample a completion with the field's sampler options")
    parser.add_argument("--cache", type=str, default=None, choices=CACHE_MODES[1:],
                        help="Fast-dLLM key-value cache (approximate; default: none, the exact sampler)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="also write every token with confidence >= this (Fast-dLLM: 0.9; default: off)")
    parser.add_argument("--remasking", type=str, default="low_confidence", choices=ORDERS,
                        help="which blanks a step writes: LLaDA's orders, or Dream's (Dream's own sampler with "
                             "--block-length = --gen-length) (default: %(default)s)")
    parser.add_argument("--eps", type=float, default=1e-3,
                        help="Dream's orders: their schedule runs noise levels linspace(1, eps) (default: %(default)s)")
    parser.add_argument("--alg-temp", type=float, default=0.0, help="Dream's confidence orders: 0 = the top "
                        "confidences, else positions drawn from softmax(confidence / alg-temp) (default: %(default)s)")
    demo(parser, generate, ["cache", "threshold", "remasking", "eps", "alg_temp"])
