"""
Where a testbed model's held-out accuracy comes from: greedy accuracy split by how many numbers the
Countdown problem has (2, 3 or 4), for every cached eval of a lab.compare tree (nothing is run again).
A mean over all items hides which problems RL moved: on the testbed nearly all of it is in the 2-number
third (docs/testbed.md).

Run:
    python -m lab.testbed_breakdown                                   # every seed and model under out/compare
    python -m lab.testbed_breakdown --root out/compare/sft-316deacc --models sft,rl-c8493677
"""
import argparse
import glob
import os
from collections import defaultdict

from lab.compare import DONE, read_eval_records
from ops.checks import require, upfront


def accuracy_by_count(records):
    """{number count: (accuracy %, items)} of one eval's records (countdown_toy: example["nums"])."""
    hits = defaultdict(lambda: [0, 0])  # count -> [correct, items]
    for r in records:
        h = hits[len(r["example"]["nums"])]
        h[0] += bool(r["correct"])
        h[1] += 1
    return {n: (100 * c / k, k) for n, (c, k) in sorted(hits.items())}


def breakdown(root, wanted):
    """[(seed dir relative to root, model name, accuracy_by_count)] for every finished eval under root
    whose model is in `wanted` (all if empty)."""
    rows = []
    for d in sorted(glob.glob(os.path.join(root, "**", "*_eval-*", ""), recursive=True)):
        d = d.rstrip(os.sep)
        model = os.path.basename(d).split("_eval-")[0]
        # only evals lab.compare finished (its DONE marker): one still running is not a result yet
        if os.path.exists(os.path.join(d, DONE)) and (not wanted or model in wanted):
            rows.append((os.path.relpath(os.path.dirname(d), root), model, accuracy_by_count(read_eval_records(d))))
    require(rows, f"no finished eval of the testbed under {root}")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description="testbed accuracy by problem size, per cached eval")
    parser.add_argument("--root", type=str, default="out/compare", help="a lab.compare --out, or one sft-<hash> in it")
    parser.add_argument("--models", type=str, default="", help="comma list of model names (sft, rl-<hash>); "
                        "default all")
    args = parser.parse_args(argv)
    with upfront("lab.testbed_breakdown"):  # no evals, or an unfinished one: one line, exit 2
        rows = breakdown(args.root, set(filter(None, args.models.split(","))))
    counts = sorted({n for _, _, acc in rows for n in acc})
    print(f"{'run':<28} {'model':<14} " + " ".join(f"{f'{n} nums %':>10}" for n in counts))
    for where, model, acc in rows:
        print(f"{where:<28} {model:<14} " + " ".join(f"{acc[n][0]:>10.1f}" if n in acc else f"{'-':>10}"
                                                      for n in counts))
    print("items per count: " + ", ".join(f"{n}: {rows[0][2][n][1]}" for n in counts if n in rows[0][2]))


if __name__ == "__main__":
    main()
