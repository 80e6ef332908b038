"""
Tests for exact.py: the exact random-order log-likelihood and the exact ELBO, against brute force
over all N! orders and all masks with one model call per step, a hand-computed two-token case,
a context-free model (where the bound is tight), and the estimators of logprob.py at their limits.

Run:  .venv/bin/python -m pytest tests/test_exact.py -q
"""
import itertools
import math

import torch
import torch.nn as nn

from lab.exact import conditional_table, exact_elbo, exact_logprob, exact_references, subset_masks
from logprob import one_step_logprobs
from methods.estimators import elbo_token_logprobs
from model import LLaDA, LLaDAConfig

V, MASK = 64, 63


def make_model(seed=0, init_std=0.5):
    # a large init makes the conditionals depend strongly on the context (far from the bound's equality case)
    cfg = LLaDAConfig(d_model=32, n_heads=4, n_kv_heads=4, n_layers=2, mlp_hidden_size=64, vocab_size=V,
                      embedding_size=V, mask_token_id=MASK, eos_token_id=62, max_sequence_length=64,
                      init_std=init_std)
    torch.manual_seed(seed)
    return LLaDA(cfg).eval().double()


def case(seed, P=3, N=4):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 60, (P,), generator=g), torch.randint(0, 60, (N,), generator=g)


def conditional(model, prompt, completion, masked, i):
    """log p(o_i | q, o with the positions in `masked` masked), one model call: the brute force."""
    x = torch.cat([prompt, completion]).clone()
    x[[prompt.numel() + j for j in masked]] = MASK
    return torch.log_softmax(model(x[None])[0, prompt.numel() + i], dim=-1)[completion[i]]


def brute_force(model, prompt, completion):
    """(log mean over the N! orders of the product of conditionals, mean over orders of its log)."""
    N = completion.numel()
    logs = []
    for order in itertools.permutations(range(N)):
        masked, total = set(range(N)), 0.0
        for i in order:  # reveal i: its conditional given everything revealed so far
            total = total + conditional(model, prompt, completion, sorted(masked), i)
            masked.discard(i)
        logs.append(total)
    logs = torch.stack(logs)
    return torch.logsumexp(logs, 0) - math.log(len(logs)), logs.mean()


def brute_elbo(model, prompt, completion):
    """LLaDA's bound written out over masks: Σ_l (1/N)(N/l)(1/C(N,l)) Σ_{|S|=l} Σ_{i∈S} ℓ(i, S)."""
    N, total = completion.numel(), 0.0
    for l in range(1, N + 1):
        for S in itertools.combinations(range(N), l):
            s = sum(conditional(model, prompt, completion, S, i) for i in S)
            total = total + s / (l * math.comb(N, l))
    return total


def test_subset_masks_enumerate_every_set_once():
    m = subset_masks(4)
    assert m.shape == (16, 4) and len({tuple(r.tolist()) for r in m}) == 16
    assert m[0].sum() == 0 and m[-1].all() and m[0b0101].tolist() == [True, False, True, False]


def test_exact_values_equal_brute_force_over_orders_and_masks():
    model = make_model()
    for seed, N in ((0, 3), (1, 4), (2, 4)):
        prompt, completion = case(seed, N=N)
        with torch.no_grad():
            ll, elbo = exact_references(model, prompt, completion)
            want_ll, want_avg_log = brute_force(model, prompt, completion)
            want_elbo = brute_elbo(model, prompt, completion)
        assert abs(ll - want_ll) < 1e-10, (ll, want_ll)
        # the ELBO is the average over orders of the log-product, and equals the bound written over masks
        assert abs(elbo - want_elbo) < 1e-10 and abs(elbo - want_avg_log) < 1e-10
        assert elbo < ll - 1e-3  # strictly below: this model's conditionals depend on the context


class TwoTokenModel(nn.Module):
    """A 'model' with hand-set conditionals for a 2-token completion (o1, o2) = (0, 1) after a 1-token
    prompt: p(o1 | both masked) = .5, p(o2 | both masked) = .2, p(o1 | o2 seen) = .9, p(o2 | o1 seen) = .6."""
    def __init__(self):
        super().__init__()
        self.config = LLaDAConfig(vocab_size=4, embedding_size=4, mask_token_id=3)

    def forward(self, x, attention_mask=None):
        logp = torch.full((x.shape[0], x.shape[1], 4), -50.0, dtype=torch.float64)
        for b in range(x.shape[0]):
            m1, m2 = x[b, 1] == 3, x[b, 2] == 3
            p1 = 0.5 if m2 else 0.9  # o1's conditional: is o2 visible?
            p2 = 0.2 if m1 else 0.6
            logp[b, 1, 0], logp[b, 1, 2] = math.log(p1), math.log(1 - p1)
            logp[b, 2, 1], logp[b, 2, 2] = math.log(p2), math.log(1 - p2)
        return logp


