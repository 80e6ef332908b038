"""
The code reward's names, third round (docs/code-task.md, "A reward that cannot be gamed"): two holes an
adversary found on real items, each a program that scored where the reference solution does not, scored
as training scores it (`rewards.coding_rewards`, no answer bonus) in the default two-process verdict:

  hole                                          before                 now
  d1's target is a builtin (`assert abs(`,      the program's `abs`    the test's builtin: d1's target is a
    `assert isinstance(`, `assert set(`)          was bound: 1.0         declared one only when imported
  the names of the setup lines d1's split       the program's: 1.0     the test's (code_prep's `global`
    drops (`data = ...`, the test's helpers)      (reference 0.5)        line): the reference's value

Honest programs keep d1's values: the reference solutions below score the same with d1's plain asserts
(`STRICT_ASSERTS = False`) and with the checker, and KodCode's 109 demo items keep their totals
(tests/test_code_reward.py). Run: python -m pytest tests/test_target_names.py -q
"""
import functools
import json

import pytest

import rewards
from conftest import SHARED_DATA
from eval import load_items
from sandbox import contain, run as sandbox
from sandbox.code_prep import prepare_code_tests

KODCODE = SHARED_DATA / "kodcode_demo"
needs_kodcode = pytest.mark.skipif(not KODCODE.exists(), reason="needs ../shared/data")


@pytest.fixture
def sandboxed():
    """The programs run in the default mode (the strongest containment here), as training runs them."""
    if not contain.isolation_available()[0]:
        pytest.skip("no containment here")


def fenced(code):
    """A completion as the policy writes it: one python fence, outside <answer> (no bonus)."""
    return f"<reasoning>\n```python\n{code}```\n</reasoning>\n<answer>\ndone\n</answer>"


def score(program, example, fixed=None, strict=True):
    """What training gives `program` on `example`: the checker (strict, the default) or d1's plain asserts."""
    run_batch = functools.partial(sandbox.run_batch, strict=strict)
    (s,) = rewards.coding_rewards([fenced(program)], [example], fixed=fixed, run_batch=run_batch)
    return s


def kodcode(k):
    """The k-th of KodCode's 109 demo items (the order of test_code_reward.py), as d1 reads it."""
    items = [it for f in sorted(KODCODE.glob("*.json")) for it in json.loads(f.read_text())]
    return {"tests": items[k]["test_code"], "solution": items[k]["response"]}


# ---- 1. d1's target is never an undeclared builtin ------------------------------------------------
# (tests, the reference, a program that defines the builtin and returns what makes it pass)
BUILTIN_TARGETS = {
    "abs": ("def test_half():\n    assert abs(half(3) - 1.5) < 1e-9\n    assert abs(half(1) - 0.5) < 1e-9\n",
            "def half(x):\n    return x / 2\n",
            "def abs(x):\n    return 0\ndef half(x):\n    return 0\n"),
    "isinstance": ("def test_count():\n    assert isinstance(count([1, 2]), int)\n"
                   "    assert isinstance(count([]), int)\n",
                   "def count(xs):\n    return len(xs)\n",
                   "def isinstance(*a):\n    return True\ndef count(xs):\n    return None\n"),
    "set": ("assert set(pairs([1, 2])) == {(1, 2)}\nassert set(pairs([3])) == set()\n",
            "def pairs(xs):\n    return [(a, b) for a in xs for b in xs if a < b]\n",
            "def set(*a):\n    return {(1, 2)} if a == (1,) else 0\ndef pairs(xs):\n    return len(xs) - 1\n"),
}


@pytest.mark.parametrize("fixed", [False, True], ids=["d1", "fixed"])
@pytest.mark.parametrize("builtin", sorted(BUILTIN_TARGETS))
def test_a_program_defining_the_builtin_target_scores_what_the_reference_does(builtin, fixed, sandboxed):
    tests, reference, hack = BUILTIN_TARGETS[builtin]
    ex = {"tests": tests}
    # d1 renames the first def to the builtin: the reference loses its function, 0 in either verdict
    assert score(reference, ex, fixed) == score(reference, ex, fixed, strict=False) == 0.0
    # d1's one namespace lets the program's builtin answer for the test; the checker keeps the test's
    assert score(hack, ex, fixed, strict=False) == 1.0
    assert score(hack, ex, fixed) == 0.0


def test_the_builtin_target_stays_d1s_in_the_program_text_only():
    program, calls = prepare_code_tests("def half(x):\n    return x / 2\n", BUILTIN_TARGETS["abs"][0])
    assert program.startswith("def abs(x):") and len(calls) == 2  # d1's renaming, d1's plain-assert value
    assert program.targets == ()  # but the checker binds no program `abs`


@pytest.mark.parametrize("tests", [
    "from solution import sum\n\ndef test_one():\n    assert sum([1, 2]) == 3\n\ndef test_two():\n"
    "    assert sum([]) == 0\n",  # two test functions: d1 substitutes the solution for the import
    "from solution import sum\n\ndef test_sum():\n    assert sum([1, 2]) == 3\n    assert sum([]) == 0\n",  # split
], ids=["two-functions", "split"])
def test_a_declared_builtin_target_is_the_programs(tests, sandboxed):
    # `from solution import sum` declares it: the program's `sum` is what the test calls
    ex = {"tests": tests}
    honest = "def sum(xs):\n    t = 0\n    for x in xs:\n        t += x\n    return t\n"
    assert score(honest, ex, fixed=True) == 1.0
    assert score("def sum(xs):\n    return -1\n", ex, fixed=True) == 0.0  # not the builtin answering
    assert prepare_code_tests(honest, tests, fixed=True)[0].targets[0] == "sum"


