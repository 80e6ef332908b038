"""
The other task families tried as the testbed (docs/testbed.md), besides taskdata/countdown_toy.py, in
d1's format with clean labels, held out by structure:

  addition   "Add 4721+389": one line per column from the right ("1+9=10", "2+8+1=11", ...), then the sum;
             held out: the operand-length pairs in HELD_OUT_LENGTHS.
  sudoku     the toy's puzzles (2-6 blanks): one line per blank in an order where each is forced ("b3=2"),
             then the grid; held out: the test grids of puzzles.split_grids.
  toy        the control: make run's toy puzzles, clean labels, the bare grid as the completion.

countdown_toy_variant() is --task countdown_toy's record with a family's maker (or another label order of
the testbed, countdown_toy.ORDERS); this file runs a script with it in place:

    python -m lab.testbed_families --family sudoku sft.py --task countdown_toy --out-dir out/tb-sudoku ...
    python -m lab.testbed_families --order left grpo.py --task countdown_toy ...
    python -m lab.testbed_families            # two samples of each family
"""
import argparse
import random
import re
import runpy
import sys
from dataclasses import replace
from functools import partial

import tasks
from taskdata import countdown_toy, puzzles
from taskdata.answers import first_tag_content

COMPLETION = countdown_toy.COMPLETION  # d1's format, as the testbed writes it
FAMILIES = ("addition", "sudoku", "toy")
HELD_OUT_LENGTHS = {(2, 4), (4, 2), (3, 5), (5, 3)}  # (digits of a, digits of b) never trained on


def _addition(rng, split):
    while True:
        la, lb = rng.randint(1, 5), rng.randint(1, 5)
        if ((la, lb) in HELD_OUT_LENGTHS) == (split == "test"):
            break
    a = rng.randint(10 ** (la - 1) if la > 1 else 0, 10 ** la - 1)
    b = rng.randint(10 ** (lb - 1) if lb > 1 else 0, 10 ** lb - 1)
    da, db, carry, steps = str(a)[::-1], str(b)[::-1], 0, []
    for i in range(max(la, lb)):
        x, y = int(da[i]) if i < la else 0, int(db[i]) if i < lb else 0
        s = x + y + carry
        steps.append(f"{x}+{y}" + (f"+{carry}" if carry else "") + f"={s}")
        carry = s // 10
    return {"prompt": f"Add {a}+{b}", "answer": str(a + b),
            "completion": COMPLETION.format(steps="\n".join(steps), answer=a + b)}


def _deduction_order(puzzle, solution):
    """The blank cells in an order where each is forced (the only digit its row, column and box allow)
    once the earlier ones are filled; falls back to reading order if none is forced."""
    grid, todo, order = list(puzzle), [i for i, c in enumerate(puzzle) if c == "0"], []
    while todo:
        for i in todo:
            seen = {grid[j] for unit in puzzles.UNITS if i in unit for j in unit}
            if len({"1", "2", "3", "4"} - seen) == 1:
                break
        else:
            i = todo[0]
        grid[i] = solution[i]
        order.append(i)
        todo.remove(i)
    return order


def _sudoku(rng, split, grids):
    ex = puzzles.make_toy(grids[split], 1, seed=rng.randrange(1 << 30), min_blanks=2, max_blanks=6)[0]
    order = _deduction_order(ex["puzzle"], ex["solution"])
    steps = "\n".join(f"b{i}={ex['solution'][i]}" for i in order)
    return {"prompt": ex["prompt"], "answer": ex["solution"], "puzzle": ex["puzzle"], "solution": ex["solution"],
            "completion": COMPLETION.format(steps=steps, answer=ex["solution"])}


def make(family, n, seed, split="train"):
    rng = random.Random(seed)
    if family == "addition":
        return [_addition(rng, split) for _ in range(n)]
    if family in ("sudoku", "toy"):
        grids = dict(zip(("train", "test"), puzzles.split_grids(seed=0)))
        if family == "toy":  # the control: make run's toy puzzles with clean labels, the grid as the whole completion
            return puzzles.make_toy(grids[split], n, seed=seed, min_blanks=2, max_blanks=6)
        return [_sudoku(rng, split, grids) for _ in range(n)]
    raise ValueError(f"unknown family {family!r}")


def _answer(text):
    """The first <answer> content, stripped (None without one)."""
    answer = first_tag_content(text)
    return answer.strip() if answer is not None else None


def read_prompt(family, text, ex):
    """Did the completion READ the prompt? The share of the numbers a completion must copy from its prompt
    that it copied right: the given cells of the Sudoku grid in its answer (sudoku); the two operands of
    its first reasoning line, i.e. the last digits of a and b (addition); for Countdown, the numbers of
    its first reasoning line that are among the given numbers."""
    if family in ("sudoku", "toy"):
        grid = text.lstrip()[:16] if family == "toy" else _answer(text) or ""
        given = [i for i, c in enumerate(ex["puzzle"]) if c != "0"]
        return sum(i < len(grid) and grid[i] == ex["puzzle"][i] for i in given) / len(given)
    first = re.match(r"<reasoning>\n(\d+)[-+*/](\d+)", text)
    if family == "addition":
        a, b = re.match(r"Add (\d+)\+(\d+)", ex["prompt"]).groups()
        return 0.0 if not first else ((first[1] == a[-1]) + (first[2] == b[-1])) / 2
    nums = list(ex["nums"])
    return 0.0 if not first else sum(int(x) in nums for x in first.groups()) / 2


def solved(text, ex):
    """The first <answer> content, stripped, equals the gold answer (the toy control: the first 16 characters)."""
    return _answer(text) == ex["answer"] or ("<answer>" not in ex["completion"] and text.lstrip()[:16] == ex["answer"])


def countdown_toy_variant(family="", order="free"):
    """The record of --task countdown_toy with another family's maker (FAMILIES; "": the testbed's own) or,
    for the testbed, another label order (countdown_toy.ORDERS)."""
    if family:
        maker = lambda split, n, seed, data_seed=0, **_: make(family, n, seed, split)  # splits on its own
    else:
        maker = tasks.toy_split(countdown_toy.split_multisets, partial(countdown_toy.make_problems, order=order))
    return replace(tasks.TASKS["countdown_toy"], make=maker)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="run SCRIPT (sft.py, grpo.py, eval.py, ...) with --task "
                                     "countdown_toy standing for another family or label order; without a "
                                     "script, print two samples of each family")
    parser.add_argument("--family", choices=FAMILIES, default="", help="the family behind countdown_toy "
                        "(default: the testbed's own)")
    parser.add_argument("--order", choices=countdown_toy.ORDERS, default="free", help="the testbed's label order "
                        "(default: %(default)s)")
    parser.add_argument("script", nargs="?", default="", help="the script to run, then its own flags")
    args, rest = parser.parse_known_args()
    if not args.script:
        for fam in ("addition", "sudoku"):
            for ex in make(fam, 2, seed=0):
                print(ex["prompt"], "|", ex["completion"].replace("\n", " "))
        raise SystemExit
    tasks.TASKS["countdown_toy"] = countdown_toy_variant(args.family, args.order)  # the lab hands its maker in
    sys.argv = [args.script, *rest]
    runpy.run_path(args.script, run_name="__main__")
