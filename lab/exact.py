"""
Exact likelihoods of a masked diffusion LM on tiny cases: the references every estimator is measured
against (study_estimators.py; docs/findings.md).

For a prompt q and a completion o of N tokens, let S be the set of completion positions still masked
and ℓ(i, S) = log p_θ(o_i | q, o with S masked). One forward of [q | o with S masked] gives ℓ(i, S) for
every i ∈ S, so the 2^N - 1 non-empty masks give the whole table in 2^N - 1 forward rows (255 for N = 8).

1) The exact sequence likelihood under random-order unmasking (LLaDA, arXiv 2502.09992, Sec. 2): reveal
   the N tokens in a uniformly random order σ, each drawn from the model's conditional,

       p(o | q) = (1/N!) Σ_σ Π_k p_θ(o_σk | q, o_σ<k revealed, the rest masked)

   The N! orders collapse into a recursion over masked sets (V(∅) = 1), since the first token revealed
   from S is uniform over S; computed in log space:
       V(S) = (1/|S|) Σ_{i ∈ S} p_θ(o_i | o with S masked) · V(S \\ {i}),     p(o | q) = V(all)

2) The exact ELBO: LLaDA's bound (its Eq. 6) with every mask enumerated instead of sampled,

       ELBO = Σ_{l=1..N} (1/N) (N/l) (1/C(N,l)) Σ_{|S|=l} Σ_{i ∈ S} ℓ(i, S)

   It equals the AVERAGE over orders of the log of each order's product, so by Jensen
   ELBO = E_σ log Π ≤ log E_σ Π = log p(o | q), with equality iff every order gives the same product.

3) SPG's evidence upper bound (methods/spg.py) with every mask enumerated (exact_eubo): above the ELBO,
   rising with β; above log p only with a θ-free constant the trained objective drops (test_objectives.py).

All are differentiable in θ (the table keeps its graph): study_estimators.py's exact gradients.

Run:  python -m lab.exact       (tiny random model, a few completions of 6 tokens, CPU, seconds)
"""
import argparse
import math

import torch

from modelio.checkpoint import TINY_DIR, load
from modelio.tokenizer import prompt_ids


def subset_masks(N, device="cpu"):
    """(2^N, N) bool: row s masks position i iff bit i of s is set (row 0 = nothing masked)."""
    s = torch.arange(2 ** N, device=device)  # (2^N,)
    return (s[:, None] >> torch.arange(N, device=device)) & 1 == 1  # (2^N, N)


def conditional_table(model, prompt, completion, mask_id=None, rows_per_pass=512):
    """ℓ(i, S) for every mask S (as a bitmask) and every i ∈ S: (2^N, N) fp64, 0 where i ∉ S.
    prompt (P,), completion (N,) 1-D long; the prompt is never masked. 2^N - 1 forward rows, in
    passes of rows_per_pass; the graph is kept unless the caller runs under torch.no_grad()."""
    mask_id = model.config.mask_token_id if mask_id is None else mask_id
    P, N = prompt.numel(), completion.numel()
    masks = subset_masks(N, completion.device)[1:]  # (2^N - 1, N), every non-empty S
    parts = []
    for a in range(0, masks.shape[0], rows_per_pass):
        m = masks[a:a + rows_per_pass]  # (r, N)
        canvas = torch.where(m, mask_id, completion.expand_as(m))  # (r, N) o with S masked
        x = torch.cat([prompt.expand(m.shape[0], P), canvas], dim=1)  # (r, P+N)
        # float64 log-softmax: the references are as exact as the model's logits (the estimators use fp32)
        logp = torch.log_softmax(model(x)[:, P:].double(), dim=-1)  # (r, N, V)
        lp = logp.gather(-1, completion.expand_as(m).unsqueeze(-1)).squeeze(-1)  # (r, N)
        parts.append(lp * m)  # keep ℓ(i, S) for masked i only
    first = torch.zeros(1, N, dtype=torch.float64, device=completion.device)  # row 0: the empty mask
    return torch.cat([first] + parts)  # (2^N, N)


