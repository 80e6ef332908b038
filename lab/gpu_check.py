"""
gpu_check.py: ten minutes on one GPU box before renting eight for two days.

Proves the CUDA path of every script and measures what d1's 8B recipe costs on this GPU:
  1. cuda tests   pytest -m cuda tests/test_cuda.py
  2. scripts      the tiny model on CUDA, a few steps each: sft.py, grpo.py (full, LoRA, 4-bit + LoRA,
                  --compile), methods.grpo with a fast rollout, eval.py; sft / grpo / eval under torchrun
                  on every GPU with NCCL, and sft / grpo with --fsdp
  3. 8B shape     random weights, one process each (eightb_checks): d1's QLoRA round per rollout mode
                  and under every objective of methods/, at Dream-7B's shape, bf16 LoRA, full
                  fine-tuning at 8 blocks, the policy pass's MFU, the samplers, the rollout modes
  4. projection   hours for d1's step counts from the measured QLoRA round, on 1 GPU and on 8
Prints one line per check as it finishes, then a table; writes every log and JSON under --out-dir;
exits 1 if any check failed. --budget-s S fits the run into S seconds: the 8B checks run most important
first, one whose usual time (EST_SECONDS) no longer fits is skipped, one still running at the end is
stopped. Each check is its own process, so a crash does not take the rest down.

Needs torch with CUDA, transformers, safetensors, tqdm, numpy, pytest (bitsandbytes for the 4-bit checks),
in the Python it runs under (a GPU box's own torch, not the CPU venv). Run:
    make gpu-check                         # = python3 -m lab.gpu_check
    python3 -m lab.gpu_check --skip 8b         # CUDA correctness only, ~2 min
    python3 -m lab.gpu_check --budget-s 540                # what fits in 9 minutes, most important first
    python3 -m lab.gpu_check --skip tests,scripts --only dream,bf16   # the 8B checks whose names hold these
No CPU mode: tests/test_bench.py runs the Dream-7B round's command on CPU at a tiny Dream stand-in.
"""
import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from functools import partial

from ops.metrics import read_json
from lab.preflight import D1_STEPS, project_hours

# the parts --skip can name; the projection (part 4) is read off part 3's QLoRA round
PARTS = ("tests", "scripts", "8b")
N_GPUS_PROJECTED = 8  # d1 trains on 8 GPUs
# the objectives of methods/ on d1's QLoRA round at the 8B shape, with the flags each needs there (JustGRPO at
# its paper's μ 1: μ 12 of its 256-row passes take ~20 min; --ar-chunk 2: 16 ran out of an H200's 139 GiB)
OBJECTIVE_ROUNDS = [("wd1", []), ("justgrpo", ["--block-length", "1", "--diffusion-steps", "256", "--beta", "0",
                                               "--num-iterations", "1", "--ar-chunk", "2"]),
                    ("spg", ["--beta", "0"]), ("espo", []), ("trajectory", ["--trajectory-segments", "8"])]


