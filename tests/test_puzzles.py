"""
Tests for puzzles.py: the 288 Sudoku grids, the train/test split, the seeded Sudoku / toy / Countdown
makers and the toy's partial labels. CPU only, a few seconds.

    python -m pytest tests/test_puzzles.py -q

The generators are checked with independent code: a backtracking Sudoku solver, a permutation-based
grid count and an `ast`-based exact evaluator for Countdown expressions (tests/conftest.py).
"""
import itertools
from fractions import Fraction

import pytest

import tasks
from conftest import countdown_rl, exact_eval, literals, valid_by_rules
from taskdata.puzzles import (
    countdown_values,
    is_valid_grid,
    make_countdown,
    make_sudoku,
    make_toy,
    partial_label,
    solve_sudoku,
    split_grids,
    sudoku_grids,
)

# -----------------------------------------------------------------------------
# an independent solver


def solutions_by_backtracking(puzzle, limit=2):
    """Count-limited solutions of a 4x4 puzzle by plain backtracking (no use of the 288-grid list)."""
    cells, found = list(puzzle), []

    def ok(i, d):
        r, c = divmod(i, 4)
        box = [4 * (r // 2 * 2 + a) + c // 2 * 2 + b for a in range(2) for b in range(2)]
        peers = [4 * r + k for k in range(4)] + [4 * k + c for k in range(4)] + box
        return all(cells[j] != d for j in peers if j != i)

    def go():
        if len(found) >= limit:
            return
        if "0" not in cells:
            found.append("".join(cells))
            return
        i = cells.index("0")
        for d in "1234":
            if ok(i, d):
                cells[i] = d
                go()
                cells[i] = "0"
    if all(ch == "0" or ok(i, ch) for i, ch in enumerate(puzzle)):
        go()
    return found


# -----------------------------------------------------------------------------
# Sudoku generators


def test_grids_are_the_288():
    grids = sudoku_grids()
    # independent count: stack row permutations, pruning stacks whose columns repeat a digit, then
    # keep the complete 4-row stacks that pass the full row/column/box rules
    perms = ["".join(p) for p in itertools.permutations("1234")]
    stacks = [""]
    for _ in range(4):
        stacks = [s + p for s in stacks for p in perms
                  if all(p[c] not in s[c::4] for c in range(4))]
    brute = sorted(s for s in stacks if valid_by_rules(s))
    assert len(grids) == 288 and grids == brute and len(set(grids)) == 288
    assert all(is_valid_grid(g) for g in grids)
    for bad in ["1234341221434321"[:15], "1234341221434312", "0234341221434321", 1234]:
        assert not is_valid_grid(bad)


def test_split_grids():
    train, test = split_grids(seed=0)
    assert not set(train) & set(test) and sorted(train + test) == sudoku_grids()
    assert len(test) == round(288 * 0.2)
    assert split_grids(seed=0) == (train, test) and split_grids(seed=1) != (train, test)


def test_make_sudoku_unique_and_seeded():
    train, test = split_grids()
    exs = make_sudoku(test, 50, seed=3, min_blanks=6, max_blanks=10)
    assert len(exs) == 50
    for e in exs:
        assert e["solution"] in test and 6 <= e["puzzle"].count("0") <= 10
        assert all(p in ("0", s) for p, s in zip(e["puzzle"], e["solution"]))
        assert solutions_by_backtracking(e["puzzle"]) == [e["solution"]]  # unique, by an independent solver
        assert e["answer"] == e["solution"] and "prompt" not in e  # tasks.py puts d1's prompt on top
    assert make_sudoku(test, 50, seed=3) == make_sudoku(test, 50, seed=3)
    assert make_sudoku(test, 50, seed=3) != make_sudoku(test, 50, seed=4)
    # unique=False may return ambiguous puzzles; the stored solution is still one of them
    loose = make_sudoku(train, 30, seed=0, min_blanks=12, max_blanks=12, unique=False)
    assert all(e["solution"] in solutions_by_backtracking(e["puzzle"], limit=100) for e in loose)
    assert any(len(solve_sudoku(e["puzzle"])) > 1 for e in loose)


def test_make_toy():
    train, _ = split_grids()
    exs = make_toy(train, 40, seed=0, min_blanks=4, max_blanks=8)
    for e in exs:
        assert e["completion"] == e["solution"] == e["answer"] and e["solution"] in train
        assert e["prompt"] == "Sudoku: " + e["puzzle"] and 4 <= e["puzzle"].count("0") <= 8
        assert solutions_by_backtracking(e["puzzle"]) == [e["solution"]]
    assert make_toy(train, 40, 0, 4, 8) == exs and make_toy(train, 40, 1, 4, 8) != exs


# -----------------------------------------------------------------------------
# Countdown generator


def test_make_countdown():
    exs = make_countdown(40, seed=0)
    for e in exs:
        assert len(e["nums"]) == 3 and all(1 <= x <= 100 for x in e["nums"]) and 1 <= e["target"] <= 100
        assert exact_eval(e["expression"]) == e["target"]          # reachable, checked independently
        assert literals(e["expression"]) == sorted(e["nums"])     # each number used exactly once
        assert e["answer"] == str(e["target"]) and tasks.with_prompt("countdown", e)["prompt"] == countdown_rl(str(e["nums"]), e["target"])
    assert make_countdown(40, seed=0) == exs and make_countdown(40, seed=1) != exs
    assert all(max(e["nums"]) <= 10 for e in make_countdown(10, seed=0, max_num=10))
    with pytest.raises(ValueError, match="could not draw"):
        make_countdown(1, seed=0, max_num=1, min_target=50)  # 1, 1, 1 never reach 50


def test_countdown_values_small_case():
    values = countdown_values([2, 3, 4])
    assert exact_eval(values[Fraction(5)]) == 5 and Fraction(24) in values and Fraction(3, 2) in values
    # brute force over orderings and both tree shapes agrees on the set of integers reached
    want = set()
    for a, b, c in itertools.permutations([2, 3, 4]):
        for o1, o2 in itertools.product("+-*/", repeat=2):
            for expr in (f"({a}{o1}{b}){o2}{c}", f"{a}{o1}({b}{o2}{c})"):
                try:
                    want.add(exact_eval(expr))
                except ZeroDivisionError:
                    pass
    assert set(values) == want


# -----------------------------------------------------------------------------
# the toy's partial labels


def test_partial_label_leaves_blanks_open_at_the_given_rate():
    train, _ = split_grids()
    exs = make_toy(train, 400, seed=0, min_blanks=4, max_blanks=8)
    labelled = [partial_label(e, 0.55, seed=1) for e in exs]
    open_cells = filled = 0
    for e, lab in zip(exs, labelled):
        assert lab["solution"] == e["solution"] and lab["puzzle"] == e["puzzle"]
        for p, c, s in zip(e["puzzle"], lab["completion"], e["solution"]):
            if p != "0":
                assert c == s  # givens are always copied
            else:
                assert c in ("0", s)  # a blank is left open or filled correctly, never wrong
                open_cells += c == "0"
                filled += c == s
    assert abs(open_cells / (open_cells + filled) - 0.55) < 0.03
    assert [partial_label(e, 0.55, seed=1) for e in exs] == labelled  # deterministic
    assert [partial_label(e, 0.55, seed=2) for e in exs] != labelled
