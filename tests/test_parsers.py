"""
Tests for the d1 EVAL parsers in parsers.py (docs/d1.md §8.3): the "generous" parsers behind the paper's Table 1.

  1. Reproduction: re-scoring d1's own released LLaDA-8B-Instruct generations
     (../shared/data/d1_eval_baselines, 85 files) gives the paper's LLaDA row for every task and
     generation length; plus the two choices that reproduction pins down (GSM8K null golds count as
     wrong; a generation with no \\boxed at all is its own MATH / Countdown prediction).
  2. Parser tables built from REAL generations: one row per branch, each a short excerpt copied from a
     baseline file (named "file stem#index"). Without the data the excerpts are parsed as literals;
     with it, each excerpt is checked to occur in that generation and the full generation must parse
     and score the same. A few rows marked src=None are made up, for branches no real text shows.
  3. The .match/.find shortcuts equal d1's plain re.search on random strings; hostile text is fast.

Run:  .venv/bin/python -m pytest tests/test_parsers.py -q     (about a second)
"""
import json
import random
import re
import time
from functools import lru_cache

import pytest

import tasks
from tasks import score_eval
from conftest import SHARED_DATA
from taskdata.answers import first_tag_content, is_equiv
from taskdata.parsers import (
    PARSER_VERSION,
    countdown_eval_correct,
    d1_example_from_released,
    gsm8k_gold_eval,
    parse_countdown_eval,
    parse_gsm8k_eval,
    parse_math_eval,
    parse_sudoku_eval,
    sudoku_eval_cells,
    sudoku_solved,
)

BASELINES = SHARED_DATA / "d1_eval_baselines"
needs_baselines = pytest.mark.skipif(not BASELINES.is_dir(), reason="../shared/data/d1_eval_baselines not present")
D1_FILE_TASK = {"gsm8k": "gsm8k", "math": "math500", "countdown": "countdown", "sudoku": "sudoku"}  # ours -> d1's
GEN_LENGTHS = (128, 256, 512)

# -----------------------------------------------------------------------------
# 1. The paper's LLaDA-8B-Instruct row (Table 1, %, gen length 128 / 256 / 512), and the two-decimal
# values of docs/d1.md §8.4. GSM8K: d1 only released 1,130 of the 1,319 test questions, so the paper's
# 68.7 / 76.7 / 78.2 (all 1,319) is not reachable; these files give 69.29 / 76.37 / 78.14.
# Sudoku is d1's cell score: 100 * sum(correct cells) / sum(empty cells).

PAPER = {"math": (26.0, 32.4, 36.2), "countdown": (20.7, 19.5, 16.0), "sudoku": (11.7, 6.7, 5.5),
         "gsm8k": (69.3, 76.4, 78.1)}
SPEC_2DP = {"math": (26.00, 32.40, 36.20), "countdown": (20.70, 19.53, 16.02), "sudoku": (11.72, 6.69, 5.47),
            "gsm8k": (69.29, 76.37, 78.14)}
ITEMS = {"gsm8k": 1130, "math": 500, "countdown": 256, "sudoku": 256}  # per gen length, over all rank files
# Puzzles fully solved (every blank right), our per-puzzle metric beside d1's cell score: 1 / 256 = 0.39 %
# at 128, none at 256 and 512; far below the cell scores 11.72 / 6.69 / 5.47 %.
SUDOKU_SOLVED = {128: 1, 256: 0, 512: 0}


def _files(task, gen_length):
    # {task}_instruct_{gen_length}_{steps}_{rank}_generations.json with steps = gen_length / 2
    pattern = f"{D1_FILE_TASK[task]}_instruct_{gen_length}_{gen_length // 2}_*_generations.json"
    return sorted(BASELINES.glob(pattern), key=lambda p: int(p.name.split("_")[-2]))  # by rank


@lru_cache(maxsize=None)
def _items(task, gen_length):
    """All released items of (task, gen_length), rank files concatenated (d1 sums over ranks)."""
    return tuple(item for path in _files(task, gen_length)
                 for item in json.loads(path.read_text(encoding="utf-8"))["generations"])


