"""
Tests for the honest protocol end to end on CPU (docs/evaluation.md "An honest protocol"): grpo.py's
Sudoku split by solution (printed and recorded), --val-size with --eval-every (val_acc rows, best.json
naming a save that --keep-last and --resume keep), `lab.evals select` on that run (the table with both
checkpoints), ops/best.py's decisions against a hand-kept maximum, and the one-line refusals.

Run: python -m pytest tests/test_protocol.py -q
"""
import json
import os
import subprocess
import sys
from ops.checks import check_grpo_args
from sample import check_schedule
from tasks import TASKS
from types import SimpleNamespace

import pytest

from conftest import REPO, run, write_digit_model
from lab.evals import bootstrap_ci
from ops.best import Best
from ops.metrics import read_metrics
from taskdata.puzzles import sudoku_grids

SMALL = ["--prompts-per-step", "2", "--groups-per-micro", "2", "--num-generations", "3", "--num-iterations", "1",
         "--diffusion-steps", "4", "--lr", "1e-2"]


def grpo(*flags):
    return [sys.executable, str(REPO / "grpo.py"), *SMALL, *flags]


def refused(cmd):
    """(exit status, stderr) of a command that must refuse its input."""
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    return p.returncode, p.stderr.strip()


def test_sudoku_split_by_solution_through_grpo(tmp_path):
    grids = sudoku_grids()
    rows = lambda gs: "Puzzle,Solution\n" + "".join(f"0000{g[4:]},{g}\n" for g in gs)
    (tmp_path / "train.csv").write_text(rows(grids[:12] + grids[:3]))  # 15 puzzles, 3 grids twice
    (tmp_path / "test.csv").write_text(rows(grids[2:6]))
    model, out = tmp_path / "tiny", tmp_path / "run"
    write_digit_model(model)
    test_csv = os.path.relpath(tmp_path / "test.csv", REPO)  # as a user types it, relative to the checkout
    # d1's Sudoku canvas is 256 tokens under any preset: a 16-token one, said, for the tiny model's seconds
    flags = ("--preset", "tiny", "--task", "sudoku", "--gen-length", "16", "--block-length", "16",
             "--data", str(tmp_path / "train.csv"), "--sudoku-split",
             "solution", "--sudoku-test", test_csv, "--model-dir", str(model), "--out-dir", str(out),
             "--num-generations", "2", "--val-size", "2", "--eval-every", "1")
    stdout = run(grpo(*flags, "--rounds", "1"), REPO)
    dropped = sum(g in grids[2:6] for g in grids[:12] + grids[:3])  # grids 2-5, and grid 2 a second time
    assert dropped == 5
    assert f"dropped {dropped} of 15 training puzzles whose solution grid is in {test_csv}" in stdout
    for record in (out / "train_args.json", out / "save_info.json", out / "saves" / "step-000001" / "save_info.json"):
        info = json.loads(record.read_text())
        assert (info["sudoku_split"], info["sudoku_dropped"], info["val_size"]) == ("solution", dropped, 2)
    assert [r["step"] for r in read_metrics(str(out)) if "val_acc" in r] == [0, 1]  # any task validates now
    # the flags are recorded as typed beside the split's record, so --resume auto sees the same run
    assert "resumed from" in run(grpo(*flags, "--rounds", "2", "--resume", "auto"), REPO)


def test_validation_best_json_keep_last_resume_and_select(tmp_path):
    model, out = tmp_path / "tiny", tmp_path / "run"
    write_digit_model(model)
    flags = ["--model-dir", str(model), "--out-dir", str(out), "--num-examples", "40", "--val-size", "8",
             "--eval-every", "1", "--save-every", "2", "--keep-last", "1"]
    run(grpo(*flags, "--rounds", "4"), REPO)
    run(grpo(*flags, "--rounds", "5", "--resume"), REPO)  # the best so far is read back, not measured anew
    curve = [(r["step"], r["val_acc"]) for r in read_metrics(str(out)) if "val_acc" in r]
    assert [s for s, _ in curve] == [0, 1, 2, 3, 4, 5]
    top = max(v for _, v in curve)
    first = next(s for s, v in curve if v == top)  # strict improvements only: the earliest round at the maximum
    best = json.loads((out / "best.json").read_text())
    assert (best["step"], best["val_acc"], best["save"]) == (first, top, f"saves/step-{first:06d}")
    # --keep-last 1: the newest save, and the one best.json names, however old
    assert sorted(p.name for p in (out / "saves").iterdir()) == sorted({f"step-{first:06d}", "step-000005"})
    sel = tmp_path / "sel"
    stdout = run([sys.executable, "-m", "lab.evals", "select", str(out), "--task", "toy", "--toy-items", "20",
                  "--out-dir", str(sel)], REPO)
    report = json.loads((sel / "select.json").read_text())
    assert [(r["checkpoint"], r["step"], r["gen_length"]) for r in report["rows"]] == [("final", 5, 16),
                                                                                       ("selected", first, 16)]
    for r in report["rows"]:
        assert r["ci"][0] <= r["accuracy"] <= r["ci"][1] and r["items"] == 20
        direct = json.loads((sel / f"{r['checkpoint']}.json").read_text())[0]["accuracy"]
        assert r["accuracy"] == direct
    assert report["val_curve"] == [list(p) for p in curve] and report["best"] == best
    table = (sel / "select.md").read_text()
    assert "| final | 5 | 16 |" in table and f"| selected | {first} | 16 |" in table and table in stdout
    manifest = json.loads((sel / "final" / "toy_16" / "manifest.json").read_text())
    assert manifest["train_split"]["val_size"] == 8  # eval.py records the evaluated model's split
    # the field's eval entry point, its sampler flags passed through
    field = tmp_path / "sel-field"
    run([sys.executable, "-m", "lab.evals", "select", str(out), "--entry", "methods.eval", "--toy-items", "20",
         "--out-dir", str(field), "--block-length", "8", "--cache", "dual"], REPO)
    for name in ("final", "selected"):
        assert json.loads((field / name / "toy_16" / "manifest.json").read_text())["cache"] == "dual"


