"""
eval.py's result bookkeeping: the files a run writes, and reading them (or d1's released files) back.

A result directory holds one run (task, gen length, seed): manifest.json with every setting that
can move the number (model and data checksums, items, sampler, seed, dtype, device, parser), and
one generations.rank{r}.jsonl per rank, one JSON line per item (prompt, generation, parsed answer,
score). load_results reads those directories, and d1's released *_generations.json files, into
records scored by our copy of d1's parsers; rescore prints their table (`eval.py --rescore`, which
on d1's files reproduces the paper's LLaDA-8B-Instruct row).

A number an eval prints must be the number of the items it names: a result dir is read exactly as
its manifest names it, and only once it says "complete": true; a killed run (or a finished one whose
rank files lost records since) is continued by --resume from its whole batches and ends identical to an
uninterrupted run; a folder holding another run is refused unless --resume or --force (result_dir_state).
docs/evaluation.md and docs/reliability.md say how and what is tested.

Used by eval.py and by what reads its results; nothing here needs a model or a GPU. The task registry
(tasks.TASKS) comes in as an argument: a record's eval parser scores, its `cells` says Sudoku's average.
"""
import functools
import glob
import hashlib
import json
import os
import re
import sys
import time
from collections import Counter

from modelio.provenance import fingerprint, other_weights, weights_short
from ops.checks import InputError, require
from ops.stop import EXIT_STOPPED
from sandbox import contain
from taskdata import parsers
from taskdata.records import records_sha256
from taskdata.splits import recorded_split

# d1's per-rank output files: {task}_{model}_{N}_{S}_{rank}_generations.json (docs/d1.md §8.1; MATH is "math500")
D1_FILE = re.compile(r"(?P<task>[a-z0-9]+)_(?P<model>.+)_(?P<gen>\d+)_(?P<steps>\d+)_(?P<rank>\d+)_generations\.json$")
D1_TASKS = parsers.D1_RELEASED_TASK_NAMES  # d1's file-name task -> ours
MANIFEST = "manifest.json"


def accuracy(records, cells=False):
    """Accuracy in percent, as d1 reports it: for Sudoku (cells) the micro-average over blank cells, Σ correct
    cells / Σ empty cells (§8.3); otherwise 100 x correct / processed, summed over the ranks' files (§8.1)."""
    if not records:
        return float("nan")
    if cells:
        return 100 * sum(r["cells_correct"] for r in records) / max(1, sum(r["cells_total"] for r in records))
    return 100 * sum(bool(r["correct"]) for r in records) / len(records)


def score_batch(registry, task, generations, examples):
    """The eval parser of `task` (its record in registry) over many items (code tasks: programs in parallel)."""
    require(task in registry, f"unknown task {task!r}; expected one of {', '.join(registry)}")
    t = registry[task]
    require(t.score is not None, f"task {task!r} has no eval parser; evaluable: "
                                 f"{', '.join(n for n, r in registry.items() if r.score)}")
    try:
        return t.score(generations, examples)
    except KeyError as e:  # a record keeps only the task's scoring_fields (taskdata/task.py)
        raise InputError(f"task {task}'s eval parser reads the example's field {e}, which its records "
                         f"do not keep: add it to the record's scoring_fields (None keeps the whole "
                         f"example) and evaluate again") from None


def sha256_file(path):
    h = hashlib.sha256()  # of the whole file: a changed test set must change the manifest
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def model_fingerprint(model_dir):
    """Checksums of config.json and the weights index, and the weights' own fingerprint (modelio/provenance.py:
    the hash our saves record, and a sampled one): two fine-tunes of one base share the first two."""
    out = {}
    for name in ("config.json", "model.safetensors.index.json"):
        p = os.path.join(model_dir, name)
        out[name] = sha256_file(p) if os.path.exists(p) else None
    return {**out, "weights": fingerprint(model_dir)}


@functools.cache  # a hub data set is read once, not once per result dir
def data_identity(data):
    """A manifest's (data_file, data_sha256): a file's absolute path and the sha256 of its bytes, or a hub
    dataset id as typed and the sha256 of its records (taskdata/records.records_sha256); (None, None) without."""
    if not data:
        return None, None
    return (os.path.abspath(data) if os.path.isfile(data) else data), records_sha256(data)