@lru_cache(maxsize=None)
def _scored(task, gen_length):
    return tuple(score_eval(task, item["generations"], d1_example_from_released(D1_FILE_TASK[task], item))
                 for item in _items(task, gen_length))


def _accuracy(task, results):
    if task == "sudoku":
        return 100 * sum(r["cells_correct"] for r in results) / sum(r["cells_total"] for r in results)
    return 100 * sum(r["correct"] for r in results) / len(results)


@needs_baselines
@pytest.mark.parametrize("gen_length", GEN_LENGTHS)
@pytest.mark.parametrize("task", list(PAPER))
def test_reproduces_the_papers_llada_row(task, gen_length):
    assert _files(task, gen_length), f"no {task} files for gen length {gen_length}"
    results = _scored(task, gen_length)
    assert len(results) == ITEMS[task]
    acc = _accuracy(task, results)
    col = GEN_LENGTHS.index(gen_length)
    assert round(acc, 1) == PAPER[task][col], f"{task}@{gen_length}: {acc:.2f}"
    assert abs(acc - SPEC_2DP[task][col]) < 0.005, f"{task}@{gen_length}: {acc:.4f}"


@needs_baselines
@pytest.mark.parametrize("gen_length", GEN_LENGTHS)
def test_sudoku_solve_rate(gen_length):
    results = _scored("sudoku", gen_length)
    solved = sum(r["solved"] for r in results)
    assert solved == SUDOKU_SOLVED[gen_length]
    assert 100 * solved / len(results) <= _accuracy("sudoku", results)
    assert all(r["correct"] == r["solved"] == (r["cells_correct"] == r["cells_total"]) for r in results)
    assert {r["cells_total"] for r in results} == {8}  # d1's test puzzles all have 8 blanks


@needs_baselines
def test_gsm8k_null_golds_count_as_processed_and_wrong():
    """d1's gold regex has no minus sign: the 2 negative GSM8K answers (-10, -3) are stored as null. Counting
    them as wrong reproduces d1; dropping them from the denominator would not (69.41 / 76.51 / 78.28)."""
    for col, gen_length in enumerate(GEN_LENGTHS):
        items, results = _items("gsm8k", gen_length), _scored("gsm8k", gen_length)
        nulls = [i for i, item in enumerate(items) if item["ground_truth"] is None]
        assert len(nulls) == 2 and not any(results[i]["correct"] for i in nulls)
        kept = [r for i, r in enumerate(results) if i not in nulls]
        assert round(_accuracy("gsm8k", kept), 1) != PAPER["gsm8k"][col]
        # LLaDA does answer -10 right: signed=True (ours) would count it
        assert sum(parse_gsm8k_eval(items[i]["generations"]) == -10.0 for i in nulls) == 1


@needs_baselines
def test_no_box_is_its_own_prediction():
    """With no \\boxed at all, d1's MATH / Countdown prediction is the whole generation, not its <answer>:
    consulting <answer> there would count one more item at 128 (MATH 26.2, Countdown 21.09), not d1's."""
    for task, gen_length, expected in [("math", 128, 26.2), ("countdown", 128, 21.09)]:
        n_extra = 0
        for item, r in zip(_items(task, gen_length), _scored(task, gen_length)):
            text = item["generations"]
            if "\\boxed" in text or r["correct"] or first_tag_content(text) is None:
                continue
            ex = d1_example_from_released(D1_FILE_TASK[task], item)
            n_extra += score_eval(task, first_tag_content(text).strip(), ex)["correct"]  # the alternative
        alternative = 100 * (sum(r["correct"] for r in _scored(task, gen_length)) + n_extra) / ITEMS[task]
        assert n_extra == 1 and round(alternative, 2) == expected


