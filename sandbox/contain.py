"""
Containment for the program server and d1's runner (no answers in reach; docs/code-task.md, "The
sandbox", says what is in reach and what each mode stops). contained_popen() starts a command in new
mount, pid, network, IPC and UTS namespaces (plus a user namespace when not root) on a fresh read-only
root that holds only what the interpreter needs (/usr and its links, a few /etc files, a minimal /dev, a
private size-limited /tmp as working directory and HOME, a fresh /proc, the interpreter and virtualenv
and each path of `readable` bound read-only at their real paths) and nothing else: the old root is
detached after pivot_root. As root the command runs as `uid` (SANDBOX_UID - slot) with no capabilities;
not root, as the same user inside a user namespace. Both with no_new_privs and a parent-death SIGKILL.
The command then confines itself too (confine_config: a fresh keyring and the seccomp allow-list).

How: `python -I -S -c <_SHIM> <config> <argv...>`. The shim unshares (ctypes: Python 3.11 has no
os.unshare), forks the pid namespace's init, which mounts the root, pivots into it, drops the uid and
execs argv (which sets its own resource limits: sandbox/server.py, sandbox/runner.py). A setup step that
fails exits 125 with one line "contain: ..." on stderr.

Without namespaces the mode is "landlock": the command starts as a plain subprocess and contains ITSELF
before any program code runs (sandbox/confine.py, with confine_config()). Neither: mode() raises
NoIsolation, naming why and `--sandbox plain` (NANO_D1_SANDBOX=plain, choose()), the one way to accept
unisolated rewards, with a loud banner; never silently. The mode is on the Popen (`proc.contain_mode`)
and from mode(), for the run's records.

    from sandbox.contain import contained_popen, PYTHON
    proc = contained_popen([PYTHON, "-I", "-c", src], readable=["/path/of/server"], stdin=PIPE, stdout=PIPE)
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import weakref

from sandbox import confine
from sandbox.workdir import MAX_FILES as WORKDIR_FILES, MAX_MB as WORKDIR_MB, remove_tree

SANDBOX_UID = confine.SANDBOX_UID  # as root, who a contained command runs as (sandbox/confine.py says why)
# as root (uid dropped), as a user (user namespace), self-confined (Landlock + seccomp), not isolated
MODES = ("isolated", "userns", "landlock", "plain")
CHOICES = ("auto", "plain")  # --sandbox: the strongest mode that works here, or plain accepted explicitly
MAX_FILE_BYTES = 8 << 20    # RLIMIT_FSIZE: no single file larger than 8 MiB
MAX_PROCESSES = 32          # RLIMIT_NPROC, where it binds (see rlimits)
MAX_OPEN_FILES = 64         # RLIMIT_NOFILE
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}  # plus HOME and TMPDIR
WARNING = ("REWARD NOT ISOLATED ({why}): programs run as a plain subprocess and can read the "
           "repository, the data and any answer file")
# the interpreter for argv[0], the same path inside and outside (its directories are bound as they are):
# the virtualenv's bin/python, so that its site-packages stay importable (sandbox/run.py's choice)
PYTHON = (lambda exe: exe if os.path.exists(exe) else os.path.realpath(sys.executable))(
    os.path.join(os.path.realpath(sys.prefix), "bin", os.path.basename(sys.executable)))
BASE_PYTHON = os.path.realpath(sys.executable)  # the installation's own binary, without the virtualenv

_probe = None               # (available, reason), decided once by isolation_available()
_probe_lock = threading.Lock()
_warned = False             # the plain-mode banner is printed once per process
_chosen = "auto"            # choose(): "plain" accepts unisolated rewards explicitly
_decided = None             # the mode mode() last answered (decided(): for the run's records)


class NoIsolation(RuntimeError):
    """Neither namespaces nor Landlock work here, and plain mode was not chosen."""

# The setup, run by the host interpreter with -I -S (no site, nothing of the environment). argv[1]: the
# config as JSON, argv[2:]: the command. Standard library only; every step either works or exits 125.
_SHIM = r"""
import ctypes, json, os, resource, signal, sys
cfg, argv = json.loads(sys.argv[1]), sys.argv[2:]
libc = ctypes.CDLL(None, use_errno=True)
NS, PID, NET, IPC, UTS, USER = 0x20000, 0x20000000, 0x40000000, 0x8000000, 0x4000000, 0x10000000
RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND, REC, PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
ST_LOCKED = {2: 2, 4: 4, 8: 8, 1024: 1024, 2048: 2048, 4096: 1 << 21}  # statvfs flag -> mount flag
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}.get(os.uname().machine)

