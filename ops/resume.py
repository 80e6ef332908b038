"""
What a training run saves, how a save is written so that a crash can never spoil it, and how
`--resume` puts it back. Shared by sft.py and grpo.py.

A run directory (--out-dir):

    out/grpo/
      train_args.json, metrics.jsonl   the run's flags and its log (metrics.py)
      saves/step-000020/               one complete save: the policy in LLaDA's official layout
                                       (config.json + safetensors, LoRA merged) + trainer_state.pt
      saves/step-000030/               ... the last --keep-last of them
      config.json, model-*.safetensors the run's model: the latest save (grpo.py) or the best by
      save_info.json, the start        eval loss (sft.py), hard links into its save; what eval.py
      model's tokenizer, remote code   and the next stage (or another tool) read with --model-dir
      and generation_config.json       out/grpo. The start model's files are copied byte for byte
                                       into every save (checkpoint.copy_model_files)

One unit, never half of one: a save is written into saves/step-N.partial/, fsynced, then renamed, and
the run's model at the top is published with config.json removed first and linked last (what a kill at any
moment leaves, and what is tested: docs/reliability.md). trainer_state.pt holds what the official layout
cannot: the step, the optimizer state, the flags, the script's extras, and the LoRA adapters (the base is
--model-dir) or under --fsdp the fp32 masters. Under FSDP saving and restoring are collectives: every rank
calls these functions, rank 0 alone touches the disk. Not a script.
"""
import errno
import json
import os
import re
import shutil
import sys

import torch

from modelio.adapters import lora_state_dict
from modelio.checkpoint import CONFIG_FILE, INDEX_FILE, from_pretrained, save_merged
from ops.ddp import (RunError, everywhere, full_optimizer_state, full_state_on_rank0, load_full_optimizer_state,
                     plain_llada)
from ops import disk
from ops.checks import check_out_dir, require
from ops.metrics import ARGS_FILE, METRICS_FILE, read_json

SAVES_DIR = "saves"                  # complete saves, one directory each
STATE_FILE = "trainer_state.pt"      # in each save, beside the official-layout weights
INFO_FILE = "save_info.json"         # in each save and in the published model: step, flags, extras
PARTIAL = ".partial"                 # a save being written; never read, removed on the next save
BEST_FILE = "best.json"              # grpo.py --val-size: the save of the best validation round (ops/best.py)
SAVE_NAME = re.compile(r"step-(\d+)$")
# what marks a directory as a run of ours (checks.check_out_dir refuses to write over it); a
# trainer_state.pt at the top is an older run layout without saves/, still recognised as a run
RUN_FILES = (SAVES_DIR, METRICS_FILE, ARGS_FILE, CONFIG_FILE, INDEX_FILE, INFO_FILE, STATE_FILE, BEST_FILE)
# the flags a --resume may change without a note, and in which `--resume auto` still sees the same run: how
# long to run, how often to save, where and how to stop, where to stream
RESUME_MAY_CHANGE = {"rounds", "max_steps", "epochs", "resume", "force", "save_every", "keep_last", "eval_every",
                     "dist_timeout", "max_bad_steps", "max_hours", "wandb"}


def save_dir(out_dir, step):
    return os.path.join(out_dir, SAVES_DIR, f"step-{step:06d}")


def best_save(out_dir):
    """The absolute path of the save that <out_dir>/best.json names (--keep-last never prunes it), or None."""
    path = os.path.join(out_dir, BEST_FILE)
    return os.path.abspath(os.path.join(out_dir, read_json(path)["save"])) if os.path.isfile(path) else None


