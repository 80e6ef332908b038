"""
Evaluation: d1's protocol (docs/d1.md §8), run on a model directory, one result dir per setting.

d1 evaluates zero-shot and greedy: the eval prompt (tasks.eval_message, NOT the RL prompt) is
chat-templated and prefilled with "<reasoning>", prompts are left-padded in batches, and the sampler
runs with block 32, steps = gen_length / 2 (two tokens per step), low-confidence remasking, at gen
lengths 128 / 256 / 512. Countdown and Sudoku use d1's fixed 256-item subsets (numpy seed 42).
Answers are read by d1's "generous" parsers (the task's record in tasks.py): first \\boxed{} for
GSM8K, last for MATH and Countdown, Sudoku scored per empty cell, micro-averaged over all puzzles.

This file is that protocol: which items, the sampler's schedule, the generate-and-score loop (which
grpo.py --eval-every runs on its validation split too: validation_curve), the flags, the checks made
before any work, and the main loop. The bookkeeping lives one folder away, in ops/:
  - results.py: one JSONL line per item per rank and a manifest with every setting, how a result
    dir is read back exactly as its manifest names it, --resume after a kill or a stop signal
    (SIGTERM / SIGUSR1 / Ctrl-C end the run at a batch boundary, exit 75: ops/stop.py), --rescore
    of saved generations, ours or d1's released JSON files (on d1's files this reproduces the
    paper's LLaDA-8B-Instruct row), and --canonical; its docstring gives the guarantees;
  - stats.py: what d1 left out: --seeds N (mean and 95% CI at temperature > 0), --compare A B
    (paired bootstrap CI over the same items), --summarize (the `make run` table);
  - select.py: --select, the honest protocol's test accuracy, final vs validation-selected save.
Beside d1's cell score, Sudoku also reports the puzzle solve rate. --cache / --threshold (Fast-dLLM)
and Dream's --remasking orders take the field's sampler (methods/sampling.py).

Run:
    python eval.py                                   # toy task on the tiny model, CPU
    torchrun --nproc_per_node=8 eval.py --model-dir out/grpo-gsm8k --task gsm8k \\
        --data gsm8k/test.jsonl --gen-lengths 128,256,512 --out-dir out/eval/grpo-gsm8k
    python eval.py --rescore d1/eval/eval_baselines  # d1's released generations, in a d1 clone
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
from methods import sampling
from modelio.checkpoint import TINY_DIR, load
from modelio.families import pad_mask
from modelio.provenance import start_record
from modelio.tokenizer import prompt_ids
from ops import lock
from ops.checks import (ShowDefaults, check_data_paths, check_eval_args, check_model, require,
                        sandbox_mode, upfront)
from ops.ddp import DIST_TIMEOUT_S, compute_init, default_dtype
from ops.metrics import progress
from ops.results import (canonical, clear_run_files, data_identity, fill_result_dir,
                         load_results, model_fingerprint, rescore, result_dir_state)
from ops.results import accuracy as accuracy_of
from ops.select import select
from ops.stats import compare, mean_and_spread, summarize
from ops.stop import Stopper
from ops.validation import ValCurve
from sample import REMASKING_STRATEGIES, check_schedule, generate
from taskdata.data import pad_left, real_tokens, toy_blanks
from taskdata.records import data_record
from taskdata.splits import recorded_split

CURVE_SEED = 54_321  # --test-curve's training-side items: a stream apart from SFT's and RL's

# -----------------------------------------------------------------------------
# d1's protocol: which items, the sampler's schedule, the prompts, generate and score


def load_items(task, data, full=False, limit=0, toy_items=200, blanks=(2, 5)):
    """tasks.heldout's items, checked as input (run inside checks.upfront): a known task, its data
    file there and well-formed (the loaders name file:line), and at least one item after --limit."""
    evaluable = tasks.names("score")
    require(task in evaluable, f"--task: unknown task {task!r}; one of {', '.join(evaluable)}")
    check_data_paths([data] if data else [])
    items = tasks.heldout(task, data, full, toy_items, blanks=blanks)[:limit or None]
    require(items, f"--task {task}: no items to evaluate in {data or 'the generated set'}")
    return items


def eval_schedule(task, gen):
    """d1's eval sampler at gen length `gen` (docs/d1.md §8.1) as the task's record adapts it:
    (block, steps, prompts per batch). Block 32, or the task's own (a canvas shorter than a block is
    one block); two tokens unmasked per step; 8 prompts per batch, 4 at gen 512, or the task's own
    (toys: 100). The batch is part of the protocol: it decides which pads an item attends to."""
    t = tasks.get(task)
    return min(t.block or 32, gen), gen // 2, t.eval_batch or (4 if gen >= 512 else 8)


def eval_prompt_ids(tokenizer, task, example):
    """d1's eval prompt as ids: chat template + "<reasoning>" prefill (the toy: its bare prompt)."""
    # NOT the RL prompt: d1's eval asks for \\boxed{} answers on GSM8K and Countdown, which RL
    # trained with bare <answer> tags (docs/d1.md §8.2, §10.8)
    return prompt_ids(tokenizer, tasks.eval_message(task, example),
                      prefill=tasks.eval_prefill(task))


