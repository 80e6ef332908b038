"""
Tests for the code benchmarks: their loaders (tasks.py), the eval parser (parsers.parse_code_eval,
score_code_batch), eval.py's --canonical path over the real files (every reference solution of
HumanEval and of d1's 257 MBPP items passes, run in sandbox/run.py), and the code reward on benchmark
items (rewards.coding_reward's program_prefix / unit_tests path, total_rewards == total_reward).

Run: python -m pytest tests/test_code_eval.py -q
"""
import json
import sys

import pytest

import eval as evaluation
import tasks
from conftest import REPO, SHARED_DATA, run, write_digit_model
from taskdata.code_data import check_tests
from taskdata.parsers import parse_code_eval, score_code_batch
from ops.metrics import read_metrics
from ops.results import canonical
from rewards import coding_reward
from sandbox import contain
from tasks import total_reward, total_rewards

HUMANEVAL = SHARED_DATA / "humaneval" / "HumanEval.jsonl.gz"
MBPP = SHARED_DATA / "mbpp" / "sanitized-mbpp.json"
LEETCODE_TEST = SHARED_DATA / "leetcode_dataset" / "LeetCodeDataset-v0.2.0-test.jsonl.gz"
needs_data = pytest.mark.skipif(not HUMANEVAL.exists(), reason="needs ../shared/data")
ADD_SOLUTION = "def add(a, b):\n    return a + b\n"
KODCODE_TESTS = "from solution import add\n\ndef test_a():\n    assert add(1, 2) == 3\n\ndef test_b():\n    assert add(0, 0) == 0\n"


def in_process(jobs):
    """A trusted runner for OUR OWN test programs only: exec in a dict, each test after it."""
    out = []
    for program, tests in jobs:
        ns, ok = {}, True
        try:
            exec(program, ns)
        except Exception:
            ok = False
        res = []
        for t in tests:
            try:
                if not ok:
                    raise RuntimeError
                exec(t, ns)
                res.append(True)
            except Exception:
                res.append(False)
        out.append(res)
    return out


def test_parse_code_eval_fences():
    assert parse_code_eval("a\n```python\nx = 1\n```\n```python\ny = 2\n```") == "x = 1\n"
    # generous (eval only): any language tag, and a fence that the generation length cut off
    assert parse_code_eval("```py\nx = 1\n```") == "x = 1\n"
    assert parse_code_eval("<answer>\n```python\ndef f():\n    return 1") == "def f():\n    return 1"
    assert parse_code_eval("def f(): return 1") == ""


def test_check_tests_splits_asserts_or_keeps_whole():
    src = "\nMETADATA = {}\n\ndef check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n"
    tests = check_tests(src, "inc")
    assert len(tests) == 2 and all("candidate = inc" in t and "METADATA = {}" in t for t in tests)
    assert tests[1].endswith("assert candidate(2) == 3")
    # a check with other statements (a loop) stays one test that calls check
    loop = "def check(candidate):\n    for i in range(3):\n        assert candidate(i) == i + 1\n"
    assert check_tests(loop, "inc") == [loop + "\ncheck(inc)"]
    # independent: run them against a right and a wrong inc
    assert in_process([("def inc(x): return x + 1", tests + check_tests(loop, "inc"))]) == [[True] * 3]
    assert in_process([("def inc(x): return 2", tests)]) == [[True, False]]
    with pytest.raises(ValueError, match="check"):
        check_tests("assert 1", "inc")


def test_score_code_batch_prefix_and_partial_tests():
    ex = {"program_prefix": "import math\n", "unit_tests": ["assert root(4) == 2", "assert root(9) == 3"]}
    good = "<answer>\n```python\ndef root(x):\n    return math.isqrt(x)\n```\n</answer>"
    half = "```python\ndef root(x):\n    return 2\n```"
    recs = score_code_batch([good, half, "no code"], [ex] * 3, run_batch=in_process)
    assert [(r["correct"], r["tests_passed"], r["tests_total"]) for r in recs] == [(True, 2, 2), (False, 1, 2),
                                                                                    (False, 0, 2)]


