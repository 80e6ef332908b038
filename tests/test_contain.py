"""sandbox/contain.py (docs/code-task.md: no answers in reach): a command started through
contained_popen sees none of the repository, the data, /work or /root; can run the standard library;
has no network but loopback; is pid 1 of its own pid namespace; reads a `readable` path and cannot
write it; ends with the shim that started it. Where namespaces are unavailable the fallback runs it
plainly and says so, once per process.

Run: python -m pytest tests/test_contain.py -q
"""
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import REPO
from sandbox import contain

AVAILABLE, WHY = contain.isolation_available()
needs_namespaces = pytest.mark.skipif(not AVAILABLE, reason=f"no containment here: {WHY}")


def run(src, *, timeout=30, **kwargs):
    """(exit status, stdout, stderr) of `python -I -c src`, contained."""
    proc = contain.contained_popen([contain.PYTHON, "-I", "-c", src], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, **kwargs)
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out.decode(), err.decode()


PROBE = r"""
import os, sys
for path in sys.argv[1:]:
    try:
        os.listdir(path) if os.path.isdir(path) else open(path).read(1)
        print("OPENED", path)
    except OSError as e:
        print("DENIED", path, type(e).__name__)
"""


@needs_namespaces
def test_no_answers_in_reach():
    secrets = ["/work", "/work/main", "/work/main/README.md", "/work/shared", "/work/shared/data",
               "/work/shared/data/README.md", str(REPO), str(REPO / "README.md"), str(REPO / "rewards.py"),
               os.path.realpath(REPO), "/root", "/root/.bashrc", "/proc/1/root/work", "/sys"]
    src = PROBE.replace("sys.argv[1:]", repr(secrets))
    status, out, err = run(src)
    assert status == 0, err
    assert "OPENED" not in out, out
    assert out.count("DENIED") == len(secrets)


@needs_namespaces
def test_the_standard_library_runs():
    status, out, err = run("import json, collections, re, decimal, fractions, itertools, math, heapq, bisect, "
                           "functools, hashlib, random, string, datetime, socket, struct\n"
                           "print(json.dumps({'ok': math.comb(5, 2)}))")
    assert (status, out.strip()) == (0, '{"ok": 10}'), err


@needs_namespaces
def test_no_network_but_loopback_and_pid_1():
    status, out, err = run("import os, socket\nprint(os.getpid(), sorted(n for _, n in socket.if_nameindex()))\n"
                           "s = socket.socket()\ntry:\n    s.connect(('1.1.1.1', 53))\n    print('CONNECTED')\n"
                           "except OSError as e:\n    print(type(e).__name__)")
    assert status == 0, err
    pid, names = out.split("\n")[0].split(" ", 1)
    assert pid == "1" and set(eval(names)) <= {"lo"}
    assert "CONNECTED" not in out


@needs_namespaces
def test_readable_is_read_only(tmp_path):
    folder = tmp_path / "server"
    folder.mkdir()
    (folder / "server.py").write_text("ANSWER = 42\n")
    src = ("import sys\nsys.path.insert(0, %r)\nimport server\nprint(server.ANSWER)\n"
           "for attempt in (lambda: open(%r, 'a'), lambda: open(%r, 'w')):\n"
           "    try:\n        attempt()\n        print('WROTE')\n"
           "    except OSError as e:\n        print(type(e).__name__)\n"
           ) % (str(folder), str(folder / "server.py"), str(folder / "new.py"))
    status, out, err = run(src, readable=[folder])
    assert status == 0, err
    assert out.split("\n")[0] == "42" and "WROTE" not in out
    assert (folder / "server.py").read_text() == "ANSWER = 42\n" and not (folder / "new.py").exists()
    status, out, err = run(PROBE.replace("sys.argv[1:]", repr([str(folder / "server.py")])))  # not readable
    assert "DENIED" in out


