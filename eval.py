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

A number an eval prints must be the number of the items it names, so:
  - bad input (flags, data file, model directory, what the output folder holds) is one line and
    exit 2 before any process group, model or file (checks.upfront);
  - a result dir is read as its manifest names it: exactly world_size rank files whose record ids
    are exactly the manifest's item_ids, and only once the manifest says "complete": true;
  - every rank appends its records batch by batch, so a killed run is continued with the same
    command plus --resume: the whole batches on disk are kept and the rest generated, each batch
    with the generator keyed by (seed, batch start), so the files end up identical to an
    uninterrupted run's. A folder holding an earlier run is refused unless --resume or --force.

Run:
    python eval.py                                               # toy task on the tiny model, CPU
    torchrun --nproc_per_node=8 eval.py --model-dir out/grpo-gsm8k --task gsm8k \\
        --data gsm8k/test.jsonl --gen-lengths 128,256,512 --out-dir out/eval/grpo-gsm8k
    python eval.py --rescore ../shared/data/d1_eval_baselines                # or the files in it
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
from collections import Counter
from functools import partial

import torch
from tqdm import tqdm

from lib import parsers
from lib import puzzles
import tasks
from lib.checkpoint import TINY_DIR, load
from ops.checks import check_data_paths, check_model_dir, require, upfront
from ops.ddp import DIST_TIMEOUT_S, compute_init, default_dtype
from sample import CACHE_MODES, REMASKING_STRATEGIES, check_schedule, generate
from lib.tokenizer import prompt_ids

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
    from lib import pbe
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
# the tasks with an eval prompt and an eval parser (s1k and KodCode are training data only)
EVAL_TASKS = ("gsm8k", "math", "countdown", "sudoku", *tasks.TOY_TASKS, *tasks.CODE_BENCHMARKS)


def load_items(task, data, full=False, limit=0, toy_items=200, toy_blanks=(2, 5)):
    """eval_items, checked as input (run inside checks.upfront): a known task, its data file there and
    well-formed (the loaders name file:line), and at least one item after --limit."""
    require(task in EVAL_TASKS, f"--task: unknown task {task!r}; one of {', '.join(EVAL_TASKS)}")
    check_data_paths([data] if data else [])
    items = eval_items(task, data, full, toy_items, toy_blanks)[:limit or None]
    require(items, f"--task {task}: no items to evaluate in {data or 'the generated set'}")
    return items


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
              remasking="low_confidence", batch_size=8, seed=0, progress=False, cache=None, threshold=None,
              skip=0, on_batch=None):
    """Generate and score `items` [(id, example)] -> list of per-item records. Batches of
    left-padded prompts with EOS as the pad (attended, as in d1: results depend slightly on the
    batch composition, which the manifest records). cache / threshold: sample.generate's
    approximate Fast-dLLM options (None = the exact sampler, d1's). skip: the first `skip` items
    are done already (a resume; a multiple of batch_size), so the later batches keep their items
    and their generators. on_batch(records): called after each batch (eval.py appends it to disk)."""
    model.eval()
    device = next(model.parameters()).device
    # EOS 126081 is LLaDA's pad, as in d1's padding="longest", padding_side="left" (d1-spec §2.4)
    eos = model.config.eos_token_id
    records = []
    for i in tqdm(range(skip, len(items), batch_size), desc=f"{task} {gen_length}", disable=not progress):
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
        batch_records = score_records(task, batch, texts)
        if on_batch is not None:
            on_batch(batch_records)
        records += batch_records
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
MANIFEST = "manifest.json"


def rank_file(out, rank):
    """Rank `rank`'s records in result dir `out`: one JSON line per item, in its item order."""
    return os.path.join(out, f"generations.rank{rank}.jsonl")


def read_manifest(out):
    """The manifest of result dir `out` (a clear ValueError if there is none or it is not JSON)."""
    path = os.path.join(out, MANIFEST)
    require(os.path.isfile(path), f"{out} is not a result directory: it has no {MANIFEST}")
    with open(path) as f:
        try:
            return json.load(f)
        except ValueError as e:
            raise ValueError(f"{path} is not valid JSON ({e})") from None


