"""
d1's one-step log-likelihood estimator for a masked diffusion LM (LLaDA). A masked diffusion
model has no cheap exact log π(o|q), so every RL step that needs one has to estimate it. d1's
answer (diffu-GRPO, arXiv 2504.12216, Sec. 3.2): mask the WHOLE completion, mask each prompt
token independently with probability p (0.15 in d1's train.yaml), run ONE forward pass and read
every completion token's log-prob off the same logits:

    log π(o_k | q')  =  log softmax(f_θ(q' ⊕ [M]*N))_k [o_k]          (per token, k = 1..N)
    log π(o | q)     ≈  Σ_k log π(o_k | q')                           (mean-field sum)

q' is the randomly masked prompt. The random prompt mask comes from a seed, so π_θ, π_old and
π_ref all see the SAME q' (docs/d1.md §3.2): mask_generator and mask_seeds below key it. d1
uses no 1/p weighting and does NOT divide the logits by the sampling temperature (TRL does);
neither do we.

Run:  python logprob.py                       (tiny random model, CPU, seconds)
      python logprob.py --model-dir PATH      (a converted LLaDA checkpoint)
"""
import argparse

import torch

from modelio.checkpoint import TINY_DIR, load
from modelio.tokenizer import prompt_ids
from sample import draw_device

# -----------------------------------------------------------------------------
# the estimator


def prompt_mask(shape, p, generator=None, device="cpu"):
    """Bool mask, True = replace by [MASK]; each entry True independently with probability p.
    The uniforms are drawn on the generator's own device and then moved, so a CPU generator
    seeded with s gives the same mask whether the model lives on CPU or GPU."""
    u = torch.rand(shape, generator=generator, device=draw_device(generator, "cpu"))  # (B, P)
    return (u < p).to(device)  # p=0 masks nothing, p=1 masks everything


def noisy_prompt(prompt, p, generator, mask_id):
    """d1's masked prompt q' (B, P): each prompt token replaced by mask_id with probability p,
    drawn first from `generator` (so θ, θ_old and θ_ref, keyed alike, see the same q')."""
    return torch.where(prompt_mask(prompt.shape, p, generator, prompt.device), mask_id, prompt)


def token_logprobs(logits, targets):
    """log softmax(logits)[target] per position, in fp32. (B, N, V), (B, N) -> (B, N).
    No division by the sampling temperature: d1 scores the raw logits (TRL would divide).
    Memory: if the model returns bf16 logits, .float() makes one fp32 (B, N, V) copy and
    log_softmax a second one (the first is freed as soon as log_softmax has run; autograd
    keeps only the output). With LLaDA's V=126464 that is 0.5 MB per token, i.e. ~0.78 GB per
    copy for B=6, N=256. d1 runs the cross-entropy on bf16 logits; we take the fp32 cost for
    accuracy."""
    logp = torch.log_softmax(logits.float(), dim=-1)  # (B, N, V) fp32
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, N)


def canvas_mask(attention_mask, L, times=1, interleave=False):
    """A prompt's key-padding mask (B, P), or (B, L) already, over the rows of a forward of
    length L: ones over the canvas columns P..L-1 (completion tokens are never padding), then
    the B rows repeated as the forward stacked its views: each row `times` times in a row
    (interleave), or all B rows `times` times over -> (B·times, L). None stays None (LLaDA)."""
    if attention_mask is None:
        return None
    B, P = attention_mask.shape
    m = torch.cat([attention_mask, attention_mask.new_ones(B, L - P)], dim=1)  # (B, L)
    if interleave:
        return m.repeat_interleave(times, dim=0)  # (B·times, L)
    return m.repeat(times, 1)  # (B·times, L)


def one_step_logprobs(model, prompt, completion, mask_id=None, p_mask_prompt=0.15,
                      generator=None, attention_mask=None):
    """Per-token log π(o_k | q') for each completion token, (B, N) fp32: d1's estimator, one
    forward of B rows.

    prompt (B, P) long, may be left-padded: pads count as prompt and may be masked, as in d1.
    completion (B, N) long. generator: a torch.Generator; pass a freshly seeded one
    (torch.Generator().manual_seed(s)) for θ, θ_old and θ_ref to get identical prompt masks.
    attention_mask: None (d1 never passes one; LLaDA), (B, P) for the prompt only (completion
    positions are then attended), or (B, P+N): a family's hidden left pads
    (modelio/families.left_pad_mask). This function neither switches train/eval mode nor
    disables grad: the policy pass of GRPO needs gradients, the callers wrap the old/ref
    passes in torch.no_grad() themselves."""
    mask_id = model.config.mask_token_id if mask_id is None else mask_id
    P = prompt.shape[1]
    N = completion.shape[1]
    attention_mask = canvas_mask(attention_mask, P + N)  # (B, P+N) or None
    q = noisy_prompt(prompt, p_mask_prompt, generator, mask_id)  # (B, P)
    # the completion tokens never enter the input: the model only sees N mask tokens,
    # and the completion is used solely to pick which log-prob entry to read
    x = torch.cat([q, torch.full_like(completion, mask_id)], dim=1)  # (B, P+N)
    logits = model(x, attention_mask=attention_mask)[:, P:]  # (B, N, V), no shift
    return token_logprobs(logits, completion)  # (B, N)

