"""
The plumbing sft.py and grpo.py share, each piece behind one call, so the two trainers read as their
algorithm: the shared flags, the preset by the model's size, the up-front checks, the start model with its
LoRA adapters and reference, --resume's bookkeeping, the stop of a stalled run. Not a script; the task
registry (tasks.TASKS) comes in as an argument.
"""
import argparse
import os
import sys
from contextlib import nullcontext

import torch

from modelio.adapters import add_lora, lora_disabled
from modelio.checkpoint import from_pretrained, load, stored_dtype
from modelio.families import family_of_model, read_config
from modelio.hub import config_dir
from modelio.provenance import start_record
from modelio.tokenizer import load_tokenizer
from model import BLOCK_LINEARS, LLaDA, compile_blocks
from ops import lock
from ops.checks import ShowDefaults, check_grpo_args, check_model, upfront
from ops.ddp import DIST_TIMEOUT_S, finish, shard_model, tell_launcher
from ops.disk import check_room
from ops.metrics import log_metrics
from ops.resume import (RESUME_MAY_CHANGE, check_run_dir, complete_saves, publish, recorded_revision,
                        restore_optimizer, resume_weights)
from ops.stop import Stopper
from sandbox import contain
from taskdata.data import load_rl_data
from taskdata.records import data_record
from taskdata.splits import add_protocol_flags, protocol_split


def auto_only(value):
    """--resume's optional value: only "auto" (a bare --resume is True)."""
    if value != "auto":
        raise argparse.ArgumentTypeError(f"--resume takes no value or 'auto', not {value!r}")
    return value


def add_grpo_flags(parser):
    """grpo.py's flags of d1's algorithm; their defaults come from the presets (grpo.PRESETS: d1's
    values under --preset 8b, docs/d1.md §4.3), which --help shows beside each."""
    g = parser.add_argument_group("diffu-GRPO")
    g.add_argument("--rounds", type=int, help="rollout rounds; each gives μ optimizer steps")
    g.add_argument("--prompts-per-step", type=int, help="prompts a round, all ranks (d1: 16)")
    g.add_argument("--num-generations", type=int, help="G, completions per prompt (d1: 6)")
    g.add_argument("--groups-per-micro", type=int, help="prompt groups per micro-batch (d1: 1)")
    g.add_argument("--num-iterations", type=int, help="μ, optimizer steps per rollout (d1: 12)")
    g.add_argument("--epsilon", type=float, help="PPO clip range ε (d1: 0.5)")
    g.add_argument("--beta", type=float, help="KL coefficient β (d1: 0.04); 0: no reference")
    g.add_argument("--p-mask", type=float, help="prompt masking probability (d1: 0.15)")
    g.add_argument("--max-prompt-length", type=int, help="prompts cut from the left (d1: 200)")
    g.add_argument("--warmup-rounds", type=int, default=0, help="lr rises over N rounds (d1: 0)")
    g.add_argument("--adam-beta2", type=float, default=0.99, help="AdamW β2 (d1: 0.99)")
    g.add_argument("--gen-length", type=int, help="completion canvas length (d1: 256)")
    g.add_argument("--block-length", type=int, help="semi-AR block length (d1: 32)")
    g.add_argument("--diffusion-steps", type=int, help="sampler steps (d1: 128)")
    g.add_argument("--temperature", type=float, help="rollout temperature (d1: 0.9)")
    g.add_argument("--fixed-mask-seed", action="store_true", help="d1's ablation: mask seed 42")
    g.add_argument("--scale-std", action="store_true", help="advantages / group std (GRPO's)")
    g.add_argument("--compile", action="store_true", help="torch.compile each block")
    g.add_argument("--save-every", type=int, default=10, help="save every N rounds, and last")
    add_optimizer_flags(parser)
    add_protocol_flags(parser)  # --sudoku-split, --val-size, --eval-every (taskdata/splits.py)
    # d1's four LoRA targets (docs/d1.md §4.3); 4000 unlabelled toy puzzles
    parser.set_defaults(lora_targets="q_proj,k_proj,v_proj,up_proj", num_examples=4000)


