"""
One command to compare two variants A and B of the RL round over training seeds, paired by seed. A
variant is a string of `python -m methods.grpo` flags put LAST on its command line (so they win over
--grpo-flags); `--rounds 0` is SFT alone (the SFT model itself is evaluated).

Per seed s: the tiny init model and its SFT run (cached, shared with every comparison of the same recipe),
the RL round once per variant from it, eval.py on both over the same items. The answer: d_s = acc(B) -
acc(A) per seed and the 95% t-interval of its mean (the SFT model's luck cancels in the difference).
Every step is cached in a directory named by a hash of its recipe, done once it holds its product and the
DONE marker; an unfinished trainer step continues (`--resume auto`, bit for bit), any other reruns:
    <out>/sft-<init+SFT hash>/seed<s>/{init, sft, rl-<hash>, <model>_eval-<hash>, <step>.log}
    <out>/<A hash>_vs_<B hash>.json                the summary (or --json PATH)

Run:
    python -m lab.compare --a "--rounds 0" --b "" --seeds 0,1,2,3,4          # SFT vs SFT + diffu-GRPO
    python -m lab.compare --a "--objective diffu_grpo" --b "--objective wd1" --seeds 0,1,2,3,4 --jobs 2
    python -m lab.compare --recipe toy --a "" --b "--rollout-cache dual" --seeds 0,1,2,3,4   # on make run's toy
"""
import argparse
import glob
import hashlib
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import methods.grpo
import tasks
from ops.results import MANIFEST, load_results
from ops.stats import mean_and_spread
from ops.checks import require, upfront
from ops.metrics import METRICS_FILE, read_metrics
from ops import trainers

# the recipes, picked by --recipe: the testbed (docs/testbed.md) and `make run`'s toy (lab/runs/toy.sh, every
# script at its defaults); each flag string is overridable by the flag of the same name
RECIPES = {
    "testbed": {"init": "--tags",
                "sft": "--task countdown_toy --num-examples 4000 --max-length 96 --max-steps 5000 --eval-every 1000",
                "grpo": "--preset testbed", "eval": "--task countdown_toy --toy-items 500"},
    "toy": {"init": "", "sft": "", "grpo": "", "eval": "--task toy"},
}
DONE = "COMPARE_DONE"  # written into a step's directory once its command succeeded
RESUME = ["--resume", "auto"]  # on the trainers' commands: continue an unfinished run, else start it
STRING_FLAGS = ("--a", "--b", "--init-flags", "--sft-flags", "--grpo-flags", "--eval-flags")


def key(*parts):
    """8 hex digits naming a recipe, hashed as token lists (spacing and quoting do not matter); a preset's
    value that follows the canvas (methods/common.one_token_a_step) by its name, one that follows the world
    size (ops/trainers.per_rank) by its one-process value, as the keys were before it followed."""
    return hashlib.sha256(json.dumps(parts, default=_preset_token).encode()).hexdigest()[:8]


def _preset_token(value):
    """key()'s JSON of a preset value that is not plain data."""
    if isinstance(value, trainers.FollowWorld):
        return value.at(1)
    return value.__name__


def sft_alone(grpo_flags):
    """True when the trainer's final flags say --rounds 0 (argparse: the last --rounds wins): nothing to train."""
    rounds = None
    for i, tok in enumerate(grpo_flags):
        if tok == "--rounds" and i + 1 < len(grpo_flags):
            rounds = grpo_flags[i + 1]
        elif tok.startswith("--rounds="):
            rounds = tok.split("=", 1)[1]
    try:
        return rounds is not None and int(rounds) == 0
    except ValueError:
        return False  # not a number: the trainer will say so


