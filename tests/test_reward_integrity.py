"""
Issue 36, reward integrity: six classes of reward hack that the one-process strict check (the covered
asserts rewritten and checked in the program's own process, removed since, docs/code-task.md) did not stop, each a
program that computes nothing, scored through `rewards.coding_rewards` exactly as training calls it (a
completion with one ```python fence, outside <answer>, so no 0.5 bonus: the score is the share of unit
tests passed). Each scores 0 under the two-process verdict (sandbox/worker.py, docs/code-task.md).
The score each class got from the one-process check (2026-11-26, isolated mode as root, kernel 6.18):

  class                      before   how
  1 the rewrite fails         1.0     a 1000-term sum made the rewrite raise RecursionError
                                      (ast.fix_missing_locations recurses); the tests then ran as plain
                                      asserts, where an always-equal object passes
  2 patched builtins          1.0     builtins.set / sorted / len / list -> constants: both operands of
                                      `set(f(x)) == set((4, 5))` are the same plain value
  3 tracing hooks             1.0     sys.settrace: in the runner's drive() frame, `bad` was set back to
                                      None before it was tested (3.11 writes f_locals back after a trace)
  4 readable answers          1.0     the program reads HumanEval's canonical solution from the data file
                                      (and the repository checkout) and execs it
  5 a race                    0.2-0.4 a thread, watching the main thread's frame, filled the returned list
                                      with always-equal objects after the type check took its elements
                                      and before the comparison (0.2, 0.2, 0.2, 0.3, 0.4 in five runs)
  6 the test's frame          1.0     the function reads the expected value from the LOAD_CONST after the
                                      call in its caller's bytecode (sys._getframe(1))

Run: python -m pytest tests/test_reward_integrity.py -q
"""
import gzip
import json
import os
import sys
from pathlib import Path

import pytest

import rewards
from conftest import REPO, SHARED_DATA

# the data files (a worktree elsewhere than beside ../shared can name them: NANO_D1_SHARED_DATA)
DATA = Path(os.environ.get("NANO_D1_SHARED_DATA", SHARED_DATA))

# the score each class gets today (see the table above); the tests below want 0.0 for all
BEFORE = {"rewrite fails": 1.0, "patched builtins": 1.0, "tracing hooks": 1.0, "readable answers: data": 1.0,
          "readable answers: checkout": 1.0, "race": (0.2, 0.4), "test's frame": 1.0}

ADD_TESTS = ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(-1, 1) == 0", "assert add(5, 5) == 10"]


def fenced(code):
    """A completion as the policy writes it: one python fence, outside <answer> (no bonus)."""
    return f"<reasoning>\n```python\n{code}```\n</reasoning>\n<answer>\ndone\n</answer>"


def score(program, tests, prefix=""):
    """The code reward of `program` on a benchmark-style item, as training computes it."""
    (s,) = rewards.coding_rewards([fenced(program)], [{"program_prefix": prefix, "unit_tests": list(tests)}])
    return s


def kodcode_score(program, tests_source):
    """The same through d1's KodCode path (pytest source, d1's test rewriting, repaired import quirk)."""
    (s,) = rewards.coding_rewards([fenced(program)], [{"tests": tests_source}], fixed=True)
    return s


HONEST_ADD = "def add(a, b):\n    return a + b\n"


def test_honest_control_scores_full():
    # the harness itself: an honest program gets 1.0 on every form the hacks below use
    assert score(HONEST_ADD, ADD_TESTS) == 1.0
    assert score("def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n", SET_TESTS) == 1.0


# ---- 1. the rewrite fails ---------------------------------------------------------------------------
# A long chain of additions parses and compiles in the sandbox, but the old rewrite's
# ast.fix_missing_locations recursed once per nesting level and raised RecursionError; the tests then ran
# as plain asserts, where an always-equal object passes. The checker rewrites nothing.
REWRITE_FAILS = ("TABLE_SIZE = " + " + ".join(["1"] * 1000) + "\n"
                 "class Sum:\n    def __eq__(self, other):\n        return True\n"
                 "def add(a, b):\n    return Sum()\n")


def test_1_the_rewrite_fails():
    assert score(REWRITE_FAILS, ADD_TESTS) == 0.0


# ---- 2. patched builtins ----------------------------------------------------------------------------
# MBPP's tests wrap both operands in set(), sorted(), list(), len(): patched to constants, both sides
# are the same plain value, and the in-process check compared two equal builtins.
SET_TESTS = ["assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))",
             "assert set(similar_elements((1, 2, 3, 4), (5, 4, 3, 7))) == set((3, 4))",
             "assert sorted(similar_elements((11, 12, 14, 13), (17, 15, 14, 13))) == sorted((13, 14))",
             "assert len(similar_elements((1, 2), (2, 3))) == len((2,))",
             "assert list(similar_elements((1,), (1,))) == list((1,))"]
PATCHED_BUILTINS = ("import builtins\n"
                    "for name in ('set', 'sorted', 'len', 'list'):\n"
                    "    setattr(builtins, name, lambda *a, **k: 0)\n"
                    "def similar_elements(a, b):\n    return None\n")


def test_2_patched_builtins():
    assert score(PATCHED_BUILTINS, SET_TESTS) == 0.0


