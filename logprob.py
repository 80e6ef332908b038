"""
Log-likelihood estimators for a masked diffusion LM (LLaDA). A masked diffusion model has no
cheap exact log π(o|q), so every RL or eval step that needs one has to estimate it. Three ways:

1) d1's one-step estimator (diffu-GRPO, arXiv 2504.12216, Sec. 3.2). Mask the WHOLE completion,
   mask each prompt token independently with probability p (0.15 in d1's train.yaml), run ONE
   forward pass and read every completion token's log-prob off the same logits:

       log π(o_k | q')  =  log softmax(f_θ(q' ⊕ [M]*N))_k [o_k]          (per token, k = 1..N)
       log π(o | q)     ≈  Σ_k log π(o_k | q')                           (mean-field sum)

   q' is the randomly masked prompt. The random prompt mask comes from a seed, so π_θ, π_old and
   π_ref all see the SAME q' (docs/d1.md §3.2). d1 uses no 1/p weighting and does NOT divide the
   logits by the sampling temperature (TRL does); neither do we.

2) Coupled-GRPO (DiffuCoder, arXiv 2506.20639). Draw t ~ U(0.2, 0.8); view 1 masks each completion
   token with probability t, view 2 masks exactly the complement. Every completion token is then
   scored exactly once, in a partially masked context, for 2x the compute of (1).

3) LLaDA's Monte-Carlo ELBO (arXiv 2502.09992, Eq. 6; `get_log_likelihood.py` in ML-GSAI/LLaDA).
   For an answer a of length L after prompt q, with l ~ U{1..L} tokens masked uniformly at random:

       log p(a | q)  >=  E_l E_{a_l} [ (L / l) Σ_{i masked} log p_θ(a_i | q, a_l) ]

   a lower bound that we estimate by Monte Carlo, with the number of masked tokens stratified
   across each batch to cut variance. This is for evaluation (e.g. multiple-choice scoring).

Run:  python logprob.py                       (tiny random model, CPU, seconds)
      python logprob.py --model-dir PATH      (a converted LLaDA checkpoint)
"""
import argparse

import torch

# -----------------------------------------------------------------------------
# 1) d1's one-step estimator (+ coupled-GRPO variant)

def prompt_mask(shape, p, generator=None, device="cpu"):
    """Bool mask, True = replace by [MASK]; each entry True independently with probability p.
    The uniforms are drawn on the generator's own device and then moved, so a CPU generator
    seeded with s gives the same mask whether the model lives on CPU or GPU."""
    gen_device = generator.device if generator is not None else "cpu"
    u = torch.rand(shape, generator=generator, device=gen_device)  # (B, P) in [0, 1)
    return (u < p).to(device)  # p=0 masks nothing, p=1 masks everything


def noisy_prompt(prompt, p, generator, mask_id):
    """d1's masked prompt q' (B, P): each prompt token replaced by mask_id with probability p, drawn
    first from `generator` (so θ, θ_old and θ_ref, keyed alike, see the same q')."""
    return torch.where(prompt_mask(prompt.shape, p, generator, prompt.device), mask_id, prompt)


def coupled_masks(shape, generator=None, device="cpu", t_min=0.2, t_max=0.8):
    """View-1 completion mask for coupled-GRPO; view 2 is its complement (~mask).
    One t ~ U(t_min, t_max) per sequence, then position k is masked in view 1 iff u_k < t."""
    gen_device = generator.device if generator is not None else "cpu"
    B, N = shape
    t = t_min + (t_max - t_min) * torch.rand(B, 1, generator=generator, device=gen_device)  # (B, 1)
    u = torch.rand(B, N, generator=generator, device=gen_device)  # (B, N)
    return (u < t).to(device)  # (B, N) True = masked in view 1


