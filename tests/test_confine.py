"""
sandbox/confine.py: a process that confines itself (Landlock from ABI 6, the seccomp allow-list, a fresh
keyring, no_new_privs, and as root a uid drop to SANDBOX_UID) can still compute, import, fork, start an
interpreter and write in its own directory, but cannot read or list the repository or secrets, write
elsewhere, open a socket, start a session or group, make a namespace, ptrace, or signal a process outside
its domain. Each attack runs in a fresh interpreter that prints the errno it observed; where the refusal
could come from elsewhere (file modes, uid), the same attack also runs unconfined, as a control that must
succeed. As root, the scripts run on an interpreter the sandbox uid can read (/usr/bin/python3 when this
one lies under a closed folder such as /root: the sandbox keeps no capability to reach it).

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
from sandbox.confine import LANDLOCK_MIN_ABI, SANDBOX_UID, confine_available, landlock_abi

ABI = landlock_abi()
if ABI < LANDLOCK_MIN_ABI or not os.path.exists("/usr/lib/x86_64-linux-gnu/libseccomp.so.2") and \
        not any(Path(d, "libseccomp.so.2").exists() for d in ("/lib", "/usr/lib", "/usr/lib/aarch64-linux-gnu")):
    pytest.skip(f"no Landlock ABI >= {LANDLOCK_MIN_ABI} here (ABI {ABI}) or no libseccomp", allow_module_level=True)
ROOT = os.geteuid() == 0


def open_to_others(path):
    """Whether a uid that owns nothing here can reach `path`: every folder on the way passable by others."""
    path = Path(os.path.realpath(path))
    return all(os.stat(p).st_mode & 0o001 for p in [*path.parents, path] if p.is_dir())


# the interpreter the scripts run on: as root, one the sandbox uid can read
PY = sys.executable if not ROOT or open_to_others(sys.base_prefix) else "/usr/bin/python3"
if not (os.path.exists(PY) and (not ROOT or open_to_others(os.path.realpath(PY)))):
    pytest.skip("as root, no interpreter the sandbox uid can read", allow_module_level=True)

# attempt(name, fn) prints "name OK" or "name <errno name>"; the body's lines follow CONFINE (or not)
HEAD = """
import errno, os, sys
sys.path.insert(0, {repo!r})
from sandbox.confine import SANDBOX_UID, confine, default_read_paths
WORK = {work!r}
def attempt(name, fn):
    try:
        fn()
        print(name, "OK")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
