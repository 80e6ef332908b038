"""
The disk under a run's --out-dir: how much one save takes (save_bytes, from the start model's headers), the
up-front room check (check_room), and, when a save fails, whether the disk was full and where it is (no_room,
disk_of, being_written), for ops/resume.save_failure's one line. Not a script.
"""
import errno
import math
import os
import re
import shutil
import sys

import torch

from modelio.checkpoint import header_info
from modelio.model_files import model_files
from ops.checks import require
from ops.ddp import train_precision


def save_bytes(args):
    """About how many bytes one save of this run takes, from the start model's safetensors headers (8 bytes of
    little-endian length, then JSON: each tensor's shape; no weight read), so its parameters whatever dtype
    its files hold: the weights in the dtype the run saves (ddp.train_precision; a 4-bit base's saves hold
    its stored weights), the base's other files, and trainer_state.pt: full fine-tuning's two AdamW moments
    (under --fsdp also the masters) in the training dtype, or LoRA's fp32 adapters and moments. 0 when the
    start model is not written yet (the tiny default)."""
    if not os.path.isdir(args.model_dir):
        return 0
    shards = [os.path.join(args.model_dir, f) for f in os.listdir(args.model_dir) if f.endswith(".safetensors")]
    shapes = header_info(args.model_dir)[0]
    params = sum(math.prod(shape) for shape in shapes.values())
    dtype, save_dtype = train_precision(args, (args.device or ("cuda" if torch.cuda.is_available() else "cpu"))[:4])
    weights = sum(map(os.path.getsize, shards)) if args.load_in_4bit else params * save_dtype.itemsize
    weights += sum(f.stat().st_size for f in model_files(args.model_dir))  # tokenizer, remote code, ...
    if args.lora_r > 0:  # r * (in + out) per adapted linear
        targets = [f".{t}.weight" for t in (args.lora_targets or "").split(",") if t]
        lora = sum(args.lora_r * sum(s) for k, s in shapes.items() if len(s) == 2 and k.endswith(tuple(targets)))
        return weights + 3 * 4 * lora
    return weights + (2 + bool(args.fsdp)) * dtype.itemsize * params


def human_bytes(n):
    """A byte count in the unit that fits: 1000 B, 12.3 KiB, 45.6 MiB, 7.8 GiB."""
    k = next(k for k in (3, 2, 1, 0) if n >= 1024 ** k or k == 0)
    return f"{n} B" if k == 0 else f"{n / 1024 ** k:.1f} {('KiB', 'MiB', 'GiB')[k - 1]}"


def existing_dir(path):
    """The nearest directory at or above path that exists (under torchrun only rank 0 makes the out-dir)."""
    path = os.path.abspath(path)
    return path if os.path.isdir(path) else existing_dir(os.path.dirname(path))


def _unescape(field):
    """A /proc/self/mounts field: a space, tab or backslash in a path is written as an octal escape (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def disk_of(path):
    """The file system holding path, for a message: "/dev/sda1 (ext4) mounted on /scratch" (the longest mount
    point above it in /proc/self/mounts, the last of equal ones: it covers the others), else its mount point."""
    where = os.path.realpath(existing_dir(path))
    found = None  # (source, mount point, type)
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                source, mount, kind = [_unescape(x) for x in line.split()[:3]]
                if os.path.commonpath([where, mount]) == mount and (found is None or len(mount) >= len(found[1])):
                    found = (source, mount, kind)
    except (OSError, ValueError):
        found = None
    if found is None:
        while not os.path.ismount(where):
            where = os.path.dirname(where)
        return f"the file system mounted on {where}"
    return f"{found[0]} ({found[2]}) mounted on {found[1]}"


def check_room(args):
    """Up front: the disk under --out-dir has room for one save (save_bytes); a note when it has not
    for the --keep-last saves plus the one being written."""
    need = save_bytes(args)
    free = shutil.disk_usage(existing_dir(args.out_dir)).free
    require(free >= need, f"--out-dir {args.out_dir} has {human_bytes(free)} free; one save of this run takes "
            f"about {human_bytes(need)} (the weights plus trainer_state.pt): free some space or pick another --out-dir")
    if free < (args.keep_last + 1) * need and int(os.environ.get("RANK", 0)) == 0:
        print(f"note: --out-dir {args.out_dir} has {human_bytes(free)} free, less than the {args.keep_last + 1} "
              f"saves of about {human_bytes(need)} each that --keep-last {args.keep_last} holds while the next is "
              f"written", file=sys.stderr)


NO_ROOM = (errno.ENOSPC, errno.EDQUOT)


def no_room(e, partial, need):
    """Did writing into `partial` fail for want of room (a full disk or quota)? -> (errno or None, yes/no).
    An OSError (or one it came from) has its errno, safetensors writes it ("code: 28", "os error 28");
    torch.save's C++ writer loses it ("unexpected pos ... vs ...", "iostream error"): then the disk is
    asked, before the partial save is removed: less free than the save still needed, or no room for a probe
    of that much (at most 1 MiB; a quota is not in statvfs' numbers)."""
    seen = e
    while seen is not None and not (isinstance(seen, OSError) and seen.errno):
        seen = seen.__cause__ or seen.__context__
    m = re.search(r"\bcode: (\d+)|os error (\d+)", str(e))
    code = None
    if seen is not None:
        code = seen.errno
    elif m:
        code = int(m[1] or m[2])
    if code is not None or not os.path.isdir(partial):
        return code, code in NO_ROOM
    left = max(need - sum(f.stat().st_size for f in os.scandir(partial)), 4096)
    if shutil.disk_usage(partial).free < left:
        return None, True
    try:
        with open(os.path.join(partial, ".room-probe"), "wb") as f:
            f.write(bytes(min(left, 2**20)))
            os.fsync(f.fileno())
    except OSError as probe:
        return None, probe.errno in NO_ROOM
    return None, False


def being_written(e, partial):
    """The file of the partial save a write failed in: the error's own where it names one there (a copy's
    error may name its source, the start model's file), else the newest file there, else the folder."""
    named = getattr(e, "filename", None)
    if named and os.path.abspath(str(named)).startswith(os.path.abspath(partial) + os.sep):
        return named
    if not os.path.isdir(partial):
        return partial
    files = [f.path for f in os.scandir(partial) if f.name != ".room-probe"]
    return max(files, key=os.path.getmtime, default=partial)
