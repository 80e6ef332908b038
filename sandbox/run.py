"""
The sandbox: run untrusted, model-written Python against unit tests, one bool per test, without
letting it touch the trainer, the machine or the network. Standard library only.

d1 exec()s generated code in a forked child of the trainer behind a substring blocklist
(docs/coding.md §1.3): importlib, open(), setsid() children and the network all get through. Here each
program runs in its OWN interpreter process, contained by the operating system, in layers:
  1. a fresh working directory, removed afterwards; an environment with nothing of the parent's:
     exactly PATH, LANG and HOME = TMPDIR = the working directory;
  2. resource limits: CPU seconds, address space, file size, processes, open files, no core dumps,
     set by the runner itself before the program runs (no preexec_fn: the trainer is never fork()ed);
  3. a new session whose whole process group is SIGKILLed at the end, and a wall-clock limit;
  4. where the machine allows it (checked once, on first use; otherwise one warning and 1-3 only):
     as root, a private mount namespace in which /root (root's home) is hidden, every world-writable
     directory (/tmp, /var/tmp, /run/lock, /dev/shm) is a fresh small tmpfs, and the working directory
     lives in that private /tmp; then root is dropped to an unprivileged uid (65534 - slot), and new
     user, network and pid namespaces (`unshare`) leave the program no network (not even loopback),
     no other process to see or signal, and nothing of the parent's to write ("isolated").
     Not root (a cluster account): the same namespaces and tmpfs as that user, who has no uid to drop
     to, so the program can write what the user can ("userns"). Neither: "plain", layers 1-3.
With STRICT_ASSERTS (the default) the verdict takes two processes (issue 36, sandbox/worker.py): the
program runs in a program server inside these layers, and the tests run in a checker process that never
executes program code, with the program's names bound to proxies: every comparison is the checker's, on
builtin values rebuilt from bytes (the program's parts: code_prep.SplitProgram). STRICT_ASSERTS = False:
d1's plain asserts, exactly as before: a small runner (sandbox/runner.py) reads the job as JSON on
stdin, sets the limits, execs the program once, then each test in the same namespace under its own
timer; a test passes if it raises nothing. The runner's verdicts go back
over a pipe of their own, prefixed by a per-call nonce, so nothing the program prints can pass for a
result; the program's stdout/stderr go to /dev/null. Missing, garbled or late result: every test
failed. (A program runs in the runner's process: one that walks up to the runner's frame can still
forge its result line. That is reward hacking, not escape; docs/code-task.md says where the line is.)

    from sandbox.run import run_tests, run_batch
    run_tests("def f(x):\\n    return x + 1", ["assert f(1) == 2", "assert f(2) == 4"])   # [True, False]
    run_batch([(program, tests), ...], workers=2)    # a rollout group in parallel, in job order

The containment table (each attack run for real: whether it was contained, how the run actually
ended, time to return) is sandbox/attacks.py: `python -m sandbox.attacks`, and with
`--mode plain` the fallback without namespaces.
"""
import functools
import itertools
import json
import marshal
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

from sandbox import contain, strict_rewrite, worker

DEFAULT_TIMEOUT_S = 10.0    # wall clock for the whole program (d1: 1 s per test function; KodCode's
                            # pytest files have ~6 tests, and importing pytest alone takes ~0.1 s)
