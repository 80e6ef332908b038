"""
Tests for study_ablations.py on hand-made metrics files: final accuracies, the mean and its 95 %
t-interval, the gain paired by seed, and the mean curves at the rounds every seed logged.

Run:  .venv/bin/python -m pytest tests/test_study_ablations.py -q
"""
import json
import math

from lab.study_ablations import load_runs, mean_curves, summarize


def write(root, variant, seed, points):
    d = root / variant / f"seed{seed}"
    d.mkdir(parents=True)
    lines = [{"step": s, "heldout_acc": a, "elapsed_s": t} for s, a, t in points]
    lines.insert(1, {"step": 1, "reward": 0.5})  # a round without an evaluation is skipped
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def test_table_and_curves_by_hand(tmp_path):
    write(tmp_path, "default", 0, [(0, 10.0, 0.0), (5, 20.0, 50.0)])
    write(tmp_path, "default", 1, [(0, 12.0, 0.0), (5, 30.0, 70.0)])
    write(tmp_path, "mu4", 0, [(0, 10.0, 0.0), (5, 26.0, 90.0)])
    write(tmp_path, "mu4", 1, [(0, 12.0, 0.0), (5, 31.0, 110.0)])
    table = summarize(load_runs(str(tmp_path)))
    assert table["default"]["final"] == {0: 20.0, 1: 30.0} and table["default"]["mean"] == 25.0
    # two seeds: t(0.975, 1 dof) = 12.706, sd of (20, 30) = 7.071, half-width = 12.706 * 7.071 / sqrt(2)
    assert abs(table["default"]["ci"] - 12.706 * math.sqrt(50) / math.sqrt(2)) < 1e-9
    # paired gains 6 and 1: mean 3.5, sd 3.536
    assert table["mu4"]["gain"] == 3.5 and abs(table["mu4"]["gain_ci"] - 12.706 * math.sqrt(12.5) / math.sqrt(2)) < 1e-9
    assert table["default"]["gain"] is None and table["mu4"]["seconds"] == 100.0
    curves = mean_curves(load_runs(str(tmp_path)))
    assert curves["mu4"] == [(0, 11.0, 0.0), (5, 28.5, 100.0)]
