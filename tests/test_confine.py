"""sandbox/confine.py: a process that confines itself (Landlock, seccomp, no_new_privs, and as root a uid
drop to 65534) can still compute, import, fork, start an interpreter and write in its own directory, but
cannot read or list the repository or secrets, write elsewhere, open a socket, start a session or group,
make a namespace, ptrace, or signal a process outside its domain. Each attack runs in a fresh interpreter
that prints the errno it observed; where the refusal could come from elsewhere (file modes, uid), the
same attack also runs unconfined, as a control that must succeed.

Run: python -m pytest tests/test_confine.py -q
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "sandbox" / "confine.py"
sys.path.insert(0, str(REPO))
from sandbox.confine import SECCOMP_MACHINES, _seccomp_program, confine_available, landlock_abi

ABI = landlock_abi()
if ABI == 0 or os.uname().machine not in SECCOMP_MACHINES:
    pytest.skip(f"no Landlock here (ABI {ABI}) or no syscall table for {os.uname().machine}", allow_module_level=True)
ROOT = os.geteuid() == 0

# attempt(name, fn) prints "name OK" or "name <errno name>"; the body's lines follow CONFINE (or not)
HEAD = """
import errno, os, sys
sys.path.insert(0, {repo!r})
from sandbox.confine import confine, default_read_paths
WORK = {work!r}
def attempt(name, fn):
    try:
        fn()
        print(name, "OK")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
"""
CONFINE = "INFO = confine(read=default_read_paths(), write=[WORK], uid=65534 if os.geteuid() == 0 else None)\n"
# ctypes helpers for the syscalls Python has no function for
LIBC = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def check(r):
    if r == -1:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return r
"""


@pytest.fixture
def work():
    path = tempfile.mkdtemp(prefix="nano-d1-confine-test-")  # under /tmp: reachable by uid 65534
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run(body, work, confined=True):
    """{name: "OK" or errno name} from attempt() lines of `body`, run after confine() (or not)."""
    script = HEAD.format(repo=str(REPO), work=work) + (CONFINE if confined else "") + body
    proc = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=30,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines())


def test_reading_a_repository_file_is_denied(work):
    body = f"attempt('repo', lambda: open({str(REPO / 'rewards.py')!r}).read(1))\n" \
           "attempt('stdlib', lambda: open(os.__file__).read(1))\n"
    assert run(body, work) == {"repo": "EACCES", "stdlib": "OK"}
    assert run(body, work, confined=False) == {"repo": "OK", "stdlib": "OK"}


def test_listing_the_repository_is_denied(work):
    body = f"attempt('repo', lambda: os.listdir({str(REPO)!r}))\n" \
           "attempt('stdlib', lambda: os.listdir(os.path.dirname(os.__file__)))\n"
    assert run(body, work) == {"repo": "EACCES", "stdlib": "OK"}
    assert run(body, work, confined=False) == {"repo": "OK", "stdlib": "OK"}


def test_secrets_are_denied(work):
    # /etc/shadow, /root and /proc/1 are closed to uid 65534 by their modes too; /etc/hosts is world-readable,
    # only Landlock refuses it (and here the uid keeps CAP_DAC_READ_SEARCH: the interpreter lies under /root)
    body = "attempt('shadow', lambda: open('/etc/shadow').read(1))\n" \
           "attempt('root', lambda: os.listdir('/root'))\n" \
           "attempt('hosts', lambda: open('/etc/hosts').read(1))\n" \
           "attempt('proc', lambda: open('/proc/1/environ').read(1))\n"
    out = run(body, work)
    assert out["shadow"] in ("EACCES", "ENOENT") and out["root"] in ("EACCES", "ENOENT"), out
    assert out["hosts"] == "EACCES" and out["proc"] == "EACCES", out


