"""
What d1's coding reward does to a completion and its tests before anything runs (d1's coding_reward_func,
in later commits of its reward_func.py; docs/coding.md §1.2-1.3): read the program out of the completion
(extract_code), and turn KodCode's pytest source into a program plus test calls for sandbox.run.run_tests
(prepare_code_tests), d1's quirks included. The program it returns is a SplitProgram: d1's one program
text, which also names its parts for the two-process check (docs/code-task.md): what the program server
runs (the model's solution) and what the checker runs as trusted code (the test source).
rewards.coding_reward scores the result (share of tests passed, + 0.5 when the fence lies inside
<answer>); rewards.prepare_code_tests is this under rewards.D1_BUGS. Pure string work: nothing here
executes code.

    from sandbox.code_prep import extract_code, prepare_code_tests
    code, in_answer = extract_code("<answer>\\n```python\\ndef plus(a, b):\\n    return a + b\\n```\\n</answer>")
    prepare_code_tests(code, "assert add(1, 2) == 3")
    # -> ("def add(a, b):\\n    return a + b\\n\\ndef test_case_0():\\n    assert add(1, 2) == 3", ["test_case_0()"])
"""
import ast
import builtins
import keyword
import re
import sys

from sandbox.checker import names_in

_CODE_FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)      # d1: the FIRST python fence only
_ANSWER_SPAN = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)  # d1: the first answer span
_IMPORT_TARGET = re.compile(r"from solution import (\w+)")      # KodCode's import-style tests
_IMPORT_LINE = re.compile(r"from solution import [^\n]*")
_ASSERT_TARGET = re.compile(r"assert\s+(\w+)\s*\(")            # assert-style tests (MBPP-like)
_FIRST_DEF = re.compile(r"def (\w+)\(")
_TEST_FUNC = re.compile(r"def (\w+)\(\):")
# d1's is_safe_code: any of these substrings and the program is not run (reward = bonus only). Not a
# defence (importlib, open() and __builtins__ pass; " oscillate" is refused): kept for d1's reward values
D1_CODE_BLOCKLIST = (" os", " sys", " subprocess", " shutil", " socket", " psutil", " ctypes", " pathlib",
                     " builtins", "__import__")


class SplitProgram(str):
    """A program as d1 runs it (one text: the prefix, the model's code, the test functions, in one
    namespace), which also carries its parts for the two-process check (sandbox/run.py with
    STRICT_ASSERTS): `untrusted`, what the program server runs; `prefix`, trusted code the checker runs
    first (a benchmark's prompt or imports: the program may replace only its stub functions);
    `test_source`, trusted test code the checker runs after binding the program's names; and `targets`,
    the names the item asks the program to define (sandbox/checker.py binds no other name of the
    program that would shadow a builtin, a module or a name of the test's)."""

    def __new__(cls, text, untrusted, prefix="", test_source="", targets=()):
        self = super().__new__(cls, text)
        self.untrusted, self.prefix, self.test_source, self.targets = untrusted, prefix, test_source, tuple(targets)
        return self


def item_targets(example):
    """The names a benchmark item asks the program to define: its entry point's name (LeetCode's
    `Solution().m`: Solution), else the top-level functions and classes of its reference solution
    (MBPP names no entry point; MBPP 126's is `sum`)."""
    entry = example.get("entry_point")
    if entry:
        m = re.match(r"\w+", entry)
        return (m.group(0),) if m else ()
    try:
        tree = ast.parse(example.get("solution") or "")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    return tuple(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))


def benchmark_program(example, code):
    """A benchmark item's program: its program_prefix (HumanEval's prompt, MBPP's imports) and the
    model's code, with the item's targets."""
    prefix = example["program_prefix"]
    program = prefix + "\n" + code
    return SplitProgram(program, untrusted=program, prefix=prefix, targets=item_targets(example))


def extract_code(completion):
    """(code of the first ```python fence or "", whether that fenced block lies inside the first
    <answer>...</answer> span), as d1 reads a completion: ```py, a bare ``` or unfenced code is no code."""
    m = _CODE_FENCE.search(completion)
    code = m.group(1) if m else ""
    answer = _ANSWER_SPAN.search(completion)
    return code, bool(answer and code and f"```python\n{code}```" in answer.group(1))


