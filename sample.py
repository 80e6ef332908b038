"""
The semi-autoregressive masked-diffusion sampler of LLaDA, the one d1 uses for RL rollouts and
eval.

A masked diffusion LM does not write left to right. We start from a canvas
[prompt | mask x gen_length] and, over `steps` forward passes, repeatedly predict every masked
position at once, keep the few predictions the model is most confident about, and leave the
rest masked for the next pass ("low-confidence remasking", LLaDA paper arXiv 2502.09992,
Sec. 2.4 and App. B). The canvas is split into blocks of `block_length` that are finished
strictly left to right ("semi-autoregressive remasking", App. B.3); inside a block the order is
free. d1 (arXiv 2504.12216, Sec. 2 / its code) uses this exact algorithm, e.g. gen_length=256,
block_length=32, steps=128.

Deliberate differences from the reference code (same algorithm, other numerics / RNG stream):
  - the low-confidence softmax runs in fp32 (LLaDA HEAD and d1's RL copy run it in bf16, which
    creates many ties between confidences);
  - Gumbel noise is float64 as in LLaDA, but drawn only over the current block, not [B, L, V];
  - the mask token is never picked as a prediction (LLaDA could, in principle, "write" a mask).

The pieces (schedule, Gumbel draw, confidences, top-k, the demo) are functions of their own, so
that another sampler can be built from them.

Run a tiny demo on CPU (creates a random tiny model on first use):
    python sample.py --prompt "What is 2+3?" --gen-length 32 --block-length 8 --steps 16
"""
import argparse

import torch
import torch.nn.functional as F

from modelio.checkpoint import TINY_DIR, load
from modelio.tokenizer import prompt_ids

REMASKING_STRATEGIES = ("low_confidence", "random")  # LLaDA's two: which blanks a step writes

# -----------------------------------------------------------------------------
# small pure helpers


def num_transfer_tokens(mask_count: torch.Tensor, steps: int) -> torch.Tensor:
    """Split each row's count of masked positions evenly over `steps` steps -> (B, steps) long.
    Under LLaDA's linear noise schedule the expected number of tokens unmasked per step is
    constant, so every step gets count // steps and the first count % steps steps get one extra
    (10 over 4 -> 3, 3, 2, 2)."""
    base = (mask_count // steps)[:, None]                                   # (B, 1)
    remainder = (mask_count % steps)[:, None]                               # (B, 1)
    step_idx = torch.arange(steps, device=mask_count.device)[None, :]       # (1, steps)
    # step s gets the extra token iff s < remainder, so the early steps carry the remainder
    return base + (step_idx < remainder).long()                             # (B, steps)


def check_schedule(gen_length: int, block_length: int, steps: int) -> tuple[int, int]:
    """Validate the block/step layout and return (num_blocks, steps_per_block)."""
    if gen_length <= 0 or block_length <= 0:
        raise ValueError(
            f"gen_length ({gen_length}) and block_length ({block_length}) must be positive")
    if gen_length % block_length != 0:
        raise ValueError(f"gen_length ({gen_length}) must be a multiple of block_length "
                         f"({block_length}); change one of them, e.g. "
                         f"block_length={gen_length} for a single block")
    num_blocks = gen_length // block_length
    # LLaDA asserts both divisibilities; d1 floors steps // num_blocks (docs/d1.md §2.1). We
    # refuse, so the number of forward passes is never silently different from `steps`.
    if steps <= 0 or steps < num_blocks:
        raise ValueError(f"steps ({steps}) must be >= the number of blocks ({num_blocks} = "
                         f"gen_length / block_length): every block needs at least one step; "
                         f"raise steps or block_length")
    if steps % num_blocks != 0:
        raise ValueError(f"steps ({steps}) must be a multiple of the number of blocks "
                         f"({num_blocks}) so every block gets the same number of steps; "
                         f"e.g. steps={(steps // num_blocks) * num_blocks}")
    return num_blocks, steps // num_blocks


def check_generate_args(prompt, attention_mask, gen_length, block_length, steps, temperature,
                        remasking, mask_id,
                        strategies=REMASKING_STRATEGIES) -> tuple[int, int]:
    """Every check of a sampler's arguments, before any work is done: the block/step layout
    (check_schedule), the remasking order (one of `strategies`), the temperature, and the
    prompt (B, P) long with its optional attention_mask (B, P).
    Returns check_schedule's (num_blocks, steps_per_block)."""
    num_blocks, steps_per_block = check_schedule(gen_length, block_length, steps)
    if remasking not in strategies:
        raise ValueError(f"remasking must be one of {strategies}, got {remasking!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if prompt.dim() != 2:
        raise ValueError(f"prompt must be (B, P) token ids, got shape {tuple(prompt.shape)}")
    # a mask inside the prompt would be filled in like a blank of the canvas
    if (prompt == mask_id).any():
        raise ValueError(f"prompt contains the mask token id {mask_id}: the sampler would "
                         f"treat those positions as blanks to fill (and CFG as prompt-free); "
                         f"pad with EOS instead and strip stray masks")
    if attention_mask is not None and attention_mask.shape != prompt.shape:
        raise ValueError(f"attention_mask shape {tuple(attention_mask.shape)} "
                         f"!= prompt shape {tuple(prompt.shape)}")
    return num_blocks, steps_per_block


def new_canvas(prompt, attention_mask, gen_length, mask_id):
    """[prompt | mask x gen_length] (B, P + N), and the attention mask extended over the canvas
    (its generated positions are always real tokens, so always attended), or None (d1 passes
    none: its left pads are attended like any token, docs/d1.md §1)."""
    B, P = prompt.shape
    x = torch.full((B, P + gen_length), mask_id, dtype=torch.long,
                   device=prompt.device)  # (B, L)
    x[:, :P] = prompt
    if attention_mask is not None:
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones(B, gen_length)],
                                   dim=1)  # (B, L)
    return x, attention_mask


