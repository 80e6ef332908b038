"""
tools/sandbox_cost.py: what the code reward's execution costs. Programs per second that
lib/sandbox.py scores for one rollout group of G programs with unit tests each, one by one and
batched over the CPU cores. No model: the reward's side of a code-task round (docs/code-task.md).

Run (through tools/bench.py, which prints the line):
    python -m tools.bench --sandbox
"""
import os
import statistics
import time


def sandbox_cost(group=6, n_tests=10, repeats=3, workers=None):
    """Programs per second that sandbox.py scores: one rollout group of `group` programs with `n_tests`
    unit tests each (a correct function and asserts of which 3 fail), one by one (run_tests in a loop)
    and batched (run_batch over the CPU cores). Medians of `repeats`."""
    from lib import sandbox
    program = "def f(x):\n    return 3 * x + 1\n"
    tests = [f"assert f({k}) == {3 * k + 1 + (k < 3)}" for k in range(n_tests)]  # k = 0, 1, 2 fail
    jobs = [(program, tests)] * group
    expect = [[k >= 3 for k in range(n_tests)]] * group
    res = {"mode": sandbox.isolation_mode(), "group": group, "tests": n_tests, "workers": workers or os.cpu_count()}
    for name, run in (("sequential", lambda: [sandbox.run_tests(p, t) for p, t in jobs]),
                      ("batched", lambda: sandbox.run_batch(jobs, workers=workers))):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            assert run() == expect  # a benchmark that scores wrongly measures nothing
            times.append(time.perf_counter() - t0)
        res[f"{name}_programs_per_s"] = group / statistics.median(times)
    res["speedup"] = res["batched_programs_per_s"] / res["sequential_programs_per_s"]
    return res