def read_jsonl(path):
    """The records of one rank file; a line that is not JSON is a ValueError naming file:line."""
    recs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                recs.append(json.loads(line))
            except ValueError:
                raise ValueError(f"{path}:{n}: not a JSON line (a run killed mid-write? --resume repairs it)") from None
    return recs


def read_records(out, man):
    """The records of result dir `out` exactly as its manifest names them: the rank files 0 .. world_size-1,
    pooled, whose ids must be the manifest's item_ids (as a multiset). A leftover rank file of an earlier
    run with more ranks is not read, and a missing rank, a missing item, an extra or a repeated one is a
    ValueError: an accuracy over the wrong items, printed without a warning, is the worst an eval can do."""
    world = man.get("world_size", 1)  # older manifests without it: one rank file (--canonical's)
    recs = []
    for r in range(world):
        path = rank_file(out, r)
        require(os.path.isfile(path), f"{out}: {os.path.basename(path)} is missing (its manifest says {world} "
                                      f"rank(s) wrote files)")
        recs += read_jsonl(path)
    want, got = Counter(man["item_ids"]), Counter(r.get("id") for r in recs)
    missing, extra = want - got, got - want
    require(not missing and not extra, f"{out}: its rank files hold {len(recs)} records for the manifest's "
            f"{len(man['item_ids'])} items: {sum(missing.values())} missing (ids {sorted(missing)[:5]}), "
            f"{sum(extra.values())} extra or repeated (ids {sorted(extra, key=str)[:5]}); --force runs it again")
    return recs


def expand_paths(paths):
    """--rescore's arguments -> result dirs and d1 files: a folder without a manifest.json that holds d1's
    *_generations.json files stands for those files, sorted (`--rescore d1_eval_baselines`)."""
    out = []
    for p in paths:
        require(os.path.exists(p), f"{p} does not exist")
        if os.path.isdir(p) and not os.path.exists(os.path.join(p, MANIFEST)):
            d1 = sorted(f for f in glob.glob(os.path.join(p, "*_generations.json"))
                        if D1_FILE.search(os.path.basename(f)))
            require(d1, f"{p}: neither a result directory (no {MANIFEST}) nor a folder of d1 *_generations.json files")
            out += d1
        else:
            out.append(p)
    return out


def load_results(paths):
    """{(task, gen_length): [records]} from our result dirs and/or d1's *_generations.json files (or
    folders of them). d1's files are re-scored here with our copy of d1's parsers. A result dir whose
    run did not finish is refused, not scored on the items it got to."""
    groups = {}  # (task, gen_length) -> records, pooled over ranks / shard files
    for path in expand_paths(paths):
        if os.path.isdir(path):  # ours: the manifest says what was run, the JSONL files hold the items
            man = read_manifest(path)
            # manifests written before "complete" existed were only ever written at the end of a run
            require(man.get("complete", True), f"the run in {path} did not finish; resume it with --resume "
                                               f"(the same eval.py command)")
            # one JSONL file per rank, pooled: d1's aggregate_results likewise sums over ranks
            recs = read_records(path, man)
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


# -----------------------------------------------------------------------------
# writing results: the manifest first ("complete": false), the rank files one batch at a time, the
# manifest again at the end ("complete": true); --resume continues from what a kill left


def write_atomic(path, text):
    """Replace `path` by `text` in one step (tmp file + os.replace): a reader, or a resume after kill -9,
    finds the old file or the new one, never half of one."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_manifest(out, manifest):
    write_atomic(os.path.join(out, MANIFEST), json.dumps(manifest, indent=1))


def append_records(path, records):
    """Append one batch's records to a rank file: all its lines in one write, flushed when the file
    closes, so a kill leaves whole batches plus at most one torn line (which resume_records drops)."""
    with open(path, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))


def resume_records(path, item_ids, batch_size):
    """The lines of rank file `path` a --resume keeps: complete lines (newline-terminated and JSON) whose
    ids are, in order, a prefix of this rank's `item_ids`, cut back to whole batches (a multiple of
    batch_size, or all the items). The batches still to run then hold the same items as in an
    uninterrupted run, and each batch's generator is keyed by its start, so the final file is the same."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        lines = f.read().split("\n")[:-1]  # what follows the last newline is a torn line (or nothing)
    kept = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            break  # a torn or corrupt line: it and everything after it are generated again
        if len(kept) == len(item_ids) or not isinstance(rec, dict) or rec.get("id") != item_ids[len(kept)]:
            break
        kept.append(line + "\n")
    if len(kept) < len(item_ids):
        kept = kept[:len(kept) - len(kept) % batch_size]
    return kept


