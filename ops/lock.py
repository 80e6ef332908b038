"""
One run per --out-dir: an exclusive lock on <out-dir>/run.lock, taken before the out-dir is checked (so
a second run can neither --force the first run's files away nor write its saves over the first's) and
held until the process ends. The kernel drops a flock when its holder exits, however it exits (kill -9
included), so a crashed run's lock is free at once; the file's text names who held it last, and a
run that takes over from a holder that never released it says so in a note.

Under torchrun, rank 0 takes the lock for the whole run (the other ranks of the same run would
otherwise refuse each other); a refusal ends rank 0 in its up-front checks (one line, exit 2) and
torchrun ends the other ranks, naming that line as the root cause. Used by ops/trainers.py; not a
script.
"""
import atexit
import fcntl
import json
import os
import socket
import sys
import time

from ops.checks import InputError

LOCK_FILE = "run.lock"
_held = {}  # out_dir (real path) -> the open descriptor holding its lock, for the life of the process


def _holder():
    """Who we are, as the lock file records it."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]])[:300]}


def _describe(text):
    """The holder a lock file names, for a message ("pid 123 on host-a since 2026-11-27 01:02:03: sft.py ...")."""
    try:
        h = json.loads(text)
        return f"pid {h['pid']} on {h['host']} since {h['since']}: {h['command']}"
    except (ValueError, KeyError, TypeError):
        return "a run whose lock file says nothing readable"


def take(out_dir, what="--out-dir"):
    """Hold out_dir's lock until this process ends -> None. Creates out_dir (and the lock file) if
    needed. Another live run holding it: InputError naming the holder. out_dir not writable (a
    read-only file system, no permission): InputError saying so, before any model is loaded. `what`
    names out_dir in the messages (eval.py: "result dir")."""
    key = os.path.realpath(out_dir)
    if key in _held:
        return
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise InputError(f"{what} {out_dir} exists and is not a directory")
    path = os.path.join(out_dir, LOCK_FILE)
    made_dirs, d = [], os.path.abspath(out_dir)  # the directories makedirs will make, deepest first
    while not os.path.isdir(d):
        made_dirs.append(d)
        d = os.path.dirname(d)
    made_file = not os.path.lexists(path)
    try:
        os.makedirs(out_dir, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise InputError(f"{what} {out_dir} is not writable ({e.strerror}); pick another --out-dir") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        os.close(fd)
        raise InputError(f"{what} {out_dir} is in use by another run ({_describe(text)}); wait for it to end, "
                         f"or pick another --out-dir") from None
    previous = os.pread(fd, 4096, 0)
    try:  # the holder's name, for a refused run to read; also the probe that the directory is writable
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(_holder()).encode(), 0)
        os.fsync(fd)
    except OSError as e:
        os.close(fd)
        raise InputError(f"{what} {out_dir} is not writable ({e.strerror}); pick another --out-dir") from None
    if previous.strip() and b'"released"' not in previous:
        print(f"note: took over {path} from {_describe(previous)}, which ended without releasing it",
              file=sys.stderr)
    _held[key] = (fd, out_dir, made_dirs, made_file, previous)
    if len(_held) == 1:
        atexit.register(release_all)


def give_back_all():
    """Undo every take() of this process, newest first, for a run refused by a check after it (the
    out-dir holds another run): each lock file's text as it was, or no lock file (and no directory)
    where take() made them. A refused run writes nothing."""
    for key in reversed(list(_held)):
        fd, out_dir, made_dirs, made_file, previous = _held.pop(key)
        if made_file:
            os.remove(os.path.join(out_dir, LOCK_FILE))
        else:
            os.ftruncate(fd, 0)
            os.pwrite(fd, previous, 0)
        os.close(fd)
        for d in made_dirs:
            try:
                os.rmdir(d)
            except OSError:  # something else was written there after all: it stays, with its directory
                break


def release_all():
    """Mark every lock this process holds as released (a later run then takes it without a note) and
    drop it: at a normal exit. A killed process leaves its text, and the kernel drops its lock."""
    for key, (fd, *_) in list(_held.items()):
        try:
            holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({**holder, "released": time.strftime("%Y-%m-%d %H:%M:%S")}).encode(), 0)
        except (OSError, ValueError):
            pass
        os.close(fd)
        del _held[key]