@torch.no_grad()
def run_items(model, tokenizer, task, items, gen_length, block_length, steps, temperature=0.0,
              remasking="low_confidence", batch_size=8, seed=0, show_progress=False, cache=None,
              threshold=None, skip=0, on_batch=None):
    """Generate and score `items` [(id, example)] -> list of per-item records. Batches of
    left-padded prompts with EOS as the pad (LLaDA attends them, as in d1: results depend slightly
    on the batch composition, which the manifest records; Dream hides them, as its own eval).
    cache / threshold: the approximate Fast-dLLM options, and Dream's remasking orders
    (methods/sampling.py; None = the exact sampler, d1's).
    skip: the first `skip` items are done already (a resume; a multiple of batch_size), so the
    later batches keep their items and their generators. show_progress: draw a bar (rank 0).
    on_batch(records): called after each batch (eval.py appends it to disk)."""
    model.eval()
    device = next(model.parameters()).device
    # EOS 126081 is LLaDA's pad, as d1's padding="longest", padding_side="left" (docs/d1.md §2.4)
    eos = model.config.eos_token_id
    field = cache is not None or threshold is not None or remasking not in REMASKING_STRATEGIES
    records = []
    for i in progress(range(skip, len(items), batch_size), show_progress,
                      desc=f"{task} {gen_length}"):
        # consecutive items of this rank's stride, as d1's unshuffled sampler batches them: at d1's
        # world size and batch size each batch holds d1's items, so even the attended pads match
        batch = items[i:i + batch_size]
        rows = [eval_prompt_ids(tokenizer, task, ex) for _, ex in batch]
        P = max(len(r) for r in rows)
        # left-padded. LLaDA attends the pads (no attention mask, as d1), so an item's result can
        # depend on which other prompts share its batch (batch_size goes into the manifest); Dream
        # hides them as keys from every query, as its generate does (modelio/families.pad_mask)
        prompt, pads = pad_left(rows, eos).to(device), pad_mask(model, real_tokens(rows))  # (b, P)
        # one generator per batch, keyed by seed and position: reproducible at temperature > 0.
        # On the model's device: CPU-drawn (b, block, V) Gumbel noise would dominate a GPU run
        g = torch.Generator(device=device).manual_seed(seed * 1_000_003 + i)
        # d1 (docs/d1.md §8.1): block 32, steps = N / 2, τ = 0, low_confidence, cfg 0. Deviation:
        # d1's eval used fp16 autocast (docs/d1.md §2.2); we keep the weights' dtype (bf16 on GPU)
        kw = dict(gen_length=gen_length, block_length=block_length, steps=steps,
                  temperature=temperature, remasking=remasking, generator=g, attention_mask=pads)
        out = (sampling.generate(model, prompt, **kw, cache=cache, threshold=threshold) if field
               else generate(model, prompt, **kw))  # (b, P + gen_length)
        # decoded with special tokens kept, as d1 stores them (its parsers cope with them); the
        # toy's verifier reads the text the way the RL reward does, specials stripped
        texts = tokenizer.batch_decode(out[:, P:],
                                       skip_special_tokens=tasks.get(task).make is not None)
        batch_records = score_records(task, batch, texts)
        if on_batch is not None:
            on_batch(batch_records)
        records += batch_records
    return records


def score_records(task, items, texts):
    """One record per (id, example) and its generation: d1's lenient eval parsers (boxes first,
    numeric compare; docs/d1.md §8.3), not the RL rewards; code benchmarks run in the sandbox."""
    records = []
    for (item_id, ex), text, scored in zip(
            items, texts, tasks.score_eval_batch(task, texts, [ex for _, ex in items])):
        # the fields the parsers need travel with the record, so --rescore needs no data file
        gold = tasks.get(task).scoring_example(ex)
        records.append({"id": item_id, "prompt": ex["prompt"], "generation": text, "example": gold,
                        **scored})
    return records


