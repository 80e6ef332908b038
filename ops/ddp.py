"""
torchrun set-up shared by sft.py, grpo.py and eval.py (nanochat's compute_init, in small), and the
few FSDP2 helpers that sft.py and grpo.py share. torchrun sets RANK / LOCAL_RANK / WORLD_SIZE; without
them the script runs as one process; nccl on GPU, gloo on CPU (so the 2-process tests run in CI).
init_training starts both trainers (group, device, precision, seed -> a Run); wrap_for_training puts DDP
around the model or shards it in place (--fsdp); eval.py needs compute_init only. What goes wrong and
what each piece here does about it (lost_rank_hook, step_if_finite, finish): docs/reliability.md.
The FSDP2 gathers (full_state_on_rank0, full_model_on_rank0, full_optimizer_state and its reverse) are
collectives: every rank must call them, even though only rank 0 writes.
"""
import ctypes
import datetime
import json
import math
import os
import sys
import time
from dataclasses import dataclass

import torch

from model import LLaDA

DIST_TIMEOUT_S = 1200  # a collective waits this long for a lost rank, then fails (torch: 10-30 min)


def compute_init(device="", backend="", need_group=False, timeout_s=DIST_TIMEOUT_S):
    """-> (distributed, rank, local_rank, world_size, device, device_type). device: "" = cuda if
    available. distributed: a process group exists (torchrun, or need_group). timeout_s: how long
    a collective may wait for another rank before this rank gives up with one clear line
    (lost_rank_hook) instead of hanging until the job's wall-clock limit."""
    device_type = device or ("cuda" if torch.cuda.is_available() else "cpu")
    # torchrun exports RANK for every process it starts; a plain `python x.py` has none (nanoGPT's test)
    torchrun = int(os.environ.get("RANK", -1)) != -1
    if not torchrun and not need_group:
        return False, 0, 0, 1, device_type, device_type
    # imported lazily: the one-process path above never needs torch.distributed
    import torch.distributed as dist
    # gloo on CPU: nccl needs GPUs, and the 2-process tests must run on a CPU-only machine
    backend = backend or ("nccl" if device_type == "cuda" else "gloo")
    # a rank that dies mid-collective resets its sockets, and gloo fails the others at once; a rank
    # that hangs (or a node that vanishes) is only noticed by this timeout
    timeout = datetime.timedelta(seconds=timeout_s)
    if torchrun:
        # env:// rendezvous: MASTER_ADDR / MASTER_PORT / RANK / WORLD_SIZE come from torchrun
        dist.init_process_group(backend=backend, timeout=timeout)
    else:
        # need_group: FSDP needs a process group even for one process, so without torchrun a 1-rank
        # group is made on an in-memory store (no port, no environment variables): `python sft.py
        # --fsdp` debugs as is
        dist.init_process_group(backend=backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    sys.excepthook = lost_rank_hook(rank, sys.excepthook)
    # LOCAL_RANK (rank within this node) picks the GPU; RANK is global over all nodes
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if device_type == "cuda":  # one GPU per process
        device = f"cuda:{local_rank}"
        torch.cuda.set_device(device)
    else:
        device = "cpu"
    return True, rank, local_rank, world_size, device, device_type


def is_lost_rank(e):
    """Is this exception a collective that failed because another rank died, hung or vanished?
    gloo raises a plain RuntimeError naming itself ("Connection reset by peer", "Timed out waiting
    ... for recv"); NCCL and the store raise torch's DistError kinds."""
    import torch.distributed as dist
    text = str(e)
    return isinstance(e, dist.DistError) or (isinstance(e, RuntimeError) and (
        "gloo" in text or "NCCL" in text or "Connection reset" in text or "Connection closed" in text))


def tell_launcher(line):
    """A stop on purpose (bad input, a lost rank, a full disk, a stalled run), as torchrun's summary shows
    it: its error file (TORCHELASTIC_ERROR_FILE, set for each worker) holds the line, so the summary's
    last field is the reason, not "To enable traceback see: ..." (outside torchrun: nothing)."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if path:
        try:
            with open(path, "w") as f:
                json.dump({"message": line, "timestamp": int(time.time())}, f)
        except OSError:  # the summary then says less; the line is on stderr anyway
            pass


def lost_rank_hook(rank, previous):
    """sys.excepthook for a rank of a process group: a lost rank is one line, not a traceback of
    the collective that noticed it, and the process exits at once (status 1): a broken group's
    teardown can itself hang or abort. Every other exception goes to `previous` unchanged."""
    def hook(kind, e, tb):
        if not is_lost_rank(e):
            return previous(kind, e, tb)
        first = str(e).strip().splitlines()[0] if str(e).strip() else kind.__name__
        line = f"[rank {rank}] stopping: another rank died, hung or lost the network ({first[:300]}). Its own " \
               f"log says why; the last complete save is intact: restart with --resume"
        print("\n" + line, file=sys.stderr, flush=True)  # on a line of its own, after any progress bar
        tell_launcher(line)
        sys.stdout.flush()
        os._exit(1)
    return hook


def finish(run):
    """The last line of a script under a process group: wait for every rank (rank 0 may still be
    writing a save), then tear the group down together, leaving gloo's worker threads nothing of
    Python's to free while the interpreter shuts down."""
    if run.distributed:
        import torch.distributed as dist
        # a gloo worker may free its last collective's tensor while the interpreter finalizes (SIGABRT after
        # "done", docs/reliability.md): this barrier's Work holds every collective a worker still holds, and
        # it is never freed (a few bytes, once per process), so no worker needs the GIL again
        work = dist.barrier(async_op=True)
        work.wait()
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(work))
        dist.destroy_process_group()