def run_files(out):
    """The files an earlier run left in result dir `out`: its manifest (first) and rank files."""
    if not os.path.isdir(out):
        return []
    manifest = [MANIFEST] if os.path.exists(os.path.join(out, MANIFEST)) else []
    return manifest + sorted(os.path.basename(f) for f in glob.glob(rank_file(out, "*")))


def clear_run_files(out):
    """--force: delete an earlier run's manifest and rank files, nothing else the folder holds. The
    manifest goes first, so a kill half-way leaves rank files that nothing reads as a result."""
    for name in run_files(out):
        os.remove(os.path.join(out, name))


# the manifest fields a --resume may see change: when and how long it ran, whether it finished, and the
# paths of the model and data (their contents are compared: model_fingerprint, data_sha256)
RESUME_FREE = ("time", "wall_seconds", "complete", "model_dir", "data_file")


def result_dir_state(out, settings, resume, force):
    """What a run with manifest `settings` does in result dir `out`: "fresh" (nothing there, or --force:
    rank 0 deletes what is there), "partial" (--resume continues it) or "complete" (--resume of a
    finished run: its results are only scored). Refuses, with one InputError, a dir holding an earlier
    run without --resume or --force, and a --resume whose settings differ. Reads only."""
    require(not os.path.exists(out) or os.path.isdir(out), f"{out} exists and is not a directory")
    present = run_files(out)
    if not present or force:
        # --resume too: a result dir the killed command never reached is simply run
        return "fresh"
    require(resume, f"{out} holds results of an earlier run ({', '.join(present[:3])}); --resume continues it, "
                    f"--force starts over (deletes those files)")
    require(MANIFEST in present, f"--resume: {out} holds rank files but no {MANIFEST} that says what they are; "
                                 f"--force starts over")
    old, new = read_manifest(out), json.loads(json.dumps(settings))  # compared as JSON: tuples are lists
    short = lambda v: (s if len(s := json.dumps(v)) <= 40 else s[:37] + "...")
    differ = [f"{k} {short(old.get(k))} -> {short(new.get(k))}" for k in sorted(set(old) | set(new))
              if k not in RESUME_FREE and old.get(k) != new.get(k)]
    require(not differ, f"--resume: {out} was run with other settings ({'; '.join(differ)}); resume with the "
                        f"same flags, or --force to start over")
    return "complete" if old.get("complete", True) else "partial"


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
    items = load_items(task, data, full, limit)
    t0 = time.time()
    # written unscored: load_results below scores them, exactly as --rescore scores a saved run
    recs = [{"id": i, "prompt": ex["prompt"], "generation": reference_generation(ex),
             "example": {k: ex[k] for k in SCORING_FIELDS if k in ex}} for i, ex in items]
    out = os.path.join(out_dir, f"{task}_canonical")
    os.makedirs(out, exist_ok=True)
    # the reference solutions are fixed, so an earlier canonical run here is simply replaced: rank file first,
    # then the manifest that calls it complete (load_results reads exactly the rank files it names)
    write_atomic(rank_file(out, 0), "".join(json.dumps(r) + "\n" for r in recs))
    write_manifest(out, {"task": task, "data_file": os.path.abspath(data), "data_sha256": sha256_file(data),
                         "full": full, "items": len(items), "item_ids": [i for i, _ in items],
                         "gen_length": "canonical", "model_dir": None, "world_size": 1,
                         "parser_version": parsers.PARSER_VERSION, "complete": True})
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
# the runs of one command: one result directory per (gen length, seed), with its settings


