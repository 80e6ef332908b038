"""
The kernel state no namespace separates, and the rest of the third adversary set (docs/code-task.md, "What
each mode guarantees"): a program trying each class runs through sandbox.run.run_tests in both modes,
"isolated" (namespaces, as root) and "landlock" (self-confined, as root: the uid drop; on /usr/bin/python3,
which the sandbox uid can read, since the sandbox keeps no capability to reach an interpreter under /root).
Each attack runs in a harness process that first takes a session keyring of its own, plants a key there
(the trainer's keys) and a SysV segment and a host file beside it; the program reports what it got.

Run: python -m pytest tests/test_sandbox_kernel.py -q
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, SHARED_DATA
from sandbox import confine, contain, workdir

ROOT = os.geteuid() == 0
HOST_FILE = f"/tmp/nano-d1-host-file-{os.getpid()}"
SHM_KEY = 0x4E44 + os.getpid() % 1000
# interpreter per mode: the sandbox children run on the harness's own interpreter
PYTHONS = {"isolated": sys.executable, "landlock": "/usr/bin/python3"}

HARNESS = r"""
import ctypes, json, os, sys
sys.path.insert(0, sys.argv[1])
from sandbox import run as sb
sb._mode = sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.syscall(250, 1, None)  # keyctl(KEYCTL_JOIN_SESSION_KEYRING): this harness's own, as the trainer's
key = libc.syscall(248, b"user", b"nano-d1-secret", b"the answer is 42", 16, -3)  # add_key to the session
assert key > 0, ctypes.get_errno()
shm = libc.shmget(int(sys.argv[4]), 4096, 0o1000 | 0o666)  # a host segment, as another job could leave
out = {}
try:
    for name, program in json.loads(sys.argv[3]).items():
        o = {}
        sb.run_tests(program, ["raise RuntimeError(GOT)"], outcome=o)
        out[name] = o["why"][0].replace("RuntimeError: ", "")
    deep = "import os\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\nGOT = 'deep'"
    out["batch"] = sb.run_batch([(deep, ["assert True"]), ("x = 1", ["assert x == 1"])])
finally:
    libc.shmctl(shm, 0, None)  # IPC_RMID
