"""
lab/strict_check.py: the strict verdict (sandbox/run.py's two-process check) on the code benchmarks'
reference solutions, against d1's plain asserts (docs/code-task.md explains every disagreement). Per
benchmark: the items passing every test in each mode, those where the modes disagree (named), the share
of tests with a verdict from the checker ("covered"), and the seconds per program in each mode.

Run (the data files are local, as for eval.py --canonical):
    python -m lab.strict_check humaneval:../shared/data/humaneval/HumanEval.jsonl.gz \\
        mbpp:../shared/data/mbpp/sanitized-mbpp.json mbpp_full:../shared/data/mbpp/mbpp.jsonl
"""
import argparse
import time
from concurrent.futures import ThreadPoolExecutor

from eval import load_items
from sandbox import run as sandbox
from sandbox.code_prep import benchmark_program
from taskdata.parsers import EVAL_TEST_TIMEOUT_S, EVAL_TIMEOUT_S


def run_mode(jobs, strict, workers):
    """[(passed, covered)] per (program, tests) job, and the seconds the whole list took."""
    def one(job):
        outcome = {}
        passed = sandbox.run_tests(*job, strict=strict, outcome=outcome, timeout_s=EVAL_TIMEOUT_S,
                                   test_timeout_s=EVAL_TEST_TIMEOUT_S)
        return passed, outcome.get("covered") or [False] * len(passed)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(one, jobs))
    return results, time.perf_counter() - t0


def ok(passed):
    return bool(passed) and all(passed)  # pass@1: every test


def strict_check(task, path, full=False, workers=2):
    """The reference solutions of one benchmark in both modes -> a dict of counts, names and seconds."""
    items = load_items(task, path, full)
    jobs = [(benchmark_program(ex, ex["solution"]), list(ex["unit_tests"])) for _, ex in items]
    (plain, s_plain), (strict, s_strict) = run_mode(jobs, False, workers), run_mode(jobs, True, workers)
    names = [ex["task_id"] for _, ex in items]
    n_tests = sum(len(p) for p, _ in strict)
    return {"items": len(items), "plain": sum(ok(p) for p, _ in plain), "strict": sum(ok(p) for p, _ in strict),
            "differ": [(n, sum(a), sum(b), len(a)) for n, (a, _), (b, _) in zip(names, plain, strict) if a != b],
            "covered": sum(sum(c) for _, c in strict) / max(1, n_tests), "tests": n_tests,
            "ms_plain": 1000 * s_plain / len(jobs) * workers, "ms_strict": 1000 * s_strict / len(jobs) * workers}


def main(argv=None):
    p = argparse.ArgumentParser(description="reference solutions under strict vs plain asserts")
    p.add_argument("benchmarks", nargs="+", help="task:path (mbpp_full:path = the mbpp task with --full)")
    p.add_argument("--workers", type=int, default=2, help="sandboxes at a time")
    args = p.parse_args(argv)
    print("| benchmark | items | pass, plain | pass, strict | tests covered | ms / program, plain -> strict |")
    print("|---|---|---|---|---|---|")
    differ = []
    for spec in args.benchmarks:
        task, path = spec.split(":", 1)
        full = task.endswith("_full")
        r = strict_check(task.removesuffix("_full"), path, full, args.workers)
        print(f"| {task} | {r['items']} | {r['plain']} | {r['strict']} | {100 * r['covered']:.1f} % of "
              f"{r['tests']} | {r['ms_plain']:.0f} -> {r['ms_strict']:.0f} |")
        differ += [f"{task} {n}: plain {a}/{k} tests, strict {b}/{k}" for n, a, b, k in r["differ"]]
    print("\n".join(["differences:"] + differ) if differ else "no differences")


if __name__ == "__main__":
    main()