def check_flags(args):
    """Every flag that cannot work, as one InputError (checks.upfront: one line, exit 2). The items,
    the schedules, the model directory and the result directories are checked after it."""
    require(args.seeds >= 1, f"--seeds must be >= 1, got {args.seeds}")
    require(args.temperature >= 0, f"--temperature must be >= 0 (0 = greedy), got {args.temperature}")
    require(args.seeds == 1 or args.temperature > 0, f"--seeds {args.seeds} at --temperature 0: greedy decoding "
            f"is deterministic, so every seed would give the same result; give --temperature > 0, or one seed")
    for flag in ("batch_size", "limit", "block_length", "steps"):
        require(getattr(args, flag) >= 0, f"--{flag.replace('_', '-')} must be >= 0 (0 = the default), "
                                          f"got {getattr(args, flag)}")
    require(args.toy_items >= 1, f"--toy-items must be >= 1, got {args.toy_items}")
    require(args.dist_timeout >= 1, f"--dist-timeout must be >= 1 second, got {args.dist_timeout}")
    require(args.remasking in REMASKING_STRATEGIES, f"--remasking must be one of {REMASKING_STRATEGIES}, "
                                                    f"got {args.remasking!r}")
    require(args.threshold == 0 or (0 < args.threshold <= 1 and args.remasking == "low_confidence"),
            f"--threshold must be 0 (off) or in (0, 1] with --remasking low_confidence, got {args.threshold}")
    require(args.dtype in ("", "float32", "bfloat16", "float16"), f"--dtype must be float32 | bfloat16 | "
                                                                   f"float16, got {args.dtype!r}")
    require(not (args.resume and args.force), "--resume and --force contradict each other: continue the run, "
                                              "or start over")
    require(not os.path.exists(args.out_dir) or os.path.isdir(args.out_dir),
            f"--out-dir {args.out_dir} exists and is not a directory")


def toy_blanks(args):
    """--toy-blanks "min,max" -> (min, max)."""
    try:
        lo, hi = map(int, args.toy_blanks.split(","))
    except ValueError:
        raise ValueError(f"--toy-blanks must be two integers min,max, got {args.toy_blanks!r}") from None
    require(1 <= lo <= hi <= 16, f"--toy-blanks: need 1 <= min <= max <= 16 blank cells, got {args.toy_blanks!r}")
    return lo, hi


def gen_lengths(args):
    """--gen-lengths as ints; d1 reports every task at 128, 256 and 512 (Table 1; d1-spec §8.4)."""
    text = args.gen_lengths or TOY_CANVAS.get(args.task, "128,256,512")
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--gen-lengths must be a comma list of integers, got {text!r}") from None


def schedule(args, gen):
    """(block, steps, batch size) at gen length `gen`. d1: block 32, two tokens unmasked per step, 8
    prompts per batch and 4 at gen length 512 (d1-spec §8.1). The Sudoku toy's 16-token canvas is a
    single block, the code toy's 48 tokens are 3 blocks of 16; the toys batch 100 prompts."""
    block = min(args.block_length or TOY_BLOCK.get(args.task, 32), gen)
    steps = args.steps or gen // 2
    try:
        check_schedule(gen, block, steps)
    except ValueError as e:
        raise ValueError(f"--gen-lengths / --block-length / --steps: {e}") from None
    return block, steps, args.batch_size or (100 if args.task in tasks.TOY_TASKS else 4 if gen >= 512 else 8)


def result_dir(args, gen, seed):
    """One result directory per (task, gen length[, seed]): what --rescore and --compare read back."""
    return os.path.join(args.out_dir, f"{args.task}_{gen}" + (f"_seed{seed}" if args.seeds > 1 else ""))


