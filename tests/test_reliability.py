"""
Tests for runs that survive crashes, bad numbers and bad input (docs/reliability.md), each by
injecting the fault (tests/faults.py: a monkeypatch applied before the script runs, so the project
carries no test hooks). Nothing here sleeps hoping for a race: kills happen at exact points.

  1. kill -9 at exact moments of grpo.py and sft.py, mid-save included, then --resume: the same
     weights and metrics as the uninterrupted run (LoRA with dropout on, so its RNG is covered too);
     a resume on another world size; a save directory is complete or absent, never half.
  2. non-finite losses skip the step (weights and AdamW state untouched), N in a row stop the run
     with a message and a usable last save; a NaN never reaches a save.
  3. bad input: one line, exit 2, no traceback, nothing written.
  4. a rank that dies or hangs: the other stops with one line within the process-group timeout.
  5. the same command twice gives the same metrics and weights.

Run: python -m pytest tests/test_reliability.py -q
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
import torch

from ops.checks import check_grpo_args
from sample import check_schedule
from tasks import TASKS
from conftest import REPO, run, torchrun, write_digit_model
from modelio.checkpoint import from_pretrained, make_tiny, verify
from ops import checks, ddp, resume
from ops.metrics import read_metrics

FAULTS = [sys.executable, str(REPO / "tests" / "faults.py")]
# a GRPO run of 3 rounds in seconds: LoRA WITH dropout (the resume must restore its RNG stream too)
GRPO = ["--num-examples", "16", "--prompts-per-step", "2", "--toy-blanks", "6,8", "--groups-per-micro", "1",
        "--num-generations", "3", "--num-iterations", "2", "--gen-length", "16", "--block-length", "16",
        "--diffusion-steps", "4", "--lr", "1e-2", "--save-every", "1", "--rounds", "3", "--beta", "0.04",
        "--lora-r", "4", "--lora-alpha", "8", "--lora-dropout", "0.1"]
SFT = ["--num-examples", "40", "--max-steps", "6", "--batch-size", "4", "--max-length", "52", "--cut-labels",
       "--eval-every", "2", "--eval-fraction", "0.1", "--lr", "1e-2", "--lora-r", "4", "--lora-alpha", "8"]
TIMING = ("elapsed_s", "s_")  # metrics that are wall-clock readings, different on every run


def proc(cmd, timeout=300):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def same_metrics(a, b):
    """Two metrics.jsonl files tell the same run: the same steps and every non-timing value equal."""
    ra, rb = read_metrics(str(a)), read_metrics(str(b))
    assert [r["step"] for r in ra] == [r["step"] for r in rb]
    for x, y in zip(ra, rb):
        assert x.keys() == y.keys()
        for k in x:
            if not k.startswith(TIMING):
                assert x[k] == pytest.approx(y[k], rel=1e-6, abs=1e-9), (x["step"], k, x[k], y[k])


def same_weights(a, b, atol=0.0):
    sa, sb = from_pretrained(a).state_dict(), from_pretrained(b).state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k], atol=atol, rtol=0 if atol == 0 else 1e-5)


def saves_are_whole(out_dir):
    """Every directory under saves/ is complete (it loads, with its trainer state) or a *.partial that
    no reader uses; the top-level model loads or has no config.json. -> the complete saves' steps."""
    root = out_dir / resume.SAVES_DIR
    steps = []
    for d in sorted(root.iterdir()) if root.exists() else []:
        if d.name.endswith(resume.PARTIAL):
            continue
        verify(d)
        assert (d / resume.STATE_FILE).is_file() and (d / resume.INFO_FILE).is_file()
        steps.append(torch.load(d / resume.STATE_FILE, weights_only=False)["step"])
    if (out_dir / "config.json").exists():
        verify(out_dir)
    return steps


@pytest.fixture(scope="module")
def digit_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("digit") / "tiny"
    write_digit_model(path)
    return path


@pytest.fixture(scope="module")
def grpo_straight(tmp_path_factory, digit_model):
    """The uninterrupted reference run, and a second identical command (determinism)."""
    root = tmp_path_factory.mktemp("grpo_straight")
    for name in ("a", "b"):
        run(FAULTS + ["none", "grpo.py", "--model-dir", str(digit_model), *GRPO, "--out-dir", str(root / name)], REPO)
    return root


# -----------------------------------------------------------------------------
# 1. crash at any moment, then resume