@pytest.mark.skipif(not (SHARED_DATA / "mbpp").exists(), reason="needs ../shared/data")
def test_mbpp_126s_sum_still_works(sandboxed):
    # MBPP 126 asks for `sum`: its reference solution defines it (code_prep.item_targets)
    ex = next(ex for _, ex in load_items("mbpp", str(SHARED_DATA / "mbpp/sanitized-mbpp.json"), True)
              if ex["task_id"] == 126)
    assert score(ex["solution"], ex) == 1.0
    assert score("def sum(a, b):\n    return 0\n", ex) == 0.0


# ---- 2. the names of the test's own setup lines are the test's -------------------------------------
# KodCode demo item -> (its index, {fixed: (the reference's score, the program's with d1's plain asserts)},
# a program that defines the names the split left without their setup: None, the reference plus the helper)
ORPHANS = {
    # one import-style test function: `assert True` passes; `captured_output` and `expected_output` were
    # set by lines the split dropped. With d1's quirk (fixed=False) the solution never arrives at all
    "generate_all_subsequences": (5, {True: (0.5, 1.0), False: (0.5, 0.5)},
                                  "def generate_all_subsequences(sequence):\n    pass\n"
                                  "captured_output = expected_output = []\n"),
    # the test's module-level helper find_pair_with_index, dropped by the split (d1 and fixed alike)
    "find_pair_with_index": (27, {True: (0.4, 1.0), False: (0.4, 1.0)}, None),
    # the test's helpers construct_linked_list and to_list (`from solution import ListNode, reverse_linked_list`)
    "to_list": (100, {True: (0.0, 1.0), False: (0.0, 0.0)},
                "class ListNode:\n    def __init__(self, value=0, next=None):\n        self.value = value\n"
                "def reverse_linked_list(head):\n    return head\n"
                "def construct_linked_list(values):\n    return list(reversed(values))\n"
                "def to_list(node):\n    return node\n"),
}


@needs_kodcode
@pytest.mark.parametrize("name", sorted(ORPHANS))
def test_a_program_defining_the_tests_setup_names_scores_what_the_reference_does(name, sandboxed):
    k, values, hack = ORPHANS[name]
    ex = kodcode(k)
    assert name in ex["tests"]  # the item meant
    if hack is None:  # the reference solution plus the test's own helper
        hack = ex["solution"].rstrip("\n") + "\n\ndef find_pair_with_index(nums, k):\n" \
                                             "    return find_pair_with_sum(nums, k)\n"
    for fixed, (reference, plain) in values.items():
        # the reference keeps d1's value: the dropped names raise NameError, as in d1's one program
        assert score(ex["solution"], ex, fixed) == score(ex["solution"], ex, fixed, strict=False) == \
            pytest.approx(reference)
        # d1's one namespace lets the program's names stand in for the test's; the checker does not
        assert score(hack, ex, fixed, strict=False) == pytest.approx(plain)
        assert score(hack, ex, fixed) == pytest.approx(reference)


def test_setup_names_travel_as_a_global_line_of_the_split_source():
    tests = ("import math\nimport numpy as np\nfrom solution import f\n\ndef helper(v):\n    return v\n\n"
             "def test_f():\n    data = [1, 2]\n    obj = Foo()\n    from os.path import join\n"
             "    assert f(data) == helper(data)\n    assert math.isclose(np.sum(f(1)), 1)\n")
    program, calls = prepare_code_tests("def g(x):\n    return x\n", tests, fixed=True)
    assert calls == ["test_case_0()", "test_case_1()"]
    # the test's names; not f (the program's, imported from solution) nor math (a stdlib module: the
    # checker binds only its own, when the program imported it, as d1's namespace has it)
    assert program.test_source.splitlines()[0] == "global data, helper, join, np, obj, test_f, v"
    assert "global" not in str(program)  # d1's one program (plain asserts) is d1's text
    assert program.targets == ("f", "f")
    # a star import binds no name the line could hold: the split source still compiles
    star = prepare_code_tests("def f(x):\n    return x\n", "from math import *\n\ndef test_f():\n"
                              "    y = 1\n    assert f(y) == y\n")[0]
    assert star.test_source.splitlines()[0] == "global test_f, y"
    # with two or more test functions nothing is dropped: the checker reads the whole source, no line
    two = prepare_code_tests("def g(x):\n    return x\n", "def test_a():\n    assert f(1)\n\n"
                             "def test_b():\n    xs = [1]\n    assert f(xs)\n")[0]
    assert not two.test_source.startswith("global")


def test_unparsable_tests_leave_no_free_name_to_the_program():
    # the split keeps only the assert lines; what the rest bound is unknown: every identifier is the test's
    tests = "def test_f(:\n    data = [1]\n    assert f(data) == data\n"
    program, _ = prepare_code_tests("def f(x):\n    return x\n", tests)
    assert program.test_source.startswith("global data, test_case_0\n")  # f, the target, stays the program's
