"""
Confinement without privileges, for machines where sandbox/contain.py's namespaces are unavailable (no
unprivileged user namespaces, or root without CAP_SYS_ADMIN: a default Docker container). A process calls
confine() on ITSELF right before it runs untrusted code; what it applies lasts for good, and for everything
it later forks or execs:
  1. as root with `uid`: the `write` paths are chowned to uid, then groups, gid and uid dropped (no
     capabilities left, but see _confine_drop_uid for CAP_DAC_READ_SEARCH);
  2. no_new_privs (Landlock and seccomp refuse an unprivileged caller without it);
  3. Landlock (Documentation/userspace-api/landlock.rst): only `read` (read, list, execute) and `write`
     (everything) are in reach; from ABI 4 no TCP bind/connect, from ABI 6 no signal or abstract unix
     socket outside the domain (the trainer);
  4. seccomp (Documentation/userspace-api/seccomp_filter.rst): sockets, ptrace, namespaces, mounts, new
     sessions, keyrings, bpf, io_uring, modules, ... fail with EPERM (socketpair and inherited fds work).
Standard library only, and no module-level code but imports, constants and definitions: the program
server is built as compile(wire_src + confine_src + server_src). ctypes is imported only when needed.

    from sandbox.confine import confine, confine_available, default_read_paths
    confine(read=default_read_paths(), write=[workdir], uid=65534)   # raises OSError naming the step
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
SECCOMP_DENY = {  # syscall -> (x86_64 from arch/x86/entry/syscalls/syscall_64.tbl, aarch64 from asm-generic/unistd.h)
    "socket": (41, 198), "connect": (42, 203), "accept": (43, 202), "bind": (49, 200), "listen": (50, 201),
    "accept4": (288, 242), "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41),
    "chroot": (161, 51), "setsid": (112, 157), "setpgid": (109, 154), "keyctl": (250, 219), "add_key": (248, 217),
    "request_key": (249, 218), "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105), "finit_module": (313, 273),
    "delete_module": (176, 106), "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142), "acct": (163, 89), "syslog": (103, 116),
    "fanotify_init": (300, 262), "personality": (135, 92), "quotactl": (179, 60), "quotactl_fd": (443, 443),
    "mount_setattr": (442, 442), "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432),
    "fspick": (433, 433), "move_mount": (429, 429), "open_tree": (428, 428), "open_tree_attr": (467, 467),
    "pidfd_getfd": (438, 438), "iopl": (172, None), "ioperm": (173, None)}
# Not denied: seccomp itself. A second filter can only add restrictions (the kernel runs every filter and
# keeps the strictest answer), and prctl(PR_SET_SECCOMP) would install one anyway.
# machine -> (its column of SECCOMP_DENY, AUDIT_ARCH_*, clone, clone3)
SECCOMP_MACHINES = {"x86_64": (0, 0xC000003E, 56, 435), "aarch64": (1, 0xC00000B7, 220, 435)}
SECCOMP_CLONE_NS = 0x7E020000  # CLONE_NEW{NS,CGROUP,UTS,IPC,USER,PID,NET}
SECCOMP_KILL, SECCOMP_ERRNO, SECCOMP_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000


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


def _confine_drop_uid(uid, read, write, ctypes, libc):
    """chown `write` to uid, drop groups, gid and uid. If a read or write path is out of reach of uid
    (the interpreter under root's 0700 /root, pyenv's layout), keep CAP_DAC_READ_SEARCH alone, ambient so
    that an exec'd interpreter keeps it too: Landlock then decides alone what is readable, and its one
    escape, open_by_handle_at, is denied by the filter. Returns whether it was kept."""
    call = lambda *a: libc.prctl(*[ctypes.c_ulong(x) for x in a])
    # what the uid will need of each path (seen while we still see them all): list and pass through a folder
    paths = [(p, os.R_OK | os.X_OK if os.path.isdir(p) else os.R_OK) for p in (*read, *write) if os.path.exists(p)]
    try:
        for p in write:  # only directories and files: a device such as /dev/null must never change hands
            if os.path.isdir(p) or os.path.isfile(p):
                os.chown(p, uid, uid)
        call(8, 1, 0, 0, 0)  # PR_SET_KEEPCAPS: the permitted set survives setresuid, for the capset below
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        call(8, 0, 0, 0, 0)
    except OSError as e:
        _confine_fail(f"uid drop to {uid}", e.errno)
    out = [p for p, mode in paths if not os.access(p, mode)]  # as the real uid, by the file modes alone
    keep = 1 << 2 if out else 0  # CAP_DAC_READ_SEARCH
    header, data = struct.pack("=Ii", 0x20080522, 0), struct.pack("=6I", keep, keep, keep, 0, 0, 0)  # version 3
    if libc.capset(header, data) != 0:
        _confine_fail(f"capset (uid {uid} cannot reach {out[0]})" if out else "capset", ctypes.get_errno())
    if keep and call(47, 2, 2, 0, 0) != 0:  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_READ_SEARCH
        _confine_fail(f"ambient CAP_DAC_READ_SEARCH (uid {uid} cannot reach {out[0]})", ctypes.get_errno())
    return bool(keep)


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


def _seccomp_program(machine):
    """The filter (classic BPF, Documentation/networking/filter.rst) as struct sock_filter bytes: u16 code,
    u8 jt, u8 jf, u32 k. A jump names a label, turned into an offset from the next instruction at the end."""
    col, arch, clone, clone3 = SECCOMP_MACHINES[machine]
    LD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ,JGE,JSET|K, BPF_RET|K
    stmt = lambda code, k: (code, 0, 0, k)
    jump = lambda code, k, jt, jf=0: (code, jt, jf, k)  # to jt when true, else on to the next instruction
    # seccomp_data.arch (offset 4): a call through another ABI (i386's int 0x80, arm32) kills the process
    prog = [stmt(LD, 4), jump(JEQ, arch, 1), stmt(RET, SECCOMP_KILL)]
    # seccomp_data.nr (offset 0). x86_64's x32 calls (nr | 1 << 30) arrive as AUDIT_ARCH_X86_64 too: none
    prog.append(stmt(LD, 0))
    if machine == "x86_64":
        prog.append(jump(JGE, 0x40000000, "enosys"))
    # clone3 passes its flags in memory, out of the filter's reach: ENOSYS makes glibc fall back to clone
    prog += [jump(JEQ, clone3, "enosys"), jump(JEQ, clone, "clone")]
    prog += [jump(JEQ, nrs[col], "eperm") for nrs in SECCOMP_DENY.values() if nrs[col] is not None]
    prog += [stmt(RET, SECCOMP_ALLOW),
             # clone's flags are args[0] on both machines: seccomp_data.args at offset 16, low 32 bits first
             "clone", stmt(LD, 16), jump(JSET, SECCOMP_CLONE_NS, "eperm"), stmt(RET, SECCOMP_ALLOW),
             "eperm", stmt(RET, SECCOMP_ERRNO | errno.EPERM),
             "enosys", stmt(RET, SECCOMP_ERRNO | errno.ENOSYS)]
    labels, code = {}, []
    for item in prog:
        if isinstance(item, str):
            labels[item] = len(code)
        else:
            code.append(item)
    rel = lambda t, i: labels[t] - i - 1 if isinstance(t, str) else t
    return b"".join(struct.pack("=HBBI", c, rel(jt, i), rel(jf, i), k) for i, (c, jt, jf, k) in enumerate(code))


def confine(read=(), write=(), uid=None):
    """Confine the calling process for good (the module's docstring says how). `read`, `write`: paths (one
    that does not exist is skipped); `uid`: who to become when we are root. Returns what was applied:
    {"landlock_abi", "net", "scoped", "seccomp", "uid", "dac_read_search"}. Raises OSError naming the step."""
    machine = os.uname().machine
    if machine not in SECCOMP_MACHINES:
        raise OSError(errno.ENOSYS, f"confine: no seccomp syscall table for {machine}")
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "confine: Landlock is unavailable (kernel < 5.13, or disabled)")
    try:  # Landlock and seccomp (by prctl) confine the calling thread only: another would stay free
        threads = len(os.listdir("/proc/self/task"))
    except OSError:
        threads = 1
    if threads > 1:
        raise OSError(errno.EBUSY, f"confine: the process has {threads} threads, it must have one")
    read, write = [os.fspath(p) for p in read], [os.fspath(p) for p in write]
    ctypes, libc = _confine_libc()
    kept = False
    if uid is not None and os.geteuid() == 0:
        kept = _confine_drop_uid(uid, read, write, ctypes, libc)
    if libc.prctl(38, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        _confine_fail("no_new_privs", ctypes.get_errno())  # PR_SET_NO_NEW_PRIVS
    _confine_landlock(abi, read, write, ctypes, libc)
    program = _seccomp_program(machine)

    class SockFprog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_char_p))
    fprog = SockFprog(len(program) // 8, program)
    if libc.prctl(22, ctypes.c_ulong(2), ctypes.byref(fprog), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        _confine_fail("seccomp", ctypes.get_errno())  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    return {"landlock_abi": abi, "net": abi >= 4, "scoped": abi >= 6, "seccomp": True, "uid": os.getuid(),
            "dac_read_search": kept}


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
    itself (as uid 65534 when root) and must fail to list this file's folder, import a module, start an
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
              f"uid=65534 if os.geteuid() == 0 else None)\n"
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
