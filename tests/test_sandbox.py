"""
Tests for sandbox.py: tests pass and fail as they should, one bool per test; every attack of the
containment table is contained (the program's own view, an errno or a count, checked by its probe)
in bounded time, the test process is unharmed, nothing is left behind (processes, files, the temp
directory), and the next call works normally. The attacks that need namespaces skip where the
machine has none; the rest also run in the plain fallback, and in the non-root "userns" mode.

Run: python -m pytest tests/test_sandbox.py -q
"""
import os
import tempfile
import time

import pytest

import sandbox
from sandbox import ATTACKS, run_batch, run_tests

ISOLATED = sandbox.isolation_mode() == "isolated"
needs_isolation = pytest.mark.skipif(not ISOLATED, reason="no user/pid/net namespaces on this machine")
LIMIT_S = 1.0  # wall clock per attack; every call below must return within LIMIT_S + SLACK_S
SLACK_S = 1.5
ADD = "def add(a, b):\n    return a + b\n"


def sandbox_processes():
    """pids owned by any sandbox uid (65534 - slot), read from /proc."""
    uids = {sandbox.SANDBOX_UID - k for k in range(8)}
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                uid = int(next(line for line in f if line.startswith("Uid:")).split()[1])
        except (OSError, StopIteration):
            continue  # exited meanwhile
        if uid in uids:
            out.append(int(pid))
    return out


def no_sandbox_processes(deadline_s=2.0):
    """True once no sandbox-uid process is left (the kernel tears a pid namespace down asynchronously)."""
    t0 = time.time()
    while sandbox_processes():
        if time.time() - t0 > deadline_s:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def plain(monkeypatch):
    monkeypatch.setattr(sandbox, "_mode", "plain")


def test_pass_fail_raise_and_partial_credit():
    tests = ["assert add(1, 2) == 3", "assert add(1, 1) == 3", "raise ValueError('x')", "x = add(2, 2)", "assert x == 4"]
    # tests share the program's namespace, in order: the last one sees the variable the fourth set
    assert run_tests(ADD, tests) == [True, False, False, True, True]
    assert run_tests(ADD, []) == []
    # a program that does not compile or raises: every test fails
    assert run_tests("def add(a, b) return", ["pass", "pass"]) == [False, False]
    assert run_tests("raise SystemExit(0)", ["pass"]) == [False]


def test_one_hanging_test_fails_alone():
    t0 = time.time()
    res = run_tests(ADD, ["assert add(1, 2) == 3", "while True: pass", "assert add(2, 2) == 4"],
                    timeout_s=5.0, test_timeout_s=0.5)
    assert res == [True, False, True] and time.time() - t0 < 3.0


def test_pytest_importable_and_kodcode_style_test():
    tests = ["import pytest\nwith pytest.raises(ZeroDivisionError):\n    1 / 0", "assert pytest.approx(0.3) == 0.1 + 0.2"]
    assert run_tests("import pytest", tests) == [True, True]


def test_bad_arguments_raise_type_error():
    with pytest.raises(TypeError):
        run_tests(ADD, "assert add(1, 2) == 3")
    with pytest.raises(TypeError):
        run_batch([(ADD, [1])])


def test_batch_equals_sequential_in_job_order():
    jobs = [(ADD, ["assert add(1, 2) == 3"]), ("while True: pass", ["pass"]), (ADD, ["assert add(1, 2) == 4", "pass"]),
            ("import os\nos._exit(1)", ["pass"]), ("x = 1", [])] * 2
    seq = [run_tests(p, t, timeout_s=LIMIT_S) for p, t in jobs]
    assert run_batch(jobs, workers=2, timeout_s=LIMIT_S) == seq == [[True], [False], [False, True], [False], []] * 2


