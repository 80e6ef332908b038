"""
Tests for tasks.py: loaders on the real shared data, the exact d1 prompt strings, rendering, and the
seeded Sudoku / Countdown generators. CPU only, a few seconds.

    python -m pytest tests/test_tasks.py -q

The prompt strings are written out again below from d1-spec §5.1 / §7.1 / §8.2 in a different form
(triple-quoted text where possible), so a typo in tasks.py cannot be copied into its own test. The
generators are checked with independent code: a backtracking Sudoku solver, a permutation-based grid
count and an `ast`-based exact evaluator for Countdown expressions. Data tests skip when
../shared/data is absent.
"""
import ast
import itertools
import json
import operator
from fractions import Fraction

import numpy as np
import pytest

from conftest import SHARED_DATA
import tasks
from tasks import (TASKS, d1_eval_subset, encode, eval_message, eval_question, is_valid_grid, load_countdown,
                   load_gsm8k, load_math, load_s1k, load_sudoku, load_task, make_countdown, make_sudoku, make_toy,
                   render, render_eval, solve_sudoku, split_grids, sudoku_grids)

needs_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data not present")

# -----------------------------------------------------------------------------
# d1's prompt strings, re-typed from the spec

RL_SYSTEM = """
Respond in the following format:
<reasoning>
...
</reasoning>
<answer>
...
</answer>
"""
SFT_SYSTEM = RL_SYSTEM.replace("<reasoning>\n...\n", "<reasoning>\nYour reasoning here\n")
MATH_RL_MIDDLE = ("\n\nYou are a math expert. You will be given a question to solve. Solve it step by step. "
                  "Wrap the final answer in a \\boxed{}. \n\n")
SUDOKU_SYSTEM = """
Please solve the following 4x4 Sudoku puzzle. The puzzle is provided as a 16-character string reading left-to-right, top-to-bottom, where '0' represents empty cells.

Rules:
- Fill empty cells with digits 1-4
- Each row must contain digits 1-4 exactly once
- Each column must contain digits 1-4 exactly once
- Each 2x2 box must contain digits 1-4 exactly once

Important: Your solution must be a COMPLETE 16-character string with only the digits 1-4, representing your final solved grid.

Respond in this exact format:
<reasoning>
Your step-by-step solving process
</reasoning>
<answer>
[16-character solution string with no spaces or separators]
</answer>
"""
EVAL_FORMAT = "Respond in the following format:\n<reasoning>\nYour reasoning here\n</reasoning>\n<answer>\n\\boxed{...}\n</answer>"
MATH_EXPERT = ("You are a math expert. You will be given a question to solve. Solve it step by step. "
               "Wrap the final answer in a \\boxed{}.")
GSM8K_EVAL = MATH_EXPERT + " \n" + EVAL_FORMAT             # the space after "\boxed{}."
MATH_EVAL = MATH_EXPERT + "\n" + EVAL_FORMAT + '" \n'      # the stray quote, space, newline
COUNTDOWN_EVAL = ("Using only the provided numbers, create an arithmetic expression that evaluates to exactly the "
                  "provided target number. You may use the operations +, -, *, and / as needed, but each number "
                  "must be used exactly once. Think step-by-step. After reasoning, provide only your final "
                  "expression inside \\boxed{} tags without including an equals sign or the target number. "
                  "For example: \\boxed{a + b * c}" + EVAL_FORMAT)  # no separator before "Respond"
HEAD = "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\n"
TAIL = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"


def countdown_rl(nums, target):
    return RL_SYSTEM + (
        f"\nUsing only the numbers {nums}, create an arithmetic expression that evaluates to exactly {target}. "
        "You must use all numbers from the list, and each number must be used exactly once. You may use the "
        "operations +, -, *, and / as needed. After reasoning, provide only your final expression inside "
        "<answer></answer> tags without including an equals sign or the target number. For example, if the "
        "numbers are [2, 3, 4] and the target is 5, a valid answer is: <answer>\n2*4-3\n</answer>")


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    # the tiny LLaDA written to disk and loaded back exactly like the 8B's tokenizer
    from model import load_tokenizer, make_tiny
    return load_tokenizer(make_tiny(tmp_path_factory.mktemp("tiny") / "tiny-llada"))


# -----------------------------------------------------------------------------
# independent checkers


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


def valid_by_rules(s):
    rows = [s[4 * r:4 * r + 4] for r in range(4)]
    cols = ["".join(row[c] for row in rows) for c in range(4)]
    boxes = [rows[r][c:c + 2] + rows[r + 1][c:c + 2] for r in (0, 2) for c in (0, 2)]
    return len(s) == 16 and all(sorted(u) == list("1234") for u in rows + cols + boxes)


OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def exact_eval(expr):
    """Evaluate + - * / over integer literals with Fractions; anything else is rejected."""
    def ev(node):
        if isinstance(node, ast.BinOp) and type(node.op) in OPS:
            return OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return Fraction(node.value)
        raise ValueError(f"unexpected node {ast.dump(node)}")
    return ev(ast.parse(expr, mode="eval").body)


def literals(expr):
    return sorted(n.value for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Constant))


# -----------------------------------------------------------------------------
# loaders on the real files


@needs_data
def test_gsm8k_files():
    test, train = load_gsm8k(SHARED_DATA / "gsm8k/test.jsonl"), load_gsm8k(SHARED_DATA / "gsm8k/train.jsonl")
    assert (len(test), len(train)) == (1319, 7473)
    ex = test[0]
    assert ex["answer"] == "18" and ex["solution"].endswith("#### 18")
    assert ex["question"].startswith("Janet’s ducks lay 16 eggs per day.")
    assert ex["prompt"] == RL_SYSTEM + "\n\n" + ex["question"]
    assert train[0]["answer"] == "72"
    assert all(e["answer"] and "####" not in e["answer"] for e in test + train)


@needs_data
def test_math_files():
    m500 = load_math(SHARED_DATA / "math500/test.jsonl")
    full = load_math(SHARED_DATA / "math_test_full/test.jsonl")
    assert (len(m500), len(full)) == (500, 5000)
    assert m500[0]["answer"] == "\\left( 3, \\frac{\\pi}{2} \\right)"  # the `answer` field, as given
    assert m500[0]["prompt"] == RL_SYSTEM + MATH_RL_MIDDLE + m500[0]["question"]
    # no `answer` field in the full test set: the last \boxed{} of the solution, nested braces intact
    known = {0: "2", 1: "10", 2: "\\dfrac{9}{7}", 3: "i", 5: "402", 6: "x \\in [-2,7]"}
    assert {i: full[i]["answer"] for i in known} == known
    # cross-check the extractor: every MATH-500 problem is in the full set, and its box == MATH-500's answer
    boxed = {e["question"]: e["answer"] for e in full}
    assert all(boxed[e["question"]] == e["answer"] for e in m500)


@needs_data
def test_countdown_files():
    d1 = load_countdown(SHARED_DATA / "d1_countdown/countdown_cd3_test.jsonl")
    assert len(d1) == 256
    assert (d1[0]["nums"], d1[0]["target"], d1[0]["answer"]) == ([30, 100, 93], 23, "23")
    assert all(len(e["nums"]) == 3 and all(1 <= x <= 100 for x in e["nums"]) and 1 <= e["target"] <= 100 for e in d1)
    assert d1[0]["prompt"] == countdown_rl("[30, 100, 93]", 23)
    rows_file = SHARED_DATA / "countdown_tasks_3to4_prefix/countdown_tasks_3to4_rows_0_11263.jsonl"
    rows = load_countdown(rows_file)  # d1 keeps only 3-number rows
    assert len(rows) == 5583 and (rows[0]["nums"], rows[0]["target"]) == ([44, 19, 35], 98)
    assert len(load_countdown(rows_file, n_numbers=None)) == 11264
    # every d1 test problem is solvable, and the enumerator's expression checks out independently
    for e in d1:
        expr = tasks.countdown_values(e["nums"])[Fraction(e["target"])]
        assert exact_eval(expr) == e["target"] and literals(expr) == sorted(e["nums"])


@needs_data
def test_sudoku_file():
    exs = load_sudoku(SHARED_DATA / "d1_sudoku/4x4_test_sudoku.csv")
    assert len(exs) == 500
    assert (exs[0]["puzzle"], exs[0]["solution"]) == ("3102200002100320", "3142243142131324")  # leading zeros kept
    for e in exs:
        assert e["puzzle"].count("0") == 8 and e["answer"] == e["solution"] and valid_by_rules(e["solution"])
        assert all(p in ("0", s) for p, s in zip(e["puzzle"], e["solution"]))
        assert e["solution"] in solve_sudoku(e["puzzle"])
    assert exs[0]["prompt"] == SUDOKU_SYSTEM + "\n\nSolve the following Sudoku puzzle: 3102200002100320\n"
    toy = load_task("toy", SHARED_DATA / "d1_sudoku/4x4_test_sudoku.csv")  # the same puzzles, toy format
    assert toy[0]["prompt"] == "Sudoku: 3102200002100320" and toy[0]["completion"] == "3142243142131324"


@needs_data
def test_shipped_s1k_has_no_traces():
    with pytest.raises(ValueError, match="reasoning traces") as err:
        load_s1k(SHARED_DATA / "s1k_questions_no_traces/s1k.json")
    assert "thinking_trajectories" in str(err.value) and "attempt" in str(err.value) and "s1k.json" in str(err.value)


