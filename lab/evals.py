"""
What d1's protocol does not need, over eval.py's result directories (no model, no GPU of its own);
docs/evaluation.md says what each reads and refuses:

    python -m lab.evals compare A B [--force]       paired bootstrap CI of accuracy(B) - accuracy(A)
    python -m lab.evals summarize out/toy           make run's table: SFT vs SFT + diffu-GRPO per seed
    python -m lab.evals select RUN_DIR --task T --data TEST [--nproc N] [--entry E] [eval flags]

select is the honest protocol's last step (docs/evaluation.md "An honest protocol"): the final and the
validation-selected checkpoint (RUN_DIR/best.json) on the TEST set, each through the eval entry point E
(eval.py, or a module such as methods.eval), with a 95% bootstrap CI over the test items.
"""
import argparse
import glob
import json
import math
import os
import random
import subprocess
import sys

import tasks
from modelio.provenance import same_weights
from ops.checks import require, upfront
from ops.metrics import read_json, read_metrics
from ops.results import accuracy, load_results, read_manifest
from ops.resume import BEST_FILE, INFO_FILE
from ops.stats import mean_and_spread

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# compare: the paired bootstrap over the items both runs evaluated
def item_scores(recs, cells=False):
    """Per-item score in [0, 1] whose mean is the accuracy (Sudoku: cells; the cell micro-average
    equals the mean per-puzzle cell score when every puzzle has the same number of blanks)."""
    if cells:
        return {r["id"]: r["cells_correct"] / max(1, r["cells_total"]) for r in recs}
    return {r["id"]: float(bool(r["correct"])) for r in recs}


def paired_bootstrap(a, b, n_boot=10_000, seed=0):
    """95% CI of mean(b - a) over paired items by resampling items with replacement."""
    diffs = [y - x for x, y in zip(a, b)]  # pairing removes the shared item difficulty from the noise
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(n_boot))
    return sum(diffs) / n, means[int(0.025 * n_boot)], means[int(0.975 * n_boot) - 1]


# settings that must agree for two result directories to be comparable item by item; a sampler's own
# options are not here: comparing the exact sampler with a cached one is how its accuracy cost is measured
MUST_MATCH = ("task", "data_sha256", "toy_blanks", "item_ids", "gen_length", "block_length", "steps",
              "temperature", "remasking", "parser_version")
# expected to differ between any two runs: only the other differences are noted
EXPECTED = ("model_dir", "model_spec", "model_revision", "model_fingerprint", "provenance", "time",
            "wall_seconds", "out_dir")


def compare(dir_a, dir_b, registry, force=False):
    """Paired bootstrap CI of accuracy(B) - accuracy(A) over the items both evaluated."""
    mans = [read_manifest(d) for d in (dir_a, dir_b)]
    bad = [k for k in MUST_MATCH if mans[0].get(k) != mans[1].get(k)]
    if bad:
        msg = f"manifests differ in {bad}: the two runs are not the same evaluation"
        if not force:
            raise SystemExit(f"refusing to compare: {msg} (--force to compare anyway)")
        print(f"WARNING: {msg}")
    # the other differences are noted; a key only one manifest has is read as None in the other
    keys = list(mans[0]) + [k for k in mans[1] if k not in mans[0]]
    other = [k for k in keys if k not in MUST_MATCH + EXPECTED and mans[0].get(k) != mans[1].get(k)]
    if other:
        print(f"note: the runs also differ in {other}")
    task = mans[0]["task"]
    (ra,) = load_results([dir_a], registry).values()  # one group each
    (rb,) = load_results([dir_b], registry).values()
    sa = item_scores(ra, registry[task].cells)
    sb = item_scores(rb, registry[task].cells)
    common = sorted(set(sa) & set(sb))  # equal item ids are guaranteed unless --force
    diff, lo, hi = paired_bootstrap([sa[i] for i in common], [sb[i] for i in common])
    print(f"{task} {mans[0]['gen_length']}: A {100 * sum(sa[i] for i in common) / len(common):.1f}%  "
          f"B {100 * sum(sb[i] for i in common) / len(common):.1f}%  B - A {100 * diff:+.1f} pts, "
          f"95% paired-bootstrap CI [{100 * lo:+.1f}, {100 * hi:+.1f}] over {len(common)} items")
    shared = same_weights(*mans)
    if shared:  # two result dirs of one model (a copied run dir, a run that learned nothing): say it
        print(f"note: A and B are the same weights (fingerprint {shared}): the difference measures the evaluation "
              f"alone, not training")
    return diff, lo, hi