def test_two_tokens_by_hand():
    prompt, completion = torch.tensor([2]), torch.tensor([0, 1])
    table = conditional_table(TwoTokenModel(), prompt, completion)
    # orders (1, 2): .5 * .6 = .30, and (2, 1): .2 * .9 = .18; p = (.30 + .18) / 2 = .24
    assert abs(exact_logprob(table).item() - math.log(0.24)) < 1e-6
    assert abs(exact_elbo(table).item() - 0.5 * (math.log(0.30) + math.log(0.18))) < 1e-6


class ContextFree(nn.Module):
    """Every position's distribution ignores the input: all orders give the same product."""
    def __init__(self, N):
        super().__init__()
        self.config = LLaDAConfig(vocab_size=V, embedding_size=V, mask_token_id=MASK)
        self.logits = torch.randn(1, 64, V, dtype=torch.float64, generator=torch.Generator().manual_seed(N))

    def forward(self, x, attention_mask=None):
        return self.logits[:, :x.shape[1]].expand(x.shape[0], -1, -1)


def test_bound_is_tight_for_a_context_free_model():
    prompt, completion = case(5, N=5)
    model = ContextFree(5)
    ll, elbo = exact_references(model, prompt, completion)
    # = Σ_k log p(o_k), which here is also what the one-step estimator reads off one pass
    one_step = one_step_logprobs(model, prompt[None], completion[None], p_mask_prompt=0.0).sum()
    assert abs(ll - elbo) < 1e-10 and abs(ll - one_step) < 1e-5  # the estimator reads fp32


def test_elbo_below_exact_on_every_case():
    for seed in range(2):
        model = make_model(seed=seed, init_std=0.1 + 0.4 * seed)
        for c in range(6):
            prompt, completion = case(100 * seed + c, N=2 + c % 5)
            with torch.no_grad():
                ll, elbo = exact_references(model, prompt, completion)
            assert elbo <= ll + 1e-12, (seed, c, elbo, ll)


def test_estimators_at_their_limits_equal_table_entries():
    model = make_model()
    prompt, completion = case(7, N=5)
    with torch.no_grad():
        table = conditional_table(model, prompt, completion)
        # the one-step estimator without prompt masking reads the fully masked row: one forward row
        one = one_step_logprobs(model, prompt[None], completion[None], p_mask_prompt=0.0)[0]
        assert torch.allclose(one.double(), table[-1], atol=1e-5)  # the estimator reads fp32
        # the MC ELBO is an unbiased estimate of the exact ELBO: 400 draws of k = 4 within 4 standard errors
        g = torch.Generator().manual_seed(0)
        draws = torch.stack([elbo_token_logprobs(model, prompt[None], completion[None], k=4, generator=g).sum()
                             for _ in range(400)])
    se = draws.std() / math.sqrt(len(draws))
    assert abs(draws.mean() - exact_elbo(table)) < 4 * se, (draws.mean(), exact_elbo(table), se)


def test_elbo_token_logprobs_batch_equals_one_sequence_at_a_time():
    model = make_model()
    prompts = torch.stack([case(s)[0] for s in (1, 2)])
    completions = torch.stack([case(s, N=5)[1] for s in (1, 2)])
    with torch.no_grad():
        both = elbo_token_logprobs(model, prompts, completions, k=3, generator=torch.Generator().manual_seed(9))
        g = torch.Generator().manual_seed(9)  # rows draw their masks in order from one generator
        one = [elbo_token_logprobs(model, prompts[b:b + 1], completions[b:b + 1], k=3, generator=g) for b in (0, 1)]
    assert torch.allclose(both, torch.cat(one), atol=1e-12)


def test_gradient_equals_gradient_of_the_brute_force():
    model = make_model()
    prompt, completion = case(3, N=3)
    param = model.transformer.blocks[0].attn_out.weight  # (C, C): any weight the conditionals depend on
    ll, _ = exact_references(model, prompt, completion)
    g_exact, = torch.autograd.grad(ll, param)
    want, _ = brute_force(model, prompt, completion)
    g_brute, = torch.autograd.grad(want, param)
    # 1e-5 on entries of size ~1: the model's RMSNorm runs in fp32 even in a float64 model, and batched
    # and one-row matmuls round differently in the backward pass
    assert g_exact.abs().max() > 0.1 and torch.allclose(g_exact, g_brute, atol=1e-5)