class FakeCurve:
    def __init__(self):
        self.last, self.items = {}, 8


def test_best_saves_strict_improvements_only_and_survives_a_resume(tmp_path):
    args = SimpleNamespace(eval_every=2, val_size=8, rounds=9, out_dir=str(tmp_path), resume=False)
    fake_run = SimpleNamespace(master=True, distributed=False)
    saves, curve = [], FakeCurve()
    best = Best(args, fake_run, 0, saves.append)
    vals = {0: 10.0, 2: 10.0, 4: 30.0, 6: 20.0, 8: 40.0, 9: 40.0}  # evaluated at 0, every 2, and the last
    regular = {4, 9}  # rounds the trainer saved anyway
    running, expected_saves, expected_best = float("-inf"), [], None
    for step in range(10):
        curve.last = {"val_acc": vals[step]} if step in vals else {"val_acc": -1.0}  # stale off the schedule
        got = best.update(step, curve, step in regular)
        better = step in vals and vals[step] > running
        assert got == better
        if better:
            running, expected_best = vals[step], step
            if step not in regular:
                expected_saves.append(step)
    assert saves == expected_saves == [0, 8]
    rec = json.loads((tmp_path / "best.json").read_text())
    assert (rec["step"], rec["val_acc"], rec["save"]) == (expected_best, 40.0, "saves/step-000008")
    resumed = Best(SimpleNamespace(**{**vars(args), "resume": True}), fake_run, 8, saves.append)
    curve.last = {"val_acc": 40.0}
    assert not resumed.update(9, curve, True)  # a tie with the read-back best is no improvement
    early = Best(SimpleNamespace(**{**vars(args), "resume": True}), fake_run, 6, saves.append)
    curve.last = {"val_acc": 5.0}
    assert early.update(6, curve, True)  # best.json's round lies past the resumed save: measured again


def test_bootstrap_ci_brackets_the_accuracy():
    recs = [{"correct": i % 2 == 0} for i in range(100)]
    lo, hi = bootstrap_ci(recs)
    assert lo < 50 < hi and hi - lo < 25
    assert bootstrap_ci([{"correct": True}] * 10) == (100.0, 100.0)


@pytest.mark.parametrize("extra, says", [
    (["--val-gen-length", "40", "--val-size", "4", "--eval-every", "1"], "--val-gen-length 40"),
    (["--val-size", "-1"], "--val-size must be >= 0"),
    (["--test-curve"], "--test-curve draws a generated toy's test-set curve"),
    (["--sudoku-split", "solution", "--task", "sudoku"], "--sudoku-split solution needs --sudoku-test"),
    (["--preset", "tiny", "--task", "sudoku", "--sudoku-split", "solution", "--sudoku-test", "/nonexistent/t.csv"],
     "--sudoku-test: /nonexistent/t.csv does not exist"),
])
def test_protocol_flags_that_cannot_work_are_refused(extra, says):
    import grpo as trainer
    args = trainer.parse_args(extra)
    with pytest.raises(ValueError) as e:
        check_grpo_args(args, 1, TASKS, check_schedule)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_one_line_refusals_of_the_scripts(tmp_path):
    rc, err = refused(grpo("--preset", "tiny", "--task", "sudoku", "--data", "x.csv", "--sudoku-split", "solution"))
    assert rc == 2 and "--sudoku-test" in err and len(err.splitlines()) == 1
    rc, err = refused(grpo("--num-examples", "40", "--val-size", "40", "--out-dir", str(tmp_path / "r")))
    assert rc == 2 and "--val-size 40" in err and len(err.splitlines()) == 1
    rc, err = refused([sys.executable, "-m", "lab.evals", "select", str(tmp_path), "--out-dir",
                       str(tmp_path / "sel")])
    assert rc == 2 and "no best.json: train with --val-size N --eval-every K" in err and len(err.splitlines()) == 1
