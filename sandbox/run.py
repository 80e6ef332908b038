"""
The sandbox: run untrusted, model-written Python against unit tests, one bool per test, without
letting it touch the trainer, the machine or the network. Standard library only.

d1 exec()s generated code in a forked child of the trainer behind a substring blocklist
(docs/coding.md §1.3). Here each program runs in its OWN interpreter process, contained by the
operating system, in layers (docs/code-task.md, "The sandbox"):
  1. a fresh working directory, removed afterwards; an environment of exactly PATH, LANG and
     HOME = TMPDIR = the working directory;
  2. resource limits set before the program runs (no preexec_fn: the trainer is never fork()ed);
  3. a new session whose whole process group is SIGKILLed at the end, and a wall-clock limit;
  4. sandbox/contain.py's modes, strongest first: namespaces as root ("isolated", uid SANDBOX_UID - slot)
     or as the user ("userns"), else self-containment ("landlock", sandbox/confine.py); none of
     these: the run refuses to start (contain.NoIsolation) unless "plain" was chosen (--sandbox plain).
With STRICT_ASSERTS (the default) the verdict takes two processes (sandbox/worker.py): the program runs
in a program server inside these layers, and the tests in a checker process that never executes program
code, on builtin values rebuilt from bytes. STRICT_ASSERTS = False: d1's plain asserts, exactly as d1
scores them: a small runner (sandbox/runner.py) inside the same layers execs the program once, then each
test under its own timer; its verdicts go back over a pipe of their own, prefixed by a per-call nonce.
Missing, garbled or late result: every test failed.

    from sandbox.run import run_tests, run_batch
    run_tests("def f(x):\\n    return x + 1", ["assert f(1) == 2", "assert f(2) == 4"])   # [True, False]
    run_batch([(program, tests), ...], workers=2)    # a rollout group in parallel, in job order

The containment table (each attack run for real) is sandbox/attacks.py: `python -m sandbox.attacks`.
"""
import functools
import itertools
import json
import marshal
import os
import secrets
import select
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from sandbox import contain, worker
from sandbox.workdir import remove_tree, watch as watch_workdir

DEFAULT_TIMEOUT_S = 10.0    # wall clock for the whole program (d1: 1 s per test function; KodCode's
                            # pytest files have ~6 tests, and importing pytest alone takes ~0.1 s)
DEFAULT_TEST_TIMEOUT_S = 3.0  # each test's own timer inside the runner, so one hang fails only itself
DEFAULT_MEMORY_MB = 1024    # address space (d1: 1 GB RLIMIT_AS); file size, processes, open files: contain.rlimits
MAX_RESULT_BYTES = 1 << 20  # what we read back from the result pipe at most
EXIT_GRACE_S = 0.5          # a runner that has reported (or died) gets this long to exit by itself
MAX_WHY_CHARS = 80          # a failed test's reason ("AssertionError: ...") is cut here: ~8k tests fit
SANDBOX_UID = contain.SANDBOX_UID  # as root, the sandbox in slot k runs as SANDBOX_UID - k
# True: the two-process verdict (sandbox/worker.py: the tests run in a checker that runs no program code,
# on builtin values the program sent): an object whose __eq__ always says True scores nothing.
# False: d1's plain asserts in one process, for d1's exact numbers
STRICT_ASSERTS = True
_HERE = os.path.dirname(os.path.abspath(__file__))

# The runner, sandbox/runner.py, is started as `python -I -B -c <_RUNNER_BOOT> <its code> <result fd>` inside
# the sandbox (compiled once, _runner_code). It must not trust the program; its docstring says how it doesn't.
_RUNNER_BOOT = "import marshal, sys; exec(marshal.loads(bytes.fromhex(sys.argv.pop(1))))"  # argv[1]: the fd
MODES = contain.MODES     # "isolated", "userns", "landlock", "plain": strongest first
_mode = None              # forced by a caller (tests, `python -m sandbox.attacks --mode`); else contain's
_slots_in_use, _slots_lock = set(), threading.Lock()


def isolation_mode():
    """The strongest of MODES that works here (sandbox/contain.py decides, once; --sandbox plain or
    NANO_D1_SANDBOX=plain chooses the unisolated one; nothing works: contain.NoIsolation), unless a caller
    forced one: 'isolated' (as root: namespaces and a uid drop), 'userns' (a user namespace; as root it
    keeps root's rights over what it can see), 'landlock' (self-confined), 'plain'."""
    return _mode or contain.mode()


def _launch(argv, workdir, *, mode, slot, **popen_kwargs):
    """argv in `mode`'s containment (sandbox/contain.py, the one launcher), as the slot's uid when root;
    the plain fallback in `workdir`."""
    return contain.contained_popen(argv, uid=SANDBOX_UID - slot, force=mode,
                                   cwd=workdir if mode in ("plain", "landlock") else None,
                                   start_new_session=True, **popen_kwargs)


def _limits(mode, timeout_s, memory_mb, slot, workdir):
    """What the server or runner applies to itself before the program runs: resource limits, and in
    "landlock" mode its own confinement (sandbox/contain.py)."""
    return contain.self_limits(mode, timeout_s, memory_mb, workdir, SANDBOX_UID - slot)


class _slot:
    """The lowest slot number no sandbox of this process is using right now (its uid: SANDBOX_UID - slot)."""

    def __enter__(self):
        with _slots_lock:
            self.k = next(k for k in itertools.count() if k not in _slots_in_use)
            _slots_in_use.add(self.k)
        return self.k

    def __exit__(self, *exc):
        with _slots_lock:
            _slots_in_use.discard(self.k)


