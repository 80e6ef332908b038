"""
lab/builtin_hacks.py: the generic block of program-defined builtins against the code benchmarks
(docs/code-task.md, "A reward that cannot be gamed"). Every item gets a stub of its function (returning
None) plus program-defined builtins (abs, sum, len, ..., a class `math`), scored through
rewards.coding_rewards; --stub-only leaves the block out. The items at 1.0 are what the block won.

    python -m lab.builtin_hacks humaneval:../shared/data/humaneval/HumanEval.jsonl.gz \\
        mbpp:../shared/data/mbpp/sanitized-mbpp.json mbpp_plus:../shared/data/mbpp_plus/MbppPlus.jsonl.gz
"""
import argparse
import ast

import rewards
from eval import load_items

GENERIC = "".join(f"def {name}(*a, **k):\n    return {value}\n" for name, value in (
    ("abs", 0), ("sum", 0), ("len", 0), ("set", 0), ("sorted", 0), ("list", 0), ("tuple", 0), ("range", []),
    ("zip", []), ("isinstance", True), ("round", 0), ("all", True), ("any", True))) + (
    "class math:\n    def isclose(*a, **k):\n        return True\n    def fabs(*a, **k):\n        return 0\n")


def target(ex):
    """The item's function: its entry point, else the first function of its reference solution."""
    return (ex.get("entry_point") or next(n.name for n in ast.parse(ex["solution"]).body
                                          if isinstance(n, ast.FunctionDef))).split("(")[0]


def main(argv=None):
    p = argparse.ArgumentParser(description="the generic builtin-replacing block on every benchmark item")
    p.add_argument("benchmarks", nargs="+", help="task:path (eval.py's tasks; every record of the file)")
    p.add_argument("--stub-only", action="store_true", help="the stub alone, without the block")
    args = p.parse_args(argv)
    for spec in args.benchmarks:
        task, path = spec.split(":", 1)
        items = [ex for _, ex in load_items(task, path, task != "mbpp")]
        block = "" if args.stub_only else GENERIC
        completions = [f"```python\ndef {target(ex)}(*a, **k):\n    return None\n{block}```" for ex in items]
        scores = rewards.coding_rewards(completions, items)
        full = [ex["task_id"] for ex, s in zip(items, scores) if s == 1.0]
        print(f"{task}: {len(full)} of {len(items)} items at 1.0 {full[:10]}, mean {sum(scores) / len(scores):.4f}")


if __name__ == "__main__":
    main()
