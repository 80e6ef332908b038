"""
Evaluation: d1's protocol (docs/d1.md §8) on a model directory, one result dir per setting.

d1 evaluates zero-shot and greedy: the eval prompt (tasks.eval_message, NOT the RL prompt) is
chat-templated and prefilled with "<reasoning>", prompts are left-padded in batches, and the
sampler runs with block 32, steps = gen_length / 2 (two tokens per step), low-confidence
remasking, at gen lengths 128 / 256 / 512. Countdown and Sudoku use d1's fixed 256-item subsets
(numpy seed 42). Answers are read by d1's "generous" parsers (the task's record in tasks.py):
first \\boxed{} for GSM8K, last for MATH and Countdown, Sudoku scored per empty cell,
micro-averaged over all puzzles (and its puzzle solve rate beside it).

This file is that protocol: the items, the sampler's schedule, the generate-and-score loop
(grpo.py --eval-every runs it on its validation split: validation_curve), the flags, the checks
made before any work, and the main loop. The bookkeeping is ops/results.py's: the manifest and
the JSONL files, --resume after a kill or a stop signal (exit 75: ops/stop.py), --rescore of
saved generations, ours or d1's released files (on d1's it gives the paper's LLaDA-8B-Instruct
row), --canonical. --seeds N (at temperature > 0) adds what d1 left out: mean and 95% CI.
Another sampler runs this same protocol through main's parameters.

Run:
    python eval.py                                   # toy task on the tiny model, CPU
    torchrun --nproc_per_node=8 eval.py --model-dir out/grpo-gsm8k --task gsm8k \\
        --data gsm8k/test.jsonl --gen-lengths 128,256,512 --out-dir out/eval/grpo-gsm8k
    python eval.py --rescore d1/eval/eval_baselines  # d1's released generations, in a d1 clone
"""
import argparse
import functools
import json
import os
import time

import torch
import torch.distributed as dist

import tasks
from logprob import SEED_STRIDE
from modelio.checkpoint import TINY_DIR, load
from modelio.families import left_pad_mask
from modelio.provenance import start_record
from modelio.tokenizer import prompt_ids
from ops import lock
from ops.checks import (ShowDefaults, check_data_paths, check_eval_args, check_model, require,
                        sandbox_mode, upfront)
from ops.ddp import DIST_TIMEOUT_S, compute_init, default_dtype
from ops.metrics import progress
from ops.results import (accuracy, canonical, clear_run_files, data_identity, fill_result_dir,
                         load_results, model_fingerprint, rescore, result_dir_state,
                         run_settings)
from ops.stats import mean_and_spread
from ops.stop import Stopper
from ops.validation import ValCurve
from sample import REMASKING_STRATEGIES, check_schedule, generate
from taskdata.data import pad_left, real_tokens, toy_blanks
from taskdata.records import data_record

CURVE_SEED = 54_321  # --test-curve's training-side items: a stream apart from SFT's and RL's

# -----------------------------------------------------------------------------
# d1's protocol: which items, the sampler's schedule, the prompts, generate and score


def load_items(task, data, full=False, limit=0, toy_items=200, blanks=(2, 5)):
    """tasks.heldout's items, checked as input (run inside checks.upfront): a known task, its
    data file there and well-formed (the loaders name file:line), and an item after --limit."""
    evaluable = tasks.names("score")
    require(task in evaluable, f"--task: unknown task {task!r}; one of {', '.join(evaluable)}")
    check_data_paths([data] if data else [])
    items = tasks.heldout(task, data, full, toy_items, blanks=blanks)[:limit or None]
    require(items, f"--task {task}: no items to evaluate in {data or 'the generated set'}")
    return items


def eval_schedule(task, gen):
    """d1's eval sampler at gen length `gen` (docs/d1.md §8.1) as the task's record adapts it:
    (block, steps, prompts per batch). Block 32, or the task's own (a canvas shorter than a
    block is one block); two tokens unmasked per step; 8 prompts per batch, 4 at gen 512, or
    the task's own (toys: 100). The batch is part of the protocol: it decides the pads seen."""
    t = tasks.get(task)
    return min(t.block or 32, gen), gen // 2, t.eval_batch or (4 if gen >= 512 else 8)