@needs_namespaces
def test_tmp_is_private_and_writable_and_fds_pass():
    r, w = os.pipe()
    try:
        src = ("import os\nopen('x', 'w').write('y')\nprint(os.getcwd(), sorted(os.listdir('/tmp')))\n"
               "os.write(%d, b'through')" % w)
        status, out, err = run(src, pass_fds=(w,))
        os.close(w)
        w = -1
        assert status == 0, err
        cwd, listing = out.strip().split(" ", 1)
        # besides the file: only the directories on the way to a bind that lies under /tmp (a checkout in a
        # mktemp dir whose .venv is bound at its real path), as contain makes them
        binds = [os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)]
        on_the_way = {p.split("/")[2] for p in binds if p.startswith("/tmp/")}
        names = set(ast.literal_eval(listing))
        assert cwd == "/tmp" and "x" in names and names - {"x"} <= on_the_way, out
        assert os.read(r, 100) == b"through"
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


@needs_namespaces
def test_killing_the_shim_ends_the_namespace():
    proc = contain.contained_popen([contain.PYTHON, "-I", "-c", "import os, time\nos.fork()\nprint('up', flush=True)\n"
                                    "time.sleep(60)"], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout.readline() == b"up\n"
    t0 = time.monotonic()
    proc.kill()  # the shim only: its pid-1 child dies by the parent-death signal, and with it the fork
    assert proc.stdout.read() in (b"", b"up\n")  # EOF: nobody holds the pipe any more
    proc.wait()
    assert time.monotonic() - t0 < 5


@pytest.mark.skipif(not (os.geteuid() == 0 and shutil.which("setpriv") and os.path.exists("/usr/bin/python3")),
                    reason="needs root (to become nobody), setpriv and /usr/bin/python3")
def test_as_a_user_namespace_without_root():
    """As nobody, with the system interpreter (root's pyenv is not readable to nobody): 'userns' mode. A
    checkout that nobody cannot read (in a mktemp dir, mode 0700) cannot be tested so: skipped."""
    readable = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/usr/bin/python3",
                               "-I", "-c", "import os, sys; os.listdir(sys.argv[1] + '/sandbox')", str(REPO)],
                              capture_output=True, timeout=60, cwd="/").returncode == 0
    if not readable:
        pytest.skip(f"nobody (uid 65534) cannot read the checkout {REPO}")
    src = ("import sys, subprocess\nsys.path.insert(0, %r)\nfrom sandbox import contain\n"
           "print(contain.mode())\np = contain.contained_popen([contain.PYTHON, '-I', '-c', %r], "
           "stdout=subprocess.PIPE)\nprint(p.communicate()[0].decode().strip())"
           ) % (str(REPO), PROBE.replace("sys.argv[1:]", repr(["/work/main", "/work/shared/data", str(REPO)]))
                + "print(os.getpid())")
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/usr/bin/python3",
                          "-I", "-c", src], capture_output=True, text=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0] in ("userns", "plain"), out.stdout
    if lines[0] == "userns":
        assert "OPENED" not in out.stdout and out.stdout.count("DENIED") == 3 and lines[4] == "1", out.stdout


def test_the_fallback_says_so_once(monkeypatch, capfd):
    monkeypatch.setattr(contain, "_warned", False)
    for _ in range(2):
        proc = contain.contained_popen([sys.executable, "-I", "-c", "import os; print(os.getpid() > 1)"],
                                       force="plain", stdout=subprocess.PIPE)
        assert proc.communicate()[0] == b"True\n" and proc.contain_mode == "plain"
    monkeypatch.setenv("NANO_D1_SANDBOX", "plain")
    assert contain.mode() == "plain" and contain.plain_chosen()  # chosen explicitly: the only way to plain
    before = set(os.listdir(tempfile.gettempdir()))
    proc = contain.contained_popen([sys.executable, "-I", "-c", "open('x', 'w').write('y')"])
    assert proc.wait() == 0 and proc.contain_mode == "plain"
    assert capfd.readouterr().err.count("REWARD NOT ISOLATED") == 1
    del proc  # its fresh working directory goes with it
    assert not [d for d in set(os.listdir(tempfile.gettempdir())) - before if d.startswith("nano-d1-plain-")]
