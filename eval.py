"""
Evaluation: d1's protocol (d1-spec §8), the files to check it, and the statistics d1 left out.

d1 evaluates zero-shot and greedy: the eval prompt (tasks.eval_message, NOT the RL prompt) is
rendered with the chat template and prefilled with "<reasoning>", prompts are left-padded in
batches, and the sampler runs with block 32, steps = gen_length / 2 (two tokens per step),
low-confidence remasking, at gen lengths 128 / 256 / 512. Countdown and Sudoku use d1's fixed
256-item subsets (numpy seed 42). Answers are read by d1's "generous" parsers (parsers.score_eval):
first \\boxed{} for GSM8K, last for MATH and Countdown, Sudoku scored per empty cell and
micro-averaged over all puzzles.

What this file adds:
  - one JSONL line per item (prompt, generation, parsed answer, score) per rank, and a manifest
    with every setting (model and data checksums, items, sampler, seed, dtype, device, parser);
  - --rescore: re-score saved generations, ours or d1's released JSON files, without a model;
    on d1's files this reproduces the paper's LLaDA-8B-Instruct row;
  - the Sudoku puzzle solve rate beside d1's cell score;
  - --seeds N: N sampling seeds at temperature > 0, mean and 95% CI;
  - --compare A B: paired bootstrap CI of the accuracy difference over the same items.

Run:
    python eval.py                                               # toy task on the tiny model, CPU
    torchrun --nproc_per_node=8 eval.py --model-dir out/grpo-gsm8k --task gsm8k \\
        --data gsm8k/test.jsonl --gen-lengths 128,256,512 --out-dir out/eval/grpo-gsm8k
    python eval.py --rescore ../shared/data/d1_eval_baselines/*.json
    python eval.py --compare out/eval/a/gsm8k_256 out/eval/b/gsm8k_256
"""
import argparse
import glob
import hashlib
import json
import math
import os
import random
import re
import statistics
import time

import torch
from tqdm import tqdm

import parsers
import puzzles
import tasks
from checkpoint import TINY_DIR, load
from ddp import compute_init, default_dtype
from sample import CACHE_MODES, generate
from tokenizer import prompt_ids

# -----------------------------------------------------------------------------
# items and prompts


def toy_test_set(n=200, data_seed=0, seed=12345, blanks=(2, 5)):
    """Held-out toy puzzles: from the test GRIDS of the split sft.py and grpo.py train on, so a
    test puzzle's solution grid was never seen in training (measures generalisation)."""
    # the same split as sft.py and grpo.py (their --data-seed), the half they never draw from
    _, test_grids = puzzles.split_grids(seed=data_seed)
    return puzzles.make_toy(test_grids, n, seed=seed, min_blanks=blanks[0], max_blanks=blanks[1])


def pbe_test_set(n=200, data_seed=0, seed=12345):
    """Held-out items of the code toy: functions of the held-out semantic classes of the split sft.py
    and grpo.py train on (--data-seed), so no held-out function was ever seen in training."""
    import pbe
    _, test_classes = pbe.split_classes(seed=data_seed)
    return pbe.make_pbe(test_classes, n, seed=seed)


def toy_curve_sets(n=200, data_seed=0):
    """The two item sets of grpo.py --eval-every: {"heldout_acc": eval.py's held-out toy items,
    "seen_grid_acc": n new puzzles of the TRAINING grids}. 4x4 Sudoku has only 288 solution grids,
    so a model can score on the second set by recalling grids it trained on, not by the rule."""
    train_grids, _ = puzzles.split_grids(seed=data_seed)
    return {"heldout_acc": list(enumerate(toy_test_set(n, data_seed))),
            "seen_grid_acc": list(enumerate(puzzles.make_toy(train_grids, n, seed=54_321)))}


