"""
The working directory of a sandboxed program (docs/code-task.md, "The sandbox"): its bound, and its removal.
The namespace modes give the program a private /tmp, a tmpfs of MAX_MB and MAX_FILES inodes
(sandbox/contain.py); in landlock and plain modes it is a host directory, which no kernel limit bounds
without a mount (RLIMIT_FSIZE bounds each file), so watch() measures it while the program runs. Either
way the trainer removes it afterwards with remove_tree(), which never raises and never follows a link.

    from sandbox import workdir
    stop = workdir.watch(mode, path, on_full=lambda: end(proc))   # ... the program runs ...
    stop()
    workdir.remove_tree(path)
"""
import os
import subprocess
import threading

MAX_MB, MAX_FILES = 64, 4096  # the namespace modes' tmpfs; watch() ends a program past it
WATCH_S = 0.05                # watch()'s period: the bound holds up to one period of writing past it


def _over_budget(path, max_bytes, max_files):
    """Whether the tree at `path` holds more than max_bytes (allocated) or max_files entries; walked
    without recursion and without following a link, and given up past the budget."""
    used, files, stack = 0, 0, [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for e in entries:
                    files += 1
                    st = e.stat(follow_symlinks=False)
                    used += st.st_blocks * 512
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    if used > max_bytes or files > max_files:
                        return True
        except OSError:  # removed meanwhile, or unreadable: nothing to count
            continue
    return False


def watch(mode, path, on_full, max_mb=MAX_MB, max_files=MAX_FILES):
    """In landlock and plain modes the working directory is a host directory, which no kernel limit bounds
    without a mount (RLIMIT_FSIZE bounds each file): a thread measures it every WATCH_S and calls on_full()
    (which ends the program) once it holds more than max_mb MiB or max_files entries. -> stop(), to call
    when the program has ended. The namespace modes need none: their /tmp is a tmpfs of that size."""
    stop = threading.Event()
    if mode in ("landlock", "plain"):
        def watch():
            while not stop.wait(WATCH_S):
                if _over_budget(path, max_mb << 20, max_files):
                    on_full()
                    return
        threading.Thread(target=watch, name="nano-d1-workdir", daemon=True).start()
    return stop.set


def remove_tree(path):
    """Remove a working directory a program may have filled: never follows a link, never raises into the
    trainer (shutil.rmtree recurses: a 3000-deep tree raised RecursionError and zeroed a whole batch's
    code reward), and leaves what cannot be removed. An empty one (the namespace modes': the program wrote
    its private /tmp) is one rmdir; otherwise GNU rm, which walks any depth and follows no link."""
    try:
        os.rmdir(path)
        return
    except FileNotFoundError:
        return
    except OSError:
        pass
    try:
        subprocess.run(["rm", "-rf", "--one-file-system", "--", path], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        pass