def test_same_command_twice_gives_identical_metrics_and_weights(grpo_straight):
    same_metrics(grpo_straight / "a", grpo_straight / "b")
    same_weights(grpo_straight / "a", grpo_straight / "b")
    assert saves_are_whole(grpo_straight / "a") == [2, 3]  # --keep-last 2 of the 3 saves


@pytest.mark.parametrize("fault, complete_before", [
    ("kill-in-save:2", [1]),          # round 2's weights written, its state not: save 2 never existed
    ("kill-before-rename:2", [1]),    # every file of save 2 on disk, not yet renamed into place
    ("kill-in-publish:2", [1, 2]),    # save 2 complete, the run's model half re-linked
    ("kill-after-step:5", [1, 2]),    # mid-round 3 (steps 5-6), after save 2
])
def test_grpo_killed_anywhere_resumes_to_the_uninterrupted_run(tmp_path, digit_model, grpo_straight, fault,
                                                               complete_before):
    out = tmp_path / "run"
    cmd = ["grpo.py", "--model-dir", str(digit_model), *GRPO, "--out-dir", str(out)]
    res = proc(FAULTS + [fault, *cmd])
    assert res.returncode == -9, res.stderr[-2000:]
    assert saves_are_whole(out) == complete_before
    # the README's resume command: the same flags plus --resume
    res = proc(FAULTS + ["none", *cmd, "--resume"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"resumed from {out / 'saves' / f'step-{complete_before[-1]:06d}'}" in res.stdout
    same_weights(out, grpo_straight / "a")  # bit for bit: the saves are exact and every RNG stream is keyed
    same_metrics(out, grpo_straight / "a")
    assert saves_are_whole(out) == [2, 3] and not any(p.name.endswith(".partial") for p in (out / "saves").iterdir())


def test_grpo_resume_on_two_ranks_equals_one_process(tmp_path, digit_model, grpo_straight):
    # full fine-tuning, no dropout: every stream is keyed by (seed, round, micro-batch), so the world size
    # may change at a resume (README); LoRA dropout draws per rank, so it may not
    flags = [f for f in GRPO if f not in ("--lora-dropout", "0.1")] + ["--lora-dropout", "0", "--lora-r", "0"]
    one, two = tmp_path / "one", tmp_path / "two"
    run(FAULTS + ["none", "grpo.py", "--model-dir", str(digit_model), *flags, "--out-dir", str(one)], REPO)
    res = proc(FAULTS + ["kill-after-step:3", "grpo.py", "--model-dir", str(digit_model), *flags, "--out-dir", str(two)])
    assert res.returncode == -9
    out = run(torchrun(2) + [str(REPO / "grpo.py"), "--model-dir", str(digit_model), *flags, "--out-dir", str(two),
                             "--resume"], REPO)
    assert "resumed from" in out
    same_weights(one, two, atol=1e-6)  # gradients averaged over 2 ranks: equal up to float summation order


@pytest.mark.parametrize("fault, complete_before", [("kill-in-save:2", [2]), ("kill-after-step:5", [2, 4])])
def test_sft_killed_then_resumed_equals_the_uninterrupted_run(tmp_path, fault, complete_before):
    model = make_tiny(tmp_path / "tiny", d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)
    cmd = ["sft.py", "--model-dir", str(model), *SFT]  # LoRA dropout 0.05 (sft.py's default) is on
    run(FAULTS + ["none", *cmd, "--out-dir", str(tmp_path / "straight")], REPO)
    res = proc(FAULTS + [fault, *cmd, "--out-dir", str(tmp_path / "run")])
    assert res.returncode == -9
    assert saves_are_whole(tmp_path / "run") == complete_before
    out = run(FAULTS + ["none", *cmd, "--out-dir", str(tmp_path / "run"), "--resume"], REPO)
    assert "resumed from" in out and f"at step {complete_before[-1]}" in out
    same_weights(tmp_path / "run", tmp_path / "straight")
    same_metrics(tmp_path / "run", tmp_path / "straight")
    info = [json.loads((tmp_path / p / resume.INFO_FILE).read_text()) for p in ("run", "straight")]
    assert info[0]["step"] == info[1]["step"] and info[0]["best"] == info[1]["best"]


def test_publish_is_never_a_half_model(tmp_path):
    # the run's model at the top: config.json goes first and comes back last, so a reader sees the old
    # model, none, or the new one; stale shards of another shard count go
    a, b = tmp_path / "a", tmp_path / "b"
    make_tiny(a, d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)
    make_tiny(b, seed=1, d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64, max_shard_bytes=20_000)
    out = tmp_path / "out"
    out.mkdir()
    resume.publish(a, out)
    same_weights(out, a)
    resume.publish(b, out)
    same_weights(out, b)
    assert sorted(p.name for p in out.glob("model*.safetensors")) == sorted(p.name for p in b.glob("model*.safetensors"))
    assert os.path.samefile(out / "config.json", b / "config.json")  # hard links: no second copy of the weights


# -----------------------------------------------------------------------------
# 2. bad numbers


def test_a_nonfinite_step_leaves_weights_and_adam_state_untouched():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(4, 3)).sum().backward()
    assert ddp.step_if_finite(opt, None, 1.0, 2.0)  # a normal step first, so AdamW has moments
    before = ({k: v.clone() for k, v in model.state_dict().items()},
              {i: {k: v.clone() for k, v in s.items()} for i, s in opt.state_dict()["state"].items()})
    (model(torch.randn(4, 3)).sum() * float("nan")).backward()
    assert not ddp.step_if_finite(opt, None, float("nan"), float("nan"))
    assert not ddp.step_if_finite(opt, None, 1.0, float("inf"))
    assert all(p.grad is None for p in model.parameters())  # cleared either way
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[0][k])
    for i, s in opt.state_dict()["state"].items():
        assert all(torch.equal(v, before[1][i][k]) for k, v in s.items())


