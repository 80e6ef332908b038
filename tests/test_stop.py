"""
Tests for long runs on shared clusters (ops/stop.py, `--resume auto`, --max-hours, --wandb, ops/slurm/). The
signals are sent at exact points by tests/faults.py (a SIGTERM after the k-th optimizer step, or inside the
k-th save), never by a timer, and every stopped run is requeued with the unchanged command (`--resume auto`)
and compared with the uninterrupted run, bit for bit.

  1. SIGTERM mid-round, on one process and on one of two ranks (the other learns of it through the
     collective decision): exit 75, one line, STOPPED, a complete save; the requeue ends bit-identical.
  2. SIGTERM during a save, and a second SIGTERM during the stop's own save: the saves stay whole.
  3. --max-hours: every job stops after one round, and the requeues finish the run, bit-identical.
  4. sft.py stopped between evals: the save is not published, the requeue ends bit-identical.
  5. `--resume auto`: fresh dir -> fresh run; the same command's run without a save -> starts over;
     another run's dir -> refused.
  6. --wandb streams exactly metrics.jsonl's records (a stand-in wandb module; the real one offline when
     installed), and a resumed run continues the same wandb run.
  7. The SLURM scripts' command lines are grpo.py's real flags; preflight's job count.
eval.py stopped by a signal and resumed is in tests/test_eval_reliability.py.

Run: python -m pytest tests/test_stop.py -q
"""
import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import torch

import grpo
from conftest import REPO, run, torchrun
from ops import checks, stop
from ops.metrics import read_metrics
from test_reliability import FAULTS, GRPO, SFT, digit_model, proc, same_metrics, same_weights, saves_are_whole  # noqa: F401
from lab.preflight import jobs_needed

# 4 rounds of 2 inner steps, no periodic save before the end: the stop's save is the only one
FLAGS = [*GRPO, "--rounds", "4", "--save-every", "10", "--resume", "auto"]


def grpo_cmd(model, out, *extra):
    return ["grpo.py", "--model-dir", str(model), *FLAGS, "--out-dir", str(out), *extra]


def stopped(out):
    return json.loads((out / stop.STOPPED_FILE).read_text())


@pytest.fixture(scope="module")
def straight(tmp_path_factory, digit_model):
    """The uninterrupted run of FLAGS (its command has --resume auto too: a fresh directory starts fresh)."""
    out = tmp_path_factory.mktemp("straight") / "run"
    run(FAULTS + ["none", *grpo_cmd(digit_model, out)], REPO)
    assert not (out / stop.STOPPED_FILE).exists()
    return out


def requeue_until_done(cmd, jobs_max=6):
    """Run the same command again while it exits 75 (what ops/slurm/*.sbatch do): -> the exit codes."""
    codes = []
    while len(codes) < jobs_max:
        res = proc(cmd)
        codes.append(res.returncode)
        if res.returncode != stop.EXIT_STOPPED:
            assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
            return codes
    raise AssertionError(f"still stopping after {jobs_max} jobs: {codes}")


# -----------------------------------------------------------------------------
# 1. a signal mid-round


def test_sigterm_mid_round_saves_the_round_and_the_requeue_ends_bit_identical(tmp_path, digit_model, straight):
    out = tmp_path / "run"
    res = proc(FAULTS + ["term-after-step:3", *grpo_cmd(digit_model, out)])  # step 3: round 2's first of μ = 2
    assert res.returncode == stop.EXIT_STOPPED, res.stderr[-2000:]
    # round 2 finished (both inner steps), then one line, the save and STOPPED
    assert f"stopped by SIGTERM after round 2: complete save {out / 'saves' / 'step-000002'}" in res.stdout
    assert "SIGTERM received" in res.stderr and "Traceback" not in res.stderr
    assert stopped(out)["round"] == 2 and stopped(out)["reason"] == "SIGTERM" and stopped(out)["exit"] == 75
    assert saves_are_whole(out) == [2] and [r["step"] for r in read_metrics(str(out))] == [1, 2]
    # the requeue: the very same command
    res = proc(FAULTS + ["none", *grpo_cmd(digit_model, out)])
    assert res.returncode == 0 and f"resumed from {out / 'saves' / 'step-000002'}" in res.stdout
    assert not (out / stop.STOPPED_FILE).exists()  # the run went on: the stop is history
    same_weights(out, straight)
    same_metrics(out, straight)


