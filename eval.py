"""
Evaluation: d1's protocol (docs/d1.md §8), run on a model directory, one result directory per setting.

d1 evaluates zero-shot and greedy: the eval prompt (tasks.eval_message, NOT the RL prompt) is
rendered with the chat template and prefilled with "<reasoning>", prompts are left-padded in
batches, and the sampler runs with block 32, steps = gen_length / 2 (two tokens per step),
low-confidence remasking, at gen lengths 128 / 256 / 512. Countdown and Sudoku use d1's fixed
256-item subsets (numpy seed 42). Answers are read by d1's "generous" parsers (tasks.score_eval):
first \\boxed{} for GSM8K, last for MATH and Countdown, Sudoku scored per empty cell and
micro-averaged over all puzzles.

This file is that protocol: which items, the sampler schedule, the flags, the checks made before
any work, and the main loop. The rest lives one folder away:
  - tasks.heldout: which items (d1's subsets, the toys' test side of their split);
  - evaluation/evaluate.py: the generate-and-score loop and the sampler's schedule, shared with
    grpo.py --eval-every (the trainer must not import this file);
  - evaluation/results.py: one JSONL line per item per rank and a manifest with every setting, how a
    result dir is read back exactly as its manifest names it, --resume after a kill or a stop
    signal (SIGTERM / SIGUSR1 / Ctrl-C end the run at a batch boundary, exit 75: ops/stop.py), and
    --rescore of saved generations, ours or d1's released JSON files (on d1's files this
    reproduces the paper's LLaDA-8B-Instruct row); its docstring gives the guarantees;
  - lab/stats.py: what d1 left out: --seeds N (mean and 95% CI at temperature > 0), --compare A B
    (paired bootstrap CI over the same items), --summarize (the `make run` table).
Beside d1's cell score, Sudoku also reports the puzzle solve rate.

Run:
    python eval.py                                               # toy task on the tiny model, CPU
    torchrun --nproc_per_node=8 eval.py --model-dir out/grpo-gsm8k --task gsm8k \\
        --data gsm8k/test.jsonl --gen-lengths 128,256,512 --out-dir out/eval/grpo-gsm8k
    python eval.py --rescore d1/eval/eval_baselines     # d1's released generations, in a clone of its repository
    python eval.py --compare out/eval/a/gsm8k_256 out/eval/b/gsm8k_256
"""
import argparse
import functools
import json
import os
import sys
import time

import torch

import tasks
from lab.stats import compare, mean_and_spread, summarize
from taskdata import parsers
from modelio.checkpoint import TINY_DIR, load
from taskdata.records import records_sha256
from evaluation.evaluate import SCORING_FIELDS, accuracy, eval_schedule, run_items
from evaluation.results import (
    append_records,
    clear_run_files,
    load_results,
    model_fingerprint,
    rank_file,
    read_records,
    rescore,
    result_dir_state,
    resume_records,
    write_atomic,
    write_manifest,
)
from evaluation.select import select
from ops import lock
from ops.checks import ShowDefaults, check_data_paths, check_model, require, upfront
from ops.ddp import DIST_TIMEOUT_S, compute_init, default_dtype
from ops.stop import EXIT_STOPPED, Stopper
from methods.sampling import CACHE_MODES, ORDERS
from sample import check_schedule
from taskdata.splits import recorded_split

# -----------------------------------------------------------------------------
# items: which questions d1 asks, each with a stable id


def load_items(task, data, full=False, limit=0, toy_items=200, toy_blanks=(2, 5)):
    """tasks.heldout's items, checked as input (run inside checks.upfront): a known task, its data file
    there and well-formed (the loaders name file:line), and at least one item after --limit."""
    evaluable = tasks.names("score")
    require(task in evaluable, f"--task: unknown task {task!r}; one of {', '.join(evaluable)}")
    check_data_paths([data] if data else [])
    items = tasks.heldout(task, data, full, toy_items, blanks=toy_blanks)[:limit or None]
    require(items, f"--task {task}: no items to evaluate in {data or 'the generated set'}")
    return items