DEFAULT_TEST_TIMEOUT_S = 3.0  # each test's own timer inside the runner, so one hang fails only itself
DEFAULT_MEMORY_MB = 1024    # address space (d1: 1 GB RLIMIT_AS)
MAX_FILE_BYTES = 8 << 20    # RLIMIT_FSIZE: no single file larger than 8 MiB
MAX_PROCESSES = 32          # RLIMIT_NPROC, where it binds (see _rlimits)
MAX_OPEN_FILES = 64         # RLIMIT_NOFILE
MAX_RESULT_BYTES = 1 << 20  # what we read back from the result pipe at most
EXIT_GRACE_S = 0.5          # a runner that has reported (or died) gets this long to exit by itself
MAX_WHY_CHARS = 80          # a failed test's reason ("AssertionError: ...") is cut here: ~8k tests fit
SANDBOX_UID = 65534         # "nobody"; the sandbox in slot k runs as 65534 - k
TMPFS_DIRS = ("/tmp", "/var/tmp", "/run/lock", "/dev/shm")  # world-writable on these machines
PLAIN = os.environ.get("NANO_D1_SANDBOX") == "plain"  # force the fallback (tests, or a machine without unshare)
# True: the two-process verdict (sandbox/worker.py: the tests run in a checker that runs no program code,
# on builtin values the program sent): an object whose __eq__ always says True scores nothing.
# False: d1's plain asserts in one process, for d1's exact numbers
STRICT_ASSERTS = True
_HERE = os.path.dirname(os.path.abspath(__file__))

# The runner, sandbox/runner.py, is started as `python -I -B -c <its source> <result fd>` inside the
# sandbox (read once, _source). It must not trust the program; its docstring says how it doesn't.

# Run as root inside a fresh mount namespace, before dropping privileges (the program never sees it):
# hide root's home and give every world-writable directory a private tmpfs, but keep the interpreter's
# installation and virtualenv at their own paths (pyenv under /root, a checkout's venv under /tmp: bound
# aside first, moved back after), make the work directory, drop to the sandbox
# uid and enter new user + network + pid namespaces (the pid namespace's init is the runner; when it
# exits, the kernel kills everything left in the namespace, setsid() orphans included). `env -i`:
# the program's environment is exactly the four variables named (not SBX_*, PWD or OLDPWD).
MOUNT_SETUP = r"""
set -e
umask 022
if [ -n "$SBX_KEEP" ]; then
    mount -t tmpfs -o size=1m,mode=755 none /mnt
    i=0; for k in $SBX_KEEP; do mkdir /mnt/k$i && mount --bind "$k" /mnt/k$i; i=$((i + 1)); done
fi
mount -t tmpfs -o size=1m,mode=755 none /root
for d in $SBX_TMPFS; do
    [ -d "$d" ] && mount -t tmpfs -o size=64m,nr_inodes=4096,mode=1777 none "$d"
done
if [ -n "$SBX_KEEP" ]; then
    i=0; for k in $SBX_KEEP; do mkdir -p "$k" && mount --move /mnt/k$i "$k"; i=$((i + 1)); done
    umount /mnt
fi
mkdir -p /tmp/work && chown "$SBX_UID:$SBX_UID" /tmp/work && cd /tmp/work
exec env -i PATH="$PATH" LANG="$LANG" HOME=/tmp/work TMPDIR=/tmp/work \
    setpriv --reuid="$SBX_UID" --regid="$SBX_UID" --clear-groups -- \
    unshare --user --map-root-user --net --pid --fork --kill-child --mount-proc -- "$@"
"""

# Not root (a cluster account): new user, mount, network and pid namespaces as ourselves. The same
# private tmpfs and pid/network isolation, but no uid to drop to: the program can still write what
# the user running the trainer can write (their home, the checkout)
USERNS_SETUP = r"""
set -e
if [ -n "$SBX_KEEP" ]; then
    mount -t tmpfs -o size=1m,mode=755 none /mnt
    i=0; for k in $SBX_KEEP; do mkdir /mnt/k$i && mount --bind "$k" /mnt/k$i; i=$((i + 1)); done
fi
for d in $SBX_TMPFS; do
    [ -d "$d" ] && mount -t tmpfs -o size=64m,nr_inodes=4096,mode=1777 none "$d"
done
if [ -n "$SBX_KEEP" ]; then
    i=0; for k in $SBX_KEEP; do mkdir -p "$k" && mount --move /mnt/k$i "$k"; i=$((i + 1)); done
    umount /mnt
fi
mkdir -p /tmp/work && cd /tmp/work
exec env -i PATH="$PATH" LANG="$LANG" HOME=/tmp/work TMPDIR=/tmp/work "$@"
"""

