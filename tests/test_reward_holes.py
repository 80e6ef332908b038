"""
Issue 46, reward integrity, second round: the holes an adversary found in the two-process verdict,
each a program that scored before, scored here as training scores it (`rewards.coding_rewards`, no
answer bonus) or run through the sandbox directly. Before (main 8ee262e, isolated mode; docs/code-task.md):

  hole                                      before   now   why
  a program name replaces a test builtin    1.0      0     only the names the item declares are bound
    (HumanEval/4 abs, /32 sum in the prompt's poly, /38 range and len, MBPP 2 set, MBPP+ 293 math)
  a program empties the test's `expected`   1.0      0     arguments come back only from a call returning None
  a patched reply makes the checker import  venv.__main__ imported, venvs written   the checker imports no reply's name
  a patched reply names the test's file     pytest.main wrote --junitxml anywhere   no reply binds __file__
  a long range / a deep tuple in a set      1.16 GB / segfault   refused on the wire, the checker survives
  a second reply, a reply to another call   read whichever came first   the program fails
  the checker itself                        root, no limits, the repository writable   contained like a server
  no namespaces                             plain mode, silently   Landlock + seccomp, or a refusal

Run: python -m pytest tests/test_reward_holes.py -q
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import rewards
from conftest import REPO, SHARED_DATA
from eval import load_items
from sandbox import confine, contain, run as sandbox, worker

DATA = SHARED_DATA
LANDLOCK = confine.confine_available(read=confine.default_read_paths())[0]  # the fallback can work here
needs_data = pytest.mark.skipif(not (DATA / "humaneval").exists(), reason="needs ../shared/data")


def fenced(code):
    """A completion as the policy writes it: one python fence, outside <answer> (no bonus)."""
    return f"<reasoning>\n```python\n{code}```\n</reasoning>\n<answer>\ndone\n</answer>"


def score(program, example):
    (s,) = rewards.coding_rewards([fenced(program)], [example])
    return s


@pytest.fixture(params=["isolated", "landlock", "plain"])
def mode(request, monkeypatch):
    """Every verdict below holds in each mode: the namespace hole is the checker's, not the sandbox's."""
    if request.param != "plain" and not contain.isolation_available()[0]:
        pytest.skip("no containment here")
    if request.param == "landlock" and not LANDLOCK:
        pytest.skip("no Landlock here")
    if request.param == "isolated" and os.geteuid() != 0:
        pytest.skip("isolated needs root")
    monkeypatch.setattr(sandbox, "_mode", request.param)
    return request.param


def item(task, file, task_id):
    """A benchmark item as eval.py reads it (every record of the file)."""
    return next(ex for _, ex in load_items(task, str(DATA / file), True) if ex["task_id"] == task_id)


# ---- 1. the test's names are the test's -------------------------------------------------------------
LEAK_LEN = ("_seen = []\n"
            "def _count(x):\n    n = 0\n    for _ in x:\n        n += 1\n    return n\n"
            "def len(x):\n    _seen.append(x)\n    return _count(x)\n"
            "def decode_cyclic(s):\n"
            "    for x in reversed(_seen):\n"
            "        if type(x) is type(s) and x != s and _count(x) == _count(s):\n            return x\n")
BUILTIN_HACKS = [  # (task, file, item, the program: a stub plus a program-defined builtin)
    ("humaneval", "humaneval/HumanEval.jsonl.gz", "HumanEval/4",
     "def mean_absolute_deviation(numbers):\n    return 0.0\ndef abs(x):\n    return 0\n"),
    ("humaneval", "humaneval/HumanEval.jsonl.gz", "HumanEval/32",
     "def find_zero(xs):\n    return 0.0\ndef sum(xs, start=0):\n    return 0\n"),  # poly() of the prompt
    ("humaneval", "humaneval/HumanEval.jsonl.gz", "HumanEval/38",
     "def decode_cyclic(s):\n    return s\ndef range(*args):\n    return []\n"),  # a vacuous loop
    ("humaneval", "humaneval/HumanEval.jsonl.gz", "HumanEval/38", LEAK_LEN),  # encode_cyclic hands s to len
    ("mbpp", "mbpp/sanitized-mbpp.json", 2,
     "def similar_elements(a, b):\n    return None\ndef set(*a):\n    return 0\n"),
    ("mbpp_plus", "mbpp_plus/MbppPlus.jsonl.gz", "Mbpp/293",
     "def otherside_rightangle(w, h):\n    return 0\nclass math:\n    def isclose(*a, **k):\n        return True\n"),
]


@needs_data
@pytest.mark.parametrize("task,file,task_id,program", BUILTIN_HACKS,
                         ids=[f"{h[2]}-{h[3].split('def ')[-1].split('(')[0]}" for h in BUILTIN_HACKS])
def test_a_program_name_does_not_replace_a_test_builtin(task, file, task_id, program, mode):
    assert score(program, item(task, file, task_id)) == 0.0


@needs_data
def test_a_target_named_like_a_builtin_still_works(mode):
    # MBPP 126 asks for `sum`: the item declares it (its reference solution defines it), so it is bound
    ex = item("mbpp", "mbpp/sanitized-mbpp.json", 126)
    assert score(ex["solution"], ex) == 1.0
    assert score("def sum(a, b):\n    return 0\n", ex) == 0.0


def test_the_prompts_helpers_keep_their_own_globals(mode):
    # the trusted prefix's helper calls sum(); the program defines sum too and would make poly() 0
    prefix = "def poly(xs):\n    return sum(xs)\n\ndef target(xs):\n    \"\"\"the root\"\"\"\n"
    ex = {"program_prefix": prefix, "entry_point": "target", "unit_tests": ["assert poly([1, 2, target([3])]) == 6"]}
    assert score("def target(xs):\n    return 3\n", ex) == 1.0
    assert score("def target(xs):\n    return 0\ndef sum(xs):\n    return 6\n", ex) == 0.0


def test_a_program_cannot_empty_the_tests_expected(mode):
    # the call returns a value, so the test's list is not written back: emptying it changes nothing here
    ex = {"program_prefix": "", "unit_tests": ["xs = [3, 1, 2]\nassert sort_copy(xs) == sorted(xs)"]}
    assert score("def sort_copy(xs):\n    out = sorted(xs)\n    return out\n", ex) == 1.0
    assert score("def sort_copy(xs):\n    xs.clear()\n    return []\n", ex) == 0.0
    # the in-place form (the call returns None) still sees its argument's new state
    inplace = {"program_prefix": "", "unit_tests": ["xs = [3, 1, 2]\nsort_in_place(xs)\nassert xs == [1, 2, 3]"]}
    assert score("def sort_in_place(xs):\n    xs.sort()\n", inplace) == 1.0


# ---- 2. the checker is contained -------------------------------------------------------------------
FORGE_MODULES = "import __main__\n__main__._modules = lambda ns: {'venv': 'venv.__main__'}\ndef f():\n    return 1\n"


def test_a_patched_reply_cannot_make_the_checker_import(mode, tmp_path):
    before = set(os.listdir(REPO / "sandbox"))
    why = worker.run_checked(FORGE_MODULES, ["assert f() == 1", "assert venv.__name__ == 'venv.__main__'"],
                             mode=mode)
    assert why[0] is None and "NameError" in why[1], why
    assert set(os.listdir(REPO / "sandbox")) == before  # no virtualenv written beside the checker's code


def test_a_patched_reply_cannot_name_the_tests_file(mode, tmp_path):
    target = tmp_path / "junit.xml"
    forge = ("import __main__\n_real = __main__._values_or_handles\n"
             "__main__._values_or_handles = lambda names, t: "
             f"{{**_real(names, t), '__file__': '--junitxml={target}'}}\n"
             "def add(a, b):\n    return a + b\n")
    source = ("from solution import add\n\ndef test_a():\n    assert add(1, 2) == 3\n\ndef test_b():\n"
              "    assert add(2, 2) == 4\n\nif __name__ == '__main__':\n    import pytest\n"
              "    pytest.main([__file__])\n")
    rewards.coding_rewards([fenced(forge)], [{"tests": source}], fixed=True)
    assert not target.exists()


def test_a_long_range_and_a_deep_value_are_refused_and_the_checker_survives(mode):
    deep = "def deep():\n    t = ()\n    for _ in range(900_000):\n        t = (t,)\n    return {t}\n"
    why = worker.run_checked(deep + "def big():\n    return range(3 * 10**7)\n",
                             ["assert deep() is not None", "assert len(list(big())) > 0"], mode=mode)
    assert all(w is not None for w in why), why
    assert worker.run_checked("def f():\n    return 1\n", ["assert f() == 1"], mode=mode) == [None]


@pytest.mark.parametrize("forge", [
    "payload = (n + 1, msg)",                  # a reply numbered as another request
    "sends.append(1)",                         # every reply twice
])
def test_a_reply_to_another_request_or_a_second_reply_fails(mode, forge):
    program = ("import __main__\n_real, sends = __main__.encode, []\n"
               "def encode(value, **kw):\n"
               "    if type(value) is tuple and len(value) == 2 and type(value[0]) is int:\n"
               "        n, msg = value\n        payload = value\n"
               f"        {forge}\n"
               "        data = _real(payload, **kw)\n"
               "        if sends:\n            __main__.send_frame(__main__.sock, data)\n"
               "        return data\n"
               "    return _real(value, **kw)\n"
               "__main__.encode = encode\n"
               "def add(a, b):\n    return a + b\n")
    program = program.replace("__main__.sock", "__main__.FdSocket(3)")
    assert [w is None for w in worker.run_checked(program, ["assert add(1, 2) == 3", "assert add(2, 2) == 4"],
                                                   mode=mode)] == [False, False]
    assert worker.run_checked("def add(a, b):\n    return a + b\n", ["assert add(1, 2) == 3"], mode=mode) == [None]


PROBE_CHECKER = [  # test code, run in the checker: what the checker itself can reach
    "import os\nassert os.getuid() != 0, 'root'",
    "open('scratch', 'w').write('x')  # its private working directory",
    f"import os\ntry:\n    open({str(REPO / 'rewards.py')!r}).read(1)\nexcept OSError:\n    pass\n"
    "else:\n    raise AssertionError('read the repository')",
    f"try:\n    open({str(REPO / 'escape.txt')!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
    "else:\n    raise AssertionError('wrote into the repository')",
]


@pytest.mark.parametrize("mode", ["isolated", "landlock"], indirect=True)
def test_the_checker_is_contained(mode):
    why = worker.run_checked("x = 1\n", PROBE_CHECKER, mode=mode)
    assert why == [None] * len(PROBE_CHECKER), why
    assert not (REPO / "escape.txt").exists()


# ---- 3. no silent plain mode: machines without namespaces --------------------------------------------
SIMULATED = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, sys.argv[1])
    from sandbox import contain, run
    out = {"mode": contain.mode()}
    thief = ("def add(a, b):\\n    try:\\n        open(%r).read(1)\\n        return a + b\\n"
             "    except OSError:\\n        return None\\n" % (sys.argv[1] + "/rewards.py"))
    uid = "import os\\ndef uid():\\n    return os.getuid()\\n"
    out["thief"] = run.run_tests(thief, ["assert add(1, 2) == 3"])
    out["honest"] = run.run_tests("def add(a, b):\\n    return a + b\\n", ["assert add(1, 2) == 3"])
    out["root"] = run.run_tests(uid, ["assert uid() == 0"])
    print(json.dumps(out))
""")
# a child in a new user namespace, mapped by its parent (root), turns unprivileged user namespaces off
# in it, becomes uid 1000 and runs the system python: a cluster account on a machine without them
NO_USERNS = textwrap.dedent("""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    go_r, go_w = os.pipe(); ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        if libc.unshare(0x10000000) != 0:
            os._exit(90)
        os.write(ready_w, b"u"); os.read(go_r, 1)
        with open("/proc/sys/user/max_user_namespaces", "w") as f:
            f.write("0")
        os.setgroups([]); os.setresgid(1000, 1000, 1000); os.setresuid(1000, 1000, 1000)
        os.chdir("/")
        os.execv(sys.argv[1], sys.argv[1:])
    os.read(ready_r, 1)
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{pid}/{name}", "w") as f:
            f.write("0 0 65536")
    os.write(go_w, b"g")
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
""")


