"""
Tests for taskdata/splits.py (the honest protocol's splits) against independent computations: plain
loops and sets, the real d1 Sudoku test file read with the csv module, and the 288 grids enumerated
by taskdata/puzzles.py.

Run: python -m pytest tests/test_splits.py -q
"""
import csv
import json
import random
from types import SimpleNamespace

import pytest

from conftest import SHARED_DATA
from taskdata.puzzles import is_valid_grid, sudoku_grids
from taskdata.splits import carve_validation, protocol_split, recorded_split, sudoku_solution_split
from tasks import TASKS, with_prompt

D1_TEST = SHARED_DATA / "d1_sudoku" / "4x4_test_sudoku.csv"


def sudoku_example(puzzle, solution):
    """One d1-format Sudoku example, its prompt from the registry."""
    return with_prompt("sudoku", {"puzzle": puzzle, "solution": solution, "answer": solution})


def test_sudoku_solution_split_drops_exactly_the_test_solutions():
    rng = random.Random(0)
    grids = sudoku_grids()
    train = [{"solution": rng.choice(grids), "i": i} for i in range(300)]
    test = set(rng.sample(grids, 40))
    kept, dropped = sudoku_solution_split(train, test)
    expected = []
    for ex in train:  # the same filter, written as a loop
        hit = False
        for s in test:
            if s == ex["solution"]:
                hit = True
        if not hit:
            expected.append(ex)
    assert kept == expected and dropped == 300 - len(expected) and 0 < dropped < 300


def test_carve_validation_is_seeded_disjoint_by_prompt_and_keeps_order():
    # prompts repeat (as generated toys do): "p3" twice, "p7" three times
    exs = [{"prompt": f"p{i % 10}", "i": i} for i in range(10)] + [{"prompt": "p3", "i": 10},
                                                                    {"prompt": "p7", "i": 11}, {"prompt": "p7", "i": 12}]
    train, val = carve_validation(exs, 4, seed=5)
    again = carve_validation(exs, 4, seed=5)
    assert (train, val) == again and len(val) == 4
    picked = random.Random(5).sample(range(len(exs)), 4)
    assert sorted(ex["i"] for ex in val) == sorted(picked)
    val_prompts = set()
    for ex in val:
        val_prompts.add(ex["prompt"])
    expected_train = []
    for ex in exs:
        if ex["prompt"] not in val_prompts:
            expected_train.append(ex)
    assert train == expected_train  # order kept, every copy of a validation prompt gone
    assert carve_validation(exs, 0, seed=5) == (exs, [])
    assert carve_validation(exs, 4, seed=6) != (train, val)
    for n in (13, 99, -1):
        with pytest.raises(ValueError, match="--val-size"):
            carve_validation(exs, n, seed=0)


@pytest.mark.skipif(not D1_TEST.exists(), reason="needs the d1 Sudoku test file (NANO_D1_SHARED_DATA)")
def test_d1_test_solutions_and_a_training_set_of_all_288_grids():
    with open(D1_TEST) as f:
        test_solutions = {row["Solution"] for row in csv.DictReader(f)}
    assert len(test_solutions) <= 288 and all(is_valid_grid(s) for s in test_solutions)
    grids = sudoku_grids()
    assert len(grids) == 288
    # one training puzzle per grid (cells 0, 5, 10, 15 blanked), two for every third grid
    train = []
    for k, g in enumerate(grids):
        puzzle = "".join("0" if i % 5 == 0 else d for i, d in enumerate(g))
        train += [sudoku_example(puzzle, g)] * (2 if k % 3 == 0 else 1)
    kept, dropped = sudoku_solution_split(train, test_solutions)
    lost = [ex for ex in train if ex["solution"] in test_solutions]
    assert dropped == len(lost) and {ex["solution"] for ex in kept} == set(grids) - test_solutions
    assert len(kept) + dropped == len(train) and len(test_solutions) == 229  # d1's 500 rows use 229 grids


def flags(**kw):
    base = dict(task="sudoku", sudoku_split="solution", sudoku_test="", val_size=0, eval_every=0, val_gen_length=0,
                test_curve=False, data_seed=0, prompts_per_step=1)
    return SimpleNamespace(**{**base, **kw})


def test_protocol_split_touches_only_sudoku_examples(tmp_path, capsys):
    grids = sudoku_grids()
    test = tmp_path / "test.csv"
    test.write_text("Puzzle,Solution\n" + "".join(f"{'0' * 16},{g}\n" for g in grids[:3]))
    exs = [{**sudoku_example("0" * 16, g), "task": "sudoku"} for g in grids[:6]]
    exs += [{"prompt": f"q{i}", "solution": grids[0], "task": "toy"} for i in range(4)]  # same grid, other task
    random.Random(1).shuffle(exs)
    train, val, info = protocol_split(flags(task="sudoku,toy", sudoku_test=str(test), val_size=2), exs, TASKS)
    kept = [ex for ex in exs if ex["task"] == "toy" or ex["solution"] not in grids[:3]]
    assert len(kept) == 7 and len(val) == 2 and train + val != []
    assert {ex["prompt"] for ex in train} | {ex["prompt"] for ex in val} == {ex["prompt"] for ex in kept}
    assert info["sudoku_dropped"] == 3 and info["val_size"] == 2 and info["sudoku_split"] == "solution"
    assert f"dropped 3 of 6 training puzzles whose solution grid is in {test}" in capsys.readouterr().out
    with pytest.raises(ValueError, match="needs --sudoku-test"):
        protocol_split(flags(), exs, TASKS)
    with pytest.raises(ValueError, match="no sudoku task"):
        protocol_split(flags(task="toy", sudoku_test=str(test)), exs, TASKS)


def test_recorded_split_reads_save_info(tmp_path):
    assert recorded_split(str(tmp_path)) is None
    (tmp_path / "save_info.json").write_text(json.dumps({"step": 3, "sudoku_split": "d1", "val_size": 8,
                                                          "val_seed": 0, "args": {}}))
    assert recorded_split(str(tmp_path)) == {"sudoku_split": "d1", "sudoku_test": None, "sudoku_dropped": None,
                                             "val_size": 8, "val_seed": 0}


def test_protocol_split_refuses_a_round_larger_than_its_training_prompts():
    exs = [{"prompt": f"q{i}", "task": "toy"} for i in range(10)]
    train, val, _ = protocol_split(flags(task="toy", sudoku_split="d1", val_size=3, prompts_per_step=7), exs, TASKS)
    assert len(train) == 7 and len(val) == 3
    with pytest.raises(ValueError, match="--prompts-per-step 8 is more than the 7 prompts in the data"):
        protocol_split(flags(task="toy", sudoku_split="d1", val_size=3, prompts_per_step=8), exs, TASKS)
