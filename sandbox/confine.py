"""
Confinement a process applies to ITSELF right before it runs untrusted code, in every mode but plain; what it
applies lasts for good, and for everything it later forks or execs. In "landlock" mode (no namespaces: no
unprivileged user namespaces, or root without CAP_SYS_ADMIN, a default Docker container) all of it:
  1. as root with `uid`: the `write` paths are chowned to uid, then groups, gid and uid dropped; no capability
     is kept (a path the uid cannot read is refused, one line naming it);
  2. a fresh, empty session keyring (the trainer's keys are no longer possessed);
  3. no_new_privs (Landlock and seccomp refuse an unprivileged caller without it);
  4. Landlock (Documentation/userspace-api/landlock.rst), from ABI 6 only: only `read` (read, list, execute)
     and `write` (everything) are in reach; no TCP bind/connect; no signal or abstract unix socket outside
     the domain (the trainer);
  5. seccomp, an allow-list built by libseccomp: SECCOMP_ALLOW and nothing else (EPERM).
In the namespace modes (sandbox/contain.py does 1 and the namespaces), confine(landlock=False): 2, 3 and 5.
Standard library and the system's libseccomp.so.2 only, and no module-level code but imports, constants and
definitions: the program server is built as compile(wire_src + confine_src + server_src). ctypes is imported
only when needed.

    from sandbox.confine import confine, confine_available, default_read_paths, SANDBOX_UID
    confine(read=default_read_paths(), write=[workdir], uid=SANDBOX_UID)   # raises OSError naming the step
"""
import errno
import os
import stat
import struct
import sys

LANDLOCK_SYS = {"create_ruleset": 444, "add_rule": 445, "restrict_self": 446}  # the same on x86_64 and aarch64
LANDLOCK_FS_FILE = 1 | 2 | 4  # EXECUTE, WRITE_FILE, READ_FILE: the rights a rule on a non-directory may hold
LANDLOCK_FS_READ = 1 | 4 | 8  # EXECUTE, READ_FILE, READ_DIR
LANDLOCK_FS_ABI1 = (1 << 13) - 1  # bits 0..12, EXECUTE .. MAKE_SYM
LANDLOCK_FS_REFER, LANDLOCK_FS_TRUNCATE, LANDLOCK_FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5 (file rights)
LANDLOCK_NET_TCP = 1 | 2  # BIND_TCP, CONNECT_TCP (ABI 4): handled with no rule, so no TCP at all
LANDLOCK_SCOPE_ALL = 1 | 2  # ABSTRACT_UNIX_SOCKET, SIGNAL (ABI 6)
LANDLOCK_MIN_ABI = 6  # below it (kernels 5.13-6.11) a program signals every process of its uid: refused
# as root, the sandbox in slot k runs as SANDBOX_UID - k (checkers: SANDBOX_UID - 1024 - k): 2^31 - 2^24 and
# below, above systemd's container ranges (524288-1879048191) and far from nobody (65534), which owns host files
SANDBOX_UID = 0x7F000000
# The allow-list (every sandboxed process, every mode but plain): what the interpreter, the standard library,
# subprocess and the test forms need; every other syscall fails with EPERM (Docker's default profile denies by
# omission the same way). Names, resolved by libseccomp for the machine it runs on (a name the machine lacks,
# such as open on aarch64, is skipped). Left out on purpose: sockets other than socketpair, ptrace and
# process_vm_*, namespaces and mounts, setsid/setpgid (the runner takes its session before confine), keyrings,
# SysV and POSIX IPC (shm*, sem*, msg*, mq_*), chmod/chown/utime (Landlock gates none of them), mknod, bpf,
# io_uring, perf, userfaultfd, seccomp, landlock, modules, reboot, ...
SECCOMP_ALLOW = (
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2", "lseek",
    "sendfile", "copy_file_range", "splice", "tee", "fsync", "fdatasync", "ftruncate", "truncate", "fallocate",
    "fadvise64", "readahead", "flock", "fcntl", "ioctl", "dup", "dup2", "dup3", "pipe", "pipe2", "close",
    "close_range", "open", "openat", "openat2", "creat", "stat", "fstat", "lstat", "newfstatat", "statx", "access",
    "faccessat", "faccessat2", "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir",
    "unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "readlink",
    "readlinkat", "umask", "select", "pselect6", "poll", "ppoll", "epoll_create", "epoll_create1", "epoll_ctl",
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2",
    "mmap", "munmap", "mprotect", "mremap", "madvise", "brk", "msync", "mincore", "membarrier", "getrandom",
    "futex", "futex_waitv", "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "arch_prctl", "prctl",
    "fork", "vfork", "execve", "wait4", "waitid", "exit", "exit_group", "kill", "tgkill", "tkill",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait", "rt_sigsuspend",
    "sigaltstack", "pause", "restart_syscall", "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid",
    "getegid", "getgroups", "getresuid", "getresgid", "getpgrp", "getpgid", "getsid", "uname", "sysinfo",
    "getrusage", "times", "getrlimit", "setrlimit", "prlimit64", "sched_yield", "sched_getaffinity",
    "sched_getparam", "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min", "getcpu",
    "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday", "time", "setitimer",
    "getitimer", "alarm", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
    "timerfd_create", "timerfd_settime", "timerfd_gettime",
    "sendmsg", "recvmsg", "sendto", "recvfrom", "sendmmsg", "recvmmsg", "shutdown", "getsockname", "getpeername",
    "getsockopt", "setsockopt")