"""
CONFINE = "INFO = confine(read=default_read_paths(), write=[WORK], uid=SANDBOX_UID if os.geteuid() == 0 else None)\n"
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
    path = tempfile.mkdtemp(prefix="nano-d1-confine-test-")  # under /tmp: reachable by the sandbox uid
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run(body, work, confined=True):
    """{name: "OK" or errno name} from attempt() lines of `body`, run after confine() (or not)."""
    script = HEAD.format(repo=str(REPO), work=work) + (CONFINE if confined else "") + body
    proc = subprocess.run([PY, "-I", "-c", script], capture_output=True, text=True, timeout=30,
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
    # /etc/shadow, /root and /proc/1 are closed to the sandbox uid by their modes too; /etc/hosts is
    # world-readable, only Landlock refuses it
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
            "confine(read=default_read_paths(), write=[WORK, '/dev/null'], uid=SANDBOX_UID if os.geteuid() == 0 else None)\n"
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
    helper = subprocess.Popen(["sleep", "30"], user=SANDBOX_UID if ROOT else None)  # the confined uid's own process
    try:
        same_uid = f"if os.geteuid() == 0:\n    os.setresuid({SANDBOX_UID}, {SANDBOX_UID}, {SANDBOX_UID})\n"
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
def test_root_becomes_the_sandbox_uid_with_no_capability(work):
    body = "print('uid', os.getuid(), os.geteuid(), os.getgid(), INFO['uid'])\n" \
           "attempt('setuid', lambda: os.setuid(0))\nattempt('setgid', lambda: os.setgid(0))\n"
    assert run(body, work) == {"uid": f"{SANDBOX_UID} {SANDBOX_UID} {SANDBOX_UID} {SANDBOX_UID}", "setuid": "EPERM",
                               "setgid": "EPERM"}
    # its capability sets, read from outside while it waits (its own /proc is closed by Landlock)
    script = HEAD.format(repo=str(REPO), work=work) + CONFINE + "print('ready', flush=True)\nsys.stdin.read()\n"
    proc = subprocess.Popen([PY, "-I", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        with open(f"/proc/{proc.pid}/status") as f:
            caps = {k: v.strip() for k, v in (line.split(":") for line in f) if k in ("CapPrm", "CapEff", "CapAmb")}
    finally:
        proc.stdin.close()
        proc.wait()
    assert caps == {"CapPrm": "0" * 16, "CapEff": "0" * 16, "CapAmb": "0" * 16}, caps
    assert os.stat(work).st_uid == SANDBOX_UID  # its working directory was handed over


def test_confine_is_available_here():
    out = subprocess.run([PY, "-I", "-c", f"import sys; sys.path.insert(0, {str(REPO)!r}); "
                          "from sandbox.confine import confine_available; print(confine_available())"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == str((True, f"landlock ABI {ABI}")), out.stdout + out.stderr


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
    tail = (f"\ninfo = confine(read=default_read_paths(), write=[{work!r}], uid=SANDBOX_UID if os.geteuid() == 0 else None)\n"
            f"try:\n    os.listdir({str(REPO)!r})\n    print('listed')\n"
            f"except PermissionError:\n    print('denied')\n"
            f"print(decode(encode({{'abi': info['landlock_abi']}})))\n")
    script = (f"src = open({str(REPO / 'sandbox' / 'wire.py')!r}).read() + open({str(SOURCE)!r}).read() + {tail!r}\n"
              "exec(compile(src, '<server>', 'exec'))\n")
    proc = subprocess.run([PY, "-I", "-S", "-c", script], capture_output=True, text=True, timeout=30,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["denied", f"{{'abi': {ABI}}}"]


def test_refusals_apply_nothing(work):
    # below ABI 6, with a second thread, or without libseccomp: one line, and nothing applied
    body = ("import sandbox.confine as c\n"
            "abi, c.landlock_abi = c.landlock_abi, lambda: 5\n"
            "attempt('abi5', lambda: confine(read=default_read_paths(), write=[WORK], uid=SANDBOX_UID))\n"
            "c.landlock_abi = abi\n"
            "import ctypes\n"
            "cdll, ctypes.CDLL = ctypes.CDLL, lambda name, **kw: (_ for _ in ()).throw(OSError(name)) "
            "if 'seccomp' in (name or '') else cdll(name, **kw)\n"
            "attempt('no_libseccomp', lambda: confine(landlock=False))\n"
            "ctypes.CDLL = cdll\n"
            "import threading\n"
            "stop = threading.Event()\n"
            "t = threading.Thread(target=stop.wait)\n"
            "t.start()\n"
            "attempt('threads', lambda: confine(read=default_read_paths(), write=[WORK], uid=SANDBOX_UID))\n"
            "stop.set()\n"
            "t.join()\n"
            f"attempt('still_free', lambda: os.listdir({str(REPO)!r}))\n"
            "attempt('socket', lambda: __import__('socket').socket().close())\n"
            "print('uid', os.geteuid())\n")
    assert run(body, work, confined=False) == {"abi5": "ENOSYS", "no_libseccomp": "ENOSYS", "threads": "EBUSY",
                                               "still_free": "OK", "socket": "OK", "uid": str(os.geteuid())}


@pytest.mark.skipif(not ROOT or open_to_others(sys.base_prefix), reason="needs root and an interpreter under a "
                    "folder closed to other users (here /root)")
def test_an_interpreter_the_sandbox_uid_cannot_read_is_refused_not_reached_by_a_capability(work):
    script = HEAD.format(repo=str(REPO), work=work) + (
        "attempt('confine', lambda: confine(read=default_read_paths(), write=[WORK], uid=SANDBOX_UID))\n")
    proc = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout == "confine EACCES\n", proc.stdout + proc.stderr
    ok, why = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(REPO)!r}); "
                              "from sandbox.confine import confine_available, default_read_paths; "
                              "print(confine_available(read=default_read_paths()))"],
                             capture_output=True, text=True, timeout=60).stdout.strip()[1:-1].split(", ", 1)
    assert ok == "False" and "keeps no capability" in why and "\\n" not in why, why


# the allow-list, with Landlock (landlock mode) and without (what the namespace modes add to their own walls)
ALLOW_LIST = LIBC + """
import socket, subprocess, threading, shutil
NR = {'x86_64': dict(shmget=29, semget=64, msgget=68, mq_open=240, keyctl=250, add_key=248, io_uring_setup=425,
                     clone=56, unshare=272, setxattr=188),
      'aarch64': dict(shmget=194, semget=190, msgget=186, mq_open=180, keyctl=219, add_key=217, io_uring_setup=425,
                      clone=220, unshare=97, setxattr=5)}[os.uname().machine]
