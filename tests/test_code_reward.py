"""
Tests for d1's coding reward (rewards.coding_reward / coding_rewards / prepare_code_tests): the
extraction rule, the target-name renaming, both test styles, d1's single-function import quirk both
ways, the blocklist, and hostile completions. Programs run in sandbox/run.py, as in training.

Run: python -m pytest tests/test_code_reward.py -q
"""
import functools
import json

import pytest

import rewards
from conftest import SHARED_DATA
from sandbox import run as sandbox
from rewards import coding_reward, coding_rewards, extract_code, prepare_code_tests
from tasks import total_reward
from tasks import load_task

# KodCode style: `from solution import X`, pytest functions
IMPORT_TESTS_2 = """from solution import add

def test_small():
    assert add(1, 2) == 3

def test_negative():
    assert add(-1, -2) == -3
"""
IMPORT_TESTS_1 = """from solution import add

def test_add():
    assert add(1, 2) == 3
    assert add(0, 0) == 0
"""
# MBPP style: bare asserts naming the function
ASSERT_TESTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(0, 5) == 6\n"


def answer(code, inside=True):
    """A completion in d1's format, the fence inside <answer> or in the reasoning."""
    fence = f"```python\n{code}```"
    if inside:
        return f"<reasoning>\nsum it\n</reasoning>\n<answer>\n{fence}\n</answer>"
    return f"<reasoning>\n{fence}\n</reasoning>\n<answer>\nsee above\n</answer>"


def test_extract_code_first_python_fence_only():
    assert extract_code(answer("x = 1\n")) == ("x = 1\n", True)
    assert extract_code(answer("x = 1\n", inside=False)) == ("x = 1\n", False)
    # only ```python\n counts; the first one is graded even if a later one is in the answer
    assert extract_code("```py\nx = 1\n```") == ("", False)
    assert extract_code("```\nx = 1\n```") == ("", False)
    assert extract_code("```python\na = 1\n```\n<answer>```python\nb = 2\n```</answer>") == ("a = 1\n", False)


def test_prepare_renames_first_def_and_splits_asserts():
    program, calls = prepare_code_tests("def plus(a, b):\n    return a + b\n", ASSERT_TESTS)
    assert program.startswith("def add(a, b):") and calls == ["test_case_0()", "test_case_1()", "test_case_2()"]
    assert "def test_case_2():\n    assert add(0, 5) == 6" in program
    # no target in the tests -> None (reward 0); no def in the code -> "" (bonus only)
    assert prepare_code_tests("def f(): pass\n", "print('no asserts')") is None
    assert prepare_code_tests("x = 1\n", ASSERT_TESTS) == ""


def test_reward_counts_passed_tests_plus_answer_bonus():
    good = "def plus(a, b):\n    return a + b\n"
    assert coding_reward(answer(good), {"tests": IMPORT_TESTS_2}) == 1.5
    assert coding_reward(answer(good, inside=False), {"tests": IMPORT_TESTS_2}) == 1.0
    # passes test_small only (1 of 2 functions)
    half = "def add(a, b):\n    return 3\n"
    assert coding_reward(answer(half), {"tests": IMPORT_TESTS_2}) == 0.5 + 0.5
    # MBPP style: 2 of 3 asserts (the third expects 6)
    assert coding_reward(answer(good), {"tests": ASSERT_TESTS}) == pytest.approx(2 / 3 + 0.5)


def test_d1_single_function_import_quirk_both_ways():
    good = answer("def add(a, b):\n    return a + b\n")
    # d1: the import line is dropped before the substitution, the solution never arrives: bonus only
    assert coding_reward(good, {"tests": IMPORT_TESTS_1}, fixed=False) == 0.5
    program, _ = prepare_code_tests("def add(a, b):\n    return a + b\n", IMPORT_TESTS_1, fixed=False)
    assert "def add" not in program
    # repaired: both asserts run against the solution
    assert coding_reward(good, {"tests": IMPORT_TESTS_1}, fixed=True) == 1.5
    # the module switch decides when fixed is not given
    old = rewards.D1_BUGS
    try:
        rewards.D1_BUGS = False
        assert coding_reward(good, {"tests": IMPORT_TESTS_1}) == 1.5
    finally:
        rewards.D1_BUGS = old


def test_two_names_imported_keep_d1s_leftover_in_both_verdicts():
    # d1 substitutes the solution for `from solution import gcd` and leaves ", lcm" on its last line:
    # lcm returns a tuple and its test fails. The checker's program part carries the same leftover
    solution = ("def gcd(a, b):\n    return a if b == 0 else gcd(b, a % b)\n"
                "def lcm(a, b):\n    return a * b // gcd(a, b)")
    tests = ("from solution import gcd, lcm\n\ndef test_gcd():\n    assert gcd(12, 18) == 6\n\n"
             "def test_lcm():\n    assert lcm(12, 18) == 36\n")
    program, calls = prepare_code_tests(solution, tests, fixed=True)
    assert program.untrusted.endswith("gcd(a, b), lcm") and "import" not in program.test_source
    assert [sandbox.run_tests(program, calls, strict=strict) for strict in (True, False)] == [[True, False]] * 2