# extended attributes: ENOTSUP, what a file system without them answers (shutil.copy2 then goes on)
SECCOMP_ENOTSUP = ("setxattr", "lsetxattr", "fsetxattr", "getxattr", "lgetxattr", "fgetxattr", "listxattr",
                   "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr")
# clone only without these flags: CLONE_NEW{NS,CGROUP,UTS,IPC,USER,PID,NET}, and CLONE_PARENT (a child of the
# trainer itself, left unreaped there); clone3 passes its flags in memory, out of the filter's reach: ENOSYS
# makes glibc fall back to clone
SECCOMP_CLONE_DENY = 0x7E020000 | 0x8000
AF_UNIX = 1  # socketpair's only family here
# libseccomp (include/seccomp.h): actions, and scmp_arg_cmp's operators
SCMP_ACT_KILL_PROCESS, SCMP_ACT_ALLOW = 0x80000000, 0x7FFF0000
SCMP_CMP_EQ, SCMP_CMP_MASKED_EQ = 4, 7
SCMP_FLTATR_ACT_BADARCH = 2  # another ABI (i386's int 0x80, x32, arm32): the process is killed
KEYCTL_JOIN_SESSION_KEYRING = 1


def _confine_libc():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return ctypes, libc


def _confine_fail(step, err):
    raise OSError(err, f"confine: {step}: {os.strerror(err)}")


def landlock_abi():
    """The kernel's Landlock ABI version, 0 where Landlock is missing or disabled (or any error)."""
    ctypes, libc = _confine_libc()
    abi = libc.syscall(ctypes.c_long(LANDLOCK_SYS["create_ruleset"]), None, ctypes.c_long(0), ctypes.c_long(1))
    return max(int(abi), 0)


def _confine_drop_uid(uid, read, write, libc):
    """chown `write` to uid, drop groups, gid and uid: no capability is left. A read or write path out of
    reach of uid (the interpreter under root's 0700 /root, pyenv's layout) is refused, one line naming it:
    the sandbox keeps no capability (CAP_DAC_READ_SEARCH would let it stat and open by handle what Landlock
    does not gate)."""
    # what the uid will need of each path (seen while we still see them all): list and pass through a folder
    paths = [(p, os.R_OK | os.X_OK if os.path.isdir(p) else os.R_OK) for p in (*read, *write) if os.path.exists(p)]
    try:
        for p in write:  # only directories and files: a device such as /dev/null must never change hands
            if os.path.isdir(p) or os.path.isfile(p):
                os.chown(p, uid, uid)
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # from root to another uid: every capability set is cleared
    except OSError as e:
        _confine_fail(f"uid drop to {uid}", e.errno)
    out = [p for p, mode in paths if not os.access(p, mode)]  # as the real uid, by the file modes alone
    if out:
        raise OSError(errno.EACCES, f"confine: the sandbox uid {uid} cannot read {out[0]} (a folder on its way is "
                                    "closed to other users) and keeps no capability to: install the interpreter "
                                    "where other users can read it")