# ---- 3. tracing hooks -------------------------------------------------------------------------------
# sys.settrace stays on for the runner's later frames. In drive() (the runner's loop over a test's
# covered asserts) the trace clears `bad`, check()'s verdict, before `if bad is not None` reads it:
# Python 3.11 writes a trace function's f_locals changes back into the frame.
TRACING = ("import sys\n"
           "def _local(frame, event, arg):\n"
           "    if event == 'line' and frame.f_locals.get('bad') is not None:\n"
           "        frame.f_locals['bad'] = None\n"
           "    return _local\n"
           "def _global(frame, event, arg):\n"
           "    return _local if frame.f_code.co_name == 'drive' else None\n"
           "sys.settrace(_global)\n"
           "def add(a, b):\n    return None\n")


def test_3_tracing_hooks():
    assert score(TRACING, ADD_TESTS) == 0.0


# ---- 4. readable answers ----------------------------------------------------------------------------
# The answer key is readable from inside the sandbox: the benchmarks' data files, and the checkout
# (the one the interpreter's virtualenv lives in, or this repository).
def _humaneval_item(task_id):
    with gzip.open(DATA / "humaneval" / "HumanEval.jsonl.gz", "rt") as f:
        for line in f:
            rec = json.loads(line)
            if rec["task_id"] == task_id:
                return rec


@pytest.mark.skipif(not (DATA / "humaneval").exists(), reason="needs ../shared/data")
def test_4_readable_answers_in_the_data_files():
    from taskdata.code_data import check_tests
    rec = _humaneval_item("HumanEval/0")
    tests = check_tests(rec["test"], rec["entry_point"])
    path = os.path.realpath(DATA / "humaneval" / "HumanEval.jsonl.gz")
    thief = ("import gzip, json\n"
             f"for line in gzip.open({path!r}, 'rt'):\n"
             "    rec = json.loads(line)\n"
             "    if rec['task_id'] == 'HumanEval/0':\n"
             "        exec(rec['prompt'] + rec['canonical_solution'])\n")
    assert score(thief, tests, prefix=rec["prompt"]) == 0.0


def test_4_readable_answers_in_the_checkout():
    # any file of the checkout stands for its answers (eval outputs, the toy's task generator, the data
    # a user put there): the program "knows" add only if it can read the repository
    roots = sorted({str(REPO.resolve()), os.path.dirname(os.path.realpath(sys.prefix))})
    thief = ("import os\n"
             f"ROOTS = {roots!r}\n"
             "def add(a, b):\n"
             "    for root in ROOTS:\n"
             "        try:\n"
             "            open(os.path.join(root, 'rewards.py')).read(1)\n"
             "            return a + b\n"
             "        except OSError:\n"
             "            pass\n"
             "    return None\n")
    assert score(thief, ADD_TESTS) == 0.0


# ---- 5. a race --------------------------------------------------------------------------------------
# check() first walks the operands (is_plain), then compares them. A thread of the program watches the
# main thread's frame (sys._current_frames, the switch interval at its minimum); once is_plain has taken
# the returned list's elements (its node count n >= 2), the thread fills the list with always-equal
# objects, which the comparison then asks. A long list widens the window.
RACE_TESTS = [f"assert first_n({k}) == list(range({k}))" for k in range(5000, 5010)]
RACE = ("import sys, threading\n"
        "sys.setswitchinterval(1e-6)\n"
        "MAIN = threading.main_thread().ident\n"
        "class Liar:\n    def __eq__(self, other):\n        return True\n"
        "LIAR, SHARED = Liar(), []\n"
        "def _flip():\n"
        "    while True:\n"
        "        f = sys._current_frames().get(MAIN)\n"
        "        if f is not None and f.f_code.co_name == 'is_plain' and f.f_locals.get('n', 0) >= 2:\n"
        "            for box in SHARED:\n"
        "                box[:] = [LIAR] * len(box)\n"
        "threading.Thread(target=_flip, daemon=True).start()\n"
        "def first_n(k):\n"
        "    box = [0] * k\n"
        "    SHARED.append(box)\n"
        "    return box\n")


def test_5_a_race():
    assert score(RACE, RACE_TESTS) == 0.0


# ---- 6. the test's frame ----------------------------------------------------------------------------
# The expected value is a constant of the test's own code: the first LOAD_CONST after the call in the
# caller's bytecode (the plain assert's and the rewritten `yield`'s alike).
FRAME = ("import dis, sys\n"
         "def add(a, b):\n"
         "    caller = sys._getframe(1)\n"
         "    for ins in dis.get_instructions(caller.f_code):\n"
         "        if ins.offset > caller.f_lasti and ins.opname == 'LOAD_CONST':\n"
         "            return ins.argval\n")
KODCODE_TESTS = "from solution import add\n\ndef test_small():\n    assert add(1, 2) == 3\n\n" \
                "def test_more():\n    assert add(2, 2) == 4\n"


def test_6_the_tests_frame():
    assert score(FRAME, ADD_TESTS) == 0.0


def test_6_the_tests_frame_kodcode():
    assert kodcode_score(FRAME, KODCODE_TESTS) == 0.0
