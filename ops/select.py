"""
`python eval.py --select RUN_DIR --task T --data TEST [--gen-lengths ...] [other eval flags]`: the
honest protocol's last step (docs/evaluation.md "An honest protocol"). A grpo.py run trained with
--val-size N --eval-every K names its best VALIDATION round in RUN_DIR/best.json (ops/best.py); this
evaluates two checkpoints on the TEST set, each at every gen length, through eval.py's normal path
(one eval.py subprocess per checkpoint, the user's other flags passed through):

    final      RUN_DIR itself, the run's published model (its last round)
    selected   RUN_DIR/<best.json's save>, chosen on validation before the test set was read

and writes <out-dir>/select.json and select.md: test accuracy with a 95% percentile bootstrap CI over
the test items (2000 resamples of the items, the accuracy recomputed on each: d1's cell micro-average for
Sudoku), and the validation curve the choice was made from. The test set is never read to choose.
"""
import glob
import json
import math
import os
import random
import subprocess
import sys

from ops.checks import require, upfront
from ops.metrics import read_json, read_metrics
from ops.results import accuracy, load_results
from ops.resume import BEST_FILE, INFO_FILE

EVAL_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "eval.py")
# set per checkpoint here, not passed through to eval.py
OWN_FLAGS = ("--select", "--select-nproc", "--out-dir", "--json", "--model-dir")
CHILD = "NANO_D1_SELECT_CHILD"  # set in the subprocesses: an abbreviated --select there must not recurse


def bootstrap_ci(records, cells=False, n_boot=2000, seed=0):
    """95% percentile bootstrap interval of the accuracy (%; cells: Sudoku's average) over the items,
    resampled with replacement."""
    rng, n = random.Random(seed), len(records)
    stats = sorted(accuracy([records[rng.randrange(n)] for _ in range(n)], cells) for _ in range(n_boot))
    return stats[int(0.025 * n_boot)], stats[int(0.975 * n_boot) - 1]


def pass_through(argv):
    """eval.py's command line without the flags --select sets per checkpoint (OWN_FLAGS, both spellings)."""
    out, skip = [], False
    for tok in argv:
        if skip:
            skip = False
        elif tok in OWN_FLAGS:
            skip = True  # and its value
        elif not tok.startswith(tuple(f + "=" for f in OWN_FLAGS)):
            out.append(tok)
    return out


def checkpoints(run_dir):
    """{"final": (RUN_DIR, step), "selected": (its best save, step)} and best.json, checked as input."""
    best_path = os.path.join(run_dir, BEST_FILE)
    require(os.path.isfile(best_path), f"--select {run_dir}: no {BEST_FILE}: train with --val-size N --eval-every K")
    best = read_json(best_path)
    selected = os.path.join(run_dir, best["save"])
    require(os.path.isfile(os.path.join(selected, "config.json")), f"--select: {best_path} names {selected}, "
            "which holds no model (removed by hand?)")
    require(os.path.isfile(os.path.join(run_dir, INFO_FILE)), f"--select {run_dir}: no published model "
            f"({INFO_FILE} of the final round) there")
    return {"final": (run_dir, read_json(os.path.join(run_dir, INFO_FILE))["step"]),
            "selected": (selected, best["step"])}, best


def evaluate(name, path, rest, out_dir, nproc=1):
    """eval.py on one checkpoint (under torchrun with nproc > 1 processes, one per GPU) -> its --json rows
    [{task, gen_length, items, accuracy}]."""
    out, js = os.path.join(out_dir, name), os.path.join(out_dir, f"{name}.json")
    launch = [sys.executable] + (["-m", "torch.distributed.run", f"--nproc_per_node={nproc}"] if nproc > 1 else [])
    cmd = [*launch, EVAL_PY, *rest, "--model-dir", path, "--out-dir", out, "--json", js]
    print(f"--select: {name} checkpoint {path}: {' '.join(cmd[1:])}", flush=True)
    rc = subprocess.run(cmd, env={**os.environ, CHILD: "1"}).returncode
    if rc:
        raise SystemExit(rc)  # eval.py said why; --resume continues it
    return read_json(js)


def table(rows, best, curve):
    """The markdown report: one row per (checkpoint, gen length), then the validation curve."""
    lines = ["| checkpoint | round | gen length | test accuracy % | 95% CI (bootstrap over items) | items |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['checkpoint']} | {r['step']} | {r['gen_length']} | {r['accuracy']:.1f} | "
              f"[{r['ci'][0]:.1f}, {r['ci'][1]:.1f}] | {r['items']} |" for r in rows]
    points = " ".join(f"{s}:{v:.1f}" for s, v in curve)
    lines += ["", f"selected by validation: round {best['step']}, val_acc {best['val_acc']:.1f}% on "
              f"{best.get('val_items')} items of the training data; the test set was not read to choose.",
              f"validation curve (round:val_acc %): {points}"]
    return "\n".join(lines) + "\n"


def select(run_dir, task, argv, out_dir, registry, nproc=1):
    """Evaluate the final and the validation-selected checkpoint of run_dir; write and print the report
    (select.json, select.md in out_dir; registry: tasks.TASKS). -> None, so eval.py exits 0 with
    SystemExit(select(...))."""
    with upfront("eval.py --select"):
        require(not os.environ.get(CHILD), "--select inside --select: spell the flag out in full")
        require(int(os.environ.get("WORLD_SIZE", 1)) == 1, "--select starts eval.py per checkpoint: run it "
                "without torchrun; --select-nproc N runs each under torchrun on N GPUs")
        require(nproc >= 1, f"--select-nproc must be >= 1, got {nproc}")
        require("--model-dir" not in argv and not any(a.startswith("--model-dir=") for a in argv),
                "--select evaluates RUN_DIR's checkpoints: drop --model-dir")
        ckpts, best = checkpoints(run_dir)
    rest, rows = pass_through(argv), []
    for name, (path, step) in ckpts.items():
        for r in evaluate(name, path, rest, out_dir, nproc):
            gen = r["gen_length"]
            # eval.py's result dirs of this length: <task>_<gen>, or <task>_<gen>_seed<s> with --seeds
            dirs = glob.glob(os.path.join(out_dir, name, f"{task}_{gen}")) + \
                glob.glob(os.path.join(out_dir, name, f"{task}_{gen}_seed*"))
            recs = [rec for group in load_results(sorted(dirs), registry).values() for rec in group]  # seeds pooled
            ci = bootstrap_ci(recs, registry[task].cells) if recs else (math.nan, math.nan)
            rows.append({"checkpoint": name, "path": path, "step": step, "gen_length": gen,
                         "accuracy": r["accuracy"], "ci": [round(ci[0], 2), round(ci[1], 2)], "items": r["items"]})
    curve = [(m["step"], m["val_acc"]) for m in read_metrics(run_dir) if "val_acc" in m]
    report = table(rows, best, curve)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "select.json"), "w") as f:
        json.dump({"run_dir": os.path.abspath(run_dir), "best": best, "rows": rows, "val_curve": curve,
                   "ci": "95% percentile bootstrap over test items, 2000 resamples"}, f, indent=2)
    with open(os.path.join(out_dir, "select.md"), "w") as f:
        f.write(report)
    print(report, end="")