def test_sft_skips_one_nan_step_and_finishes(tmp_path):
    model = make_tiny(tmp_path / "tiny", d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)
    out = run(FAULTS + ["nan:3", "sft.py", "--model-dir", str(model), *SFT, "--out-dir", str(tmp_path / "run")], REPO)
    assert "done in" in out
    assert [r["skipped"] for r in read_metrics(str(tmp_path / "run"))] == [0, 0, 1, 0, 0, 0]
    assert all(torch.isfinite(v).all() for v in from_pretrained(tmp_path / "run").state_dict().values())


@pytest.mark.parametrize("script", ["grpo.py", "sft.py"])
def test_nonfinite_steps_in_a_row_stop_with_a_usable_last_save(tmp_path, digit_model, script):
    # from this gradient forward on, every one is NaN: grpo's round 3 (steps 5, 6; 2 micro-batches a step)
    # and sft's steps 5, 6
    flags, first_nan = (GRPO, 9) if script == "grpo.py" else (SFT, 5)
    res = proc(FAULTS + [f"nan:{first_nan}:0", script, "--model-dir", str(digit_model), *flags, "--max-bad-steps", "2",
                         "--out-dir", str(tmp_path / "run")])
    assert res.returncode == 1, res.stderr[-2000:]
    assert "2 optimizer steps in a row had a non-finite loss or gradient norm" in res.stderr
    assert "Traceback" not in res.stderr
    assert saves_are_whole(tmp_path / "run") == ([1, 2] if script == "grpo.py" else [2, 4])
    for d in [tmp_path / "run", *(tmp_path / "run" / "saves").iterdir()]:
        assert all(torch.isfinite(v).all() for v in from_pretrained(d).state_dict().values())
    assert read_metrics(str(tmp_path / "run"))[-1]["skipped"] > 0


def test_a_save_refuses_nonfinite_weights(tmp_path):
    model = torch.nn.Linear(2, 2)
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
    run_ = argparse.Namespace(distributed=False, master=True)
    with pytest.raises(RuntimeError, match="non-finite"):
        resume.save_checkpoint(argparse.Namespace(out_dir=str(tmp_path)), run_, model, None, 1)
    assert not (tmp_path / "saves").exists()


# -----------------------------------------------------------------------------
# 3. bad input: one line, exit 2, nothing written


def malformed_gsm8k(path):
    path.write_text('{"question": "1+1?", "answer": "#### 2"}\n{"question": "2+2?", "answer": \n')
    return path


def truncated_copy(src, dst):
    shutil.copytree(src, dst)
    shard = sorted(dst.glob("*.safetensors"))[0]
    shard.write_bytes(shard.read_bytes()[:-100])  # a copy cut short
    return dst