def token_logprobs(logits, targets):
    """log softmax(logits)[target] per position, in fp32. (B, N, V), (B, N) -> (B, N).
    No division by the sampling temperature: d1 scores the raw logits (TRL would divide).
    Memory: if the model returns bf16 logits, .float() makes one fp32 (B, N, V) copy and
    log_softmax a second one (the first is freed as soon as log_softmax has run; autograd keeps
    only the output). With LLaDA's V=126464 that is 0.5 MB per token, i.e. ~0.78 GB per copy for
    B=6, N=256. d1 runs the cross-entropy on bf16 logits; we take the fp32 cost for accuracy."""
    logp = torch.log_softmax(logits.float(), dim=-1)  # (B, N, V) fp32
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, N)


def one_step_logprobs(model, prompt, completion, mask_id=None, p_mask_prompt=0.15, generator=None,
                      attention_mask=None, coupled=False):
    """Per-token log π(o_k | q') for each completion token, (B, N) fp32.

    prompt (B, P) long, may be left-padded: pads count as prompt and may be masked, as in d1.
    completion (B, N) long. generator: a torch.Generator; pass a freshly seeded one
    (torch.Generator().manual_seed(s)) for θ, θ_old and θ_ref to get identical prompt masks.
    attention_mask: None (d1 never passes one), (B, P) for the prompt only (completion positions
    are then attended), or (B, P+N). coupled=False: d1's estimator, one forward of B rows.
    coupled=True: coupled-GRPO, one forward of 2B rows (= 2x the compute and activation memory
    of the one-step estimator).
    This function neither switches train/eval mode nor disables grad: the policy pass of GRPO
    needs gradients, the callers wrap the old/ref passes in torch.no_grad() themselves."""
    mask_id = model.config.mask_token_id if mask_id is None else mask_id
    B, P = prompt.shape
    N = completion.shape[1]
    if attention_mask is not None and attention_mask.shape[1] == P:
        # extend a prompt-only mask with ones over the completion canvas (as the sampler does)
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones(B, N)], dim=1)  # (B, P+N)
    # same prompt mask for both coupled views; it is drawn first so that, for the same seed,
    # coupled and plain calls see the same q'
    q = noisy_prompt(prompt, p_mask_prompt, generator, mask_id)  # (B, P)
    if not coupled:
        # the completion tokens never enter the input: the model only sees N mask tokens,
        # and the completion is used solely to pick which log-prob entry to read
        x = torch.cat([q, torch.full_like(completion, mask_id)], dim=1)  # (B, P+N)
        logits = model(x, attention_mask=attention_mask)[:, P:]  # (B, N, V), no shift
        return token_logprobs(logits, completion)  # (B, N)
    # coupled-GRPO: two complementary partial maskings of the completion, run as one 2B batch
    m1 = coupled_masks((B, N), generator, completion.device)  # (B, N) True = masked in view 1
    x1 = torch.cat([q, torch.where(m1, mask_id, completion)], dim=1)  # (B, P+N)
    x2 = torch.cat([q, torch.where(m1, completion, mask_id)], dim=1)  # (B, P+N)
    am = None if attention_mask is None else attention_mask.repeat(2, 1)  # (2B, P+N)
    logits = model(torch.cat([x1, x2], dim=0), attention_mask=am)[:, P:]  # (2B, N, V)
    lp = token_logprobs(logits, completion.repeat(2, 1))  # (2B, N)
    # each token is read from the view in which it is masked (the visible one would be trivial).
    # We deliberately drop DiffuCoder's ELBO weights 1/t and 1/(1-t): in the token-level GRPO
    # ratio exp(logπ_θ - logπ_old) they would only rescale each token's log-ratio (by up to 5x at
    # t=0.2), which interacts with the clip range ε that d1 tuned for unweighted log-probs.
    # We also drop the third, fully masked pass of DiffuCoder's code (that is d1's estimator;
    # average it in yourself if wanted). A reader who wants the ELBO-style sum
    # can multiply view-1 entries by 1/t and view-2 entries by 1/(1-t).
    return torch.where(m1, lp[:B], lp[B:])  # (B, N)