def eval_prompt_ids(tokenizer, task, example):
    """d1's eval prompt as ids: chat template + "<reasoning>" prefill (toys: a bare prompt)."""
    # NOT the RL prompt: d1's eval asks for \\boxed{} answers on GSM8K and Countdown, which RL
    # trained with bare <answer> tags (docs/d1.md §8.2, §10.8)
    return prompt_ids(tokenizer, tasks.eval_message(task, example),
                      prefill=tasks.eval_prefill(task))


@torch.no_grad()
def run_items(model, tokenizer, task, items, gen_length, block_length, steps, temperature=0.0,
              remasking="low_confidence", batch_size=8, seed=0, show_progress=False, skip=0,
              on_batch=None, sampler=generate):
    """Generate and score `items` [(id, example)] -> list of per-item records, in batches of
    left-padded prompts. skip: the first `skip` items are done already (a resume; a multiple of
    batch_size), so the later batches keep their items and their generators. show_progress:
    draw a bar (rank 0). on_batch(records): called after each batch (eval.py appends it to
    disk). sampler: what fills each batch's canvas, a function with sample.generate's signature
    (the default: d1's exact sampler); another one runs this same protocol in its place."""
    model.eval()
    device = next(model.parameters()).device
    eos = model.config.eos_token_id  # LLaDA's pad 126081, as d1's padding_side="left" (§2.4)
    records = []
    for i in progress(range(skip, len(items), batch_size), show_progress,
                      desc=f"{task} {gen_length}"):
        # consecutive items of this rank's stride, as d1's unshuffled sampler batches them: at
        # d1's world size and batch size each batch holds d1's items, so even the pads match
        batch = items[i:i + batch_size]
        rows = [eval_prompt_ids(tokenizer, task, ex) for _, ex in batch]
        P = max(len(r) for r in rows)
        prompt = pad_left(rows, eos).to(device)  # (b, P)
        # LLaDA attends the pads (no mask, as d1): an item's result depends on its batch (the
        # manifest has batch_size); a family that hides them gets their mask (left_pad_mask)
        pads = left_pad_mask(model, real_tokens(rows))  # (b, P) or None
        # one generator per batch, keyed by seed and position: reproducible at temperature > 0.
        # On the model's device: CPU-drawn (b, block, V) Gumbel noise would dominate a GPU run
        g = torch.Generator(device=device).manual_seed(seed * SEED_STRIDE + i)
        # d1 (docs/d1.md §8.1): block 32, steps = N / 2, τ = 0, low_confidence, cfg 0.
        # Deviation: d1's eval used fp16 autocast (§2.2); we keep the weights' dtype (bf16)
        out = sampler(model, prompt, attention_mask=pads, gen_length=gen_length,
                      block_length=block_length, steps=steps, temperature=temperature,
                      remasking=remasking, generator=g)  # (b, P + gen_length)
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
    numeric compare; docs/d1.md §8.3), not the RL rewards; code runs in the sandbox."""
    scores = tasks.score_eval_batch(task, texts, [ex for _, ex in items])
    records = []
    for (item_id, ex), text, scored in zip(items, texts, scores):
        # the fields the parsers need travel with the record, so --rescore needs no data file
        gold = tasks.get(task).scoring_example(ex)
        records.append({"id": item_id, "prompt": ex["prompt"], "generation": text,
                        "example": gold, **scored})
    return records


def toy_curve_sets(task="toy", n=200, data_seed=0):
    """The two item sets of grpo.py --test-curve: {"heldout_acc": eval.py's held-out items,
    "train_acc": n new items of the split's TRAINING side} (Sudoku toy: new puzzles of its
    training grids; 4x4 Sudoku has only 288: a model can score by recalling those it saw)."""
    train = tasks.make_examples(task, "train", n, CURVE_SEED, data_seed)
    return {"heldout_acc": tasks.heldout(task, n=n, data_seed=data_seed),
            "train_acc": list(enumerate(train))}


def validation_curve(args, model, tokenizer, val):
    """grpo.py's --eval-every curve (ops/validation.ValCurve) from its flags: greedy accuracy
    on the validation split `val` with this protocol at --val-gen-length, else the rollout
    canvas (toys: their eval canvas); --test-curve adds the toy's test-set study curve."""
    def measure(task, items, gen=0):
        gen = gen or args.val_gen_length or tasks.get(task).canvas or args.gen_length
        block, steps, batch = eval_schedule(task, gen)
        records = run_items(model, tokenizer, task, items, gen, block, steps, batch_size=batch)
        return accuracy(records, tasks.get(task).cells)

    test = None
    if args.test_curve:
        canvas = tasks.get(args.task).canvas
        sets = toy_curve_sets(args.task, args.eval_items, args.data_seed)
        test = {name: functools.partial(measure, args.task, items, canvas)
                for name, items in sets.items()}
    return ValCurve(args.eval_every, args.rounds, val, measure, test)