def toy_accuracies(model, tokenizer, sets):
    """{name: accuracy %} for toy item sets, with eval.py's toy protocol: greedy, the 16-token
    canvas as one block, 8 steps (gen / 2), batches of 100."""
    return {name: accuracy("toy", run_items(model, tokenizer, "toy", items, 16, 16, 8, batch_size=100))
            for name, items in sets.items()}


def eval_items(task, data, full=False, toy_items=200, toy_blanks=(2, 5)):
    """[(item id, example)]: the whole test file for GSM8K / MATH, d1's 256-item subset for Countdown
    and Sudoku unless `full` (d1: np.random.seed(42); np.random.choice(n, 256, replace=False))."""
    if task == "toy":
        return list(enumerate(toy_test_set(toy_items, blanks=toy_blanks)))
    if task == "pbe":
        return list(enumerate(pbe_test_set(toy_items)))
    if not data:
        raise ValueError(f"--task {task} needs --data PATH (its local test file)")
    examples = tasks.load_task(task, data)
    ids = range(len(examples))
    if task in ("countdown", "sudoku") and not full:
        # d1 evaluates GSM8K and MATH in full, Countdown and Sudoku on a fixed 256-item subset (d1-spec §8.1)
        ids = tasks.d1_eval_subset(len(examples))
    if task == "mbpp" and not full:
        # d1's 257 MBPP items: the test split, task_id 11-510 (of sanitized MBPP; 500 of the full file)
        ids = [i for i in ids if MBPP_TEST_IDS[0] <= examples[i]["task_id"] <= MBPP_TEST_IDS[1]]
    # an item's id is its position in the test file: stable across runs, so --compare can pair items
    return [(int(i), examples[i]) for i in ids]


# the CPU toys' canvases (gen length and block): the Sudoku toy's 16 digits, the code toy's fenced one-liner
TOY_CANVAS, TOY_BLOCK = {"toy": "16", "pbe": "48"}, {"pbe": 16}
MBPP_TEST_IDS = (11, 510)  # MBPP's test split (its README): d1 reports 257 = the sanitized records in it


def eval_prompt_ids(tokenizer, task, example):
    """d1's eval prompt as token ids: chat template + "<reasoning>" prefill (the toy: its bare prompt)."""
    # NOT the RL prompt: d1's eval asks for \boxed{} answers on GSM8K and Countdown, which RL trained with
    # bare <answer> tags (d1-spec §8.2, §10.8)
    return prompt_ids(tokenizer, tasks.eval_message(task, example), prefill=tasks.eval_prefill(task))


# -----------------------------------------------------------------------------
# generation


SCORING_FIELDS = ("answer", "nums", "target", "puzzle", "solution", "tests", "program_prefix", "unit_tests")


@torch.no_grad()
def run_items(model, tokenizer, task, items, gen_length, block_length, steps, temperature=0.0,
              remasking="low_confidence", batch_size=8, seed=0, progress=False, cache=None, threshold=None):
    """Generate and score `items` [(id, example)] -> list of per-item records. Batches of
    left-padded prompts with EOS as the pad (attended, as in d1: results depend slightly on the
    batch composition, which the manifest records). cache / threshold: sample.generate's
    approximate Fast-dLLM options (None = the exact sampler, d1's)."""
    model.eval()
    device = next(model.parameters()).device
    # EOS 126081 is LLaDA's pad, as in d1's padding="longest", padding_side="left" (d1-spec §2.4)
    eos = model.config.eos_token_id
    records = []
    for i in tqdm(range(0, len(items), batch_size), desc=f"{task} {gen_length}", disable=not progress):
        # consecutive items of this rank's stride, as d1's unshuffled sampler batches them: at d1's world size
        # and batch size every batch holds the same items as d1's, so even the attended pads match
        batch = items[i:i + batch_size]
        rows = [eval_prompt_ids(tokenizer, task, ex) for _, ex in batch]
        P = max(len(r) for r in rows)
        # left-padded, and the pads are attended (no attention mask, as d1), so an item's result can depend on
        # which other prompts share its batch; batch_size goes into the manifest
        prompt = torch.tensor([[eos] * (P - len(r)) + r for r in rows], device=device)  # (b, P)
        # one generator per batch, keyed by seed and position: reproducible at temperature > 0.
        # On the model's device: CPU-drawn (b, block, V) Gumbel noise would dominate a GPU run
        g = torch.Generator(device=device).manual_seed(seed * 1_000_003 + i)
        # d1 (d1-spec §8.1): block 32, steps = N / 2, τ = 0, low_confidence, cfg 0. Deviation: d1's eval sampler
        # runs under fp16 autocast (§2.2); we run in the weights' own dtype (bf16 on GPU)
        out = generate(model, prompt, gen_length=gen_length, block_length=block_length, steps=steps,
                       temperature=temperature, remasking=remasking, generator=g, cache=cache,
                       threshold=threshold)
        # decoded with special tokens kept, as d1 stores them (its parsers cope with them); the toy's
        # verifier reads the text the way the RL reward does, specials stripped
        texts = tokenizer.batch_decode(out[:, P:], skip_special_tokens=task in tasks.TOY_TASKS)
        records += score_records(task, batch, texts)
    return records