@pytest.mark.parametrize("script, flags, says", [
    ("grpo.py", ["--num-generations", "1"], "--num-generations must be >= 2"),
    ("grpo.py", ["--block-length", "5"], "--gen-length 16 / --block-length 5"),
    ("grpo.py", ["--task", "gsm8k", "--data", "{bad_data}"], "bad.jsonl:2: malformed JSON line"),
    ("grpo.py", ["--model-dir", "{truncated}"], "is truncated or padded"),
    ("grpo.py", ["--num-examples", "8", "--prompts-per-step", "16"], "more than the 8 prompts"),
    ("sft.py", ["--task", "nosuch"], "unknown task 'nosuch'"),
    ("sft.py", ["--grad-accum", "0"], "--grad-accum must be >= 1"),
    ("sft.py", ["--num-examples", "20", "--batch-size", "32"], "more than the 19 training examples"),
    ("sft.py", ["--max-length", "8"], "--task toy, example 0: a prompt does not fit --max-length 8"),
    # docs/reliability.md: a label that does not fit names its file and example, up front (the model is not loaded)
    ("sft.py", ["--task", "s1k", "--data", "{long_s1k}", "--max-length", "200", "--no-cut-labels", "--batch-size", "1",
                "--grad-accum", "1"], "long.jsonl, example 1: a completion does not fit --max-length 200"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, digit_model, script, flags, says):
    long_s1k = tmp_path / "long.jsonl"  # example 1's attempt is far longer than the others
    long_s1k.write_text("".join(json.dumps({"question": "q", "thinking_trajectories": ["t"], "attempt": a}) + "\n"
                                for a in ("short", "x " * 400, "short")))
    subs = {"{bad_data}": str(malformed_gsm8k(tmp_path / "bad.jsonl")), "{long_s1k}": str(long_s1k),
            "{truncated}": str(truncated_copy(digit_model, tmp_path / "cut")) if "{truncated}" in flags else ""}
    flags = [subs.get(f, f) for f in flags]
    model = [] if "--model-dir" in flags else ["--model-dir", str(digit_model)]
    res = proc([sys.executable, script, *model, *flags, "--out-dir", str(tmp_path / "out")])
    assert res.returncode == checks.USAGE_EXIT, res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{script}: error: ") and says in lines[0], res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flags, says", [
    (["--num-generations", "0"], "--num-generations must be >= 2"),
    (["--num-iterations", "0"], "--num-iterations must be >= 1"),
    (["--rounds", "0"], "--rounds must be >= 1"),
    (["--p-mask", "1.5"], "--p-mask must be in [0, 1)"),
    (["--p-mask", "1"], "--p-mask must be in [0, 1)"),
    (["--epsilon", "-0.2"], "--epsilon (the clip range) must be > 0"),
    (["--beta", "-1"], "--beta must be >= 0"),
    (["--warmup-rounds", "-1"], "--warmup-rounds must be >= 0"),
    (["--lr", "0"], "--lr must be > 0"),
    (["--temperature", "-1"], "--temperature must be >= 0"),
    (["--diffusion-steps", "3", "--block-length", "8"], "must be a multiple of the number of blocks"),
    (["--prompts-per-step", "16", "--groups-per-micro", "3"], "must split into micro-batches"),
    (["--task", "toy,nosuch"], "unknown task 'nosuch'"),
    (["--lora-r", "4", "--lora-targets", "q_proj,qkv"], "unknown layer(s) ['qkv']"),
    (["--load-in-4bit"], "needs --lora-r > 0"),
    (["--keep-last", "0"], "--keep-last must be >= 1"),
    (["--fsdp", "--lora-r", "4"], "--fsdp is full fine-tuning"),
    (["--eval-every", "5", "--task", "gsm8k"], "--eval-every measures the validation split"),
    (["--eval-every", "5", "--val-size", "8", "--fsdp", "--lora-r", "0"], "--eval-every runs on rank 0 alone"),
    (["--eval-every", "5", "--test-curve", "--task", "gsm8k"], "--test-curve draws a generated toy's test-set curve"),
])
def test_grpo_flags_that_cannot_work_are_refused(flags, says):
    import grpo
    args = grpo.parse_args(flags)
    with pytest.raises(ValueError) as e:
        check_grpo_args(args, 1, TASKS, check_schedule)
    assert says in str(e.value)


@pytest.mark.parametrize("flags,says", [
    (["--rollout-threshold", "1.5"], "--rollout-threshold must be 0 (off) or in (0, 1]"),
    (["--rollout-threshold", "0.9", "--fsdp", "--lora-r", "0"], "--rollout-threshold with --fsdp"),
    (["--objective", "spg", "--beta", "0.04"], "--objective spg has no KL term"),
])
def test_the_field_flags_that_cannot_work_are_refused(flags, says):
    from methods import grpo as field
    args = field.parse_args(flags)
    with pytest.raises(ValueError) as e:
        field.check(args, field.objective_of(args))
    assert says in str(e.value)


def test_grpo_micro_batches_must_split_over_the_ranks():
    import grpo
    args = grpo.parse_args(["--prompts-per-step", "16", "--groups-per-micro", "4"])  # 4 micro-batches
    check_grpo_args(args, 4, TASKS, check_schedule)
    with pytest.raises(checks.InputError, match="a multiple of the 3 ranks"):
        check_grpo_args(args, 3, TASKS, check_schedule)


def test_out_dir_holding_a_run_is_refused_unless_resume_or_force(tmp_path):
    out = tmp_path / "run"
    assert checks.check_out_dir(str(out), False, False, resume.RUN_FILES) is True  # fresh, and nothing created
    assert not out.exists()
    with pytest.raises(checks.InputError, match="holds no run"):
        checks.check_out_dir(str(out), True, False, resume.RUN_FILES)
    (out / "saves" / "step-000001").mkdir(parents=True)
    (out / "metrics.jsonl").write_text("{}\n")
    (out / "notes.txt").write_text("mine")
    with pytest.raises(checks.InputError, match="holds another run"):
        checks.check_out_dir(str(out), False, False, resume.RUN_FILES)
    assert checks.check_out_dir(str(out), True, False, resume.RUN_FILES) is False
    with pytest.raises(checks.InputError, match="contradict"):
        checks.check_out_dir(str(out), True, True, resume.RUN_FILES)
    assert checks.check_out_dir(str(out), False, True, resume.RUN_FILES) is True
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]  # --force removed the run's files only


