"""
Tests for study_estimators.py's bookkeeping: on a model whose conditionals ignore the context the
exact log-likelihood is Σ_k log p(o_k), so the one-step and coupled estimators must come out with
zero error and gradient cosine 1, and the MC ELBO unbiased; the rank correlation against a hand case.

Run:  .venv/bin/python -m pytest tests/test_study_estimators.py -q
"""
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

    def forward(self, x, attention_mask=None):
        return self.w[:x.shape[1]].expand(x.shape[0], -1, -1)  # (B, T, V)


def test_spearman_by_hand():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert abs(spearman(x, x * 10) - 1) < 1e-12 and abs(spearman(x, -x) + 1) < 1e-12
    # ranks (0,1,2,3) vs (1,0,3,2): 1 - 6 Σd² / (n(n²-1)) = 1 - 6*4/60 = 0.6
    assert abs(spearman(x, torch.tensor([2.0, 1.0, 4.0, 3.0])) - 0.6) < 1e-12


def test_context_free_model_exact_estimators_and_unbiased_elbo():
    g = torch.Generator().manual_seed(1)
    pairs = []
    for i in range(6):  # 3 groups of 2, rewards differ within a group so every group has a gradient
        q, o = torch.randint(0, 14, (3,), generator=g), torch.randint(0, 14, (4,), generator=g)
        pairs.append((q, o, float(i % 2), i // 2))
    rows, exact, elbo = study(ContextFree(), pairs, draws=24, seed=0)
    for name in ("one-step, p_mask 0", "one-step, p_mask 0.15 (d1)", "coupled (DiffuCoder), p_mask 0"):
        r = rows[name]
        assert abs(r["bias"]) < 1e-5 and r["rmse"] < 1e-5 and abs(r["rank"] - 1) < 1e-12, (name, r)
        assert abs(r["cos_seq"] - 1) < 1e-6 and abs(r["cos_grpo"] - 1) < 1e-6, (name, r)
    assert max(abs(a - b) for a, b in zip(exact, elbo)) < 1e-9  # the bound is tight here
    for k in (1, 4, 16):
        r = rows[f"MC ELBO, k = {k}"]
        # unbiased: |bias| within 4 standard errors of the mean of 6 x 24 draws
        assert r["sd"] > 0 and abs(r["bias"]) < 4 * r["sd"] / (6 * 24) ** 0.5, (k, r)
    # more samples, less noise
    assert rows["MC ELBO, k = 16"]["sd"] < rows["MC ELBO, k = 4"]["sd"] < rows["MC ELBO, k = 1"]["sd"]
    assert rows["exact ELBO (reference)"]["rows"] == 15 and rows["MC ELBO, k = 1"]["groups_with_signal"] == 3