# summarize: make run's table
def summarize(run_dir):
    """The CPU pipeline's table from <run_dir>/seed*/eval_{sft,grpo}.json (lists as written by
    --json): held-out accuracy of SFT and SFT + diffu-GRPO per seed, mean, std, 95% CI."""
    rows = []
    for d in sorted(glob.glob(os.path.join(run_dir, "seed*"))):
        with open(os.path.join(d, "eval_sft.json")) as f1, open(os.path.join(d, "eval_grpo.json")) as f2:
            rows.append((os.path.basename(d), json.load(f1)[0]["accuracy"], json.load(f2)[0]["accuracy"]))
    if not rows:
        raise FileNotFoundError(f"no {run_dir}/seed*/eval_sft.json results to summarize")
    print(f"\nheld-out accuracy (%), {run_dir}")
    print(f"{'':>8} {'SFT':>7} {'SFT+GRPO':>9} {'gain':>7}")
    for name, sft, grpo in rows:
        print(f"{name:>8} {sft:>7.1f} {grpo:>9.1f} {grpo - sft:>+7.1f}")
    # the gain is taken per seed (each seed's GRPO run starts from that seed's SFT model), so its interval
    # is that of the paired differences, not one built from the two columns' intervals
    cols = {"SFT": [r[1] for r in rows], "SFT+GRPO": [r[2] for r in rows], "gain": [r[2] - r[1] for r in rows]}
    stats = {k: mean_and_spread(v) for k, v in cols.items()}
    print(f"{'mean':>8} {stats['SFT'][0]:>7.1f} {stats['SFT+GRPO'][0]:>9.1f} {stats['gain'][0]:>+7.1f}")
    print(f"{'std':>8} {stats['SFT'][1]:>7.1f} {stats['SFT+GRPO'][1]:>9.1f} {stats['gain'][1]:>7.1f}")
    print(f"{'95% CI':>8} {stats['SFT'][2]:>7.1f} {stats['SFT+GRPO'][2]:>9.1f} {stats['gain'][2]:>7.1f}"
          "  (± half-width, t over seeds)")
    return stats


# select: the final and the validation-selected checkpoint on the test set
def bootstrap_ci(records, cells=False, n_boot=2000, seed=0):
    """95% percentile bootstrap interval of the accuracy (%; cells: Sudoku's average) over the items,
    resampled with replacement."""
    rng = random.Random(seed)
    n = len(records)
    stats = sorted(accuracy([records[rng.randrange(n)] for _ in range(n)], cells) for _ in range(n_boot))
    return stats[int(0.025 * n_boot)], stats[int(0.975 * n_boot) - 1]


def checkpoints(run_dir):
    """{"final": (RUN_DIR, step), "selected": (its best save, step)} and best.json, checked as input."""
    best_path = os.path.join(run_dir, BEST_FILE)
    require(os.path.isfile(best_path), f"select {run_dir}: no {BEST_FILE}: train with --val-size N --eval-every K")
    best = read_json(best_path)
    selected = os.path.join(run_dir, best["save"])
    require(os.path.isfile(os.path.join(selected, "config.json")), f"select: {best_path} names {selected}, "
            "which holds no model (removed by hand?)")
    require(os.path.isfile(os.path.join(run_dir, INFO_FILE)), f"select {run_dir}: no published model "
            f"({INFO_FILE} of the final round) there")
    return {"final": (run_dir, read_json(os.path.join(run_dir, INFO_FILE))["step"]),
            "selected": (selected, best["step"])}, best