def _confine_landlock(abi, read, write, ctypes, libc):
    fs = LANDLOCK_FS_ABI1 | (LANDLOCK_FS_REFER if abi >= 2 else 0) | (LANDLOCK_FS_TRUNCATE if abi >= 3 else 0)
    fs |= LANDLOCK_FS_IOCTL_DEV if abi >= 5 else 0
    # struct landlock_ruleset_attr {u64 handled_access_fs, handled_access_net, scoped}: as many fields as
    # this ABI knows (the kernel reads the size we pass and refuses unknown non-zero bytes)
    fields = [fs] + ([LANDLOCK_NET_TCP] if abi >= 4 else []) + ([LANDLOCK_SCOPE_ALL] if abi >= 6 else [])
    attr = struct.pack(f"={len(fields)}Q", *fields)
    ruleset = libc.syscall(ctypes.c_long(LANDLOCK_SYS["create_ruleset"]), attr, ctypes.c_long(len(attr)),
                           ctypes.c_long(0))
    if ruleset < 0:
        _confine_fail("landlock_create_ruleset", ctypes.get_errno())
    try:
        file_rights = LANDLOCK_FS_FILE | LANDLOCK_FS_TRUNCATE | LANDLOCK_FS_IOCTL_DEV
        for paths, rights in ((read, LANDLOCK_FS_READ), (write, fs)):
            for p in paths:
                try:
                    fd = os.open(p, os.O_PATH | os.O_CLOEXEC)
                except FileNotFoundError:
                    continue
                try:  # the kernel refuses directory rights on a file (EINVAL)
                    allowed = rights if stat.S_ISDIR(os.fstat(fd).st_mode) else rights & file_rights
                    rule = struct.pack("=Qi", allowed & fs, fd)  # struct landlock_path_beneath_attr, packed
                    if libc.syscall(ctypes.c_long(LANDLOCK_SYS["add_rule"]), ctypes.c_long(ruleset),
                                    ctypes.c_long(1), rule, ctypes.c_long(0)) != 0:  # LANDLOCK_RULE_PATH_BENEATH
                        _confine_fail(f"landlock_add_rule {p}", ctypes.get_errno())
                finally:
                    os.close(fd)
        if libc.syscall(ctypes.c_long(LANDLOCK_SYS["restrict_self"]), ctypes.c_long(ruleset), ctypes.c_long(0)):
            _confine_fail("landlock_restrict_self", ctypes.get_errno())
    finally:
        os.close(ruleset)