def test_a_signal_in_the_last_round_finishes_the_run_and_its_resume_changes_nothing(tmp_path, digit_model,
                                                                                   straight):
    # step 7: the last round's first of μ = 2. The round ends, and so does the run: exit 0, its model saved,
    # no STOPPED, and the last line says the signal came too late to stop anything
    out = tmp_path / "run"
    res = proc(FAULTS + ["term-after-step:7", *grpo_cmd(digit_model, out)])
    assert res.returncode == 0, res.stderr[-2000:]
    assert "(SIGTERM during the last step: the run finished, nothing to resume)" in res.stdout.strip().splitlines()[-1]
    assert not (out / stop.STOPPED_FILE).exists() and saves_are_whole(out) == [4]
    same_weights(out, straight)
    # the requeue of a finished run (the same command): the model and its saves as they were, the very same
    # files (no *.tmp beside a shard, no second name), the metrics unchanged; what each command rewrites of
    # its own (run.lock, train_args.json: the last command's flags) is not the run's
    def files():
        return {str(p.relative_to(out)): (p.stat().st_ino, p.read_bytes()) for p in out.rglob("*")
                if p.is_file() and p.name not in ("run.lock", "train_args.json", "metrics.jsonl")}
    before = files()
    metrics = (out / "metrics.jsonl").read_bytes()
    res = proc(FAULTS + ["none", *grpo_cmd(digit_model, out)])
    assert res.returncode == 0, res.stderr[-2000:]
    after = files()
    assert sorted(after) == sorted(before) and after == before, sorted(set(after) ^ set(before))
    assert (out / "metrics.jsonl").read_bytes() == metrics


def test_sigterm_on_one_of_two_ranks_stops_both_after_the_same_round(tmp_path, digit_model):
    # rank 1 alone is signalled; rank 0 learns of it in the end-of-round all-reduce. LoRA dropout is on: each
    # rank's stream is keyed by (seed, round, rank), so two ranks resumed equal two ranks uninterrupted
    def cmd(out, fault):
        return torchrun(2) + [str(REPO / "tests" / "faults.py"), fault, *grpo_cmd(digit_model, out)]
    run(cmd(tmp_path / "straight", "none"), REPO)
    out = tmp_path / "run"
    res = proc(cmd(out, "term-after-step:3:1"))
    assert res.returncode == 1  # torchrun reports any worker's non-zero exit as 1; STOPPED says what happened
    assert "exitcode  : 75" in res.stderr
    assert stopped(out)["round"] == 2 and stopped(out)["reason"] == "a signal to another rank"
    assert saves_are_whole(out) == [2]
    assert proc(cmd(out, "none")).returncode == 0
    same_weights(out, tmp_path / "straight")
    same_metrics(out, tmp_path / "straight")


# -----------------------------------------------------------------------------
# 2. signals during saves


def test_a_second_sigterm_during_the_stop_save_leaves_it_whole(tmp_path, digit_model, straight):
    out = tmp_path / "run"
    res = proc(FAULTS + ["term-after-step:3+term-in-save:1", *grpo_cmd(digit_model, out)])
    assert res.returncode == stop.EXIT_STOPPED, res.stderr[-2000:]
    assert res.stderr.count("SIGTERM received") == 1  # the second one is ignored
    assert saves_are_whole(out) == [2] and stopped(out)["round"] == 2
    assert requeue_until_done(FAULTS + ["none", *grpo_cmd(digit_model, out)]) == [0]
    same_weights(out, straight)
    same_metrics(out, straight)


