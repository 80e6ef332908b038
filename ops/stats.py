"""
The statistics d1 left out: d1 reports one greedy run per setting, with no interval. These say how
much of a difference between two numbers is noise.

  - mean_and_spread: mean, std and 95% t-interval over a few seeds (eval.py --seeds N at
    temperature > 0; lab/study_ablations.py over training seeds);
  - compare: the paired bootstrap CI of accuracy(B) - accuracy(A) over the same items
    (`python eval.py --compare A B`, two result directories of eval.py);
  - summarize: the CPU pipeline's table, SFT vs SFT + diffu-GRPO per seed with mean, std and CI
    (`python eval.py --summarize out/toy`, which `make run` prints at its end).

Pure Python over eval.py's result files (ops/results.py): no model, no GPU. The task registry
(tasks.TASKS) comes in as an argument.
"""
import glob
import json
import math
import os
import random
import statistics

from ops.results import load_results, read_manifest


def mean_and_spread(values):
    """Mean, sample std and the 95% t-interval half-width of a short list of per-seed numbers."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0, float("nan")
    # sample std (n - 1): the seeds are a sample of the sampling noise
    sd = statistics.stdev(values)
    # Student t 97.5 % quantiles by sample count n (n - 1 degrees of freedom), 3 decimals; beyond 10
    # seeds 1.96 + 2.4 / n is within 3% of the exact value and tends to the normal 1.96
    t975 = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306,
            10: 2.262}.get(n, 1.96 + 2.4 / n)
    # half-width of the 95% interval of the MEAN over seeds (the standard error times t)
    return mean, sd, t975 * sd / math.sqrt(n)


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
    # n_boot resamples of the n items with replacement; each resample's mean difference, sorted
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(n_boot))
    # percentile bootstrap: the 2.5% and 97.5% quantiles of those means bound the interval
    return sum(diffs) / n, means[int(0.025 * n_boot)], means[int(0.975 * n_boot) - 1]


# settings that must agree for two result directories to be comparable item by item. The sampler's
# cache / threshold are deliberately not here: comparing the exact sampler with a cached one on the
# same items is exactly how their accuracy cost is measured (the difference is printed as a note)
MUST_MATCH = ("task", "data_sha256", "toy_blanks", "item_ids", "gen_length", "block_length", "steps",
              "temperature", "remasking", "parser_version")


def compare(dir_a, dir_b, registry, force=False):
    """Paired bootstrap CI of accuracy(B) - accuracy(A) over the items both evaluated."""
    mans = [read_manifest(d) for d in (dir_a, dir_b)]
    bad = [k for k in MUST_MATCH if mans[0].get(k) != mans[1].get(k)]
    if bad:
        msg = f"manifests differ in {bad}: the two runs are not the same evaluation"
        if not force:
            raise SystemExit(f"refusing to compare: {msg} (--force to compare anyway)")
        print(f"WARNING: {msg}")
    # settings that may differ without breaking the pairing (dtype, batch size, cache, seed, ...) are
    # only noted; the model and the timing are expected to differ
    other = [k for k in mans[0] if k not in MUST_MATCH and mans[0].get(k) != mans[1].get(k)
             and k not in ("model_dir", "model_spec", "model_revision", "model_fingerprint", "provenance", "time",
                           "wall_seconds", "out_dir")]
    if other:
        print(f"note: the runs also differ in {other}")
    task = mans[0]["task"]
    (ra,), (rb,) = load_results([dir_a], registry).values(), load_results([dir_b], registry).values()
    sa, sb = item_scores(ra, registry[task].cells), item_scores(rb, registry[task].cells)  # one group each
    # pair by item id: the same question scored by both models
    common = sorted(set(sa) & set(sb))  # equal item ids are guaranteed unless --force
    diff, lo, hi = paired_bootstrap([sa[i] for i in common], [sb[i] for i in common])
    print(f"{task} {mans[0]['gen_length']}: A {100 * sum(sa[i] for i in common) / len(common):.1f}%  "
          f"B {100 * sum(sb[i] for i in common) / len(common):.1f}%  B - A {100 * diff:+.1f} pts, "
          f"95% paired-bootstrap CI [{100 * lo:+.1f}, {100 * hi:+.1f}] over {len(common)} items")
    return diff, lo, hi


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