def run_settings(args, task, items, gen, schedule, seed, world, dtype, device, model_fp, options):
    """eval.py's manifest of one run without its time and completion: every setting that can move the number
    (a comparison refuses a mismatched pair, --resume a changed command: RESUME_FREE). args: eval.py's flags;
    task: its record; schedule: (block, steps, batch size); options: the sampler's own keywords (eval.main)."""
    block, steps, batch_size = schedule
    data_file, data_sha256 = data_identity(args.data)
    return {
        "model_dir": os.path.abspath(args.model_dir), "model_fingerprint": model_fp,
        "model_spec": args.model_spec, "model_revision": args.model_revision,  # where a hub id led
        "task": args.task, "data_file": data_file, "data_sha256": data_sha256,
        # toy_blanks: a toy's items are generated; their ids alone don't say which puzzles they were
        "full": args.full, "toy_blanks": args.toy_blanks if task.make else None,
        "items": len(items), "item_ids": [i for i, _ in items], "gen_length": gen,
        "block_length": block, "steps": steps, "temperature": args.temperature,
        "remasking": args.remasking, **options, "seed": seed, "dtype": str(dtype).removeprefix("torch."),
        # an item's result depends on its batch (attended left pads), the batches on the ranks
        "batch_size": batch_size, "world_size": world, "device": device,
        "parser_version": task.parser_version,  # the task's own (its record)
        "sandbox": args.sandbox_mode,  # code's isolation (None: no code)
        "train_split": recorded_split(args.model_dir)}  # the model's --sudoku-split, --val-size


# -----------------------------------------------------------------------------
# reading results back: ours (dir with manifest.json + *.jsonl) and d1's released JSON files


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
    """The records of one rank file; a line that is not a JSON object is a ValueError naming file:line."""
    recs = []
    # bytes, decoded line by line: bytes that are not UTF-8 are a bad line like any other (records are ASCII)
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line.decode())
            except ValueError:  # UnicodeDecodeError included
                rec = None
            # a garbled line anywhere is the same to --resume as a torn last one (resume_records): the hint is true
            require(isinstance(rec, dict), f"{path}:{n}: not a JSON record (torn or garbled); the eval.py command "
                                           f"that wrote it, plus --resume, keeps the whole batches before it and "
                                           f"generates the rest")
            recs.append(rec)
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
            f"{sum(extra.values())} extra or repeated (ids {sorted(extra, key=str)[:5]}); the eval.py command that "
            f"wrote it, plus --resume, generates what is missing, --force runs it all again")
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


def load_results(paths, registry):
    """{(task, gen_length): [records]} from our result dirs and/or d1's *_generations.json files (or
    folders of them), scored by the tasks' eval parsers (registry: tasks.TASKS). d1's files are re-scored
    here with our copy of d1's parsers. A result dir whose run did not finish is refused, not scored on the
    items it got to."""
    groups = {}  # (task, gen_length) -> records, pooled over ranks / shard files
    for path in expand_paths(paths):
        if os.path.isdir(path):  # ours: the manifest says what was run, the JSONL files hold the items
            man = read_manifest(path)
            require(man.get("complete", True), f"the run in {path} did not finish; resume it with --resume "
                                               f"(the same eval.py command)")
            recs = read_records(path, man)
            task = man["task"]
            # re-score from the stored generation, so a parser fix applies to old runs too (code: runs it again)
            scored = score_batch(registry, task, [r["generation"] for r in recs], [r["example"] for r in recs])
            recs = [{**r, **sc} for r, sc in zip(recs, scored)]
            groups.setdefault((task, man["gen_length"]), []).extend(recs)
            continue
        # d1's released files: task, gen length, steps and rank are in the file name
        m = D1_FILE.search(os.path.basename(path))
        if not m or m["task"] not in D1_TASKS:
            raise ValueError(f"{path}: neither a result directory nor a d1 *_generations.json file")
        task, gen = D1_TASKS[m["task"]], int(m["gen"])
        with open(path) as f:
            # {"generations": [{question, generations, ground_truth}], "metrics": ..., ...} (docs/d1.md §7.2)
            items = json.load(f)["generations"]
        for it in items:
            # d1 stores its parsed gold, not our example: rebuild the fields our parser reads
            ex = parsers.d1_example_from_released(task, it)
            groups.setdefault((task, gen), []).append({"generation": it["generations"],
                                                       **score_batch(registry, task, [it["generations"]], [ex])[0]})
    return groups