def test_sigterm_during_a_periodic_save_stops_after_the_next_round(tmp_path, digit_model, straight):
    out = tmp_path / "run"
    cmd = grpo_cmd(digit_model, out, "--save-every", "1")  # --save-every may change under --resume auto
    res = proc(FAULTS + ["term-in-save:1", *cmd])  # inside round 1's save: noted, the save completes
    assert res.returncode == stop.EXIT_STOPPED, res.stderr[-2000:]
    assert saves_are_whole(out) == [1, 2] and stopped(out)["round"] == 2
    assert requeue_until_done(FAULTS + ["none", *grpo_cmd(digit_model, out)]) == [0]
    same_weights(out, straight)
    same_metrics(out, straight)


# -----------------------------------------------------------------------------
# 3. --max-hours


def test_max_hours_stops_every_job_after_one_round_and_the_requeues_finish_the_run(tmp_path, digit_model, straight):
    out = tmp_path / "run"
    # a budget smaller than any round: each job trains one round, saves, exits 75; the 4th job's round is the last
    codes = requeue_until_done(FAULTS + ["none", *grpo_cmd(digit_model, out, "--max-hours", "1e-9")])
    assert codes == [75, 75, 75, 0]
    same_weights(out, straight)
    same_metrics(out, straight)


def test_max_hours_leaves_room_for_two_of_the_longest_steps(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(stop.time, "time", lambda: clock[0])
    monkeypatch.setattr(stop, "T_PROCESS", 1000.0)
    monkeypatch.setattr(stop.signal, "signal", lambda *a: None)  # no handlers in pytest's process
    s = stop.Stopper(max_hours=100 / 3600)  # a 100 s budget
    for t, expected in [(10, None), (30, None), (45, None), (65, "--max-hours")]:
        clock[0] = 1000.0 + t  # steps of 10, 20, 15, 20 s: at 45 s, 45 + 2 x 20 <= 100; at 65 s, 65 + 2 x 20 > 100
        assert s.requested() == expected, t
    s.signal = "SIGUSR1"
    assert s.requested() == "SIGUSR1"


# -----------------------------------------------------------------------------
# 4. sft.py


def test_sft_stopped_between_evals_resumes_bit_identical(tmp_path):
    from modelio.checkpoint import make_tiny
    model = make_tiny(tmp_path / "tiny", d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)
    cmd = ["sft.py", "--model-dir", str(model), *SFT, "--resume", "auto"]  # evals (and saves) at steps 2, 4, 6
    run(FAULTS + ["none", *cmd, "--out-dir", str(tmp_path / "straight")], REPO)
    res = proc(FAULTS + ["term-after-step:3", *cmd, "--out-dir", str(tmp_path / "run")])
    assert res.returncode == stop.EXIT_STOPPED and "stopped by SIGTERM after step 3" in res.stdout
    assert saves_are_whole(tmp_path / "run") == [2, 3]
    # step 3's save is for the resume only: the run's model is still the best by eval loss (step 2's)
    assert json.loads((tmp_path / "run" / "save_info.json").read_text())["step"] == 2
    assert requeue_until_done(FAULTS + ["none", *cmd, "--out-dir", str(tmp_path / "run")]) == [0]
    same_weights(tmp_path / "run", tmp_path / "straight")
    same_metrics(tmp_path / "run", tmp_path / "straight")


def readme_shutdown_timeout():
    """The TORCH_ELASTIC_SHUTDOWN_TIMEOUT that the README's recipe exports before its torchrun lines."""
    found = re.findall(rf"export {stop.SHUTDOWN_ENV}=(\d+)", (REPO / "README.md").read_text())
    assert found, f"the README's torchrun recipe does not export {stop.SHUTDOWN_ENV}"
    return int(found[0])


@pytest.mark.skipif(tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) < (2, 12),
                    reason="torchrun reads TORCH_ELASTIC_SHUTDOWN_TIMEOUT from torch 2.12 on")
