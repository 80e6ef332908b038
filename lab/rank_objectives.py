"""
lab/rank_objectives.py: the objectives ranked on `make run`'s toy, where RL has a large, repeatable signal
(docs/objectives.md, "Ranked on the toy"). From the same SFT checkpoints (lab/compare.py's cache, one per
seed), each objective runs `python -m methods.grpo` for every seed with the SAME rollout budget, at its own
paper's loss settings where the toy allows (OBJECTIVES), is evaluated with d1's greedy protocol on the toy's
held-out puzzles, and is compared with diffu-GRPO paired by seed: the mean of the per-seed differences and
its 95 % t-interval. The table (printed, and --json): held-out accuracy, the paired difference, SFT alone,
rounds and completions used, seconds per round. Every run is lab.compare's, cached by its recipe: a second
call reads the finished runs back, a stopped one continues (--resume auto).

    python -m lab.rank_objectives                        # 5 seeds, every objective (about 2.7 hours on 2 cores)
    python -m lab.rank_objectives --seeds 0,1 --objectives wd1,spg --dry-run
"""
import argparse
import json
import math
import os

import grpo
from lab import compare
from ops.checks import require, upfront

# each objective on the toy (docs/objectives.md, "Ranked on the toy"): its paper's loss settings where the toy
# allows; every other flag is the toy preset's (lr 1e-4, 30 rounds of 16 prompts x G 6, canvas 16, 8 steps,
# temperature 1, no KL), the same rollout budget for all. Where the paper differs and the toy keeps its own:
# SPG's temperature 0.9 and ESPO's 256 steps (the toy samples 16 tokens in 8), every paper's learning rate
# (3e-6 .. 5e-6 at 8B; the toy's 1e-4 for all), JustGRPO's 64 x 16 rollouts (the budget is the toy's)
OBJECTIVES = {
    "diffu_grpo": "",  # d1: one-step estimate, ε 0.5, μ 2 (the toy preset), p_mask 0.15
    "wd1": "--objective wd1",  # ratio-free, no clip, no KL: d1's estimator and μ
    "justgrpo": "--objective justgrpo --block-length 1 --diffusion-steps 16 --epsilon 0.2 --scale-std "
                "--num-iterations 1 --adam-beta2 0.999",  # AR rollouts, exact likelihood, ε 0.2, μ 1, std-scaled A
    "spg": "--objective spg --num-iterations 4 --spg-draws 2 --spg-beta 1.5 --spg-omega 0.5",  # μ 4, m 2, β 1.5, ω .5
    "espo": "--objective espo --epsilon 0.2 --beta 1e-3 --num-iterations 8 --espo-draws 2 --p-mask 0",  # μ 8, M 2
    "trajectory": "--objective trajectory --trajectory-segments 8 --p-mask 0",  # d2 StepMerge: one segment a step
    "gdsd": "--objective gdsd --num-iterations 8 --gdsd-draws 2 --gdsd-psi 10 --beta 1e-3 --epsilon 4e-4 --p-mask 0",
}
BASELINE = "diffu_grpo"


def budget():
    """(rounds, completions) of the toy preset: every objective gets the same."""
    t = grpo.PRESETS["tiny"]
    return t["rounds"], t["rounds"] * t["prompts_per_step"] * t["num_generations"]


def compare_args(name, seeds, jobs, out, dry_run):
    """lab.compare's command line for `name` against diffu-GRPO (SFT alone against diffu-GRPO for "sft")."""
    b = "--rounds 0" if name == "sft" else OBJECTIVES[name]
    return ["--recipe", "toy", "--a", OBJECTIVES[BASELINE], "--b", b, "--seeds", seeds, "--jobs", str(jobs),
            "--out", out, "--json", summary_path(out, name)] + (["--dry-run"] if dry_run else [])


def summary_path(out, name):
    return os.path.join(out, f"rank_{name}.json")


def row(name, s):
    """One table row from lab.compare's summary s (A = diffu-GRPO, B = the objective)."""
    rounds, completions = budget()
    up, base = s["updates"]["B"], s["updates"]["A"]
    ci = s["ci"] or [math.nan, math.nan]
    per_round = lambda u: u["train_s"] / u["rounds"] * len(s["seeds"]) if u else math.nan  # a run's s / its rounds
    return {"objective": name, "acc": s["mean_b"], "acc_seeds": s["acc_b"], "baseline": s["mean_a"], "diff": s["mean"],
            "ci": ci, "baseline_s_per_round": per_round(base),
            "rounds": rounds if up else 0, "completions": completions if up else 0, "s_per_round": per_round(up)}


def table(rows, baseline_acc):
    """The markdown table."""
    fmt = lambda x: "–" if math.isnan(x) else f"{x:.1f}"
    lines = [f"| objective | held-out accuracy % (mean over seeds) | − diffu-GRPO, points (95 % CI) | rounds | "
             f"completions | s / round |", "|---|---|---|---|---|---|",
             f"| diffu_grpo | {baseline_acc:.1f} | 0 | {budget()[0]} | {budget()[1]} | "
             f"{fmt(rows[0]['baseline_s_per_round'])} |"]
    for r in rows:
        per = fmt(r["s_per_round"])
        lines.append(f"| {r['objective']} | {r['acc']:.1f} | {r['diff']:+.1f} [{r['ci'][0]:+.1f}, {r['ci'][1]:+.1f}] "
                     f"| {r['rounds']} | {r['completions']} | {per} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description="the objectives ranked on the toy against diffu-GRPO, paired by seed")
    p.add_argument("--seeds", type=str, default="0,1,2,3,4", help="training seeds (at least 5 for the table)")
    p.add_argument("--objectives", type=str, default=",".join(n for n in OBJECTIVES if n != BASELINE),
                   help=f"comma list of {', '.join(n for n in OBJECTIVES if n != BASELINE)}")
    p.add_argument("--jobs", type=int, default=2, help="seeds in parallel (lab.compare)")
    p.add_argument("--out", type=str, default="out/rank", help="lab.compare's cache for the ranking (shared SFT models)")
    p.add_argument("--json", type=str, default="out/rank/rank_objectives.json", help="the table's rows")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.objectives.split(",") if n.strip()]
    with upfront("lab.rank_objectives"):
        for n in names:
            require(n in OBJECTIVES and n != BASELINE, f"--objectives: unknown {n!r}; one of "
                    f"{', '.join(o for o in OBJECTIVES if o != BASELINE)}")
    rows = []
    for name in ["sft", *names]:  # SFT alone first: its runs are the cheapest and every comparison needs them
        print(f"== {name}", flush=True)
        compare.main(compare_args(name, args.seeds, args.jobs, args.out, args.dry_run))
        if not args.dry_run:
            with open(summary_path(args.out, name)) as f:
                rows.append(row(name, json.load(f)))
    if args.dry_run:
        return
    baseline = rows[0]["baseline"]  # A's mean: the same diffu-GRPO runs in every summary
    text = table(rows, baseline)
    print("\n" + text)
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"seeds": args.seeds, "diffu_grpo_acc": baseline, "rows": rows, "table": text}, f, indent=2)
    print(f"rows -> {args.json}")


if __name__ == "__main__":
    main()
