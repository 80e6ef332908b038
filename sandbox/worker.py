"""
The two-process verdict (docs/code-task.md, "A reward that cannot be gamed"), from the trainer's side:
per program, a program server (sandbox/server.py, started by start_server) runs the program, and a
checker process (main() below, which never executes program code) runs the tests against it
(sandbox/checker.py's check_job). The verdicts come from the checker only; the trainer hands the checker
one end of a fresh socketpair per job (SCM_RIGHTS) and the server the other.

Checkers are long-lived (they run only trusted code: KodCode's `import pytest` is paid once per checker,
not once per program), kept in a pool of idle ones per mode, and replaced after MAX_JOBS jobs or when a
job does not come back in time. A checker is contained as a server is: through contain's launcher, as an
unprivileged uid of its own when root, with resource limits it sets itself (memory, CPU per job, file
size, processes; confine.confine: the allow-list, in "landlock" mode Landlock too), writing only its private /tmp; it reads
sandbox/ and the interpreter, and imports only the standard library's TEST_MODULES (at start) and what
the tests themselves import. The server is started through a launcher, by default contained() below:
sandbox/contain.py's contained_popen; sandbox/run.py passes its own with the mode and the slot's uid.
Everything else is independent of how the server is contained.

    from sandbox.worker import run_checked
    run_checked("def add(a, b):\\n    return a + b", ["assert add(1, 2) == 3"])   # [None] (None: passed)
"""
import atexit
import functools
import itertools
import marshal
import os
import resource
import signal
import socket
import subprocess
import tempfile
import threading
import time

from sandbox import checker, confine, contain, server, wire
from sandbox.workdir import remove_tree, watch as watch_workdir

_HERE = os.path.dirname(os.path.abspath(__file__))
MAX_JOBS = 500          # a checker is replaced after this many jobs (tests may leave state behind)
EXIT_GRACE_S = 0.5      # after the wall clock: how long the checker gets to report the tests it has left
CHECKER_MEMORY_MB = 2048  # the checker's address space (pytest and the test's own values; 1.16 GB of a
                          # listed range reply is refused on the wire already)
CHECKER_UID = contain.SANDBOX_UID - 1024  # as root, checker k runs as CHECKER_UID - k (program slots: 65534 - k)
CHECKER_CPU_S = 3600    # the hard CPU limit of a checker's life; each job's soft limit is set per job
SERVER_MEMORY_MB = 1024  # run_checked's default for the server (sandbox/run.py passes its own)
_pool, _pool_lock, _checker_ids = {}, threading.Lock(), set()  # idle checkers per mode; the ids in use
# the checker starts with its code's folder as the package `sandbox` (loaded by path: in the contained
# root the repository's folder above it is bound only on the way, not listable)
_BOOT = ("import importlib.util, sys; sys.dont_write_bytecode = True\n"
         "spec = importlib.util.spec_from_file_location('sandbox', sys.argv[2] + '/__init__.py', "
         "submodule_search_locations=[sys.argv[2]])\n"
         "sys.modules['sandbox'] = importlib.util.module_from_spec(spec)\n"
         "spec.loader.exec_module(sys.modules['sandbox'])\n"
         "from sandbox.worker import main; main(int(sys.argv[1]), sys.argv[3])")


# The server's interpreter reads its code from stdin: wire.py + server.py compiled once here and marshalled
# (same interpreter on both sides), instead of ~6 ms of compiling their source at every start
_SERVER_BOOT = "import marshal, sys; exec(marshal.loads(sys.stdin.buffer.read()))"


@functools.cache
def _server_code():
    texts = []
    for name in ("wire.py", "confine.py", "server.py"):
        with open(os.path.join(_HERE, name)) as f:
            texts.append(f.read())
    return marshal.dumps(compile("\n".join(texts), "<sandbox server>", "exec"))


def contained(argv, workdir, **popen_kwargs):
    """The default launcher: sandbox/contain.py's contained_popen, the whitelist root where this machine
    allows it (no repository, data, /work or /root in reach), else a plain Popen in `workdir` (landlock:
    the command confines itself; plain, when chosen: contain's REWARD NOT ISOLATED banner). sandbox/run.py
    passes its own (the mode a caller forced, the slot's uid)."""
    mode = contain.mode()
    return contain.contained_popen(argv, cwd=workdir if mode in ("plain", "landlock") else None, force=mode,
                                   start_new_session=True, **popen_kwargs)


