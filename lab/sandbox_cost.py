"""
lab/sandbox_cost.py: what the code reward's execution costs (docs/code-task.md): programs per second that
sandbox/run.py scores for one rollout group, one by one and batched over the CPU cores. No model.

Run (through lab/bench.py, which prints the line):
    python -m lab.bench --sandbox
"""
import os
import statistics
import time

from sandbox import run as sandbox


def sandbox_cost(group=6, n_tests=10, repeats=3, workers=None):
    """Programs per second that sandbox/run.py scores: one rollout group of `group` programs with `n_tests`
    unit tests each (a correct function and asserts of which 3 fail), one by one (run_tests in a loop)
    and batched (run_batch over the CPU cores), with the checker's two-process verdict and with d1's
    plain asserts (the two interleaved, so that load on the machine hits both alike). Medians of `repeats`."""
    program = "def f(x):\n    return 3 * x + 1\n"
    tests = [f"assert f({k}) == {3 * k + 1 + (k < 3)}" for k in range(n_tests)]  # k = 0, 1, 2 fail
    jobs = [(program, tests)] * group
    expect = [[k >= 3 for k in range(n_tests)]] * group
    res = {"mode": sandbox.isolation_mode(), "group": group, "tests": n_tests, "workers": workers or os.cpu_count()}
    runs = {f"{name}_{check}": (lambda run=run, strict=(check == "strict"): run(strict))
            for name, run in (("sequential", lambda strict: [sandbox.run_tests(p, t, strict=strict) for p, t in jobs]),
                              ("batched", lambda strict: sandbox.run_batch(jobs, workers=workers, strict=strict)))
            for check in ("strict", "plain")}
    times = {k: [] for k in runs}
    for _ in range(repeats):
        for k, run in runs.items():
            t0 = time.perf_counter()
            assert run() == expect  # a benchmark that scores wrongly measures nothing
            times[k].append(time.perf_counter() - t0)
    for k in runs:
        res[f"{k}_programs_per_s"] = group / statistics.median(times[k])
    res["speedup"] = res["batched_strict_programs_per_s"] / res["sequential_strict_programs_per_s"]
    res["strict_cost"] = res["batched_plain_programs_per_s"] / res["batched_strict_programs_per_s"] - 1
    return res


def format_sandbox_cost(res):
    """The line lab/bench.py --sandbox prints."""
    return (f"sandbox ({res['mode']}), G = {res['group']} programs x {res['tests']} tests, the checker's verdict: "
            f"sequential {res['sequential_strict_programs_per_s']:.1f} programs/s, batched over {res['workers']} "
            f"workers {res['batched_strict_programs_per_s']:.1f} ({res['speedup']:.2f}x); d1's plain asserts: "
            f"sequential {res['sequential_plain_programs_per_s']:.1f}, batched {res['batched_plain_programs_per_s']:.1f};"
            f" the checker costs {100 * res['strict_cost']:+.0f} % batched")