def test_writing_outside_is_denied(work):
    escapes = [os.path.join(tempfile.gettempdir(), f"nano-d1-confine-escape-{os.getpid()}"),
               str(REPO / f"nano-d1-confine-escape-{os.getpid()}")]
    body = "".join(f"attempt('w{i}', lambda: open({p!r}, 'w').write('x'))\n" for i, p in enumerate(escapes))
    try:
        assert run(body, work) == {"w0": "EACCES", "w1": "EACCES"}
        assert not any(os.path.exists(p) for p in escapes)
        assert run(body, work, confined=False)["w0"] == "OK"  # the control: /tmp is writable without Landlock
    finally:
        for p in escapes:
            if os.path.exists(p):
                os.unlink(p)


def test_writing_inside_works(work):
    body = ("def write():\n"
            "    os.mkdir(WORK + '/d')\n"
            "    with open(WORK + '/d/a.txt', 'w') as f:\n"
            "        f.write('hello')\n"
            "    os.rename(WORK + '/d/a.txt', WORK + '/b.txt')\n"
            "    os.symlink('b.txt', WORK + '/c')\n"
            "    os.truncate(WORK + '/b.txt', 4)\n"
            "    os.rmdir(WORK + '/d')\n"
            "attempt('write', write)\n"
            "print('read', open(WORK + '/c').read())\n")
    assert run(body, work) == {"write": "OK", "read": "hell"}
    with open(os.path.join(work, "b.txt")) as f:
        assert f.read() == "hell"


def test_dev_null_can_be_writable_and_keeps_its_owner(work):
    # read-only under default_read_paths() (subprocess.DEVNULL opens it O_RDWR); in `write` it is writable,
    # and the uid drop never chowns a device
    body = ("attempt('before', lambda: open('/dev/null', 'w').write('x'))\n"
            "confine(read=default_read_paths(), write=[WORK, '/dev/null'], uid=65534 if os.geteuid() == 0 else None)\n"
            "attempt('after', lambda: open('/dev/null', 'w').write('x'))\n")
    owner = os.stat("/dev/null").st_uid
    assert run(body, work, confined=False) == {"before": "OK", "after": "OK"}
    assert os.stat("/dev/null").st_uid == owner
    assert run("attempt('w', lambda: open('/dev/null', 'w').write('x'))\n", work) == {"w": "EACCES"}


def test_sockets_are_denied_socketpair_works(work):
    body = ("import socket\n"
            "attempt('inet', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))\n"
            "attempt('inet6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))\n"
            "attempt('unix', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))\n"
            "def pair():\n"
            "    a, b = socket.socketpair()\n"
            "    a.sendall(b'ping')\n"
            "    assert b.recv(4) == b'ping'\n"
            "attempt('pair', pair)\n")
    assert run(body, work) == {"inet": "EPERM", "inet6": "EPERM", "unix": "EPERM", "pair": "OK"}
    assert run(body, work, confined=False)["inet"] == "OK"


def test_new_session_or_group_is_denied(work):
    setsid, setpgid = "attempt('setsid', os.setsid)\n", "attempt('setpgid', lambda: os.setpgid(0, 0))\n"
    assert run(setsid + setpgid, work) == {"setsid": "EPERM", "setpgid": "EPERM"}
    # the controls, one each: a session leader may not setpgid, a group leader may not setsid
    assert run(setsid, work, confined=False) == {"setsid": "OK"}
    assert run(setpgid, work, confined=False) == {"setpgid": "OK"}