def test_ctrl_c_on_a_plain_node_keeps_the_step_under_the_readmes_torchrun_and_loses_it_under_a_short_wait(tmp_path):
    """Ctrl-C in the terminal of a 2-rank torchrun (its workers run in sessions of their own, so the
    launcher alone gets it and passes it on): step 3 finishes, and its save, made 5 s slow here as an 8B
    save is minutes long, completes under the README's launcher wait. The control, the same run under a 1 s
    wait, is killed in that save: the setting is what keeps the step."""
    from modelio.checkpoint import make_tiny
    model = make_tiny(tmp_path / "tiny", d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)
    cmd = ["int-launcher-after-step:3+slow-save:5", "sft.py", "--model-dir", str(model), *SFT, "--grad-accum", "2",
           "--max-steps", "40", "--eval-every", "40"]  # no save before the stop's own

    def launch(out, wait):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", stop.SHUTDOWN_ENV: str(wait)}
        return subprocess.run(torchrun(2) + [str(REPO / "tests" / "faults.py"), *cmd, "--out-dir", str(out)],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=300)

    wait = readme_shutdown_timeout()
    res = launch(tmp_path / "readme", wait)
    assert res.returncode != 0  # torchrun ends on the signal; STOPPED says what happened
    assert stopped(tmp_path / "readme")["step"] == 3 and saves_are_whole(tmp_path / "readme") == [3], res.stderr[-3000:]
    assert [r["step"] for r in read_metrics(str(tmp_path / "readme"))] == [1, 2, 3]
    assert res.stderr.count("SIGINT received: stopping at the end of this step") == 2  # each rank, once
    assert f"torchrun kills this process {wait} s after it passed the signal on" in res.stderr
    control = launch(tmp_path / "short", 1)
    assert not (tmp_path / "short" / stop.STOPPED_FILE).exists() and saves_are_whole(tmp_path / "short") == [], \
        control.stderr[-3000:]


# -----------------------------------------------------------------------------
# 5. --resume auto


def test_resume_auto_starts_over_a_run_that_stopped_before_its_first_save(tmp_path, digit_model, straight):
    out = tmp_path / "run"
    assert proc(FAULTS + ["kill-after-step:3", *grpo_cmd(digit_model, out)]).returncode == -9
    assert saves_are_whole(out) == [] and (out / "metrics.jsonl").exists()
    assert requeue_until_done(FAULTS + ["none", *grpo_cmd(digit_model, out)]) == [0]
    same_weights(out, straight)
    same_metrics(out, straight)


def test_resume_auto_refuses_another_runs_directory(tmp_path, digit_model):
    out = tmp_path / "run"
    assert proc(FAULTS + ["term-after-step:1", *grpo_cmd(digit_model, out)]).returncode == stop.EXIT_STOPPED
    res = proc([sys.executable, *grpo_cmd(digit_model, out, "--lr", "0.5")])
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "--resume auto" in lines[0] and "holds another run" in lines[0] and "--lr: 0.01 -> 0.5" in lines[0]
    assert saves_are_whole(out) == [1]  # nothing was touched
    res = proc([sys.executable, *grpo_cmd(digit_model, out, "--force")])
    assert res.returncode == 2 and "--resume auto and --force contradict" in res.stderr


def test_resume_takes_no_value_but_auto():
    assert grpo.parse_args(["--resume"]).resume is True and grpo.parse_args([]).resume is False
    assert grpo.parse_args(["--resume", "auto"]).resume == "auto"
    with pytest.raises(SystemExit):
        grpo.parse_args(["--resume", "yes"])


# -----------------------------------------------------------------------------
# 6. --wandb

FAKE_WANDB = '''
import json, os
LOG = os.environ["FAKE_WANDB_LOG"]
class Run:
    def log(self, record, step):
        with open(LOG, "a") as f:
            f.write(json.dumps({"step": step, "record": record}) + "\\n")
    def finish(self):
        with open(LOG, "a") as f:
            f.write(json.dumps({"finish": True}) + "\\n")
def init(project, id, resume, dir, config, name):
    with open(LOG, "a") as f:
        f.write(json.dumps({"init": project, "id": id, "resume": resume, "name": name}) + "\\n")
    return Run()
'''