MODES = ("isolated", "userns", "plain")  # strongest first
_mode = None              # one of MODES, decided once by isolation_mode()
_mode_lock = threading.Lock()
_slots_in_use, _slots_lock = set(), threading.Lock()


def _interpreter():
    """The runner's interpreter: this one, by a path with no symlinked directory in it. A checkout under
    /tmp whose .venv links elsewhere would otherwise name a path that the sandbox's private /tmp hides.
    A virtualenv's own bin/python (not the base binary), so its site-packages (pytest) stay importable."""
    exe = os.path.join(os.path.realpath(sys.prefix), "bin", os.path.basename(sys.executable))
    return exe if os.path.exists(exe) else os.path.realpath(sys.executable)


def _interpreter_keep(hidden=("/root", *TMPFS_DIRS)):
    """The interpreter's installation and virtualenv (real paths) that lie in a directory the sandbox
    hides (/root, or a world-writable one that gets a private tmpfs), space-separated: the mount set-up
    binds them back at their own paths. Outer directories only; a path with a blank can't be kept."""
    paths = sorted({os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)})
    inside = lambda p, d: p == d or p.startswith(d.rstrip("/") + "/")
    keep = [p for p in paths if any(inside(p, d) for d in hidden) and not any(c.isspace() for c in p)]
    return " ".join(p for p in keep if not any(q != p and inside(p, q) for q in keep))


def _wrapper(mode, slot):
    """(command prefix, environment additions) that put the runner into `mode`'s namespaces."""
    env = {"SBX_TMPFS": " ".join(TMPFS_DIRS)}
    if mode == "isolated":  # as root: the mount set-up, then the uid drop and the user/net/pid namespaces
        env.update(SBX_UID=str(SANDBOX_UID - slot), SBX_KEEP=_interpreter_keep())
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", MOUNT_SETUP, "sh"], env
    if mode == "userns":  # /root stays: not root, the program could not read it anyway
        env.update(SBX_KEEP=_interpreter_keep(TMPFS_DIRS))
        return ["unshare", "--user", "--map-root-user", "--mount", "--net", "--pid", "--fork", "--kill-child",
                "--mount-proc", "--", "sh", "-c", USERNS_SETUP, "sh"], env
    return [], {}


def isolation_mode():
    """The strongest of MODES that works here: 'isolated' (as root: mount namespace, uid drop, user/net/
    pid namespaces), 'userns' (not root: user/mount/net/pid namespaces), else 'plain' with a warning.
    Checked once: with STRICT_ASSERTS the program server's containment, sandbox/contain.py's probe (the
    whitelist root); otherwise by running a trivial job through the namespace wrappers above."""
    global _mode
    with _mode_lock:
        if _mode is None:
            candidate = "isolated" if os.geteuid() == 0 else "userns"
            why = "forced by NANO_D1_SANDBOX=plain" if PLAIN else None
            if not PLAIN and not (shutil.which("unshare") and shutil.which("setpriv")):
                why = "util-linux unshare/setpriv not found"
            _mode = "plain"
            if why is None and STRICT_ASSERTS:  # the program server's containment: sandbox/contain.py
                ok, what = contain.isolation_available()
                if ok:
                    _mode = what
                else:
                    why = what
            elif why is None:
                try:
                    if _run_one("x = 1", ["assert x == 1"], 10.0, 2.0, 256, 0, candidate) == [True]:
                        _mode = candidate
                    else:
                        why = f"a trivial program failed inside the namespaces ({candidate})"
                except OSError as e:
                    why = f"unshare failed: {e}"
            if _mode == "plain" and not PLAIN:
                warnings.warn(f"sandbox/run.py: no namespaces ({why}); programs run with resource limits, a private "
                              "working directory and a scrubbed environment only", RuntimeWarning, stacklevel=3)
        return _mode