def fail(what, err=None):
    os.write(2, ("contain: %s: %s\n" % (what, os.strerror(err or ctypes.get_errno()))).encode())
    os._exit(125)

def call(r, what):
    if r != 0:
        fail(what)

def mount(src, dst, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()
    call(libc.mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data)), "mount " + dst)

def bind_ro(src, dst, extra=NOSUID | NODEV):
    # a read-only bind keeps the source's locked flags (nosuid, nodev, noexec, atime), or a user
    # namespace refuses the remount
    mount(src, dst, None, BIND | REC)
    st = os.statvfs(src).f_flag
    locked = sum(m for s, m in ST_LOCKED.items() if st & s)
    mount(None, dst, None, REMOUNT | BIND | RDONLY | extra | locked)

def node(path, directory):
    if directory:
        os.makedirs(path, exist_ok=True)
    elif not os.path.lexists(path):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))

uid, gid, root = os.getuid(), os.getgid(), os.geteuid() == 0 and not cfg["userns"]
try:
    call(libc.unshare(NS | PID | NET | IPC | UTS | (0 if root else USER)), "unshare")
    if not root:  # the same uid inside; the capabilities of the new namespace last until exec
        for name, text in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (uid, uid)),
                           ("gid_map", "%d %d 1" % (gid, gid))):
            with open("/proc/self/" + name, "w") as f:
                f.write(text)
    child = os.fork()
except OSError as e:
    fail("namespaces", e.errno)
if child:  # outside the pid namespace: wait for its init, pass on how it ended
    kill = lambda *_: os.kill(child, signal.SIGKILL)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, kill)
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0); os.dup2(null, 1)
    os.closerange(3, 1 << 16)  # our copies of the pipes and pass_fds: EOF follows the command alone
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a SIGSEGV passed on leaves no core file here
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status))

