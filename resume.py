"""
What a diffu-GRPO run saves, and how `grpo.py --resume` puts it back.

A save is two things in --out-dir: the policy in LLaDA's official layout (config.json +
safetensors shards, LoRA merged on the fly, so eval.py and any LLaDA loader read it), and
trainer_state.pt with what the official layout cannot hold: the round, the AdamW state, the flags,
and, depending on the layout of the run,
    LoRA (d1's set-up, also on a 4-bit base): the adapters (the base is --model-dir, unchanged);
    full fine-tuning, one process or DDP:      nothing more (the official weights are exact);
    full fine-tuning under --fsdp:             the fp32 master weights (the official copy is bf16).
The state file is written to a temporary name and renamed, so a crash never leaves half of one.

Under FSDP, saving and restoring the optimizer are collectives: every rank calls these functions,
and rank 0 alone touches the disk.

Used by grpo.py; not a script.
"""
import os

import torch

from adapters import lora_state_dict
from checkpoint import from_pretrained, save_merged
from ddp import full_optimizer_state, full_state_on_rank0, load_full_optimizer_state, plain_llada

STATE_FILE = "trainer_state.pt"  # beside the checkpoint in --out-dir: round, optimizer, adapters


def resume_weights(args, run, model):
    """--resume: the run's weights put into the unwrapped `model`, before any sharding.
    -> (start_round, trainer state or None). LoRA: the adapters live in the state file (the base is
    --model-dir); full FT: the official-layout checkpoint in --out-dir; FSDP: the fp32 masters in
    the state file."""
    state_file = os.path.join(args.out_dir, STATE_FILE)
    if not (args.resume and os.path.exists(state_file)):
        return 0, None
    # weights_only=False: the state also holds vars(args). FSDP: memory-mapped on CPU, so ranks other than 0
    # never read the optimizer state that rank 0 broadcasts (restore_optimizer); pages load when touched
    state = torch.load(state_file, map_location="cpu" if args.fsdp else run.device, weights_only=False,
                       mmap=args.fsdp)
    if state.get("fsdp", False) != args.fsdp:  # the two optimizer layouts differ (names vs indices)
        raise ValueError(f"{state_file} was written {'with' if state.get('fsdp') else 'without'} --fsdp; "
                         f"resume it the same way")
    if args.lora_r > 0:
        # strict=False: the file holds the adapters only. The count check catches another rank or target set
        unexpected = model.load_state_dict(state["lora"], strict=False).unexpected_keys
        if unexpected or len(state["lora"]) != len(lora_state_dict(model)):
            raise ValueError(f"{state_file} holds adapters of another LoRA setup ({unexpected[:3]}...)")
    elif args.fsdp:
        model.load_state_dict(state["masters"])  # copied onto this rank's device
    else:
        # without FSDP the training dtype is the checkpoint's (save_dtype), so the saved weights are exact
        ckpt = from_pretrained(args.out_dir, dtype=run.dtype, device=run.device)
        model.load_state_dict(ckpt.state_dict())
        del ckpt
    return state["round"], state


def restore_optimizer(args, run, model, optimizer, state):
    """--resume: the optimizer state. FSDP: rank 0's full state re-sharded onto this world size
    (a collective); otherwise each rank loads the same file."""
    if args.fsdp:
        load_full_optimizer_state(model, optimizer, state["optimizer"] if run.master else {})
    else:
        optimizer.load_state_dict(state["optimizer"])


def save_checkpoint(args, run, model, optimizer, tokenizer, round_idx):
    """Official-layout weights (LoRA merged on the fly) + what --resume needs. Called on EVERY
    rank: under FSDP the weights and the optimizer state are gathered first (collectives), then
    rank 0 writes. FSDP's official checkpoint is cast to save_dtype (bf16 on GPU, as LLaDA
    ships); the fp32 masters go to the state file, so a resume continues exactly."""
    if args.fsdp:  # on rank 0: full fp32 masters and AdamW state keyed by name; {} elsewhere
        masters, optim_state = full_state_on_rank0(model), full_optimizer_state(model, optimizer)
        to_save = plain_llada(model.config, masters, run.save_dtype) if run.master else None
    else:
        masters, to_save, optim_state = None, model, optimizer.state_dict()
    # after the collectives above, which every rank had to join, only rank 0 writes
    if not run.master:
        return
    os.makedirs(args.out_dir, exist_ok=True)
    save_merged(to_save, args.model_dir, args.out_dir)  # a 4-bit base: merged onto the bf16 weights
    tokenizer.save_pretrained(args.out_dir)
    # what --resume needs beyond the official-layout weights (the round, the optimizer, the flags, and the
    # fp32 masters under FSDP or the adapters under LoRA)
    state = {"round": round_idx, "optimizer": optim_state, "args": vars(args), "fsdp": args.fsdp,
             "masters": masters, "lora": lora_state_dict(model) if args.lora_r > 0 else None}
    state_file = os.path.join(args.out_dir, STATE_FILE)
    torch.save(state, state_file + ".tmp")
    os.replace(state_file + ".tmp", state_file)  # never a half-written state file