def start(name, cmd, log_dir):
    """Launch one check as a subprocess, its stdout + stderr into <log_dir>/<name>.log."""
    # unbuffered output, so a crashed check's log ends at the crash
    env = {**os.environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1"}
    log = open(os.path.join(log_dir, f"{name}.log"), "w")
    log.write("$ " + " ".join(cmd) + "\n"); log.flush()
    # its own process group: a check stopped at --budget-s takes its children (torchrun's ranks) with it
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return name, proc, log, time.time()


def finish(job, summarize=None, deadline=None):
    """Wait for a started check (until `deadline`, a time.time(), if given: then it is stopped and
    fails); return its result row (a passing 8B check's headline numbers from summarize) and print its line."""
    name, proc, log, t0 = job
    try:
        rc = proc.wait(timeout=None if deadline is None else max(0.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        rc = proc.wait()
        log.write(f"\nstopped by gpu_check: --budget-s ran out after {time.time() - t0:.0f} s\n")
    log.close()
    row = {"check": name, "ok": rc == 0, "seconds": time.time() - t0, "note": ""}
    path = log.name
    if rc != 0:  # the last non-empty log line is usually the error
        tail = [ln.strip() for ln in open(path, errors="replace") if ln.strip()]
        row["note"] = f"exit {rc}: {tail[-1][:150] if tail else ''} (log: {path})"
    elif summarize:
        row["note"] = summarize()
    print(f"{'PASS' if row['ok'] else 'FAIL'}  {name:<26} {row['seconds']:6.1f} s  {row['note']}", flush=True)
    return row


def finish_all(jobs, deadline=None):
    """Wait for checks running side by side; report each as it ends, with its own duration (those still
    running at `deadline` are stopped)."""
    rows, jobs = [], list(jobs)
    while jobs:
        # poll: each check is reported and timed when it ends, not when those started before it end
        late = deadline is not None and time.time() >= deadline
        done = [j for j in jobs if late or j[1].poll() is not None]
        rows += [finish(j, deadline=deadline) for j in done]
        jobs = [j for j in jobs if j not in done]
        time.sleep(0.2)
    return rows


def summary(path, line):
    """finish's summarize: `line` of the JSON at `path`, read once the check has run (it exists only then)."""
    return partial(line_of, path, line)


def line_of(path, line):
    return line(read_json(path))


def round_line(r):
    """One line from a lab.preflight JSON: phases, tokens/s, memory, MFU."""
    # preflight's JSON holds an error instead of numbers when the round ran out of memory
    if "error" in r:
        return r["error"]
    s = r["seconds"]
    return (f"rollout {s['rollout']:.1f} s ({r['sampler_tokens_per_s']:.0f} tok/s), old/ref {s['old_ref']:.1f} s, "
            f"update {s['update']:.1f} s, peak {r['peak_memory_gib']:.1f} GiB alloc"
            + (f" / {r['peak_reserved_gib']:.1f} reserved" if "peak_reserved_gib" in r else "")
            + (f", update MFU {100 * r['mfu']:.1f} %" if "mfu" in r else "")
            # d1's run of the task on 8 GPUs (the rounds run with --gpus 8), where the JSON has it
            + "".join(f", {k.split(' (')[0]} on {N_GPUS_PROJECTED} GPUs {h:.1f} h"
                      for k, h in r.get("projection_hours", {}).items()
                      if k.startswith("d1's") and k.endswith(f"{N_GPUS_PROJECTED} GPUs")))


def mfu_line(r):
    """One line from a bench.py --policy-mfu JSON: MFU, seconds and peak memory, eager and compiled."""
    return ", ".join(f"{k} {100 * r[k]['mfu']:.1f} % MFU ({r[k]['seconds']:.3f} s, "
                     f"{r[k]['peak_memory_gib']:.1f} GiB)" for k in ("eager", "compiled") if k in r)


def rollouts_line(r):
    """One line from a lab.rollouts JSON: each mode's round against exact, and d1's GSM8K run on 8 GPUs."""
    return ", ".join(f"{name} {m['round_s']:.1f} s/round ({m['round_speedup']:.2f}x, GSM8K "
                     f"{project_hours(m['round_s'], D1_STEPS['gsm8k'], 12, 16, 1, N_GPUS_PROJECTED):.1f} h on "
                     f"{N_GPUS_PROJECTED})" for name, m in r["rollouts"].items())


def samplers_line(r):
    """One line from a bench.py --samplers JSON: tokens/s and speed-up over the exact sampler."""
    return ", ".join(f"{name} {m['tokens_per_s']:.0f} tok/s ({m['speedup']:.2f}x)" for name, m in r["samplers"].items())


def eightb_checks(py, out, peak_tflops):
    """Part 3's checks, in the order of what matters most when a budget cuts the list short: (name,
    command, summarize), each command one process on the GPU; `out` joins names onto --out-dir.
    --model-dir none: random weights even where an out/sft exists; the prompt is d1's longest (200), an
    upper bound; --gpus 8 projects d1's run on 8 GPUs beside 1."""
    bench = [py, "-m", "lab.bench", "--preset", "8b", "--peak-tflops", str(peak_tflops)]
    rollouts = [py, "-m", "lab.rollouts", "--preset", "8b", "--repeats", "1"]  # each mode: one round
    pre = [py, "-m", "lab.preflight", "--preset", "8b", "--peak-tflops", str(peak_tflops), "--model-dir",
           "none", "--task", "gsm8k", "--gpus", str(N_GPUS_PROJECTED)]

    def round_check(name, flags, stem):  # one preflight round: its JSON, and its line read from it
        return name, [*pre, *flags, "--json", out(f"{stem}.json")], summary(out(f"{stem}.json"), round_line)
    return [
        # d1's QLoRA round in each rollout mode (--rollout-cache / --rollout-threshold; docs/fast-rollouts.md).
        # Random weights never reach a 0.9 confidence, so the threshold row shows the cache's cost only
        round_check("8b qlora round", [], "8b_qlora"),
        round_check("8b qlora round, dual", ["--rollout-cache", "dual"], "8b_qlora_dual"),
        round_check("8b qlora round, dual+0.9", ["--rollout-cache", "dual", "--rollout-threshold", "0.9"],
                    "8b_qlora_dual_thr"),
        # every objective of methods/ on d1's QLoRA round; JustGRPO last, the longest
        *[round_check(f"8b {name} round", ["--objective", name, *extra], f"8b_{name}")
          for name, extra in sorted(OBJECTIVE_ROUNDS, key=lambda o: o[0] == "justgrpo")],
        # at Dream-7B's shape; the exact sampler, said explicitly: a shifted model has no rollout cache
        round_check("8b dream-7b qlora round", ["--shape", "dream-7b", "--rollout-cache", "none",
                                                "--rollout-threshold", "0"], "8b_dream7b"),
        round_check("8b bf16 lora round", ["--no-load-in-4bit", "--compile"], "8b_lora"),
        # full fine-tuning on 8 of the 32 blocks: all 32's fp32 weights, grads and AdamW (128 GB) do not fit
        round_check("8b full-ft round, 8L", ["--no-load-in-4bit", "--lora-r", "0", "--layers", "8", "--compile"],
                    "8b_full8"),
        ("8b policy mfu", [*bench, "--policy-mfu", "--compile", "--json", out("8b_mfu.json")],
         summary(out("8b_mfu.json"), mfu_line)),
        # one timed repeat (after bench's warm-up call): the exact sampler is 128 full forwards per batch
        ("8b samplers gen 256", [*bench, "--samplers", "--compile", "--repeats", "1",
                                 "--json", out("8b_samplers.json")], summary(out("8b_samplers.json"), samplers_line)),
        # all five rollout modes side by side (same prompts and noise keys), eager QLoRA then compiled bf16 LoRA
        ("8b rollout modes", [*rollouts, "--json", out("8b_rollouts.json")],
         summary(out("8b_rollouts.json"), rollouts_line)),
        ("8b rollout modes, compiled", [*rollouts, "--no-load-in-4bit", "--compile", "--json",
                                        out("8b_rollouts_compiled.json")],
         summary(out("8b_rollouts_compiled.json"), rollouts_line)),
    ]


# each 8B check's usual seconds (docs/performance.md: one H200 or H100, 2026-11-27; the compiled rollout modes
# estimated from the eager ones): --budget-s skips a check that no longer fits
EST_SECONDS = {"8b qlora round": 46, "8b qlora round, dual": 30, "8b qlora round, dual+0.9": 30,
               "8b wd1 round": 35, "8b spg round": 39, "8b espo round": 58, "8b trajectory round": 85,
               "8b justgrpo round": 130, "8b dream-7b qlora round": 34, "8b bf16 lora round": 47,
               "8b full-ft round, 8L": 25, "8b policy mfu": 22, "8b samplers gen 256": 75, "8b rollout modes": 148,
               "8b rollout modes, compiled": 160}


def parse_args(argv=None):
    """gpu_check's flags; --skip comes back as a set of PARTS."""
    p = argparse.ArgumentParser(description="prove the CUDA path and measure the 8B shape on this GPU box")
    p.add_argument("--out-dir", type=str, default="out/gpu-check", help="logs, JSON and the tiny runs' outputs")
    p.add_argument("--skip", type=str, default="", help=f"comma list of parts to skip: {','.join(PARTS)}")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak for MFU (989 = H100/H200 SXM)")
    p.add_argument("--budget-s", type=float, default=0, help="fit the run into this many seconds: skip an 8B "
                   "check whose usual time no longer fits, stop one still running at the end (0: no limit)")
    p.add_argument("--only", type=str, default="", help="comma list: run only the 8B checks whose names contain "
                   "one of these (e.g. dream,justgrpo); default all")
    args = p.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    if skip - set(PARTS):
        sys.exit(f"--skip takes {','.join(PARTS)}, got {args.skip}")
    args.skip = skip
    return args


if __name__ == "__main__":
    args = parse_args()
    skip = args.skip

    import torch
    if not torch.cuda.is_available():
        sys.exit("gpu_check.py: no CUDA GPU visible (torch.cuda.is_available() is False); on CPU run `make test`")
    missing = [m for m in ("transformers", "safetensors", "tqdm", "numpy", "pytest")
               if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(f"gpu_check.py: missing {', '.join(missing)}: pip install {' '.join(missing)}")
    # bitsandbytes is not required up front: only the 4-bit checks need it, and they then fail visibly
    has_bnb = importlib.util.find_spec("bitsandbytes") is not None
    n_gpus = torch.cuda.device_count()
    import transformers
    print(f"{n_gpus} x {torch.cuda.get_device_name(0)}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}, bitsandbytes {'yes' if has_bnb else 'MISSING: the 4-bit checks will fail'}",
          flush=True)
    os.makedirs(args.out_dir, exist_ok=True)
    out = lambda *parts: os.path.join(args.out_dir, *parts)
    py, rows, not_run = sys.executable, [], []
    deadline = time.time() + args.budget_s if args.budget_s else None
    # torchrun from this same Python, one process per visible GPU, a single-node rendezvous
    torchrun = [py, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n_gpus}"]

    # 1. the CUDA tests: -rs prints why anything was skipped
    if "tests" not in skip:
        rows.append(finish(start("cuda tests", [py, "-m", "pytest", "-m", "cuda", "-q", "-rs", "tests/test_cuda.py"],
                                 args.out_dir), deadline=deadline))

    # 2. the scripts on the tiny model: the tiny checkpoint and the SFT model first (the others start from
    # them), then everything else at once; --force starts over in the last check's out dirs
    if "scripts" not in skip:
        sft_dir = out("sft")
        for name, cmd in [("tiny model", [py, "-m", "modelio.checkpoint"]),
                          ("sft", [py, "sft.py", "--max-steps", "20", "--out-dir", sft_dir, "--force"])]:
            rows.append(finish(start(name, cmd, args.out_dir), deadline=deadline))
        # two rounds: the second starts from updated weights; the tiny preset has β 0, so the LoRA and FSDP
        # runs set β 0.04 to run the reference pass too
        grpo = ["grpo.py", "--model-dir", sft_dir, "--rounds", "2", "--force"]
        field_grpo = ["-m", "methods.grpo", *grpo[1:]]  # the same round with the field's flags
        jobs = [start(name, cmd, args.out_dir) for name, cmd in [
            ("grpo full", [py, *grpo, "--out-dir", out("grpo_full")]),
            ("grpo lora", [py, *grpo, "--out-dir", out("grpo_lora"), "--lora-r", "8", "--beta", "0.04"]),
            ("grpo 4bit+lora", [py, *grpo, "--out-dir", out("grpo_4bit"), "--lora-r", "8", "--beta", "0.04",
                                "--load-in-4bit"]),
            ("grpo compile", [py, *grpo, "--out-dir", out("grpo_compile"), "--compile"]),
            ("grpo fast rollout", [py, *field_grpo, "--out-dir", out("grpo_fast"), "--rollout-cache", "dual",
                                   "--rollout-threshold", "0.9"]),
            ("eval", [py, "eval.py", "--model-dir", sft_dir, "--limit", "40", "--out-dir", out("eval"), "--force"]),
            # the same scripts under NCCL on every GPU: DDP, then FSDP2 (--fsdp) for sft and grpo
            ("torchrun sft", [*torchrun, "sft.py", "--max-steps", "5", "--out-dir", out("sft_ddp"), "--force"]),
            ("torchrun grpo", [*torchrun, *grpo, "--out-dir", out("grpo_ddp"), "--lora-r", "8", "--beta", "0.04"]),
            ("torchrun eval", [*torchrun, "eval.py", "--model-dir", sft_dir, "--limit", "40",
                               "--out-dir", out("eval_ddp"), "--force"]),
            ("torchrun sft fsdp", [*torchrun, "sft.py", "--max-steps", "5", "--fsdp", "--out-dir", out("sft_fsdp"),
                                   "--force"]),
            ("torchrun grpo fsdp", [*torchrun, *grpo, "--fsdp", "--beta", "0.04", "--out-dir", out("grpo_fsdp")]),
        ]]
        rows += finish_all(jobs, deadline)

    # 3. the 8B shape (eightb_checks), one process at a time so each owns the GPU
    if "8b" not in skip:
        only = [w for w in args.only.split(",") if w]
        for name, cmd, summarize in eightb_checks(py, out, args.peak_tflops):
            if only and not any(w in name for w in only):
                continue
            if deadline is not None and time.time() + EST_SECONDS[name] > deadline:
                not_run.append(name)
                print(f"SKIP  {name:<26} ~{EST_SECONDS[name]} s on an H100 does not fit --budget-s", flush=True)
                continue
            rows.append(finish(start(name, cmd, args.out_dir), summarize, deadline))

    # 4. the projection: d1's step counts at the measured QLoRA round (grpo.py's 8b preset)
    proj = {}
    qlora = out("8b_qlora.json")
    if "8b" not in skip and os.path.exists(qlora) and "round_seconds" in read_json(qlora):
        round_s = read_json(qlora)["round_seconds"]
        proj = {task: {g: project_hours(round_s, steps, 12, 16, 1, g) for g in (1, N_GPUS_PROJECTED)}
                for task, steps in D1_STEPS.items()}

    print(f"\n{'check':<26} {'result':<6} {'seconds':>8}")
    for r in rows:
        print(f"{r['check']:<26} {'PASS' if r['ok'] else 'FAIL':<6} {r['seconds']:8.1f}")
    if proj:
        print(f"\nprojected d1 run (QLoRA round {round_s:.1f} s, μ 12, 16 prompts x G 6 per step):")
        print(f"{'task':<10} {'steps':>6} {'1 GPU h':>9} {f'{N_GPUS_PROJECTED} GPUs h':>9}")
        for task, h in proj.items():
            print(f"{task:<10} {D1_STEPS[task]:>6} {h[1]:9.1f} {h[N_GPUS_PROJECTED]:9.1f}")
    failed = [r["check"] for r in rows if not r["ok"]]
    with open(out("gpu_check.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0), "n_gpus": n_gpus, "torch": torch.__version__,
                   "transformers": transformers.__version__, "checks": rows, "not_run": not_run,
                   "projection_hours": proj}, f, indent=2)
    print(f"\n{len(rows) - len(failed)}/{len(rows)} checks passed"
          + (f"; FAILED: {', '.join(failed)}" if failed else "")
          + (f"; not run (--budget-s): {', '.join(not_run)}" if not_run else ""))
    sys.exit(1 if failed else 0)