def draw_device(generator, default):
    """Where noise from `generator` is drawn: a generator draws only on its own device (a CPU
    generator cannot fill a CUDA tensor directly); no generator: `default`."""
    return generator.device if generator is not None else default


def uniform(shape, generator, device, dtype=torch.float32) -> torch.Tensor:
    """U[0,1) noise drawn on the generator's own device and then moved, so a CPU
    torch.Generator works (and gives the same numbers) even when the model lives on a GPU."""
    u = torch.rand(shape, generator=generator, device=draw_device(generator, device),
                   dtype=dtype)
    return u.to(device)


def sample_tokens(logits: torch.Tensor, temperature: float, generator=None) -> torch.Tensor:
    """Pick one token per position: argmax at temperature 0, else Gumbel-max sampling from
    softmax(logits / T). logits (B, K, V) -> (B, K) long.
    LLaDA writes this as argmax(exp(logits) / (-log U)^T); its log gives the numerically safer
    argmax(logits / T - log(-log U)), the same argmax. The noise is float64 because
    low-precision Gumbel noise measurably hurts samples (arXiv 2409.02908, cited by LLaDA)."""
    # temperature 0: plain argmax and no noise drawn (d1's eval setting, docs/d1.md §2.3)
    if temperature == 0.0:
        return logits.argmax(dim=-1)                                        # (B, K)
    u = uniform(logits.shape, generator, logits.device, torch.float64)   # (B, K, V)
    # g = -log(-log U) ~ Gumbel(0, 1); argmax(l / T + g) is an exact sample of softmax(l / T)
    gumbel = -torch.log(-torch.log(u))  # (B, K, V); u == 0 gives -inf: that token never wins
    # divide in float64 too, so l / T is not rounded in fp32 before the float64 noise is added
    return (logits.double() / temperature + gumbel).argmax(dim=-1)      # (B, K)