def seed_plan(seed, root, flags, variants):
    """One seed's steps in run order, [(label, out dir, product file, argv)], and each variant's eval dir."""
    py, s = sys.executable, str(seed)
    sft_key = key(flags["init"], flags["sft"])
    sd = os.path.join(root, f"sft-{sft_key}", f"seed{seed}")
    init, sft = os.path.join(sd, "init"), os.path.join(sd, "sft")
    steps = [("init", init, "config.json", [py, "-m", "modelio.checkpoint", "--out-dir", init, "--seed", s,
                                            *flags["init"]]),
             ("sft", sft, "config.json", [py, "sft.py", "--model-dir", init, "--out-dir", sft, "--seed", s,
                                          *RESUME, *flags["sft"]])]
    evals = []
    for name, v in zip("AB", variants):
        model = sft
        if not sft_alone(flags["grpo"] + v):
            # the presets in the key: a preset's values can change while its name does not
            model = os.path.join(sd, f"rl-{key(sft_key, flags['grpo'], v, methods.grpo.PRESETS)}")
            steps.append((f"grpo {name}", model, "config.json", [py, "-m", "methods.grpo", "--model-dir", sft,
                                                                 "--out-dir", model, "--seed", s, *RESUME,
                                                                 *flags["grpo"], *v]))
        ev = f"{model}_eval-{key(flags['eval'])}"  # keyed by the model's dir (its name) and the eval flags
        if ev not in evals:  # both variants SFT alone: one model, evaluated once
            steps.append((f"eval {name}", ev, "eval.json", [py, "eval.py", "--model-dir", model, "--out-dir", ev,
                                                            "--json", os.path.join(ev, "eval.json"), *flags["eval"]]))
        evals.append(ev)
    return steps, evals


def is_done(out_dir, product):
    return os.path.exists(os.path.join(out_dir, DONE)) and os.path.exists(os.path.join(out_dir, product))


def run_step(cmd, out_dir, product, env=None):
    """Run one cached step; its output goes to <out_dir>.log. -> True if it was cached. A failure raises
    RuntimeError naming the command, with the log's tail."""
    if is_done(out_dir, product):
        return True
    resumes = RESUME[0] in cmd  # a trainer: its own --resume auto decides from its saves what to keep
    if not resumes:
        shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(os.path.dirname(out_dir) or ".", exist_ok=True)
    log = out_dir + ".log"
    with open(log, "a" if resumes else "w") as f:  # a resumed run's log follows its earlier part
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    if rc != 0 or not os.path.exists(os.path.join(out_dir, product)):
        with open(log) as f:
            tail = "".join(f.readlines()[-20:])
        raise RuntimeError(f"failed (exit {rc}): {shlex.join(cmd)}\n--- last lines of {log} ---\n{tail}")
    open(os.path.join(out_dir, DONE), "w").close()
    return False


def run_seed(seed, steps, env, stop):
    """A seed's steps one after another, a line per finished step; stops early once another seed failed."""
    for label, out_dir, product, cmd in steps:
        if stop.is_set():
            return
        t0 = time.time()
        try:
            cached = run_step(cmd, out_dir, product, env)
        except RuntimeError as e:
            stop.set()
            raise RuntimeError(f"seed {seed} {label} {e}") from None
        print(f"seed {seed}: {label} {'cached' if cached else f'done in {time.time() - t0:.0f}s'} -> {out_dir}",
              flush=True)


def read_eval_records(eval_dir):
    """The scored records of one eval.py --out-dir, read by ops/results.py (an unfinished run is refused)."""
    dirs = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(eval_dir, "*", MANIFEST)))
    require(len(dirs) == 1, f"{eval_dir}: expected one result dir (one gen length), found {len(dirs)}")
    (recs,) = load_results(dirs, tasks.TASKS).values()
    return recs


def read_eval(eval_dir):
    """(accuracy %, {item id: correct}) of one eval.py --out-dir."""
    correct = {r["id"]: bool(r["correct"]) for r in read_eval_records(eval_dir)}
    return 100 * sum(correct.values()) / len(correct), correct


def binomial_se(acc, n_items):
    """Sampling standard error of one accuracy (%) measured on n_items items, in points."""
    p = acc / 100
    return 100 * math.sqrt(p * (1 - p) / n_items)


def paired_summary(acc_a, acc_b):
    """Per-seed accuracies (%) of A and B, in the same seed order -> the paired differences B - A, their
    mean and its 95% t-interval over seeds (None with one seed), and each side's mean."""
    require(len(acc_a) == len(acc_b) >= 1, f"need as many A as B accuracies, got {len(acc_a)} and {len(acc_b)}")
    diffs = [b - a for a, b in zip(acc_a, acc_b)]
    mean, sd, half = mean_and_spread(diffs)  # ops/stats.py: t quantile with n - 1 degrees of freedom
    ci = [mean - half, mean + half] if len(diffs) > 1 else None
    return {"n": len(diffs), "diffs": diffs, "mean": mean, "sd": sd, "ci": ci,
            "mean_a": sum(acc_a) / len(acc_a), "mean_b": sum(acc_b) / len(acc_b)}