def score_records(task, items, texts):
    """One record per (id, example) and its generation: d1's lenient eval parsers (boxes first, numeric
    compare; d1-spec §8.3), not the RL rewards; the code benchmarks' programs run in the sandbox."""
    records = []
    for (item_id, ex), text, scored in zip(items, texts, parsers.score_eval_batch(task, texts, [ex for _, ex in items])):
        # the fields the parsers need travel with the record, so --rescore needs no data file
        gold = {k: ex[k] for k in SCORING_FIELDS if k in ex}
        records.append({"id": item_id, "prompt": ex["prompt"], "generation": text, "example": gold, **scored})
    return records


def reference_generation(ex):
    """A code item's reference solution written as a completion in d1's format: a ```python fence
    inside <answer>. --canonical scores these through the very path model generations take."""
    return f"<reasoning>\nThe reference solution.\n</reasoning>\n<answer>\n```python\n{ex['solution']}\n```\n</answer>"


def accuracy(task, records):
    """Accuracy in percent: d1's micro-averaged cell score for Sudoku, the solved share otherwise."""
    if not records:
        return float("nan")
    if task == "sudoku":
        # d1's Sudoku number is a micro-average over cells: Σ correct cells / Σ empty cells (d1-spec §8.3)
        return 100 * sum(r["cells_correct"] for r in records) / max(1, sum(r["cells_total"] for r in records))
    # d1: 100 x correct / processed, summed over the ranks' files (d1-spec §8.1)
    return 100 * sum(bool(r["correct"]) for r in records) / len(records)


def sha256_file(path):
    h = hashlib.sha256()  # of the whole file: a changed test set must change the manifest
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def model_fingerprint(model_dir):
    """Checksums of config.json and the weights index (cheap, unlike hashing 16 GB of weights)."""
    out = {}
    for name in ("config.json", "model.safetensors.index.json"):
        p = os.path.join(model_dir, name)
        out[name] = sha256_file(p) if os.path.exists(p) else None
    return out


# -----------------------------------------------------------------------------
# reading results back: ours (dir with manifest.json + *.jsonl) and d1's released JSON files

# d1's per-rank output files are named {task}_{model}_{N}_{S}_{rank}_generations.json (d1-spec §8.1);
# d1 calls MATH "math500"
D1_FILE = re.compile(r"(?P<task>[a-z0-9]+)_(?P<model>.+)_(?P<gen>\d+)_(?P<steps>\d+)_(?P<rank>\d+)_generations\.json$")
D1_TASKS = {"gsm8k": "gsm8k", "math500": "math", "countdown": "countdown", "sudoku": "sudoku"}