def prepare_code_tests(code, tests, *, fixed=False):
    """d1's test preparation -> (program, test calls) for sandbox.run_tests, or None when the tests
    name no target function (d1: reward 0, no bonus), or "" when the program is not run (no def in
    the code, or d1's blocklist: reward = bonus only).
    The first `def` of the code is renamed to the tests' target (`from solution import X`, else the
    first `assert X(`). Tests with >= 2 `def f():` functions run one call each after the program;
    otherwise every line that starts with `assert` becomes its own test function and the rest is
    dropped. d1 quirk (fixed=False): the dropped lines include `from solution import X`, which is
    where d1 substitutes the solution, so one-function import-style tests run WITHOUT the solution
    and all fail; fixed=True puts the solution in front (and skips the blocklist).
    For the two-process check (the program's text stays d1's either way) the SplitProgram's
    `targets`, the program names the checker may bind over a builtin, hold d1's target only when the
    tests declare it (`from solution import sum`): an `assert abs(` or `assert isinstance(` target is
    still d1's for the renaming, so an honest program scores d1's value (its first def became `abs`),
    but the test keeps the builtin. After a split, the split's test source opens with a `global` line
    naming what the dropped lines bound (setup_names): those names stay the test's, never the program's."""
    target = _IMPORT_TARGET.search(tests) or _ASSERT_TARGET.search(tests)
    if target is None:
        return None
    target, import_style = target.group(1), target.re is _IMPORT_TARGET
    # the names the tests take from the solution: every name of their `from solution import` lines;
    # d1's `assert X(` target only when it is no builtin (an undeclared `abs` is the test's, not the program's)
    targets = [n.strip().split(" ")[0] for line in _IMPORT_LINE.findall(tests)
               for n in line[len("from solution import "):].strip("() ").split(",")]
    if import_style or not hasattr(builtins, target):
        targets.insert(0, target)
    defined = _FIRST_DEF.search(code)
    if defined is None:
        return ""
    solution = re.sub(rf"\bdef {re.escape(defined.group(1))}\b", f"def {target}", code)
    if not fixed and any(bad in solution for bad in D1_CODE_BLOCKLIST):
        return ""
    names, held = _TEST_FUNC.findall(tests), ""
    split = len(names) <= 1
    if split:
        # d1's split_test_function: one test function per assert line, everything else dropped
        asserts = [line.strip() for line in tests.splitlines() if line.strip().startswith("assert")]
        names = [f"test_case_{k}" for k in range(len(asserts))]
        unsplit, tests = tests, "\n".join(f"def {n}():\n    {a}" for n, a in zip(names, asserts))
        held = setup_names(unsplit, tests, {target, *targets})
        # a no-op when run (the snippets still raise NameError on them, as in d1), read by the checker
        held = f"global {', '.join(sorted(held))}\n" if held else ""
    if import_style and not (split and fixed):
        # d1: every `from solution import X` becomes the solution itself (none are left after a split)
        program = _IMPORT_TARGET.sub(lambda _: solution, tests)
        # the checker's parts: the tests without the import lines, which the program's names stand for,
        # and the program as d1's text has it: the solution once per import line, each followed by the
        # rest of its line (`from solution import gcd, lcm` leaves ", lcm" on the solution's last line)
        untrusted = "" if split else "\n".join(solution + tests[m.end():].split("\n", 1)[0]
                                               for m in _IMPORT_TARGET.finditer(tests))
        test_source = _IMPORT_LINE.sub("", tests)
    else:
        program = solution + "\n" + tests
        untrusted, test_source = solution, tests
    test_source = held + test_source  # after a split: the global line
    return SplitProgram(program, untrusted, test_source=test_source, targets=targets), [f"{n}()" for n in names]


def setup_names(tests, split_tests, keep=()):
    """The names the unsplit `tests` bind themselves (assignments, defs, classes, imports, loop targets,
    parameters: the setup lines and helpers d1's per-assert split drops), which stay the test's: a
    program that defines `data` or the test's helper `to_list` must not pass the snippet that reads it.
    Not among them: `keep` (d1's target, which d1 renames the program's first def to, and the names of
    `from solution import`: the program's) and standard-library module names (the checker binds those
    only to its own module, when the program imported it, as d1's one namespace has it). Tests that do
    not parse: every identifier of `split_tests` but `keep`, so that no free name is the program's."""
    try:
        tree = ast.parse(tests)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        bound = {w for w in re.findall(r"\w+", split_tests) if w.isidentifier() and not keyword.iskeyword(w)}
    else:
        solution = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and n.module == "solution" for a in n.names}
        bound = names_in(tests)[1] - solution
    # identifiers only: names_in counts `from m import *` as binding "*"
    return {n for n in bound - set(keep) - set(sys.stdlib_module_names) if n.isidentifier()}