def test_resume_without_a_complete_save_is_one_line(tmp_path, digit_model):
    out = tmp_path / "run"
    (out / "saves" / "step-000001.partial").mkdir(parents=True)  # a run killed during its first save
    (out / "metrics.jsonl").write_text("")
    res = proc([sys.executable, "grpo.py", "--model-dir", str(digit_model), "--out-dir", str(out), "--resume"])
    assert res.returncode == 2 and "holds no complete save" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("damage, says", [
    ("truncate", "truncated or padded"), ("header", "not a readable safetensors file"),
    ("config", "not valid JSON"), ("index", "not a valid index"), ("shape", "shape mismatches"),
])
def test_verify_names_the_broken_file_without_reading_weights(tmp_path, damage, says):
    d = make_tiny(tmp_path / "m", d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)
    shard = sorted(d.glob("*.safetensors"))[0]
    if damage == "truncate":
        shard.write_bytes(shard.read_bytes()[:-1])
    elif damage == "header":
        shard.write_bytes(b"\xff" * 8 + shard.read_bytes()[8:])
    elif damage == "config":
        (d / "config.json").write_text("{")
    elif damage == "index":
        (d / "model.safetensors.index.json").write_text("[]")
    else:
        cfg = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**cfg, "mlp_hidden_size": 96}))
    with pytest.raises(ValueError, match=says):
        verify(d)


# -----------------------------------------------------------------------------
# 4. a rank that dies or hangs


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("fault", ["rank-kill:1:3", "rank-stop:1:3"])
def test_a_lost_rank_stops_the_others_with_one_line(tmp_path, digit_model, fault):
    # two ranks started by hand, as on two nodes: no torchrun agent to kill the survivor for us
    port, timeout_s = free_port(), 5
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "WORLD_SIZE": "2", "PYTHONUNBUFFERED": "1"}
    cmd = FAULTS + [fault, "grpo.py", "--model-dir", str(digit_model), *GRPO, "--out-dir", str(tmp_path / "run"),
                    "--dist-timeout", str(timeout_s)]
    ranks = [subprocess.Popen(cmd, cwd=REPO, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    try:
        t0 = time.monotonic()
        _, err = ranks[0].communicate(timeout=120)
        waited = time.monotonic() - t0
    finally:
        for p in ranks:
            p.kill()
            p.wait()
    assert ranks[0].returncode == 1, err[-2000:]
    assert "[rank 0] stopping: another rank died, hung or lost the network" in err and "Traceback" not in err
    assert waited < 60  # a hang is bounded by --dist-timeout, a death is noticed at once
    assert saves_are_whole(tmp_path / "run") == [1]  # round 1's save is intact for the --resume
    assert ranks[1].returncode != 0