def load_results(paths):
    """{(task, gen_length): [records]} from our result dirs and/or d1's *_generations.json files.
    d1's files are re-scored here with our copy of d1's parsers."""
    groups = {}  # (task, gen_length) -> records, pooled over ranks / shard files
    for path in paths:
        if os.path.isdir(path):  # ours: the manifest says what was run, the JSONL files hold the items
            with open(os.path.join(path, "manifest.json")) as f:
                man = json.load(f)
            recs = []
            # one JSONL file per rank, pooled: d1's aggregate_results likewise sums over ranks
            for fn in sorted(glob.glob(os.path.join(path, "generations.rank*.jsonl"))):
                with open(fn) as f:
                    recs += [json.loads(line) for line in f if line.strip()]
            task = man["task"]
            # re-score from the stored generation, so a parser fix applies to old runs too (code: runs it again)
            scored = parsers.score_eval_batch(task, [r["generation"] for r in recs], [r["example"] for r in recs])
            recs = [{**r, **sc} for r, sc in zip(recs, scored)]
            groups.setdefault((task, man["gen_length"]), []).extend(recs)
            continue
        # d1's released files: task, gen length, steps and rank are in the file name
        m = D1_FILE.search(os.path.basename(path))
        if not m or m["task"] not in D1_TASKS:
            raise ValueError(f"{path}: neither a result directory nor a d1 *_generations.json file")
        task, gen = D1_TASKS[m["task"]], int(m["gen"])
        with open(path) as f:
            # {"generations": [{question, generations, ground_truth}], "metrics": ..., ...} (d1-spec §7.2)
            items = json.load(f)["generations"]
        for it in items:
            # d1 stores its parsed gold, not our example: rebuild the fields our parser reads (answer, nums,
            # target, puzzle, solution)
            ex = parsers.d1_example_from_released(task, it)
            groups.setdefault((task, gen), []).append({"generation": it["generations"],
                                                       **parsers.score_eval(task, it["generations"], ex)})
    return groups


def rescore(paths, json_out=None):
    """One line per (task, gen_length): items and accuracy (and the Sudoku solve rate)."""
    rows = []
    for (task, gen), recs in sorted(load_results(paths).items()):
        row = {"task": task, "gen_length": gen, "items": len(recs), "accuracy": round(accuracy(task, recs), 2)}
        extra = ""
        if task == "sudoku":
            # d1 reports the cell score only; the share of puzzles solved completely is the stricter number
            row["solve_rate"] = round(100 * sum(r["solved"] for r in recs) / len(recs), 2)
            extra = f"  (puzzles solved {row['solve_rate']:.1f}%)"
        print(f"{task:>10} {gen:>4}: {len(recs):>5} items, accuracy {row['accuracy']:.1f}%{extra}")
        rows.append(row)
    if json_out:
        with open(json_out, "w") as f:
            json.dump(rows, f, indent=2)
    return rows


# -----------------------------------------------------------------------------
# statistics


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


def item_scores(task, recs):
    """Per-item score in [0, 1] whose mean is the accuracy (Sudoku: cells; the cell micro-average
    equals the mean per-puzzle cell score when every puzzle has the same number of blanks)."""
    if task == "sudoku":
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


