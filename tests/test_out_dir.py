"""
Tests for what a run's --out-dir survives (docs/reliability.md): one run per out-dir (a
second is refused naming the holder, a dead holder's lock is taken over with a note, a refused run
writes nothing), a save that is no longer whole is skipped by --resume with a note, a full disk during
a save is one line and the resume ends bit-identical, and a read-only or full out-dir is refused up
front, before the model loads. Faults are injected by tests/faults.py.

Run: python -m pytest tests/test_out_dir.py -q
"""
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from test_reliability import (FAULTS, GRPO, REPO, SFT, digit_model, grpo_straight, proc,  # noqa: F401 (fixtures)
                              same_metrics, same_weights, saves_are_whole)

LOCK = "run.lock"


def tree(path):
    """{relative path: sha256} of every file under path: what "wrote nothing" compares."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, path)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def one_error_line(res, code):
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == code and "Traceback" not in res.stderr, res.stderr[-3000:]
    errors = [line for line in lines if ": error: " in line]
    assert len(errors) == 1, res.stderr[-3000:]
    return errors[0]


def stopped(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_a_second_run_is_refused_naming_the_holder_and_the_first_ends_whole(tmp_path, digit_model):
    out = tmp_path / "run"
    # the first run stops itself (SIGSTOP) after its 3rd step, its lock held, its step-2 save written
    cmd = FAULTS + ["rank-stop:0:3", "sft.py", "--model-dir", str(digit_model), *SFT, "--out-dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not stopped(first.pid) and time.time() < deadline:
            time.sleep(0.05)
        before = tree(out)
        second = proc(FAULTS + ["none", "sft.py", "--model-dir", str(digit_model), *SFT, "--out-dir", str(out),
                                "--force"])
        line = one_error_line(second, 2)
        assert f"is in use by another run (pid {first.pid} on " in line and "sft.py" in line, line
        assert tree(out) == before  # --force deleted nothing, the second run wrote nothing
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert first.wait(timeout=300) == 0, first.stderr.read()[-3000:]
    assert saves_are_whole(out) == [4, 6] and (out / "config.json").exists()  # whole saves, the model published
    assert '"released"' in (out / LOCK).read_text()


def test_a_dead_holders_lock_is_taken_over_with_a_note(tmp_path, digit_model):
    out = tmp_path / "run"
    cmd = ["sft.py", "--model-dir", str(digit_model), *SFT, "--out-dir", str(out)]
    assert proc(FAULTS + ["kill-after-step:3", *cmd]).returncode == -9  # kill -9: the lock file says who held it
    res = proc(FAULTS + ["none", *cmd, "--resume"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"note: took over {out / LOCK} from pid " in res.stderr and "ended without releasing it" in res.stderr
    res = proc(FAULTS + ["none", *cmd, "--resume"])  # a holder that released it: no note
    assert res.returncode == 0 and "took over" not in res.stderr, res.stderr[-3000:]


def test_a_refused_run_writes_nothing(tmp_path, digit_model):
    out = tmp_path / "run"
    cmd = FAULTS + ["none", "sft.py", "--model-dir", str(digit_model), *SFT, "--out-dir", str(out)]
    assert proc(cmd).returncode == 0
    before = tree(out)
    line = one_error_line(proc(cmd), 2)  # the same command again: another run is there
    assert "holds another run" in line and tree(out) == before  # the lock file's text too
    empty = tmp_path / "new"
    line = one_error_line(proc(FAULTS + ["none", "sft.py", "--model-dir", str(digit_model), *SFT, "--out-dir",
                                         str(empty), "--resume"]), 2)
    assert "holds no run to continue" in line and not empty.exists()  # the lock's out-dir is gone again


def test_resume_skips_a_save_that_is_not_whole_and_names_it(tmp_path, digit_model):
    cmd = ["sft.py", "--model-dir", str(digit_model), *SFT]
    straight, out = tmp_path / "straight", tmp_path / "run"
    assert proc(FAULTS + ["none", *cmd, "--out-dir", str(straight)]).returncode == 0
    assert proc(FAULTS + ["kill-after-step:5", *cmd, "--out-dir", str(out)]).returncode == -9
    (out / "saves" / "step-000004" / "trainer_state.pt").unlink()  # what a second run used to leave
    res = proc(FAULTS + ["none", *cmd, "--out-dir", str(out), "--resume"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"note: --resume skips {out / 'saves' / 'step-000004'} (trainer_state.pt is missing)" in res.stderr
    assert f"resumed from {out / 'saves' / 'step-000002'} at step 2" in res.stdout
    same_weights(out, straight)
    same_metrics(out, straight)
    assert saves_are_whole(out) == [4, 6]  # the broken save was written again, whole


def test_a_full_disk_during_a_save_is_one_line_and_the_resume_is_bit_identical(tmp_path, digit_model,
                                                                              grpo_straight):
    out = tmp_path / "run"
    cmd = ["grpo.py", "--model-dir", str(digit_model), *GRPO, "--out-dir", str(out)]
    line = one_error_line(proc(FAULTS + ["disk-full-in-save:2", *cmd]), 1)
    assert "the save of step 2 could not be written (No space left on device" in line, line
    assert f"the newest complete save is {out / 'saves' / 'step-000001'}, untouched" in line
    assert saves_are_whole(out) == [1] and not any(p.name.endswith(".partial") for p in (out / "saves").iterdir())
    res = proc(FAULTS + ["none", *cmd, "--resume"])
    assert res.returncode == 0, res.stderr[-3000:]
    same_weights(out, grpo_straight / "a")
    same_metrics(out, grpo_straight / "a")


def test_no_room_for_a_save_is_refused_before_the_model_loads(tmp_path, digit_model):
    out = tmp_path / "run"
    res = proc(FAULTS + ["disk-free:1000", "sft.py", "--model-dir", str(digit_model), *SFT, "--out-dir", str(out)])
    line = one_error_line(res, 2)
    assert f"--out-dir {out} has 1000 B free; one save of this run takes about" in line, line
    assert not out.exists()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare to mount")
def test_a_read_only_out_dir_is_refused_before_the_model_loads(tmp_path, digit_model):
    ro = tmp_path / "ro"
    ro.mkdir()
    script = (f"mount -t tmpfs -o ro,size=1m none {ro} && exec {' '.join(FAULTS)} none sft.py --model-dir "
              f"{digit_model} {' '.join(SFT)} --out-dir {ro / 'run'}")
    res = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    line = one_error_line(res, 2)
    assert f"--out-dir {ro / 'run'} is not writable (Read-only file system)" in line, line
    assert "trainable parameters" not in res.stdout  # refused before the model was built


def test_an_eval_result_dir_in_use_is_refused_and_left_as_it_was(tmp_path, digit_model):
    # the lock of one result dir held by another process (eval.py's own runs take it the same way)
    out = tmp_path / "eval"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.path.insert(0, sys.argv[1]); "
                               "from ops import lock; lock.take(sys.argv[2]); print('held', flush=True); "
                               "time.sleep(120)", str(REPO), str(out / "toy_16")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        before = tree(out)
        res = proc([sys.executable, "eval.py", "--model-dir", str(digit_model), "--out-dir", str(out), "--toy-items",
                    "6", "--batch-size", "2"])
        line = one_error_line(res, 2)
        assert f"result dir {out / 'toy_16'} is in use by another run (pid {holder.pid} on " in line, line
        assert tree(out) == before
    finally:
        holder.kill()
        holder.wait()
