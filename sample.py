"""
Semi-autoregressive masked-diffusion sampling for LLaDA (the sampler d1 uses for RL rollouts and eval).

A masked diffusion LM does not write left to right. We start from a canvas
[prompt | mask x gen_length] and, over `steps` forward passes, repeatedly predict every masked
position at once, keep the few predictions the model is most confident about, and leave the rest
masked for the next pass ("low-confidence remasking", LLaDA paper arXiv 2502.09992, Sec. 2.4 and
App. B). The canvas is split into blocks of `block_length` that are finished strictly left to right
("semi-autoregressive remasking", App. B.3); inside a block the order is free. d1 (arXiv 2504.12216,
Sec. 2 / its code) uses this exact algorithm, e.g. gen_length=256, block_length=32, steps=128.

Deliberate differences from the reference code (same algorithm, different numerics / RNG stream):
  - the low-confidence softmax runs in fp32 (LLaDA HEAD and d1's RL copy run it in bf16, which
    creates many ties between confidences);
  - Gumbel noise is float64 as in LLaDA, but drawn only over the current block, not all of [B, L, V];
  - the mask token is never picked as a prediction (LLaDA could, in principle, "write" a mask).

Faster, approximate options (Fast-dLLM, arXiv 2505.22618; off by default, see generate()):
  cache="prefix" | "dual" reuses each layer's keys/values from the block's first step (model.py's
  past_kv), and threshold=0.9 writes every token the model is that sure of in one step. Their
  speed-up and agreement with the exact sampler are measured in docs/performance.md, and inside RL
  rollouts (with why our threshold rule differs from Fast-dLLM's when sampling) in docs/fast-rollouts.md.

Dream's decoding orders (Dream-org/Dream-v0-Instruct-7B; the `diffusion_generate` of Dream's
generation_utils.py, its `alg` option): remasking="origin" | "maskgit_plus" | "topk_margin" | "entropy",
with `eps` and `alg_temp`. With block_length = gen_length (one block) this is Dream's own sampler over the
whole canvas; they bring Dream's step schedule with them (dream_transfer_tokens). The model's forward
returns logits aligned with their positions (model.py shifts Dream's by one), so the sampler stays
model-agnostic: any order runs on any model.

Run a tiny demo on CPU (creates a random tiny model on first use):
    python sample.py --prompt "What is 2+3?" --gen-length 32 --block-length 8 --steps 16
    python sample.py --gen-length 256 --block-length 32 --steps 128 --cache dual --threshold 0.9
    python sample.py --gen-length 64 --block-length 64 --steps 64 --remasking entropy --eps 1e-3
"""
import argparse

import torch
import torch.nn.functional as F

from model import SHIFT_NO_CACHE
from ops.metrics import progress as progress_bar

# LLaDA's orders (with its even schedule), then Dream's (with Dream's schedule; "origin" writes each blank by
# a coin flip, the other three rank a confidence). The names are Dream's `alg` values
DREAM_CONFIDENCES = ("maskgit_plus", "topk_margin", "entropy")
DREAM_ORDERS = ("origin", *DREAM_CONFIDENCES)
REMASKING_STRATEGIES = ("low_confidence", "random", *DREAM_ORDERS)
# which blanks `threshold` writes at once: those whose sampling distribution peaks at >= τ, with their sampled
# token (ours), or those whose sampled token's temperature-1 probability is >= τ (Fast-dLLM's). The same at
# temperature 0; above it, Fast-dLLM's rule turns away draws that missed the mode (docs/fast-rollouts.md)
THRESHOLD_RULES = ("certainty", "fast_dllm")
CACHE_MODES = (None, "prefix", "dual")  # None = the exact sampler (every step runs the full canvas)

# -----------------------------------------------------------------------------
# small pure helpers


