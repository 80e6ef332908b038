"""
The likelihood estimators beside d1's one-step estimator (logprob.py): the field's ways to score a
completion of a masked diffusion LM, used by `python -m methods.grpo --estimator` and by the objectives of methods/.

1) Coupled-GRPO (DiffuCoder, arXiv 2506.20639). Draw t ~ U(0.2, 0.8); view 1 masks each completion
   token with probability t, view 2 masks exactly the complement. Every completion token is then
   scored exactly once, in a partially masked context, for 2x the compute of d1's estimator. The
   prompt is masked as d1's (logprob.noisy_prompt), drawn first, so the same seed gives the same q'.

2) LLaDA's Monte-Carlo ELBO (arXiv 2502.09992, Eq. 6; `get_log_likelihood.py` in ML-GSAI/LLaDA).
   For an answer a of length L after prompt q, with l ~ U{1..L} tokens masked uniformly at random:

       log p(a | q)  >=  E_l E_{a_l} [ (L / l) Σ_{i masked} log p_θ(a_i | q, a_l) ]

   a lower bound that we estimate by Monte Carlo, with the number of masked tokens stratified
   across each batch to cut variance. Also for evaluation (e.g. multiple-choice scoring).

Their quality against exact values on the toy: lab/study_estimators.py (docs/findings.md).
    from methods.estimators import estimate_logprobs
    lp = estimate_logprobs(model, prompt, completion, "coupled", 0.15, generator)   # (B, N)
"""
import torch

from logprob import canvas_mask, noisy_prompt, one_step_logprobs, token_logprobs
from sample import draw_device

ESTIMATORS = ("one_step", "coupled", "elbo")
ELBO_DRAWS = 2  # --estimator elbo: mask draws per sequence, 2 forward rows = coupled's cost
ESTIMATOR_ROWS = {"one_step": 1, "coupled": 2, "elbo": ELBO_DRAWS}  # forward rows per scored sequence

def coupled_masks(shape, generator=None, device="cpu", t_min=0.2, t_max=0.8):
    """View-1 completion mask for coupled-GRPO; view 2 is its complement (~mask).
    One t ~ U(t_min, t_max) per sequence, then position k is masked in view 1 iff u_k < t."""
    gen_device = draw_device(generator, "cpu")
    B, N = shape
    t = t_min + (t_max - t_min) * torch.rand(B, 1, generator=generator, device=gen_device)  # (B, 1)
    u = torch.rand(B, N, generator=generator, device=gen_device)  # (B, N)
    return (u < t).to(device)  # (B, N) True = masked in view 1


def coupled_logprobs(model, prompt, completion, mask_id=None, p_mask_prompt=0.15, generator=None,
                     attention_mask=None):
    """Per-token log-probs (B, N) fp32, coupled-GRPO: two complementary partial maskings of the completion
    (coupled_masks), under d1's masked prompt q' (the same draw as one_step_logprobs for the same seed),
    run as one forward of 2B rows (2x the compute and activation memory of d1's estimator); each token is
    read from the view in which it is masked. attention_mask as one_step_logprobs takes it."""
    mask_id = model.config.mask_token_id if mask_id is None else mask_id
    B, P = prompt.shape
    N = completion.shape[1]
    q = noisy_prompt(prompt, p_mask_prompt, generator, mask_id)  # (B, P): drawn first, as d1's estimator
    m1 = coupled_masks((B, N), generator, completion.device)  # (B, N) True = masked in view 1
    x1 = torch.cat([q, torch.where(m1, mask_id, completion)], dim=1)  # (B, P+N)
    x2 = torch.cat([q, torch.where(m1, completion, mask_id)], dim=1)  # (B, P+N)
    am = canvas_mask(attention_mask, P + N, times=2)  # (2B, P+N): the two views' rows, or None
    logits = model(torch.cat([x1, x2], dim=0), attention_mask=am)[:, P:]  # (2B, N, V)
    lp = token_logprobs(logits, completion.repeat(2, 1))  # (2B, N)
    # each token is read from the view in which it is masked. DiffuCoder's ELBO weights 1/t and 1/(1-t) are
    # dropped: in the token-level ratio they would only rescale each token's log-ratio (up to 5x at t=0.2),
    # against the clip range d1 tuned for unweighted log-probs; so is its third, fully masked pass (d1's).
    return torch.where(m1, lp[:B], lp[B:])  # (B, N)