def start_server(sock, *, launch=contained, workdir, test_timeout_s, limits=None):
    """Start the program server on `sock` (its end of the socketpair) -> the Popen, through `launch`
    (argv, workdir, **popen_kwargs). Its code comes on stdin (nothing of the repository need be readable);
    it applies `limits` ({"rlimits", "confine"}: server.serve) itself before the program runs, in a new
    session (ended by end_server)."""
    argv = [contain.PYTHON, "-I", "-B", "-c", _SERVER_BOOT, str(sock.fileno()), repr(float(test_timeout_s)),
            marshal.dumps(dict(limits or {})).hex()]
    proc = launch(argv, workdir, pass_fds=(sock.fileno(),), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL)
    try:
        proc.stdin.write(_server_code())
        proc.stdin.close()
    except OSError:  # it died before reading its code: the checker sees EOF, every test fails
        try:
            proc.stdin.close()
        except OSError:
            pass
    return proc


def end_server(proc):
    """End the server and reap it. Contained: SIGTERM to contain's shim, which SIGKILLs the pid namespace's
    init (the server: the kernel then kills everything in the namespace) and reaps it, so that nothing is
    orphaned to PID 1; SIGKILL after EXIT_GRACE_S. Plain and landlock: the server's whole process group
    (the allow-list refuses setsid and setpgid, so no child leaves it)."""
    if getattr(proc, "contain_mode", "plain") in ("isolated", "userns") and proc.poll() is None:
        try:
            proc.terminate()
            proc.wait(EXIT_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            pass
    _kill_group(proc)


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()


def peek_status(pid, wait_s=0.0):
    """pid's exit status once it has exited, waiting up to wait_s, not reaped (WNOWAIT: end_server still
    needs its pid); None while it runs."""
    end = time.monotonic() + wait_s
    while True:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return None
        if info is not None:
            return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        if time.monotonic() >= end:
            return None
        time.sleep(0.002)


class Checker:
    """A checker process, contained in `mode`, and the trainer's end of its socket."""

    def __init__(self, mode):
        self.jobs, self.mode = 0, mode
        with _pool_lock:
            self.id = next(k for k in itertools.count() if k not in _checker_ids)
            _checker_ids.add(self.id)
        uid = CHECKER_UID - self.id
        self.workdir = tempfile.mkdtemp(prefix="nano-d1-checker-")  # plain / landlock: its cwd (KodCode writes files)
        limits = contain.self_limits(mode, CHECKER_CPU_S, CHECKER_MEMORY_MB, self.workdir, uid, readable=(_HERE,))
        self.sock, theirs = socket.socketpair()
        try:
            self.proc = contain.contained_popen(
                [contain.PYTHON, "-I", "-B", "-c", _BOOT, str(theirs.fileno()), _HERE, marshal.dumps(limits).hex()],
                readable=(_HERE,), uid=uid, force=mode, cwd=self.workdir if mode in ("plain", "landlock") else None,
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)
        finally:
            theirs.close()

    def run(self, job, server_sock, deadline, on_late):
        """Send the job and its server's socket; -> the checker's verdicts, or None (late or gone)."""
        self.jobs += 1
        try:
            socket.send_fds(self.sock, [b"j"], [server_sock.fileno()])
            server.send_frame(self.sock, wire.encode(job))
            self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                data = server.recv_frame(self.sock)
            except TimeoutError:
                on_late()  # the server dies: the checker's remaining requests fail at once
                self.sock.settimeout(EXIT_GRACE_S)
                data = server.recv_frame(self.sock)
                self.jobs = MAX_JOBS  # late once: replaced
            reply = wire.decode(data) if data is not None else None
        except (OSError, ValueError):
            self.jobs = MAX_JOBS
            return None
        if type(reply) is not tuple or len(reply) != 2 or reply[0] != "done":
            self.jobs = MAX_JOBS
            return None
        return reply[1]

    def close(self):
        self.sock.close()
        end_server(self.proc)
        remove_tree(self.workdir)
        with _pool_lock:
            _checker_ids.discard(self.id)


def _take(mode):
    with _pool_lock:
        idle = _pool.setdefault(mode, [])
        while idle:
            c = idle.pop()
            if c.proc.poll() is None:
                return c
            c.close()
    return Checker(mode)


def _give(c):
    if c.jobs >= MAX_JOBS or c.proc.poll() is not None:
        c.close()
        return
    with _pool_lock:
        _pool.setdefault(c.mode, []).append(c)


@atexit.register
def close_all():
    with _pool_lock:
        idle = [c for cs in _pool.values() for c in cs]
        _pool.clear()
    for c in idle:
        c.close()


def run_checked(program, tests, *, prefix="", test_source="", targets=(), timeout_s=10.0, test_timeout_s=3.0,
                mode=None, limits=None, launch=contained, end=end_server, outcome=None):
    """[None (passed) or why it failed] per test: `program` in a new server, the tests (after the trusted
    `prefix` and `test_source`) in a pooled checker, binding only the program names the item declares
    (`targets`, checker.test_targets). `mode`: contain's (default: contain.mode()); `limits(workdir)`: the
    server's (default: contain's for the mode, 1 GiB). Late or garbled: every test not reported fails."""
    t0 = time.monotonic()
    mode = mode or contain.mode()
    workdir = tempfile.mkdtemp(prefix="nano-d1-sandbox-")
    ours, theirs = socket.socketpair()
    proc = status = None
    try:
        server_limits = limits(workdir) if limits is not None else contain.self_limits(
            mode, timeout_s, SERVER_MEMORY_MB, workdir, contain.SANDBOX_UID)
        proc = start_server(theirs, launch=launch, workdir=workdir, test_timeout_s=test_timeout_s,
                            limits=server_limits)
        stop_watch = watch_workdir(mode, workdir, lambda: end(proc))  # landlock, plain: a host folder
        theirs.close()
        checker = _take(mode)
        job = ("job", program, list(tests), prefix, test_source, test_timeout_s, list(targets))
        why = checker.run(job, ours, t0 + timeout_s, on_late=lambda: end(proc))
        _give(checker)
        ours.close()  # the checker has closed its copy: a server still serving sees EOF and exits (0)
        status = peek_status(proc.pid, min(EXIT_GRACE_S, max(t0 + timeout_s - time.monotonic(), 0.0)))
        # None: still running after that (ended below); negative: the signal that ended it
    finally:
        ours.close()
        theirs.close()
        if proc is not None:
            stop_watch()
            end(proc)
        remove_tree(workdir)
    ok = type(why) is list and len(why) == len(tests) and all(w is None or type(w) is str for w in why)
    why = why if ok else ["no verdict from the checker"] * len(tests)
    if outcome is not None:
        outcome.update(why=why, covered=[ok] * len(tests), returncode=status, seconds=time.monotonic() - t0,
                       mode=getattr(proc, "contain_mode", None))
    return why


def main(fd, limits_hex):
    """The checker process: jobs from the trainer, each with its server's socket, until EOF. Before the
    first job it imports the test modules, then applies its limits and confines
    itself; each job gets its own CPU budget."""
    sock = socket.socket(fileno=fd)
    modules = checker.import_test_modules()
    limits = marshal.loads(bytes.fromhex(limits_hex))
    for name, (soft, hard) in limits["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if limits["confine"] is not None:
        confine.confine(**limits["confine"])
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(sock, 1, 1)
        except OSError:
            return
        if not fds:
            return
        data = server.recv_frame(sock)
        if data is None:
            return
        _, program, tests, prefix, test_source, test_timeout_s, targets = wire.decode(data)
        server_sock = socket.socket(fileno=fds[0])
        conn = checker.Connection(server_sock, timeout_s=test_timeout_s + 0.5)
        used = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])  # this job's CPU: SIGXCPU past its budget
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        budget = int(used + (len(tests) + 2) * (test_timeout_s + 1)) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (budget if hard == resource.RLIM_INFINITY else min(budget, hard), hard))
        try:
            why = checker.check_job(conn, program, tests, prefix, test_source, test_timeout_s + 1.0, targets,
                                    modules)
        finally:
            server_sock.close()
        server.send_frame(sock, wire.encode(("done", why)))
