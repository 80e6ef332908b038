"""
Tests for methods/estimators.py: coupled-GRPO and LLaDA's Monte-Carlo ELBO, each checked against an
independent brute-force computation on a tiny random model (CPU), and the estimator by name.

Run:  .venv/bin/python -m pytest tests/test_estimators.py -q
"""
import itertools
import math

import pytest
import torch

from logprob import one_step_logprobs, prompt_mask
from methods.estimators import (
    ELBO_DRAWS,
    ESTIMATOR_ROWS,
    ESTIMATORS,
    coupled_logprobs,
    coupled_masks,
    elbo_logprob,
    elbo_token_logprobs,
    estimate_logprobs,
    stratified_counts,
    stratified_mask,
)
from test_logprob import MASK, Spy, gen, make_model, tokens


@pytest.fixture(scope="module")
def model():
    return make_model()


# -----------------------------------------------------------------------------
# coupled-GRPO


def test_coupled_views_are_complementary(model):
    spy = Spy(model)
    B, P, N = 3, 7, 50
    prompt, completion = tokens(B, P, 14), tokens(B, N, 15)
    with torch.no_grad():
        coupled_logprobs(spy, prompt, completion, generator=gen(2))
    (x, _), = spy.calls
    assert x.shape == (2 * B, P + N)  # one forward of 2B rows
    v1, v2 = x[:B, P:] == MASK, x[B:, P:] == MASK
    assert torch.equal(v1 ^ v2, torch.ones(B, N, dtype=torch.bool))  # each token masked in exactly one view
    assert torch.equal(x[:B, :P], x[B:, :P])  # same prompt mask in both views
    assert torch.equal(x[:B, P:][~v1], completion[~v1]) and torch.equal(x[B:, P:][~v2], completion[~v2])


def test_coupled_mask_ratio_range():
    m = coupled_masks((400, 500), gen(0))
    frac = m.float().mean(1)  # per-row ≈ t ~ U(0.2, 0.8)
    assert frac.min() > 0.15 and frac.max() < 0.85
    assert abs(frac.mean().item() - 0.5) < 0.03  # mean of U(0.2, 0.8); sd of the mean ≈ 0.009
    assert abs(frac.std().item() - 0.6 / math.sqrt(12)) < 0.03  # one t PER ROW (sd of U(0.2, 0.8))


def test_coupled_equals_two_explicit_forwards(model):
    B, P, N = 2, 6, 5
    prompt, completion = tokens(B, P, 16), tokens(B, N, 17)
    with torch.no_grad():
        lp = coupled_logprobs(model, prompt, completion, p_mask_prompt=0.3, generator=gen(4))
        g = gen(4)  # replay the draws in the documented order: prompt mask, then t and u
        pm = prompt_mask((B, P), 0.3, g)
        m1 = coupled_masks((B, N), g)
        q = prompt.masked_fill(pm, MASK)
        x1 = torch.cat([q, completion.masked_fill(m1, MASK)], dim=1)
        x2 = torch.cat([q, completion.masked_fill(~m1, MASK)], dim=1)
        l1, l2 = model(x1), model(x2)  # two separate forwards of B rows
    for b in range(B):
        for k in range(N):
            row = (l1 if m1[b, k] else l2)[b, P + k].double()
            ref = row[completion[b, k]] - torch.logsumexp(row, dim=0)
            assert abs(lp[b, k].item() - ref.item()) < 1e-5

# -----------------------------------------------------------------------------
# LLaDA Monte-Carlo ELBO


def test_stratified_counts_are_exactly_uniform_per_row():
    for L, b in [(3, 16), (5, 16), (7, 4), (4, 16), (10, 3), (1, 8)]:
        table = torch.stack([stratified_counts(k, L, b) for k in range(1, L + 1)])  # (L, b)
        assert table.min() >= 1 and table.max() <= L
        for i in range(b):  # over k ~ U{1..L}, each row's count is a permutation of 1..L
            assert sorted(table[:, i].tolist()) == list(range(1, L + 1))
        # agrees with LLaDA's round(linspace(k, k+(b-1)L/b, b)) wrapped, except at exact .5 ties
        not_tie = (2 * torch.arange(b) * L) % (2 * b) != b
        for k in range(1, L + 1):
            ref = torch.linspace(k, k + (b - 1) * L / b, b).round().long()
            ref = (ref - 1) % L + 1
            assert torch.equal(table[k - 1][not_tie], ref[not_tie])


def test_stratified_mask_rows_mask_exactly_n_i():
    L, b = 6, 16
    hits = torch.zeros(L)
    for s in range(300):
        m, n = stratified_mask(L, b, gen(s))
        assert m.shape == (b, L) and torch.equal(m.sum(1), n)
        hits += m.float().sum(0)
    # each position is masked with marginal probability E[n]/L = (L+1)/(2L)
    frac, p = hits / (300 * b), (L + 1) / (2 * L)
    assert (frac - p).abs().max() < 0.03


