"""
Bad input is answered before any work starts: the entry scripts (sft.py, grpo.py, eval.py) check their
flags, paths, data and output directory first, inside `with upfront():`, and anything wrong there is ONE
line on stderr (file:line for data), exit 2, no traceback, nothing written (docs/reliability.md). Inside
the block the project's own ValueError / FileNotFoundError count as bad input (require() raises one);
later, in the loop, the same exceptions keep their traceback: there they would be bugs.
"""
import argparse
import importlib.util
import os
import shutil
import sys
from contextlib import contextmanager

import torch

from model import BLOCK_LINEARS
from modelio.checkpoint import verify
from modelio.hub import ModelSource, resolve_model
from modelio.tokenizer import check_tokenizer_files
from ops.ddp import tell_launcher, train_precision
from sandbox import contain
from taskdata.records import folder_hint, is_hub_dataset
from taskdata.splits import check_protocol_flags

USAGE_EXIT = 2  # what argparse exits with for a bad flag: our checks are the flags' second line


class InputError(ValueError):
    """Bad input: the message alone says what is wrong and what to do."""


class ShowDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """--help with every flag's default, except where the help text says it itself or there is none
    (an empty or None default means "chosen by the task": the help says how)."""

    def _get_help_string(self, action):
        return action.help if action.default in (None, "") else super()._get_help_string(action)


def require(ok, message):
    """Raise InputError(message) unless ok: one check, one line."""
    if not ok:
        raise InputError(message)


@contextmanager
def upfront(script=None):
    """The up-front checks of an entry script: bad input -> one line on stderr and exit 2. Under
    torchrun every rank runs the same checks, so every rank exits; each says which rank it is."""
    try:
        yield
    except (ValueError, FileNotFoundError, NotADirectoryError, contain.NoIsolation) as e:
        if "ops.lock" in sys.modules:  # a refused run writes nothing: the out-dir locks it took go back
            sys.modules["ops.lock"].give_back_all()
        script = script or os.path.basename(sys.argv[0])
        rank = f" [rank {os.environ['RANK']}]" if int(os.environ.get("WORLD_SIZE", 1)) > 1 else ""
        # one line: a multi-line message (e.g. a key mismatch list) is joined, never cut
        line = f"{script}{rank}: error: {' '.join(str(e).split())}"
        print(line, file=sys.stderr)
        tell_launcher(line)  # torchrun's summary then ends with this line, not a pointer to its docs
        sys.exit(USAGE_EXIT)


def check_fraction(name, value, lo_open=False, hi_open=True):
    """A probability-like flag in [0, 1) (or the bounds given) -> InputError otherwise."""
    lo_ok = value > 0 if lo_open else value >= 0
    hi_ok = value < 1 if hi_open else value <= 1
    require(lo_ok and hi_ok, f"{name} must be in {'(' if lo_open else '['}0, 1{')' if hi_open else ']'}, "
                             f"got {value}")


def check_model_dir(path, default_dir=None):
    """An official-layout model directory that loads: config.json with every field the model needs, of
    its type; every shard named by the index, no truncated file, every key and shape the config asks for
    (checkpoint.verify reads headers only, no weights); the tokenizer files there and parsing
    (tokenizer.check_tokenizer_files) -> its config (None for the tiny default not written yet).
    `default_dir`: the scripts' default tiny model, created on first use."""
    if default_dir is not None and str(path) == str(default_dir) and not os.path.exists(path):
        return None  # checkpoint.load writes the tiny model there: the one thing a fresh clone may create
    require(os.path.isdir(path), f"model directory {path} does not exist")
    try:
        config = verify(path)
        check_tokenizer_files(path)
        return config
    except (ValueError, FileNotFoundError, OSError) as e:
        raise InputError(f"model directory {path} is not a usable checkpoint: {e}") from None