def select_top_k(confidence: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Per row, mark the k[row] highest-confidence positions.
    confidence (B, K), k (B,) -> bool (B, K). Rows have different k, so we rank instead of
    calling topk once; ties break arbitrarily (as in LLaDA)."""
    order = confidence.argsort(dim=-1, descending=True)  # (B, K) positions, best first
    # invert the permutation: ranks[row, order[row, j]] = j, each position's place in the order
    ranks = torch.empty_like(order)                                         # (B, K)
    places = torch.arange(order.shape[-1], device=order.device).expand_as(order)  # (B, K)
    ranks.scatter_(-1, order, places)
    # a row with k = 0 marks nothing, a row with k >= K marks everything
    return ranks < k[:, None]                                               # (B, K)


def predict(logits, mask_id, temperature, generator=None):
    """A token for every position of the block, (B, K, V) -> (B, K), and the logits it was
    drawn from. Deviation: the mask token may never be chosen. LLaDA does not guard this (its
    trained model never predicts it), but a random or tiny model can, and a "written" mask
    would stay a blank forever. The confidences keep using the untouched logits."""
    mask_token = torch.tensor([mask_id], device=logits.device)  # (1,)
    choice_logits = logits.index_fill(-1, mask_token, float("-inf"))  # (B, K, V)
    return sample_tokens(choice_logits, temperature, generator), choice_logits


def remasking_confidence(logits, x0, remasking, generator=None):
    """How sure a step is of each prediction x0 (B, K); the most confident blanks are written
    first. low_confidence: the chosen token's probability under the un-noised (temperature-1)
    logits, in fp32 on purpose (LLaDA HEAD and d1's RL sampler do this softmax in bf16);
    random: a uniformly random order."""
    if remasking == "low_confidence":
        probs = F.softmax(logits, dim=-1)                                   # (B, K, V) fp32
        return probs.gather(-1, x0[..., None]).squeeze(-1)                  # (B, K)
    return uniform(x0.shape, generator, x0.device)                          # (B, K)


def block_logits(
    model, x, attention_mask, prompt_index, mask_id, cfg_scale, start, end
) -> torch.Tensor:
    """One denoising forward over the whole canvas -> fp32 logits (B, K, V) of columns
    [start, end) only: nothing outside the current block can be written, and at 8B scale the
    full fp32 (B, L, V) tensor would be gigabytes. cfg_scale > 0: classifier-free guidance
    (LLaDA App. B); the unconditional input is x with every original prompt position masked,
    both go through the model as one doubled batch and are mixed in fp32 as
    un + (cfg_scale + 1) * (cond - un)."""
    # slice the block BEFORE .float(): only (B, K, V) is ever copied to fp32
    if cfg_scale == 0.0:
        return model(x, attention_mask=attention_mask)[:, start:end].float()  # (B, K, V)
    # prompt_index also covers left pads, so pads are masked too, as in LLaDA (llada.md §5)
    x_uncond = x.masked_fill(prompt_index, mask_id)                         # (B, L)
    am = None
    if attention_mask is not None:
        am = torch.cat([attention_mask, attention_mask])                    # (2B, L)
    both = model(torch.cat([x, x_uncond]), attention_mask=am)               # (2B, L, V)
    logits = both[:, start:end].float()                                     # (2B, K, V)
    cond, uncond = logits.chunk(2, dim=0)                                   # 2 x (B, K, V)
    return uncond + (cfg_scale + 1.0) * (cond - uncond)                     # (B, K, V) fp32

# -----------------------------------------------------------------------------
# the sampler


@torch.no_grad()
def generate(model, prompt, attention_mask=None, gen_length=128, block_length=32, steps=64,
             temperature=0.0, cfg_scale=0.0, remasking="low_confidence", generator=None):
    """Fill gen_length masked positions after `prompt` (B, P) long -> (B, P + gen_length) long,
    LLaDA's exact sampler (d1's, docs/d1.md §2). Prompts in a batch should be left-padded;
    attention_mask (B, P) is an optional 1/0 key-padding mask (d1 never passes one: it lets
    pads be attended). The mask id comes from the model's config.json, never from a literal
    126336. Each block gets steps / num_blocks forwards; each forward predicts every blank of
    the block (Gumbel-max at `temperature`) and writes the num_transfer_tokens most confident
    ones. cfg_scale > 0: classifier-free guidance (block_logits). The caller's train/eval mode
    is kept; callers slice [:, P:] and decode with skip_special_tokens."""
    mask_id = model.config.mask_token_id
    num_blocks, steps_per_block = check_generate_args(prompt, attention_mask, gen_length,
                                                      block_length, steps, temperature,
                                                      remasking, mask_id)
    x, attention_mask = new_canvas(prompt, attention_mask, gen_length, mask_id)  # (B, L)
    prompt_index = x != mask_id  # (B, L): the prompt, fixed now; only CFG reads it
    P = prompt.shape[1]
    for b in range(num_blocks):
        start = P + b * block_length  # the block's canvas columns [start, end)
        end = start + block_length
        # the block's schedule from its mask count: block_length in every row, since prompts
        # hold no masks and earlier blocks never write right of themselves
        schedule = num_transfer_tokens((x[:, start:end] == mask_id).sum(dim=1),
                                       steps_per_block)  # (B, S)
        for i in range(steps_per_block):
            # Only masked positions inside this block can be written (LLaDA sets confidence to
            # -inf right of the block and on every unmasked position), so we work on the
            # block's slice: same result, and Gumbel noise of (B, K, V) instead of LLaDA's
            # (B, L, V) (same distribution, another RNG stream)
            block_mask = x[:, start:end] == mask_id                         # (B, K) blanks
            logits = block_logits(model, x, attention_mask, prompt_index, mask_id, cfg_scale,
                                  start, end)
            x0, _ = predict(logits, mask_id, temperature, generator)        # (B, K)
            confidence = remasking_confidence(logits, x0, remasking, generator)  # (B, K)
            # -inf on written positions (ranked last): a written token is never re-masked
            confidence = confidence.masked_fill(~block_mask, float("-inf"))
            # the k most confident
            transfer = select_top_k(confidence, schedule[:, i]) & block_mask  # (B, K)
            x[:, start:end] = torch.where(transfer, x0, x[:, start:end])    # the rest: masks
    return x                                                           # (B, P + gen_length)

# -----------------------------------------------------------------------------
# a small CLI demo, in the spirit of nanoGPT's sample.py


def demo_parser(description):
    """The demo's flags: a model, a prompt, the schedule, the temperature, the noise seed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--model-dir", type=str, default=TINY_DIR,
        help="checkpoint dir, official layout (the default tiny model is made if missing)")
    parser.add_argument("--prompt", type=str, default="What is 2+3?", help="user message")
    parser.add_argument("--gen-length", type=int, default=64,
                        help="number of tokens to generate")
    parser.add_argument("--block-length", type=int, default=32,
                        help="semi-AR block size, divides gen-length")
    parser.add_argument("--steps", type=int, default=32,
                        help="denoising steps, a multiple of #blocks")
    parser.add_argument("--temperature", type=float, default=0.0,
                        help="0 = greedy; d1's RL rollouts use 0.9")
    parser.add_argument("--seed", type=int, default=1337, help="seed for sampling noise")
    return parser