def test_wandb_streams_exactly_the_metrics_records_and_a_resume_continues_its_run(tmp_path, digit_model):
    (tmp_path / "fake" / "wandb").mkdir(parents=True)
    (tmp_path / "fake" / "wandb" / "__init__.py").write_text(FAKE_WANDB)
    log, out = tmp_path / "wandb.jsonl", tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "fake"), "FAKE_WANDB_LOG": str(log), "OMP_NUM_THREADS": "1"}
    cmd = [*FAULTS, "term-after-step:3", *grpo_cmd(digit_model, out, "--wandb", "proj")]
    assert subprocess.run(cmd, cwd=REPO, env=env, capture_output=True).returncode == stop.EXIT_STOPPED
    cmd[cmd.index("term-after-step:3")] = "none"
    assert subprocess.run(cmd, cwd=REPO, env=env, capture_output=True).returncode == 0
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    inits = [x for x in lines if "init" in x]
    assert len(inits) == 2 and inits[0]["id"] == inits[1]["id"] and inits[0]["init"] == "proj"  # one wandb run
    assert sum("finish" in x for x in lines) == 2  # each job closed its stream
    streamed = [x["record"] for x in lines if "record" in x]
    assert streamed == read_metrics(str(out))  # every record, as metrics.jsonl holds it, steps 1-4 once each
    assert [x["step"] for x in lines if "record" in x] == [1, 2, 3, 4]


def test_wandb_offline_for_real(tmp_path, digit_model):
    pytest.importorskip("wandb")  # optional: installed where --wandb is used (README)
    out = tmp_path / "run"
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1"}
    cmd = [*FAULTS, "term-after-step:3", *grpo_cmd(digit_model, out, "--wandb", "nano-d1-test")]
    for fault, code in [("term-after-step:3", stop.EXIT_STOPPED), ("none", 0)]:  # a stop, then its requeue
        cmd[2] = fault
        res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == code, res.stderr[-3000:]
    runs = list((out / "wandb").glob("offline-run-*"))
    wandb_id = json.loads((out / "train_args.json").read_text())["wandb_id"]
    assert len(runs) == 2 and all(r.name.endswith(wandb_id) for r in runs)  # two jobs, one wandb run


def test_wandb_missing_is_one_line_up_front(monkeypatch):
    monkeypatch.setattr(checks.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(checks.InputError, match="pip install wandb"):
        checks.check_training_flags(grpo.parse_args(["--wandb", "proj"]))


# -----------------------------------------------------------------------------
# 7. the SLURM scripts and preflight


def sbatch_command(path):
    """The grpo.py flags of an sbatch script: its continued srun line, from grpo.py on."""
    text = path.read_text().replace("\\\n", " ")
    (line,) = [x for x in text.splitlines() if x.startswith("srun ")]
    tokens = shlex.split(line)
    return tokens[tokens.index("grpo.py") + 1:]


@pytest.mark.parametrize("script", ["grpo_1node.sbatch", "grpo_2nodes.sbatch"])
def test_slurm_scripts_run_grpo_with_its_real_flags(script):
    path = REPO / "ops" / "slurm" / script
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    text = path.read_text()
    args = grpo.parse_args(sbatch_command(path))  # argparse exits on an unknown flag
    assert args.resume == "auto" and args.preset == "8b" and args.out_dir == "$OUT"
    assert "#SBATCH --signal=USR1@" in text and "#SBATCH --requeue" in text
    assert 'if [ -f "$OUT/STOPPED" ]' in text and stop.STOPPED_FILE == "STOPPED"
    assert "SIGUSR1" in text.split("TORCHELASTIC_SIGNALS_TO_HANDLE=")[1].split()[0]
    # every rank gets the same number of whole prompt groups: d1's 16 per round over the script's GPUs
    nodes = int(text.split("#SBATCH --nodes=")[1].split()[0])
    world = nodes * int(text.split("#SBATCH --gpus-per-node=")[1].split()[0])
    assert f"--nnodes={nodes}" in text or nodes == 1
    assert args.prompts_per_step % args.groups_per_micro == 0 and args.prompts_per_step // args.groups_per_micro % \
        world == 0


def test_preflight_counts_the_jobs_of_a_time_limit():
    assert jobs_needed(10.0, 4.0, 0.5) == 4  # 3 h of training per 4 h job (two rounds kept free)
    assert jobs_needed(9.0, 4.0, 0.5) == 3
    assert jobs_needed(10.0, 1.0, 0.5) is None  # no round fits