def _parse(data, nonce, n):
    """The runner's verdicts in what came back on the result pipe: [None (passed) or why it failed], or
    None when there is no complete, well-formed result line (a line still being written counts as none)."""
    for line in data.split(b"\n")[:-1]:
        if line.startswith(nonce + b" "):
            tokens = line[len(nonce) + 1:].split(b" ") if n else []
            if len(tokens) != n or not all(t[:1] in (b"P", b"F") for t in tokens):
                return None
            try:  # "F" + the reason, hex-encoded UTF-8
                return [None if t == b"P" else bytes.fromhex(t[1:].decode("ascii")).decode() for t in tokens]
            except ValueError:  # not hex, or not UTF-8
                return None
    return None


def _run_one(program, tests, timeout_s, test_timeout_s, memory_mb, slot, mode, outcome=None):
    """d1's plain asserts: one program in one sandboxed runner process -> list of bools (all False on any
    failure). `outcome`, a dict, is filled with how the run ended: the verdicts (or None), the exit
    status, the seconds."""
    t0 = time.monotonic()
    nonce = secrets.token_hex(16)
    workdir = tempfile.mkdtemp(prefix="nano-d1-sandbox-")  # plain mode's cwd (namespaces: their private /tmp)
    job = json.dumps({"program": program, "tests": tests, "nonce": nonce, "test_timeout_s": test_timeout_s,
                      **_limits(mode, timeout_s, memory_mb, slot, workdir), "max_why_chars": MAX_WHY_CHARS})
    read_fd, write_fd = os.pipe()
    proc = None
    try:
        proc = _launch([contain.PYTHON, "-I", "-B", "-c", _RUNNER_BOOT, _runner_code(mode != "plain"), str(write_fd)],
                       workdir, mode=mode,
                       slot=slot,
                       stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       pass_fds=(write_fd,))
        stop_watch = watch_workdir(mode, workdir, lambda: worker.end_server(proc))
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
        while len(data) < MAX_RESULT_BYTES and (why := _parse(data, nonce.encode(), len(tests))) is None:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                break
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            data += chunk
        # the runner exits by itself after its result (or has died: EOF); give it a moment, unreaped
        status = worker.peek_status(proc.pid, min(EXIT_GRACE_S, deadline - time.monotonic()))
        if outcome is not None:  # status None: still running, i.e. stopped by the wall clock in end_server
            outcome.update(why=why, covered=[False] * len(tests), returncode=status, seconds=time.monotonic() - t0,
                           mode=proc.contain_mode)
        return [w is None for w in why] if why is not None else [False] * len(tests)
    finally:
        if write_fd >= 0:
            os.close(write_fd)
        os.close(read_fd)
        if proc is not None:
            stop_watch()
            worker.end_server(proc)
        remove_tree(workdir)


def _check(program, tests, timeout_s, memory_mb):
    if not (isinstance(program, str) and isinstance(tests, (list, tuple)) and all(isinstance(t, str) for t in tests)):
        raise TypeError("run_tests(program: str, tests: list[str]): got "
                        f"{type(program).__name__} and {type(tests).__name__}")
    if not (timeout_s > 0 and memory_mb > 0):
        raise ValueError(f"timeout_s and memory_mb must be positive, got {timeout_s} and {memory_mb}")


@functools.cache
def _runner_code(confined):
    """What the sandbox executes, read and compiled once, marshalled as hex for its command line (compiling
    per run cost ~5 ms with confine.py): the runner, and in every mode but plain (`confined`) confine.py in front."""
    texts = []
    for name in ("confine.py", "runner.py")[0 if confined else 1:]:
        with open(os.path.join(_HERE, name)) as f:
            texts.append(f.read())
    return marshal.dumps(compile("\n".join(texts), "<sandbox runner>", "exec")).hex()


def _run_checked(program, tests, timeout_s, test_timeout_s, memory_mb, slot, mode, outcome=None):
    """The two-process verdict (sandbox/worker.py): the program server in `mode`'s containment, the
    checker beside it. A program's parts come with it (code_prep.SplitProgram); a plain string is all
    program, no trusted code."""
    why = worker.run_checked(getattr(program, "untrusted", program), tests, prefix=getattr(program, "prefix", ""),
                             test_source=getattr(program, "test_source", ""), targets=getattr(program, "targets", ()),
                             timeout_s=timeout_s, test_timeout_s=test_timeout_s, mode=mode,
                             limits=lambda workdir: _limits(mode, timeout_s, memory_mb, slot, workdir),
                             launch=functools.partial(_launch, mode=mode, slot=slot), outcome=outcome)
    return [w is None for w in why]


def run_tests(program, tests, *, timeout_s=DEFAULT_TIMEOUT_S, memory_mb=DEFAULT_MEMORY_MB,
              test_timeout_s=DEFAULT_TEST_TIMEOUT_S, strict=None, outcome=None):
    """Run `program`, then each snippet of `tests` in its namespace -> [passed] (a test passes if it raises
    nothing). strict (None: STRICT_ASSERTS): the tests run in the checker, the program in its server;
    False: both in d1's one runner process. Never raises for anything the program does. `outcome`: an
    optional dict, filled with how the run ended (the verdicts, the exit status, the seconds, the mode)."""
    _check(program, tests, timeout_s, memory_mb)
    if not tests:
        return []
    mode = isolation_mode()
    with _slot() as slot:
        if STRICT_ASSERTS if strict is None else strict:
            return _run_checked(program, list(tests), timeout_s, min(test_timeout_s, timeout_s), memory_mb, slot,
                                mode, outcome)
        return _run_one(program, list(tests), timeout_s, min(test_timeout_s, timeout_s), memory_mb, slot, mode,
                        outcome)


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