def compare(dir_a, dir_b, force=False):
    """Paired bootstrap CI of accuracy(B) - accuracy(A) over the items both evaluated."""
    mans = []
    for d in (dir_a, dir_b):
        with open(os.path.join(d, "manifest.json")) as f:
            mans.append(json.load(f))
    bad = [k for k in MUST_MATCH if mans[0].get(k) != mans[1].get(k)]
    if bad:
        msg = f"manifests differ in {bad}: the two runs are not the same evaluation"
        if not force:
            raise SystemExit(f"refusing to compare: {msg} (--force to compare anyway)")
        print(f"WARNING: {msg}")
    # settings that may differ without breaking the pairing (dtype, batch size, cache, seed, ...) are
    # only noted; the model and the timing are expected to differ
    other = [k for k in mans[0] if k not in MUST_MATCH and mans[0].get(k) != mans[1].get(k)
             and k not in ("model_dir", "model_fingerprint", "time", "wall_seconds", "out_dir")]
    if other:
        print(f"note: the runs also differ in {other}")
    task = mans[0]["task"]
    (ra,), (rb,) = load_results([dir_a]).values(), load_results([dir_b]).values()  # one group each
    sa, sb = item_scores(task, ra), item_scores(task, rb)
    # pair by item id: the same question scored by both models
    common = sorted(set(sa) & set(sb))  # equal item ids are guaranteed unless --force
    diff, lo, hi = paired_bootstrap([sa[i] for i in common], [sb[i] for i in common])
    print(f"{task} {mans[0]['gen_length']}: A {100 * sum(sa[i] for i in common) / len(common):.1f}%  "
          f"B {100 * sum(sb[i] for i in common) / len(common):.1f}%  B - A {100 * diff:+.1f} pts, "
          f"95% paired-bootstrap CI [{100 * lo:+.1f}, {100 * hi:+.1f}] over {len(common)} items")
    return diff, lo, hi


def canonical(task, data, full=False, out_dir="out/eval", limit=0):
    """Score a code benchmark's reference solutions (reference_generation) through the eval path: the
    JSONL + manifest, read back and scored by load_results (parse, sandbox) as --rescore does.
    Prints the pass rate and every failure; returns (passed, items, failed item ids)."""
    if task not in tasks.CODE_BENCHMARKS:
        raise ValueError(f"--canonical needs a code benchmark, one of {tasks.CODE_BENCHMARKS}, not {task!r}")
    items = eval_items(task, data, full)[:limit or None]
    t0 = time.time()
    # written unscored: load_results below scores them, exactly as --rescore scores a saved run
    recs = [{"id": i, "prompt": ex["prompt"], "generation": reference_generation(ex),
             "example": {k: ex[k] for k in SCORING_FIELDS if k in ex}} for i, ex in items]
    out = os.path.join(out_dir, f"{task}_canonical")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "generations.rank0.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in recs)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"task": task, "data_file": os.path.abspath(data), "data_sha256": sha256_file(data), "full": full,
                   "items": len(items), "item_ids": [i for i, _ in items], "gen_length": "canonical",
                   "model_dir": None, "parser_version": parsers.PARSER_VERSION}, f, indent=1)
    (recs,) = load_results([out]).values()  # parsed and run from the files: what --rescore reports
    failed = [r["id"] for r in recs if not r["correct"]]
    for r in recs:
        if not r["correct"]:
            tid = items[[i for i, _ in items].index(r["id"])][1]["task_id"]
            print(f"  FAIL {tid}: {r['tests_passed']}/{r['tests_total']} tests")
    print(f"{task} reference solutions: {len(recs) - len(failed)}/{len(recs)} pass ({time.time() - t0:.0f}s) -> {out}")
    return len(recs) - len(failed), len(recs), failed


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