def _nproc_counts_per_userns():
    """Linux >= 5.14 counts RLIMIT_NPROC per user namespace (ucounts); older kernels per real uid."""
    release = [int(x) for x in re.findall(r"\d+", os.uname().release)[:2]]
    return release >= [5, 14]


def _rlimits(mode, timeout_s, memory_mb):
    """The runner's resource limits, set by the runner itself before the program runs. Not in a
    preexec_fn: that makes subprocess fork() the whole trainer instead of vfork() (measured: 163 ms per
    program from a 4 GiB process vs 0.8 ms), and Python code between fork and exec is unsafe with threads."""
    cpu = int(timeout_s) + 1  # CPU seconds can't exceed the wall clock anyway; SIGXCPU kills a spinning loop
    limits = {"RLIMIT_CPU": (cpu, cpu + 1), "RLIMIT_AS": (memory_mb << 20, memory_mb << 20),
              "RLIMIT_FSIZE": (MAX_FILE_BYTES, MAX_FILE_BYTES), "RLIMIT_NOFILE": (MAX_OPEN_FILES, MAX_OPEN_FILES),
              "RLIMIT_CORE": (0, 0)}
    # NPROC counts a uid's processes: per user namespace and uid on Linux >= 5.14, per host uid before.
    # Set here, inside the sandbox's own user namespace, it counts this sandbox's processes only
    # (measured, kernel 6.18: a fork bomb holding its 30 children does not stop a concurrent job's
    # subprocess.run, 5/5, even with one shared uid; set before `unshare --user`, as a preexec_fn did,
    # it was charged to the host uid and the concurrent job failed 5/5). For older kernels, isolated
    # mode also gives each running sandbox a uid of its own (_slot). userns: older kernels would count
    # the trainer's own processes and threads and fail innocent forks, so only on >= 5.14. plain: root
    # ignores it, and a user's count would include the trainer's threads; there a fork bomb is bounded
    # by the wall clock and the session kill only.
    if mode == "isolated" or (mode == "userns" and _nproc_counts_per_userns()):
        limits["RLIMIT_NPROC"] = (MAX_PROCESSES, MAX_PROCESSES)
    return limits


class _slot:
    """The lowest slot number no sandbox of this process is using right now (its uid: 65534 - slot)."""

    def __enter__(self):
        with _slots_lock:
            self.k = next(k for k in itertools.count() if k not in _slots_in_use)
            _slots_in_use.add(self.k)
        return self.k

    def __exit__(self, *exc):
        with _slots_lock:
            _slots_in_use.discard(self.k)


def _parse(data, nonce, n):
    """The runner's verdicts in what came back on the result pipe: ([None (passed) or why it failed],
    [covered by the strict check]), or None when there is no complete, well-formed result line (a
    line still being written counts as none)."""
    for line in data.split(b"\n")[:-1]:
        if line.startswith(nonce + b" "):
            tokens = line[len(nonce) + 1:].split(b" ") if n else []
            if len(tokens) != n or not all(len(t) >= 2 and t[:1] in b"cu" and t[1:2] in b"PF" for t in tokens):
                return None
            try:  # "F" + the reason, hex-encoded UTF-8
                why = [None if t[1:2] == b"P" else bytes.fromhex(t[2:].decode("ascii")).decode() for t in tokens]
            except ValueError:  # not hex, or not UTF-8
                return None
            return why, [t[:1] == b"c" for t in tokens]
    return None


