"""
Tests for logprob.py: d1's one-step estimator and its masks, checked against an independent
brute-force computation on a tiny random model (CPU). The field's estimators: test_estimators.py.

Run:  .venv/bin/python -m pytest tests/test_logprob.py -q
"""
import math

import pytest
import torch
import torch.nn as nn

from logprob import one_step_logprobs, prompt_mask
from model import LLaDA, LLaDAConfig

V, MASK, EOS = 64, 63, 62  # tiny vocab; the mask id is only ever read from model.config


def make_model(init_std=0.5, seed=0):
    # a large init_std makes the random model's distributions far from flat, so that wrong
    # positions / wrong masks give visibly different numbers
    cfg = LLaDAConfig(d_model=32, n_heads=4, n_kv_heads=4, n_layers=2, mlp_hidden_size=64,
                      vocab_size=V, embedding_size=V, mask_token_id=MASK, eos_token_id=EOS,
                      max_sequence_length=256, init_std=init_std)
    torch.manual_seed(seed)
    return LLaDA(cfg).eval()


class Spy(nn.Module):
    """Wraps a model and records every input it sees (to check what the estimator feeds it)."""
    def __init__(self, model):
        super().__init__()
        self.model, self.config, self.calls = model, model.config, []

    def forward(self, input_ids, attention_mask=None):
        self.calls.append((input_ids.clone(), None if attention_mask is None else attention_mask.clone()))
        return self.model(input_ids, attention_mask=attention_mask)


@pytest.fixture(scope="module")
def model():
    return make_model()


def gen(seed):
    return torch.Generator().manual_seed(seed)


def tokens(B, T, seed, low=0, high=60):
    return torch.randint(low, high, (B, T), generator=gen(seed))  # never the mask/eos id

# -----------------------------------------------------------------------------
# masks


def test_same_seed_same_mask_different_seed_different_mask(model):
    a, b, c = (prompt_mask((4, 64), 0.15, gen(s)) for s in (7, 7, 8))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    prompt, completion = tokens(4, 64, 1), tokens(4, 8, 2)
    with torch.no_grad():
        lp1 = one_step_logprobs(model, prompt, completion, generator=gen(7))
        lp2 = one_step_logprobs(model, prompt, completion, generator=gen(7))
        lp3 = one_step_logprobs(model, prompt, completion, generator=gen(8))
    assert torch.equal(lp1, lp2)  # θ, θ_old and θ_ref see identical inputs for the same seed
    assert not torch.allclose(lp1, lp3)  # a different q' changes the estimate


def test_masked_fraction_matches_p():
    p, B, P = 0.15, 200, 64
    m = prompt_mask((B, P), p, gen(0))
    se = math.sqrt(p * (1 - p) / (B * P))
    assert abs(m.float().mean().item() - p) < 4 * se
    assert prompt_mask((B, P), 1.0, gen(1)).all()
    assert not prompt_mask((B, P), 0.0, gen(2)).any()


def test_estimator_uses_prompt_mask_from_generator(model):
    # the prompt the model sees = prompt with exactly prompt_mask(same seed) replaced by [MASK],
    # followed by N mask tokens
    spy = Spy(model)
    prompt, completion = tokens(3, 20, 3), tokens(3, 6, 4)
    with torch.no_grad():
        one_step_logprobs(spy, prompt, completion, p_mask_prompt=0.5, generator=gen(11))
    (x, am), = spy.calls
    pm = prompt_mask((3, 20), 0.5, gen(11))
    assert torch.equal(x[:, :20] == MASK, pm)
    assert torch.equal(x[:, :20][~pm], prompt[~pm])
    assert (x[:, 20:] == MASK).all() and am is None

# -----------------------------------------------------------------------------
# one-step estimator