@needs_data
def test_loaders_counts_and_prompts():
    he = tasks.load_task("humaneval", HUMANEVAL)
    assert len(he) == 164 and he[0]["entry_point"] == "has_close_elements"
    assert he[0]["prompt"].startswith(tasks.SYSTEM_PROMPT + tasks.CODE_RL_INSTRUCTION + "Complete the following")
    # d1's MBPP = the sanitized records with task_id 11-510
    items = tasks.heldout("mbpp", MBPP)
    assert len(items) == 257 and all(11 <= ex["task_id"] <= 510 for _, ex in items)
    assert len(tasks.heldout("mbpp", MBPP, full=True)) == 427
    full = tasks.load_task("mbpp", SHARED_DATA / "mbpp" / "mbpp.jsonl")
    assert len(full) == 974 and "Your code should pass this test:\nassert " in full[0]["question"]
    lc = tasks.load_task("leetcode", LEETCODE_TEST)
    assert len(lc) == 200 and lc[0]["entry_point"].startswith("Solution().")
    assert len(tasks.load_task("mbpp_plus", SHARED_DATA / "mbpp_plus" / "MbppPlus.jsonl.gz")) == 378


@needs_data
@pytest.mark.parametrize("task,path,expected", [("humaneval", HUMANEVAL, 164), ("mbpp", MBPP, 257)])
def test_reference_solutions_pass_through_the_eval_path(tmp_path, task, path, expected):
    # eval.py --canonical: reference solutions written as completions, parsed, run in sandbox/run.py,
    # saved as JSONL + manifest, read back and re-scored (the --rescore path)
    items = evaluation.load_items(task, str(path))
    passed, n, failed = canonical(task, items, False, evaluation.data_identity(str(path)), tmp_path, tasks.TASKS)
    assert (passed, n, failed) == (expected, expected, [])
    # the manifest says how the code was isolated (docs/code-task.md)
    assert json.loads((tmp_path / f"{task}_canonical" / "manifest.json").read_text())["sandbox"] == contain.mode()


@needs_data
def test_benchmark_items_as_rl_rewards():
    # LeetCode train items as RL data: d1's reward list on the reference solution; a wrong one gets
    # the bonus and xmlcount only
    ex = {**tasks.load_task("leetcode", LEETCODE_TEST)[0], "task": "leetcode"}
    good = f"<reasoning>\nok\n</reasoning>\n<answer>\n```python\n{ex['solution']}```\n</answer>\n"
    bad = good.replace("return", "return 0 and")
    assert coding_reward(good, ex, run=lambda p, t: in_process([(p, t)])[0]) == 1.5
    totals = total_rewards([good, bad], [ex, ex])
    # the batched total equals the one-by-one total, component by component
    assert totals == [total_reward("leetcode", c, ex) for c in (good, bad)]
    assert totals[0][1]["coding_reward"] == 1.5 and totals[1][1]["coding_reward"] == 0.5


def test_grpo_round_on_a_code_mixture_logs_both_reward_lists(tmp_path):
    # one diffu-GRPO round of the tiny model on KodCode rows mixed with the code toy: every completion is
    # scored by its own task's reward list (code: xmlcount + coding; pbe: coding), programs in the sandbox
    rows = [{"question": "Write add(a, b).", "solution": ADD_SOLUTION, "test": KODCODE_TESTS}] * 4
    data = tmp_path / "kodcode.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model_dir = tmp_path / "tiny"
    write_digit_model(model_dir)
    out = tmp_path / "grpo"
    run([sys.executable, str(REPO / "grpo.py"), "--task", "code,pbe", "--data", str(data), "--model-dir",
         str(model_dir), "--out-dir", str(out), "--num-examples", "4", "--prompts-per-step", "4",
         "--groups-per-micro", "2", "--num-generations", "2", "--num-iterations", "1", "--gen-length", "48",
         "--block-length", "16", "--diffusion-steps", "3", "--rounds", "1", "--preset", "tiny"], REPO)  # pbe's canvas
    (m,) = read_metrics(str(out))
    assert {"r/coding_reward", "r/xmlcount"} <= set(m) and 0.0 <= m["r/coding_reward"] <= 1.5
    # the code rewards' isolation, decided before the model loaded, in train_args.json and on the metrics line
    assert m["sandbox"] == json.loads((out / "train_args.json").read_text())["sandbox_mode"] == contain.mode()
    # each r/<name> is a sum over the completions that have it, divided by all: they add up to the reward
    assert m["reward"] == pytest.approx(m["r/coding_reward"] + m["r/xmlcount"])