def mean_field_logprob(per_token, mask=None):
    """The d1 paper's sequence estimate Σ_k log π(o_k|q') over tokens where mask is 1. (B, N) -> (B,).
    d1's code never forms it (its GRPO ratios are per token); it is here for readers and for
    sequence-level objectives (e.g. wd1). mask is typically "up to and including the first EOS"."""
    if mask is None:
        return per_token.sum(dim=-1)
    return (per_token * mask.to(per_token.dtype)).sum(dim=-1)  # (B,)

# -----------------------------------------------------------------------------
# 2) LLaDA's Monte-Carlo ELBO

def stratified_counts(k, L, b):
    """Masked-token counts n_i for the b rows of one batch, given the shared draw k in {1..L}:
    n_i = round(k + i*L/b), wrapped into [1, L]. Spreading the counts over the range (instead of b
    independent draws) is LLaDA's variance reduction. Deviation: LLaDA uses torch.round on a
    float linspace, which rounds exact .5 ties to even, so a tie row's count depends on k's
    parity and is no longer uniform on {1..L} (e.g. L=3, b=16, row 8). We round half up in
    integer arithmetic: n_i = k + const_i (mod L), exactly uniform for every row -> unbiased."""
    i = torch.arange(b)
    offset = (2 * i * L + b) // (2 * b)  # = floor(i*L/b + 1/2), exact
    return (k - 1 + offset) % L + 1  # (b,) long, each in [1, L]


def stratified_mask(L, b, generator=None):
    """(b, L) bool answer mask, row i masks exactly n_i positions chosen uniformly at random,
    and (b,) counts n_i. Drawn on the generator's device (CPU by default)."""
    gen_device = generator.device if generator is not None else "cpu"
    k = int(torch.randint(1, L + 1, (1,), generator=generator, device=gen_device))
    n = stratified_counts(k, L, b)  # (b,)
    return random_subsets(n, L, generator), n  # (b, L) bool, (b,)


def random_subsets(counts, L, generator=None):
    """(b, L) bool on the CPU: row i True at a uniformly random set of counts[i] positions. The rank of
    each position under an i.i.d. uniform key is a uniform random permutation; the ranks below n_i are
    a uniform subset of size n_i. Drawn on the generator's device."""
    gen_device = generator.device if generator is not None else "cpu"
    rank = torch.rand(len(counts), L, generator=generator, device=gen_device).argsort(-1).argsort(-1)  # (b, L)
    return rank.cpu() < counts.unsqueeze(1)


def elbo_token_logprobs(model, prompt, completion, k=1, mask_id=None, generator=None, cfg_scale=0.0):
    """LLaDA's Monte-Carlo ELBO with k stratified mask draws per sequence, spread over the tokens:
    (B, N) fp32 whose row sums are the ELBO estimates of log p(completion | prompt). Differentiable
    (no torch.no_grad here), so it can stand in for the one-step estimator inside diffu-GRPO.
    prompt (B, P) is never masked; completion (B, N). k forward rows per sequence (2k with CFG).
    Entry (b, i) = (1/k) Σ_j 1[i masked in draw j] (N / n_j) log p_θ(o_i | q, o with draw j masked),
    so a token only counts in the draws that mask it, weighted by 1/(masking rate) as in Eq. 6."""
    mask_id = model.config.mask_token_id if mask_id is None else mask_id
    B, P = prompt.shape
    N = completion.shape[1]
    # one stratified set of k counts per sequence, drawn in row order (B = 1 replays elbo_logprob's draws)
    draws = [stratified_mask(N, k, generator) for _ in range(B)]
    m = torch.stack([d[0] for d in draws]).to(completion.device)  # (B, k, N) True = masked
    n = torch.stack([d[1] for d in draws]).to(completion.device)  # (B, k) masked counts n_j
    target = completion[:, None, :].expand(B, k, N)  # (B, k, N)
    x = torch.cat([prompt[:, None, :].expand(B, k, P), torch.where(m, mask_id, target)], dim=2)  # (B, k, P+N)
    x = x.reshape(B * k, P + N)
    if cfg_scale > 0.0:
        un_x = x.clone()
        un_x[:, :P] = mask_id  # unconditional: prompt fully masked
        # slice to the answer before the fp32 cast: (b, P+L, V) fp32 would be ~4 GB at V=126464
        cond, un = model(torch.cat([x, un_x], dim=0))[:, P:].float().chunk(2, dim=0)  # 2 x (Bk, N, V)
        logits = un + (cfg_scale + 1) * (cond - un)  # same CFG as the sampler
    else:
        logits = model(x)[:, P:]  # (Bk, N, V), no shift
    lp = token_logprobs(logits, target.reshape(B * k, N)).view(B, k, N)  # (B, k, N)
    # weight N / n_j = 1 / (draw j's masking rate), the 1/t of LLaDA's loss; 0 where visible
    w = m * (N / n.float()).unsqueeze(-1)  # (B, k, N)
    return (lp * w).mean(dim=1)  # (B, N); row sum = the k-sample ELBO estimate