def exact_elbo(model, prompt, answer):
    """Σ_{l=1..L} (1/L) Σ_{|S|=l} (1/C(L,l)) (L/l) Σ_{i∈S} log p(a_i | q, a with S masked)."""
    P, L = prompt.numel(), answer.numel()
    total = 0.0
    for l in range(1, L + 1):
        for S in itertools.combinations(range(L), l):
            x = torch.cat([prompt, answer]).clone()
            x[[P + i for i in S]] = MASK
            logp = torch.log_softmax(model(x[None])[0].double(), dim=-1)  # (P+L, V)
            s = sum(logp[P + i, answer[i]].item() for i in S)
            total += (1 / L) * (1 / math.comb(L, l)) * (L / l) * s
    return total


def test_elbo_matches_exact_enumeration(model):
    prompt, answer = torch.tensor([5, 17, 3, 40]), torch.tensor([8, 21, 33])
    with torch.no_grad():
        exact = exact_elbo(model, prompt, answer)
    # 48 independent one-loop runs (48 x 64 = 3072 samples) give the per-loop standard deviation
    b, runs = 64, 48
    per_loop = [elbo_logprob(model, prompt, answer, mc_num=b, batch_size=b, generator=gen(1000 + s))
                for s in range(runs)]
    mean = sum(per_loop) / runs
    sd = math.sqrt(sum((v - mean) ** 2 for v in per_loop) / (runs - 1))
    assert sd > 0 and abs(mean - exact) < 4 * sd / math.sqrt(runs), (mean, exact, sd)
    # one call looping 16 times (1024 samples), as a user would call it
    big = elbo_logprob(model, prompt, answer, mc_num=16 * b, batch_size=b, generator=gen(1))
    assert abs(big - exact) < 4 * sd / math.sqrt(16), (big, exact, sd)
    assert exact < 0


def test_elbo_one_loop_hand_computation_with_cfg(model):
    prompt, answer = torch.tensor([9, 2, 44]), torch.tensor([1, 30, 12, 7])
    P, L, b = 3, 4, 8
    for cfg in (0.0, 1.5):
        with torch.no_grad():
            got = elbo_logprob(model, prompt, answer, mc_num=b, batch_size=b, cfg_scale=cfg, generator=gen(3))
            m, n = stratified_mask(L, b, gen(3))  # replay the same draws
            val = 0.0
            for i in range(b):
                x = torch.cat([prompt, answer.masked_fill(m[i], MASK)])
                logits = model(x[None])[0].double()
                if cfg > 0:
                    un = model(torch.cat([torch.full((P,), MASK), x[P:]])[None])[0].double()
                    logits = un + (cfg + 1) * (logits - un)
                logp = torch.log_softmax(logits, dim=-1)
                ce = -sum(logp[P + j, answer[j]].item() for j in range(L) if m[i, j])
                val += ce / (n[i].item() / L)
        assert abs(got - (-val / b)) < 1e-4


def test_elbo_rejects_indivisible_mc_num(model):
    with pytest.raises(ValueError):
        elbo_logprob(model, torch.tensor([1, 2]), torch.tensor([3]), mc_num=10, batch_size=4)


def test_estimators_by_name_dispatch_with_the_given_generator(model):
    prompt, completion = tokens(2, 7, 1), tokens(2, 5, 2)
    with torch.no_grad():
        got = {e: estimate_logprobs(model, prompt, completion, e, 0.3, gen(99)) for e in ESTIMATORS}
        want = {"one_step": one_step_logprobs(model, prompt, completion, p_mask_prompt=0.3, generator=gen(99)),
                "coupled": coupled_logprobs(model, prompt, completion, p_mask_prompt=0.3, generator=gen(99)),
                "elbo": elbo_token_logprobs(model, prompt, completion, k=ELBO_DRAWS, generator=gen(99))}
    for e in ESTIMATORS:
        assert torch.equal(got[e], want[e]), e
    assert not torch.equal(got["elbo"], got["one_step"]) and not torch.equal(got["coupled"], got["one_step"])
    with pytest.raises(ValueError, match="unknown estimator"):
        estimate_logprobs(model, prompt, completion, "two_step")
    # the cost lab/cost.py counts (fwd_rows) is ESTIMATOR_ROWS rows per sequence: what the model really sees
    for e in ESTIMATORS:
        spy = Spy(model)
        with torch.no_grad():
            estimate_logprobs(spy, prompt, completion, e, 0.3, gen(99))
        assert len(spy.calls) == 1 and spy.calls[0][0].shape[0] == 2 * ESTIMATOR_ROWS[e], e