def _run_one(program, tests, timeout_s, test_timeout_s, memory_mb, slot, mode, strict=True, outcome=None):
    """One program in one sandboxed process -> list of bools (all False on any failure). `outcome`, a
    dict, is filled with how the run ended: the verdicts (or None), which tests the strict check
    covered, the exit status, the seconds."""
    t0 = time.monotonic()
    nonce = secrets.token_hex(16)
    job = json.dumps({"program": program, "tests": tests, "nonce": nonce, "test_timeout_s": test_timeout_s,
                      "rlimits": _rlimits(mode, timeout_s, memory_mb), "max_why_chars": MAX_WHY_CHARS,
                      **_strict_job(program, tests, strict)})
    workdir = tempfile.mkdtemp(prefix="nano-d1-sandbox-")  # plain mode's cwd (namespaces: a private /tmp/work)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir, "TMPDIR": workdir}
    prefix, extra = _wrapper(mode, slot)
    env.update(extra)  # the namespace scripts' own variables; they hand the program only the four above
    cmd = prefix + [_interpreter(), "-I", "-B", "-c", _source("runner.py")]
    read_fd, write_fd = os.pipe()
    proc, why = None, None
    try:
        proc = subprocess.Popen(cmd + [str(write_fd)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=workdir, env=env, pass_fds=(write_fd,),
                                start_new_session=True)
        os.close(write_fd)
        write_fd = -1
        try:
            proc.stdin.write(job.encode())
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died before reading its job: no result below
        # read the result pipe until the result line is complete, every holder closed it (EOF), or
        # the wall clock runs out. Not until EOF alone: a child the program forked may hold the pipe
        data, deadline, poller = b"", t0 + timeout_s, select.poll()  # poll: select() fails for fds >= 1024
        poller.register(read_fd, select.POLLIN)
        while len(data) < MAX_RESULT_BYTES and (result := _parse(data, nonce.encode(), len(tests))) is None:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                break
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            data += chunk
        # the runner exits by itself after its result (or has died: EOF); give it a moment, unreaped
        status = _exit_status(proc.pid, min(EXIT_GRACE_S, deadline - time.monotonic()))
        why, covered = result if result is not None else (None, [False] * len(tests))
        if outcome is not None:  # status None: still running, i.e. stopped by the wall clock in _end
            outcome.update(why=why, covered=covered, returncode=status, seconds=time.monotonic() - t0)
        return [w is None for w in why] if why is not None else [False] * len(tests)
    finally:
        if write_fd >= 0:
            os.close(write_fd)
        os.close(read_fd)
        if proc is not None:
            _end(proc, wrapped=bool(prefix))
        shutil.rmtree(workdir, ignore_errors=True)


def _exit_status(pid, wait_s):
    """pid's exit status (negative: the signal that killed it) once it has exited, waiting up to
    wait_s; None while it runs. Not reaped (WNOWAIT): the number stays ours for _end's killpg."""
    end = time.monotonic() + max(wait_s, 0.0)
    while True:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped already (a trainer that ignores SIGCHLD): nothing to learn
            return 0
        if info is not None:
            return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        if time.monotonic() >= end:
            return None
        time.sleep(0.002)


def _end(proc, wrapped):
    """Kill whatever is left of the sandbox, then reap it. A runner still running under a namespace
    wrapper (unshare --fork) dies first, so that the wrapper reaps it: killed from above instead, it
    would be orphaned to PID 1, which in a container started without an init is the trainer itself,
    and its zombies would pile up. Then the whole session (plain mode: the program's children too)."""
    if wrapped and _exit_status(proc.pid, 0) is None:
        try:
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                children = [int(pid) for pid in f.read().split()]
        except OSError:  # a kernel without CONFIG_PROC_CHILDREN: the session kill alone
            children = []
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _exit_status(proc.pid, EXIT_GRACE_S if children else 0)  # the wrapper reaps it and exits
    try:  # proc is not reaped yet, so its pid is still this session's number
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _check(program, tests, timeout_s, memory_mb):
    if not (isinstance(program, str) and isinstance(tests, (list, tuple)) and all(isinstance(t, str) for t in tests)):
        raise TypeError("run_tests(program: str, tests: list[str]): got "
                        f"{type(program).__name__} and {type(tests).__name__}")
    if not (timeout_s > 0 and memory_mb > 0):
        raise ValueError(f"timeout_s and memory_mb must be positive, got {timeout_s} and {memory_mb}")


@functools.cache
def _source(name):
    """The text of sandbox/<name> (the runner, the strict check), read once: what the sandbox executes."""
    with open(os.path.join(_HERE, name)) as f:
        return f.read()


@functools.cache
def _strict_parts():
    """(sandbox/strict_asserts.py compiled and marshalled as hex, sandbox/strict_rewrite.py's prepare),
    made once."""
    code = compile(_source("strict_asserts.py"), "strict_asserts.py", "exec")
    return marshal.dumps(code).hex(), strict_rewrite.prepare


def _strict_job(program, tests, strict):
    """The job's strict-assert part: the check (sandbox/strict_asserts.py, compiled once) and the program and
    tests rewritten (sandbox/strict_rewrite.prepare), marshalled as hex: the runner's interpreter is this one,
    and compiling or importing `ast` in every sandbox cost more than the check itself. A program that
    does not parse gets no plan, and runs (and fails) as written."""
    if not strict:
        return {"strict_code": None, "strict_plan": None}
    code, prepare = _strict_parts()
    try:
        plan = marshal.dumps(prepare(program, tests)).hex()
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: a NUL byte in the source
        plan = None
    return {"strict_code": code, "strict_plan": plan}


def _run_checked(program, tests, timeout_s, test_timeout_s, memory_mb, slot, mode, outcome=None):
    """The two-process verdict (sandbox/worker.py): the server contained by sandbox/contain.py (the
    whitelist root; as root, the slot's uid), the checker beside it; plain in the plain mode. A program's
    parts come with it (code_prep.SplitProgram); a plain string is all program, no trusted code."""
    why = worker.run_checked(getattr(program, "untrusted", program), tests, prefix=getattr(program, "prefix", ""),
                                test_source=getattr(program, "test_source", ""), timeout_s=timeout_s,
                                test_timeout_s=test_timeout_s, rlimits=_rlimits(mode, timeout_s, memory_mb),
                                python=_interpreter(), plain=mode == "plain", uid=SANDBOX_UID - slot, outcome=outcome)
    return [w is None for w in why]


def run_tests(program, tests, *, timeout_s=DEFAULT_TIMEOUT_S, memory_mb=DEFAULT_MEMORY_MB,
              test_timeout_s=DEFAULT_TEST_TIMEOUT_S, strict=None, outcome=None):
    """Run `program`, then each snippet of `tests` in its namespace, in one sandboxed process ->
    [passed] (a test passes if it raises nothing and its covered asserts hold under the strict check;
    strict=None: STRICT_ASSERTS). Never raises for anything the program does. `outcome`: an optional
    dict, filled with how the run ended (see _run_one)."""
    _check(program, tests, timeout_s, memory_mb)
    if not tests:
        return []
    mode = isolation_mode()
    with _slot() as slot:
        if STRICT_ASSERTS if strict is None else strict:
            return _run_checked(program, list(tests), timeout_s, min(test_timeout_s, timeout_s), memory_mb, slot,
                                mode, outcome)
        return _run_one(program, list(tests), timeout_s, min(test_timeout_s, timeout_s), memory_mb, slot, mode,
                        STRICT_ASSERTS if strict is None else strict, outcome)


def run_batch(jobs, *, workers=None, timeout_s=DEFAULT_TIMEOUT_S, memory_mb=DEFAULT_MEMORY_MB,
              test_timeout_s=DEFAULT_TEST_TIMEOUT_S, strict=None):
    """[run_tests(program, tests) for (program, tests) in jobs], `workers` processes at a time (default:
    the CPU count), results in job order. Each running sandbox has a slot (and uid, when isolated) of
    its own, so a fork bomb in one job cannot use up the process budget of another."""
    jobs = list(jobs)
    for program, tests in jobs:
        _check(program, tests, timeout_s, memory_mb)
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs) or 1))
    isolation_mode()  # decide (and warn) once, before the threads start

    def work(job):
        return run_tests(*job, timeout_s=timeout_s, memory_mb=memory_mb, test_timeout_s=test_timeout_s, strict=strict)
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(work, jobs))