print("RESULT", json.dumps(out))
"""

E = "import ctypes, errno, os\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n" \
    "def err(r):\n    return 'OK' if r >= 0 else errno.errorcode[ctypes.get_errno()]\n"
ATTACKS = {
    # the trainer's key: searched for by name, read through the session keyring, and seen in /proc/keys
    "keyring": E + "found = err(libc.syscall(250, 10, -3, b'user', b'nano-d1-secret', 0))\n"  # KEYCTL_SEARCH
                   "planted = err(libc.syscall(248, b'user', b'planted', b'x', 1, -3))\n"
                   "try:\n    seen = 'nano-d1-secret' in open('/proc/keys').read()\n"
                   "except OSError as e:\n    seen = errno.errorcode[e.errno]\n"
                   "GOT = f'{found} {planted} {seen}'",
    "sysv": E + f"GOT = err(libc.shmget({SHM_KEY}, 0, 0)) + ' ' + err(libc.shmget(0, 4096, 0o1000 | 0o600))",
    "posix_mq": E + "GOT = err(libc.syscall(240, b'/nano-d1', 0o100 | 2, 0o600, None))",
    "host_file": E + f"p = {HOST_FILE!r}\n"
                     "def do(f):\n    try:\n        f()\n        return 'OK'\n"
                     "    except OSError as e:\n        return errno.errorcode[e.errno]\n"
                     "GOT = ' '.join(do(f) for f in (lambda: os.chmod(p, 0o666), lambda: os.setxattr(p, 'user.x', b'1'),"
                     " lambda: os.stat(p)))",
    # a channel between two programs through /dev/shm (POSIX shared memory's files): the first writes
    "shm_write": "import errno\ntry:\n    open('/dev/shm/nano-d1-channel', 'w').write('42')\n    GOT = 'OK'\n"
                 "except OSError as e:\n    GOT = errno.errorcode[e.errno]",
    "shm_read": "import errno\ntry:\n    GOT = open('/dev/shm/nano-d1-channel').read()\n"
                "except OSError as e:\n    GOT = errno.errorcode[e.errno]",
    "clone_parent": E + "GOT = err(libc.syscall(56, 0x8000 | 17, 0, 0, 0, 0))",
    "userns_io_uring": E + "GOT = err(libc.syscall(272, 0x10000000)) + ' ' + "
                           "err(libc.syscall(425, 1, ctypes.create_string_buffer(120)))",
    "flood": "import errno, os\nn = 0\ntry:\n    for i in range(64):\n        with open(f'f{i}', 'wb') as f:\n"
             "            for _ in range(4):\n                f.write(b'x' * (1 << 20))\n                n += 1\n"
             "    GOT = f'OK {n}'\nexcept OSError as e:\n    GOT = f'{errno.errorcode[e.errno]} {n}'",
}


def harness(mode):
    py = PYTHONS[mode]
    if not (ROOT and os.path.exists(py)):
        pytest.skip("needs root (the uid drop) and /usr/bin/python3")
    if mode == "landlock" and confine.landlock_abi() < confine.LANDLOCK_MIN_ABI:
        pytest.skip("Landlock ABI < 6: landlock mode is refused here")
    if mode == "landlock" and not confine.open_to_others(str(REPO / "sandbox")):
        pytest.skip("the sandbox uid cannot read this checkout: landlock mode refuses it (tests/test_reward_holes.py)")
    if mode == "isolated" and not contain.isolation_available()[0]:
        pytest.skip("no namespaces here")
    with open(HOST_FILE, "w") as f:
        f.write("the host's")
    os.chmod(HOST_FILE, 0o644)
    try:
        proc = subprocess.run([py, "-I", "-c", HARNESS, str(REPO), mode, json.dumps(ATTACKS), str(SHM_KEY)],
                              capture_output=True, text=True, timeout=300, cwd="/")
        assert os.stat(HOST_FILE).st_mode & 0o777 == 0o644 and not os.listxattr(HOST_FILE)
    finally:
        os.unlink(HOST_FILE)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    return json.loads(lines[0][7:])


@pytest.mark.parametrize("mode", ["isolated", "landlock"])
def test_kernel_state_is_out_of_reach(mode):
    out = harness(mode)
    assert out["keyring"] == ("EPERM EPERM False" if mode == "isolated" else "EPERM EPERM EACCES"), out
    assert out["sysv"] == "EPERM EPERM" and out["posix_mq"] == "EPERM", out
    # isolated: each sandbox's /dev/shm is a tmpfs of its own; landlock: outside Landlock's rules
    assert (out["shm_write"], out["shm_read"]) == ("OK" if mode == "isolated" else "EACCES", "ENOENT"), out
    assert out["clone_parent"] == "EPERM" and out["userns_io_uring"] == "EPERM EPERM", out
    # the host file: not in the root at all, or refused; stat is what Landlock does not gate (documented)
    assert out["host_file"] == ("EPERM ENOTSUP ENOENT" if mode == "isolated" else "EPERM ENOTSUP OK"), out
    # a 3000-deep tree (in landlock mode: in the host working directory) neither raises into the trainer
    # (shutil.rmtree's RecursionError did) nor costs the batch its reward
    assert out["batch"] == [[True], [True]], out
    # 256 MiB in 64 files of 4 MiB (each under RLIMIT_FSIZE): the private /tmp is a 64 MiB tmpfs; in landlock
    # mode the working directory is the host's, and watch_workdir ends the program once it holds 64 MiB
    if mode == "isolated":
        got, n = out["flood"].split()
        assert got == "ENOSPC" and int(n) <= workdir.MAX_MB, out
    else:
        assert out["flood"].startswith("program: RemoteError: no reply"), out


@pytest.mark.skipif(not (SHARED_DATA / "humaneval").exists(), reason="needs ../shared/data")
def test_reference_solutions_pass_in_landlock_mode_too():
    # the same programs eval.py --canonical scores (isolated: tests/test_code_eval.py), run in landlock mode
    import eval as ev
    import tasks
    from ops.results import reference_generation
    from taskdata import parsers
    jobs = []

    def capture(batch, **kw):
        for p, t in batch:
            jobs.append([str(p), getattr(p, "untrusted", str(p)), getattr(p, "prefix", ""),
                         getattr(p, "test_source", ""), list(getattr(p, "targets", ())), list(t)])
        return [[True] * len(t) for _, t in batch]
    for task, file in (("humaneval", "humaneval/HumanEval.jsonl.gz"), ("mbpp", "mbpp/sanitized-mbpp.json")):
        items = ev.load_items(task, str(SHARED_DATA / file))
        parsers.score_code_batch([reference_generation(ex) for _, ex in items],
                                 [tasks.TASKS[task].scoring_example(ex) for _, ex in items], run_batch=capture)
    if not (ROOT and os.path.exists("/usr/bin/python3")) or confine.landlock_abi() < confine.LANDLOCK_MIN_ABI \
            or not confine.open_to_others(str(REPO / "sandbox")):
        pytest.skip("needs root, /usr/bin/python3, Landlock ABI >= 6 and a checkout others can read")
    script = ("import json, sys\nsys.path.insert(0, sys.argv[1])\nfrom sandbox import run as sb, code_prep\n"
              "sb._mode = 'landlock'\njobs = json.load(sys.stdin)\n"
              "res = sb.run_batch([(code_prep.SplitProgram(*j[:5]), j[5]) for j in jobs], test_timeout_s=20, "
              "timeout_s=60)\nprint(sum(all(r) for r in res), len(res))\n")
    proc = subprocess.run(["/usr/bin/python3", "-I", "-c", script, str(REPO)], input=json.dumps(jobs),
                          capture_output=True, text=True, timeout=600, cwd="/")
    assert proc.stdout.split() == ["421", "421"], proc.stdout + proc.stderr[-2000:]


def test_remove_tree_follows_no_link_at_any_depth(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "answer").write_text("42")
    work = tmp_path / "work"
    work.mkdir()
    cur = os.open(str(work), os.O_RDONLY)
    for _ in range(3000):  # deeper than PATH_MAX and than shutil.rmtree's recursion: made by dir_fd
        os.mkdir("d", dir_fd=cur)
        nxt = os.open("d", os.O_RDONLY, dir_fd=cur)
        os.close(cur)
        cur = nxt
    os.symlink(str(keep), "link", dir_fd=cur)
    os.close(cur)
    os.symlink(str(keep), work / "link")
    workdir.remove_tree(str(work))
    assert not work.exists() and (keep / "answer").read_text() == "42"
    workdir.remove_tree(str(work))  # gone already: nothing raised