@torch.no_grad()
def elbo_logprob(model, prompt, answer, mc_num=128, batch_size=16, cfg_scale=0.0, mask_id=None,
                 generator=None):
    """Monte-Carlo lower bound on log p(answer | prompt), a python float (LLaDA Eq. 6).
    prompt (P,), answer (L,) 1-D long tensors. The prompt is never masked. mc_num samples in
    mc_num // batch_size forward passes of batch_size rows (the counts stratified within each);
    cfg_scale > 0 doubles each pass (conditional and unconditional = prompt fully masked,
    combined as in generation)."""
    if mc_num <= 0 or batch_size <= 0 or mc_num % batch_size != 0:
        raise ValueError(f"mc_num={mc_num} must be a positive multiple of batch_size={batch_size}")
    values = [elbo_token_logprobs(model, prompt[None], answer[None], k=batch_size, mask_id=mask_id,
                                  generator=generator, cfg_scale=cfg_scale).sum().item()
              for _ in range(mc_num // batch_size)]  # one estimate per pass of batch_size rows
    return sum(values) / len(values)

# -----------------------------------------------------------------------------
# 3) The estimator inside diffu-GRPO: its masks, keyed, and the estimator by name (grpo.py --estimator).
# d1's is one_step; the others are for the estimator ablation (their quality against exact values:
# lab/study_estimators.py)

ESTIMATORS = ("one_step", "coupled", "elbo")
ELBO_DRAWS = 2  # --estimator elbo: mask draws per sequence, 2 forward rows = coupled's cost
ESTIMATOR_ROWS = {"one_step": 1, "coupled": 2, "elbo": ELBO_DRAWS}  # forward rows per scored sequence


# The masked prompt q' of a sample comes from a generator rebuilt from a stored key, so π_θ, π_old and
# π_ref score the very same q' (docs/d1.md §3.2). Keys are primes apart, larger than any count they
# multiply, so two keys never collide.
SEED_STRIDE = 1_000_003    # between run seeds, and between mask seeds: > micro-batches per round
MASK_SEED_STRIDE = 7_919   # the μ mask seeds of round r come from generator seed * 7919 + r
MASK_SEED_RANGE = 2**12    # d1 draws its mask seeds in [0, 4096)
FIXED_MASK_SEED = 42       # d1's fixed-mask ablation (Fig. 4): seed 42 at every step


def mask_generator(seed, micro_index):
    """The generator behind one micro-batch's prompt mask under mask seed `seed`. Keyed by the
    GLOBAL micro-batch index, so θ, θ_old and θ_ref (and any world size) get identical masks."""
    # a CPU generator: the same mask on any device. d1 reseeds every global RNG with the mask seed, which also
    # ties the next round's sampling noise to the last mask seed (docs/d1.md §3.2)
    return torch.Generator().manual_seed(seed * SEED_STRIDE + micro_index)


def mask_seeds(seed, rnd, num_iterations, fixed=False):
    """The μ mask seeds of round `rnd` of grpo.py; inner step j uses seed j for every micro-batch."""
    if fixed:  # d1's ablation (random_masking False): the same q' for all μ steps (docs/d1.md §3.2)
        return [FIXED_MASK_SEED] * num_iterations
    # its own generator, keyed by (run seed, round): a resumed or re-sharded run draws the same seeds
    g = torch.Generator().manual_seed(seed * MASK_SEED_STRIDE + rnd)
    # d1: torch.randint(0, 2**12, (μ,)) once per generation round (docs/d1.md §3.2)
    return torch.randint(0, MASK_SEED_RANGE, (num_iterations,), generator=g).tolist()


def estimate_logprobs(model, prompt, completion, estimator="one_step", p_mask_prompt=0.15, generator=None,
                      mask_id=None):
    """(B, N) per-token log-prob estimates by name; pass a freshly keyed generator for θ, θ_old and
    θ_ref to score the very same masked inputs.
    one_step: d1's (completion fully masked, prompt masked with p_mask_prompt; 1 row per sequence);
    coupled:  DiffuCoder's complementary completion masks, same prompt mask (2 rows);
    elbo:     LLaDA's MC ELBO terms with ELBO_DRAWS stratified draws, prompt never masked (2 rows);
              a token's entry is (N / n) log p summed over the draws that mask it, / draws, so a
              token-level ratio exp(ℓθ - ℓold) scales its log-ratio by N / n (0 where never masked)."""
    if estimator == "elbo":
        return elbo_token_logprobs(model, prompt, completion, k=ELBO_DRAWS, mask_id=mask_id, generator=generator)
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}: one of {ESTIMATORS}")
    return one_step_logprobs(model, prompt, completion, mask_id=mask_id, p_mask_prompt=p_mask_prompt,
                             generator=generator, coupled=estimator == "coupled")

# -----------------------------------------------------------------------------
# demo: python logprob.py [--model-dir PATH]

if __name__ == "__main__":
    from modelio.checkpoint import TINY_DIR, load
    from modelio.tokenizer import prompt_ids

    parser = argparse.ArgumentParser(description="one-step log-probs and the MC ELBO of one answer")
    parser.add_argument("--model-dir", type=str, default=TINY_DIR,
                        help="checkpoint dir in the official layout; the default tiny random model is created if missing")
    parser.add_argument("--prompt", type=str, default="What is 2+3?", help="user message (chat template applied)")
    parser.add_argument("--answer", type=str, default="The answer is 5.", help="answer text to score")
    parser.add_argument("--mc-num", type=int, default=128, help="Monte-Carlo samples for the ELBO")
    parser.add_argument("--seed", type=int, default=0, help="mask seed")
    args = parser.parse_args()
    print(vars(args))

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tok = load(args.model_dir, device=device)
    model.eval()
    prompt = torch.tensor(prompt_ids(tok, args.prompt), device=device)  # (P,)
    answer = torch.tensor(tok(args.answer, add_special_tokens=False)["input_ids"], device=device)  # (L,)
    with torch.no_grad():  # old/ref-style pass; a GRPO policy pass would keep the graph
        g = torch.Generator().manual_seed(args.seed)  # CPU generator: same mask on any device
        lp = one_step_logprobs(model, prompt[None], answer[None], generator=g)[0]  # (L,)
    for t, v in zip(answer.tolist(), lp.tolist()):
        print(f"{t:>8d} {tok.decode([t])!r:>8} {v:9.4f}")
    print(f"one-step mean-field sum: {mean_field_logprob(lp[None]).item():.4f}")
    elbo = elbo_logprob(model, prompt, answer, mc_num=args.mc_num,
                        generator=torch.Generator().manual_seed(args.seed))
    print(f"MC ELBO, {args.mc_num} samples (a lower bound on log p(answer | prompt)): {elbo:.4f}")
