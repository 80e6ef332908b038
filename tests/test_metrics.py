"""
Tests for metrics.py: a resumed run keeps the lines up to its step and rewrites the rest, a fresh run
starts empty, a torn last line is skipped, and the plot entry says what is missing without matplotlib.

Run:  .venv/bin/python -m pytest tests/test_metrics.py -q
"""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO
from ops.metrics import ARGS_FILE, first_last, log_metrics, open_metrics, read_metrics


def test_resume_keeps_earlier_lines_and_fresh_run_starts_empty(tmp_path):
    f, elapsed = open_metrics(str(tmp_path), {"lr": 1.0})
    assert elapsed == 0.0
    for s in range(1, 5):
        log_metrics(f, {"step": s, "elapsed_s": 10.0 * s, "loss": 1.0 / s})
    f.close()
    assert json.loads((tmp_path / ARGS_FILE).read_text()) == {"lr": 1.0}
    f, elapsed = open_metrics(str(tmp_path), {"lr": 1.0}, start_step=2)  # resumed from step 2's save
    assert [r["step"] for r in read_metrics(str(tmp_path))] == [1, 2] and elapsed == 20.0
    log_metrics(f, {"step": 3, "elapsed_s": 31.0, "loss": 0.3})
    f.close()
    assert [r["step"] for r in read_metrics(str(tmp_path))] == [1, 2, 3]
    open_metrics(str(tmp_path), {"lr": 2.0})[0].close()  # a fresh run in the same folder
    assert read_metrics(str(tmp_path)) == []


def test_torn_last_line_is_skipped(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "lo')
    assert read_metrics(str(tmp_path / "metrics.jsonl")) == [{"step": 1, "loss": 0.5}]


def test_plot_entry_without_matplotlib_says_so(tmp_path):
    if importlib.util.find_spec("matplotlib") is not None:
        pytest.skip("matplotlib is installed here: the missing-dependency message cannot be tested")
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5, "loss": 1.0}\n')
    p = subprocess.run([sys.executable, "-m", "ops.metrics", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert p.returncode != 0 and "pip install matplotlib" in p.stderr


def test_first_last_skips_lines_without_the_key():
    rows = [{"step": 0, "heldout_acc": 30.0}, {"step": 1, "reward": 0.5}, {"step": 2, "heldout_acc": 35.5}]
    assert first_last(rows, "heldout_acc") == (30.0, 35.5) and first_last(rows, "kl") == (None, None)


def test_progress_bar_respects_tqdm_disable():
    # tqdm reads TQDM_* variables (at import) only for arguments not passed: a bar shown on rank 0 must still
    # obey TQDM_DISABLE=1, and other ranks never draw one. A fresh process for each environment
    code = ("import io; from ops.metrics import progress; "
            "print(progress(range(3), True, file=io.StringIO()).disable, progress(range(3), False).disable)")
    for env, shown in (({}, "False True"), ({"TQDM_DISABLE": "1"}, "True True")):
        environ = {k: v for k, v in os.environ.items() if not k.startswith("TQDM_")}
        p = subprocess.run([sys.executable, "-c", code], cwd=REPO, env={**environ, **env}, capture_output=True,
                           text=True)
        assert p.stdout.split() == shown.split(), p.stderr