@needs_baselines
def test_gsm8k_released_golds_are_d1s_regex_on_the_test_file():
    """The released float ground truths (null included) are exactly gsm8k_gold_eval of the full GSM8K solution,
    and of the bare answer our load_gsm8k stores; d1_example_from_released round-trips them."""
    path = SHARED_DATA / "gsm8k" / "test.jsonl"
    if not path.is_file():
        pytest.skip("../shared/data/gsm8k/test.jsonl not present")
    solutions = {ex["question"]: ex for ex in tasks.load_task("gsm8k", path)}
    for gen_length in GEN_LENGTHS:
        for item in _items("gsm8k", gen_length):
            ex = solutions[item["question"]]
            gold = item["ground_truth"]
            assert gsm8k_gold_eval(ex["solution"]) == gold
            assert gsm8k_gold_eval(ex["answer"]) == gold
            assert gsm8k_gold_eval(d1_example_from_released("gsm8k", item)["answer"]) == gold


@needs_baselines
def test_examples_from_released_match_our_loaders():
    """Sudoku puzzles parsed from the question text and Countdown (nums, target) are real test-set rows."""
    sudoku_rows = tasks.load_task("sudoku", SHARED_DATA / "d1_sudoku" / "4x4_test_sudoku.csv")
    sudoku = {ex["puzzle"]: ex["solution"] for ex in sudoku_rows}
    countdown = {(tuple(ex["nums"]), ex["target"]) for ex in
                 tasks.load_task("countdown", SHARED_DATA / "d1_countdown" / "countdown_cd3_test.jsonl")}
    for item in _items("sudoku", 256):
        ex = d1_example_from_released("sudoku", item)
        assert sudoku[ex["puzzle"]] == ex["solution"] and tasks.get("sudoku").prompt(ex).endswith(item["question"])
    for item in _items("countdown", 256):
        ex = d1_example_from_released("countdown", item)
        assert (tuple(ex["nums"]), ex["target"]) in countdown
    ex = d1_example_from_released("math500", _items("math", 256)[0])
    assert ex["answer"] == _items("math", 256)[0]["ground_truth"] and tasks.get("math").prompt(ex).endswith(ex["question"])
    with pytest.raises(ValueError, match="unknown d1 task"):
        d1_example_from_released("toy", {"question": "", "ground_truth": ""})


# -----------------------------------------------------------------------------
# 2. Parser tables from real generations. Row: (src, excerpt, pred, example, correct); src is
# "<d1 file stem without _generations.json>#<index in that file>", None for a made-up row. The excerpt
# is a verbatim slice of that generation (the <|endoftext|> padding removed); WHOLE as pred means "the
# text itself" (no box at all: d1 predicts the whole generation).
WHOLE = object()