def check_model(args, toy_default=None, missing_hint="", revision=None):
    """--model-dir as typed (a directory, a hub cache, a hub id: modelio/hub.py) -> args.model_dir, a local
    directory that loads; args.model_spec keeps what was typed, args.model_revision the hub commit (None
    for a directory). No --model-dir: a toy task gets `toy_default`; a real task (toy_default None) is
    refused, not trained from the random tiny model. `missing_hint`: what writes a missing default;
    `revision`: the commit a hub id resolves to (a resume keeps its run's)."""
    require(args.model_dir or toy_default is not None, f"--task {args.task} is a real task: give --model-dir (a "
            "directory in the official layout, a hub cache snapshot, or a hub id such as GSAI-ML/LLaDA-8B-Instruct); "
            "the tiny random model is only for the toy tasks")
    if args.model_dir in ("", toy_default):  # the toy's own default: a local path, perhaps not written yet
        source = ModelSource(toy_default, toy_default)
        require(not missing_hint or os.path.isdir(toy_default), f"no model in {toy_default}: {missing_hint}")
    else:
        source = resolve_model(args.model_dir, revision=revision)
    args.model_spec, args.model_dir, args.model_revision = source.spec, source.path, source.revision
    check_model_dir(args.model_dir, default_dir=toy_default)


def check_data_paths(paths, flag="--data"):
    """Each comma-listed data file exists and is a file, or is a hub dataset id (taskdata/records.py): the
    loader reads and checks the records of both. A missing path ending like a data file is a typo,
    never a hub id."""
    for p in paths:
        if is_hub_dataset(p):
            continue  # nothing to see before it is read: the loader says what the hub answered
        require(os.path.isfile(p), folder_hint(p, flag) if os.path.isdir(p) else f"{flag}: {p} is not a file"
                if os.path.exists(p) else f"{flag}: {p} does not exist")


def check_out_dir(path, resume, force, run_files):
    """What --out-dir may be for a run: True = a fresh run, False = a resume (--resume, the caller
    finds its save). A directory holding another run (any of `run_files`) is refused unless
    --resume continues it or --force starts over; --force deletes those files and nothing else.
    Nothing is created here: a refused run writes nothing."""
    require(not (resume and force), "--resume and --force contradict each other: continue the run, or start over")
    present = sorted(f for f in run_files if os.path.lexists(os.path.join(path, f))) if os.path.isdir(path) else []
    require(not os.path.exists(path) or os.path.isdir(path), f"--out-dir {path} exists and is not a directory")
    if resume:
        require(present, f"--resume: {path} holds no run to continue; drop --resume to start one")
        return False
    if present and not force:
        raise InputError(f"--out-dir {path} holds another run ({', '.join(present[:4])}); "
                         f"--resume continues it, --force starts over (deletes those files), or pick another --out-dir")
    # --force: only the files a run writes, never anything else the user keeps there; one rank deletes
    if present and int(os.environ.get("RANK", 0)) == 0:
        for f in present:
            p = os.path.join(path, f)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
    return True


# -----------------------------------------------------------------------------
# the trainers' flags: every flag that cannot work, as one InputError, before anything is loaded