def demo(parser, sampler, options=()):
    """Sample one completion of --prompt with `sampler` (a generate, given the flags named in
    `options` too) and print it; a bad directory or options that do not combine (checked
    before any forward) are one line, exit 2."""
    args = parser.parse_args()
    print(vars(args))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        model, tokenizer = load(args.model_dir, device=device)
        model.eval()  # generate() keeps the caller's train/eval mode; a demo wants dropout off
        prompt = torch.tensor([prompt_ids(tokenizer, args.prompt)], device=device)  # (1, P)
        generator = torch.Generator().manual_seed(args.seed)  # CPU generator: fine on a GPU
        flags = {k: getattr(args, k) for k in options}
        out = sampler(model, prompt, gen_length=args.gen_length,
                      block_length=args.block_length, steps=args.steps,
                      temperature=args.temperature, generator=generator, **flags)  # (1, P + N)
    except (ValueError, FileNotFoundError) as e:
        parser.exit(2, f"{parser.prog}: error: {e}\n")
    print(tokenizer.decode(out[0, prompt.shape[1]:].tolist(), skip_special_tokens=True))


if __name__ == "__main__":
    parser = demo_parser("Sample a completion from LLaDA with d1's semi-AR sampler")
    parser.add_argument("--remasking", type=str, default="low_confidence",
                        choices=REMASKING_STRATEGIES,
                        help="which blanks a step writes (default: %(default)s)")
    demo(parser, generate, ["remasking"])