def test_p0_equals_hand_computation(model):
    B, P, N = 2, 5, 4
    prompt, completion = tokens(B, P, 5), tokens(B, N, 6)
    with torch.no_grad():
        lp = one_step_logprobs(model, prompt, completion, p_mask_prompt=0.0, generator=gen(0))
        x = torch.cat([prompt, torch.full((B, N), MASK)], dim=1)
        logits = model(x)
    assert lp.shape == (B, N) and lp.dtype == torch.float32
    for b in range(B):
        for k in range(N):
            row = logits[b, P + k].double()
            ref = row[completion[b, k]] - torch.logsumexp(row, dim=0)  # log softmax, no shift
            assert abs(lp[b, k].item() - ref.item()) < 1e-5


def test_completion_tokens_never_influence_the_input(model):
    spy = Spy(model)
    prompt = tokens(2, 8, 7)
    c1, c2 = tokens(2, 6, 8), tokens(2, 6, 9)
    assert not torch.equal(c1, c2)
    with torch.no_grad():
        lp1 = one_step_logprobs(spy, prompt, c1, generator=gen(3))
        lp2 = one_step_logprobs(spy, prompt, c2, generator=gen(3))
        logp = torch.log_softmax(model(spy.calls[0][0]).float(), dim=-1)[:, 8:]  # (B, N, V)
    assert torch.equal(spy.calls[0][0], spy.calls[1][0])  # identical model input
    # both estimates are reads of the same (B, N, V) table, at different entries
    assert torch.allclose(lp1, logp.gather(-1, c1[..., None])[..., 0], atol=1e-6)
    assert torch.allclose(lp2, logp.gather(-1, c2[..., None])[..., 0], atol=1e-6)


def test_attention_mask_is_extended_over_the_completion(model):
    spy = Spy(model)
    prompt, completion = tokens(2, 5, 10), tokens(2, 3, 11)
    am = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    with torch.no_grad():
        one_step_logprobs(spy, prompt, completion, generator=gen(0), attention_mask=am)
    seen = spy.calls[0][1]
    assert seen.shape == (2, 8) and torch.equal(seen[:, :5], am) and (seen[:, 5:] == 1).all()


def test_gradients_flow_and_point_uphill():
    model = make_model()
    params = [p for p in model.parameters() if p.requires_grad]
    # prompt ids in [0, 30), completion ids in [30, 60): disjoint, so embedding rows of the
    # completion ids are used ONLY as targets and must get exactly zero gradient
    prompt, completion = tokens(2, 6, 12, 0, 30), tokens(2, 4, 13, 30, 60)
    f = lambda: one_step_logprobs(model, prompt, completion, generator=gen(5)).sum()
    f().backward()
    g = [p.grad.clone() for p in params]
    norm = torch.sqrt(sum((x.double() ** 2).sum() for x in g)).item()
    assert norm > 1e-3
    assert all(x.abs().sum() > 0 for x in g)  # every block, norm and the head get gradient
    emb, = [m for m in model.modules() if isinstance(m, nn.Embedding)]
    assert emb.weight.grad[completion.unique()].abs().sum() == 0  # completion never entered the input
    assert emb.weight.grad[MASK].abs().sum() > 0  # the mask tokens did
    # central finite difference along the unit gradient direction = ||grad||  (directional derivative)
    eps = 1e-2
    with torch.no_grad():
        for p, x in zip(params, g):
            p.add_(x, alpha=eps / norm)
        up = f().item()
        for p, x in zip(params, g):
            p.add_(x, alpha=-2 * eps / norm)
        down = f().item()
        for p, x in zip(params, g):
            p.add_(x, alpha=eps / norm)
    assert up > down
    assert abs((up - down) / (2 * eps) - norm) < 0.05 * norm

@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cpu_generator_gives_same_mask_on_gpu():
    a = prompt_mask((4, 32), 0.3, gen(5), device="cuda")
    b = prompt_mask((4, 32), 0.3, gen(5), device="cpu")
    assert a.is_cuda and torch.equal(a.cpu(), b)