def everywhere(ok, run):
    """True iff `ok` holds on every rank: one all-reduce of a flag (one process: ok itself). Every
    rank must take the same branch after a collective decision, or the next collective hangs."""
    if run is None or not run.distributed:
        return bool(ok)
    import torch.distributed as dist
    flag = torch.tensor(float(bool(ok)), device=run.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def step_if_finite(optimizer, run, *values):
    """optimizer.step() only if every value (the loss, the gradient norm) is finite on every rank;
    the gradients are cleared either way. -> whether it stepped. A skipped step leaves the weights
    AND the AdamW moments untouched: one NaN would otherwise poison both for good."""
    ok = everywhere(all(math.isfinite(v) for v in values), run)
    if ok:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return ok


def default_dtype(dtype, device_type):
    """--dtype, or bf16 on GPU (LLaDA's stored dtype) and fp32 on CPU (bf16 matmuls are slow there)."""
    return getattr(torch, dtype) if dtype else (torch.bfloat16 if device_type == "cuda" else torch.float32)


def train_precision(args, device_type):
    """The precision flags shared by sft.py and grpo.py, checked, -> (dtype, save_dtype).
    save_dtype is what a plain run trains in and what the checkpoint stores (LLaDA's bf16 on GPU,
    fp32 on CPU); --fsdp trains fp32 master weights unless --dtype says otherwise and casts only
    when it saves."""
    # --fsdp is the full fine-tuning option (LoRA's trainable state is small: it stays on DDP), and a
    # 4-bit base is frozen, so it has no masters to shard. d1 itself ran DeepSpeed ZeRO-2 for both
    # stages (docs/d1.md §4.3, §5.3): gradients and optimizer state sharded, weights replicated
    if args.fsdp and (args.lora_r > 0 or args.load_in_4bit):
        raise ValueError("--fsdp is full fine-tuning: use --lora-r 0 and no 4-bit base (--no-load-in-4bit "
                         "with grpo.py's 8b preset); LoRA runs on DDP")
    # on GPU FSDP's mixed precision already computes in bf16, so --autocast is refused there: one bf16
    # mechanism per run (on CPU FSDP does no casting, so --autocast is allowed)
    if args.fsdp and args.autocast and device_type == "cuda":
        raise ValueError("--autocast is redundant with --fsdp on GPU: FSDP's MixedPrecisionPolicy already "
                         "computes in bf16 from the fp32 masters")
    save_dtype = default_dtype(args.dtype, device_type)
    # (training dtype, checkpoint dtype): fp32 masters under --fsdp, else the two are the same
    return (torch.float32 if args.fsdp and not args.dtype else save_dtype), save_dtype


def autocast_bf16(device_type, enabled):
    """The --autocast context for a forward pass (a no-op when not enabled): matmuls in bf16, the
    weights themselves untouched. Backward runs outside it, as torch recommends."""
    return torch.autocast(device_type, dtype=torch.bfloat16, enabled=enabled)


@dataclass
class Run:
    """Where this training process runs and in what precision (init_training fills it in)."""
    distributed: bool        # a process group exists (torchrun, or --fsdp in one process)
    rank: int
    local_rank: int
    world_size: int
    device: str              # "cuda:<local_rank>" or "cpu"
    device_type: str         # "cuda" or "cpu"
    dtype: torch.dtype       # the weights' dtype while training (fp32 masters under --fsdp)
    save_dtype: torch.dtype  # the checkpoint's dtype (bf16 on GPU, as LLaDA ships; fp32 on CPU)
    autocast: bool           # --autocast: every forward under bf16 autocast
    stop: object = None      # ops/stop.Stopper (trainers.load_policy): stop signals and --max-hours
    provenance: dict = None  # where the start model and data came from (trainers.load_policy; in every save)

    @property
    def master(self):
        return self.rank == 0  # rank 0 prints and writes

    def amp(self):
        """The --autocast context for a forward pass."""
        return autocast_bf16(self.device_type, self.autocast)


class RunError(RuntimeError):
    """A failure during a run, not of its input (a save the disk had no room for): the message says
    what happened, what is safe and what to do; one_line_hook prints it as one line, exit 1."""


def one_line_hook(previous):
    """sys.excepthook that prints a RunError as `script.py: error: ...` (exit 1, no traceback) and
    hands every other exception to `previous`."""
    def hook(kind, e, tb):
        if not isinstance(e, RunError):
            return previous(kind, e, tb)
        line = f"{os.path.basename(sys.argv[0])}: error: {' '.join(str(e).split())}"
        print("\n" + line, file=sys.stderr, flush=True)  # on a line of its own, after any progress bar
        tell_launcher(line)
        sys.stdout.flush()
        os._exit(1)  # a broken save's other threads (a gloo worker) must not hold the exit
    return hook


def init_training(args):
    """The first lines of sft.py and grpo.py: process group and device, the precision flags checked,
    the global seed, and the flags printed by rank 0."""
    # FSDP needs a group even for one process (compute_init's need_group)
    distributed, rank, local_rank, world_size, device, device_type = compute_init(
        args.device, args.backend, need_group=args.fsdp, timeout_s=args.dist_timeout)
    dtype, save_dtype = train_precision(args, device_type)
    # the SAME seed on every rank (llm.c does this too; nanoGPT adds the rank): identical init (LoRA's
    # random A) and data order (sft.py draws the whole global batch on every rank, keeps its slice)
    torch.manual_seed(args.seed)
    sys.excepthook = one_line_hook(sys.excepthook)  # a failed save (a full disk): one line, exit 1
    run = Run(distributed, rank, local_rank, world_size, device, device_type, dtype, save_dtype, args.autocast)
    if run.master:
        # the resolved flags, one JSON line at the top of the log: every run records its own settings
        print(json.dumps(vars(args)))
    return run


DROPOUT_KEY = 2**52  # reseed's keys live far above every other seed key of the run (docs/reliability.md)
MAX_RANKS = 4096


def reseed(seed, step, rank):
    """Key the global RNG by (run seed, step or round, rank) at the start of each step. In the loop
    only LoRA dropout draws from it (data, noise, masks and sampling have generators of their own),
    so a run resumed at step k draws exactly the dropout masks the uninterrupted run drew."""
    torch.manual_seed(DROPOUT_KEY + (seed * 1_000_003 + step) * MAX_RANKS + rank)


def wrap_for_training(model, run, fsdp):
    """The model the training passes go through. One process: as is."""
    # --fsdp: sharded in place (the same object, so every direct call of it, sampler and eval
    # included, goes through FSDP)
    if fsdp:
        return shard_model(model, run.device_type)
    # torchrun without --fsdp: DDP, which averages the trainable parameters' gradients across ranks
    if run.distributed:
        from torch.nn.parallel import DistributedDataParallel as DDP
        # device_ids names this process's GPU; on CPU (gloo) it must be None
        return DDP(model, device_ids=[run.local_rank] if run.device_type == "cuda" else None)
    return model


def set_grad_sync(model, on):
    """Gradient accumulation under DDP / FSDP: all-reduce (reduce-scatter) only on the last
    micro-batch of an optimizer step; until then gradients add up locally."""
    # nanoGPT's trick: flip the flag instead of wrapping the earlier micro-batches in no_sync(), which
    # would repeat the forward/backward code. A plain model has neither switch: nothing to do
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        model.set_requires_gradient_sync(on)
    elif hasattr(model, "require_backward_grad_sync"):  # DDP
        model.require_backward_grad_sync = on


def clip_grad_norm(params, max_norm):
    """Clip the gradients to max_norm (0 = no clipping) and return their total norm BEFORE clipping
    as a float, for the metrics log. Under FSDP the norm is all-reduced over the shards and comes
    back as a DTensor whose full value is the same on every rank."""
    # an infinite max norm clips nothing, so the norm is measured either way
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm > 0 else float("inf"))
    return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)


