"""
The procedural puzzles: every 4x4 Sudoku grid, a brute-force solver, seeded Sudoku and toy puzzle makers,
the toy's partial labels, and an exact Countdown enumerator with a seeded problem maker.

d1 trains Sudoku on ~1M puzzles from Black-Phoenix/4x4-Sudoku-Dataset, which is not available to this
project (docs/d1.md §7.2), so make_sudoku() blanks puzzles out of the 288 valid grids instead;
split_grids() keeps train and test puzzles apart by solution grid. The CPU toy task (ours, not d1)
uses the same puzzles behind a bare prompt. make_countdown() draws reachable problems in d1's RL
format (docs/d1.md §7.1), a local stand-in for the HF Countdown train set. The makers return example dicts
(answer, ...); tasks.py's registry puts d1's prompt on top of the Sudoku and Countdown ones, and the
toy's bare prompt is written here (toy_prompt).

    from taskdata.puzzles import make_countdown, make_toy, split_grids
    train_grids, test_grids = split_grids(seed=0)
    make_toy(train_grids, 4, seed=1)        # [{"prompt": "Sudoku: 0301...", "completion": "4321...", ...}]
    make_countdown(2, seed=0)               # [{"nums": [..], "target": .., "expression": "..", ...}]
"""
import itertools
import random
from fractions import Fraction
from functools import lru_cache

from taskdata.readers import read_sudoku

# The CPU toy's prompt: bare, since with the byte-level tiny tokenizer every prompt character is a token.
TOY_PROMPT = "Sudoku: {puzzle}"


def toy_prompt(ex):
    return TOY_PROMPT.format(puzzle=ex["puzzle"])


def toy_example(puzzle, solution):
    """One toy example: a puzzle behind the bare prompt, the solution as its SFT completion."""
    # completion = solution: the CPU demo's SFT target is the bare 16 digits (partial_label may blank
    # some of them out later); answer = solution, which the reward and the parser score against
    ex = {"puzzle": puzzle, "solution": solution, "answer": solution, "completion": solution}
    return {"prompt": toy_prompt(ex), **ex}

# -----------------------------------------------------------------------------
# 4x4 Sudoku: all 288 grids, a brute-force solver, and seeded puzzle generators.

def _units():
    """The 12 groups of cell indices that must hold 1-4 exactly once: 4 rows, 4 columns, 4 2x2 boxes."""
    rows = [[4 * r + c for c in range(4)] for r in range(4)]
    cols = [[4 * r + c for r in range(4)] for c in range(4)]
    boxes = [[4 * (br + r) + bc + c for r in range(2) for c in range(2)] for br in (0, 2) for bc in (0, 2)]
    return rows + cols + boxes


# computed once at import: every validity check and the grid enumeration read it
UNITS = _units()


def is_valid_grid(s):
    """True iff s is a complete, valid 4x4 Sudoku as a 16-char string."""
    return (isinstance(s, str) and len(s) == 16 and set(s) <= set("1234")
            and all(len({s[i] for i in unit}) == 4 for unit in UNITS))


# computed once: solve_sudoku scans all 288 grids for every candidate puzzle the makers draw
@lru_cache(maxsize=None)
def _all_grids():
    # backtracking cell by cell, checking only the units of the cell just filled; 288 leaves
    grids, cells = [], [""] * 16

    def fill(i):
        if i == 16:
            grids.append("".join(cells))
            return
        for d in "1234":
            cells[i] = d
            # digit d fits iff, in each unit holding cell i, the cells filled so far (j <= i) are all different
            if all(len({cells[j] for j in u if j <= i}) == sum(j <= i for j in u) for u in UNITS if i in u):
                fill(i + 1)
        # undo before returning to the previous cell
        cells[i] = ""
    fill(0)
    # a tuple: lru_cache hands every caller the same object, so it must not be mutable
    return tuple(sorted(grids))


def sudoku_grids():
    """All 288 valid 4x4 Sudoku grids, sorted."""
    return list(_all_grids())


def solve_sudoku(puzzle):
    """Every solution of a 4x4 puzzle ('0' = blank): brute force over the 288 grids (cheap at this size)."""
    return [g for g in _all_grids() if all(p == "0" or p == q for p, q in zip(puzzle, g))]


def split_grids(seed=0, test_fraction=0.2):
    """(train_grids, test_grids), disjoint by solution grid, so a test puzzle never has a solution seen in
    training. Note: grids related by relabelling digits / symmetries still fall on both sides."""
    grids = sudoku_grids()  # sorted, so the split depends on the seed only
    random.Random(seed).shuffle(grids)
    # 58 of the 288 grids at the default 0.2
    n_test = round(len(grids) * test_fraction)
    return sorted(grids[n_test:]), sorted(grids[:n_test])


def _sample_puzzles(grids, n, seed, min_blanks, max_blanks, unique, max_tries=10_000):
    """n (puzzle, solution) pairs: pick a grid, blank a random number of random cells, and (if unique)
    reject puzzles with more than one solution. Duplicates across the n draws are possible."""
    if not grids or not 0 <= min_blanks <= max_blanks <= 16:
        raise ValueError(f"need grids and 0 <= min_blanks ({min_blanks}) <= max_blanks ({max_blanks}) <= 16")
    rng, out = random.Random(seed), []
    for _ in range(n):
        # rejection sampling, bounded: an impossible request (too many blanks for a unique puzzle) fails
        for _ in range(max_tries):
            grid = rng.choice(grids)
            # blank count first, then which cells: every count in the range is equally likely
            blanks = set(rng.sample(range(16), rng.randint(min_blanks, max_blanks)))
            puzzle = "".join("0" if i in blanks else d for i, d in enumerate(grid))
            # with two solutions the rewards, which compare with ONE stored solution, would mark a
            # correct answer wrong: such puzzles are redrawn unless the caller asks for them
            if not unique or len(solve_sudoku(puzzle)) == 1:
                out.append((puzzle, grid))
                break
        else:
            raise ValueError(f"no unique puzzle found in {max_tries} tries; lower max_blanks ({max_blanks})")
    return out