def entry_command(entry):
    """The eval entry point as arguments of python: a script of this repository (eval.py) or a module (-m)."""
    if entry.endswith(".py"):
        return [os.path.join(REPO, entry)]
    return ["-m", entry]


def evaluate(name, path, rest, out_dir, nproc=1, entry="eval.py"):
    """The eval entry point on one checkpoint (under torchrun with nproc > 1 processes, one per GPU) -> its
    --json rows [{task, gen_length, items, accuracy}]."""
    out = os.path.join(out_dir, name)
    js = os.path.join(out_dir, f"{name}.json")
    launch = [sys.executable] + (["-m", "torch.distributed.run", f"--nproc_per_node={nproc}"] if nproc > 1 else [])
    cmd = [*launch, *entry_command(entry), *rest, "--model-dir", path, "--out-dir", out, "--json", js]
    print(f"select: {name} checkpoint {path}: {' '.join(cmd[1:])}", flush=True)
    # a module entry point (-m) is found from any working directory: the repository on the path
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))}
    rc = subprocess.run(cmd, env=env).returncode
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


def select(run_dir, task, rest, out_dir, registry, nproc=1, entry="eval.py"):
    """Evaluate the final and the validation-selected checkpoint of run_dir with the eval entry point `entry`
    and its flags `rest`; write (select.json, select.md in out_dir) and print the report."""
    with upfront("lab.evals select"):
        require(int(os.environ.get("WORLD_SIZE", 1)) == 1, "select starts the eval per checkpoint: run it "
                "without torchrun; --nproc N runs each under torchrun on N GPUs")
        require(nproc >= 1, f"--nproc must be >= 1, got {nproc}")
        require("--model-dir" not in rest and not any(a.startswith("--model-dir=") for a in rest),
                "select evaluates RUN_DIR's checkpoints: drop --model-dir")
        ckpts, best = checkpoints(run_dir)
    rows = []
    for name, (path, step) in ckpts.items():
        for r in evaluate(name, path, rest, out_dir, nproc, entry):
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


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m lab.evals", allow_abbrev=False,
                                     description="compare, summarize and select over eval.py's results")
    commands = parser.add_subparsers(dest="command", required=True)
    c = commands.add_parser("compare", help="paired bootstrap CI of B - A over the same items")
    c.add_argument("a", help="result dir A (eval.py: <out-dir>/<task>_<gen>)")
    c.add_argument("b", help="result dir B, the same evaluation of another model or sampler")
    c.add_argument("--force", action="store_true", help="compare even if the manifests disagree")
    s = commands.add_parser("summarize", help="make run's table from <run_dir>/seed*/eval_{sft,grpo}.json")
    s.add_argument("run_dir")
    e = commands.add_parser("select", allow_abbrev=False, help="a grpo.py run's final and validation-selected "
                            "checkpoints on the test set; other flags go to the eval entry point")
    e.add_argument("run_dir", help="a grpo.py --out-dir with best.json (--val-size N --eval-every K)")
    e.add_argument("--task", default="toy", help="the eval's --task (passed on)")
    e.add_argument("--out-dir", default="out/eval", help="<out-dir>/{final,selected}/, select.json, select.md")
    e.add_argument("--nproc", type=int, default=1, help="processes (GPUs) per eval, under torchrun")
    e.add_argument("--entry", default="eval.py", help="the eval entry point: eval.py, or a module "
                   "(methods.eval: the field's samplers)")
    args, rest = parser.parse_known_args(argv)
    if args.command != "select" and rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "compare":
        with upfront("lab.evals compare"):
            compare(args.a, args.b, tasks.TASKS, force=args.force)
    elif args.command == "summarize":
        with upfront("lab.evals summarize"):
            summarize(args.run_dir)
    else:
        select(args.run_dir, args.task, ["--task", args.task, *rest], args.out_dir, tasks.TASKS, args.nproc,
               args.entry)


if __name__ == "__main__":
    main()
