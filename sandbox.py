"""
The sandbox: run untrusted, model-written Python against unit tests, one bool per test, without
letting it touch the trainer, the machine or the network. Standard library only.

d1 exec()s generated code in a forked child of the trainer behind a substring blocklist
(docs/coding.md §1.3): importlib, open(), setsid() children and the network all get through. Here each
program runs in its OWN interpreter process, contained by the operating system, in layers:
  1. a fresh working directory, removed afterwards; an environment with nothing of the parent's
     (PATH, LANG, HOME = TMPDIR = the working directory);
  2. resource limits: CPU seconds, address space, file size, processes, open files, no core dumps;
  3. a new session whose whole process group is SIGKILLed at the end, and a wall-clock limit;
  4. where the machine allows it (checked once, on first use; otherwise one warning and 1-3 only):
     as root, a private mount namespace in which /root (root's home) is hidden, every world-writable
     directory (/tmp, /var/tmp, /run/lock, /dev/shm) is a fresh small tmpfs, and the working directory
     lives in that private /tmp; then root is dropped to an unprivileged uid (65534 - worker slot),
     and new user, network and pid namespaces (`unshare`) leave the program no network (not even
     loopback), no other process to see or signal, and nothing of the parent's to write ("isolated").
     Not root (a cluster account): the same namespaces and tmpfs as that user, who has no uid to drop
     to, so the program can write what the user can ("userns"). Neither: "plain", layers 1-3.
Inside, a small runner (RUNNER) reads the job as JSON on stdin, execs the program once, then each
test in the same namespace under its own timer; a test passes if it raises nothing. The bools go
back over a pipe of their own, prefixed by a per-call nonce, so nothing the program prints can pass
for a result; the program's stdout/stderr go to /dev/null. Missing, garbled or late result: every
test failed. (A program runs in the runner's process, so it could forge its own result line: that
is reward hacking, not escape, and d1's exec() has the same property.)

    from sandbox import run_tests, run_batch
    run_tests("def f(x):\\n    return x + 1", ["assert f(1) == 2", "assert f(2) == 4"])   # [True, False]
    run_batch([(program, tests), ...], workers=2)    # a rollout group in parallel, in job order

Run `python sandbox.py` for the containment table (each attack, what stopped it, time to return);
`python sandbox.py --mode plain` shows the fallback without namespaces.
"""
import argparse
import json
import os
import resource
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

DEFAULT_TIMEOUT_S = 10.0    # wall clock for the whole program (d1: 1 s per test function; KodCode's
                            # pytest files have ~6 tests, and importing pytest alone takes ~0.1 s)
DEFAULT_TEST_TIMEOUT_S = 3.0  # each test's own timer inside the runner, so one hang fails only itself
DEFAULT_MEMORY_MB = 1024    # address space (d1: 1 GB RLIMIT_AS)
MAX_FILE_BYTES = 8 << 20    # RLIMIT_FSIZE: no single file larger than 8 MiB
MAX_PROCESSES = 32          # RLIMIT_NPROC (per uid: hence one uid per worker slot)
MAX_OPEN_FILES = 64         # RLIMIT_NOFILE
MAX_RESULT_BYTES = 1 << 20  # what we read back from the result pipe at most
SANDBOX_UID = 65534         # "nobody"; worker slot k runs as 65534 - k
TMPFS_DIRS = ("/tmp", "/var/tmp", "/run/lock", "/dev/shm")  # world-writable on these machines
PLAIN = os.environ.get("NANO_D1_SANDBOX") == "plain"  # force the fallback (tests, or a machine without unshare)