def update_stats(eval_dirs):
    """What the updates of one variant did over every round of its seeds' RL runs (metrics.jsonl): the ratio,
    the clip, the gradient norms, the rollouts' spread and cost. None for SFT alone (no run)."""
    runs = [ev.rsplit("_eval-", 1)[0] for ev in eval_dirs]
    runs = [d for d in runs if os.path.exists(os.path.join(d, METRICS_FILE))]
    rows = [r for d in runs for r in read_metrics(d) if "s_rollout" in r]  # the RL rounds (sft.py's: no rollout)
    if not rows:
        return None
    out = {"rounds": len(rows)}
    for k in ("ratio_dev", "grad_norm", "clip_frac"):  # medians: one exploding round must not hide the rest
        v = sorted(r[k] for r in rows if k in r)  # a ratio-free objective (wd1, SPG) logs no ratio: NaN
        out.update({f"{k}_median": v[len(v) // 2] if v else math.nan, f"{k}_max": v[-1] if v else math.nan})
    out["ratio_mean_max"] = max((r["ratio_mean"] for r in rows if "ratio_mean" in r), default=math.nan)
    mean = lambda k: sum(r[k] for r in rows if k in r) / max(1, sum(k in r for r in rows))
    # what the rollouts were; older runs' metrics lack the newer keys, which read as NaN
    for k in ("zero_std_groups", "reward_std", "distinct", "completion_len", "rollout_calls", "s_rollout"):
        out[k] = mean(k) if any(k in r for r in rows) else float("nan")
    # seconds per run, rewards and logging included, the held-out curve not
    out["train_s"] = sum(read_metrics(d)[-1].get("elapsed_s", math.nan) for d in runs) / len(runs)
    return out


def stats_line(name, st):
    """One line per variant; each figure is over rounds (a round's value is its mean over tokens)."""
    return (f"{name} updates ({st['rounds']} rounds, median / max): |ratio - 1| {st['ratio_dev_median']:.3f} / "
            f"{st['ratio_dev_max']:.3f}, clipped tokens {100 * st['clip_frac_median']:.2f} / "
            f"{100 * st['clip_frac_max']:.2f} %, grad norm {st['grad_norm_median']:.2f} / {st['grad_norm_max']:.1f}; "
            f"largest mean ratio {st['ratio_mean_max']:.2f}\n"
            f"{name} rollouts (means over rounds): zero-spread groups {100 * st['zero_std_groups']:.0f} %, reward "
            f"std {st['reward_std']:.3f}, distinct {100 * st['distinct']:.0f} %, length {st['completion_len']:.1f}, "
            f"model calls {st['rollout_calls']:.1f}; "
            f"{st['s_rollout']:.2f} s a rollout, {st['train_s']:.0f} s a run")


def summary_line(s):
    ci = f"[{s['ci'][0]:+.1f}, {s['ci'][1]:+.1f}]" if s["ci"] else "n/a"
    return (f"B - A = {s['mean']:+.1f} points, 95% CI {ci} (t, n = {s['n']} seed{'s' * (s['n'] > 1)}); "
            f"A {s['mean_a']:.1f} %, B {s['mean_b']:.1f} %")


def main(argv=None):
    parser = argparse.ArgumentParser(description="compare two RL variants (python -m methods.grpo) over seeds, "
                                     "paired by seed")
    parser.add_argument("--a", type=str, default="--rounds 0", help="variant A: python -m methods.grpo flags "
                        "(--rounds 0 = SFT alone)")
    parser.add_argument("--b", type=str, default="", help="variant B: python -m methods.grpo flags, added after "
                        "--grpo-flags")
    parser.add_argument("--seeds", type=str, default="0,1,2", help="comma list of training seeds")
    parser.add_argument("--jobs", type=int, default=2, help="seeds run in parallel, single-threaded each if > 1")
    parser.add_argument("--out", type=str, default="out/compare", help="root of the cached runs and the summary")
    parser.add_argument("--json", type=str, default="", help="summary path (default <out>/<A hash>_vs_<B hash>.json)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands in order, run nothing")
    parser.add_argument("--recipe", type=str, default="testbed", choices=sorted(RECIPES), help="the four flag "
                        "strings below: the testbed's (docs/testbed.md) or make run's toy (lab/runs/toy.sh)")
    parser.add_argument("--init-flags", type=str, help="python -m modelio.checkpoint flags (default: the recipe's)")
    parser.add_argument("--sft-flags", type=str, help="sft.py flags (default: the recipe's)")
    parser.add_argument("--grpo-flags", type=str, help="python -m methods.grpo flags of both variants (default: "
                        "the recipe's)")
    parser.add_argument("--eval-flags", type=str, help="eval.py flags, the task and the same items for all "
                        "(default: the recipe's)")
    argv = list(sys.argv[1:] if argv is None else argv)
    # argparse takes a value that starts with "-" and holds no space ("--b --beta=0") for a flag of its own;
    # these strings are always values, so each is glued to its flag first ("--b=--beta=0")
    for i in range(len(argv) - 1):
        if argv[i] in STRING_FLAGS:
            argv[i:i + 2] = [f"{argv[i]}={argv[i + 1]}", None]
    args = parser.parse_args([t for t in argv if t is not None])
    for name, value in RECIPES[args.recipe].items():  # a flag string not given: the recipe's
        if getattr(args, f"{name}_flags") is None:
            setattr(args, f"{name}_flags", value)

    with upfront("lab.compare"):  # bad input: one line, exit 2, before anything runs
        try:
            seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"--seeds must be a comma list of integers, got {args.seeds!r}") from None
        require(seeds, "--seeds is empty")
        require(len(set(seeds)) == len(seeds), f"--seeds repeats a seed: {args.seeds!r}")
        require(args.jobs >= 1, f"--jobs must be >= 1, got {args.jobs}")
        flags = {}
        for name in ("a", "b", "init_flags", "sft_flags", "grpo_flags", "eval_flags"):
            try:
                flags[name.removesuffix("_flags")] = shlex.split(getattr(args, name))
            except ValueError as e:
                raise ValueError(f"--{name.replace('_', '-')}: {e}") from None
        require(flags["a"] != flags["b"], f"--a and --b are the same variant ({args.a!r}): nothing to compare")
    variants = (flags["a"], flags["b"])
    plans = {s: seed_plan(s, args.out, flags, variants) for s in seeds}

    if args.dry_run:
        for s in seeds:
            for _, out_dir, product, cmd in plans[s][0]:
                print(("# cached: " if is_done(out_dir, product) else "") + shlex.join(cmd))
        return

    # 2 cores: parallel seeds are faster than one after another only if each child keeps to one thread
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_MININTERVAL": "5",
           **({"OMP_NUM_THREADS": "1"} if args.jobs > 1 else {})}
    stop = threading.Event()  # the first failure: the other seeds start no new step
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_seed, s, plans[s][0], env, stop) for s in seeds]
    errors = [f.exception() for f in futures if f.exception()]
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        raise SystemExit(1)

    accs, ses = {"A": [], "B": []}, []
    print(f"\n{'seed':>6} {'A (%)':>7} {'B (%)':>7} {'B - A':>7}")
    for s in seeds:
        with upfront("lab.compare"):  # a result dir that is not what its manifest says: one line
            (acc_a, items_a), (acc_b, items_b) = (read_eval(ev) for ev in plans[s][1])
            require(items_a.keys() == items_b.keys(), f"seed {s}: A and B were evaluated on different items")
        accs["A"].append(acc_a)
        accs["B"].append(acc_b)
        ses += [binomial_se(acc_a, len(items_a)), binomial_se(acc_b, len(items_b))]
        print(f"{s:>6} {acc_a:>7.1f} {acc_b:>7.1f} {acc_b - acc_a:>+7.1f}")
    summary, se = paired_summary(accs["A"], accs["B"]), sum(ses) / len(ses)
    updates = {name: update_stats([plans[s][1][i] for s in seeds]) for i, name in enumerate("AB")}
    sft_key = key(flags["init"], flags["sft"])
    path = args.json or os.path.join(args.out, f"{key(sft_key, flags['grpo'], flags['a'])}_vs_"
                                               f"{key(sft_key, flags['grpo'], flags['b'])}.json")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump({"a": args.a, "b": args.b, "seeds": seeds, "acc_a": accs["A"], "acc_b": accs["B"], **summary,
                   "sampling_se": se, "updates": updates, "init_flags": args.init_flags, "sft_flags": args.sft_flags,
                   "grpo_flags": args.grpo_flags, "eval_flags": args.eval_flags}, f, indent=2)
    print(f"summary -> {path}")
    for name, st in updates.items():  # the knobs' footprint: does the variant's change act at all?
        if st:
            print(stats_line(name, st))
    # the noise of ONE eval on this many items, to hold against the effect (a seed's B - A: at most sqrt(2) x)
    print(f"sampling SE of one eval (binomial, {len(items_a)} items): {se:.1f} points (mean over {len(ses)} evals)")
    print(summary_line(summary))  # the last line: the answer


if __name__ == "__main__":
    main()
