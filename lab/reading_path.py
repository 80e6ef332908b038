"""
How long a learner's path through one d1 round is, measured on the code as it runs.

One round of grpo.py on the tiny model (CPU, seconds) under a trace hook: the lines of every function of
this repository the round enters, by file. The round is grpo.train's `for rnd in ...` loop up to its
"# 6." comment (logging and saving left out), whose own lines count as grpo.py's. Also printed:
sample.generate's lines and parameters, and the README's lines to the end of its algorithm section.

Run:  python -m lab.reading_path              # this checkout
      python -m lab.reading_path --all-steps  # the whole round: logging and the save included
"""
import argparse
import ast
import os
import runpy
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from modelio.checkpoint import make_tiny

REPO = Path(__file__).resolve().parent.parent
ALGORITHM_SECTION = "## The algorithm, and where each line lives"
ROUND_VAR = "rnd"        # grpo.train's loop variable: `for rnd in ...` is the round
ROUND_FUNCTION = "train"  # the function of grpo.py that holds the loop
ROUND_END = "# 6."       # the comment that opens the round's logging step
SKIP_PARTS = {"tests", ".venv", "out", ".git"}


def readme_lines(text):
    """Lines from the README's top to the end of the algorithm section (the next '## ' heading)."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith(ALGORITHM_SECTION)), None)
    if start is None:
        return len(lines)
    return next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))


def function_spans(path):
    """{first line of a function's code object: (start, end)} for every def and lambda in `path`;
    a decorated def's code starts at its first decorator, as CPython numbers it."""
    spans = {}
    for node in ast.walk(ast.parse(Path(path).read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            spans[first] = (first, node.end_lineno)
            spans.setdefault(node.lineno, (first, node.end_lineno))
        elif isinstance(node, ast.Lambda):
            spans.setdefault(node.lineno, (node.lineno, node.end_lineno))
    return spans


def round_loop(path):
    """(first, last) line of grpo.train's round loop up to ROUND_END, and the loop's whole last line."""
    tree = ast.parse(Path(path).read_text())
    train = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == ROUND_FUNCTION)
    loop = next(n for n in ast.walk(train) if isinstance(n, ast.For) and getattr(n.target, "id", "") == ROUND_VAR)
    lines = Path(path).read_text().split("\n")
    end = next((i for i in range(loop.lineno, loop.end_lineno + 1) if lines[i - 1].strip().startswith(ROUND_END)),
               loop.end_lineno + 1)
    return loop.lineno, end - 1, loop.end_lineno


def project_file(filename):
    p = Path(filename).resolve()
    try:
        rel = p.relative_to(REPO)
    except ValueError:
        return None
    return None if SKIP_PARTS & set(rel.parts) or p.suffix != ".py" else str(rel)


def trace_round(argv, all_steps=False):
    """Run grpo.py with `argv` under a trace hook -> {file: set of line numbers} of the functions the
    round entered, plus the round loop's own lines."""
    grpo = str(REPO / "grpo.py")
    first, algo_end, loop_end = round_loop(grpo)
    last = loop_end if all_steps else algo_end
    state = {"in_round": False}
    entered = set()  # (file, code first line)

    def local(frame, event, arg):  # grpo.train's frame only: where in the loop it is
        if event == "line":
            state["in_round"] = first <= frame.f_lineno <= last
        return local

    def hook(frame, event, arg):
        code = frame.f_code
        if code.co_name == ROUND_FUNCTION and os.path.abspath(code.co_filename) == grpo:
            return local
        if state["in_round"]:
            f = project_file(code.co_filename)
            if f:
                entered.add((f, code.co_firstlineno))
        return None

    old_argv, sys.argv = sys.argv, [grpo, *argv]
    sys.settrace(hook)
    try:
        runpy.run_path(grpo, run_name="__main__")
    finally:
        sys.settrace(None)
        sys.argv = old_argv
    lines = defaultdict(set)
    spans = {}
    for f, start in entered:
        if f not in spans:
            spans[f] = function_spans(REPO / f)
        if start in spans[f]:
            a, b = spans[f][start]
            lines[f] |= set(range(a, b + 1))
    lines["grpo.py"] |= set(range(first, last + 1))
    return lines


def generate_shape(path):
    """(lines, parameters) of sample.py's generate, def to end."""
    for node in ast.parse(Path(path).read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == "generate":
            a = node.args
            n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
            return node.end_lineno - min([node.lineno] + [d.lineno for d in node.decorator_list]) + 1, n
    return 0, 0


def main(argv=None):
    p = argparse.ArgumentParser(description="the function-level reading path of one d1 round")
    p.add_argument("--all-steps", action="store_true", help="count the round's logging and save too")
    args = p.parse_args(argv)
    os.chdir(REPO)
    os.environ.setdefault("TQDM_DISABLE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        make_tiny(os.path.join(tmp, "init"))
        lines = trace_round(["--model-dir", os.path.join(tmp, "init"), "--out-dir", os.path.join(tmp, "grpo"),
                             "--rounds", "1", "--device", "cpu"], args.all_steps)
    total = sum(len(v) for v in lines.values())
    folders = {str(Path(f).parent) for f in lines if "/" in f}
    print(f"one d1 round{'' if args.all_steps else ' (steps 1-5)'}: {total} lines at function level, "
          f"{len(lines)} files, {len(folders)} folders")
    for f in sorted(lines, key=lambda f: (-len(lines[f]), f)):
        print(f"  {len(lines[f]):5d}  {f}")
    n, k = generate_shape(REPO / "sample.py")
    print(f"sample.generate: {n} lines, {k} parameters")
    readme = REPO / "README.md"
    if readme.exists():
        print(f"README to the end of its algorithm section: {readme_lines(readme.read_text())} lines")


if __name__ == "__main__":
    main()