def test_namespaces_are_denied_fork_and_threads_work(work):
    body = LIBC + (
        "CLONE_NEWUSER, SIGCHLD = 0x10000000, 17\n"
        "CLONE, CLONE3 = {'x86_64': (56, 435), 'aarch64': (220, 435)}[os.uname().machine]\n"
        "def clone():\n"
        "    args = [ctypes.c_long(CLONE), ctypes.c_long(CLONE_NEWUSER | SIGCHLD)] + [ctypes.c_long(0)] * 4\n"
        "    pid = check(libc.syscall(*args))\n"
        "    if pid == 0:\n"
        "        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
        "attempt('clone', clone)\n"  # first: unshare moves the unconfined control into an unmapped user namespace
        "attempt('unshare', lambda: check(libc.unshare(CLONE_NEWUSER)))\n"
        "attempt('clone3', lambda: check(libc.syscall(ctypes.c_long(CLONE3), None, ctypes.c_long(0))))\n"
        "def fork():\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os._exit(0)\n"
        "    assert os.waitpid(pid, 0)[1] == 0\n"
        "attempt('fork', fork)\n"
        "import threading\n"
        "t = threading.Thread(target=lambda: None)\n"
        "attempt('thread', lambda: (t.start(), t.join()))\n")
    assert run(body, work) == {"clone": "EPERM", "unshare": "EPERM", "clone3": "ENOSYS", "fork": "OK",
                               "thread": "OK"}
    control = run(body, work, confined=False)
    assert control["unshare"] == "OK" and control["clone"] == "OK" and control["clone3"] != "ENOSYS", control


def test_ptrace_is_denied(work):
    # the target is a child of the same uid (and Landlock domain) that made itself dumpable again (a uid
    # change leaves a process undumpable, which alone refuses ptrace): without the filter, attaching works
    body = LIBC + (
        "import signal, time\n"
        "r, w = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    libc.prctl(4, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))\n"
        "    os.write(w, b'x')\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "os.read(r, 1)\n"
        "attempt('attach', lambda: check(libc.ptrace(ctypes.c_long(16), ctypes.c_long(pid), None, None)))\n"
        "os.kill(pid, signal.SIGKILL)\n"
        "os.waitpid(pid, 0)\n")
    assert run(body, work) == {"attach": "EPERM"}
    assert run(body, work, confined=False) == {"attach": "OK"}


@pytest.mark.skipif(ABI < 6, reason=f"Landlock ABI {ABI} < 6: no signal scoping")
def test_signals_outside_the_domain_are_denied(work):
    helper = subprocess.Popen(["sleep", "30"], user=65534 if ROOT else None)  # the confined uid's own process
    try:
        same_uid = "if os.geteuid() == 0:\n    os.setresuid(65534, 65534, 65534)\n"
        probe = f"attempt('probe', lambda: os.kill({helper.pid}, 0))\n"
        assert run(same_uid + probe, work, confined=False) == {"probe": "OK"}  # the control
        body = probe + f"attempt('term', lambda: os.kill({helper.pid}, 15))\n" \
                       "pid = os.fork()\n" \
                       "if pid == 0:\n" \
                       "    import time; time.sleep(30)\n" \
                       "attempt('own_child', lambda: os.kill(pid, 9))\n" \
                       "os.waitpid(pid, 0)\n"
        assert run(body, work) == {"probe": "EPERM", "term": "EPERM", "own_child": "OK"}
        assert helper.poll() is None
    finally:
        helper.kill()
        helper.wait()


@pytest.mark.skipif(not ROOT, reason="the uid drop happens as root only")
def test_root_becomes_nobody(work):
    body = "print('uid', os.getuid(), os.geteuid(), os.getgid(), INFO['uid'])\n" \
           "attempt('setuid', lambda: os.setuid(0))\nattempt('setgid', lambda: os.setgid(0))\n"
    assert run(body, work) == {"uid": "65534 65534 65534 65534", "setuid": "EPERM", "setgid": "EPERM"}
    assert os.stat(work).st_uid == 65534  # its working directory was handed over


def test_confine_is_available_here():
    assert confine_available() == (True, f"landlock ABI {ABI}")


def test_an_honest_program_runs(work):
    body = ("import json, math, collections, re, subprocess\n"
            "words = re.findall(r'[a-z]+', 'the cat and the hat and the bat')\n"
            "top = collections.Counter(words).most_common(2)\n"
            "with open(os.path.join(WORK, 'out.json'), 'w') as f:\n"
            "    json.dump({'top': top, 'c': math.comb(10, 3)}, f)\n"
            "print('result', json.load(open(os.path.join(WORK, 'out.json'))))\n"
            "code = 'import fractions; print(fractions.Fraction(1, 3) * 3)'\n"
            "child = subprocess.run([sys.executable, '-I', '-c', code], stdout=subprocess.PIPE, text=True)\n"
            "print('child', child.returncode, child.stdout.strip())\n")
    assert run(body, work) == {"result": "{'top': [['the', 3], ['and', 2]], 'c': 120}", "child": "0 1"}