def add_optimizer_flags(parser):
    """The optimizer and LoRA flags of sft.py and grpo.py; their defaults come from the presets
    (d1's values under --preset 8b, which --help shows beside each)."""
    g = parser.add_argument_group("optimizer and LoRA (shared by sft.py and grpo.py)")
    g.add_argument("--lr", type=float, help="AdamW learning rate")
    g.add_argument("--weight-decay", type=float, help="AdamW weight decay")
    g.add_argument("--grad-clip", type=float, help="max gradient norm (0: no clipping, still logged)")
    g.add_argument("--lora-r", type=int, help="LoRA rank, 0 = full fine-tuning")
    g.add_argument("--lora-alpha", type=float, help="LoRA alpha")


def add_training_flags(parser, registry, start_model, out_dir, published):
    """The flags both trainers take beside their hyper-parameters: the start model (the toys' start_model:
    (its directory, what it is)), the run directory (out_dir's default; `published`: the save that becomes
    the run's model), the data (--task: a name of `registry`), set-up, saves, resume and system. Where the
    two differ (LoRA targets, ...), each script's set_defaults gives the value."""
    r = parser.add_argument_group("the run (shared by sft.py and grpo.py)")
    r.add_argument("--model-dir", type=str, default="", help="the start model: a directory in the official "
                   "layout, a hub cache snapshot, or a hub id owner/name[@revision] (default: "
                   f"{start_model[0]}, {start_model[1]}, for the toy tasks; a real task must name one)")
    r.add_argument("--out-dir", type=str, default=out_dir, help="the run: saves/step-N (official layout + "
                   f"trainer_state.pt), metrics.jsonl, and {published} as the run's model")
    d = parser.add_argument_group("data (shared by sft.py and grpo.py)")
    d.add_argument("--task", type=str, default="toy", help="a task of tasks.py's registry (RL: a comma list): "
                   + " | ".join(registry))
    d.add_argument("--data", type=str, default="", help="data file(s) (jsonl, json, csv, parquet; .gz too) or hub "
                   "dataset ids owner/name[@revision][:config][:split] (the hub cache's; else `datasets` reads them), "
                   "a comma list matching --task (default: none, which only the toys, generating their own, may have)")
    d.add_argument("--num-examples", type=int, help="toy / pbe / countdown_toy: generated items (labelled for SFT, "
                   "not for RL)")
    d.add_argument("--toy-blanks", type=str, default="2,5", help="toy: min,max blank cells per puzzle")
    d.add_argument("--data-seed", type=int, default=0, help="toy / pbe / countdown_toy: seed of the train/test split "
                   "(grids / function classes / number multisets), the same in sft.py, grpo.py and eval.py")
    g = parser.add_argument_group("model, saves and system (shared by sft.py and grpo.py)")
    g.add_argument("--sandbox", type=str, default="auto", choices=contain.CHOICES, help="grpo.py's code rewards: auto "
                   "= the strongest isolation that works here (namespaces, else Landlock + seccomp; neither: the run "
                   "refuses to start); plain = accept unisolated rewards (programs can read the repository and data)")
    g.add_argument("--lora-dropout", type=float, default=0.05, help="LoRA dropout (training passes only)")
    g.add_argument("--lora-targets", type=str, help=f"comma list of {BLOCK_LINEARS}")
    g.add_argument("--load-in-4bit", action=argparse.BooleanOptionalAction, default=False,
                   help="NF4 base weights (QLoRA; needs --lora-r > 0)")
    g.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=False,
                   help="recompute blocks in backward")
    g.add_argument("--fsdp", action="store_true", help="full fine-tuning with FSDP2: weights, gradients and AdamW "
                   "state sharded over ranks, fp32 masters, bf16 compute on GPU (needs --lora-r 0, no 4-bit)")
    g.add_argument("--keep-last", type=int, default=2, help="complete saves kept in <out-dir>/saves")
    g.add_argument("--resume", nargs="?", const=True, default=False, type=auto_only, help="continue the run in "
                   "--out-dir from its newest complete save; `--resume auto`: continue if --out-dir holds a save of "
                   "this same command, else start it (a requeued job's command; another run is still refused)")
    g.add_argument("--max-hours", type=float, default=0.0, help="stop with a complete save and exit 75 before this "
                   "many hours (a job's time limit; 0 = none). SIGTERM, SIGUSR1 and Ctrl-C do the same (ops/stop.py)")
    g.add_argument("--wandb", type=str, default="", metavar="PROJECT", help="also stream metrics.jsonl's records "
                   "to this Weights & Biases project (pip install wandb; WANDB_MODE=offline works without network; "
                   "default: off)")
    g.add_argument("--force", action="store_true", help="start over in an --out-dir that holds another run "
                   "(deletes its saves, log and model)")
    g.add_argument("--max-bad-steps", type=int, default=3, help="stop after this many optimizer steps in a row "
                   "with a non-finite loss or gradient (each one is skipped)")
    g.add_argument("--seed", type=int, default=0, help="random seed")
    g.add_argument("--device", type=str, default="", help="cpu | cuda (default: cuda if available)")
    g.add_argument("--dtype", type=str, default="", help="float32 | bfloat16 weights (default: bf16 on GPU, fp32 on "
                   "CPU; with --fsdp fp32 masters); also the dtype of the saved model")
    g.add_argument("--autocast", action="store_true", help="every forward under torch.autocast(bf16), weights stay "
                   "in --dtype (works on CPU; refused with --fsdp on GPU, whose mixed precision computes in bf16)")
    g.add_argument("--backend", type=str, default="", help="DDP backend (default: nccl on GPU, gloo on CPU)")
    g.add_argument("--dist-timeout", type=int, default=DIST_TIMEOUT_S, help="seconds a collective waits for a lost "
                   "rank before this one stops with a message")