# -----------------------------------------------------------------------------

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="d1-compatible evaluation")
    # what to evaluate
    parser.add_argument("--model-dir", type=str, default=TINY_DIR, help="official-layout model directory")
    parser.add_argument("--task", type=str, default="toy", help="gsm8k | math | countdown | sudoku | toy | "
                        "humaneval | humaneval_plus | mbpp | mbpp_plus | leetcode")
    parser.add_argument("--data", type=str, default="", help="the task's local test file")
    parser.add_argument("--full", action="store_true", help="all items instead of d1's 256 (Countdown, Sudoku)")
    parser.add_argument("--toy-items", type=int, default=200, help="toy / pbe: held-out items")
    parser.add_argument("--toy-blanks", type=str, default="2,5", help="toy: min,max blank cells of the held-out puzzles")
    parser.add_argument("--limit", type=int, default=0, help="only the first N items (smoke tests)")
    # sampler (d1: block 32, steps = gen / 2, greedy, low confidence)
    parser.add_argument("--gen-lengths", type=str, default="", help="comma list (default: 128,256,512; toy: 16)")
    parser.add_argument("--block-length", type=int, default=0, help="semi-AR block, capped at the gen length "
                        "(0 = d1's 32; pbe: 16)")
    parser.add_argument("--steps", type=int, default=0, help="diffusion steps, 0 = gen_length / 2 (d1)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (d1); > 0 with --seeds")
    parser.add_argument("--remasking", type=str, default="low_confidence", help="low_confidence | random")
    parser.add_argument("--cache", type=str, default="", choices=["", *CACHE_MODES[1:]],
                        help="'' = exact sampler (d1); prefix / dual = Fast-dLLM KV cache (approximate)")
    parser.add_argument("--threshold", type=float, default=0.0, help="0 = off; Fast-dLLM parallel unmasking (0.9)")
    parser.add_argument("--batch-size", type=int, default=0, help="prompts per batch; 0 = d1's 8 (4 at gen 512), toy 100")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--seeds", type=int, default=1, help="run seeds seed .. seed+N-1; report mean and 95%% CI")
    parser.add_argument("--dtype", type=str, default="", help="float32 | bfloat16 (default: bf16 on GPU, fp32 on CPU)")
    # outputs and the model-free modes
    parser.add_argument("--out-dir", type=str, default="out/eval", help="results: <out-dir>/<task>_<gen>[_seed<s>]/")
    parser.add_argument("--json", type=str, default="", help="also write [{task, gen_length, items, accuracy}] here")
    parser.add_argument("--rescore", type=str, nargs="+", help="re-score result dirs / d1 *_generations.json files")
    parser.add_argument("--compare", type=str, nargs=2, metavar=("A", "B"), help="paired bootstrap CI of B - A")
    parser.add_argument("--force", action="store_true", help="--compare even if the manifests disagree")
    parser.add_argument("--summarize", type=str, default="", help="print the table of runs/toy.sh's run dir")
    parser.add_argument("--canonical", action="store_true", help="code benchmarks: score the reference solutions")
    args = parser.parse_args()

    # the model-free modes first: no process group, no model, no GPU
    if args.rescore:
        rescore(args.rescore, args.json)
        raise SystemExit
    if args.compare:
        compare(*args.compare, force=args.force)
        raise SystemExit
    if args.summarize:
        summarize(args.summarize)
        raise SystemExit
    if args.canonical:
        canonical(args.task, args.data, args.full, args.out_dir, args.limit)
        raise SystemExit

    # -------------------------------------------------------------------------
    # distributed init: torchrun shards the items, rank r takes items r, r + W, ... (as d1)
    # a process group only under torchrun; the model is never wrapped (no training, no gradients)
    ddp, rank, _, world, device, device_type = compute_init()
    if ddp:
        import torch.distributed as dist
    # d1 evaluates the bf16 weights, not quantized, even for adapters trained on a 4-bit base (§8.1)
    dtype = default_dtype(args.dtype, device_type)

    # -------------------------------------------------------------------------
    # model and items; every rank builds the same item list and keeps its stride
    model, tokenizer = load(args.model_dir, device=device, dtype=dtype)
    all_items = eval_items(args.task, args.data, args.full, args.toy_items, tuple(map(int, args.toy_blanks.split(","))))
    if args.limit:
        all_items = all_items[:args.limit]
    # d1's DistributedSampler(shuffle=False), without padding duplicates: rank r gets r, r + W, ... (§8.1)
    my_items = all_items[rank::world]
    # d1 reports every task at 128, 256 and 512 (Table 1; d1-spec §8.4)
    gen_lengths = [int(x) for x in (args.gen_lengths or TOY_CANVAS.get(args.task, "128,256,512")).split(",")]
    rows = []  # one summary row per gen length (the mean over seeds)
    for gen in gen_lengths:
        # the Sudoku toy's 16-token canvas is a single block; the code toy's 48 tokens are 3 blocks of 16
        block = min(args.block_length or TOY_BLOCK.get(args.task, 32), gen)
        steps = args.steps or gen // 2  # d1: two tokens unmasked per step
        accs = []
        for seed in range(args.seed, args.seed + args.seeds):
            # one result directory per (task, gen length[, seed]): what --rescore and --compare read back
            name = f"{args.task}_{gen}" + (f"_seed{seed}" if args.seeds > 1 else "")
            out = os.path.join(args.out_dir, name)
            os.makedirs(out, exist_ok=True)
            t0 = time.time()
            # d1: 8 prompts per batch, 4 at gen length 512 (d1-spec §8.1)
            bs = args.batch_size or (100 if args.task in tasks.TOY_TASKS else 4 if gen >= 512 else 8)
            recs = run_items(model, tokenizer, args.task, my_items, gen, block, steps, args.temperature,
                             args.remasking, bs, seed, progress=rank == 0, cache=args.cache or None,
                             threshold=args.threshold or None)
            # each rank writes its own file (d1 too: one JSON per rank), so no records travel between ranks
            with open(os.path.join(out, f"generations.rank{rank}.jsonl"), "w") as f:
                for r in recs:
                    f.write(json.dumps(r) + "\n")
            if ddp:
                dist.barrier()  # every rank's file is written before rank 0 reads them back
            if rank == 0:  # rank 0 writes the manifest and scores the pooled files
                # every setting that can move the number, so that --compare can refuse a mismatched pair (MUST_MATCH)
                manifest = {
                    "model_dir": os.path.abspath(args.model_dir), "model_fingerprint": model_fingerprint(args.model_dir),
                    "task": args.task, "data_file": os.path.abspath(args.data) if args.data else None,
                    "data_sha256": sha256_file(args.data) if args.data else None, "full": args.full,
                    # the toy's items are generated: their ids alone do not say which puzzles they were
                    "toy_blanks": args.toy_blanks if args.task == "toy" else None,
                    "items": len(all_items), "item_ids": [i for i, _ in all_items], "gen_length": gen,
                    "block_length": block, "steps": steps, "temperature": args.temperature,
                    "remasking": args.remasking, "cache": args.cache or None,
                    "threshold": args.threshold or None, "seed": seed, "dtype": str(dtype).removeprefix("torch."),
                    "batch_size": bs, "world_size": world, "parser_version": parsers.PARSER_VERSION,
                    "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
                    "time": time.strftime("%Y-%m-%d %H:%M:%S"), "wall_seconds": round(time.time() - t0, 1)}
                with open(os.path.join(out, "manifest.json"), "w") as f:
                    json.dump(manifest, f, indent=1)
                # score the pooled files of all ranks through load_results, the same path as --rescore
                (recs_all,) = load_results([out]).values()
                accs.append(accuracy(args.task, recs_all))
                solved = f", puzzles solved {100 * sum(r['solved'] for r in recs_all) / len(recs_all):.1f}%" \
                    if args.task == "sudoku" else ""
                print(f"{args.task} gen {gen} seed {seed}: accuracy {accs[-1]:.1f}%{solved} on {len(recs_all)} "
                      f"items ({time.time() - t0:.0f}s) -> {out}")
        if rank == 0:
            # one seed (greedy, d1's protocol): m is that run's accuracy and no interval is printed
            m, sd, ci = mean_and_spread(accs)
            if len(accs) > 1:
                print(f"{args.task} gen {gen}: mean {m:.1f}% ± {ci:.1f} (95% CI over {len(accs)} seeds, std {sd:.1f})")
            # --json gets the mean over seeds, the format summarize() and --rescore --json share
            rows.append({"task": args.task, "gen_length": gen, "items": len(all_items), "accuracy": round(m, 2)})
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    if ddp:
        dist.destroy_process_group()