def test_the_source_works_concatenated(work):
    # the program server's build: compile(wire_src + confine_src + server_src), run with -I -S
    tail = (f"\ninfo = confine(read=default_read_paths(), write=[{work!r}], uid=65534 if os.geteuid() == 0 else None)\n"
            f"try:\n    os.listdir({str(REPO)!r})\n    print('listed')\n"
            f"except PermissionError:\n    print('denied')\n"
            f"print(decode(encode({{'abi': info['landlock_abi']}})))\n")
    script = (f"src = open({str(REPO / 'sandbox' / 'wire.py')!r}).read() + open({str(SOURCE)!r}).read() + {tail!r}\n"
              "exec(compile(src, '<server>', 'exec'))\n")
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, timeout=30,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["denied", f"{{'abi': {ABI}}}"]


def test_refusals_apply_nothing(work):
    body = ("class Machine:\n    machine = 'riscv64'\n"
            "uname, os.uname = os.uname, lambda: Machine\n"
            "attempt('machine', lambda: confine(read=default_read_paths(), write=[WORK], uid=65534))\n"
            "os.uname = uname\n"
            "import threading\n"
            "stop = threading.Event()\n"
            "t = threading.Thread(target=stop.wait)\n"
            "t.start()\n"
            "attempt('threads', lambda: confine(read=default_read_paths(), write=[WORK], uid=65534))\n"
            "stop.set()\n"
            "t.join()\n"
            f"attempt('still_free', lambda: os.listdir({str(REPO)!r}))\n"
            "print('uid', os.geteuid())\n")
    assert run(body, work, confined=False) == {"machine": "ENOSYS", "threads": "EBUSY", "still_free": "OK",
                                               "uid": str(os.geteuid())}


def run_filter(program, arch, nr, arg0=0):
    """What the classic BPF `program` returns for seccomp_data {nr, arch, ip 0, args[0] = arg0}: a small
    interpreter of the instructions a filter needs (ld word, jeq, jge, jset, ret)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    code = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        pc += 1
        if op == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif op in (0x15, 0x35, 0x45):
            pc += jt if {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[op] else jf
        else:
            assert op == 0x06, hex(op)
            return k


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_of_each_machine(machine):
    # numbers typed from syscall_64.tbl and asm-generic/unistd.h: read, socket, socketpair, setsid, clone, clone3
    arch, nrs = {"x86_64": (0xC000003E, (0, 41, 53, 112, 56, 435)),
                 "aarch64": (0xC00000B7, (63, 198, 199, 157, 220, 435))}[machine]
    read, socket, socketpair, setsid, clone, clone3 = nrs
    prog = _seccomp_program(machine)
    allow, eperm, enosys, kill = 0x7FFF0000, 0x50001, 0x50026, 0x80000000
    assert run_filter(prog, arch, read) == allow and run_filter(prog, arch, socketpair) == allow
    assert run_filter(prog, arch, socket) == eperm and run_filter(prog, arch, setsid) == eperm
    assert run_filter(prog, 0x40000003, read) == kill  # AUDIT_ARCH_I386
    assert run_filter(prog, arch, clone3) == enosys
    thread_flags = 0x3D0F00  # CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
    assert run_filter(prog, arch, clone, 17) == allow and run_filter(prog, arch, clone, thread_flags) == allow
    for flag in (0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000):  # CLONE_NEW*
        assert run_filter(prog, arch, clone, flag | 17) == eperm
    if machine == "x86_64":  # x32 numbers
        assert run_filter(prog, arch, 0x40000000 | socket) == enosys