# -----------------------------------------------------------------------------
# the command line


def gen_lengths(args):
    """--gen-lengths as ints; d1 reports each task at 128, 256, 512 (docs/d1.md §8.4)."""
    text = args.gen_lengths or ",".join(map(str, tasks.eval_lengths(args.task)))
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        message = f"--gen-lengths must be a comma list of integers, got {text!r}"
        raise ValueError(message) from None


def schedule(args, gen):
    """(block, steps, batch size) at gen length `gen`: eval_schedule's (the Sudoku toy's 16
    tokens are one block, the code toy's 48 are 3 blocks of 16), a flag given overriding it."""
    block, steps, batch_size = eval_schedule(args.task, gen)
    if args.block_length:
        block = min(args.block_length, gen)
    steps = args.steps or steps
    try:
        check_schedule(gen, block, steps)  # whole blocks, steps split evenly over them
    except ValueError as e:
        raise ValueError(f"--gen-lengths / --block-length / --steps: {e}") from None
    return block, steps, args.batch_size or batch_size


def build_parser():
    """eval.py's flags (another sampler's entry point adds its own to them)."""
    parser = argparse.ArgumentParser(description="d1-compatible evaluation",
                                     formatter_class=ShowDefaults)
    add = parser.add_argument
    # what to evaluate
    add("--model-dir", type=str, default="", help="the model: a directory in the official "
        "layout, a hub cache snapshot, or a hub id owner/name[@revision] (default: "
        f"{TINY_DIR}, the tiny random model, for the toy tasks; a real task must name one)")
    add("--task", type=str, default="toy", help=" | ".join(tasks.names("score")))
    add("--data", type=str, default="", help="the task's test set: a file (jsonl, json, csv, "
        "parquet) or a hub dataset id owner/name[@revision][:config][:split] (the hub cache's; "
        "else `datasets` reads it); default: none, the toys generate theirs")
    add("--full", action="store_true", help="all items, not d1's 256 (Countdown, Sudoku)")
    add("--toy-items", type=int, default=200, help="toy / pbe / countdown_toy: held-out items")
    add("--toy-blanks", type=str, default="2,5", help="toy: min,max blanks per puzzle")
    add("--limit", type=int, default=0, help="only the first N items (smoke tests)")
    # sampler (d1: block 32, steps = gen / 2, greedy, low confidence)
    add("--gen-lengths", type=str, default="", help="comma list (default 128,256,512; toy 16)")
    add("--block-length", type=int, default=0,
        help="semi-AR block, capped at the gen length (0 = d1's 32; pbe: 16)")
    add("--steps", type=int, default=0, help="diffusion steps, 0 = gen_length / 2 (d1)")
    add("--temperature", type=float, default=0.0, help="0 = greedy (d1); > 0 with --seeds")
    add("--remasking", type=str, default="low_confidence", help="low_confidence (d1) | random")
    add("--batch-size", type=int, default=0,
        help="prompts per batch; 0 = d1's 8 (4 at gen 512), toy 100")
    add("--seed", type=int, default=0, help="sampling seed")
    add("--seeds", type=int, default=1, help="run seeds seed .. seed+N-1 (needs --temperature "
        "> 0); report mean and 95%% CI")
    add("--dtype", type=str, default="",
        help="float32 | bfloat16 (default: bf16 on GPU, fp32 on CPU)")
    add("--sandbox", default="auto", choices=["auto", "plain"], help="code: auto = the "
        "strongest isolation here, or refuse; plain = accept unisolated scores")
    add("--dist-timeout", type=int, default=DIST_TIMEOUT_S, help="seconds a collective waits "
        "for a lost rank before this one stops with a message")
    # outputs, and the modes that read files only
    add("--out-dir", type=str, default="out/eval",
        help="results: <out-dir>/<task>_<gen>[_seed<s>]/")
    add("--resume", action="store_true", help="continue the runs of this same command after a "
        "kill: each result dir keeps its whole batches on disk and generates the rest (the "
        "files end identical to an uninterrupted run's); a finished one is only scored, "
        "unless its files lost records since (then continued the same way); a new one is run")
    add("--force", action="store_true", help="start over in result dirs that hold an earlier "
        "run (deletes their manifest.json and generations.rank*.jsonl)")
    add("--json", type=str, default="",
        help="also write [{task, gen_length, items, accuracy}] here (default: nowhere)")
    add("--rescore", type=str, nargs="+", help="re-score result dirs / d1 *_generations.json "
        "files (or folders of them); default: evaluate instead")
    add("--canonical", action="store_true", help="code benchmarks: score reference solutions")
    return parser