GSM8K_ROWS = [
    # first box wins, and "1,000"-style boxes parse as their first number: 240.0, not the later 240000
    ("gsm8k_instruct_256_128_3#58",
     "Therefore, the total amount of money spent on functioning pieces of equipment is:\n\\[ \n\\boxed{240,000}\n"
     "\\]\n</answer>\n<answer>\n\\boxed{240000}\n</answer><|eot_id|>", 240.0, {"answer": "240000"}, False),
    ("gsm8k_instruct_512_256_3#161",  # first box 0 beats the right final \boxed{120}
     "Therefore, Josh makes \\(\\boxed{0}\\) dollars in 2 weeks.\n</answer>\n\n\\boxed{120}<|eot_id|>",
     0.0, {"answer": "120"}, False),
    ("gsm8k_instruct_128_64_7#40",  # the prompt's "\boxed{...}" copied: skipped; <answer> has no number
     "</reasoning>\n<answer>\n\\boxed{...}\n</answer><|eot_id|>", None, {"answer": "13"}, False),
    ("gsm8k_instruct_128_64_4#129",  # empty box skipped; <answer> "\boxed{}101": no float -> last number
     "</reasoning>\n<answer>\n\\boxed{}101\n</answer><|eot_id|>", 101.0, {"answer": "101"}, True),
    ("gsm8k_instruct_128_64_8#53",  # no box: <answer> "$162" -> its number
     "</reasoning>\n<answer>$162\n</answer><|eot_id|>", 162.0, {"answer": "96"}, False),
    ("gsm8k_instruct_128_64_6#38",  # box not closed on its line: no box; <answer> "\boxed{4500" -> 4500
     "</reasoning>\n<answer>\n\\boxed{4500\n</answer><|eot_id|>", 4500.0, {"answer": "4500"}, True),
    ("gsm8k_instruct_128_64_0#94",  # an expression in the box: its FIRST number
     "</reasoning>\n<answer>\n\\boxed{48 - 10 + 48 - 6}\n</answer><|eot_id|>", 48.0, {"answer": "128"}, False),
    ("gsm8k_instruct_128_64_6#15",  # "10\%": float fails, first number 10
     "</reasoning>\n<answer>\n\\boxed{10\\%}\n</answer><|eot_id|>", 10.0, {"answer": "10"}, True),
    ("gsm8k_instruct_128_64_1#130",  # empty box, and <answer> is only "\boxed{}": nothing
     "</reasoning>\n<answer>\n\\boxed{}</answer><|eot_id|>", None, {"answer": "1"}, False),
    (None, "<answer>\n3 + 4 = 7 apples\n</answer>", 7.0, {"answer": "7"}, True),  # LAST number of <answer>
    (None, "<answer>\n\\boxed{-3}\n</answer>", -3.0, {"answer": "-3"}, False),   # d1: a negative gold is None
    (None, "\\boxed{18.0} dollars", 18.0, {"answer": "#### 18"}, True),           # float compare; full text gold
    (None, "\\boxed{\n18}", None, {"answer": "18"}, False),                     # a box never spans lines
]

MATH_ROWS = [
    ("math500_instruct_128_64_0#171",  # the LAST box of the whole text: 10, not the earlier 15
     "$3x = \\boxed{15}$.\n</reasoning>\n<answer>\n\\boxed{10}\n</answer><|eot_id|>", "10", {"answer": "10"}, True),
    ("math500_instruct_256_128_4#20",  # ... also when an earlier <answer> holds the right one
     "</, we>\n<answer>\n\\boxed{10}\n</answer>\n\n<answer>\n\\boxed{8}\n</answer><|eot_id|>", "8",
     {"answer": "10"}, False),
    ("math500_instruct_128_64_1#93",  # strip_string drops "\%"
     "</reasoning>\n<answer>\n\\boxed{10\\%}\n</answer><|eot_id|>", "10\\%", {"answer": "10"}, True),
    ("math500_instruct_256_128_3#66",  # unbalanced box -> first <answer>, raw: "\boxed{28" is not 28
     "</reasoning>\n<answer>\n\\boxed{28\n</answer><|eot_id|>", "\\boxed{28", {"answer": "28"}, False),
    ("math500_instruct_128_64_1#156",  # unbalanced box and no <answer>: nothing
     "</reasoning>\n\\boxed{23><|eot_id|>", None, {"answer": "23"}, False),
    ("math500_instruct_128_64_1#1",  # NO box: the whole text is the prediction; <answer> is not consulted
     "</reasoning>\n<answer>\n\\frac{1}{4}\n</answer><|eot_id|>", WHOLE, {"answer": "\\frac{1}{4}"}, False),
    ("math500_instruct_256_128_2#3",  # empty box -> first <answer>, "\boxed{}"
     "</reasoning>\n<answer>\n\\boxed{}\n</answer><|eot_id|>", "\\boxed{}", {"answer": "14"}, False),
    (None, "so it is \\boxed 5$.", "5", {"answer": "5"}, True),  # the "\boxed 5" form (d1's helper)
    (None, "\\boxed{\\dfrac{1}{2}}", "\\dfrac{1}{2}", {"answer": "0.5"}, True),  # Hendrycks normalisation
    # d1 quirk: "x/y" (a side int() can't read) makes the normaliser raise; raw "x / y" != "x/y"
    (None, "so \\boxed{x / y}", "x / y", {"answer": "x/y"}, False),
    (None, "so \\boxed{3 / 4}", "3 / 4", {"answer": "\\frac{3}{4}"}, True),  # integer sides: normalised
]