def test_s1k_formats(tmp_path):
    rec = {"question": "What is 1+1?", "thinking_trajectories": ["One plus one is two."], "attempt": "2"}
    want = "<reasoning>One plus one is two.</reasoning>\n<answer>2</answer>"
    (tmp_path / "s1k.jsonl").write_text(json.dumps(rec) + "\n")
    (tmp_path / "s1k.json").write_text(json.dumps([{**rec, "thinking_trajectories": "One plus one is two."}]))
    for name in ("s1k.jsonl", "s1k.json"):  # jsonl with a list trace, json array with a string trace
        [ex] = load_task("s1k", tmp_path / name)
        assert ex["completion"] == want and ex["answer"] == "2"
        assert ex["prompt"] == SFT_SYSTEM + "\n\nWhat is 1+1?"


# -----------------------------------------------------------------------------
# error cases


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        load_gsm8k(tmp_path / "nope.jsonl")


def test_missing_field_names_file_line_and_field(tmp_path):
    f = tmp_path / "g.jsonl"
    f.write_text(json.dumps({"question": "q", "answer": "#### 1"}) + "\n" + json.dumps({"question": "q"}) + "\n")
    with pytest.raises(ValueError, match=r"g\.jsonl:2: missing field 'answer'"):
        load_gsm8k(f)


def test_malformed_line_names_file_and_line(tmp_path):
    f = tmp_path / "cd.jsonl"
    f.write_text('{"input": "1,2,3", "output": "6"}\n\n{"input": "1,2,3", "output": \n')
    with pytest.raises(ValueError, match=r"cd\.jsonl:3: malformed JSON"):
        load_countdown(f)