# The runner: executed as `python -I -B -c RUNNER <result fd>` inside the sandbox. It must not trust
# the program: results are collected in a local list and written once, at the end, to the result fd.
RUNNER = r"""
import json, os, signal, sys
def _alarm(signum, frame):
    raise TimeoutError("test timed out")
def _main():
    fd = int(sys.argv[1])
    try:  # a group of its own: kill(0) (what getppid() = 0 turns kill(getppid()) into) hits only itself
        os.setsid()
    except OSError:
        pass  # already a session leader (plain mode: the trainer started it in a new session)
    job = json.loads(sys.stdin.read())
    sys.stdin.close()
    signal.signal(signal.SIGALRM, _alarm)
    ns = {"__name__": "__main__"}
    try:  # the program once (its own timer: a hang at import time is one failure, not a silent kill)
        signal.setitimer(signal.ITIMER_REAL, job["test_timeout_s"])
        exec(compile(job["program"], "<program>", "exec"), ns)
        ok = True
    except BaseException:
        ok = False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    results = []
    for test in job["tests"]:
        passed = False
        if ok:
            try:
                signal.setitimer(signal.ITIMER_REAL, job["test_timeout_s"])
                exec(compile(test, "<test>", "exec"), ns)
                passed = True
            except BaseException:
                passed = False
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        results.append(passed)
    os.write(fd, (job["nonce"] + json.dumps(results) + "\n").encode())
    os._exit(0)  # no atexit handlers or finalizers of the program's objects after the result
_main()
"""

# Run as root inside a fresh mount namespace, before dropping privileges (the program never sees it):
# hide root's home but keep the interpreter's installation (e.g. pyenv under /root) at its own path,
# give every world-writable directory a private tmpfs, make the work directory, drop to the sandbox
# uid and enter new user + network + pid namespaces (the pid namespace's init is the runner; when it
# exits, the kernel kills everything left in the namespace, setsid() orphans included).
MOUNT_SETUP = r"""
set -e
umask 022
if [ -n "$SBX_KEEP" ]; then
    mount -t tmpfs -o size=1m,mode=755 none /mnt && mkdir /mnt/keep && mount --bind "$SBX_KEEP" /mnt/keep
fi
mount -t tmpfs -o size=1m,mode=755 none /root
if [ -n "$SBX_KEEP" ]; then
    mkdir -p "$SBX_KEEP" && mount --move /mnt/keep "$SBX_KEEP" && umount /mnt
fi
for d in $SBX_TMPFS; do
    [ -d "$d" ] && mount -t tmpfs -o size=64m,nr_inodes=4096,mode=1777 none "$d"
done
mkdir /tmp/work && chown "$SBX_UID:$SBX_UID" /tmp/work && cd /tmp/work
exec setpriv --reuid="$SBX_UID" --regid="$SBX_UID" --clear-groups -- \
    unshare --user --map-root-user --net --pid --fork --kill-child --mount-proc -- "$@"
"""

# Not root (a cluster account): new user, mount, network and pid namespaces as ourselves. The same
# private tmpfs and pid/network isolation, but no uid to drop to: the program can still write what
# the user running the trainer can write (their home, the checkout)
USERNS_SETUP = r"""
set -e
for d in $SBX_TMPFS; do
    [ -d "$d" ] && mount -t tmpfs -o size=64m,nr_inodes=4096,mode=1777 none "$d"
done
mkdir /tmp/work && cd /tmp/work
exec "$@"
"""

MODES = ("isolated", "userns", "plain")  # strongest first
_mode = None              # one of MODES, decided once by isolation_mode()
_mode_lock = threading.Lock()


def _interpreter_keep():
    """The interpreter's base installation when it lives under /root (hidden in the sandbox), else ""."""
    base = os.path.realpath(sys.base_prefix)
    return base if base == "/root" or base.startswith("/root/") else ""


def _wrapper(mode, slot):
    """(command prefix, environment additions) that put the runner into `mode`'s namespaces."""
    env = {"SBX_TMPFS": " ".join(TMPFS_DIRS), "HOME": "/tmp/work", "TMPDIR": "/tmp/work"}
    if mode == "isolated":  # as root: the mount set-up, then the uid drop and the user/net/pid namespaces
        env.update(SBX_UID=str(SANDBOX_UID - slot), SBX_KEEP=_interpreter_keep())
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", MOUNT_SETUP, "sh"], env
    if mode == "userns":
        return ["unshare", "--user", "--map-root-user", "--mount", "--net", "--pid", "--fork", "--kill-child",
                "--mount-proc", "--", "sh", "-c", USERNS_SETUP, "sh"], env
    return [], {}