COUNTDOWN_ROWS = [
    ("countdown_instruct_512_256_0#34", "</reasoning>\n<answer>\n\\boxed{22 \\times 44 / 88}\n</answer><|eot_id|>",
     "22 * 44 / 88", {"nums": [22, 44, 88], "target": 11}, True),
    ("countdown_instruct_256_128_4#17", "</reasoning>\n<answer>\n\\boxed{(80 \\div 40) \\div 2}\n</answer><|eot_id|>",
     "(80 / 40) / 2", {"nums": [80, 2, 40], "target": 1}, True),
    ("countdown_instruct_128_64_6#9",  # "... = 22": only the left side
     "</reasoning>\n<answer>\n\\boxed{78 - 94 + 38 = 22}\n</answer><|eot_id|>", "78 - 94 + 38",
     {"nums": [94, 38, 78], "target": 22}, True),
    ("countdown_instruct_256_128_5#6",  # evaluates to 94, but 31 is used twice and 30 never
     "Thus, the expression \\(94 \\times 31 / 31\\) equals 94.\n</ing>\n\n<answer>\n\\boxed{94 \\times 31 / 31}"
     "<|eot_id|>", "94 * 31 / 31", {"nums": [94, 31, 30], "target": 94}, False),
    ("countdown_instruct_128_64_5#9",  # NO box: the whole text, not the (right) <answer>
     "</reasoning>\n<answer>\n96 - 48  + 26\n</answer><|eot_id|>", WHOLE, {"nums": [48, 96, 26], "target": 74}, False),
    ("countdown_instruct_256_128_3#27",  # unbalanced box, no </answer>: whole text; its first "... = 93" wins
     "First, let's try to the numbers directly:\n\\[ 48 + 29 + 16 = 93 \\]\n\nNext, let's try to use the numbers "
     "in a different order:\n\\[ 48 + 16 + 29 = 93 \\]\n\nNow, let's try to use the numbers in a different "
     "combination:\n\\[ 48 + 29 - 16 = 93 \\]\n\nFinally, let's try to use the numbers in a different combination:"
     "\n\\[ 48 + 16 + 29 = 93 \\]\n\nAll these combinations give to the target of 93. However, we need to choose "
     "the simplest that uses all the numbers.\n\n</reasoning>\n<answer>\n\\boxed{48 + 29 + 16><|eot_id|>",
     "48 + 29 + 16", {"nums": [48, 29, 16], "target": 93}, True),
    ("countdown_instruct_128_64_6#29",  # \frac is not arithmetic
     "</reasoning>\n<answer>\n\\boxed{\\frac{98}{89} \\times 28}\n</answer><|eot_id|>", "\\frac{98}{89} * 28",
     {"nums": [89, 98, 28], "target": 19}, False),
    ("countdown_instruct_256_128_2#31",  # unbalanced box, no <answer>, no "=": the whole text
     "</reasoning>\n\\boxed{74 - 33><|eot_id|>", WHOLE, {"nums": [61, 13, 33], "target": 41}, False),
    (None, "\\boxed{(5 \\cdot 4) + 3}", "(5 * 4) + 3", {"nums": [5, 4, 3], "target": 23}, True),
    (None, "\\boxed{(6 / 4) * 2}", "(6 / 4) * 2", {"nums": [6, 4, 2], "target": 3}, True),  # exact fractions
    # OUR deliberate difference: d1's eval() computes 2**3 + 1 = 9 and counts this; we reject "**"
    (None, "\\boxed{2**3 + 1}", "2**3 + 1", {"nums": [2, 3, 1], "target": 9}, False),
]

