"""
d1's ablations in miniature: the table and the learning curves of lab/runs/ablations.sh.

Reads <root>/<variant>/seed*/metrics.jsonl (grpo.py --eval-every --test-curve's heldout_acc) and reports,
per variant: the final held-out accuracy per seed, its mean with a 95 % t-interval, the gain over the
`default` variant paired by seed with its interval, and the training seconds. The mean curves (against
round and wall-clock) go to <root>/curves.json and, with matplotlib, to a picture.

Run:  python -m lab.study_ablations out/ablate [--png docs/ablations.png]
"""
import argparse
import glob
import json
import os

from ops.stats import mean_and_spread
from ops.metrics import read_metrics

BASELINE = "default"


def load_runs(root):
    """{variant: {seed: [(round, heldout_acc, elapsed_s)]}} from <root>/<variant>/seed<s>/metrics.jsonl."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(root, "*", "seed*", "metrics.jsonl"))):
        variant, seed = path.split(os.sep)[-3], int(path.split(os.sep)[-2][len("seed"):])
        curve = [(r["step"], r["heldout_acc"], r.get("elapsed_s", 0.0)) for r in read_metrics(path)
                 if "heldout_acc" in r]
        if curve:
            runs.setdefault(variant, {})[seed] = curve
    # the baseline first, then the variants by name
    return dict(sorted(runs.items(), key=lambda kv: (kv[0] != BASELINE, kv[0])))


def summarize(runs):
    """{variant: {final: {seed: acc}, mean, ci, gain, gain_ci, seconds}}; the gain is paired with the
    baseline by seed, over the seeds both have."""
    base = {s: c[-1][1] for s, c in runs.get(BASELINE, {}).items()}
    table = {}
    for variant, seeds in runs.items():
        final = {s: c[-1][1] for s, c in sorted(seeds.items())}
        mean, _, ci = mean_and_spread(list(final.values()))
        paired = [final[s] - base[s] for s in final if s in base]
        gain, _, gain_ci = mean_and_spread(paired) if paired and variant != BASELINE else (None, None, None)
        table[variant] = {"final": final, "mean": mean, "ci": ci, "gain": gain, "gain_ci": gain_ci,
                          "seconds": sum(c[-1][2] for c in seeds.values()) / len(seeds)}
    return table


def mean_curves(runs):
    """{variant: [(round, mean acc, mean elapsed_s)]} over the seeds, at the rounds every seed logged."""
    curves = {}
    for variant, seeds in runs.items():
        rounds = sorted(set.intersection(*(set(r for r, _, _ in c) for c in seeds.values())))
        pts = []
        for rnd in rounds:
            at = [next(p for p in c if p[0] == rnd) for c in seeds.values()]
            pts.append((rnd, sum(p[1] for p in at) / len(at), sum(p[2] for p in at) / len(at)))
        curves[variant] = pts
    return curves


def table_markdown(table):
    lines = ["| variant | held-out accuracy per seed | mean ± 95 % CI | gain over default (paired) | train s |",
             "|---|---|---|---|---|"]
    ci = lambda m, h: f"{m:.1f} ± {h:.1f}" if h == h else f"{m:.1f}"  # h != h: NaN, a single seed
    for variant, r in table.items():
        gain = "—" if r["gain"] is None else ci(r["gain"], r["gain_ci"])
        lines.append(f"| {variant} | {' / '.join(f'{v:.1f}' for v in r['final'].values())} "
                     f"| {ci(r['mean'], r['ci'])} | {gain} | {r['seconds']:.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="table and curves of lab/runs/ablations.sh")
    parser.add_argument("root", nargs="?", default="out/ablate", help="lab/runs/ablations.sh's output folder")
    parser.add_argument("--png", type=str, default="", help="draw the curves here (needs matplotlib)")
    args = parser.parse_args()
    runs = load_runs(args.root)
    if not runs:
        raise SystemExit(f"no <variant>/seed*/metrics.jsonl with heldout_acc under {args.root}: run lab/runs/ablations.sh")
    table, curves = summarize(runs), mean_curves(runs)
    with open(os.path.join(args.root, "curves.json"), "w") as f:
        json.dump({"table": table, "curves": curves}, f, indent=1)
    print(table_markdown(table))
    if args.png:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise SystemExit("--png needs matplotlib, an optional dependency: pip install matplotlib")
        fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for variant, pts in curves.items():
            style = dict(lw=2.5, color="black") if variant == BASELINE else dict(lw=1.2)
            a.plot([p[0] for p in pts], [p[1] for p in pts], label=variant, **style)
            b.plot([p[2] for p in pts], [p[1] for p in pts], label=variant, **style)
        a.set(xlabel="round", ylabel="held-out accuracy (%), mean over seeds")
        b.set(xlabel="training seconds (2 CPU cores, one run per core)")
        a.legend(fontsize=8)
        fig.tight_layout()
        os.makedirs(os.path.dirname(args.png) or ".", exist_ok=True)
        fig.savefig(args.png, dpi=110)
        print(f"wrote {args.png}")