def rescore(paths, registry, json_out=None):
    """One line per (task, gen_length): items and accuracy (and the Sudoku solve rate)."""
    rows = []
    for (task, gen), recs in sorted(load_results(paths, registry).items()):
        cells = registry[task].cells
        row = {"task": task, "gen_length": gen, "items": len(recs), "accuracy": round(accuracy(recs, cells), 2)}
        extra = ""
        if cells:
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
    """The lines of rank file `path` a --resume keeps: whole lines (newline-terminated JSON) whose ids are, in
    order, a prefix of this rank's `item_ids`, cut back to whole batches (a multiple of batch_size, or all). The
    batches left to run hold an uninterrupted run's items, each with its generator keyed by its start: same file."""
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:  # bytes, as read_jsonl: a garbled line need not be UTF-8
        lines = f.read().split(b"\n")[:-1]  # what follows the last newline is a torn line (or nothing)
    kept = []
    for line in lines:
        try:
            line = line.decode()
            rec = json.loads(line)
        except ValueError:  # UnicodeDecodeError included
            break  # a torn or garbled line: it and everything after it are generated again
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


# the manifest fields a --resume may see change: when and how long it ran, whether it finished, the paths of the
# model and data as typed or resolved (their contents are compared: model_fingerprint, model_revision, data_sha256)
RESUME_FREE = ("time", "wall_seconds", "complete", "model_dir", "model_spec", "data_file", "sandbox", "provenance")


def result_dir_state(out, settings, resume, force):
    """What a run with manifest `settings` does in result dir `out`: "fresh" (nothing there, or --force:
    rank 0 deletes what is there), "partial" (--resume continues it: an unfinished run, or a finished one
    whose rank files do not hold every record it names) or "complete" (--resume of a finished run: its
    results are only scored). Refuses, with one InputError, a dir holding an earlier run without
    --resume or --force, and a --resume whose settings differ. Reads only."""
    require(not os.path.exists(out) or os.path.isdir(out), f"{out} exists and is not a directory")
    present = run_files(out)
    if not present or force:
        # --resume too: a result dir the killed command never reached is simply run
        return "fresh"
    new = json.loads(json.dumps(settings))  # compared as JSON: tuples are lists
    old = {}
    if MANIFEST in present:
        try:
            old = read_manifest(out)
        except ValueError:
            require(not resume, f"--resume: {out}'s {MANIFEST} is not valid JSON; --force starts over")
    # another model's results first, with or without --resume: --resume could not continue them
    require(not other_weights(old, new), f"{out} holds results of other weights ({old.get('model_dir')}, "
            f"fingerprint {weights_short(old)}) than --model-dir {new.get('model_dir')} ({weights_short(new)}); give this "
            f"model its own --out-dir, or --force to start over (deletes those files)")
    require(resume, f"{out} holds results of an earlier run ({', '.join(present[:3])}); --resume continues it, "
                    f"--force starts over (deletes those files)")
    require(MANIFEST in present, f"--resume: {out} holds rank files but no {MANIFEST} that says what they are; "
                                 f"--force starts over")
    short = lambda v: (s if len(s := json.dumps(v)) <= 40 else s[:37] + "...")
    differ = [f"{k} {short(old.get(k))} -> {short(new.get(k))}" for k in sorted(set(old) | set(new))
              if k not in RESUME_FREE + ("model_fingerprint",) and old.get(k) != new.get(k)]
    require(not differ, f"--resume: {out} was run with other settings ({'; '.join(differ)}); resume with the "
                        f"same flags, or --force to start over")
    if not old.get("complete", True):
        return "partial"
    # a finished run whose rank files lost or garbled records since (a copy cut short, a full disk) is
    # continued like an unfinished one, as read_records' refusal says
    try:
        read_records(out, old)
    except ValueError:
        return "partial"
    return "complete"


# -----------------------------------------------------------------------------
# one result dir on this rank, start to finish; --canonical