def make_sudoku(grids, n, seed, min_blanks=6, max_blanks=10, unique=True):
    """n d1-format Sudoku examples blanked from `grids` (d1's test puzzles have 8 blanks)."""
    puzzles = _sample_puzzles(grids, n, seed, min_blanks, max_blanks, unique)
    return [{"puzzle": p, "solution": s, "answer": s} for p, s in puzzles]


def make_toy(grids, n, seed, min_blanks=2, max_blanks=5):
    """n toy examples (prompt "Sudoku: <puzzle>", completion = the 16-digit solution), unique solutions only."""
    # 2-5 blanks by default, as sft.py / grpo.py --toy-blanks and eval.py's held-out set use
    return [toy_example(p, s) for p, s in _sample_puzzles(grids, n, seed, min_blanks, max_blanks, True)]


def partial_label(example, unfilled_prob, seed):
    """The toy's labelled SFT data are INCOMPLETE: the annotator leaves each blank cell unfilled
    ("0", as in the puzzle) with probability unfilled_prob and writes the right digit otherwise.
    With unfilled_prob > 0.5 imitation learns to leave blanks open, so greedy decoding does; a
    reward that checks the answer is what teaches the model to fill them in. The completion
    becomes the partial grid; the true `solution` is kept for scoring."""
    rng = random.Random(f"{seed}:{example['puzzle']}")  # per-puzzle stream: order-independent
    # givens are always copied; only a blank cell may be left open, and then it stays "0"
    label = [c if p != "0" or rng.random() >= unfilled_prob else "0"
             for p, c in zip(example["puzzle"], example["solution"])]
    return {**example, "completion": "".join(label)}


def sudoku_toy(split, n, seed, data_seed=0, blanks=(2, 5), unfilled=0.0):
    """The Sudoku toy's maker (its record's `make`): n puzzles from the grids of one side ("train" |
    "test") of the --data-seed split; SFT labels may leave blanks open (partial_label)."""
    exs = make_toy(split_grids(seed=data_seed)[split == "test"], n, seed, *blanks)
    # partial labels: imitation leaves blanks open, diffu-GRPO fills them
    return [partial_label(ex, unfilled, seed) for ex in exs] if unfilled else exs


def read_toy(path):
    """The Sudoku toy's items from a d1-format Sudoku file (its record's `load`)."""
    return [toy_example(ex["puzzle"], ex["solution"]) for ex in read_sudoku(path)]


# -----------------------------------------------------------------------------
# Countdown: exact enumeration of every expression that uses each number once.

def countdown_values(nums):
    """{value: expression} over all expressions using every number exactly once with + - * / (exact
    Fractions; division by zero skipped). Combine any two terms, recurse: covers every binary tree."""
    def combine(terms):
        if len(terms) == 1:
            yield terms[0]
            return
        # take any two terms, replace them by the result of one operation on them, and recurse until one
        # term is left: this reaches every binary expression tree over the numbers
        for i, j in itertools.combinations(range(len(terms)), 2):
            (a, ea), (b, eb) = terms[i], terms[j]
            rest = [t for k, t in enumerate(terms) if k not in (i, j)]
            # + and * commute; - and / are tried in both orders
            cands = [(a + b, f"{ea} + {eb}"), (a * b, f"{ea} * {eb}"), (a - b, f"{ea} - {eb}"), (b - a, f"{eb} - {ea}")]
            cands += [(a / b, f"{ea} / {eb}")] if b else []
            cands += [(b / a, f"{eb} / {ea}")] if a else []
            for v, e in cands:
                # parenthesize intermediate results so the string means what the tree means
                yield from combine(rest + [(v, f"({e})" if rest else e)])
    values = {}
    for v, e in combine([(Fraction(x), str(x)) for x in nums]):
        values.setdefault(v, e)  # first expression found, in a fixed enumeration order: deterministic
    return values


def make_countdown(n, seed, max_num=100, n_numbers=3, min_target=1, max_target=100):
    """n reachable Countdown problems in d1's RL format: numbers uniform in 1..max_num, target uniform over the
    distinct integer values in [min_target, max_target] reachable with all numbers; `expression` is one solution."""
    rng, out = random.Random(seed), []
    for _ in range(100 * (n + 1)):  # bounded, so an impossible target range fails instead of spinning
        if len(out) == n:
            return out
        # numbers may repeat; every expression over them is enumerated (3 numbers: at most 108 expressions)
        nums = [rng.randint(1, max_num) for _ in range(n_numbers)]
        values = countdown_values(nums)
        # integer targets only, as in d1's data
        targets = sorted(int(v) for v in values if v.denominator == 1 and min_target <= v <= max_target)
        if not targets:
            continue  # nothing in range is reachable from these numbers: draw again
        # uniform over distinct reachable targets, not over expressions (which would favour easy values)
        target = rng.choice(targets)
        ex = {"nums": nums, "target": target, "answer": str(target), "expression": values[Fraction(target)]}
        out.append(ex)
    if len(out) == n:
        return out
    raise ValueError(f"could not draw {n} problems with targets in [{min_target}, {max_target}] from 1..{max_num}")