# -----------------------------------------------------------------------------
# FSDP2


def shard_model(model, device_type):
    """fully_shard each transformer block, then the root (embedding, final norm, LM head), in place.
    Parameters become DTensors: build the optimizer AFTER this. Returns the same module object
    (its class becomes FSDPLLaDA), so direct calls (sampler, log-prob passes) go through FSDP too."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    # On CUDA each gathered block computes in bf16 while the shards stay in their dtype (fp32 masters) and
    # gradients reduce in fp32; on CPU no casting (the tests compare FSDP to a plain fp32 run)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if device_type == "cuda" else MixedPrecisionPolicy()
    # One unit per block: its weights are all-gathered just before its forward (and its backward, gradient
    # checkpointing's recompute included) and freed after, so about one block's full weights exist at a time
    for block in model.transformer.blocks:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)  # the root holds what no block holds
    return model


def _full_options():
    from torch.distributed.checkpoint.state_dict import StateDictOptions
    # full_state_dict: unsharded tensors with the plain module's key names; cpu_offload: gathered
    # tensor by tensor into rank 0's CPU memory (other ranks get an empty dict), never a full GPU copy
    return StateDictOptions(full_state_dict=True, cpu_offload=True)


def full_state_on_rank0(model):
    """A collective: the sharded model's weights as one full {'transformer.…': tensor} dict in
    rank 0's CPU memory, in the master dtype (LLaDA-8B in fp32: 32 GB); {} on the other ranks."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict
    return get_model_state_dict(model, options=_full_options())