def stratified_counts(k, L, b):
    """Masked-token counts n_i for the b rows of one batch, given the shared draw k in {1..L}:
    n_i = round(k + i*L/b), wrapped into [1, L]: LLaDA's variance reduction. Deviation: LLaDA's torch.round
    of a float linspace rounds .5 ties to even, so a tie row's count depends on k's parity and is not uniform
    on {1..L} (e.g. L=3, b=16, row 8); rounding half up in integers keeps every row exactly uniform."""
    i = torch.arange(b)
    offset = (2 * i * L + b) // (2 * b)  # = floor(i*L/b + 1/2), exact
    return (k - 1 + offset) % L + 1  # (b,) long, each in [1, L]


def stratified_mask(L, b, generator=None):
    """(b, L) bool answer mask, row i masks exactly n_i positions chosen uniformly at random,
    and (b,) counts n_i. Drawn on the generator's device (CPU by default)."""
    gen_device = draw_device(generator, "cpu")
    k = int(torch.randint(1, L + 1, (1,), generator=generator, device=gen_device))
    n = stratified_counts(k, L, b)  # (b,)
    return random_subsets(n, L, generator), n  # (b, L) bool, (b,)


def random_subsets(counts, L, generator=None):
    """(b, L) bool on the CPU: row i True at a uniformly random set of counts[i] positions. The rank of
    each position under an i.i.d. uniform key is a uniform random permutation; the ranks below n_i are
    a uniform subset of size n_i. Drawn on the generator's device."""
    gen_device = draw_device(generator, "cpu")
    rank = torch.rand(len(counts), L, generator=generator, device=gen_device).argsort(-1).argsort(-1)  # (b, L)
    return rank.cpu() < counts.unsqueeze(1)


def elbo_token_logprobs(model, prompt, completion, k=1, mask_id=None, generator=None, cfg_scale=0.0,
                        attention_mask=None):
    """LLaDA's Monte-Carlo ELBO with k stratified mask draws per sequence, spread over the tokens:
    (B, N) fp32 whose row sums are the ELBO estimates of log p(completion | prompt). Differentiable
    (no torch.no_grad here), so it can stand in for the one-step estimator inside diffu-GRPO.
    prompt (B, P) is never masked; completion (B, N). k forward rows per sequence (2k with CFG).
    Entry (b, i) = (1/k) Σ_j 1[i masked in draw j] (N / n_j) log p_θ(o_i | q, o with draw j masked),
    so a token only counts in the draws that mask it, weighted by 1/(masking rate) as in Eq. 6.
    attention_mask (B, P) or None, as one_step_logprobs takes it (not with cfg_scale)."""
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
    else:  # each sequence's k draws are consecutive rows
        logits = model(x, attention_mask=canvas_mask(attention_mask, P + N, k, interleave=True))[:, P:]  # (Bk, N, V)
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


# the estimator by name (methods.grpo --estimator: d1's one_step, or one of the above for the ablation)
def estimate_logprobs(model, prompt, completion, estimator="one_step", p_mask_prompt=0.15, generator=None,
                      mask_id=None, attention_mask=None):
    """(B, N) per-token log-prob estimates by name; pass a freshly keyed generator for θ, θ_old and
    θ_ref to score the very same masked inputs.
    one_step: d1's (completion fully masked, prompt masked with p_mask_prompt; 1 row per sequence);
    coupled:  DiffuCoder's complementary completion masks, same prompt mask (2 rows);
    elbo:     LLaDA's MC ELBO terms with ELBO_DRAWS stratified draws, prompt never masked (2 rows);
              a token's entry is (N / n) log p summed over the draws that mask it, / draws, so a
              token-level ratio exp(ℓθ - ℓold) scales its log-ratio by N / n (0 where never masked).
    attention_mask: the prompt's (B, P) key-padding mask for a family that hides pads (Dream), else None."""
    if estimator == "elbo":
        return elbo_token_logprobs(model, prompt, completion, k=ELBO_DRAWS, mask_id=mask_id, generator=generator,
                                   attention_mask=attention_mask)
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}: one of {ESTIMATORS}")
    if estimator == "coupled":
        return coupled_logprobs(model, prompt, completion, mask_id, p_mask_prompt, generator, attention_mask)
    return one_step_logprobs(model, prompt, completion, mask_id=mask_id, p_mask_prompt=p_mask_prompt,
                             generator=generator, attention_mask=attention_mask)


def likelihood(estimator):
    """grpo.py's likelihood of a micro-batch under --estimator: an objective registry entry's logprobs,
    (model, b, generator, hp, mask_id) -> (b, N)."""
    return lambda model, b, generator, hp, mask_id: estimate_logprobs(model, b.prompt, b.completion, estimator,
                                                                      hp.p_mask, generator, mask_id, b.pad_mask)
