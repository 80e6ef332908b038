"""
Bad input is answered before any work starts: the entry scripts (sft.py, grpo.py, eval.py) check
their flags, paths, data and output directory first, inside `with upfront():`, and anything wrong
there is ONE line on stderr naming the problem (file:line for data), exit status 2, no traceback,
and nothing written. A mistyped path should cost a second, not a node-hour.

    with upfront():                              # the scripts' first block, before any process group
        require(args.lr > 0, f"--lr must be > 0, got {args.lr}")
        examples = load_rl_data(args)            # the loaders' own ValueErrors name file:line
        check_model_dir(args.model_dir)          # config, shards, truncation, keys and shapes
        check_run_dir(args)                      # resume.py: check_out_dir, and a save for --resume

Inside the block, the project's own validation errors (ValueError, FileNotFoundError, raised with
a full message by tasks.py, sample.check_schedule, checkpoint.verify ...) count as bad input; the
same exceptions later, in the loop, keep their traceback: there they would be bugs.

The other half of "runs that say what happened" is in ddp.py (a lost rank, a non-finite step) and
resume.py (saves that a crash cannot spoil).
"""
import os
import shutil
import sys
from contextlib import contextmanager

USAGE_EXIT = 2  # what argparse exits with for a bad flag: our checks are the flags' second line


class InputError(ValueError):
    """Bad input: the message alone says what is wrong and what to do."""


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
    except (ValueError, FileNotFoundError, NotADirectoryError) as e:
        script = script or os.path.basename(sys.argv[0])
        rank = f" [rank {os.environ['RANK']}]" if int(os.environ.get("WORLD_SIZE", 1)) > 1 else ""
        # one line: a multi-line message (e.g. a key mismatch list) is joined, never cut
        print(f"{script}{rank}: error: {' '.join(str(e).split())}", file=sys.stderr)
        sys.exit(USAGE_EXIT)


def check_fraction(name, value, lo_open=False, hi_open=True):
    """A probability-like flag in [0, 1) (or the bounds given) -> InputError otherwise."""
    lo_ok = value > 0 if lo_open else value >= 0
    hi_ok = value < 1 if hi_open else value <= 1
    require(lo_ok and hi_ok, f"{name} must be in {'(' if lo_open else '['}0, 1{')' if hi_open else ']'}, "
                             f"got {value}")


def check_model_dir(path, default_dir=None):
    """An official-layout model directory that loads: config.json, every shard named by the index,
    no truncated file, every key and shape the config asks for (checkpoint.verify reads headers
    only, no weights). `default_dir`: the scripts' default tiny model, created on first use."""
    if default_dir is not None and str(path) == str(default_dir) and not os.path.exists(path):
        return  # checkpoint.load writes the tiny model there: the one thing a fresh clone may create
    from lib.checkpoint import verify
    require(os.path.isdir(path), f"model directory {path} does not exist")
    try:
        verify(path)
    except (ValueError, FileNotFoundError, OSError) as e:
        raise InputError(f"model directory {path} is not a usable LLaDA checkpoint: {e}") from None


def check_data_paths(paths, flag="--data"):
    """Each comma-listed data file exists and is a file (its records are checked by its loader)."""
    for p in paths:
        require(os.path.isfile(p), f"{flag}: {p} is not a file" if os.path.exists(p) else f"{flag}: {p} does not exist")


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