def num_transfer_tokens(mask_count: torch.Tensor, steps: int) -> torch.Tensor:
    """Split each row's number of masked positions evenly over `steps` steps -> (B, steps) long.
    Under LLaDA's linear noise schedule the expected number of tokens unmasked per step is constant,
    so every step gets count // steps and the first count % steps steps get one extra
    (10 over 4 -> 3, 3, 2, 2)."""
    base = (mask_count // steps)[:, None]                                   # (B, 1)
    remainder = (mask_count % steps)[:, None]                               # (B, 1)
    step_idx = torch.arange(steps, device=mask_count.device)[None, :]       # (1, steps)
    # step s gets the extra token iff s < remainder, so the early steps carry the remainder
    return base + (step_idx < remainder).long()                             # (B, steps)


def dream_transfer_tokens(mask_count: torch.Tensor, steps: int, eps: float) -> torch.Tensor:
    """Dream's counts (diffusion_generate): going from noise level t = ts[i] to s = ts[i + 1], ts =
    linspace(1, eps, steps + 1), step i writes int(n * (1 - s / t)) of the n blanks left, the last step all
    of them. mask_count (B,) -> (B, steps) long. Flooring makes early steps write little, even 0, and
    leaves most to the last (10 over 4 -> 2, 2, 2, 4). As in Dream, n is the batch AVERAGE: every row gets the
    same counts (in generate() every row starts a block with the same count, so the average is each row's)."""
    ts = torch.linspace(1, eps, steps + 1, device=mask_count.device)        # (steps + 1,) fp32, as Dream's
    n = mask_count.sum() / mask_count.shape[0]                              # () fp32: Dream's num_mask_token
    counts = []
    for i in range(steps):
        # in fp32 like Dream, so int() floors the same products; every row writes k, so n drops by k exactly
        k = (n * (1 - ts[i + 1] / ts[i])).long() if i < steps - 1 else n.long()  # ()
        counts.append(k)
        n = n - k
    return torch.stack(counts).expand(mask_count.shape[0], steps)           # (B, steps)


def check_schedule(gen_length: int, block_length: int, steps: int) -> tuple[int, int]:
    """Validate the block/step layout and return (num_blocks, steps_per_block)."""
    if gen_length <= 0 or block_length <= 0:
        raise ValueError(f"gen_length ({gen_length}) and block_length ({block_length}) must be positive")
    if gen_length % block_length != 0:
        raise ValueError(f"gen_length ({gen_length}) must be a multiple of block_length ({block_length}); "
                         f"change one of them, e.g. block_length={gen_length} for a single block")
    num_blocks = gen_length // block_length
    # LLaDA asserts both divisibilities; d1 floors steps // num_blocks instead (docs/d1.md §2.1). We
    # refuse, so the number of forward passes is never silently different from `steps`.
    if steps <= 0 or steps < num_blocks:
        raise ValueError(f"steps ({steps}) must be >= the number of blocks ({num_blocks} = gen_length / "
                         f"block_length): every block needs at least one step; raise steps or block_length")
    if steps % num_blocks != 0:
        raise ValueError(f"steps ({steps}) must be a multiple of the number of blocks ({num_blocks}) so "
                         f"every block gets the same number of steps; "
                         f"e.g. steps={(steps // num_blocks) * num_blocks}")
    return num_blocks, steps // num_blocks


def check_generate_args(prompt, attention_mask, gen_length, block_length, steps, temperature, cfg_scale,
                        remasking, mask_id, cache, threshold, threshold_rule="certainty", eps=1e-3,
                        alg_temp=0.0) -> tuple[int, int]:
    """Every check of generate()'s arguments, in one place, before any work is done: the block/step
    layout (check_schedule), the options and the combinations that have no meaning, and the prompt
    (B, P) long with its optional attention_mask (B, P). Returns check_schedule's (num_blocks,
    steps_per_block)."""
    num_blocks, steps_per_block = check_schedule(gen_length, block_length, steps)
    if remasking not in REMASKING_STRATEGIES:
        raise ValueError(f"remasking must be one of {REMASKING_STRATEGIES}, got {remasking!r}")
    if cache not in CACHE_MODES:
        raise ValueError(f"cache must be one of {CACHE_MODES}, got {cache!r}")
    if cache is not None and cfg_scale != 0.0:
        raise ValueError("cache works with cfg_scale=0 only (the doubled CFG batch is not cached); "
                         "d1 and Fast-dLLM sample without CFG")
    if threshold is not None and (remasking != "low_confidence" or not 0.0 < threshold <= 1.0):
        raise ValueError(f"threshold must be in (0, 1] and needs remasking='low_confidence' (it is a "
                         f"confidence), got threshold={threshold}, remasking={remasking!r}")
    # Dream's diffusion_generate has neither a cache nor CFG; with a Dream model the cached window would also
    # lack the column left of it that the shift by one reads
    if remasking in DREAM_ORDERS and (cache is not None or cfg_scale != 0.0):
        raise ValueError(f"remasking={remasking!r} (Dream's) takes no cache and no cfg_scale, "
                         f"got {cache=}, {cfg_scale=}")
    if not 0.0 <= eps < 1.0:
        raise ValueError(f"eps (Dream's schedule runs linspace(1, eps)) must be in [0, 1), got {eps}")
    if alg_temp < 0 or (alg_temp > 0 and remasking not in DREAM_CONFIDENCES):
        raise ValueError(f"alg_temp must be >= 0 and > 0 only with {DREAM_CONFIDENCES}, got {alg_temp=}, {remasking=}")
    if threshold_rule not in THRESHOLD_RULES:
        raise ValueError(f"threshold_rule must be one of {THRESHOLD_RULES}, got {threshold_rule!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if prompt.dim() != 2:
        raise ValueError(f"prompt must be (B, P) token ids, got shape {tuple(prompt.shape)}")
    # a mask inside the prompt would be filled in like a blank of the canvas
    if (prompt == mask_id).any():
        raise ValueError(f"prompt contains the mask token id {mask_id}: the sampler would treat those "
                         f"positions as blanks to fill (and CFG as prompt-free); pad with EOS instead "
                         f"and strip stray masks")
    if attention_mask is not None and attention_mask.shape != prompt.shape:
        raise ValueError(f"attention_mask shape {tuple(attention_mask.shape)} "
                         f"!= prompt shape {tuple(prompt.shape)}")
    return num_blocks, steps_per_block


def uniform(shape, generator, device, dtype=torch.float32) -> torch.Tensor:
    """U[0,1) noise drawn on the generator's own device and then moved, so a CPU torch.Generator
    works (and gives the same numbers) even when the model lives on a GPU."""
    # a generator only draws on its own device: a CPU generator cannot fill a CUDA tensor directly
    draw_device = generator.device if generator is not None else device
    return torch.rand(shape, generator=generator, device=draw_device, dtype=dtype).to(device)


def sample_tokens(logits: torch.Tensor, temperature: float, generator=None) -> torch.Tensor:
    """Pick one token per position: argmax at temperature 0, else Gumbel-max sampling from
    softmax(logits / T). logits (B, K, V) -> (B, K) long.
    LLaDA writes this as argmax(exp(logits) / (-log U)^T); taking the log of that gives the
    numerically safer argmax(logits / T - log(-log U)), the same argmax. The noise is float64 because
    low-precision Gumbel noise measurably hurts samples (arXiv 2409.02908, cited by LLaDA)."""
    # temperature 0: plain argmax and no noise drawn (d1's eval setting, docs/d1.md §2.3)
    if temperature == 0.0:
        return logits.argmax(dim=-1)                                        # (B, K)
    u = uniform(logits.shape, generator, logits.device, torch.float64)   # (B, K, V)
    # g = -log(-log U) ~ Gumbel(0, 1), and argmax(l / T + g) is an exact sample from softmax(l / T)
    gumbel = -torch.log(-torch.log(u))  # (B, K, V); u == 0 gives -inf: that token just never wins
    # divide in float64 too, so l / T is not rounded in fp32 before the float64 noise is added
    return (logits.double() / temperature + gumbel).argmax(dim=-1)      # (B, K)


def select_top_k(confidence: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Per row, mark the k[row] highest-confidence positions. confidence (B, K), k (B,) -> bool (B, K).
    Rows have different k, so we rank instead of calling topk once; ties break arbitrarily (as in LLaDA)."""
    order = confidence.argsort(dim=-1, descending=True)                     # (B, K) positions, best first
    # invert the permutation: ranks[row, order[row, j]] = j, i.e. each position's place in the order
    ranks = torch.empty_like(order)                                         # (B, K)
    ranks.scatter_(-1, order, torch.arange(order.shape[-1], device=order.device).expand_as(order))
    # a row with k = 0 marks nothing, a row with k >= K marks everything
    return ranks < k[:, None]                                               # (B, K)


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


def block_logits(model, x, attention_mask, prompt_index, mask_id, cfg_scale, start, end) -> torch.Tensor:
    """One denoising forward over the whole canvas, returning fp32 logits of columns [start, end) only,
    (B, K, V): nothing outside the current block can be written, and at 8B scale the full fp32
    (B, L, V) tensor would be gigabytes. With cfg_scale > 0, classifier-free guidance (LLaDA App. B):
    the unconditional input is x with every original prompt position masked; both go through the
    model as one doubled batch and are mixed as un + (cfg_scale + 1) * (cond - un), here in fp32."""
    # slice the block BEFORE .float(): only (B, K, V) is ever copied to fp32
    if cfg_scale == 0.0:
        return model(x, attention_mask=attention_mask)[:, start:end].float()  # (B, K, V)
    # prompt_index also covers left-pad positions, so pads are masked too, as in LLaDA (docs/llada.md §5)
    x_uncond = x.masked_fill(prompt_index, mask_id)                         # (B, L)
    am = None if attention_mask is None else torch.cat([attention_mask, attention_mask])  # (2B, L)
    logits = model(torch.cat([x, x_uncond]), attention_mask=am)[:, start:end].float()  # (2B, K, V)
    cond, uncond = logits.chunk(2, dim=0)                                   # 2 x (B, K, V)
    return uncond + (cfg_scale + 1.0) * (cond - uncond)                     # (B, K, V) fp32

# -----------------------------------------------------------------------------
# the sampler


@torch.no_grad()
def generate(model, prompt, attention_mask=None, gen_length=128, block_length=32, steps=64,
             temperature=0.0, cfg_scale=0.0, remasking="low_confidence", mask_id=None,
             generator=None, progress=False, cache=None, threshold=None, threshold_rule="certainty", stats=None,
             record=False, eps=1e-3, alg_temp=0.0):
    """Fill gen_length masked positions after `prompt` (B, P) long -> (B, P + gen_length) long.
    Prompts in a batch should be left-padded; attention_mask (B, P) is an optional 1/0 key-padding
    mask (d1 never passes one: it lets pads be attended). The caller's train/eval mode is kept.

    The defaults are the exact sampler (LLaDA's / d1's). Two Fast-dLLM options (arXiv 2505.22618)
    trade exactness for speed; both are approximations and both are off by default:
      cache="prefix": at each block's first step run the full canvas once and keep every layer's
          keys/values; the block's later steps forward only columns [block start, end of canvas)
          and reuse the cached prefix (prompt + finished blocks).
      cache="dual": also reuse the cached keys/values of the masked suffix right of the block, so
          later steps forward only the block's columns (B, block_length).
      threshold=τ: confidence-threshold parallel unmasking. Each step writes the scheduled number
          of tokens and also every masked position of the block the model is sure of (Fast-dLLM
          uses τ = 0.9); a block whose masks run out early skips its remaining steps, so `steps`
          becomes an upper bound on forward passes. "Sure" is threshold_rule's: "certainty" (ours)
          a position whose sampling distribution softmax(logits / T) peaks at >= τ, written with
          its sampled token whatever it is; "fast_dllm" a position whose sampled token has
          temperature-1 probability >= τ. Greedy (T = 0) they are one rule, and with steps =
          gen_length exactly Fast-dLLM's "top-1 plus everything >= τ". Sampling (T > 0),
          Fast-dLLM's rule writes a draw at once only if it hit a likely token and draws again
          otherwise, which pulls the samples toward the mode (docs/fast-rollouts.md).
    The number of forward passes under `threshold` depends on the data: under FSDP every rank must
    make the same calls, so do not combine it with sharded models. `stats`, a dict, receives
    "model_calls": the forward passes made (grpo.py logs it per rollout); with record=True also the
    trajectory, what the trajectory objectives score (methods/): "commit_step" (B, gen_length) long,
    the step (0 .. steps-1, counted over all blocks) at which each position was written, and
    "token_logp" (B, gen_length) fp32, the log-prob of the written token under that step's logits
    (temperature 1, the whole vocabulary): the model's conditional at the canvas it was written on.

    Dream's orders (remasking in DREAM_ORDERS; Dream's diffusion_generate is this with block_length =
    gen_length) replace both the confidence and the schedule: step i goes from noise level t = ts[i] to
    s = ts[i + 1], ts = linspace(1, eps, steps_per_block + 1) (Dream's default eps = 1e-3).
      "origin": each blank is written with probability 1 - s/t (all left at the last step), no ranking;
      "maskgit_plus" / "topk_margin" / "entropy": the dream_transfer_tokens count of blanks with the best
          dream_confidence; alg_temp > 0 draws those positions from softmax(confidence / alg_temp) instead.
    The schedule comes with the order rather than as a separate option: Dream pairs them so, "origin" has no
    count to schedule, and a free pairing would add combinations no one runs. Per block they give semi-AR
    Dream. Not with cache, cfg_scale or threshold."""
    # the mask id comes from the model's config.json, never from a literal 126336
    mask_id = model.config.mask_token_id if mask_id is None else mask_id
    num_blocks, steps_per_block = check_generate_args(prompt, attention_mask, gen_length, block_length, steps,
                                                      temperature, cfg_scale, remasking, mask_id, cache, threshold,
                                                      threshold_rule, eps, alg_temp)
    if cache and getattr(model.config, "logit_shift", False):  # Dream: column `start` reads column start - 1
        raise ValueError(f"cache={cache!r} does not apply to a model with shifted logits (Dream): {SHIFT_NO_CACHE}")
    B, P = prompt.shape

    # the canvas: prompt, then all-mask. prompt_index is fixed now and only used by CFG.
    x = torch.full((B, P + gen_length), mask_id, dtype=torch.long, device=prompt.device)  # (B, L)
    x[:, :P] = prompt                                                       # (B, L), prompt in [0, P)
    prompt_index = x != mask_id                                             # (B, L)
    if attention_mask is not None:
        # generated positions are always real tokens, so they are always attended
        # (d1 passes no mask at all: its left pads are attended like any token, docs/d1.md §1)
        ones = torch.ones((B, gen_length), dtype=attention_mask.dtype, device=attention_mask.device)  # (B, gen_length)
        attention_mask = torch.cat([attention_mask, ones], dim=1)           # (B, L)

    mask_token = torch.tensor([mask_id], device=x.device)  # (1,) index for banning it from x0
    # Dream's noise levels for one block's steps ("origin" reads them): step i goes from t = ts[i] to s = ts[i + 1]
    ts = torch.linspace(1, eps, steps_per_block + 1, device=x.device) if remasking == "origin" else None  # (S + 1,)

    if record:  # filled as positions are written; -1 / 0 never survive (every position is written)
        commit = torch.full((B, gen_length), -1, dtype=torch.long, device=x.device)  # (B, gen_length)
        token_logp = torch.zeros((B, gen_length), device=x.device)  # (B, gen_length) fp32
    bar = progress_bar(total=num_blocks * steps_per_block, show=progress, desc="sampling")  # TQDM_DISABLE wins
    calls = 0  # forward passes made: num_blocks * steps_per_block unless `threshold` ends blocks early
    for b in range(num_blocks):
        start, end = P + b * block_length, P + (b + 1) * block_length  # the block's canvas columns
        # schedule for this block from its current mask count (always block_length here, since
        # prompts hold no masks and earlier blocks never write right of themselves)
        count = (x[:, start:end] == mask_id).sum(dim=1)                     # (B,)
        if remasking in DREAM_ORDERS:  # unused by "origin", which flips a coin per blank
            schedule = dream_transfer_tokens(count, steps_per_block, eps)  # (B, S)
        else:
            schedule = num_transfer_tokens(count, steps_per_block)          # (B, S)
        kv = None  # the block's key/value cache (cached sampler only), made at its first step
        for i in range(steps_per_block):
            # the block's positions that are still blank; K = block_length
            block_mask = x[:, start:end] == mask_id                         # (B, K)
            # only with `threshold` can a block finish before its last step (checked only then: the
            # check is a GPU -> CPU sync)
            if threshold is not None and not block_mask.any():
                break
            # Only masked positions inside this block can be written (LLaDA sets confidence to -inf
            # right of the block and on every unmasked position), so we work on the block's slice.
            # Same result; it also means our Gumbel noise is (B, K, V) instead of LLaDA's (B, L, V):
            # same distribution, different RNG stream, so seeded samples won't match LLaDA bit for bit.
            # Cached modes: at a block's first step one full forward refreshes every layer's keys/values;
            # later steps recompute only the window. Keys/values outside it go stale as the block fills
            # (attention is bidirectional), which is the approximation, reset at every block. prefix
            # reuses the prompt + finished blocks; dual also the all-mask suffix right of the block.
            if cache is None:  # exact: the whole current canvas, every step
                logits = block_logits(model, x, attention_mask, prompt_index, mask_id, cfg_scale,
                                      start, end)                           # (B, K, V) fp32
            elif i == 0:  # cache refresh: one exact full forward that also keeps every layer's k, v
                full, kv = model(x, attention_mask=attention_mask, return_kv=True)  # (B, L, V)
                logits = full[:, start:end].float()                         # (B, K, V) fp32
            else:  # forward the window only; columns outside it use keys/values from the refresh
                stop = end if cache == "dual" else x.shape[1]  # prefix: block + masked suffix
                # the window starts at the block, so its first K columns of logits are the block's
                logits = model(x[:, start:stop], attention_mask=attention_mask, past_kv=kv,
                               start=start)[:, :end - start].float()        # (B, K, V) fp32
            # Deviation: the mask token itself may never be chosen. LLaDA does not guard this (its
            # trained model never predicts it), but a random or tiny model can, and a "written" mask
            # would silently stay a blank forever. Confidence below still uses the untouched logits.
            choice_logits = logits.index_fill(-1, mask_token, float("-inf"))  # (B, K, V)
            x0 = sample_tokens(choice_logits, temperature, generator)       # (B, K)
            if remasking == "low_confidence":
                # probability of the chosen token under the un-noised (temperature-1) logits. We use
                # fp32 on purpose; LLaDA HEAD and d1's RL sampler do this softmax in bf16.
                probs = F.softmax(logits, dim=-1)                           # (B, K, V) fp32
                confidence = probs.gather(-1, x0[..., None]).squeeze(-1)    # (B, K)
            elif remasking == "random":  # keep a uniformly random subset of the masked positions
                confidence = uniform(block_mask.shape, generator, x.device)  # (B, K)
            elif remasking in DREAM_CONFIDENCES:
                confidence = dream_confidence(logits, x0, remasking, temperature)  # (B, K)
            if remasking == "origin":
                # Dream's "origin": every blank independently, with probability 1 - s/t. Dream draws tokens only
                # for the blanks it writes; we draw all (same distribution, another RNG stream)
                p = 1 - ts[i + 1] / ts[i] if i < steps_per_block - 1 else 1.0  # () or 1: all at the last step
                transfer = (uniform(block_mask.shape, generator, x.device) < p) & block_mask  # (B, K)
            else:
                # -inf on written positions: ranked last, so a written token is never re-masked or changed
                confidence = confidence.masked_fill(~block_mask, float("-inf"))  # (B, K)
                if alg_temp > 0:
                    # Dream draws k positions from softmax(confidence / alg_temp) without replacement
                    # (multinomial); the top k of confidence / alg_temp + Gumbel noise is the same draw
                    # (Gumbel-top-k), and our generator works on any device. float64 makes u = 0 (noise -inf:
                    # a blank that could miss the last step's count) practically impossible
                    u = uniform(block_mask.shape, generator, x.device, torch.float64)  # (B, K)
                    confidence = confidence.double() / alg_temp - torch.log(-torch.log(u))  # (B, K)
                # the schedule: the k most confident blanks. & block_mask: after early extra writes, k can
                # exceed the blanks left, and top-k would then also pick -inf (already written) positions
                transfer = select_top_k(confidence, schedule[:, i]) & block_mask  # (B, K)
            if threshold is not None:  # parallel unmasking: also every blank the model is sure of
                # certainty: how likely the draw at this position is its mode (then writing it now, in
                # parallel, costs little), whichever token was drawn: an unbiased draw of the position
                sure = confidence if threshold_rule == "fast_dllm" or temperature == 0 else \
                    F.softmax(choice_logits / temperature, dim=-1).amax(dim=-1)  # (B, K)
                transfer |= (sure >= threshold) & block_mask                # (B, K)
            # write the chosen predictions; everything else stays masked for a later step
            x[:, start:end] = torch.where(transfer, x0, x[:, start:end])    # (B, K)
            if record:  # the step each position is written at, and its token's log-prob there (log_softmax, as
                # logprob.token_logprobs computes it, so a recomputation on the same canvas gives the same value)
                lp = torch.log_softmax(logits, dim=-1).gather(-1, x0[..., None]).squeeze(-1)  # (B, K)
                cols = slice(start - P, end - P)
                commit[:, cols] = torch.where(transfer, b * steps_per_block + i, commit[:, cols])
                token_logp[:, cols] = torch.where(transfer, lp, token_logp[:, cols])
            calls += 1
            bar.update(1)
    bar.close()
    if stats is not None:
        stats["model_calls"] = calls
        if record:
            stats["commit_step"], stats["token_logp"] = commit, token_logp
    # the whole canvas; callers slice [:, P:] and decode with skip_special_tokens=True
    return x                                                                # (B, P + gen_length)

# -----------------------------------------------------------------------------
# a small CLI demo, in the spirit of nanoGPT's sample.py

if __name__ == "__main__":
    from modelio.checkpoint import TINY_DIR, load
    from modelio.tokenizer import prompt_ids

    parser = argparse.ArgumentParser(description="Sample a completion from LLaDA with the semi-AR sampler")
    parser.add_argument("--model-dir", type=str, default=TINY_DIR,
                        help="checkpoint dir, official layout (the default tiny model is made if missing)")
    parser.add_argument("--prompt", type=str, default="What is 2+3?", help="user message")
    parser.add_argument("--gen-length", type=int, default=64, help="number of tokens to generate")
    parser.add_argument("--block-length", type=int, default=32, help="semi-AR block size, divides gen-length")
    parser.add_argument("--steps", type=int, default=32, help="denoising steps, a multiple of #blocks")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy; d1's RL rollouts use 0.9")
    parser.add_argument("--seed", type=int, default=1337, help="seed for sampling noise")
    parser.add_argument("--cache", type=str, default="", choices=["", *CACHE_MODES[1:]],
                        help="'' = exact sampler; prefix / dual = Fast-dLLM key-value cache (approximate)")
    parser.add_argument("--threshold", type=float, default=0.0,
                        help="0 = off; else also write every token with confidence >= this (Fast-dLLM: 0.9)")
    parser.add_argument("--remasking", type=str, default="low_confidence", choices=REMASKING_STRATEGIES,
                        help="which blanks a step writes: LLaDA's orders, or Dream's (Dream's own sampler with "
                             "--block-length = --gen-length) (default: %(default)s)")
    parser.add_argument("--eps", type=float, default=1e-3,
                        help="Dream's orders: their schedule runs noise levels linspace(1, eps) (default: %(default)s)")
    parser.add_argument("--alg-temp", type=float, default=0.0, help="Dream's confidence orders: 0 = the top "
                        "confidences, else positions drawn from softmax(confidence / alg-temp) (default: %(default)s)")
    args = parser.parse_args()
    print(vars(args))

    device = "cuda" if torch.cuda.is_available() else "cpu"
    # a bad directory, or options that do not combine (generate checks them before any forward): one line, exit 2
    try:
        model, tokenizer = load(args.model_dir, device=device)
        # generate() keeps the caller's train/eval mode; a demo wants dropout off
        model.eval()
        prompt = torch.tensor([prompt_ids(tokenizer, args.prompt)], device=device)  # (1, P)
        generator = torch.Generator().manual_seed(args.seed)  # CPU generator; works for a GPU model too
        # the CLI spells "off" as '' and 0; generate() takes None
        out = generate(model, prompt, gen_length=args.gen_length, block_length=args.block_length,
                       steps=args.steps, temperature=args.temperature, generator=generator, progress=True,
                       cache=args.cache or None, threshold=args.threshold or None, remasking=args.remasking,
                       eps=args.eps, alg_temp=args.alg_temp)  # (1, P + gen_length)
    except (ValueError, FileNotFoundError) as e:
        parser.exit(2, f"sample.py: error: {e}\n")
    print(tokenizer.decode(out[0, prompt.shape[1]:].tolist(), skip_special_tokens=True))