# a model below this many parameters is CPU-sized (the tiny 0.9M LLaDA): its preset is its task's CPU one;
# above, d1's recipe for LLaDA-8B. The task says its lengths (taskdata/task.py)
CPU_SIZED = 10**9
CPU_PRESETS = ("tiny", "testbed")  # the presets made for 2 CPU cores; the others are a GPU paper's recipe


def model_params(spec):
    """The parameter count that --model-dir's config.json describes (the model built on the meta device:
    no memory, no weights read), or None where there is no config to read yet."""
    path = config_dir(spec) if spec else None
    try:
        config = read_config(path)[2] if path else None
    except (ValueError, OSError):  # a broken config.json: the checks say so, in one line, later
        return None
    if config is None:
        return None
    with torch.device("meta"):
        return LLaDA(config).num_params()


def task_defaults(task, params, presets, registry, gen_length=None):
    """(preset name, {flag: value}) for --task (records of `registry`, tasks.TASKS) on a model of `params`
    parameters (None: not known yet). The preset: by the model's size where it is known (CPU-sized: the
    task's CPU preset; else d1's "8b"), else by the task (a generated toy: its CPU preset; a real task: "8b").
    The lengths are the task's, on any preset (taskdata/task.Task.rl_lengths, sft_length); tasks of several
    canvases (d1's unified model, mixed toys) share the longest; a `gen_length` given by hand brings the
    block and steps that go with it."""
    records = [registry.get(name) for name in task.split(",")]
    if None in records:
        return "8b", {}  # an unknown task is refused later, in the script's checks
    cpu = records[0].preset if len({r.preset for r in records}) == 1 else "tiny"
    cpu = cpu if cpu in presets else "tiny"
    toys = all(r.make for r in records)
    name = (cpu if toys else "8b") if params is None else cpu if params < CPU_SIZED else "8b"
    t = max(records, key=lambda r: r.rl_lengths()[0])
    gen, block, steps = t.rl_lengths(gen_length)
    return name, dict(gen_length=gen, block_length=block, diffusion_steps=steps, max_length=t.sft_length())


def preset_note(given, name, by_task, params, spec):
    """One line, or "": a preset `given` against the model's size (d1's 8B recipe on the tiny model ran
    4-minute steps, and nothing said so), or a preset the size chose where the task alone (`by_task`)
    would have chosen another."""
    if params is None:
        return ""
    size = f"--model-dir {spec or '(the default)'} has {params / 1e6:,.1f}M parameters"
    if given and name not in CPU_PRESETS and params < CPU_SIZED:
        return f"note: --preset {name} is a recipe for a model of billions of parameters; {size}: --preset tiny"
    if given and name in CPU_PRESETS and params >= CPU_SIZED:
        return f"note: --preset {name} is the CPU toy's recipe; {size}: --preset 8b is d1's"
    return "" if given or name == by_task else f"preset {name}: {size} (--preset 8b is d1's recipe for LLaDA-8B)"


class FollowWorld:
    """A preset's value that follows torchrun's world size (WORLD_SIZE): `at(world)` gives it, `text` says
    how in --help. The toys' one micro-batch a step becomes one per rank, so that their defaults run on
    2, 4 or 8 ranks as the 8b presets' do; on one process the value is the toy's own (make run's weights)."""

    def __init__(self, at, text):
        self.at, self.text = at, text

    def __repr__(self):
        return self.text


