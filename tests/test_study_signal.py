"""
Tests for lab/study_signal.py: the pairwise cosine by hand, and the batch gradient's determinism (same
seed, same gradient; another seed, another rollout and gradient).

Run:  .venv/bin/python -m pytest tests/test_study_signal.py -q
"""
import torch

import methods.grpo
from conftest import write_digit_model
from lab.study_signal import batch_gradient, mean_pairwise_cosine
from taskdata import puzzles
from modelio.checkpoint import load


def test_mean_pairwise_cosine_by_hand():
    g = torch.tensor([1.0, 2.0, 2.0], dtype=torch.float64)
    # pairs (g, 2g), (g, -g), (2g, -g): cosines 1, -1, -1
    assert abs(mean_pairwise_cosine([g, 2 * g, -g]) + 1 / 3) < 1e-12
    e1, e2 = torch.eye(2, dtype=torch.float64)
    assert abs(mean_pairwise_cosine([e1, e2])) < 1e-12


def test_batch_gradient_is_keyed_by_its_seed(tmp_path):
    write_digit_model(tmp_path / "m")
    model, tok = load(tmp_path / "m")
    exs = puzzles.make_toy(puzzles.split_grids()[0], 4, seed=1)
    gargs = methods.grpo.parse_args(["--num-generations", "4"])
    a, ra = batch_gradient(model, tok, exs, gargs, 5)
    b, rb = batch_gradient(model, tok, exs, gargs, 5)
    c, _ = batch_gradient(model, tok, exs, gargs, 6)
    assert torch.equal(a, b) and ra == rb and a.norm() > 0
    assert mean_pairwise_cosine([a, c]) < 0.999
    # the objective comes from the parsed flags: wd1's gradient is another one on the same batch
    wd1 = methods.grpo.parse_args(["--num-generations", "4", "--objective", "wd1"])
    w, rw = batch_gradient(model, tok, exs, wd1, 5)
    assert rw == ra and not torch.allclose(w, a)