@needs_isolation
def test_fork_bomb_does_not_starve_a_concurrent_job():
    # worker slots run as different uids, so one job's NPROC budget is not another's
    bomb = next(p for n, p, *_ in ATTACKS if n == "fork bomb")
    spawn = "import subprocess\nsubprocess.run(['true'], check=True)"
    assert run_batch([(bomb, ["pass"]), (spawn, ["pass"])] * 2, workers=2, timeout_s=LIMIT_S)[1::2] == [[True], [True]]


@pytest.mark.parametrize("name,program,probe,contained,by", ATTACKS, ids=[a[0] for a in ATTACKS])
@needs_isolation
def test_attack_contained(name, program, probe, contained, by, monkeypatch):
    monkeypatch.setenv("SANDBOX_SECRET", "hunter2")  # the parent's secret that the program must not see
    marker = "/var/tmp/nano-d1-escape"
    t0 = time.time()
    assert run_tests(program, [probe], timeout_s=LIMIT_S) == [contained], by
    assert time.time() - t0 < LIMIT_S + SLACK_S
    # the parent is unharmed, nothing is left running or written, and the next call works
    assert os.environ["SANDBOX_SECRET"] == "hunter2" and not os.path.exists(marker)
    assert not os.path.exists("/work/nano-d1-escape") and not os.path.exists("/nano-d1-escape")
    assert no_sandbox_processes()
    assert run_tests(ADD, ["assert add(1, 2) == 3"]) == [True]


# what the fallback without namespaces still contains (the others would reach the real machine there)
PLAIN_CONTAINED = [a for a in ATTACKS if a[0] in ("infinite loop", "sleep", "memory blow-up", "huge file",
                                                  "gigabytes of output", "segfault", "os._exit", "non-UTF-8 output",
                                                  "parent's environment")]


@pytest.mark.parametrize("name,program,probe,contained,by", PLAIN_CONTAINED, ids=[a[0] for a in PLAIN_CONTAINED])
def test_plain_fallback_still_contains_the_basics(name, program, probe, contained, by, plain, monkeypatch):
    # without namespaces: the resource limits, the timer and wall clock, the session kill, the scrubbed env
    monkeypatch.setenv("SANDBOX_SECRET", "hunter2")
    t0 = time.time()
    assert run_tests(program, [probe], timeout_s=LIMIT_S) == [contained], by
    assert time.time() - t0 < LIMIT_S + SLACK_S
    assert run_tests(ADD, ["assert add(1, 2) == 3"]) == [True]


def test_working_directory_removed():
    before = set(os.listdir(tempfile.gettempdir()))
    run_batch([("open('f', 'w').write('x')", ["pass"])] * 3, workers=2)
    left = {d for d in set(os.listdir(tempfile.gettempdir())) - before if d.startswith("nano-d1-sandbox-")}
    assert not left


# "userns" is the mode of a machine where we are not root. Forced here as root it keeps root's rights
# over the files it can see and root's exemption from NPROC, so those three attacks are not its to stop
USERNS_CONTAINED = [a for a in ATTACKS if a[0] not in sandbox.UNSAFE_IN_USERNS_AS_ROOT]
USERNS_WORKS = sandbox._run_one("x = 1", ["assert x == 1"], 10.0, 2.0, 256, 0, "userns") == [True]


@pytest.mark.skipif(not USERNS_WORKS, reason="no unprivileged user namespaces here")
@pytest.mark.parametrize("name,program,probe,contained,by", USERNS_CONTAINED, ids=[a[0] for a in USERNS_CONTAINED])
def test_userns_mode_contains(name, program, probe, contained, by, monkeypatch):
    monkeypatch.setattr(sandbox, "_mode", "userns")
    monkeypatch.setenv("SANDBOX_SECRET", "hunter2")
    t0 = time.time()
    assert run_tests(program, [probe], timeout_s=LIMIT_S) == [contained], by
    assert time.time() - t0 < LIMIT_S + SLACK_S
    assert run_tests(ADD, ["assert add(1, 2) == 3"]) == [True]