def exact_elbo(table):
    """LLaDA's ELBO with every mask enumerated, from a conditional table (2^N, N) -> scalar."""
    N = table.shape[1]
    size = subset_masks(N, table.device).sum(1)  # (2^N,) |S|
    # weight of mask S: (1/N) (N/|S|) / C(N,|S|) = 1 / (|S| C(N,|S|)); the empty mask has no terms
    comb = torch.tensor([math.comb(N, l) for l in range(N + 1)], dtype=table.dtype, device=table.device)
    w = 1.0 / (size.clamp(min=1) * comb[size])  # (2^N,)
    return (table.sum(1) * w).sum()


def exact_eubo(table, beta):
    """SPG's evidence upper bound (arXiv 2510.09541, Corollary 1, its θ-free constant dropped) with every
    mask enumerated, from a conditional table (2^N, N) -> scalar:
        EUBO(β) = Σ_i (1/β) log Σ_{S ∋ i} w(S) p_θ(o_i | o with S masked)^β,   w(S) = 1 / (|S| C(N, |S|))
    the weights of exact_elbo, which over the masks holding i sum to 1: per token a power mean of order
    β of its conditionals, so ELBO <= EUBO(1) <= EUBO(β) for β >= 1 (the ELBO is the mean of the logs)."""
    N = table.shape[1]
    masks = subset_masks(N, table.device)  # (2^N, N)
    size = masks.sum(1)  # (2^N,)
    comb = torch.tensor([math.comb(N, l) for l in range(N + 1)], dtype=table.dtype, device=table.device)
    logw = -torch.log(size.clamp(min=1) * comb[size])  # (2^N,); the empty mask holds no i and is dropped below
    terms = (logw[:, None] + beta * table).masked_fill(~masks, float("-inf"))  # (2^N, N)
    return (torch.logsumexp(terms, dim=0) / beta).sum()


def exact_logprob(table):
    """log p(o | q) under random-order unmasking, from a conditional table (2^N, N) -> scalar.
    logV(S) = logsumexp_{i ∈ S} [ℓ(i, S) + logV(S \\ {i})] - log |S|, level by level in |S|."""
    N = table.shape[1]
    masks = subset_masks(N, table.device)  # (2^N, N)
    size = masks.sum(1)  # (2^N,)
    bit = 2 ** torch.arange(N, device=table.device)  # (N,)
    logv = table.new_zeros(2 ** N)  # logV(∅) = 0; level l fills the sets of size l
    for l in range(1, N + 1):
        S = (size == l).nonzero().squeeze(1)  # (M,) the masked sets of size l
        prev = S[:, None] ^ bit  # (M, N): S without i (or with i, where i ∉ S: dropped below)
        terms = (table[S] + logv[prev]).masked_fill(~masks[S], float("-inf"))  # (M, N)
        # out of place (index_put, not logv[S] = ...) so autograd can differentiate through the levels
        logv = logv.index_put((S,), torch.logsumexp(terms, dim=1) - math.log(l))
    return logv[-1]  # the full mask: all N tokens to reveal


def exact_references(model, prompt, completion, mask_id=None):
    """(exact log-likelihood, exact ELBO), both scalar tensors, from one conditional table."""
    table = conditional_table(model, prompt, completion, mask_id)  # (2^N, N)
    return exact_logprob(table), exact_elbo(table)


if __name__ == "__main__":

    parser = argparse.ArgumentParser(description="exact log-likelihood and exact ELBO of short completions")
    parser.add_argument("--model-dir", type=str, default=TINY_DIR, help="checkpoint in the official layout")
    parser.add_argument("--prompt", type=str, default="What is 2+3?", help="user message (chat template applied)")
    parser.add_argument("--answers", type=str, default="5.,five!,42 :)", help="comma-separated completions to score")
    args = parser.parse_args()
    model, tok = load(args.model_dir)
    model.eval()
    prompt = torch.tensor(prompt_ids(tok, args.prompt))  # (P,)
    for text in args.answers.split(","):
        completion = torch.tensor(tok(text, add_special_tokens=False)["input_ids"])  # (N,)
        if completion.numel() > 12:
            raise SystemExit(f"{text!r} is {completion.numel()} tokens: 2^N forward rows, keep N <= 12")
        with torch.no_grad():
            ll, elbo = exact_references(model, prompt, completion)
        print(f"{text!r:>10}  N={completion.numel()}  log p = {ll.item():9.4f}   ELBO = {elbo.item():9.4f}"
              f"   gap = {(ll - elbo).item():.4f}   ({2 ** completion.numel() - 1} forward rows)")