def isolation_mode():
    """The strongest of MODES that works here: 'isolated' (as root: mount namespace, uid drop, user/net/
    pid namespaces), 'userns' (not root: user/mount/net/pid namespaces), else 'plain' with a warning.
    Checked once, by running a trivial job through it."""
    global _mode
    with _mode_lock:
        if _mode is None:
            candidates = ["isolated" if os.geteuid() == 0 else "userns"]
            why = "forced by NANO_D1_SANDBOX=plain" if PLAIN else None
            if not PLAIN and not (shutil.which("unshare") and shutil.which("setpriv")):
                why = "util-linux unshare/setpriv not found"
            _mode = "plain"
            if why is None:
                try:
                    if _run_one("x = 1", ["assert x == 1"], 10.0, 2.0, 256, 0, candidates[0]) == [True]:
                        _mode = candidates[0]
                    else:
                        why = f"a trivial program failed inside the namespaces ({candidates[0]})"
                except OSError as e:
                    why = f"unshare failed: {e}"
            if _mode == "plain" and not PLAIN:
                warnings.warn(f"sandbox.py: no namespaces ({why}); programs run with resource limits, a private "
                              "working directory and a scrubbed environment only", RuntimeWarning, stacklevel=3)
        return _mode


def _limits(timeout_s, memory_mb):
    """preexec_fn: the resource limits, set in the child before it execs (inherited by everything below)."""
    cpu = int(timeout_s) + 1  # CPU seconds can't exceed the wall clock anyway; SIGXCPU kills a spinning loop
    root = os.geteuid() == 0

    def apply():
        os.umask(0o077)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
        resource.setrlimit(resource.RLIMIT_NOFILE, (MAX_OPEN_FILES, MAX_OPEN_FILES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if root:
            # root ignores NPROC (the namespace set-up runs as root); it binds from the uid drop on, for a
            # uid of its own. Not as root: NPROC counts ALL of the user's processes and threads (the
            # trainer's included), so a limit would fail innocent forks; a fork bomb is then bounded
            # by the wall clock and the pid namespace's (or the session's) kill
            resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))
    return apply