# -----------------------------------------------------------------------------
# The keys of diffu-GRPO's random streams: its masks and its rollouts' noise. Every stream of
# a run is keyed by what it is for (run seed, round, mask seed, global micro-batch), never by
# rank or by draws before: the same numbers on any world size and after a resume (tested).

# The masked prompt q' of a sample comes from a generator rebuilt from a stored key, so π_θ,
# π_old and π_ref score the very same q' (docs/d1.md §3.2). Keys are primes apart, larger
# than any count they multiply, so two keys never collide.
SEED_STRIDE = 1_000_003    # between run seeds, and between mask seeds: > micro-batches a round
MASK_SEED_STRIDE = 7_919   # the μ mask seeds of round r come from generator seed * 7919 + r
MASK_SEED_RANGE = 2**12    # d1 draws its mask seeds in [0, 4096)
FIXED_MASK_SEED = 42       # d1's fixed-mask ablation (Fig. 4): seed 42 at every step
ROUND_STRIDE = 10_007      # between rounds of the rollout noise: > micro-batches a round


def mask_generator(seed, micro_index):
    """The generator behind one micro-batch's prompt mask under mask seed `seed`. Keyed by the
    GLOBAL micro-batch index, so θ, θ_old and θ_ref (and any world size) get the same masks."""
    # a CPU generator: the same mask on any device. d1 reseeds every global RNG with the mask
    # seed, which also ties the next round's sampling noise to the last one (docs/d1.md §3.2)
    return torch.Generator().manual_seed(seed * SEED_STRIDE + micro_index)


def mask_seeds(seed, rnd, num_iterations, fixed=False):
    """The μ mask seeds of grpo.py's round `rnd`; inner step j uses seed j in each micro-batch
    of the round."""
    if fixed:  # d1's ablation (random_masking False): one q' for all μ steps (docs/d1.md §3.2)
        return [FIXED_MASK_SEED] * num_iterations
    # its own generator, keyed by (run seed, round): resumed or re-sharded runs draw the same
    g = torch.Generator().manual_seed(seed * MASK_SEED_STRIDE + rnd)
    # d1: torch.randint(0, 2**12, (μ,)) once per generation round (docs/d1.md §3.2)
    return torch.randint(0, MASK_SEED_RANGE, (num_iterations,), generator=g).tolist()


def rollout_generator(seed, rnd, micro_index, device):
    """The sampling noise of a micro-batch's rollout, keyed by (seed, round, global
    micro-batch). On the model's device: (b, block, V) float64 noise drawn on CPU was 3/4 of an
    8B rollout."""
    key = seed * SEED_STRIDE + rnd * ROUND_STRIDE + micro_index
    return torch.Generator(device=device).manual_seed(key)

# -----------------------------------------------------------------------------
# demo: python logprob.py [--model-dir PATH]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="d1's one-step log-probs of one answer")
    parser.add_argument("--model-dir", type=str, default=TINY_DIR,
                        help="checkpoint dir in the official layout; the default tiny random "
                             "model is created if missing")
    parser.add_argument("--prompt", type=str, default="What is 2+3?",
                        help="user message (chat template applied)")
    parser.add_argument("--answer", type=str, default="The answer is 5.",
                        help="answer text to score")
    parser.add_argument("--p-mask", type=float, default=0.15,
                        help="prompt masking probability (d1: 0.15)")
    parser.add_argument("--seed", type=int, default=0, help="mask seed")
    args = parser.parse_args()
    print(vars(args))

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tok = load(args.model_dir, device=device)
    model.eval()
    prompt = torch.tensor(prompt_ids(tok, args.prompt), device=device)  # (P,)
    answer = torch.tensor(tok(args.answer, add_special_tokens=False)["input_ids"],
                          device=device)  # (L,)
    with torch.no_grad():  # old/ref-style pass; a GRPO policy pass would keep the graph
        g = torch.Generator().manual_seed(args.seed)  # CPU generator: same mask on any device
        lp = one_step_logprobs(model, prompt[None], answer[None], p_mask_prompt=args.p_mask,
                               generator=g)[0]  # (L,)
    for t, v in zip(answer.tolist(), lp.tolist()):
        print(f"{t:>8d} {tok.decode([t])!r:>8} {v:9.4f}")
    print(f"one-step mean-field sum, log π(answer | q'): {lp.sum().item():.4f}")