def test_d1_blocklist_only_with_d1_bugs():
    code = "import os\ndef add(a, b):\n    return a + b\n"
    assert coding_reward(answer(code), {"tests": IMPORT_TESTS_2}, fixed=False) == 0.5
    assert coding_reward(answer(code), {"tests": IMPORT_TESTS_2}, fixed=True) == 1.5


def test_bad_completions_score_zero_never_raise():
    tests = {"tests": IMPORT_TESTS_2}
    assert coding_reward("def add(a, b): return a + b", tests) == 0.0          # no fence
    assert coding_reward(answer("def add(a, b) return", inside=False), tests) == 0.0  # syntax error
    assert coding_reward(answer("def add(a, b) return"), tests) == 0.5          # ... only the bonus
    assert coding_reward(answer("x = 1\n" * 30_000), tests) == 0.0             # huge
    assert coding_reward("\x00\xff```python\n\udcff\x80\n```", tests) == 0.0       # binary
    # the task total: xmlcount + coding, max 2.0
    total, parts = total_reward("code", answer("def add(a, b):\n    return a + b\n") + "\n", tests)
    assert set(parts) == {"xmlcount", "coding_reward"} and parts["coding_reward"] == 1.5 and total <= 2.0


def test_batch_equals_one_by_one():
    comps = [answer("def add(a, b):\n    return a + b\n"), answer("def add(a, b):\n    return 3\n"),
             "no code", answer("def add(a, b):\n    while True: pass\n")]
    exs = [{"tests": IMPORT_TESTS_2}] * len(comps)
    # a 1 s wall clock for the infinite loop (the default is 10 s)
    batch = functools.partial(sandbox.run_batch, timeout_s=1.0)
    one = functools.partial(sandbox.run_tests, timeout_s=1.0)
    assert coding_rewards(comps, exs, run_batch=batch) == [coding_reward(c, e, run=one) for c, e in zip(comps, exs)] \
        == [1.5, 1.0, 0.0, 0.5]


def test_load_kodcode_prompt_and_errors(tmp_path):
    rows = [{"question": "Write add(a, b).", "solution": "def add(a, b):\n    return a + b\n",
             "test": IMPORT_TESTS_2, "test_info": []}]
    path = tmp_path / "kodcode.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (ex,) = load_task("code", path)
    # d1's prompt: the usual system prompt, the coding instruction (space before the blank line), the question
    assert ex["prompt"] == ("\nRespond in the following format:\n<reasoning>\n...\n</reasoning>\n<answer>\n...\n"
                            "</answer>\n\n\nYou are a coding expert. You will be given a coding problem to solve. "
                            "Solve it step by step. \n\nWrite add(a, b).")
    assert ex["tests"] == IMPORT_TESTS_2 and ex["answer"] == ex["solution"] == rows[0]["solution"]
    path.write_text(json.dumps({"question": "q", "solution": "s"}) + "\n")
    with pytest.raises(ValueError, match=r"kodcode.jsonl:1: missing field 'test'"):
        load_task("code", path)


@pytest.mark.skipif(not (SHARED_DATA / "kodcode_demo").exists(), reason="needs ../shared/data")
def test_kodcode_demo_reference_solutions_under_d1_rules(tmp_path, monkeypatch):
    # KodCode's pipeline demo (its own field names) rewritten in KodCode-Light-RL-10K's format, loaded,
    # and its verified solutions fenced inside <answer> (SOURCE.md: 107/109 pass under pytest). d1's
    # rules cost some: of the 109, with the import quirk repaired, 86 get the full 1.5; 10 import two
    # names (`from solution import gcd, lcm`: d1's regex substitutes the first and leaves ", lcm", a
    # syntax error), 5 tests name no target, 5 solutions define a helper first (d1 renames the FIRST def
    # to the target), 2 lose setup lines in the per-assert split, 1 other. With d1's quirk: 79
    items = [it for f in sorted((SHARED_DATA / "kodcode_demo").glob("*.json")) for it in json.loads(f.read_text())]
    path = tmp_path / "kodcode.json"
    path.write_text(json.dumps([{"question": it["instruction"], "solution": it["response"], "test": it["test_code"]}
                                for it in items]))
    exs = load_task("code", path)
    comps = [answer(ex["solution"].rstrip("\n") + "\n") for ex in exs]
    assert len(exs) == 109
    checked = {fixed: coding_rewards(comps, exs, fixed=fixed) for fixed in (True, False)}
    assert sum(s == 1.5 for s in checked[True]) == 86
    assert sum(s == 1.5 for s in checked[False]) == 79
    # docs/code-task.md: the two-process verdict gives every item the score of d1's one program (its import
    # leftovers, `__name__ == "__main__"`, printed output and the test's callables included)
    monkeypatch.setattr(sandbox, "STRICT_ASSERTS", False)
    assert {fixed: coding_rewards(comps, exs, fixed=fixed) for fixed in (True, False)} == checked