def fill_result_dir(out, manifest, state, rank, item_ids, batch_size, run, stop, barrier=None):
    """One run (a result dir in `state` "fresh" or "partial", result_dir_state) on this rank: the manifest first
    ("complete": false: from here on a kill leaves a dir that --rescore refuses and --resume continues); this
    rank's records of `item_ids` appended batch by batch by run(skip=, on_batch=), a --resume keeping the whole
    batches on disk (skip: how many); a stop signal (ops/stop.py) ends the rank at its batch's end, exit 75; every
    rank's file whole (barrier: the group's; None: one process) before rank 0 reads them and marks it complete."""
    t0 = time.time()
    mine = rank_file(out, rank)
    if rank == 0:
        os.makedirs(out, exist_ok=True)
        write_manifest(out, {**manifest, "complete": False})
    if barrier is not None:  # the dir exists (and --force's deletions are done) before any rank writes
        barrier()
    # --resume: the whole batches before a torn or garbled line stay; fresh: an empty file
    done = resume_records(mine, item_ids, batch_size) if state == "partial" else []
    write_atomic(mine, "".join(done))
    if state == "partial":  # what was kept, so a repaired finished run does not pass silently
        print(f"[rank {rank}] --resume: {mine} keeps {len(done)} of its {len(item_ids)} records (whole batches) "
              f"and generates the other {len(item_ids) - len(done)}", flush=True)

    def on_batch(records):
        # a rank's own file (d1 too): no records travel between ranks, a kill loses one batch at most
        append_records(mine, records)
        if stop.signal:  # every rank got it (torchrun passes it on): each stops at its own batch's end
            print(f"[rank {rank}] stopped by {stop.signal} with whole batches in {mine}; the same command with "
                  f"--resume continues", flush=True)
            sys.exit(EXIT_STOPPED)
    run(skip=len(done), on_batch=on_batch)
    if barrier is not None:  # every rank's file is complete before rank 0 reads them back
        barrier()
    if rank == 0:
        read_records(out, manifest)  # every item exactly once, before the manifest says complete
        # wall_seconds: this process's share (a resumed run's earlier part is not counted)
        write_manifest(out, {**manifest, "complete": True, "time": time.strftime("%Y-%m-%d %H:%M:%S"),
                             "wall_seconds": round(time.time() - t0, 1)})


def reference_generation(ex):
    """A code item's reference solution written as a completion in d1's format: a ```python fence
    inside <answer>. --canonical scores these through the very path model generations take."""
    return f"<reasoning>\nThe reference solution.\n</reasoning>\n<answer>\n```python\n{ex['solution']}\n```\n</answer>"


def canonical(task, items, full, data_identity, out_dir, registry):
    """eval.py --canonical: a code benchmark's reference solutions (reference_generation) of `items` [(id, example)]
    through the eval path: JSONL + manifest (data_identity: (data_file, data_sha256)), read back and scored by
    load_results (parse, sandbox) as --rescore does; prints the pass rate, each failure -> (passed, items, failed)."""
    t0 = time.time()
    # written unscored: load_results below scores them, exactly as --rescore scores a saved run
    recs = [{"id": i, "prompt": ex["prompt"], "generation": reference_generation(ex),
             "example": registry[task].scoring_example(ex)} for i, ex in items]
    out = os.path.join(out_dir, f"{task}_canonical")
    os.makedirs(out, exist_ok=True)
    # fixed reference solutions: an earlier canonical run here is replaced, rank file first, then the manifest
    write_atomic(rank_file(out, 0), "".join(json.dumps(r) + "\n" for r in recs))
    write_manifest(out, {"task": task, "data_file": data_identity[0], "data_sha256": data_identity[1],
                         "full": full, "items": len(items), "item_ids": [i for i, _ in items],
                         "gen_length": "canonical", "model_dir": None, "world_size": 1,
                         "parser_version": registry[task].parser_version, "sandbox": contain.mode(),
                         "complete": True})
    (recs,) = load_results([out], registry).values()  # parsed and run from the files: what --rescore reports
    failed = [r["id"] for r in recs if not r["correct"]]
    task_ids = dict(items)
    for r in recs:
        if not r["correct"]:
            print(f"  FAIL {task_ids[r['id']]['task_id']}: {r['tests_passed']}/{r['tests_total']} tests")
    print(f"{task} reference solutions: {len(recs) - len(failed)}/{len(recs)} pass ({time.time() - t0:.0f}s) -> {out}")
    return len(recs) - len(failed), len(recs), failed