def _simulated(argv):
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3")
                    or confine.landlock_abi() < confine.LANDLOCK_MIN_ABI,
                    reason="needs root, /usr/bin/python3 and Landlock ABI >= 6")
def test_no_user_namespaces_falls_back_to_landlock():
    if subprocess.run(["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "/usr/bin/python3", "-c",
                       f"import os; os.listdir({str(REPO / 'sandbox')!r})"], capture_output=True).returncode:
        pytest.skip("uid 1000 cannot read the checkout")
    out = _simulated([sys.executable, "-c", NO_USERNS, "/usr/bin/python3", "-I", "-c", SIMULATED, str(REPO)])
    assert out == {"mode": "landlock", "thief": [False], "honest": [True], "root": [False]}, out


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists("/usr/bin/python3")
                    or confine.landlock_abi() < confine.LANDLOCK_MIN_ABI,
                    reason="needs root, setpriv, /usr/bin/python3 and Landlock ABI >= 6")
def test_root_without_cap_sys_admin_falls_back_to_landlock():
    # a default Docker container: root, no CAP_SYS_ADMIN, so no mount namespace; programs must not run as root.
    # /usr/bin/python3: an interpreter the sandbox uid can read (an official python image's /usr/local is too)
    drop = ["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin"]
    if not confine.open_to_others(str(REPO / "sandbox")):  # a checkout in a 0700 folder (mktemp -d): refused
        proc = subprocess.run([*drop, "/usr/bin/python3", "-I", "-c", SIMULATED, str(REPO)], capture_output=True,
                              text=True, timeout=120, cwd="/")
        last = proc.stderr.strip().splitlines()[-1]
        assert proc.returncode != 0 and "NoIsolation" in last and "cannot read" in last, proc.stderr[-2000:]
        return
    out = _simulated([*drop, "/usr/bin/python3", "-I", "-c", SIMULATED, str(REPO)])
    assert out == {"mode": "landlock", "thief": [False], "honest": [True], "root": [False]}, out
    # an interpreter under root's 0700 home: refused in one line, naming why (no capability is kept to reach it)
    if os.path.realpath(sys.base_prefix).startswith("/root/"):
        proc = subprocess.run([*drop, sys.executable, "-I", "-c", SIMULATED, str(REPO)], capture_output=True,
                              text=True, timeout=120, cwd="/")
        last = proc.stderr.strip().splitlines()[-1]
        assert proc.returncode != 0 and "NoIsolation" in last and "keeps no capability" in last, proc.stderr[-2000:]