# -----------------------------------------------------------------------------
# --canonical: the code benchmarks' reference solutions through the eval path


def reference_generation(ex):
    """A code item's reference solution written as a completion in d1's format: a ```python fence
    inside <answer>. --canonical scores these through the very path model generations take."""
    return f"<reasoning>\nThe reference solution.\n</reasoning>\n<answer>\n```python\n{ex['solution']}\n```\n</answer>"


def canonical(task, data, full=False, out_dir="out/eval", limit=0):
    """Score a code benchmark's reference solutions (reference_generation) through the eval path: the
    JSONL + manifest, read back and scored by load_results (parse, sandbox) as --rescore does.
    Prints the pass rate and every failure; returns (passed, items, failed item ids)."""
    if task not in tasks.names("code"):
        raise ValueError(f"--canonical needs a code benchmark, one of {tasks.names('code')}, not {task!r}")
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
    data_file, data_sha = data_identity(data)
    write_manifest(out, {"task": task, "data_file": data_file, "data_sha256": data_sha,
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
    require(args.remasking in ORDERS, f"--remasking must be one of {ORDERS}, "
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
    """--gen-lengths as ints; d1 reports every task at 128, 256 and 512 (Table 1; docs/d1.md §8.4)."""
    text = args.gen_lengths or ",".join(map(str, tasks.eval_lengths(args.task)))
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--gen-lengths must be a comma list of integers, got {text!r}") from None


def schedule(args, gen):
    """(block, steps, batch size) at gen length `gen`. d1: block 32, two tokens unmasked per step, 8
    prompts per batch and 4 at gen length 512 (docs/d1.md §8.1). The Sudoku toy's 16-token canvas is a
    single block, the code toy's 48 tokens are 3 blocks of 16; the toys batch 100 prompts
    (evaluation/evaluate.eval_schedule); a flag given overrides its part."""
    block, steps, batch_size = eval_schedule(args.task, gen)
    block, steps = (min(args.block_length, gen) if args.block_length else block), args.steps or steps
    try:
        check_schedule(gen, block, steps)  # whole blocks, and steps that split evenly over them
    except ValueError as e:
        raise ValueError(f"--gen-lengths / --block-length / --steps: {e}") from None
    return block, steps, args.batch_size or batch_size


def result_dir(args, gen, seed):
    """One result directory per (task, gen length[, seed]): what --rescore and --compare read back."""
    return os.path.join(args.out_dir, f"{args.task}_{gen}" + (f"_seed{seed}" if args.seeds > 1 else ""))


@functools.cache  # a hub data set is read once, not once per result dir
def data_identity(data):
    """A manifest's (data_file, data_sha256): a file's absolute path and the sha256 of its bytes, or a hub
    dataset id as typed and the sha256 of its records (taskdata/records.records_sha256); (None, None) without."""
    if not data:
        return None, None
    return (os.path.abspath(data) if os.path.isfile(data) else data), records_sha256(data)


def run_settings(args, items, gen, seed, world, dtype, device, fingerprint):
    """A run's manifest without its time and completion: every setting that can move the number, so that
    --compare can refuse a mismatched pair (lab/stats.py MUST_MATCH) and --resume a changed command
    (evaluation/results.py RESUME_FREE)."""
    block, steps, batch_size = schedule(args, gen)
    return {
        "model_dir": os.path.abspath(args.model_dir), "model_fingerprint": fingerprint,
        "model_spec": args.model_spec, "model_revision": args.model_revision,  # where a hub id led
        "task": args.task, **dict(zip(("data_file", "data_sha256"), data_identity(args.data))), "full": args.full,
        # the toy's items are generated: their ids alone do not say which puzzles they were
        "toy_blanks": args.toy_blanks if tasks.get(args.task).make else None,
        "items": len(items), "item_ids": [i for i, _ in items], "gen_length": gen,
        "block_length": block, "steps": steps, "temperature": args.temperature,
        "remasking": args.remasking, "cache": args.cache or None,
        "threshold": args.threshold or None, "seed": seed, "dtype": str(dtype).removeprefix("torch."),
        # the attended left pads make an item's result depend on its batch, and the batches on the ranks
        "batch_size": batch_size, "world_size": world, "parser_version": parsers.PARSER_VERSION,
        "device": device, "train_split": recorded_split(args.model_dir)}  # the model's --sudoku-split, --val-size


# -----------------------------------------------------------------------------

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="d1-compatible evaluation", formatter_class=ShowDefaults)
    # what to evaluate
    parser.add_argument("--model-dir", type=str, default="", help="the model: a directory in the official layout, "
                        f"a hub cache snapshot, or a hub id owner/name[@revision] (default: {TINY_DIR}, the tiny "
                        "random model, for the toy tasks; a real task must name one)")
    parser.add_argument("--task", type=str, default="toy", help=" | ".join(tasks.names("score")))
    parser.add_argument("--data", type=str, default="", help="the task's test set: a file (jsonl, json, csv, "
                        "parquet) or a hub dataset id owner/name[:config][:split] (needs `pip install datasets`); "
                        "default: none, the toys generate theirs")
    parser.add_argument("--full", action="store_true", help="all items instead of d1's 256 (Countdown, Sudoku)")
    parser.add_argument("--toy-items", type=int, default=200, help="toy / pbe / countdown_toy: held-out items")
    parser.add_argument("--toy-blanks", type=str, default="2,5", help="toy: min,max blank cells of the held-out puzzles")
    parser.add_argument("--limit", type=int, default=0, help="only the first N items (smoke tests)")
    # sampler (d1: block 32, steps = gen / 2, greedy, low confidence)
    parser.add_argument("--gen-lengths", type=str, default="", help="comma list (default: 128,256,512; toy: 16)")
    parser.add_argument("--block-length", type=int, default=0, help="semi-AR block, capped at the gen length "
                        "(0 = d1's 32; pbe: 16)")
    parser.add_argument("--steps", type=int, default=0, help="diffusion steps, 0 = gen_length / 2 (d1)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (d1); > 0 with --seeds")
    parser.add_argument("--remasking", type=str, default="low_confidence", help="low_confidence | random (LLaDA's; "
                        "d1's protocol is low_confidence) | origin | maskgit_plus | topk_margin | entropy (Dream's "
                        "orders, at Dream's eps 1e-3: methods/sampling.py)")
    parser.add_argument("--cache", type=str, default="", choices=["", *CACHE_MODES[1:]],
                        help="'' = exact sampler (d1, the default); prefix / dual = Fast-dLLM KV cache (approximate)")
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
                        "end up identical to an uninterrupted run's); a finished one is only scored (unless its "
                        "rank files lost or garbled records since: then it is continued the same way), and one that "
                        "does not exist yet is run from scratch, so one --resume continues a multi-length, "
                        "multi-seed eval that died half way")
    parser.add_argument("--force", action="store_true", help="start over in result dirs that hold an earlier run "
                        "(deletes their manifest.json and generations.rank*.jsonl); with --compare: compare even "
                        "if the manifests disagree")
    parser.add_argument("--json", type=str, default="", help="also write [{task, gen_length, items, accuracy}] here "
                        "(default: nowhere)")
    parser.add_argument("--rescore", type=str, nargs="+", help="re-score result dirs / d1 *_generations.json files "
                        "(or folders of them); default: evaluate instead")
    parser.add_argument("--compare", type=str, nargs=2, metavar=("A", "B"), help="paired bootstrap CI of B - A "
                        "(default: evaluate instead)")
    parser.add_argument("--summarize", type=str, default="", help="print the table of lab/runs/toy.sh's run dir "
                        "(default: evaluate instead)")
    parser.add_argument("--canonical", action="store_true", help="code benchmarks: score the reference solutions")
    parser.add_argument("--select", type=str, default="", metavar="RUN_DIR", help="a grpo.py run with best.json: "
                        "its final and validation-selected checkpoints on the test set (evaluation/select.py; "
                        "default: none, evaluate --model-dir)")
    parser.add_argument("--select-nproc", type=int, default=1, help="--select: processes (GPUs) per eval, "
                        "under torchrun")
    args = parser.parse_args()

    # the model-free modes first: no process group, no model, no GPU. Everything they read is input, so a
    # missing path, an unfinished run or a bad file is one line (checks.upfront)
    if args.rescore:  # evaluation/results.py: our result dirs and d1's released files, through d1's parsers
        with upfront():
            rescore(args.rescore, args.json)
        raise SystemExit
    if args.compare:  # lab/stats.py: the paired bootstrap over the items both runs share
        with upfront():
            compare(*args.compare, force=args.force)
        raise SystemExit
    if args.summarize:  # lab/stats.py: the SFT vs SFT + diffu-GRPO table over seeds (`make run`)
        with upfront():
            summarize(args.summarize)
        raise SystemExit
    if args.select:  # the honest protocol (docs/evaluation.md): eval.py per checkpoint, then the table
        raise SystemExit(select(args.select, args.task, sys.argv[1:], args.out_dir, args.select_nproc))
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
        check_model(args, TINY_DIR if tasks.get(args.task).make else None)  # a hub id becomes its snapshot
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
                if rank == 0:  # one run per result dir (ops/lock.py), held from before its state is read
                    lock.take(out, "result dir")
                runs[gen, seed] = out, settings, result_dir_state(out, settings, args.resume, args.force)
    if args.force and rank == 0:
        # only now that every check passed; the other ranks wait for rank 0 in the process group's set-up
        for out, _, _ in runs.values():
            clear_run_files(out)

    # -------------------------------------------------------------------------
    # distributed init: torchrun shards the items, rank r takes items r, r + W, ... (as d1)
    # a process group only under torchrun; the model is never wrapped (no training, no gradients)
    ddp, rank, _, world, device, device_type = compute_init(timeout_s=args.dist_timeout)
    stop = Stopper()  # SIGTERM / SIGUSR1 / Ctrl-C: finish the batch in flight, then exit 75 (ops/stop.py)
    if ddp:
        import torch.distributed as dist

    # -------------------------------------------------------------------------
    # model and items; every rank has the same item list and keeps its stride
    # d1 evaluates the bf16 weights, not quantized, even for adapters trained on a 4-bit base (docs/d1.md §8.1)
    with upfront():  # a weight that is NaN or inf: one line naming it (checkpoint.from_pretrained)
        model, tokenizer = load(args.model_dir, device=device, dtype=dtype)
    # again after loading: on first use load() has just created the default tiny model
    fingerprint = model_fingerprint(args.model_dir)
    # d1's DistributedSampler(shuffle=False), without padding duplicates: rank r gets r, r + W, ... (docs/d1.md §8.1)
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
                # --resume: the whole batches before a torn or garbled line stay; fresh: an empty file
                done = resume_records(mine, [i for i, _ in my_items], bs) if state == "partial" else []
                write_atomic(mine, "".join(done))
                if state == "partial":  # what was kept, so a repaired finished run does not pass silently
                    print(f"[rank {rank}] --resume: {mine} keeps {len(done)} of its {len(my_items)} records "
                          f"(whole batches) and generates the other {len(my_items) - len(done)}", flush=True)
                def on_batch(records, mine=mine):
                    # each rank appends to its own file batch by batch (d1 too: one JSON per rank), so no records
                    # travel between ranks and a kill loses at most the batch in flight
                    append_records(mine, records)
                    if stop.signal:  # every rank got it (torchrun passes it on): each stops at its own batch's end
                        print(f"[rank {rank}] stopped by {stop.signal} with whole batches in {mine}; the same "
                              f"command with --resume continues", flush=True)
                        sys.exit(EXIT_STOPPED)
                run_items(model, tokenizer, args.task, my_items, gen, block, steps, args.temperature,
                          args.remasking, bs, seed, show_progress=rank == 0, cache=args.cache or None,
                          threshold=args.threshold or None, skip=len(done), on_batch=on_batch)
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
                    if tasks.get(args.task).cells else ""
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