def run_settings(args, items, gen, seed, world, dtype, device, fingerprint):
    """A run's manifest without its time and completion: every setting that can move the number, so that
    --compare can refuse a mismatched pair (MUST_MATCH) and --resume a changed command (RESUME_FREE)."""
    block, steps, batch_size = schedule(args, gen)
    return {
        "model_dir": os.path.abspath(args.model_dir), "model_fingerprint": fingerprint,
        "task": args.task, "data_file": os.path.abspath(args.data) if args.data else None,
        "data_sha256": sha256_file(args.data) if args.data else None, "full": args.full,
        # the toy's items are generated: their ids alone do not say which puzzles they were
        "toy_blanks": args.toy_blanks if args.task == "toy" else None,
        "items": len(items), "item_ids": [i for i, _ in items], "gen_length": gen,
        "block_length": block, "steps": steps, "temperature": args.temperature,
        "remasking": args.remasking, "cache": args.cache or None,
        "threshold": args.threshold or None, "seed": seed, "dtype": str(dtype).removeprefix("torch."),
        # the attended left pads make an item's result depend on its batch, and the batches on the ranks
        "batch_size": batch_size, "world_size": world, "parser_version": parsers.PARSER_VERSION,
        "device": device}


# -----------------------------------------------------------------------------

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="d1-compatible evaluation")
    # what to evaluate
    parser.add_argument("--model-dir", type=str, default=TINY_DIR, help="official-layout model directory")
    parser.add_argument("--task", type=str, default="toy", help="gsm8k | math | countdown | sudoku | toy | pbe | "
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
    parser.add_argument("--seeds", type=int, default=1, help="run seeds seed .. seed+N-1 (needs --temperature > 0); "
                        "report mean and 95%% CI")
    parser.add_argument("--dtype", type=str, default="", help="float32 | bfloat16 (default: bf16 on GPU, fp32 on CPU)")
    parser.add_argument("--dist-timeout", type=int, default=DIST_TIMEOUT_S, help="seconds a collective waits for "
                        "a lost rank before this one stops with a message")
    # outputs and the model-free modes
    parser.add_argument("--out-dir", type=str, default="out/eval", help="results: <out-dir>/<task>_<gen>[_seed<s>]/")
    parser.add_argument("--resume", action="store_true", help="continue the runs of this same command after a crash "
                        "or kill: each result dir keeps its whole batches on disk and generates the rest (the files "
                        "end up identical to an uninterrupted run's); a finished one is only scored, and one that "
                        "does not exist yet is run from scratch, so one --resume continues a multi-length, "
                        "multi-seed eval that died half way")
    parser.add_argument("--force", action="store_true", help="start over in result dirs that hold an earlier run "
                        "(deletes their manifest.json and generations.rank*.jsonl); with --compare: compare even "
                        "if the manifests disagree")
    parser.add_argument("--json", type=str, default="", help="also write [{task, gen_length, items, accuracy}] here")
    parser.add_argument("--rescore", type=str, nargs="+", help="re-score result dirs / d1 *_generations.json files "
                        "(or folders of them)")
    parser.add_argument("--compare", type=str, nargs=2, metavar=("A", "B"), help="paired bootstrap CI of B - A")
    parser.add_argument("--summarize", type=str, default="", help="print the table of runs/toy.sh's run dir")
    parser.add_argument("--canonical", action="store_true", help="code benchmarks: score the reference solutions")
    args = parser.parse_args()

    # the model-free modes first: no process group, no model, no GPU. Everything they read is input, so a
    # missing path, an unfinished run or a bad file is one line (checks.upfront)
    if args.rescore:
        with upfront():
            rescore(args.rescore, args.json)
        raise SystemExit
    if args.compare:
        with upfront():
            compare(*args.compare, force=args.force)
        raise SystemExit
    if args.summarize:
        with upfront():
            summarize(args.summarize)
        raise SystemExit
    if args.canonical:
        with upfront():
            canonical(args.task, args.data, args.full, args.out_dir, args.limit)
        raise SystemExit

    # -------------------------------------------------------------------------
    # bad input is one line and exit 2 before any process group, model or file (checks.py): the flags, the
    # items (a malformed record is named file:line), every schedule, the model directory's headers, and what
    # every result directory of this command already holds. Every rank runs the same checks, so all refuse
    world, rank = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("RANK", 0))  # torchrun's
    with upfront():
        check_flags(args)
        all_items = load_items(args.task, args.data, args.full, args.limit, args.toy_items, toy_blanks(args))
        gens, seeds = gen_lengths(args), range(args.seed, args.seed + args.seeds)
        check_model_dir(args.model_dir, default_dir=TINY_DIR)
        # the dtype and device the run will have (compute_init picks cuda the same way), for its manifest
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = default_dtype(args.dtype, device_type)
        local_rank = int(os.environ.get("LOCAL_RANK", 0))  # this rank's GPU, which compute_init selects later
        device_name = torch.cuda.get_device_name(local_rank) if device_type == "cuda" else "cpu"
        # (gen, seed) -> (result dir, its manifest settings, "fresh" | "partial" | "complete"), all decided
        # now: a command that would refuse its third result dir must not first spend hours on the other two
        runs, fingerprint = {}, model_fingerprint(args.model_dir)
        for gen in gens:
            for seed in seeds:
                settings = run_settings(args, all_items, gen, seed, world, dtype, device_name, fingerprint)
                out = result_dir(args, gen, seed)
                runs[gen, seed] = out, settings, result_dir_state(out, settings, args.resume, args.force)
    if args.force and rank == 0:
        # only now that every check passed; the other ranks wait for rank 0 in the process group's set-up
        for out, _, _ in runs.values():
            clear_run_files(out)

    # -------------------------------------------------------------------------
    # distributed init: torchrun shards the items, rank r takes items r, r + W, ... (as d1)
    # a process group only under torchrun; the model is never wrapped (no training, no gradients)
    ddp, rank, _, world, device, device_type = compute_init(timeout_s=args.dist_timeout)
    if ddp:
        import torch.distributed as dist

    # -------------------------------------------------------------------------
    # model and items; every rank has the same item list and keeps its stride
    # d1 evaluates the bf16 weights, not quantized, even for adapters trained on a 4-bit base (§8.1)
    model, tokenizer = load(args.model_dir, device=device, dtype=dtype)
    # again after loading: on first use load() has just created the default tiny model
    fingerprint = model_fingerprint(args.model_dir)
    # d1's DistributedSampler(shuffle=False), without padding duplicates: rank r gets r, r + W, ... (§8.1)
    my_items = all_items[rank::world]
    rows = []  # one summary row per gen length (the mean over seeds)
    for gen in gens:
        block, steps, bs = schedule(args, gen)
        accs = []
        for seed in seeds:
            out, settings, state = runs[gen, seed]
            manifest = {**settings, "model_fingerprint": fingerprint}
            mine = rank_file(out, rank)
            t0 = time.time()
            if state != "complete":
                if rank == 0:
                    os.makedirs(out, exist_ok=True)
                    # first, marked unfinished: from here on a kill leaves a dir that --rescore and --compare
                    # refuse and that --resume continues
                    write_manifest(out, {**manifest, "complete": False})
                if ddp:
                    dist.barrier()  # the dir exists (and --force's deletions are done) before any rank writes
                # --resume: the whole batches already on disk stay (a torn last line goes); fresh: an empty file
                done = resume_records(mine, [i for i, _ in my_items], bs) if state == "partial" else []
                write_atomic(mine, "".join(done))
                # each rank appends to its own file batch by batch (d1 too: one JSON per rank), so no records
                # travel between ranks and a kill loses at most the batch in flight
                run_items(model, tokenizer, args.task, my_items, gen, block, steps, args.temperature,
                          args.remasking, bs, seed, progress=rank == 0, cache=args.cache or None,
                          threshold=args.threshold or None, skip=len(done), on_batch=partial(append_records, mine))
                if ddp:
                    dist.barrier()  # every rank's file is complete before rank 0 reads them back
            if rank == 0:
                if state != "complete":
                    read_records(out, manifest)  # every item exactly once, before the manifest says complete
                    # wall_seconds: this process's share (a resumed run's earlier part is not counted)
                    write_manifest(out, {**manifest, "complete": True, "time": time.strftime("%Y-%m-%d %H:%M:%S"),
                                         "wall_seconds": round(time.time() - t0, 1)})
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
        # every rank waits until rank 0 has scored and written, then the group is torn down together: a rank
        # that left first tore gloo's pairs under the others and aborted one (ddp.finish)
        dist.barrier()
        dist.destroy_process_group()