sc = lambda name, *a: check(libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(x) if type(x) is int else x for x in a]))
attempt('shmget', lambda: sc('shmget', 0, 4096, 0o1000 | 0o600))   # IPC_PRIVATE, IPC_CREAT
attempt('semget', lambda: sc('semget', 0, 1, 0o1000 | 0o600))
attempt('msgget', lambda: sc('msgget', 0, 0o1000 | 0o600))
attempt('mq_open', lambda: sc('mq_open', b'/nano-d1', 0o100 | 2, 0o600, None))
attempt('keyctl', lambda: sc('keyctl', 0, -3, 0))                     # KEYCTL_GET_KEYRING_ID of the session
attempt('add_key', lambda: sc('add_key', b'user', b'planted', b'x', 1, -3))
attempt('io_uring', lambda: sc('io_uring_setup', 1, ctypes.create_string_buffer(120)))
attempt('clone_parent', lambda: sc('clone', 0x8000 | 17, 0, 0, 0, 0))  # CLONE_PARENT | SIGCHLD
attempt('unshare_user', lambda: sc('unshare', 0x10000000))
attempt('chmod', lambda: os.chmod(WORK, 0o777))
attempt('xattr', lambda: os.setxattr(WORK, 'user.x', b'1'))
attempt('socket', lambda: socket.socket().close())
def honest():
    a, b = socket.socketpair()
    t = threading.Thread(target=lambda: a.sendall(b'ok'))
    t.start()
    t.join()
    assert b.recv(2) == b'ok'
    with open(WORK + '/a', 'w') as f:
        f.write('x')
    shutil.copyfile(WORK + '/a', WORK + '/b')
    out = subprocess.run([sys.executable, '-I', '-S', '-c', 'print(6 * 7)'], capture_output=True, text=True)
    assert out.stdout == '42\\n', out
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
attempt('honest', honest)
"""


@pytest.mark.parametrize("landlock", [True, False], ids=["landlock", "allow-list alone"])
def test_the_allow_list_refuses_ipc_keyrings_io_uring_clone_parent_chmod_xattr(work, landlock):
    confine_line = (CONFINE if landlock else "INFO = confine(landlock=False)\n")
    body = ALLOW_LIST
    script = HEAD.format(repo=str(REPO), work=work) + confine_line + body
    proc = subprocess.run([PY, "-I", "-c", script], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    out = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert out == {"shmget": "EPERM", "semget": "EPERM", "msgget": "EPERM", "mq_open": "EPERM", "keyctl": "EPERM",
                   "add_key": "EPERM", "io_uring": "EPERM", "clone_parent": "EPERM", "unshare_user": "EPERM",
                   "chmod": "EPERM", "xattr": "ENOTSUP", "socket": "EPERM", "honest": "OK"}, out
    # the control, unconfined, of the calls that leave nothing behind on the host
    keep = [line for line in body.splitlines() if not line.startswith("attempt(") or
            line.split("'")[1] in ("keyctl", "chmod", "socket", "honest")]
    control = subprocess.run([PY, "-I", "-c", HEAD.format(repo=str(REPO), work=work) + "\n".join(keep)],
                             capture_output=True, text=True, timeout=30)
    ctl = dict(line.split(" ", 1) for line in control.stdout.splitlines())
    assert ctl == {"keyctl": "OK", "chmod": "OK", "socket": "OK", "honest": "OK"}, (ctl, control.stderr)


def test_another_abi_is_killed(work):
    # x86_64's x32 numbers (nr | 1 << 30) and i386's int 0x80 arrive as other ABIs: the process dies (SIGSYS)
    if os.uname().machine != "x86_64":
        pytest.skip("x32 is x86_64's")
    script = HEAD.format(repo=str(REPO), work=work) + "INFO = confine(landlock=False)\n" + LIBC + \
        "libc.syscall(ctypes.c_long(0x40000000 | 39))\nprint('alive')\n"  # x32 getpid
    proc = subprocess.run([PY, "-I", "-c", script], capture_output=True, text=True, timeout=30)
    assert proc.returncode == -31 and proc.stdout == "", (proc.returncode, proc.stdout)  # SIGSYS