def main(args=None, sampler=generate, orders=REMASKING_STRATEGIES, options=None):
    """eval.py on `args` (default: this command line's, build_parser). What another sampler
    brings (d1's exact one by default): `sampler`, a function with sample.generate's signature
    (run_items); `orders`, the --remasking values it takes; `options` {keyword: value} it gets
    on every call, which every manifest records (--resume refuses a changed one)."""
    args = args or build_parser().parse_args()
    options = options or {}
    # the modes that read files only (no process group, model or GPU); a bad file: one line
    if args.rescore:  # our result dirs and d1's released files through d1's parsers
        with upfront():
            rescore(args.rescore, tasks.TASKS, args.json)
        return
    if args.canonical:  # code benchmarks' reference solutions, via the eval path
        with upfront():
            require(args.task in tasks.names("code"), f"--canonical needs a code benchmark, "
                    f"one of {tasks.names('code')}, not {args.task!r}")
            sandbox_mode(args.sandbox, True)
            items = load_items(args.task, args.data, args.full, args.limit)
            canonical(args.task, items, args.full, data_identity(args.data), args.out_dir,
                      tasks.TASKS)
        return

    # -------------------------------------------------------------------------
    # bad input: one line, exit 2, before any process group, model or file (checks.py): flags,
    # items (a bad record: file:line), schedules, model headers, result dirs; on every rank
    world = int(os.environ.get("WORLD_SIZE", 1))  # torchrun's
    rank = int(os.environ.get("RANK", 0))
    with upfront():
        check_eval_args(args, orders, tasks.TASKS)  # --sandbox too: args.sandbox_mode
        all_items = load_items(args.task, args.data, args.full, args.limit, args.toy_items,
                               toy_blanks(args.toy_blanks))
        task = tasks.get(args.task)  # a known one: load_items
        gens = gen_lengths(args)
        seeds = range(args.seed, args.seed + args.seeds)
        check_model(args, TINY_DIR if task.make else None)  # a hub id: its snapshot
        # the run's dtype and device (compute_init picks cuda the same way), for its manifest
        on_gpu = torch.cuda.is_available()
        dtype = default_dtype(args.dtype, "cuda" if on_gpu else "cpu")
        local_rank = int(os.environ.get("LOCAL_RANK", 0))  # the GPU compute_init selects later
        device_name = torch.cuda.get_device_name(local_rank) if on_gpu else "cpu"
        # (gen, seed) -> (result dir, settings, "fresh" | "partial" | "complete"), all decided
        # now: a command that would refuse its third result dir must not spend hours on two
        fingerprint = model_fingerprint(args.model_dir)
        runs = {}
        for gen in gens:
            for seed in seeds:
                settings = run_settings(args, task, all_items, gen, schedule(args, gen), seed,
                                        world, dtype, device_name, fingerprint, options)
                # one result dir per (task, gen length[, seed]): what --rescore reads back
                name = f"{args.task}_{gen}" + (f"_seed{seed}" if args.seeds > 1 else "")
                out = os.path.join(args.out_dir, name)
                if rank == 0:  # one run per result dir (ops/lock.py), held before reading it
                    lock.take(out, "result dir")
                state = result_dir_state(out, settings, args.resume, args.force)
                runs[gen, seed] = (out, settings, state)
    if args.force and rank == 0:
        # only now that every check passed; the other ranks wait for rank 0 in the set-up
        for out, _, _ in runs.values():
            clear_run_files(out)

    # -------------------------------------------------------------------------
    # distributed init: a process group only under torchrun; the model is never wrapped
    ddp, rank, _, world, device, _ = compute_init(timeout_s=args.dist_timeout)
    stop = Stopper()  # SIGTERM/SIGUSR1/Ctrl-C: end after the batch in flight, exit 75
    barrier = dist.barrier if ddp else None  # every rank's files written (one process: none)

    # -------------------------------------------------------------------------
    # model and items; every rank has the same item list and keeps its stride. d1 evaluates
    # bf16 weights, unquantized, even for adapters from a 4-bit base (docs/d1.md §8.1)
    with upfront():  # a NaN or inf weight: one line naming it (checkpoint.from_pretrained)
        model, tokenizer = load(args.model_dir, device=device, dtype=dtype)
        # the items' labels fit each canvas, as in sft.py and grpo.py
        tasks.check_canvas(args.task, tokenizer, [ex for _, ex in all_items], min(gens),
                           "--gen-lengths")
    # again after loading: on first use load() has just created the default tiny model; with it
    # where the weights and the data came from (modelio/provenance.py)
    fingerprint = model_fingerprint(args.model_dir)
    provenance = start_record(args.model_spec, args.model_dir, args.model_revision,
                              [data_record(args.data)] if args.data else [])
    sample = functools.partial(sampler, **options)
    # d1's DistributedSampler(shuffle=False), unpadded: rank r gets r, r + W, ... (§8.1)
    my_items = all_items[rank::world]
    rows = []  # one summary row per gen length (the mean over seeds)
    for gen in gens:
        block, steps, bs = schedule(args, gen)
        accs = []
        for seed in seeds:
            out, settings, state = runs[gen, seed]
            manifest = {**settings, "model_fingerprint": fingerprint, "provenance": provenance}
            t0 = time.time()
            if state != "complete":  # this rank's items into the result dir (ops/results.py)
                run = functools.partial(run_items, model, tokenizer, args.task, my_items, gen,
                                        block, steps, args.temperature, args.remasking, bs,
                                        seed, show_progress=rank == 0, sampler=sample)
                fill_result_dir(out, manifest, state, rank, [i for i, _ in my_items], bs, run,
                                stop, barrier)
            if rank == 0:  # all ranks' files scored through load_results, as by --rescore
                (recs,) = load_results([out], tasks.TASKS).values()
                accs.append(accuracy(recs, task.cells))
                solved = ""
                if task.cells:
                    rate = 100 * sum(r["solved"] for r in recs) / len(recs)
                    solved = f", puzzles solved {rate:.1f}%"
                print(f"{args.task} gen {gen} seed {seed}: accuracy {accs[-1]:.1f}%{solved} "
                      f"on {len(recs)} items ({time.time() - t0:.0f}s) -> {out}")
        if rank == 0:
            # one seed (greedy, d1's protocol): m is that run's accuracy, no interval printed
            m, sd, ci = mean_and_spread(accs)
            if len(accs) > 1:
                print(f"{args.task} gen {gen}: mean {m:.1f}% ± {ci:.1f} (95% CI over "
                      f"{len(accs)} seeds, std {sd:.1f})")
            # --json gets the mean over seeds, in --rescore --json's format
            rows.append({"task": args.task, "gen_length": gen, "items": len(all_items),
                         "accuracy": round(m, 2)})
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    if ddp:
        # every rank waits for rank 0 to score and write, then all go down (ddp.finish: a rank
        # that left first tore gloo's pairs under the others and aborted one)
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
