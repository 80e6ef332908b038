"""
Tests for study_estimators.py's bookkeeping: on a model whose conditionals ignore the context the
exact log-likelihood is Σ_k log p(o_k), so the one-step, coupled, AR-order and trajectory estimators
must come out with zero error and gradient cosine 1, and the MC ELBO and ESPO's coupled ELBO unbiased;
the rank correlation against a hand case.

Run:  .venv/bin/python -m pytest tests/test_study_estimators.py -q
"""
from types import SimpleNamespace

import torch
import torch.nn as nn

from lab.study_estimators import spearman, study
from model import LLaDAConfig

V, MASK = 16, 15


class ContextFree(nn.Module):
    """Logits that depend on the position only, a trainable (T, V) table: all orders agree."""
    def __init__(self):
        super().__init__()
        self.config = LLaDAConfig(vocab_size=V, embedding_size=V, mask_token_id=MASK)
        self.w = nn.Parameter(torch.randn(32, V, generator=torch.Generator().manual_seed(0)))

    def forward(self, x, attention_mask=None, logits_at=None):
        logits = self.w[:x.shape[1]].expand(x.shape[0], -1, -1)  # (B, T, V)
        return logits if logits_at is None else logits.gather(1, logits_at[..., None].expand(-1, -1, V))


def test_spearman_by_hand():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert abs(spearman(x, x * 10) - 1) < 1e-12 and abs(spearman(x, -x) + 1) < 1e-12
    # ranks (0,1,2,3) vs (1,0,3,2): 1 - 6 Σd² / (n(n²-1)) = 1 - 6*4/60 = 0.6
    assert abs(spearman(x, torch.tensor([2.0, 1.0, 4.0, 3.0])) - 0.6) < 1e-12


def test_context_free_model_exact_estimators_and_unbiased_elbo():
    g = torch.Generator().manual_seed(1)
    pairs = []
    for i in range(6):  # 3 groups of 2, rewards differ within a group so every group has a gradient
        q, o = torch.randint(0, 14, (1, 3), generator=g), torch.randint(0, 14, (1, 4), generator=g)
        commit = torch.randperm(8, generator=g)[:4].sort().values[None]  # the sampler's steps, in order
        pairs.append(SimpleNamespace(q=q, o=o, commit=commit, r=float(i % 2), gi=i // 2, a=float(i % 2) - 0.5))
    rows, exact, elbo, ar_gap = study(ContextFree(), pairs, draws=24, seed=0)
    # --only: a subset's rows are the full run's (each estimator draws from its own generator)
    some, *_ = study(ContextFree(), pairs, draws=24, seed=0, names=("MC ELBO, k = 4", "SPG EUBO, β 1.5"))
    assert set(some) == {"MC ELBO, k = 4", "SPG EUBO, β 1.5", "exact ELBO (reference)", "exact EUBO, β 1.5 (reference)"}
    assert all(some[n] == rows[n] for n in some)
    assert ar_gap < 1e-5  # fp32 against the loop's fp64
    exact_names = ["one-step, p_mask 0", "one-step, p_mask 0.15 (d1)", "coupled (DiffuCoder), p_mask 0",
                   "AR order (JustGRPO)", *(f"trajectory, N = {n}" for n in (1, 2, 4, 8))]
    for name in exact_names:
        r = rows[name]
        assert abs(r["bias"]) < 1e-5 and r["rmse"] < 1e-5 and abs(r["rank"] - 1) < 1e-12, (name, r)
        assert abs(r["cos_seq"] - 1) < 1e-6 and abs(r["cos_grpo"] - 1) < 1e-6, (name, r)
    assert max(abs(a - b) for a, b in zip(exact, elbo)) < 1e-9  # the bound is tight here
    for name in (*(f"MC ELBO, k = {k}" for k in (1, 4, 16)), "ESPO coupled ELBO, M = 2"):
        r = rows[name]
        # unbiased: |bias| within 4 standard errors of the mean of 6 x 24 draws
        assert r["sd"] > 0 and abs(r["bias"]) < 4 * r["sd"] / (6 * 24) ** 0.5, (name, r)
    # more samples, less noise
    assert rows["MC ELBO, k = 16"]["sd"] < rows["MC ELBO, k = 4"]["sd"] < rows["MC ELBO, k = 1"]["sd"]
    assert rows["exact ELBO (reference)"]["rows"] == 15 and rows["MC ELBO, k = 1"]["groups_with_signal"] == 3