# Sudoku: (src, excerpt, pred, example, correct) with example = puzzle + solution and correct = the
# number of right cells (of 8); the pattern that fires is in the comment.
SUDOKU_ROWS = [
    ("sudoku_instruct_512_256_2#11",  # 1: fenced digits (the puzzle copied back: 0 cells)
     "</reasoning>\n\n<answer>\n```\n0010002331400031\n```\n</answer><|eot_id|>", "0010002331400031",
     {"puzzle": "0010002331400031", "solution": "2314142331424231"}, 0),
    ("sudoku_instruct_512_256_6#17",  # 1: blanks inside the digits removed, then padded to 16
     "</reasoning>\n\n<answer>\n```\n1 22\n2 11 \n2 42\n4 11\n```\n</answer><|eot_id|>", "1222112424110000",
     {"puzzle": "0000014242101004", "solution": "2431314242131324"}, 0),
    ("sudoku_instruct_128_64_1#35",  # 2: <answer> content, 7 digits padded with "0"
     "</reasoning>\n<answer>\n1234432\n</answer><|eot_id|>", "1234432000000000",
     {"puzzle": "0100200104033210", "solution": "4132234114233214"}, 2),
    ("sudoku_instruct_256_128_0#10",  # 3: the text AFTER </answer>, padded
     "After filling in the empty cells, we get the following solution:\n\n1. 4, 2, 1, 3, 3\n2. 1, 4, 2, 1, 2\n"
     "3. 3, 1, 3, 2, 4\n</answer>\n4213342123124<|eot_id|>", "4213342123124000",
     {"puzzle": "4200104200010024", "solution": "4213134224313124"}, 3),
    ("sudoku_instruct_256_128_6#4",  # 4: "<>answer>" is no tag, nothing after </answer>: 16 digits before it
     "</reasoning>\n\n<>answer>\n1234012303143421\n</answer><|eot_id|>", "1234012303143421",
     {"puzzle": "4310010000303420", "solution": "4312214312343421"}, 3),
    ("sudoku_instruct_256_128_5#25",  # 5: no tags at all, a bare 16-digit word
     "</reasoning>\n\n<>\n0413004001004230\n</><|eot_id|>", "0413004001004230",
     {"puzzle": "0413004001004230", "solution": "2413134231244231"}, 0),
    ("sudoku_instruct_256_128_5#11",  # nothing: no <answer>, empty after </answer>, no 16-digit run
     "</reasoning>\n\n<>answer>\n431200\n000103\n300420\n</answer><|eot_id|>", "",
     {"puzzle": "4312000010300420", "solution": "4312214312343421"}, 0),
    ("sudoku_instruct_128_64_1#32",  # 2: non-digits are KEPT ("\"), shifting the cells
     "</reasoning>\n<answer>\n1234\\\n4213\\\n2313\n</answer><|eot_id|>", "1234\\4213\\231300",
     {"puzzle": "0043400130020130", "solution": "1243432134122134"}, 3),
    ("sudoku_instruct_128_64_2#21",  # 2: a broken "</answer" is cut at <|eot_id|> and kept
     "</reasoning>\n<answer>\n1331124\n</answer<|eot_id|>", "1331124</answer0",
     {"puzzle": "0100301010022340", "solution": "4123321414322341"}, 1),
    (None, "<answer>\n4321\n1243\n3412\n2134\n</answer>", "4321124334122134",  # solved: all 8 blanks right
     {"puzzle": "4320004330100004", "solution": "4321124334122134"}, 8),
    # 2: "²" is kept like any non-blank (d1 filters nothing here), a wrong cell that shifts the rest
    (None, "<answer>\n4321²1243\n3412\n2134\n</answer>", "4321²12433412213",
     {"puzzle": "4320004330100004", "solution": "4321124334122134"}, 2),
]

TABLES = {"gsm8k": (GSM8K_ROWS, parse_gsm8k_eval), "math": (MATH_ROWS, parse_math_eval),
          "countdown": (COUNTDOWN_ROWS, parse_countdown_eval), "sudoku": (SUDOKU_ROWS, parse_sudoku_eval)}
ALL_ROWS = [(task, *row) for task, (rows, _) in TABLES.items() for row in rows]


