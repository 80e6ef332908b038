"""
How long the learner's path is: the README from its first line to the end of "The algorithm, and
where each line lives", then grpo.py to the end of its loop; and the share of grpo.py's non-blank
lines that are the algorithm. Counted as plumbing: imports, RESUME_MAY_CHANGE, the functions for
flags, checks, data loading, policy set-up and logging, and in `__main__` everything but the
round's steps 1-5 (the stalled-run stop inside step 5 is plumbing too). The rest, the module
docstring included, is the algorithm.

Run:  python -m tools.reading_path                      # this checkout
      git show REV:README.md > /tmp/R.md; git show REV:grpo.py > /tmp/g.py
      python -m tools.reading_path /tmp/R.md /tmp/g.py  # another revision
"""
import ast
import sys

PLUMBING_FUNCTIONS = {"parse_args", "check_args", "load_rl_data", "load_policy", "load_reference", "round_metrics",
                      "round_cost", "preset_rollout"}
ALGORITHM_SECTION = "## The algorithm, and where each line lives"


def readme_lines(text):
    """Lines from the top to the end of the algorithm section (the next '## ' heading)."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(ALGORITHM_SECTION))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return end


def plumbing_lines(src):
    """The 1-based line numbers of grpo.py that are plumbing (see the module docstring)."""
    lines, plumb = src.split("\n"), set()
    for node in ast.parse(src).body:
        span = set(range(node.lineno, node.end_lineno + 1))
        if isinstance(node, (ast.Import, ast.ImportFrom)) or \
                (isinstance(node, ast.FunctionDef) and node.name in PLUMBING_FUNCTIONS) or \
                (isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "RESUME_MAY_CHANGE" for t in node.targets)):
            plumb |= span
        elif isinstance(node, ast.If):  # if __name__ == "__main__": set-up, the loop, cleanup
            find = lambda pred, lo=0: next(i for i, line in enumerate(lines, 1) if i > lo and pred(line))
            loop = find(lambda line: line.strip().startswith("for rnd in bar"))
            step6 = find(lambda line: "# 6. logging" in line)
            plumb |= set(range(node.lineno, loop)) | set(range(step6, node.end_lineno + 1))
            stall = [i for i in range(loop, step6) if "max_bad_steps" in lines[i - 1] or "stop_if_stalled" in lines[i - 1]]
            if stall:  # the stalled-run stop: a block up to the update's timing, or one call of 3 lines
                a = stall[0]
                b = a + 3 if "stop_if_stalled" in lines[a - 1] else find(lambda line: 'timing["update"]' in line, a)
                plumb |= set(range(a, b))
    return plumb


if __name__ == "__main__":
    readme, grpo = (sys.argv[1:3] if len(sys.argv) > 2 else ("README.md", "grpo.py"))
    src = open(grpo).read()
    n_readme, n_grpo = readme_lines(open(readme).read()), len(src.rstrip("\n").split("\n"))
    nonblank = [i for i, line in enumerate(src.split("\n"), 1) if line.strip()]
    algorithm = [i for i in nonblank if i not in plumbing_lines(src)]
    print(f"reading path: {n_readme} README lines + {n_grpo} grpo.py lines = {n_readme + n_grpo}")
    print(f"grpo.py: {len(nonblank)} non-blank lines, {len(algorithm)} of them the algorithm "
          f"({100 * len(algorithm) / len(nonblank):.0f} %)")