def check_positive(args, flags):
    """Each named integer flag is >= 1."""
    for flag in flags:
        require(getattr(args, flag) >= 1, f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")


def check_training_flags(args):
    """The flags sft.py and grpo.py share: optimizer, LoRA / 4-bit, saves, and the precision rules
    of ddp.train_precision."""
    require(args.lr > 0 and args.weight_decay >= 0 and args.grad_clip >= 0,
            f"--lr must be > 0, --weight-decay and --grad-clip >= 0; got {args.lr}, {args.weight_decay}, {args.grad_clip}")
    check_positive(args, ("keep_last", "max_bad_steps", "dist_timeout"))
    require(args.lora_r >= 0, f"--lora-r must be >= 0, got {args.lora_r}")
    check_fraction("--lora-dropout", args.lora_dropout)
    unknown = sorted(set(args.lora_targets.split(",")) - set(BLOCK_LINEARS))
    require(not unknown, f"--lora-targets: unknown layer(s) {unknown}; one of {BLOCK_LINEARS}")
    require(not (args.load_in_4bit and args.lora_r == 0), "--load-in-4bit freezes the base weights: it needs --lora-r > 0")
    require(args.max_hours >= 0, f"--max-hours must be >= 0 (0: no limit), got {args.max_hours}")
    # optional: only --wandb needs it, so it is not in requirements.txt (README)
    require(not args.wandb or importlib.util.find_spec("wandb"), "--wandb streams to Weights & Biases: `pip install "
            "wandb` first (WANDB_MODE=offline works without network), or drop --wandb")
    train_precision(args, args.device or ("cuda" if torch.cuda.is_available() else "cpu"))


def check_grpo_args(args, world_size, registry, check_schedule):
    """grpo.py's flags: the protocol's (taskdata/splits.py), --task's names among the RL tasks of
    `registry` (tasks.TASKS), the sampler's layout (check_schedule, sample.py's), then the data files
    (the loaders check their records)."""
    check_protocol_flags(args, registry)  # --val-size, --sudoku-split, --test-curve
    rl_tasks = [name for name, t in registry.items() if t.rewards]
    for name in args.task.split(","):
        require(name in rl_tasks, f"--task: unknown task {name!r}; one of {', '.join(rl_tasks)}")
    # code rewards: how they are isolated, decided now (train_args.json and every metrics line say it)
    rewards = [f for name in args.task.split(",") for f in registry[name].rewards]
    args.sandbox_mode = sandbox_mode(args.sandbox, runs_code(rewards))
    # G = 1: every completion is its group's mean, every advantage 0: the run would learn nothing, silently
    require(args.num_generations >= 2, f"--num-generations must be >= 2 (GRPO compares completions of one prompt; "
                                       f"G = {args.num_generations} gives every advantage 0)")
    check_positive(args, ("rounds", "prompts_per_step", "groups_per_micro", "num_iterations", "save_every",
                          "max_prompt_length", "eval_items"))
    # every rank must run the same number of passes or DDP / FSDP hang: divisibility up front
    n_micro = args.prompts_per_step // args.groups_per_micro
    require(args.prompts_per_step % args.groups_per_micro == 0 and n_micro % world_size == 0,
            f"--prompts-per-step {args.prompts_per_step} must split into micro-batches of --groups-per-micro "
            f"{args.groups_per_micro} groups, a multiple of the {world_size} ranks")
    require(args.epsilon > 0, f"--epsilon (the clip range) must be > 0, got {args.epsilon}")
    require(args.beta >= 0, f"--beta must be >= 0, got {args.beta}")
    require(args.warmup_rounds >= 0, f"--warmup-rounds must be >= 0, got {args.warmup_rounds}")
    require(args.temperature >= 0, f"--temperature must be >= 0, got {args.temperature}")
    check_fraction("--p-mask", args.p_mask)  # p = 1 would mask the whole prompt: q' says nothing of q
    check_training_flags(args)  # optimizer, LoRA / 4-bit, saves, precision: shared with sft.py
    require(not (args.compile and args.fsdp), "--compile with --fsdp is not supported yet (untested); drop one of them")
    try:  # gen / block / steps must divide (sample.check_schedule's rule), named by our flags
        check_schedule(args.gen_length, args.block_length, args.diffusion_steps)
    except ValueError as e:
        raise InputError(f"--gen-length {args.gen_length} / --block-length {args.block_length} / --diffusion-steps "
                         f"{args.diffusion_steps}: {e}") from None
    # rank 0 evaluates alone: fine under DDP (a plain forward), a hang under FSDP (forwards are collectives)
    require(not (args.eval_every and args.fsdp), "--eval-every runs on rank 0 alone, which would hang --fsdp's "
            "sharded forwards: drop it and evaluate the saves with eval.py")
    check_data_paths([p for p in args.data.split(",") if p])
    check_data_paths([args.sudoku_test] if args.sudoku_test else [], "--sudoku-test")


def sandbox_mode(choice, runs_code):
    """--sandbox: the mode the run's code rewards will run in (sandbox/contain.py), decided before any
    model loads and recorded with the run; None when the run scores no code. Nothing isolates here and
    plain not chosen: one line naming why and --sandbox plain (contain.NoIsolation), never a silent fallback."""
    if not runs_code:
        return None
    contain.choose(choice)
    try:
        return contain.mode()
    except contain.NoIsolation as e:
        raise InputError(str(e)) from None


def runs_code(functions):
    """Whether any of these rewards or scorers runs programs in the sandbox (marked `runs_code`)."""
    return any(getattr(f, "runs_code", False) for f in functions)


def check_sft_args(args, world_size, task_names):
    """sft.py's flags (--task one of `task_names`, the registry's), then its data file."""
    # every task is known here; load_sft_data then checks that its examples have completions
    require(args.task in task_names, f"--task: unknown task {args.task!r}; one of {', '.join(task_names)} "
                                     f"(s1k for d1's SFT)")
    check_positive(args, ("batch_size", "grad_accum", "max_length", "eval_every", "num_examples"))
    # --grad-accum is GLOBAL (micro-batches per optimizer step over all ranks): it must split over them
    require(args.grad_accum % world_size == 0, f"--grad-accum {args.grad_accum} must be a multiple of the "
                                               f"world size {world_size}")
    require(args.max_steps > 0 or (args.max_steps == 0 and args.epochs > 0),
            "nothing to train: give --max-steps > 0, or --max-steps 0 with --epochs > 0")
    require(args.warmup_steps >= 0, f"--warmup-steps must be >= 0, got {args.warmup_steps}")
    check_fraction("--eval-fraction", args.eval_fraction)
    check_fraction("--toy-unfilled", args.toy_unfilled, hi_open=False)
    check_training_flags(args)  # optimizer, LoRA / 4-bit, saves, precision: shared with grpo.py
    check_data_paths([args.data] if args.data else [])


def check_eval_args(args, orders, registry):
    """eval.py's flags that cannot work, as one InputError (`orders`: the sampler's remasking orders), and
    --sandbox's mode for a task of `registry` that scores code (args.sandbox_mode). The items, the
    schedules, the model directory and the result directories are checked after it."""
    task = registry.get(args.task)
    args.sandbox_mode = sandbox_mode(args.sandbox, task is not None and runs_code([task.score]))
    require(args.seeds >= 1, f"--seeds must be >= 1, got {args.seeds}")
    require(args.temperature >= 0, f"--temperature must be >= 0 (0 = greedy), got {args.temperature}")
    require(args.seeds == 1 or args.temperature > 0, f"--seeds {args.seeds} at --temperature 0: greedy decoding "
            f"is deterministic, so every seed would give the same result; give --temperature > 0, or one seed")
    for flag in ("batch_size", "limit", "block_length", "steps"):
        require(getattr(args, flag) >= 0, f"--{flag.replace('_', '-')} must be >= 0 (0 = the default), "
                                          f"got {getattr(args, flag)}")
    require(args.toy_items >= 1, f"--toy-items must be >= 1, got {args.toy_items}")
    require(args.dist_timeout >= 1, f"--dist-timeout must be >= 1 second, got {args.dist_timeout}")
    require(args.remasking in orders, f"--remasking must be one of {orders}, got {args.remasking!r}")
    require(args.dtype in ("", "float32", "bfloat16", "float16"), f"--dtype must be float32 | bfloat16 | "
                                                                   f"float16, got {args.dtype!r}")
    require(not (args.resume and args.force), "--resume and --force contradict each other: continue the run, "
                                              "or start over")
    require(not os.path.exists(args.out_dir) or os.path.isdir(args.out_dir),
            f"--out-dir {args.out_dir} exists and is not a directory")