try:  # pid 1 of the new namespace
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: the shim killed -> the namespace ends
    mount(None, "/", None, REC | PRIVATE)
    new = cfg["stage"]
    mount("none", new, "tmpfs", NOSUID | NODEV, "size=1m,nr_inodes=1024,mode=755")
    for d in ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr"):
        host = "/" + d
        if os.path.islink(host):
            os.symlink(os.readlink(host), new + host)
        elif os.path.isdir(host):
            os.mkdir(new + host)
            bind_ro(host, new + host)
    os.mkdir(new + "/etc")
    for name in cfg["etc"]:
        if os.path.isfile("/etc/" + name) or os.path.isdir("/etc/" + name):
            node(new + "/etc/" + name, os.path.isdir("/etc/" + name))
            bind_ro("/etc/" + name, new + "/etc/" + name)
    os.mkdir(new + "/dev")
    for name in ("null", "zero", "full", "random", "urandom"):
        node(new + "/dev/" + name, False)
        mount("/dev/" + name, new + "/dev/" + name, None, BIND)
        mount(None, new + "/dev/" + name, None, REMOUNT | BIND | NOSUID | NOEXEC)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, new + "/dev/" + name)
    os.mkdir(new + "/dev/shm")
    mount("none", new + "/dev/shm", "tmpfs", NOSUID | NODEV | NOEXEC, "size=16m,nr_inodes=256,mode=1777")
    os.mkdir(new + "/tmp")
    mount("none", new + "/tmp", "tmpfs", NOSUID | NODEV, "size=%dm,nr_inodes=%d,mode=1777" % (cfg["tmp_mb"], cfg["tmp_files"]))
    os.mkdir(new + "/proc")
    mount("proc", new + "/proc", "proc", NOSUID | NODEV | NOEXEC)
    made = []  # directories made only to hold a mount point: 0111 at the end (passable, not listable)
    for src in sorted(cfg["binds"], key=len):
        parent = os.path.dirname(src)
        missing = []
        while not os.path.lexists(new + parent):
            missing.append(new + parent)
            parent = os.path.dirname(parent)
        os.makedirs(new + os.path.dirname(src), exist_ok=True)
        made += missing
        node(new + src, os.path.isdir(src))
        bind_ro(src, new + src)
    for d in made:
        os.chmod(d, 0o111)
    os.chdir(new)
    if SYS_PIVOT_ROOT is None:
        fail("pivot_root", 38)
    call(libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")  # the old root now sits on top of /
    call(libc.umount2(b".", 2), "umount the old root")  # MNT_DETACH: it is gone from this namespace
    os.chdir("/")
    mount(None, "/", None, REMOUNT | RDONLY | NOSUID | NODEV)
    os.chdir(cfg["cwd"])
    if root:  # no capabilities left after this
        os.setgroups([])
        os.setresgid(cfg["uid"], cfg["uid"], cfg["uid"])
        os.setresuid(cfg["uid"], cfg["uid"], cfg["uid"])
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # a uid change clears the parent-death signal
    call(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")
    os.execve(argv[0], argv, os.environ)
except OSError as e:
    fail("setup" if e.filename is None else "setup %s" % e.filename, e.errno)
"""
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf", "passwd", "group",
             "hosts", "host.conf", "alternatives", "mime.types", "os-release")
_STAGES = ("/mnt", "/media", "/srv", "/opt", "/boot", "/home")  # a directory to build the new root on


def _interpreter_binds(venv):
    """The interpreter's installation, and with `venv` its virtualenv: real paths, to bind as they are."""
    paths = [os.path.realpath(sys.base_prefix)]
    if venv and os.path.realpath(sys.prefix) not in paths:
        paths.append(os.path.realpath(sys.prefix))
    return paths


def _stage(binds):
    """A host directory to mount the new root's tmpfs on (in the new mount namespace only): one that
    holds none of the paths to bind."""
    inside = lambda p, d: p == d or p.startswith(d + "/")
    for d in _STAGES:
        if os.path.isdir(d) and not os.path.islink(d) and not any(inside(b, d) for b in binds):
            return d
    raise OSError(f"no directory of {_STAGES} is free to build the new root on")


def _config(readable, venv, uid, userns, tmp_mb, cwd):
    binds = []
    for p in [*_interpreter_binds(venv), *readable]:
        real = os.path.realpath(os.fspath(p))
        if not os.path.exists(real):
            raise FileNotFoundError(f"contain: readable path {p!r} does not exist")
        if real == "/":
            raise ValueError("contain: the whole root cannot be readable")
        if real not in binds:
            binds.append(real)
    if not cwd.startswith("/tmp"):
        raise ValueError(f"contain: cwd {cwd!r} must be under the private /tmp")
    return {"binds": binds, "stage": _stage(binds), "etc": list(ETC_FILES), "uid": int(uid),
            "userns": bool(userns), "tmp_mb": int(tmp_mb), "tmp_files": WORKDIR_FILES, "cwd": cwd}


def isolation_available():
    """(True, mode) where contained_popen can contain here ('isolated' as root, 'userns' otherwise,
    'landlock' without namespaces), else (False, why). Decided once per process, by starting a contained
    interpreter that must be pid 1 and must not see the repository (then, failing that, a self-confined
    one that must not see it: confine.confine_available)."""
    global _probe
    with _probe_lock:
        if _probe is None:
            _probe = _check()
        return _probe


def _check():
    import ctypes
    try:  # every mode but plain loads the allow-list through it
        confine._libseccomp(ctypes)
    except OSError as e:
        return False, e.strerror
    ok, why = _check_namespaces()
    if ok:
        return ok, why
    here = os.path.dirname(os.path.realpath(__file__))  # the checker runs this folder's code as the sandbox uid
    if os.geteuid() == 0 and not confine.open_to_others(here):
        return False, f"namespaces: {why}; Landlock: the sandbox uid cannot read {here} (a folder on its way is " \
                      "closed to other users) and keeps no capability to: put the checkout where others can read it"
    landlock, how = confine.confine_available(read=confine.default_read_paths())
    return (True, "landlock") if landlock else (False, f"namespaces: {why}; Landlock: {how}")


def _check_namespaces():
    if not sys.platform.startswith("linux"):
        return False, f"no Linux namespaces on {sys.platform}"
    # this file's folder (the repository) exists outside and must not inside
    probe = "import os; print(os.getpid(), os.path.exists(%r))" % os.path.dirname(os.path.realpath(__file__))
    try:
        proc = _contained([BASE_PYTHON, "-I", "-S", "-c", probe], (), False, SANDBOX_UID, False, 8, "/tmp",
                          dict(stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()  # the shim: its pid-1 child follows by the parent-death signal
            proc.communicate()
            raise
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        return False, f"the contained probe did not start: {e}"
    if proc.returncode != 0 or out.split() != [b"1", b"False"]:
        why = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        return False, f"the contained probe failed: {why[0]}"
    return True, "isolated" if os.geteuid() == 0 else "userns"


def choose(name):
    """--sandbox: "auto" (the strongest mode that works here, or NoIsolation) or "plain" (unisolated
    rewards, accepted explicitly)."""
    global _chosen
    if name not in CHOICES:
        raise ValueError(f"--sandbox must be one of {CHOICES}, got {name!r}")
    _chosen = name


def plain_chosen():
    return _chosen == "plain" or os.environ.get("NANO_D1_SANDBOX") == "plain"


def mode():
    """The mode contained_popen runs in here: 'isolated', 'userns' or 'landlock', or 'plain' when chosen
    (for the run's records). Nothing works and plain not chosen: NoIsolation, one line naming why."""
    global _decided
    if plain_chosen():
        _decided = "plain"
        return _decided
    ok, what = isolation_available()
    if not ok:
        raise NoIsolation(f"code rewards cannot be isolated here ({what}); pass --sandbox plain (or set "
                          "NANO_D1_SANDBOX=plain) to accept rewards from programs that can read the repository "
                          "and the data")
    _decided = what
    return what


def decided():
    """The mode this process's code runs in, once mode() has answered; None before (no code has run)."""
    return _decided


def _nproc_counts_per_userns():
    """Linux >= 5.14 counts RLIMIT_NPROC per user namespace (ucounts); older kernels per real uid."""
    release = [int(x) for x in re.findall(r"\d+", os.uname().release)[:2]]
    return release >= [5, 14]


def rlimits(mode, cpu_s, memory_mb):
    """The resource limits a contained process sets on itself before untrusted code runs (the server,
    the runner, the checker). Not in a preexec_fn: that makes subprocess fork() the whole trainer instead
    of vfork() (measured: 163 ms per program from a 4 GiB process vs 0.8 ms), and Python code between
    fork and exec is unsafe with threads."""
    cpu = int(cpu_s) + 1  # CPU seconds can't exceed the wall clock anyway; SIGXCPU kills a spinning loop
    limits = {"RLIMIT_CPU": (cpu, cpu + 1), "RLIMIT_AS": (memory_mb << 20, memory_mb << 20),
              "RLIMIT_FSIZE": (MAX_FILE_BYTES, MAX_FILE_BYTES), "RLIMIT_NOFILE": (MAX_OPEN_FILES, MAX_OPEN_FILES),
              "RLIMIT_CORE": (0, 0)}
    # NPROC counts a uid's processes. isolated, and landlock as root: each running sandbox has a uid of
    # its own (SANDBOX_UID - slot), so it counts this sandbox's processes only (charged to one shared uid, a
    # fork bomb holding its 30 children made a concurrent job's subprocess.run fail 5/5). userns: per
    # user namespace on Linux >= 5.14; older kernels would count the trainer's own processes and threads
    # and fail innocent forks. plain, and landlock as a user: a user's count would include the trainer's
    # threads; there a fork bomb is bounded by the wall clock and the session kill (seccomp refuses
    # setsid in landlock mode, so no child leaves the session)
    if mode == "isolated" or (mode == "landlock" and os.geteuid() == 0) or (
            mode == "userns" and _nproc_counts_per_userns()):
        limits["RLIMIT_NPROC"] = (MAX_PROCESSES, MAX_PROCESSES)
    return limits


def self_limits(mode, cpu_s, memory_mb, workdir, uid, readable=()):
    """What a contained process (server, runner, checker) applies to itself before untrusted code runs:
    {"rlimits": rlimits(...), "confine": confine_config(...)}."""
    return {"rlimits": rlimits(mode, cpu_s, memory_mb), "confine": confine_config(mode, workdir, uid, readable)}


def confine_config(mode, workdir, uid, readable=()):
    """What a process started in `mode` passes to confine.confine on itself: in "landlock" mode, read the
    interpreter (and `readable`), write `workdir`, run as `uid` when root; in the namespace modes the
    keyring and the allow-list only; plain: None."""
    if mode == "plain":
        return None
    if mode != "landlock":
        return {"landlock": False}
    # /dev/null writable (open(os.devnull, "w"), subprocess.DEVNULL); confine never chowns a device
    return {"read": [*confine.default_read_paths(), *readable], "write": [workdir, os.devnull],
            "uid": uid if os.geteuid() == 0 else None}


def _warn_plain(why):
    """The fallback's banner, once per process."""
    global _warned
    if not _warned:
        _warned = True
        sys.stderr.write("\n" + "!" * 100 + "\n" + WARNING.format(why=why) + "\n" + "!" * 100 + "\n")
        sys.stderr.flush()


def _contained(argv, readable, venv, uid, userns, tmp_mb, cwd, popen_kwargs):
    cfg = _config(readable, venv, uid, userns, tmp_mb, cwd)
    env = popen_kwargs.pop("env", None)
    env = dict(env) if env is not None else {**ENV, "HOME": cwd, "TMPDIR": cwd}
    shim = [sys.executable, "-I", "-S", "-c", _SHIM, json.dumps(cfg), *argv]
    return subprocess.Popen(shim, env=env, **popen_kwargs)


def contained_popen(argv, *, readable=(), venv=True, uid=SANDBOX_UID, tmp_mb=WORKDIR_MB, cwd=None, force=None,
                    **popen_kwargs):
    """subprocess.Popen(argv) in the namespaces, on the whitelist root described above: only the
    interpreter (with `venv`, its virtualenv too) and `readable` (paths, bound read-only at their real
    paths) are in reach. argv[0] must be an absolute path that exists inside: PYTHON, BASE_PYTHON
    (venv=False) or a program under /usr/bin. `uid`: who runs it when we are root. `tmp_mb`: the private
    /tmp's size; `cwd`: the working directory inside (under /tmp; default /tmp). popen_kwargs go to
    Popen (stdin, stdout, stderr, pass_fds, start_new_session, env: default PATH, LANG, HOME = TMPDIR =
    cwd), except preexec_fn: the command sets its own resource limits (a preexec_fn would fork the
    whole caller). `force`: one of MODES, forced by a caller (default: mode(), plain when chosen); "userns"
    as root keeps root's rights over what it can see (the mode of a non-root machine, forced for tests).
    "plain": a plain Popen, with the banner once per process; "landlock": a plain Popen too, which the
    command must confine itself (confine_config). cwd then is a host directory, the caller's (if not
    given: a fresh temporary one, removed with the Popen object). No mode works and plain not chosen:
    NoIsolation. The mode is proc.contain_mode."""
    if "preexec_fn" in popen_kwargs:
        raise TypeError("contain: no preexec_fn (it would fork the whole caller)")
    argv = [os.fspath(a) for a in argv]
    what = force or mode()  # NoIsolation when nothing works and plain was not chosen
    if what not in MODES:
        raise ValueError(f"contain: mode must be one of {MODES}, got {what!r}")
    if what in ("isolated", "userns"):
        proc = _contained(argv, readable, venv, uid, what == "userns", tmp_mb, cwd or "/tmp", popen_kwargs)
        proc.contain_mode = what
        return proc
    if what == "plain":
        _warn_plain("chosen with --sandbox plain or NANO_D1_SANDBOX=plain" if plain_chosen() else "forced")
    kwargs = dict(popen_kwargs)
    workdir = cwd or tempfile.mkdtemp(prefix="nano-d1-plain-")
    if kwargs.get("env") is None:
        kwargs["env"] = {**ENV, "HOME": workdir, "TMPDIR": workdir}
    proc = subprocess.Popen(argv, cwd=workdir, **kwargs)
    proc.contain_mode = what  # "landlock": the command confines itself (confine_config)
    if cwd is None:
        weakref.finalize(proc, remove_tree, workdir)
    return proc


def startup_cost(n=20):
    """Median seconds to start and finish `python -I -c pass`: plain, and contained here."""
    import statistics
    import time

    def median(fn):
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn().wait()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)
    argv = [PYTHON, "-I", "-c", "pass"]
    plain = median(lambda: subprocess.Popen(argv, env={**ENV, "HOME": "/tmp"}))
    contained = median(lambda: contained_popen(argv)) if isolation_available()[0] else None
    return {"plain_s": plain, "contained_s": contained, "mode": mode()}


if __name__ == "__main__":  # python -m sandbox.contain: the mode here and the start-up cost
    print(isolation_available(), startup_cost())
