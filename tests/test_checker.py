"""
Tests for the checker and the program server (sandbox/checker.py, sandbox/server.py, through
sandbox/worker.run_checked; docs/code-task.md): the test forms of the benchmarks run as remote calls (plain
functions, LeetCode's Solution methods, in-place mutation, stateful objects, generators, expected
exceptions), and the programs of tests/test_reward_integrity.py that do not need containment (classes
1, 2, 3, 5, 6) pass nothing. tests/test_reward_integrity.py runs them all through rewards.coding_rewards.

Run: python -m pytest tests/test_checker.py -q
"""
import pytest

import test_reward_integrity as hacks
from sandbox.worker import run_checked


def run_program(program, tests):
    return [why is None for why in run_checked(program, tests)]


FORMS = {
    "plain function": ("def add(a, b):\n    return a + b\n", hacks.ADD_TESTS),
    "HumanEval candidate": ("def f(xs):\n    return sorted(xs)\n",
                            ["METADATA = {}\ncandidate = f\nassert candidate([3, 1]) == [1, 3]"]),
    "MBPP set()": ("def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n", hacks.SET_TESTS),
    "LeetCode Solution": ("class Solution:\n    def m(self, s):\n        return s[::-1]\n",
                          ['candidate = Solution().m\nassert candidate(s="ab") == "ba"']),
    "in-place mutation": ("def srt(a, d):\n    a.sort()\n    d['k'] = 1\n",
                          ["x, y = [3, 1, 2], {}\nsrt(x, y)\nassert x == [1, 2, 3] and y == {'k': 1}"]),
    "stateful object": ("class C:\n    def __init__(self):\n        self.n = 0\n"
                        "    def inc(self):\n        self.n += 1\n        return self.n\n",
                        ["c = C()\nc.inc()\nassert c.inc() == 2\nassert c.n == 2"]),
    "generator": ("def g(n):\n    yield from range(n)\n", ["assert list(g(3)) == [0, 1, 2]"]),
    "expected exceptions": ("class Bad(ValueError):\n    pass\n"
                            "def f(x):\n    if x < 0:\n        raise Bad('neg')\n    return x\n",
                            ["import pytest\nwith pytest.raises(ValueError, match='neg'):\n    f(-1)",
                             "import pytest\nwith pytest.raises(Bad):\n    f(-1)", "assert f(1) == 1"]),
    "a Counter is its dict": ("from collections import Counter\ndef c(s):\n    return Counter(s)\n",
                              ["assert c('aab') == {'a': 2, 'b': 1}"]),
    # the test's callables run in the checker, when the program calls them (a key function, a builtin,
    # one that raises, one that calls the program back while the program waits for it)
    "callbacks": ("def by(xs, key):\n    return sorted(xs, key=key)\n"
                  "def apply(f, x):\n    try:\n        return f(x)\n"
                  "    except ValueError as e:\n        return str(e)\n"
                  "def double(x):\n    return 2 * x\n",
                  ["assert by([3, -1, 2], key=lambda x: x * x) == [-1, 2, 3]",
                   "assert by(['b', 'A'], str.lower) == ['A', 'b']",
                   "def bad(x):\n    raise ValueError('no ' + str(x))\nassert apply(bad, 4) == 'no 4'",
                   "assert apply(lambda x: double(x) + 1, 5) == 11",
                   "seen = []\napply(seen.append, 7)\nassert seen == [7]"]),
    "a builtin class as an argument": ("def drop(xs, t):\n    return [x for x in xs if not isinstance(x, t)]\n",
                                       ["assert drop((4, 7.7, 'a'), int) == [7.7, 'a']",  # MBPP 533's form
                                        "assert drop([ValueError, 1], type) == [1]"]),
    "printed output": ("def hello(n):\n    for i in range(n):\n        print('hi', i)\n"
                       "def shout():\n    print('!')\n    raise KeyError('k')\n",
                       ["import io, contextlib\nbuf = io.StringIO()\n"
                        "with contextlib.redirect_stdout(buf):\n    hello(2)\n"
                        "assert buf.getvalue() == 'hi 0\\nhi 1\\n'",
                        "import io, sys, pytest\nsys.stdout = buf = io.StringIO()\n"
                        "try:\n    with pytest.raises(KeyError):\n        shout()\n"
                        "finally:\n    sys.stdout = sys.__stdout__\nassert buf.getvalue() == '!\\n'"]),
}


@pytest.mark.parametrize("name", sorted(FORMS))
def test_honest_programs_pass_every_form(name):
    program, tests = FORMS[name]
    assert run_program(program, tests) == [True] * len(tests)


HACKS = {
    "1 the rewrite fails": (hacks.REWRITE_FAILS, hacks.ADD_TESTS),
    "2 patched builtins": (hacks.PATCHED_BUILTINS, hacks.SET_TESTS),
    "3 tracing hooks": (hacks.TRACING, hacks.ADD_TESTS),
    "5 a race": (hacks.RACE, hacks.RACE_TESTS),
    "6 the test's frame": (hacks.FRAME, hacks.ADD_TESTS),
    "always-equal object": ("class A:\n    def __eq__(s, o):\n        return True\n    def __bool__(s):\n"
                            "        return True\ndef add(a, b):\n    return A()\n",
                            hacks.ADD_TESTS + ["assert add(1, 2)"]),
    "raises StopIteration into the test": ("def add(a, b):\n    raise StopIteration\n",
                                           ["for _ in [0]:\n    assert add(1, 2) == 3"]),
}


@pytest.mark.parametrize("name", sorted(HACKS))
def test_hacks_pass_nothing(name):
    program, tests = HACKS[name]
    assert run_program(program, tests) == [False] * len(tests)