def _libseccomp(ctypes):
    """The system's libseccomp (it writes the BPF, knows each machine's syscall numbers and other ABIs);
    OSError naming it where it is missing."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        raise OSError(errno.ENOSYS, "confine: libseccomp.so.2 is not installed (Debian/Ubuntu: libseccomp2)") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.c_void_p)
    lib.seccomp_attr_set.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32)
    lib.seccomp_load.argtypes = lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    return lib


def _seccomp_allow_list(ctypes, lib):
    """Load the allow-list filter on this process (and everything it later starts). libseccomp answers a
    negative errno on failure."""
    class ArgCmp(ctypes.Structure):  # struct scmp_arg_cmp
        _fields_ = (("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64))

    ctx = lib.seccomp_init(0x00050000 | errno.EPERM)  # SCMP_ACT_ERRNO(EPERM): everything not allowed below
    if not ctx:
        _confine_fail("seccomp_init", errno.ENOMEM)

    def rule(action, name, *cmps):
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:  # not a syscall of this machine
            return
        arr = (ArgCmp * len(cmps))(*cmps) if cmps else None
        r = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
        if r < 0:
            _confine_fail(f"seccomp rule {name}", -r)
    try:
        r = lib.seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)
        for name in SECCOMP_ALLOW:
            rule(SCMP_ACT_ALLOW, name)
        for name in SECCOMP_ENOTSUP:
            rule(0x00050000 | errno.ENOTSUP, name)
        rule(SCMP_ACT_ALLOW, "clone", ArgCmp(0, SCMP_CMP_MASKED_EQ, SECCOMP_CLONE_DENY, 0))  # args[0]: the flags
        rule(0x00050000 | errno.ENOSYS, "clone3")
        rule(SCMP_ACT_ALLOW, "socketpair", ArgCmp(0, SCMP_CMP_EQ, AF_UNIX, 0))
        r = r or lib.seccomp_load(ctx)
        if r < 0:
            _confine_fail("seccomp_load", -r)
    finally:
        lib.seccomp_release(ctx)


def _fresh_session_keyring(ctypes, libc, lib):
    """A new, empty session keyring: the trainer's (Kerberos caches, fscrypt and NFS/CIFS tokens on a
    cluster node) is no longer possessed, and keyctl itself is outside the allow-list."""
    nr = lib.seccomp_syscall_resolve_name(b"keyctl")
    if libc.syscall(ctypes.c_long(nr), ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), None) < 0:
        _confine_fail("a fresh session keyring", ctypes.get_errno())


def confine(read=(), write=(), uid=None, landlock=True):
    """Confine the calling process for good (the module's docstring says how). `read`, `write`: paths (one
    that does not exist is skipped); `uid`: who to become when we are root. landlock=False: the namespaces
    contain it already (sandbox/contain.py): only the fresh keyring and the allow-list. Returns what was
    applied: {"landlock_abi", "seccomp", "uid"}. Raises OSError naming the step."""
    ctypes, libc = _confine_libc()
    lib = _libseccomp(ctypes)
    abi = landlock_abi() if landlock else 0
    if landlock and abi < LANDLOCK_MIN_ABI:
        raise OSError(errno.ENOSYS, f"confine: Landlock ABI {abi} < {LANDLOCK_MIN_ABI} (kernel 6.12): a program "
                                    "could signal every process of its uid and reach abstract sockets")
    try:  # Landlock and seccomp (by prctl) confine the calling thread only: another would stay free
        threads = len(os.listdir("/proc/self/task"))
    except OSError:
        threads = 1
    if threads > 1:
        raise OSError(errno.EBUSY, f"confine: the process has {threads} threads, it must have one")
    read, write = [os.fspath(p) for p in read], [os.fspath(p) for p in write]
    if uid is not None and os.geteuid() == 0:
        _confine_drop_uid(uid, read, write, libc)
    _fresh_session_keyring(ctypes, libc, lib)
    if libc.prctl(38, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        _confine_fail("no_new_privs", ctypes.get_errno())  # PR_SET_NO_NEW_PRIVS
    if landlock:
        _confine_landlock(abi, read, write, ctypes, libc)
    _seccomp_allow_list(ctypes, lib)
    return {"landlock_abi": abi, "seccomp": True, "uid": os.getuid()}


def open_to_others(path):
    """Whether a uid that owns nothing here can read `path`: it and every folder on its way passable (and
    readable, for `path` itself) by others, by the file modes alone."""
    path = os.path.realpath(path)
    parts = [path]
    while parts[-1] != "/":
        parts.append(os.path.dirname(parts[-1]))
    try:
        return all(os.stat(p).st_mode & 0o001 for p in parts[1:]) and bool(os.stat(path).st_mode & 0o004)
    except OSError:
        return False


def default_read_paths():
    """What an interpreter needs to run, as existing real paths, each once (none beneath another)."""
    paths = [sys.base_prefix, sys.prefix, "/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/localtime",
             "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/dev/null", "/dev/urandom", "/dev/zero"]
    real = [os.path.realpath(p) for p in paths if os.path.exists(p)]
    dirs = [p for p in real if os.path.isdir(p)]
    out = []
    for p in real:
        if p not in out and not any(p.startswith(d.rstrip("/") + "/") for d in dirs if d != p):
            out.append(p)
    return out


def confine_available(read=(), write=()):
    """(True, "landlock ABI n") where confine works here, else (False, why): a fresh interpreter confines
    itself (as SANDBOX_UID when root) and must fail to list this file's folder, import a module, start an
    interpreter and write in its fresh write directory. Call it from the module (it needs this file)."""
    import shutil
    import subprocess
    import tempfile
    here = os.path.realpath(__file__)
    read = [os.path.realpath(p) for p in read] or default_read_paths()
    if any(here.startswith(p.rstrip("/") + "/") for p in read):
        raise ValueError(f"confine_available: {here} must not be readable")
    work = tempfile.mkdtemp(prefix="nano-d1-confine-")
    script = (f"exec(compile(open({here!r}).read(), {here!r}, 'exec'))\n"
              f"info = confine(read={read!r}, write={[work, *map(os.fspath, write)]!r}, "
              f"uid=SANDBOX_UID if os.geteuid() == 0 else None)\n"
              f"try:\n    os.listdir({os.path.dirname(here)!r})\n    raise SystemExit('its folder is readable')\n"
              f"except PermissionError:\n    pass\n"
              f"with open({work!r} + '/probe', 'w') as f:\n    f.write('ok')\n"
              f"import json, subprocess\n"
              f"if subprocess.run([sys.executable, '-I', '-S', '-c', 'pass']).returncode:\n"
              f"    raise SystemExit('no interpreter starts')\n"
              f"print('CONFINED', json.dumps(info))\n")
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, timeout=30,
                              check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return False, f"the probe did not run: {e}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if proc.returncode != 0 or not proc.stdout.startswith("CONFINED "):
        why = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        return False, why[0]
    return True, f"landlock ABI {landlock_abi()}"