def _run_one(program, tests, timeout_s, test_timeout_s, memory_mb, slot, mode):
    """One program in one sandboxed process -> list of bools (all False on any failure)."""
    nonce = secrets.token_hex(16)
    job = json.dumps({"program": program, "tests": tests, "nonce": nonce, "test_timeout_s": test_timeout_s})
    workdir = tempfile.mkdtemp(prefix="nano-d1-sandbox-")  # plain mode's cwd (namespaces: a private /tmp/work)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir, "TMPDIR": workdir,
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
    prefix, extra = _wrapper(mode, slot)
    env.update(extra)
    cmd = prefix + [sys.executable, "-I", "-B", "-c", RUNNER]
    read_fd, write_fd = os.pipe()
    proc = None
    try:
        proc = subprocess.Popen(cmd + [str(write_fd)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=workdir, env=env, pass_fds=(write_fd,),
                                start_new_session=True, preexec_fn=_limits(timeout_s, memory_mb))
        os.close(write_fd)
        write_fd = -1
        try:
            proc.stdin.write(job.encode())
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died before reading its job: no result below
        data, deadline = b"", time.monotonic() + timeout_s
        # read the result pipe until EOF (every holder closed it) or the wall clock runs out
        while len(data) < MAX_RESULT_BYTES:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                break
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            data += chunk
        for line in data.decode("utf-8", "replace").splitlines():
            if line.startswith(nonce):
                try:
                    results = json.loads(line[len(nonce):])
                except ValueError:
                    break
                if isinstance(results, list) and len(results) == len(tests):
                    return [r is True for r in results]
                break
        return [False] * len(tests)
    finally:
        if write_fd >= 0:
            os.close(write_fd)
        os.close(read_fd)
        if proc is not None:
            try:  # the whole session: the runner and anything it started in its process group
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def _check(program, tests):
    if not isinstance(program, str) or not isinstance(tests, (list, tuple)) or not all(isinstance(t, str) for t in tests):
        raise TypeError("run_tests(program: str, tests: list[str]): got "
                        f"{type(program).__name__} and {type(tests).__name__}")


def run_tests(program, tests, *, timeout_s=DEFAULT_TIMEOUT_S, memory_mb=DEFAULT_MEMORY_MB,
              test_timeout_s=DEFAULT_TEST_TIMEOUT_S, slot=0):
    """Run `program`, then each snippet of `tests` in its namespace, in one sandboxed process ->
    [passed] (a test passes if it raises nothing). Never raises for anything the program does."""
    _check(program, tests)
    if not tests:
        return []
    return _run_one(program, list(tests), timeout_s, min(test_timeout_s, timeout_s), memory_mb, slot,
                    isolation_mode())


def run_batch(jobs, *, workers=None, timeout_s=DEFAULT_TIMEOUT_S, memory_mb=DEFAULT_MEMORY_MB,
              test_timeout_s=DEFAULT_TEST_TIMEOUT_S):
    """[run_tests(program, tests) for (program, tests) in jobs], `workers` processes at a time (default:
    the CPU count), results in job order. Each worker thread has its own slot (and uid when isolated),
    so a fork bomb in one job cannot use up the process budget of another."""
    jobs = list(jobs)
    for program, tests in jobs:
        _check(program, tests)
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs) or 1))
    isolation_mode()  # decide (and warn) once, before the threads start
    slots, lock = {}, threading.Lock()  # thread -> slot; each thread runs one job at a time

    def work(job):
        with lock:
            slot = slots.setdefault(threading.get_ident(), len(slots))
        return run_tests(*job, timeout_s=timeout_s, memory_mb=memory_mb, test_timeout_s=test_timeout_s, slot=slot)
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(work, jobs))


# -----------------------------------------------------------------------------
# the containment table: each attack run for real