def accuracy(task, records):
    """Accuracy in percent: d1's micro-averaged cell score for Sudoku, else the solved share."""
    return accuracy_of(records, tasks.get(task).cells)


def toy_curve_sets(task="toy", n=200, data_seed=0):
    """The two item sets of grpo.py --test-curve: {"heldout_acc": eval.py's held-out items,
    "train_acc": n new items of the split's TRAINING side} (Sudoku toy: new puzzles of the training
    grids; 4x4 Sudoku has only 288 solution grids: a model can score by recalling those it saw)."""
    return {"heldout_acc": tasks.heldout(task, n=n, data_seed=data_seed),
            "train_acc": list(enumerate(
                tasks.make_examples(task, "train", n, CURVE_SEED, data_seed)))}


def validation_curve(args, model, tokenizer, val):
    """grpo.py's --eval-every curve (ops/validation.ValCurve) from its flags: greedy accuracy on the
    validation split `val` with this protocol at --val-gen-length, else the rollout canvas (toys:
    their eval canvas); --test-curve adds the toy's test-set study curve, at its canvas."""
    def measure(task, items, gen=0):
        gen = gen or args.val_gen_length or tasks.get(task).canvas or args.gen_length
        block, steps, batch = eval_schedule(task, gen)
        return accuracy(task, run_items(model, tokenizer, task, items, gen, block, steps,
                                        batch_size=batch))
    test = ({name: functools.partial(measure, args.task, items, tasks.get(args.task).canvas)
             for name, items in toy_curve_sets(args.task, args.eval_items, args.data_seed).items()}
            if args.test_curve else None)
    return ValCurve(args.eval_every, args.rounds, val, measure, test)


# -----------------------------------------------------------------------------
# the runs of one command: one result directory per (gen length, seed), with its settings


def gen_lengths(args):
    """--gen-lengths as ints; d1 reports each task at 128, 256, 512 (Table 1; docs/d1.md §8.4)."""
    text = args.gen_lengths or ",".join(map(str, tasks.eval_lengths(args.task)))
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--gen-lengths must be a comma list of integers, got {text!r}") from None


def schedule(args, gen):
    """(block, steps, batch size) at gen length `gen`. d1: block 32, two tokens unmasked per step,
    8 prompts per batch and 4 at gen length 512 (docs/d1.md §8.1). The Sudoku toy's 16-token
    canvas is a single block, the code toy's 48 tokens are 3 blocks of 16; the toys batch 100
    prompts (eval_schedule); a flag given overrides its part."""
    block, steps, batch_size = eval_schedule(args.task, gen)
    block, steps = min(args.block_length, gen) if args.block_length else block, args.steps or steps
    try:
        check_schedule(gen, block, steps)  # whole blocks, and steps that split evenly over them
    except ValueError as e:
        raise ValueError(f"--gen-lengths / --block-length / --steps: {e}") from None
    return block, steps, args.batch_size or batch_size


def result_dir(args, gen, seed):
    """One result dir per (task, gen length[, seed]): what --rescore and --compare read back."""
    return os.path.join(args.out_dir,
                        f"{args.task}_{gen}" + (f"_seed{seed}" if args.seeds > 1 else ""))


def run_settings(args, items, gen, seed, world, dtype, device, fingerprint):
    """A run's manifest without its time and completion: every setting that can move the number,
    so that --compare can refuse a mismatched pair (ops/stats.py MUST_MATCH) and --resume a
    changed command (ops/results.py RESUME_FREE)."""
    block, steps, batch_size = schedule(args, gen)
    return {
        "model_dir": os.path.abspath(args.model_dir), "model_fingerprint": fingerprint,
        "model_spec": args.model_spec, "model_revision": args.model_revision,  # where a hub id led
        "task": args.task, **dict(zip(("data_file", "data_sha256"), data_identity(args.data))),
        # toy_blanks: a toy's items are generated; their ids alone don't say which puzzles they were
        "full": args.full, "toy_blanks": args.toy_blanks if tasks.get(args.task).make else None,
        "items": len(items), "item_ids": [i for i, _ in items], "gen_length": gen,
        "block_length": block, "steps": steps, "temperature": args.temperature,
        "remasking": args.remasking, "cache": args.cache or None,
        "threshold": args.threshold or None, "seed": seed,
        "dtype": str(dtype).removeprefix("torch."),
        # an item's result depends on its batch (attended left pads), the batches on the ranks
        "batch_size": batch_size, "world_size": world, "device": device,
        "parser_version": tasks.get(args.task).parser_version,  # the task's own (its record)
        "sandbox": args.sandbox_mode,  # code's isolation (None: no code)
        "train_split": recorded_split(args.model_dir)}  # the model's --sudoku-split, --val-size


