"""
Tests for eval.py's reliability: bad input is one line before any work, a result dir is read exactly as
its manifest names it, and a killed run continued with --resume ends with the same files and numbers as
an uninterrupted one, and so does a run stopped by SIGTERM (it ends at a batch boundary, exit 75) and a finished
run whose rank file lost or garbled records since. The kill and the signal are deterministic (tests/faults.py, on
the k-th sampler call), never a sleep; the damaged files are written by the tests themselves.

Run: python -m pytest tests/test_eval_reliability.py -q
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, run, write_digit_model
from ops.results import load_results, rescore, result_dir_state, resume_records
from tasks import TASKS

# the toy on 6 items in batches of 2 (3 batches per run), two seeds at temperature 1: the sampler draws
# from each batch's generator, so a resume that got a batch's items or its key wrong changes the files
FLAGS = ["--toy-items", "6", "--batch-size", "2", "--seeds", "2", "--temperature", "1.0"]


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    # a tiny model that writes digits, so the toy accuracy is not trivially zero
    path = tmp_path_factory.mktemp("m") / "digits"
    write_digit_model(path)
    return path


def ev(model_dir, out_dir, *extra):
    return [sys.executable, str(REPO / "eval.py"), "--model-dir", str(model_dir), "--out-dir", str(out_dir),
            *FLAGS, *extra]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, digits):
    """An uninterrupted run: (its out dir, its stdout); its --json summary is summary.json beside the out dir."""
    out = tmp_path_factory.mktemp("ref") / "eval"
    return out, run(ev(digits, out, "--json", str(out.parent / "summary.json")), REPO)


def accuracies(stdout):
    return re.findall(r"seed (\d+): accuracy ([\d.]+)% on (\d+) items", stdout)


def rank0(out, seed):
    return (out / f"toy_16_seed{seed}" / "generations.rank0.jsonl").read_text()


def refused(cmd, script="eval.py"):
    """Run a command that must refuse: one line '<script>: error: ...' on stderr, exit 2, no traceback."""
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"{script}: error: "), res.stderr[-3000:]
    assert "Traceback" not in res.stdout + res.stderr
    return lines[0]


@pytest.mark.parametrize("kill_at", [2, 5])
def test_killed_run_resumed_equals_an_uninterrupted_one(tmp_path, digits, reference, kill_at):
    # kill_at 2: killed in seed 0's second batch, seed 1's dir does not exist yet (run fresh on --resume);
    # kill_at 5: seed 0 finished (only scored on --resume), killed in seed 1's second batch
    ref_out, ref_stdout = reference
    out = tmp_path / "eval"
    # tests/faults.py: eval.py with the sampler patched to SIGKILL the process on its k-th call (a kill at
    # a known batch; eval.py does `from sample import generate` when it runs, so it picks up the patched one)
    faults = [sys.executable, str(REPO / "tests" / "faults.py"), f"kill-in-generate:{kill_at}", "eval.py"]
    res = subprocess.run(faults + ev(digits, out)[2:], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == -9
    killed = out / f"toy_16_seed{(kill_at - 1) // 3}"
    assert json.loads((killed / "manifest.json").read_text())["complete"] is False
    assert len((killed / "generations.rank0.jsonl").read_text().splitlines()) == 2  # the batch before the kill
    # an unfinished run is not scored on the items it got to
    with pytest.raises(ValueError, match="did not finish; resume it with --resume"):
        load_results([str(killed)], TASKS)
    stdout = run(ev(digits, out, "--resume"), REPO)
    for seed in (0, 1):
        assert rank0(out, seed) == rank0(ref_out, seed)  # byte-identical records
        assert json.loads((out / f"toy_16_seed{seed}" / "manifest.json").read_text())["complete"] is True
    assert accuracies(stdout) == accuracies(ref_stdout) and len(accuracies(stdout)) == 2
    assert rescore([str(out / "toy_16_seed1")], TASKS) == rescore([str(ref_out / "toy_16_seed1")], TASKS)


def test_a_stop_signal_ends_at_a_batch_boundary_and_resume_is_byte_identical(tmp_path, digits, reference):
    ref_out, ref_stdout = reference
    out = tmp_path / "eval"
    # SIGTERM just before the 5th batch (seed 1's second): that batch still finishes and is written, then exit 75
    faults = [sys.executable, str(REPO / "tests" / "faults.py"), "term-in-generate:5", "eval.py"]
    res = subprocess.run(faults + ev(digits, out)[2:], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 75, res.stderr[-2000:]
    assert "stopped by SIGTERM" in res.stdout and "Traceback" not in res.stderr
    assert len(rank0(out, 1).splitlines()) == 4  # two whole batches of seed 1 (the 2nd began after the signal)
    assert json.loads((out / "toy_16_seed1" / "manifest.json").read_text())["complete"] is False
    stdout = run(ev(digits, out, "--resume"), REPO)
    for seed in (0, 1):
        assert rank0(out, seed) == rank0(ref_out, seed)  # byte-identical records
    assert accuracies(stdout) == accuracies(ref_stdout)


def test_resume_drops_a_torn_line_and_partial_batches(tmp_path, digits, reference):
    ref_out, ref_stdout = reference
    out = tmp_path / "eval"
    shutil.copytree(ref_out, out)
    d = out / "toy_16_seed1"
    lines = rank0(ref_out, 1).splitlines(keepends=True)
    # 5 whole lines (two batches and a half) and half of the 6th, as a kill mid-write leaves them
    (d / "generations.rank0.jsonl").write_text("".join(lines[:5]) + lines[5][:len(lines[5]) // 2])
    man = json.loads((d / "manifest.json").read_text())
    (d / "manifest.json").write_text(json.dumps({**man, "complete": False}))
    ids = list(range(6))
    kept = resume_records(str(d / "generations.rank0.jsonl"), ids, 2)
    assert kept == lines[:4]  # the torn line goes, and the half batch with it
    assert resume_records(str(d / "generations.rank0.jsonl"), ids[:5], 2) == lines[:5]  # all of a rank's items
    assert resume_records(str(d / "generations.rank0.jsonl"), [0, 2, 1], 1) == lines[:1]  # ids in this rank's order
    assert resume_records(str(d / "nothing.jsonl"), ids, 4) == []
    stdout = run(ev(digits, out, "--resume"), REPO)
    assert rank0(out, 1) == rank0(ref_out, 1) and accuracies(stdout) == accuracies(ref_stdout)


def garbled(line, junk):
    """`line` with `junk` over the bytes in its middle: its length and its newline kept, as a bad block leaves it."""
    mid = len(line) // 2
    return line[:mid] + junk + line[mid + len(junk):]


# a finished run (manifest complete) whose rank file lost or garbled records since: a copy cut short, a full
# disk, a bad block. Case -> (the seed whose rank0 file is damaged, its 6 lines -> the damaged bytes, the
# records --resume keeps: the whole batches of 2 before the first bad line, the mode that must refuse it
# without --resume and a piece of its one line)
DAMAGED = {
    "tail torn by 40 bytes": (1, lambda ls: b"".join(ls)[:-40], 4, "rescore", "rank0.jsonl:6: not a JSON record"),
    # bytes that are not UTF-8 either: a bad line like any other, not an error of the whole file
    "last line garbled": (0, lambda ls: b"".join(ls[:5] + [garbled(ls[5], b"\xff\xfe\x00\x00")]), 4, "compare",
                          "rank0.jsonl:6: not a JSON record"),
    "last batch lost": (1, lambda ls: b"".join(ls[:4]), 4, "rescore", "4 records for the manifest's 6 items: "
                                                                       "2 missing (ids [4, 5])"),
    # not a tail: whatever follows a garbled line is generated again too (each batch has its own generator,
    # so the batches after it come out the same), rather than trusting records read past a bad block
    "middle line garbled": (0, lambda ls: b"".join(ls[:2] + [garbled(ls[2], b"\x00" * 8)] + ls[3:]), 2, "rescore",
                            "rank0.jsonl:3: not a JSON record"),
}


@pytest.mark.parametrize("case", DAMAGED)
def test_resume_repairs_a_finished_run_whose_rank_file_lost_records(tmp_path, digits, reference, case):
    ref_out, ref_stdout = reference
    seed, damage, kept, mode, says = DAMAGED[case]
    out = tmp_path / "eval"
    shutil.copytree(ref_out, out)
    d = out / f"toy_16_seed{seed}"
    path = d / "generations.rank0.jsonl"
    path.write_bytes(damage(path.read_bytes().splitlines(keepends=True)))
    assert json.loads((d / "manifest.json").read_text())["complete"] is True  # finished, says its manifest
    # without --resume: one line that says what is wrong and what to do, and what it says must be true (below)
    if mode == "rescore":
        msg = refused([sys.executable, str(REPO / "eval.py"), "--rescore", str(d)])
    else:  # the paired comparison of two result dirs (lab/evals.py)
        msg = refused([sys.executable, "-m", "lab.evals", "compare", str(ref_out / d.name), str(d)],
                      "lab.evals compare")
    assert says in msg and "the eval.py command that wrote it, plus --resume" in msg
    # the state the up-front checks give it: continued like an unfinished run, not only scored
    man = json.loads((d / "manifest.json").read_text())
    assert result_dir_state(str(d), man, resume=True, force=False) == "partial"
    assert result_dir_state(str(ref_out / d.name), man, resume=True, force=False) == "complete"
    stdout = run(ev(digits, out, "--resume", "--json", str(tmp_path / "summary.json")), REPO)
    # the whole batches before the damage stay; the other, untouched seed is only scored
    assert stdout.count("--resume: ") == 1 and f"{path} keeps {kept} of its 6 records" in stdout
    timeless = lambda p: {k: v for k, v in json.loads(p.read_text()).items() if k not in ("time", "wall_seconds")}
    for s in (0, 1):
        assert rank0(out, s) == rank0(ref_out, s)  # byte-identical records
        assert timeless(out / f"toy_16_seed{s}" / "manifest.json") == timeless(ref_out / f"toy_16_seed{s}" /
                                                                                "manifest.json")
    assert accuracies(stdout) == accuracies(ref_stdout) and len(accuracies(stdout)) == 2
    assert (tmp_path / "summary.json").read_bytes() == (ref_out.parent / "summary.json").read_bytes()
    assert rescore([str(d)], TASKS) == rescore([str(ref_out / d.name)], TASKS)


def test_results_are_read_as_the_manifest_names_them(tmp_path, reference):
    ref_out, _ = reference
    d = tmp_path / "toy_16"
    shutil.copytree(ref_out / "toy_16_seed0", d)
    want = rescore([str(d)], TASKS)
    # a leftover rank file of an earlier run with more ranks is not read: the manifest says one rank
    (d / "generations.rank1.jsonl").write_text(rank0(ref_out, 1))
    assert rescore([str(d)], TASKS) == want and want[0]["items"] == 6
    man = json.loads((d / "manifest.json").read_text())
    # records that are not the manifest's items: a clear error, never a number
    (d / "manifest.json").write_text(json.dumps({**man, "item_ids": list(range(5))}))
    with pytest.raises(ValueError, match="0 missing .*1 extra or repeated"):
        load_results([str(d)], TASKS)
    (d / "manifest.json").write_text(json.dumps({**man, "item_ids": list(range(7))}))
    with pytest.raises(ValueError, match="1 missing"):
        load_results([str(d)], TASKS)
    # a manifest that names two ranks, one of whose files is gone
    (d / "manifest.json").write_text(json.dumps({**man, "world_size": 2}))
    (d / "generations.rank1.jsonl").unlink()
    with pytest.raises(ValueError, match="generations.rank1.jsonl is missing"):
        load_results([str(d)], TASKS)


def test_a_folder_holding_a_run_is_refused_unless_resume_or_force(tmp_path, digits, reference):
    ref_out, ref_stdout = reference
    before = {p: p.read_bytes() for p in ref_out.rglob("*") if p.is_file()}
    msg = refused(ev(digits, ref_out))
    assert "holds results of an earlier run" in msg and "--resume continues it, --force starts over" in msg
    # --resume with other settings: refused, naming what differs
    msg = refused(ev(digits, ref_out, "--resume", "--batch-size", "3"))
    assert "batch_size 2 -> 3" in msg
    assert {p: p.read_bytes() for p in ref_out.rglob("*") if p.is_file()} == before  # nothing touched
    # --force: the old run's manifest and rank files go (a stale rank file of more ranks too), other files stay
    out = tmp_path / "eval"
    shutil.copytree(ref_out, out)
    (out / "toy_16_seed0" / "generations.rank1.jsonl").write_text("stale\n")
    (out / "toy_16_seed0" / "notes.txt").write_text("mine")
    stdout = run(ev(digits, out, "--force"), REPO)
    assert not (out / "toy_16_seed0" / "generations.rank1.jsonl").exists()
    assert (out / "toy_16_seed0" / "notes.txt").exists()
    assert rank0(out, 0) == rank0(ref_out, 0) and accuracies(stdout) == accuracies(ref_stdout)


BAD = {  # flags -> a piece of the one line that must say what is wrong
    "unknown task": (["--task", "nope"], "unknown task 'nope'"),
    "missing data": (["--task", "gsm8k", "--data", "nope.jsonl"], "nope.jsonl does not exist"),
    "malformed data": (["--task", "gsm8k", "--data", "{bad}"], "bad.jsonl:2: missing field 'answer'"),
    "empty data": (["--task", "gsm8k", "--data", "{empty}"], "empty.jsonl"),
    "greedy seeds": (["--seeds", "3"], "every seed would give the same result"),
    "no seeds": (["--seeds", "0"], "--seeds must be >= 1"),
    "temperature": (["--temperature", "-0.5"], "--temperature must be >= 0"),
    "schedule": (["--block-length", "5"], "--block-length / --steps: gen_length (16) must be a multiple"),
    "batch size": (["--batch-size", "-1"], "--batch-size must be >= 0"),
    "limit": (["--limit", "-1"], "--limit must be >= 0"),
    "model dir": (["--model-dir", "nope"], "model directory nope does not exist"),
    "dist timeout": (["--dist-timeout", "0"], "--dist-timeout must be >= 1"),
    "resume and force": (["--resume", "--force"], "contradict"),
    "out dir a file": (["--out-dir", "{empty}"], "empty.jsonl exists and is not a directory"),
    "rescore missing": (["--rescore", "nope"], "nope does not exist"),
    "rescore other folder": (["--rescore", "{tmp}"], "neither a result directory (no manifest.json) nor"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_before_anything_is_written(tmp_path, case):
    flags, want = BAD[case]
    good = '{"question": "1 + 1?", "answer": "so #### 2"}\n'
    (tmp_path / "bad.jsonl").write_text(good + '{"question": "2 + 2?"}\n')
    (tmp_path / "empty.jsonl").write_text("")
    flags = [f.format(bad=tmp_path / "bad.jsonl", empty=tmp_path / "empty.jsonl", tmp=tmp_path) for f in flags]
    out = tmp_path / "out"
    msg = refused([sys.executable, str(REPO / "eval.py"), "--toy-items", "4", "--out-dir", str(out), *flags])
    assert want in msg
    assert not out.exists()