def test_content_errors(tmp_path):
    (tmp_path / "g.jsonl").write_text(json.dumps({"question": "q", "answer": "no marker"}) + "\n")
    with pytest.raises(ValueError, match="####"):
        load_gsm8k(tmp_path / "g.jsonl")
    (tmp_path / "m.jsonl").write_text(json.dumps({"problem": "p", "solution": "no box"}) + "\n")
    with pytest.raises(ValueError, match=r"m\.jsonl:1"):
        load_math(tmp_path / "m.jsonl")
    (tmp_path / "s.csv").write_text("Puzzle,Solution\n310220000210032,3142243142131324\n")  # 15 chars
    with pytest.raises(ValueError, match=r"s\.csv:2"):
        load_sudoku(tmp_path / "s.csv")
    (tmp_path / "x.csv").write_text("Puzzle,Answer\n3102200002100320,3142243142131324\n")
    with pytest.raises(ValueError, match="'Solution'"):
        load_sudoku(tmp_path / "x.csv")
    (tmp_path / "short.csv").write_text("Puzzle,Solution\n3102200002100320,3142243142131324\n3102200002100320\n")
    with pytest.raises(ValueError, match=r"short\.csv:3: missing field 'Solution'"):
        load_sudoku(tmp_path / "short.csv")
    (tmp_path / "c.jsonl").write_text(json.dumps({"nums": [1, "x", 3], "target": 4}) + "\n")
    with pytest.raises(ValueError, match=r"c\.jsonl:1: numbers"):
        load_countdown(tmp_path / "c.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="no records"):
        load_countdown(tmp_path / "empty.jsonl")
    with pytest.raises(ValueError, match="unknown task"):
        load_task("gsm9k", tmp_path / "g.jsonl")


# -----------------------------------------------------------------------------
# prompts and rendering


EXAMPLES = {
    "gsm8k": {"question": "Q?"}, "math": {"question": "P?"},
    "countdown": {"nums": [44, 19, 35], "target": 98}, "sudoku": {"puzzle": "3102200002100320"},
    "toy": {"puzzle": "3102200002100320"},
}


def test_rl_prompts_exact():
    assert tasks.rl_prompt("gsm8k", EXAMPLES["gsm8k"]) == RL_SYSTEM + "\n\nQ?"
    assert tasks.rl_prompt("math", EXAMPLES["math"]) == RL_SYSTEM + MATH_RL_MIDDLE + "P?"
    assert tasks.rl_prompt("countdown", EXAMPLES["countdown"]) == countdown_rl("[44, 19, 35]", 98)
    assert tasks.rl_prompt("sudoku", EXAMPLES["sudoku"]) == (
        SUDOKU_SYSTEM + "\n\nSolve the following Sudoku puzzle: 3102200002100320\n")
    assert tasks.rl_prompt("toy", EXAMPLES["toy"]) == "Sudoku: 3102200002100320"
    assert set(TASKS) == set(EXAMPLES)


def test_eval_messages_exact():
    assert eval_message("gsm8k", EXAMPLES["gsm8k"]) == GSM8K_EVAL + "\n\nQ?"
    assert eval_message("math", EXAMPLES["math"]) == MATH_EVAL + "\n\nP?"
    assert eval_message("countdown", EXAMPLES["countdown"]) == COUNTDOWN_EVAL + "\n\nNumbers: [44, 19, 35]\nTarget: 98"
    assert eval_message("sudoku", EXAMPLES["sudoku"]) == (
        SUDOKU_SYSTEM + "\n\nSolve the following Sudoku puzzle: 3102200002100320\n")
    assert "\\boxed{}. \nRespond" in GSM8K_EVAL and "c}Respond" in COUNTDOWN_EVAL  # the quirks are really there


def test_rendering(tok):
    for task, ex in EXAMPLES.items():
        rl = render(tok, tasks.rl_prompt(task, ex))
        ev = render_eval(tok, task, ex)
        assert rl.startswith(HEAD) and rl.endswith(TAIL)
        # the template trims the message: the system prompt's leading "\n" (and Sudoku's trailing one) vanish
        assert rl == HEAD + tasks.rl_prompt(task, ex).strip() + TAIL
        prefill = "" if task == "toy" else "<reasoning>"
        assert ev == HEAD + eval_message(task, ex).strip() + TAIL + prefill
    assert render(tok, RL_SYSTEM + "\n\nQ?").startswith(HEAD + "Respond in the following format:\n<reasoning>")
    assert render_eval(tok, "gsm8k", EXAMPLES["gsm8k"]).endswith(
        "<|start_header_id|>assistant<|end_header_id|>\n\n<reasoning>")


def test_encode_left_truncates(tok):
    text = render(tok, tasks.rl_prompt("sudoku", EXAMPLES["sudoku"]))
    ids = encode(tok, text)
    assert tok.decode(ids) == text and ids[0] == tok.convert_tokens_to_ids("<|startoftext|>")
    assert encode(tok, text, max_length=200) == ids[-200:] and len(ids) > 200  # BOS and instructions cut off
    assert encode(tok, text, max_length=10 ** 6) == ids


@needs_data
def test_eval_questions_match_d1_baseline_files():
    # d1's eval shards the subset by rank stride (rank r of 7 gets items r, r+7, ...) and stores `question`;
    # matching all 256 questions checks both d1_eval_subset and the question format against d1's own output
    base = SHARED_DATA / "d1_eval_baselines"
    for task, data_file, n in [("sudoku", "d1_sudoku/4x4_test_sudoku.csv", 500),
                               ("countdown", "d1_countdown/countdown_cd3_test.jsonl", 256)]:
        exs = load_task(task, SHARED_DATA / data_file)
        subset = d1_eval_subset(n)
        for rank in range(7):
            gens = json.loads((base / f"{task}_instruct_256_128_{rank}_generations.json").read_text())["generations"]
            want = [eval_question(task, exs[i]) for i in subset[rank::7]]
            assert [g["question"] for g in gens] == want
    # GSM8K / MATH: the stored question is the raw question text
    gsm = {e["question"] for e in load_gsm8k(SHARED_DATA / "gsm8k/test.jsonl")}
    gens = json.loads((base / "gsm8k_instruct_256_128_0_generations.json").read_text())["generations"]
    assert all(g["question"] in gsm for g in gens)


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
        assert e["answer"] == e["solution"] and e["prompt"] == tasks.rl_prompt("sudoku", e)
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
        assert e["answer"] == str(e["target"]) and e["prompt"] == countdown_rl(str(e["nums"]), e["target"])
    assert make_countdown(40, seed=0) == exs and make_countdown(40, seed=1) != exs
    assert all(max(e["nums"]) <= 10 for e in make_countdown(10, seed=0, max_num=10))
    with pytest.raises(ValueError, match="could not draw"):
        make_countdown(1, seed=0, max_num=1, min_target=50)  # 1, 1, 1 never reach 50


def test_countdown_values_small_case():
    values = tasks.countdown_values([2, 3, 4])
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
# d1's eval subsets


def test_d1_eval_subset():
    state = np.random.get_state()
    sub = d1_eval_subset(500)
    assert sub[:8] == [361, 73, 374, 155, 104, 394, 377, 124] and len(set(sub)) == 256
    np.random.seed(42)
    assert sub == np.random.choice(500, 256, replace=False).tolist()  # d1's exact call
    np.random.set_state(state)
    assert sorted(d1_eval_subset(256)) == list(range(256)) and d1_eval_subset(256) != list(range(256))
    assert d1_eval_subset(100) == list(range(100)) and d1_eval_subset(1319, k=-1) == list(range(1319))
    # the global numpy RNG is left alone
    assert np.random.get_state()[1].tolist() == state[1].tolist()


def test_partial_label_leaves_blanks_open_at_the_given_rate():
    from tasks import partial_label
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