def plain_llada(config, state, dtype=None):
    """A plain (unsharded) CPU LLaDA holding `state`, cast to dtype (None: as is). The state dict
    is left untouched: a cast makes new tensors (LLaDA-8B fp32 -> bf16: 16 GB more)."""
    with torch.device("meta"):  # no memory: the tensors are put in place below, not copied
        full = LLaDA(config)
    # assign=True makes the (cast) tensors the parameters themselves instead of copying them into
    # the meta placeholders, which have no storage; strict, so a missing or extra key is an error
    full.load_state_dict({k: v.to(dtype) if dtype else v for k, v in state.items()}, assign=True)  # strict
    return full


def full_model_on_rank0(model, dtype=None):
    """A collective: the sharded LLaDA gathered into a plain CPU LLaDA in dtype on rank 0, ready
    for save_pretrained; None on the other ranks."""
    import torch.distributed as dist
    # every rank takes part in the gather, only rank 0 receives anything
    state = full_state_on_rank0(model)
    return plain_llada(model.config, state, dtype) if dist.get_rank() == 0 else None


def full_optimizer_state(model, optimizer):
    """A collective: the optimizer state as one full dict on rank 0, keyed by parameter name
    (empty on the other ranks), so a trainer_state.pt can be resumed on any world size."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
    return get_optimizer_state_dict(model, optimizer, options=_full_options())


def load_full_optimizer_state(model, optimizer, state):
    """A collective: rank 0's full dict (from full_optimizer_state; other ranks may pass {}) is
    broadcast tensor by tensor and each rank keeps its shard, so only rank 0 reads the whole file."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict
    set_optimizer_state_dict(model, optimizer, state,
                             options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