def per_rank(total):
    """A toy's micro-batch, split over the ranks: `total` on one process, total / world size on more."""
    return FollowWorld(lambda world: max(1, total // world), f"{total} / the world size")


def ranks():
    """One micro-batch per rank: 1 on one process, the world size on more."""
    return FollowWorld(lambda world: world, "the world size")


def preset_value(v, gen_length, world):
    """A preset's value as a default: a callable follows --gen-length, a FollowWorld the world size."""
    if isinstance(v, FollowWorld):
        return v.at(world)
    if callable(v):
        return v(gen_length)
    return v


def parse_with_preset(parser, presets, registry, argv=None):
    """Parse the flags with a preset's values as their defaults: --preset as given, else by the model's size
    and --task (task_defaults), so that a flag dropped from a job script falls back to d1's value on an 8B
    model, never to the CPU toy's; the task's lengths under any preset (a preset that sets one, such as
    one-token blocks, wins). --help shows every default and what each preset sets a flag to."""
    pre = argparse.ArgumentParser(add_help=False)  # reads --preset, --task and --model-dir before the full parse
    pre.add_argument("--preset", choices=sorted(presets))
    pre.add_argument("--task")
    pre.add_argument("--model-dir", default="")
    pre.add_argument("--gen-length", type=int)
    known = pre.parse_known_args(argv)[0]
    # no --task: a preset's own (the testbed's countdown_toy), else the script's default
    known.task = known.task or presets.get(known.preset, {}).get("task") or parser.get_default("task")
    params = model_params(known.model_dir)
    own, lengths = task_defaults(known.task, params, presets, registry, known.gen_length)
    name = known.preset or own
    dests = {a.dest for a in parser._actions}
    lengths = {k: v for k, v in lengths.items() if k in dests and k not in presets[name]}
    # a preset's value may follow the canvas (a callable of --gen-length: one token a step, steps = gen_length)
    gen = known.gen_length or lengths.get("gen_length", 0)
    world = int(os.environ.get("WORLD_SIZE", 1))  # torchrun's
    values = {k: preset_value(v, gen, world) for k, v in presets[name].items()}
    parser.set_defaults(preset=name, **values, **lengths)
    for action in parser._actions:  # "(default: 3e-06 from --preset 8b; tiny: 0.0001, testbed: 0.0001)"
        values = {p: "--gen-length" if callable(v[action.dest]) else v[action.dest]
                  for p, v in presets.items() if action.dest in v}
        if action.help and (values or action.dest in lengths):
            here = f" from --task {known.task}" if action.dest in lengths else \
                f" from --preset {name}" if name in values else ""
            others = ", ".join(f"{p}: {v}" for p, v in values.items() if p != name)
            action.help += f" (default: %(default)s{here}{'; ' + others if others else ''})"
    for action in parser._actions:
        if action.dest == "preset" and action.help:  # chosen, not fixed: name the rule and this run's choice
            action.help += " (default: by the model's size and --task; %(default)s here)"
    parser.formatter_class = ShowDefaults
    args = parser.parse_args(argv)
    by_task = task_defaults(known.task, None, presets, registry)[0]
    note = preset_note(bool(known.preset), name, by_task, params, known.model_dir)
    if note and int(os.environ.get("RANK", 0)) == 0:  # once under torchrun, before anything loads
        print(note, flush=True)
    return args


def check_model_and_out_dir(args, toy_default=None, missing_hint="", check_tokenizer=None):
    """The last up-front checks of a run: the start model (resolved, ops/checks.check_model; a
    resume keeps the hub commit its run started from) and its headers (no weights loaded), the task's
    own check of its tokenizer (check_tokenizer(tokenizer): tasks.check_tokenizer), and what --out-dir
    already holds (another run is refused unless --resume or --force)."""
    check_model(args, toy_default, missing_hint, recorded_revision(args))
    if check_tokenizer is not None:
        check_tokenizer(load_tokenizer(args.model_dir))
    # one run per out-dir: rank 0 holds its lock from here to the end (ops/lock.py), before anything in it
    # is read, deleted (--force) or written; a refusal in checks.upfront gives it back (the out-dir as it was)
    if int(os.environ.get("RANK", 0)) == 0:
        lock.take(args.out_dir)
    check_room(args)  # disk space for a save, before a model is loaded
    check_run_dir(args)  # last: --force deletes


def rl_data(args, registry, check_schedule, check_tokenizer, toy_start):
    """grpo.py's inputs, checked before anything loads or is written (bad input: one line, exit 2):
    the flags (ops/checks.py), every task's prompts shuffled (d1: seed 42), the Sudoku split and
    the validation items carved out (taskdata/splits.py), the start model (the toys': `toy_start`)
    with every label within the rollout canvas under its tokenizer, and --out-dir.
    registry: tasks.TASKS; check_tokenizer: tasks.check_tokenizer. -> (examples, val, split)."""
    with upfront():
        world_size = int(os.environ.get("WORLD_SIZE", 1))  # torchrun's; the group comes later
        check_grpo_args(args, world_size, registry, check_schedule)
        examples = load_rl_data(args, registry)
        examples, val, split = protocol_split(args, examples, registry)

        def labels_fit(tokenizer):
            check_tokenizer(args.task, tokenizer, examples + val, args.gen_length)

        toys = all(registry[name].make for name in args.task.split(","))
        check_model_and_out_dir(args, toy_start if toys else None, "diffu-GRPO starts from the "
                                "SFT model: run sft.py first", labels_fit)
    return examples, val, split


def load_policy(args, run):
    """The start model with its LoRA adapters (if any), not yet wrapped for DDP / FSDP, and --resume's
    weights put back. -> (model, tokenizer, ref_context, saved): inside ref_context the model IS the
    reference policy (adapters switched off; for full fine-tuning a do-nothing context, see
    load_reference); saved: {"from": save directory, "state": trainer state} of --resume (both None on a
    fresh run), which start_run takes."""
    # first: from here on a cluster's stop signal is noted, not fatal (the loop saves, exits 75; ops/stop.py)
    run.stop = Stopper(args.max_hours, args.out_dir, run.master)
    # --load-in-4bit (d1's RL): NF4 base with double quantization, bf16 compute (docs/d1.md §4.3). Still bad
    # input: a NaN or inf weight shows only as the weights are read (checkpoint._check_finite), before any write
    with upfront():
        model, tokenizer = load(args.model_dir, device=run.device, dtype=run.dtype, load_in_4bit=args.load_in_4bit)
    ref_context = nullcontext
    if args.lora_r > 0:
        add_lora(model, r=args.lora_r, alpha=args.lora_alpha, dropout=args.lora_dropout,
                 targets=tuple(args.lora_targets.split(",")))
        # π_ref costs no second copy of the weights: the frozen base IS the reference (d1: disable_adapter(),
        # docs/d1.md §3.2). It never moves: d1's sync_ref_model is a no-op under PEFT
        ref_context = lambda: lora_disabled(model)
    model.gradient_checkpointing = args.gradient_checkpointing  # under FSDP: inside each sharded block
    if getattr(args, "compile", False):  # grpo.py --compile, never with --fsdp (its check_args)
        compile_blocks(model)  # in place: state-dict keys, LoRA and resume are unaffected
    src, state = resume_weights(args, run, model)  # before any sharding: wrap_for_training comes next
    stored = stored_dtype(args.model_dir)  # what the start model's shards hold (config.json, else their headers)
    if run.master and stored and stored != str(run.save_dtype).removeprefix("torch."):  # never silent
        print(f"note: {args.model_spec} stores {stored}; this run trains and saves "
              f"{str(run.save_dtype).removeprefix('torch.')} on {run.device_type} (--dtype {stored} keeps the base's)")
    # where the weights came from (modelio/provenance.py): every save and train_args.json carry it
    run.provenance = start_record(args.model_spec, args.model_dir, args.model_revision,
                                  [data_record(d) for d in args.data.split(",") if d]) if run.master else None
    return model, tokenizer, ref_context, {"from": src, "state": state}


def load_reference(args, run):
    """Full fine-tuning with β > 0: a frozen copy of the START model (--model-dir), loaded after the
    policy is sharded so that a GPU never holds two full copies, and sharded the same way. It never
    trains, so it needs no fp32 masters: save_dtype. With LoRA (the reference is the base, adapters
    off) or β = 0 (nothing to compare against): None."""
    if args.lora_r > 0 or not args.beta:  # grpo.py's only: SFT has no reference policy
        return None
    ref_model = from_pretrained(args.model_dir, dtype=run.save_dtype, device=run.device).eval()
    if args.fsdp:  # no optimizer, no gradients
        shard_model(ref_model.requires_grad_(False), run.device_type)
    return ref_model


def start_run(args, run, model, optimizer, saved, unit, republish=True):
    """Once the optimizer exists: --resume's bookkeeping when load_policy put a save back (`saved`; its state
    is popped so its memory goes): the optimizer state, one line naming the save, a note per flag changed
    (but RESUME_MAY_CHANGE), the save published again when `republish` (True, or a function of the saved
    state); then the trainable parameters. -> (start step, the script's saved extras), (0, None) fresh.
    `unit`: "step" or "round", for the message."""
    frozen = freeze_pad_row(model, optimizer)  # a family's padding_idx: before any step, resumed or not
    step, extras, state = 0, None, saved.pop("state")
    if state is not None:
        republish = republish(state) if callable(republish) else republish
        restore_optimizer(args, run, model, optimizer, state)
        if run.master:
            changed = {k: (v, getattr(args, k)) for k, v in state["args"].items()
                       if k not in RESUME_MAY_CHANGE and getattr(args, k, v) != v}
            print(f"resumed from {saved['from']} at {unit} {state['step']}" +
                  "".join(f"\n  note: --{k.replace('_', '-')} was {a}, now {b}" for k, (a, b) in changed.items()))
            if republish:
                publish(saved["from"], args.out_dir)
        step, extras = state["step"], state.get("extras")
        del state
    if run.master:
        params = [p for p in model.parameters() if p.requires_grad]
        print(f"trainable parameters: {sum(p.numel() for p in params):,} of {model.num_params():,}" +
              (f" (the pad / EOS row {frozen} of the embedding frozen, as the family's padding_idx)" if frozen else ""))
    return step, extras


def freeze_pad_row(model, optimizer):
    """Under full fine-tuning, keep the input embedding's pad row as it is for a family whose own code never
    trains it (Family.pad_row_frozen: padding_idx=pad_token_id); LLaDA trains every row, as d1 does. The
    row's gradient is zeroed as it is computed and before each step, and the row is put back after each step
    (AdamW's weight decay shrinks it, gradient or not): docs/model.md. -> the pad id frozen, or None."""
    w = model.transformer.wte.weight
    pad = model.config.pad_token_id
    if not family_of_model(model).pad_row_frozen or pad is None or not w.requires_grad:
        return None

    def local(t):  # FSDP2: this rank's rows of a DTensor; the tensor itself otherwise
        return t.to_local() if hasattr(t, "to_local") else t

    rows = torch.arange(w.shape[0], device=local(w).device)  # (V,) each row's id, sharded as the weight
    if hasattr(w, "to_local"):
        from torch.distributed.tensor import distribute_tensor
        rows = distribute_tensor(rows, w.device_mesh, w.placements).to_local()  # (V_local,)
    here = (rows == pad).nonzero().flatten()  # (1,) where this rank holds the row, else (0,)
    if not hasattr(w, "to_local"):  # one process or DDP: before accumulation and DDP's all-reduce
        w.register_hook(lambda g: g.index_fill(0, here, 0.0))
    saved = {}

    def pre(opt, args, kwargs):
        with torch.no_grad():
            saved["row"] = local(w)[here].clone()  # (1, C) or (0, C)
            if w.grad is not None:
                local(w.grad)[here] = 0.0

    def post(opt, args, kwargs):
        with torch.no_grad():
            local(w)[here] = saved.pop("row")

    optimizer.register_step_pre_hook(pre)
    optimizer.register_step_post_hook(post)
    return pad


def stop_if_stalled(bad_steps, args, run, metrics_file, record, where, hint="lower --lr, or check the data"):
    """--max-bad-steps optimizer steps in a row were skipped (a non-finite loss or gradient norm on
    some rank, ddp.step_if_finite): the weights are still finite, but training has stalled. Log
    the step's record, name the last complete save, and exit 1 on every rank together."""
    if bad_steps < args.max_bad_steps:
        return
    last = complete_saves(args.out_dir)
    line = f"stopping {where}: {bad_steps} optimizer steps in a row had a non-finite loss or gradient norm and " \
           f"were skipped (weights and AdamW state untouched). Last complete save: " \
           f"{last[-1][1] if last else 'none'}; {hint}"
    if run.master:
        log_metrics(metrics_file, record)
        print("\n" + line, file=sys.stderr)  # on a line of its own, after any progress bar
        metrics_file.close()
    tell_launcher(line)  # every rank: whichever torchrun's summary shows, it says why
    finish(run)
    sys.exit(1)