def save_problem(path):
    """Why the save directory `path` cannot be resumed from (a file it needs is absent or empty, its
    weight index names a shard that is not there), or None. A save is renamed into place only once
    whole, so this finds what happened to it afterwards: a second run on the same out-dir before the
    lock (ops/lock.py), a disk or a person that removed files."""
    need = [CONFIG_FILE, INDEX_FILE, STATE_FILE, INFO_FILE]
    try:
        with open(os.path.join(path, INDEX_FILE)) as f:
            need += sorted(set(json.load(f)["weight_map"].values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return f"no readable {INDEX_FILE}"
    for name in need:
        p = os.path.join(path, name)
        if not os.path.isfile(p) or os.path.getsize(p) == 0:
            return f"{name} {'is empty' if os.path.isfile(p) else 'is missing'}"
    return None


def complete_saves(out_dir, skipped=None):
    """[(step, path)] of the complete saves in out_dir, oldest first: named step-N (a *.partial is not
    one) and whole (save_problem). `skipped`, a list, gets (path, why) for each named save that is not."""
    root = os.path.join(out_dir, SAVES_DIR)
    found = [(int(m[1]), os.path.join(root, d)) for d in os.listdir(root) if (m := SAVE_NAME.match(d))] \
        if os.path.isdir(root) else []
    whole = []
    for step, path in sorted(found):
        why = save_problem(path)
        if why is None:
            whole.append((step, path))
        elif skipped is not None:
            skipped.append((path, why))
    return whole


def changed_flags(saved, args):
    """The flags (outside RESUME_MAY_CHANGE) whose values in `saved` (a run's recorded vars(args), as
    JSON) differ from `args`'s: ["--lr: 0.001 -> 0.01", ...]."""
    now = json.loads(json.dumps(vars(args)))  # tuples become lists, as in the recorded copy
    return [f"--{k.replace('_', '-')}: {saved.get(k)} -> {v}" for k, v in now.items()
            if k not in RESUME_MAY_CHANGE and saved.get(k) != v]


def resolve_auto_resume(args):
    """`--resume auto`, a requeued job's unchanged command, becomes --resume (--out-dir holds a
    complete save of this same command), a fresh start (no run there, or this command's run
    stopped before its first save: --force clears it) or a refusal (another run's directory:
    any flag outside RESUME_MAY_CHANGE differs). Every rank decides alike from what is on disk."""
    require(not args.force, "--resume auto and --force contradict each other: continue the run, or start over")
    saves = complete_saves(args.out_dir)
    recorded = os.path.join(saves[-1][1], INFO_FILE) if saves else os.path.join(args.out_dir, ARGS_FILE)
    args.resume = False
    if not os.path.exists(recorded):
        return  # nothing of a run here (a run with files but no record is refused by check_out_dir)
    saved = read_json(recorded)  # save_info.json: {"step", ..., "args"}; train_args.json: the args (+ world_size)
    changed = changed_flags(saved["args"] if saves else saved, args)
    require(not changed, f"--resume auto: {args.out_dir} holds another run ({'; '.join(changed[:4])}); "
            "--resume continues it with these flags, --force starts over, or pick another --out-dir")
    args.resume, args.force = bool(saves), not saves


def recorded_revision(args):
    """With --resume (or `--resume auto`): the hub commit that this run's newest save started from,
    when --model-dir is the same hub id without @revision, so that a resumed run keeps its base even
    after the hub's main has moved on; else None."""
    saves = complete_saves(args.out_dir) if args.resume else []
    info = os.path.join(saves[-1][1], INFO_FILE) if saves else ""
    saved = read_json(info)["args"] if os.path.isfile(info) else {}
    return saved.get("model_revision") if saved.get("model_spec") == args.model_dir else None


def check_run_dir(args):
    """sft.py's and grpo.py's --out-dir, checked up front (inside checks.upfront): another run there
    is refused unless --resume continues it or --force starts over (checks.check_out_dir, which
    deletes on --force: call this last), and --resume needs a complete save to continue from.
    `--resume auto` is resolved here first."""
    if args.resume == "auto":
        resolve_auto_resume(args)
    check_out_dir(args.out_dir, args.resume, args.force, RUN_FILES)
    require(not args.resume or complete_saves(args.out_dir), f"--resume: {args.out_dir} holds no complete save "
            "(the run stopped before its first); start it again with --force instead of --resume")



def _fsync_dir_tree(path):
    """Flush every file of a freshly written directory, then the directory itself, so that a
    rename after this publishes bytes that are on disk (a node losing power, not only a killed
    process, then finds either the old state or the whole new save)."""
    for name in os.listdir(path):
        with open(os.path.join(path, name), "rb") as f:
            os.fsync(f.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(src, out_dir):
    """Make save `src` the run's model at the top of out_dir: hard links (no second copy of 16 GB;
    a plain copy where the filesystem has no links), config.json removed first and linked last, so
    a reader finds the old model, no model, or the new one, never a mix. Stale shards go, and so does
    any *.tmp an interrupted publish left. Publishing the model that is there already (--resume of a
    finished run) leaves the directory as it was."""
    top_config = os.path.join(out_dir, CONFIG_FILE)
    if os.path.lexists(top_config):
        os.remove(top_config)  # from here until the last line, nothing loads the top as a model
    names = [n for n in sorted(os.listdir(src)) if n not in (STATE_FILE, CONFIG_FILE)] + [CONFIG_FILE]
    for name in names:
        source, dest = os.path.join(src, name), os.path.join(out_dir, name)
        tmp = dest + ".tmp"
        if os.path.lexists(tmp):
            os.remove(tmp)
        # already a link to this very file: rename(2) of one link of a file onto another does nothing and
        # would leave the *.tmp beside it, a second name of the shard
        if os.path.isfile(dest) and not os.path.islink(dest) and os.path.samefile(source, dest):
            continue
        try:
            os.link(source, tmp)
        except OSError:  # no hard links here (some network filesystems): copy
            shutil.copy2(source, tmp)
        os.replace(tmp, dest)
    for name in os.listdir(out_dir):  # shards of an earlier model with another shard count, and their *.tmp
        model = name.removesuffix(".tmp")
        if model.startswith("model") and model.endswith(".safetensors") and name not in names or \
                name.endswith(".tmp") and model in names:
            os.remove(os.path.join(out_dir, name))


def trainable_finite(model, run):
    """True if every trainable tensor is finite on every rank (the frozen base never changes, so it
    is not read; under FSDP each rank checks its own shards, then the ranks agree)."""
    local = (p.to_local() if hasattr(p, "to_local") else p for p in model.parameters() if p.requires_grad)
    return everywhere(all(bool(torch.isfinite(t).all()) for t in local), run)


def save_checkpoint(args, run, model, optimizer, step, extras=None, make_public=True):
    """Write save `step` (official-layout weights, LoRA merged, + trainer_state.pt) as one unit, keep the
    last args.keep_last saves, and (make_public) publish it as the run's model. Called on EVERY rank: under
    FSDP the weights (cast to save_dtype; the fp32 masters go to the state file) and the optimizer state are
    gathered first. `extras`: the script's resume state, its plain numbers also in save_info.json. Refuses
    non-finite weights; the tokenizer and remote code are args.model_dir's files (checkpoint.save_merged).
    A save that cannot be written (a full disk: save_failure) raises RunError on every rank, the same line."""
    if not trainable_finite(model, run):  # the trainers skip non-finite steps, so this is a bug guard
        raise RunError(f"refusing to save step {step}: the model holds non-finite weights")
    if args.fsdp:  # on rank 0: full fp32 masters and AdamW state keyed by name; {} elsewhere
        masters, optim_state = full_state_on_rank0(model), full_optimizer_state(model, optimizer)
        to_save = plain_llada(model.config, masters, run.save_dtype) if run.master else None
    else:
        masters, to_save, optim_state = None, model, optimizer.state_dict()
    # after the collectives above, which every rank had to join, only rank 0 writes; then every rank learns how
    # that went (one small broadcast: the others would wait for rank 0 at the next step's first collective
    # anyway), so that a failed save stops every rank with the same line, not rank 0 alone
    failure = error = None
    if run.master:
        try:
            final = save_dir(args.out_dir, step)
            _write_save(args, model, to_save, optimizer_state=optim_state, masters=masters, step=step,
                        extras=extras, final=final, provenance=run.provenance)
            if make_public:
                publish(final, args.out_dir)
        except Exception as e:  # noqa: BLE001 (each kind is sorted out in save_failure; a bug is raised again)
            failure, error = save_failure(args, step, e)
    failure = _from_rank0(failure, run)
    if error is not None:
        raise error
    if failure:
        raise RunError(failure)


def _from_rank0(message, run):
    """rank 0's `message` (a str or None) on every rank; every rank must call it (one process: as is)."""
    if run is None or not getattr(run, "distributed", False):
        return message
    import torch.distributed as dist
    box = [message]
    dist.broadcast_object_list(box, src=0)
    return box[0]



def save_failure(args, step, e):
    """rank 0, when writing save `step` raised `e`: the partial save removed -> (the line every rank stops
    with, the exception rank 0 raises instead, or None). A NaN or inf that save_pretrained met (a bug guard);
    a full disk or quota, a file system gone read-only or failing: the disk, its free space and the newest
    complete save. Anything else is a bug, raised as it is (a traceback) once the other ranks know."""
    partial = save_dir(args.out_dir, step) + PARTIAL
    if isinstance(e, ValueError):
        shutil.rmtree(partial, ignore_errors=True)
        return f"refusing to save step {step}: {e}", None
    need = disk.save_bytes(args)
    code, full = disk.no_room(e, partial, need)
    where = disk.being_written(e, partial)
    shutil.rmtree(partial, ignore_errors=True)  # the saves before this one are whole; its room is free again
    if code is None and not full:
        first = (str(e).strip().splitlines() or [""])[0][:200]
        return f"rank 0 could not write the save of step {step} ({type(e).__name__}: {first}); see its log", e
    last = complete_saves(args.out_dir)
    fix = "free space on it" if full else "repair the file system"
    if last:
        then = f"the newest complete save is {last[-1][1]}, untouched: {fix}, then run the same command with --resume"
    else:
        then = f"no save is complete yet: {fix}, then run the same command with --resume auto (it starts over)"
    return f"the save of step {step} could not be written ({os.strerror(code or errno.ENOSPC)}: {where}); the " \
           f"disk of --out-dir, {disk.disk_of(args.out_dir)}, has {disk.human_bytes(shutil.disk_usage(args.out_dir).free)} " \
           f"free; one save of this run takes about {disk.human_bytes(need)}; {then}", None


def _write_save(args, model, to_save, optimizer_state, masters, step, extras, final, provenance=None):
    """save_checkpoint's writing, on rank 0: save `final` as one unit (every file into final.partial,
    flushed, then renamed), and the oldest saves beyond --keep-last removed."""
    partial = final + PARTIAL
    for old in (partial, final):  # a crashed earlier attempt at this step, or a re-run of it
        shutil.rmtree(old, ignore_errors=True)
    os.makedirs(partial)
    save_merged(to_save, args.model_dir, partial)
    extras = extras or {}
    torch.save({"step": step, "optimizer": optimizer_state, "args": vars(args), "fsdp": args.fsdp, "masters": masters,
                "lora": lora_state_dict(model) if args.lora_r > 0 else None, "extras": extras},
               os.path.join(partial, STATE_FILE))
    plain = {k: v for k, v in extras.items() if isinstance(v, (int, float, str, bool))}
    with open(os.path.join(partial, INFO_FILE), "w") as f:  # which run and which step this model is
        json.dump({"step": step, **plain, "args": vars(args), "provenance": provenance}, f, indent=2)
    _fsync_dir_tree(partial)
    os.rename(partial, final)  # atomic: from here on the save exists, whole
    # keep the newest keep_last saves, and no leftover *.partial of an earlier crash
    skipped, best = [], best_save(args.out_dir)  # the validation-selected save outlives --keep-last
    saves = [s for s in complete_saves(args.out_dir, skipped) if os.path.abspath(s[1]) != best]
    for old in [p for _, p in saves[:max(0, len(saves) - args.keep_last)]] + [p for p, _ in skipped]:
        shutil.rmtree(old, ignore_errors=True)  # the oldest, and any save that is no longer whole
    root = os.path.join(args.out_dir, SAVES_DIR)
    for name in os.listdir(root):
        if name.endswith(PARTIAL):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def resume_weights(args, run, model):
    """--resume: the newest complete save's weights put into the unwrapped `model`, before any
    sharding. -> (save directory, trainer state); (None, None) without --resume. LoRA: the
    adapters live in the state file (the base is --model-dir); full FT: the save's official
    layout; FSDP: the fp32 masters in the state file."""
    if not args.resume:
        return None, None
    skipped = []
    saves = complete_saves(args.out_dir, skipped)
    if not saves:  # checks.check_out_dir saw a run here, but none of its saves was complete
        raise FileNotFoundError(f"--resume: {args.out_dir} holds no complete save (the run stopped before its "
                                f"first save); start it again without --resume (--force clears the directory)")
    src = saves[-1][1]
    if run.master:
        for path, why in skipped:
            if int(SAVE_NAME.search(path)[1]) > saves[-1][0]:
                print(f"note: --resume skips {path} ({why}); continuing from the newest whole save, {src}",
                      file=sys.stderr)
    state_file = os.path.join(src, STATE_FILE)
    # weights_only=False: the state also holds vars(args). FSDP: memory-mapped on CPU, so ranks other than 0
    # never read the optimizer state that rank 0 broadcasts (restore_optimizer); pages load when touched
    state = torch.load(state_file, map_location="cpu" if args.fsdp else run.device, weights_only=False,
                       mmap=args.fsdp)
    if state.get("fsdp", False) != args.fsdp:  # the two optimizer layouts differ (names vs indices)
        raise ValueError(f"{state_file} was written {'with' if state.get('fsdp') else 'without'} --fsdp; "
                         f"resume it the same way")
    if args.lora_r > 0:
        # strict=False: the file holds the adapters only. The count check catches another rank or target set
        if state["lora"] is None:
            raise ValueError(f"{state_file} is from a full fine-tuning run; resume it with --lora-r 0")
        unexpected = model.load_state_dict(state["lora"], strict=False).unexpected_keys
        if unexpected or len(state["lora"]) != len(lora_state_dict(model)):
            raise ValueError(f"{state_file} holds adapters of another LoRA setup ({unexpected[:3]}...)")
    elif args.fsdp:
        model.load_state_dict(state["masters"])  # copied onto this rank's device
    else:
        # without FSDP the training dtype is the checkpoint's (save_dtype), so the saved weights are exact
        ckpt = from_pretrained(src, dtype=run.dtype, device=run.device)
        model.load_state_dict(ckpt.state_dict())
        del ckpt
    return src, state


def restore_optimizer(args, run, model, optimizer, state):
    """--resume: the optimizer state. FSDP: rank 0's full state re-sharded onto this world size
    (a collective); otherwise each rank loads the same file."""
    if args.fsdp:
        load_full_optimizer_state(model, optimizer, state["optimizer"] if run.master else {})
    else:
        optimizer.load_state_dict(state["optimizer"])