# -----------------------------------------------------------------------------

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="d1-compatible evaluation",
                                     formatter_class=ShowDefaults)
    # what to evaluate
    parser.add_argument("--model-dir", type=str, default="",
                        help="the model: a directory in the official layout, a hub cache "
                        f"snapshot, or a hub id owner/name[@revision] (default: {TINY_DIR}, the "
                        "tiny random model, for the toy tasks; a real task must name one)")
    parser.add_argument("--task", type=str, default="toy", help=" | ".join(tasks.names("score")))
    parser.add_argument("--data", type=str, default="", help="the task's test set: a file (jsonl, "
                        "json, csv, parquet) or a hub dataset id owner/name[:config][:split] "
                        "(needs `pip install datasets`); default: none, the toys generate theirs")
    parser.add_argument("--full", action="store_true",
                        help="all items instead of d1's 256 (Countdown, Sudoku)")
    parser.add_argument("--toy-items", type=int, default=200,
                        help="toy / pbe / countdown_toy: held-out items")
    parser.add_argument("--toy-blanks", type=str, default="2,5",
                        help="toy: min,max blank cells of the held-out puzzles")
    parser.add_argument("--limit", type=int, default=0, help="only the first N items (smoke tests)")
    # sampler (d1: block 32, steps = gen / 2, greedy, low confidence)
    parser.add_argument("--gen-lengths", type=str, default="",
                        help="comma list (default: 128,256,512; toy: 16)")
    parser.add_argument("--block-length", type=int, default=0,
                        help="semi-AR block, capped at the gen length (0 = d1's 32; pbe: 16)")
    parser.add_argument("--steps", type=int, default=0,
                        help="diffusion steps, 0 = gen_length / 2 (d1)")
    parser.add_argument("--temperature", type=float, default=0.0,
                        help="0 = greedy (d1); > 0 with --seeds")
    parser.add_argument("--remasking", type=str, default="low_confidence",
                        help="low_confidence | random (LLaDA's; d1's protocol is low_confidence) | "
                        "origin | maskgit_plus | topk_margin | entropy (Dream's orders, at Dream's "
                        "eps 1e-3: methods/sampling.py)")
    parser.add_argument("--cache", type=str, default="", choices=["", *sampling.CACHE_MODES[1:]],
                        help="'' = exact sampler (d1, the default); prefix / dual = Fast-dLLM KV "
                        "cache (approximate)")
    parser.add_argument("--threshold", type=float, default=0.0,
                        help="0 = off; Fast-dLLM parallel unmasking (0.9)")
    parser.add_argument("--batch-size", type=int, default=0,
                        help="prompts per batch; 0 = d1's 8 (4 at gen 512), toy 100")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--seeds", type=int, default=1, help="run seeds seed .. seed+N-1 (needs "
                        "--temperature > 0); report mean and 95%% CI")
    parser.add_argument("--dtype", type=str, default="",
                        help="float32 | bfloat16 (default: bf16 on GPU, fp32 on CPU)")
    parser.add_argument("--sandbox", default="auto", choices=["auto", "plain"], help="code: auto = "
                        "the strongest isolation here, or refuse; plain = accept unisolated scores")
    parser.add_argument("--dist-timeout", type=int, default=DIST_TIMEOUT_S, help="seconds a "
                        "collective waits for a lost rank before this one stops with a message")
    # outputs and the model-free modes
    parser.add_argument("--out-dir", type=str, default="out/eval",
                        help="results: <out-dir>/<task>_<gen>[_seed<s>]/")
    parser.add_argument("--resume", action="store_true", help="continue the runs of this same "
                        "command after a crash or kill: each result dir keeps its whole batches on "
                        "disk and generates the rest (the files end up identical to an "
                        "uninterrupted run's); a finished one is only scored (unless its rank "
                        "files lost or garbled records since: then it is continued the same way), "
                        "and one that does not exist yet is run from scratch, so one --resume "
                        "continues a multi-length, multi-seed eval that died half way")
    parser.add_argument("--force", action="store_true", help="start over in result dirs that hold "
                        "an earlier run (deletes their manifest.json and generations.rank*.jsonl); "
                        "with --compare: compare even if the manifests disagree")
    parser.add_argument("--json", type=str, default="", help="also write [{task, gen_length, "
                        "items, accuracy}] here (default: nowhere)")
    parser.add_argument("--rescore", type=str, nargs="+", help="re-score result dirs / d1 "
                        "*_generations.json files (or folders of them); default: evaluate instead")
    parser.add_argument("--compare", type=str, nargs=2, metavar=("A", "B"),
                        help="paired bootstrap CI of B - A (default: evaluate instead)")
    parser.add_argument("--summarize", type=str, default="", help="print the table of "
                        "lab/runs/toy.sh's run dir (default: evaluate instead)")
    parser.add_argument("--canonical", action="store_true",
                        help="code benchmarks: score the reference solutions")
    parser.add_argument("--select", type=str, default="", metavar="RUN_DIR", help="a grpo.py run "
                        "with best.json: its final and validation-selected checkpoints on the test "
                        "set (ops/select.py; default: none, evaluate --model-dir)")
    parser.add_argument("--select-nproc", type=int, default=1,
                        help="--select: processes (GPUs) per eval, under torchrun")
    args = parser.parse_args()

    # the model-free modes first: no process group, no model, no GPU. Everything they read is
    # input, so a missing path, an unfinished run or a bad file is one line (checks.upfront)
    if args.rescore:  # ops/results.py: our result dirs and d1's released files through d1's parsers
        with upfront():
            rescore(args.rescore, tasks.TASKS, args.json)
        raise SystemExit
    if args.compare:  # ops/stats.py: the paired bootstrap over the items both runs share
        with upfront():
            compare(*args.compare, tasks.TASKS, force=args.force)
        raise SystemExit
    if args.summarize:  # ops/stats.py: the SFT vs SFT + diffu-GRPO table over seeds (`make run`)
        with upfront():
            summarize(args.summarize)
        raise SystemExit
    if args.select:  # honest protocol (docs/evaluation.md): eval.py per checkpoint, then the table
        raise SystemExit(select(args.select, args.task, sys.argv[1:], args.out_dir, tasks.TASKS,
                                args.select_nproc))
    if args.canonical:  # code benchmarks' reference solutions via the eval path (ops/results.py)
        with upfront():
            require(args.task in tasks.names("code"), f"--canonical needs a code benchmark, one of "
                                                      f"{tasks.names('code')}, not {args.task!r}")
            sandbox_mode(args.sandbox, True)
            canonical(args.task, load_items(args.task, args.data, args.full, args.limit), args.full,
                      data_identity(args.data), args.out_dir, tasks.TASKS)
        raise SystemExit

    # -------------------------------------------------------------------------
    # bad input is one line, exit 2, before any process group, model or file (checks.py): the flags,
    # the items (a malformed record is named file:line), every schedule, the model dir's headers,
    # what each result dir of this command holds. All ranks run the same checks: all refuse
    world, rank = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("RANK", 0))  # torchrun's
    with upfront():
        check_eval_args(args, sampling.ORDERS, tasks.TASKS)  # --sandbox too: args.sandbox_mode
        all_items = load_items(args.task, args.data, args.full, args.limit, args.toy_items,
                               toy_blanks(args.toy_blanks))
        gens, seeds = gen_lengths(args), range(args.seed, args.seed + args.seeds)
        check_model(args, TINY_DIR if tasks.get(args.task).make else None)  # hub id -> snapshot
        # the run's dtype and device (compute_init picks cuda the same way), for its manifest
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = default_dtype(args.dtype, device_type)
        local_rank = int(os.environ.get("LOCAL_RANK", 0))  # the GPU compute_init selects later
        device_name = torch.cuda.get_device_name(local_rank) if device_type == "cuda" else "cpu"
        # (gen, seed) -> (result dir, settings, "fresh" | "partial" | "complete"), all decided now:
        # a command that would refuse its third result dir must not spend hours on the first two
        runs, fingerprint = {}, model_fingerprint(args.model_dir)
        for gen in gens:
            for seed in seeds:
                settings = run_settings(args, all_items, gen, seed, world, dtype, device_name,
                                        fingerprint)
                out = result_dir(args, gen, seed)
                if rank == 0:  # one run per result dir (ops/lock.py); held before reading its state
                    lock.take(out, "result dir")
                runs[gen, seed] = out, settings, result_dir_state(out, settings, args.resume,
                                                                  args.force)
    if args.force and rank == 0:
        # only now that every check passed; the other ranks wait for rank 0 in the group's set-up
        for out, _, _ in runs.values():
            clear_run_files(out)

    # -------------------------------------------------------------------------
    # distributed init: torchrun shards the items, rank r takes items r, r + W, ... (as d1)
    # a process group only under torchrun; the model is never wrapped (no training, no gradients)
    ddp, rank, _, world, device, device_type = compute_init(timeout_s=args.dist_timeout)
    stop = Stopper()  # SIGTERM/SIGUSR1/Ctrl-C: end after the batch in flight, exit 75 (ops/stop.py)
    if ddp:
        import torch.distributed as dist
    barrier = dist.barrier if ddp else lambda: None

    # -------------------------------------------------------------------------
    # model and items; every rank has the same item list and keeps its stride
    # d1 evaluates bf16 weights, unquantized, even for adapters from a 4-bit base (docs/d1.md §8.1)
    with upfront():  # a weight that is NaN or inf: one line naming it (checkpoint.from_pretrained)
        model, tokenizer = load(args.model_dir, device=device, dtype=dtype)
        # the items' labels fit each canvas, as in sft.py and grpo.py
        tasks.check_canvas(args.task, tokenizer, [ex for _, ex in all_items], min(gens),
                           "--gen-lengths")
    # again after loading: on first use load() has just created the default tiny model; with it
    # where the weights and the data came from (modelio/provenance.py)
    fingerprint = model_fingerprint(args.model_dir)
    provenance = start_record(args.model_spec, args.model_dir, args.model_revision,
                              [data_record(args.data)] if args.data else [])
    # d1's DistributedSampler(shuffle=False), unpadded: rank r gets r, r + W, ... (docs/d1.md §8.1)
    my_items = all_items[rank::world]
    rows = []  # one summary row per gen length (the mean over seeds)
    for gen in gens:
        block, steps, bs = schedule(args, gen)
        accs = []
        for seed in seeds:
            out, settings, state = runs[gen, seed]
            manifest = {**settings, "model_fingerprint": fingerprint, "provenance": provenance}
            t0 = time.time()
            if state != "complete":  # generate this rank's items in the result dir (ops/results.py)
                fill_result_dir(
                    out, manifest, state, rank, [i for i, _ in my_items], bs,
                    lambda skip, on_batch: run_items(
                        model, tokenizer, args.task, my_items, gen, block, steps,
                        args.temperature, args.remasking, bs, seed, show_progress=rank == 0,
                        cache=args.cache or None, threshold=args.threshold or None, skip=skip,
                        on_batch=on_batch),
                    stop, barrier)
            if rank == 0:
                # score all ranks' pooled files through load_results, the same path as --rescore
                (recs_all,) = load_results([out], tasks.TASKS).values()
                accs.append(accuracy(args.task, recs_all))
                solved = (f", puzzles solved "
                          f"{100 * sum(r['solved'] for r in recs_all) / len(recs_all):.1f}%"
                          if tasks.get(args.task).cells else "")
                print(f"{args.task} gen {gen} seed {seed}: accuracy {accs[-1]:.1f}%{solved} on "
                      f"{len(recs_all)} items ({time.time() - t0:.0f}s) -> {out}")
        if rank == 0:
            # one seed (greedy, d1's protocol): m is that run's accuracy and no interval is printed
            m, sd, ci = mean_and_spread(accs)
            if len(accs) > 1:
                print(f"{args.task} gen {gen}: mean {m:.1f}% ± {ci:.1f} (95% CI over {len(accs)} "
                      f"seeds, std {sd:.1f})")
            # --json gets the mean over seeds, the format summarize() and --rescore --json share
            rows.append({"task": args.task, "gen_length": gen, "items": len(all_items),
                         "accuracy": round(m, 2)})
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    if ddp:
        # every rank waits for rank 0 to score and write, then the group goes down together: a rank
        # that left first tore gloo's pairs under the others and aborted one (ddp.finish)
        dist.barrier()
        dist.destroy_process_group()