# The attacks of the containment table (and tests/test_sandbox.py): (name, program, probe test, the
# result that means "contained", what contains it). The probe runs after the program in its namespace
# and checks the attack's own view (an errno, a count); results and seconds are measured, not claimed.
# UNSAFE_IN_PLAIN attacks are skipped without namespaces: there they WOULD reach the real machine
# (kill the trainer, or as root every process).
ATTACKS = [
    ("infinite loop", "while True: pass", "pass", False, "the runner's timer, then the wall clock"),
    ("sleep", "import time\ntime.sleep(100)", "pass", False, "the runner's timer, then the wall clock"),
    ("memory blow-up", "try:\n    x = bytearray(8 << 30)\nexcept MemoryError:\n    r = 'MemoryError'",
     "assert r == 'MemoryError'", True, "RLIMIT_AS: MemoryError"),
    ("fork bomb", "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
     "            time.sleep(60)\n            os._exit(0)\n        n += 1\nexcept OSError as e:\n    err = e.errno",
     "import errno\nassert err == errno.EAGAIN and n < 64", True,
     "RLIMIT_NPROC (EAGAIN); the children die with the pid namespace"),
    ("setsid orphan", "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n    os._exit(0)",
     "pass", True, "killed with the pid namespace when the runner exits"),
    ("kill the parent", "import os, signal\nppid = os.getppid()\nos.kill(ppid, signal.SIGKILL)",
     "assert ppid == 0", True, "the parent is outside its pid namespace (getppid() = 0)"),
    ("kill every process", "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError as e:\n"
     "    err = e.errno", "import errno\nassert err == errno.ESRCH", True, "ESRCH: alone in its pid namespace"),
    ("network", "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 22), timeout=2)\n"
     "except OSError as e:\n    err = e.errno", "import errno\nassert err == errno.ENETUNREACH", True,
     "ENETUNREACH: empty network namespace"),
    ("parent's environment", "import os\nkeys = set(os.environ)", "assert 'SANDBOX_SECRET' not in keys", True,
     "scrubbed environment"),
    ("root's files", "try:\n    open('/root/.bashrc').read()\nexcept OSError as e:\n    err = e.errno",
     "import errno\nassert err == errno.ENOENT", True, "/root is an empty tmpfs in its mount namespace"),
    ("write outside", "import os\nerrs = {}\nfor d in ('/work', '/', '/var/tmp'):\n    try:\n"
     "        open(os.path.join(d, 'nano-d1-escape'), 'w').close()\n    except OSError as e:\n        errs[d] = e.errno",
     "import errno\nassert errs['/work'] == errs['/'] == errno.EACCES and '/var/tmp' not in errs", True,
     "EACCES as an unprivileged uid; /var/tmp, /tmp, /dev/shm are private tmpfs"),
    ("huge file", "try:\n    open('big', 'wb').write(b'x' * (64 << 20))\nexcept OSError as e:\n    err = e.errno",
     "import errno\nassert err == errno.EFBIG", True, "RLIMIT_FSIZE: EFBIG"),
    ("gigabytes of output", "import sys\nfor _ in range(10**6):\n    sys.stdout.write('x' * 4096)", "pass", True,
     "stdout/stderr go to /dev/null; results come on their own pipe"),
    ("segfault", "import ctypes\nctypes.string_at(0)", "pass", False, "the runner dies: no result, all False"),
    ("os._exit", "import os\nos._exit(0)", "pass", False, "no result line: all False"),
    ("non-UTF-8 output", "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe\\x80' * 1000)", "pass", True,
     "output is never decoded"),
]
UNSAFE_IN_PLAIN = {"fork bomb", "setsid orphan", "kill the parent", "kill every process"}
# "userns" run as root (only when forced: as root the default is "isolated") keeps root's file rights
# and its exemption from NPROC: there these would write into the real / and fork without bound
UNSAFE_IN_USERNS_AS_ROOT = {"fork bomb", "write outside", "root's files"}


def containment_table(timeout_s=3.0):
    """Run every attack; print whether it was contained as expected, by what, the time to return, and
    whether the next normal call still passes."""
    os.environ["SANDBOX_SECRET"] = "hunter2"  # the parent's secret that the program must not see
    mode = isolation_mode()
    print(f"sandbox mode: {mode}  (wall clock {timeout_s} s, per-test timer {DEFAULT_TEST_TIMEOUT_S} s, "
          f"{DEFAULT_MEMORY_MB} MB)")
    print("| attack | contained | by | seconds | next call |\n|---|---|---|---|---|")
    for name, program, probe, expected, by in ATTACKS:
        if (mode == "plain" and name in UNSAFE_IN_PLAIN) or \
                (mode == "userns" and os.geteuid() == 0 and name in UNSAFE_IN_USERNS_AS_ROOT):
            print(f"| {name} | skipped | in this mode it would reach the real machine | | |")
            continue
        t0 = time.time()
        (res,) = run_tests(program, [probe], timeout_s=timeout_s)
        dt = time.time() - t0
        after = run_tests("def f(x):\n    return x + 1", ["assert f(1) == 2"])
        print(f"| {name} | {'yes' if res == expected else 'NO'} | {by if res == expected else '?'} | {dt:.2f} | "
              f"{'ok' if after == [True] else 'BROKEN'} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="the sandbox's containment table")
    parser.add_argument("--mode", choices=MODES, help="force a mode (default: the strongest that works here); "
                        "userns as root keeps root's rights over the files it can see")
    parser.add_argument("--timeout", type=float, default=3.0, help="wall-clock limit per attack (s)")
    args = parser.parse_args()
    if args.mode:
        _mode = args.mode
    containment_table(args.timeout)