def _row_id(row):
    return f"{row[0]}:{row[1] or 'made-up'}"


def _check(task, text, pred, example, correct):
    parser = TABLES[task][1]
    expected = text if pred is WHOLE else pred
    assert parser(text) == expected
    r = score_eval(task, text, example)
    assert r["pred"] == expected
    if task == "sudoku":
        grid = (example["puzzle"], example["solution"])
        assert (r["cells_correct"], r["cells_total"]) == (correct, 8) == sudoku_eval_cells(text, *grid)
        assert r["solved"] == r["correct"] == (correct == 8) == sudoku_solved(text, *grid)
        assert r["score"] == correct / 8
    else:
        assert r["correct"] is correct and r["score"] == float(correct)
    if task == "countdown":
        assert countdown_eval_correct(text, example["nums"], example["target"]) is correct


@pytest.mark.parametrize("row", ALL_ROWS, ids=_row_id)
def test_parser_tables(row):
    task, _, text, pred, example, correct = row
    _check(task, text, pred, example, correct)


@needs_baselines
@pytest.mark.parametrize("row", [r for r in ALL_ROWS if r[1]], ids=_row_id)
def test_parser_table_rows_are_real(row):
    """Each excerpt occurs in the named generation; the full generation parses and scores the same, with the
    example d1_example_from_released builds from the file."""
    task, src, text, pred, example, correct = row
    stem, index = src.split("#")
    item = json.loads((BASELINES / f"{stem}_generations.json").read_text(encoding="utf-8"))["generations"][int(index)]
    full = item["generations"]
    assert text in full
    built = d1_example_from_released(D1_FILE_TASK[task], item)
    assert {k: built[k] for k in example} == example
    _check(task, full, pred, built, correct)


# -----------------------------------------------------------------------------
# Smaller units

def test_gsm8k_gold():
    assert gsm8k_gold_eval("Natalia sold 48 ... #### 72") == 72.0
    assert gsm8k_gold_eval("so $1,000.\n#### $1,000") == 1000.0  # commas dropped, "$" allowed
    assert gsm8k_gold_eval("1,000") == gsm8k_gold_eval("1000") == gsm8k_gold_eval(1000) == 1000.0
    assert gsm8k_gold_eval("0.5") == 0.5 and gsm8k_gold_eval(18.0) == 18.0
    assert gsm8k_gold_eval("-3") is None and gsm8k_gold_eval("#### -3") is None  # d1: no sign
    assert gsm8k_gold_eval("-3", signed=True) == -3.0 and gsm8k_gold_eval("#### -1,000", signed=True) == -1000.0
    assert gsm8k_gold_eval(None) is None and gsm8k_gold_eval("abc") is None and gsm8k_gold_eval("#### ,") is None
    assert score_eval("gsm8k", "\\boxed{-3}", {"answer": None})["correct"] is False


def test_toy_and_unknown_task():
    ex = {"puzzle": "4320004330100004", "solution": "4321124334122134"}
    r = score_eval("toy", " 4321124334122134 trailing", ex)
    assert r == {"pred": "4321124334122134", "correct": True, "score": 1.0, "cells_correct": 8,
                 "cells_total": 8, "solved": True}
    r = score_eval("toy", "4320124334122134", ex)  # 7 of 8 blanks right
    assert (r["correct"], r["cells_correct"], r["score"]) == (False, 7, 0.0)
    with pytest.raises(ValueError, match="task 's1k' has no eval parser"):
        score_eval("s1k", "", {})
    with pytest.raises(ValueError, match="unknown task 'gsm9k'"):
        score_eval("gsm9k", "", {})
    assert PARSER_VERSION == "d1-837888f.2"


def test_math_slash_with_non_integer_side_is_d1s_raw_comparison():
    """The eval parser always scores like d1 (answers._fix_a_slash_b): "x / y" is compared raw with the
    gold; the repaired comparison, is_equiv(fixed=True), would count it."""
    for box, gold in [("x / y", "x/y"), ("\\pi / 2", "\\pi/2"), ("3.0 / 4", "3.0/4")]:
        r = score_eval("math", f"<answer>\\boxed{{{box}}}</answer>", {"answer": gold})
        assert r["pred"] == box and r["correct"] is False
        assert is_equiv(box, gold, fixed=True) is True
        assert score_eval("math", f"\\boxed{{{box.replace(' ', '')}}}", {"answer": gold})["correct"] is True


@pytest.mark.parametrize("task, text, example, pred, correct", [
    # no \boxed, so the last box is the \fbox; d1's eval remove_boxed cannot unwrap it and returns it as is
    ("math", "<answer>\\frac{1}{2}</answer> \\fbox{x}", {"answer": "\\frac{1}{2}"}, "\\fbox{x}", False),
    ("math", "\\fbox{5}", {"answer": "\\fbox{5}"}, "\\fbox{5}", True),
    ("math", "\\fbox{5} then \\boxed{6}", {"answer": "6"}, "6", True),  # a \boxed anywhere wins over \fbox
    ("countdown", "<answer>44+19+35</answer> \\fbox{1}", {"nums": [44, 19, 35], "target": 98}, "\\fbox{1}", False),
])
def test_an_fbox_is_the_prediction_as_it_is(task, text, example, pred, correct):
    # the reward reads it differently (answers.boxed_or_self falls back to the whole text), as d1's does
    r = score_eval(task, text, example)
    assert r["pred"] == pred and bool(r["correct"]) is correct


# -----------------------------------------------------------------------------
# 3. Shortcuts vs d1's plain re.search, on random strings made of the pieces that matter

D1_SUDOKU_PATTERNS = [  # d1's five patterns exactly as d1 writes them (pattern 1 keeps its "\s*")
    r"<answer>.*?```\s*([\d\s]+)```",
    r"<answer>(.*?)(?:<\|eot_id\|>|<\|endoftext\|>|</answer>)",
    r"</answer>\s*(.*?)(?:<\|eot_id\|>|<\|endoftext\|>|$)",
    r".*?(\d{16})\s*</answer>",
    r"\b(\d{16})\b",
]


def _d1_sudoku_reference(text):
    found = ""
    for pattern in D1_SUDOKU_PATTERNS:
        match = re.search(pattern, text, re.DOTALL)
        if match and match.group(1).strip():
            found = match.group(1).strip()
            break
    found = re.sub(r"\s", "", found)
    return found[:16].ljust(16, "0") if found else ""


PIECES = ["<answer>", "</answer>", "```", "<|eot_id|>", "<|endoftext|>", "1234", "4321", "1234123412341234",
          "0", " ", "\n", "x", "\\boxed{", "}", "{", "=", "5 + 3", "<", ">"]


def test_shortcuts_equal_d1_search_on_random_strings():
    rng = random.Random(0)
    for _ in range(3000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 14)))
        assert parse_sudoku_eval(text) == _d1_sudoku_reference(text), repr(text)
        m = re.search(r"<answer>(.*?)</answer>", text, re.DOTALL)
        assert first_tag_content(text) == (m.group(1) if m else None), repr(text)


def test_hostile_text_is_fast():
    n = 8000  # a 512-token generation is ~2k characters; this is 4x that, built to make regexes backtrack
    hostile = ["\\boxed{" * (n // 7), "<answer>" * (n // 8), "</answer>" + "<answer>" * (n // 8), "1" * n, " " * n,
               "<answer>```" + " " * n + "x", "1 " * (n // 2) + "= x", "<answer>" + "1 " * (n // 2),
               "123456789012345 " * (n // 16), "\\boxed{" + "{" * n, "}" * n + "\\boxed{" + "{}" * (n // 2)]
    for text in hostile:
        for parse in (parse_gsm8k_eval, parse_math_eval, parse_countdown_eval, parse_sudoku_eval):
            start = time.perf_counter()
            parse(text)
            assert time.perf_counter() - start < 0.5, (parse.__name__, text[:30])
