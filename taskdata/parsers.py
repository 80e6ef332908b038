"""
d1's "generous" EVAL parsers (docs/d1.md §8.3), the ones behind every accuracy in the paper's Table 1
(d1's eval/parse_and_get_acc.py @ 837888f), and one scorer per task, which tasks.py's registry names.

They are NOT the RL rewards of rewards.py:
  GSM8K      first \\boxed{} (then <answer>), compared as a float   (RL: exact string in <answer>)
  MATH       last \\boxed{} anywhere, else first <answer>           (RL: the same last box, else the text)
  Countdown  last \\boxed{}, \\times/\\div/\\cdot -> * /, "a+b=c" -> a+b (RL: last <answer> only)
  Sudoku     5 fallback patterns, non-digits KEPT, cell micro-average (RL: digits of the last <answer>)
so eval accuracy and training reward can disagree on the same text. Both read answers with the same
helpers (answers.py: tags, \\boxed{}, MATH equality, numbers; arith.py: Countdown arithmetic). Each
parser is a small pure function. Re-scoring d1's released LLaDA-8B-Instruct generations
(eval/eval_baselines/ of github.com/dllm-reasoning/d1) with these reproduces Table 1's LLaDA row exactly
(tests/test_parsers.py; `python eval.py --rescore d1/eval/eval_baselines/` in a clone of d1 prints it).

The one import from a folder below the eight top-level files up into them: d1's eval parsers reuse its
training rewards (the toy's verifier, Countdown's reward, the code reward's runner) from rewards.py, as
d1's eval does; tests/test_layout.py names this exception and refuses any other.

    from taskdata.parsers import score_math
    score_math(r"... so \\boxed{\\dfrac{1}{2}}", {"answer": "0.5"})  # {"pred": ..., "correct": True, ...}
"""
import re
from functools import partial

from taskdata.answers import (
    find_numbers,
    first_tag_content,
    float_or_none,
    is_equiv,
    last_boxed_only_string,
    last_tag_content,
    remove_boxed,
)
from taskdata.arith import evaluate_equation, reaches_target, uses_exactly
from sandbox.code_prep import benchmark_program
from sandbox.run import run_batch as sandbox_run_batch
from rewards import (
    COUNTDOWN_CORRECT,
    coding_rewards,
    countdown_reward,
    extract_code,
    toy_reward,
    toy_solved,
)

# Regexes: d1's patterns are kept verbatim (one Sudoku pattern loses a redundant "\s*", see there).
# Those that begin with a literal tag and then ".*?" are run with .match() at the FIRST occurrence of
# the tag, not .search(): the same result in one scan instead of one per occurrence (quadratic); what
# stays quadratic is bounded by a line or a run of blanks (tests/test_parsers.py times it).

PARSER_VERSION = "d1-837888f.2"  # recorded in eval manifests: numbers from different parsers don't compare
# .2: a MATH "a/b" with a side that is no integer ("x / y") is compared raw, as d1 does (answers._fix_a_slash_b),
# and a last box that is an \fbox{x} is the prediction as it is (d1's eval remove_boxed); the released
# generations score the same under both (the Table 1 row holds), other text may not

_GSM8K_BOX = re.compile(r"\\boxed{(.*?)}")  # no DOTALL (as in d1): a box's content stays on one line
_ONLY_DOTS = re.compile(r"\.+")
# d1's gold: the first "#### N" of the GSM8K solution. No minus sign, so "#### -3" has NO gold (see below).
_GSM8K_GOLD = re.compile(r"####\s*\$?([\d,]+(?:\.\d+)?)")
_GSM8K_GOLD_SIGNED = re.compile(r"####\s*\$?(-?[\d,]+(?:\.\d+)?)")  # ours, opt-in: keeps the sign


def parse_gsm8k_eval(generation):
    """d1's GSM8K prediction (a float) or None: the first usable \\boxed{...} (each box on one line;
    empty, "..." or number-free boxes are skipped), else the first <answer>...</answer>."""
    # the boxes in order: the FIRST usable one wins (the MATH and Countdown parsers take the last)
    for content in _GSM8K_BOX.findall(generation):
        content = content.strip()
        if not content or _ONLY_DOTS.fullmatch(content):  # the prompt's "\boxed{...}" template, copied
            continue
        # float(content) first ("\boxed{18}", "\boxed{ 18.5 }"), else the FIRST number inside:
        # "\boxed{\$18}" -> 18.0, and d1's quirk "\boxed{1,000}" -> 1.0
        value = float_or_none(content)
        if value is None:
            numbers = find_numbers(content)
            if not numbers:
                continue  # e.g. "\boxed{x}": try the next box
            value = float(numbers[0])
        return value
    # no usable box: the FIRST <answer>...</answer>, stripped
    answer = first_tag_content(generation)
    answer = answer.strip() if answer is not None else ""
    if not answer:
        return None
    value = float_or_none(answer)
    if value is None:
        numbers = find_numbers(answer)
        # here the LAST number (in a box, the first): in a worked "3 + 4 = 7" that is the result
        value = float(numbers[-1]) if numbers else None
    return value


def gsm8k_gold_eval(answer, signed=False):
    """The gold float d1 compares against, from the full GSM8K solution ("... #### 1,000"), the bare text
    after "####" ("1,000", as load_gsm8k stores it) or an already parsed number (d1's released files).
    d1 takes the first r"####\\s*\\$?([\\d,]+(?:\\.\\d+)?)" match and drops the commas; None = no gold."""
    if answer is None:
        return None
    # d1's released files store the gold already parsed (a float); a bool is an int to Python, not a gold
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        return float(answer)
    text = str(answer)
    if "####" not in text:
        text = "#### " + text  # a bare answer goes through the same pattern as a full solution
    # d1's pattern has no minus sign, so the 2 GSM8K test items with a negative answer (-10 and -3)
    # get NO gold (None): d1 counts them as processed and always wrong, even when the model answers -10.
    # Its released files store ground_truth = null for them (both are among the 1,130 released
    # questions: 6 nulls over the 3 lengths), and only counting them as wrong reproduces
    # 69.29 / 76.37 / 78.14 (dropping them from the denominator gives 69.41 / 76.51 / 78.28).
    # signed=True (ours, not d1) keeps the sign: LLaDA then scores 69.47 / 76.55 / 78.23 on the same files
    match = (_GSM8K_GOLD_SIGNED if signed else _GSM8K_GOLD).search(text)
    if match is None:
        return None
    return float_or_none(match.group(1).replace(",", ""))  # None for a degenerate "#### ,"


def _d1_last_box(text):
    """What d1's eval gets from remove_boxed(last_boxed_only_string(text)): the content of the LAST box
    (answers.py's d1 helpers, "\\boxed 5" special case included); None when that box is unbalanced
    (d1: an exception); and the WHOLE TEXT when there is no box at all."""
    # no box at all: the WHOLE TEXT. This is how d1's eval helpers behave, not a guess: falling back
    # to <answer> here instead makes MATH500@128 26.2 (one unboxed "<answer>\frac{1}{4}</answer>"
    # counted) and Countdown@128 21.09 (one unboxed "<answer>96 - 48  + 26</answer>"), while d1
    # reports 26.0 and 20.7 (tests/test_parsers.py)
    if "\\boxed" not in text and "\\fbox" not in text:
        return text
    box = last_boxed_only_string(text)
    if box is None:  # unbalanced: d1's helpers raise, and its parser falls back
        return None
    try:
        return remove_boxed(box)
    except ValueError:
        # an \fbox{x} (the last box when there is no \boxed): d1's EVAL copy of remove_boxed returns what
        # it cannot unwrap as it is, so the prediction is "\fbox{x}" itself, which then does not equal a
        # bare gold (the reward's copy asserts instead: answers.boxed_or_self). No released generation has one
        return box


def parse_math_eval(generation):
    """d1's MATH500 prediction: the content of the LAST \\boxed{} in the whole generation; if that box
    is unbalanced or empty, the FIRST <answer>...</answer>, stripped (None if there is none)."""
    # the LAST box of the whole generation. Quirk kept from d1: a generation with NO box at all is its
    # own prediction (so it is wrong unless it is just the answer), and its <answer> tag is NOT consulted
    pred = _d1_last_box(generation)
    # None (unbalanced box) or "" (empty box): the FIRST <answer> content. "" stays "" when there is no
    # tag, as in d1; neither None nor "" ever equals a gold answer
    if not pred:
        answer = first_tag_content(generation)
        if answer is not None:
            pred = answer.strip()
    return pred


# a model that writes the whole equation "a + b - c = T": d1 keeps the left side, made of digits,
# operators, parentheses and spaces only
_COUNTDOWN_LHS = re.compile(r"([0-9+\-*/() ]+)=[0-9. ]+")  # "49 + 55 - 53 = 51" -> "49 + 55 - 53"


def parse_countdown_eval(generation):
    """d1's Countdown expression (a string, possibly not an expression at all): the LAST \\boxed{}
    (fallbacks below), LaTeX operators made Python's, and of "<digits, + - * / ( ) and
    spaces>=<number>" only that left side, stripped."""
    # the LAST box; with NO box at all the whole generation (d1 does not consult <answer> then)
    expr = _d1_last_box(generation)
    # an unbalanced box: the FIRST <answer> content, stripped, else the whole generation
    if expr is None:
        answer = first_tag_content(generation)
        expr = answer.strip() if answer is not None else generation
    # LaTeX operators as Python's: \div -> /, \times and \cdot -> *
    expr = expr.replace("\\div", "/").replace("\\times", "*").replace("\\cdot", "*")
    match = _COUNTDOWN_LHS.search(expr) if "=" in expr else None  # the check only skips a futile search
    return match.group(1).strip() if match else expr


def countdown_expression_correct(expr, nums, target):
    """d1's check of a parsed expression: the integers written in it (r"\\d+", so "2.5" is 2 and 5) are
    exactly the multiset `nums`, and its value is within 1e-5 of `target`."""
    if not uses_exactly(expr, nums):  # no length limit here, unlike the reward: d1's eval has none
        return False
    # a deliberate difference: d1 evaluates with a restricted Python eval(); arith.evaluate_equation
    # uses exact Fractions and never executes text. They agree on + - * / ( ) arithmetic; they differ
    # only on "**" and "//" (d1 computes them, we reject them; d1's prompt allows only + - * /) and on
    # values far beyond anything 3 numbers <= 100 can reach
    value = evaluate_equation(expr.strip())  # None where d1's eval raises (d1's value is then inf)
    return reaches_target(value, target)


def countdown_eval_correct(generation, nums, target):
    """True iff d1's eval parser finds in `generation` a correct expression for (nums, target)."""
    return countdown_expression_correct(parse_countdown_eval(generation), nums, target)


# d1's Sudoku patterns in d1's order; the first whose FIRST match has a non-blank group wins. Verbatim,
# except that pattern 1 drops d1's "\s*" before the group (d1: r"<answer>.*?```\s*([\d\s]+)```"): it
# only moves leading blanks out of the group, which is stripped anyway, so the parse is the same, but
# its overlap with [\d\s] made a failed match quadratic in a run of blanks (1 s for 8k spaces).
_SUDOKU_PATTERNS = (
    re.compile(r"<answer>.*?```([\d\s]+)```", re.DOTALL),                             # fenced digits
    re.compile(r"<answer>(.*?)(?:<\|eot_id\|>|<\|endoftext\|>|</answer>)", re.DOTALL),  # tag content
    re.compile(r"</answer>\s*(.*?)(?:<\|eot_id\|>|<\|endoftext\|>|$)", re.DOTALL),    # text AFTER </answer>
    re.compile(r".*?(\d{16})\s*</answer>", re.DOTALL),                               # 16 digits before </answer>
    re.compile(r"\b(\d{16})\b", re.DOTALL),                                          # any 16-digit word
)
# Where the first match of each pattern can start: the first occurrence of its leading literal, or the
# text start for the leading ".*?" of pattern 4; pattern 5 is searched. Each pattern also needs the text
# to contain `needs`, which skips a futile scan.
_SUDOKU_ANCHORS = ("<answer>", "<answer>", "</answer>", None, None)
_SUDOKU_NEEDS = ("```", "<answer>", "</answer>", "</answer>", "")
SUDOKU_CELLS = 16


def parse_sudoku_eval(generation):
    """d1's Sudoku guess: the first non-blank group among the 5 patterns above, with all whitespace
    removed, right-padded with "0" / cut to 16 characters; "" when no pattern finds anything (d1 then
    scores 0 cells)."""
    found = ""
    # in d1's order: the first pattern whose FIRST match has a non-blank group wins
    for i, pattern in enumerate(_SUDOKU_PATTERNS):
        if _SUDOKU_NEEDS[i] not in generation:
            continue
        # pattern 5 has no leading literal to anchor on: a plain search, as d1's
        if i == 4:
            match = pattern.search(generation)
        else:  # identical to d1's .search (see the section header), minus the quadratic failure
            start = generation.find(_SUDOKU_ANCHORS[i]) if _SUDOKU_ANCHORS[i] else 0
            match = pattern.match(generation, start) if start >= 0 else None
        if match and match.group(1).strip():
            found = match.group(1).strip()
            break
    # all whitespace goes, but anything else (letters, "\", "</answer", "²") is KEPT, as in d1: no
    # str.isdigit() filter here, unlike the RL reward (rewards.sudoku_reward), which keeps digits only
    found = re.sub(r"\s", "", found)
    if not found:
        return ""
    return found[:SUDOKU_CELLS].ljust(SUDOKU_CELLS, "0")  # "0" never equals a solution digit


def sudoku_eval_cells(generation, puzzle, solution):
    """(correct_cells, empty_cells): how many of the puzzle's blanks ("0") the guess fills with the
    solution's digit. d1 reports sum(correct_cells) / sum(empty_cells) over the test set."""
    guess = parse_sudoku_eval(generation)
    # only the puzzle's blanks count: copying the givens earns nothing
    blanks = [i for i, c in enumerate(puzzle) if c == "0"]
    # no guess: 0 correct cells, but its blanks still count in d1's denominator
    correct = sum(guess[i] == solution[i] for i in blanks) if guess else 0
    return correct, len(blanks)


def sudoku_solved(generation, puzzle, solution):
    """Every blank cell right (our per-puzzle solve rate, reported beside d1's cell score)."""
    correct, total = sudoku_eval_cells(generation, puzzle, solution)
    return total > 0 and correct == total


# -----------------------------------------------------------------------------
# Code benchmarks (ours: d1's code eval script was not released, docs/coding.md §1.5). Generous, like
# d1's other eval parsers: the first ```python fence (the RL reward's rule), else the first fence of any
# language, and a fence the generation length cut off still counts up to the end of the text

_PY_FENCE = re.compile(r"```python\n(.*?)(?:```|\Z)", re.DOTALL)
_ANY_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)


def parse_code_eval(generation):
    """The program a code generation proposes ("" when it has no fenced block)."""
    m = _PY_FENCE.search(generation) or _ANY_FENCE.search(generation)
    return m.group(1) if m else ""


# The eval's timers, more generous than the RL reward's (sandbox defaults: 3 s a test, 10 s a program):
# pass@1 must not depend on how loaded the machine is. Reference solutions take seconds: MBPP 123
# (amicable numbers below 9999) needs 1-2.6 s on 2 busy cores and failed its 3 s timer under load
EVAL_TEST_TIMEOUT_S, EVAL_TIMEOUT_S = 20.0, 60.0


def score_code_batch(generations, examples, run_batch=None):
    """score_eval for code benchmarks, all programs run in parallel in sandbox/run.py: the item's
    program_prefix (HumanEval's prompt, MBPP's imports), then the parsed code, then each of its
    unit_tests. Correct (pass@1) = every test passes; tests_passed / tests_total beside it."""
    if run_batch is None:
        run_batch = partial(sandbox_run_batch, test_timeout_s=EVAL_TEST_TIMEOUT_S, timeout_s=EVAL_TIMEOUT_S)
    codes = [parse_code_eval(g) for g in generations]
    # no code: nothing to run, every test failed
    jobs = [(benchmark_program(ex, code), list(ex["unit_tests"])) for code, ex in zip(codes, examples)
            if code]
    results = iter(run_batch(jobs) if jobs else [])
    out = []
    for code, ex in zip(codes, examples):
        passed = next(results) if code else [False] * len(ex["unit_tests"])
        correct = bool(passed) and all(passed)
        out.append({"pred": code, "correct": correct, "score": float(correct), "tests_passed": sum(map(bool, passed)),
                    "tests_total": len(passed)})
    return out


def score_pbe_batch(generations, examples):
    """The code toy (pbe.py, ours): correct = the program passes every hidden test, scored by the RL
    reward itself (rewards.coding_rewards: d1's extraction and test split, run in sandbox/run.py);
    `score` keeps the share of hidden tests passed."""
    shares = coding_rewards(generations, examples)
    return [{"pred": extract_code(g)[0], "correct": s >= 1.0, "score": float(s >= 1.0), "tests_share": s}
            for g, s in zip(generations, shares)]


# they run programs: eval.py decides the sandbox up front (ops/checks.py sandbox_mode)
score_code_batch.runs_code = score_pbe_batch.runs_code = True


def _correct(pred, correct):
    """The score dict of a task with a yes/no headline: pred, correct, score = float(correct)."""
    return {"pred": pred, "correct": bool(correct), "score": float(bool(correct))}


# The per-task scorers: score(generation, example) -> a dict with
#   pred     what the parser extracted (float / str / None)
#   correct  bool: the item counts as solved (Sudoku and toy: every blank cell right)
#   score    the item's share of the headline metric: float(correct), except Sudoku, where it is the
#            cell accuracy; aggregate Sudoku as sum(cells_correct) / sum(cells_total) (d1's micro
#            average; it equals mean(score) only when every puzzle has the same number of blanks)
# and for Sudoku and toy also cells_correct, cells_total, solved. tasks.py's registry names each task's.

def score_gsm8k(generation, example):
    """GSM8K: the first box as a float against d1's gold ("####" answer, full solution or number)."""
    pred, gold = parse_gsm8k_eval(generation), gsm8k_gold_eval(example["answer"])
    return _correct(pred, pred is not None and gold is not None and pred == gold)  # float equality, as d1


def score_math(generation, example):
    """MATH: the last box, Hendrycks-MATH equality (docs/d1.md §6.2). d1's quirk included, always (this
    parser reproduces d1's numbers): "x / y" makes d1's normaliser raise, so it is compared raw and does
    not equal "x/y" (answers._fix_a_slash_b). The repaired is_equiv(fixed=True) is the RL reward's, with
    D1_BUGS off; eval numbers stay d1's so that they compare with the paper."""
    pred = parse_math_eval(generation)
    return _correct(pred, pred is not None and is_equiv(pred, str(example["answer"])))


def score_countdown(generation, example):
    """Countdown: the last box (or first "a+b=c"), each number used once, reaching the target."""
    pred = parse_countdown_eval(generation)
    return _correct(pred, countdown_expression_correct(pred, example["nums"], example["target"]))


def score_countdown_toy(generation, example):
    """The testbed (ours) is scored by the RL reward itself, as the other toys: d1's Countdown EVAL parser
    reads a \\boxed{} answer (d1's eval prompt asks for one) and, without a box, the first "x=y" of the
    whole text, which here is a reasoning line."""
    return _correct(last_tag_content(generation), countdown_reward(generation, example) == COUNTDOWN_CORRECT)


def score_sudoku(generation, example):
    """Sudoku: d1's fallback patterns, scored per empty cell. `correct` is the whole puzzle; `score` is the
    cell share, which the caller aggregates as a sum over a sum (d1's micro average), not as a mean."""
    cells, total = sudoku_eval_cells(generation, example["puzzle"], example["solution"])
    solved = total > 0 and cells == total
    return {"pred": parse_sudoku_eval(generation), "correct": solved, "score": cells / total if total else 0.0,
            "cells_correct": cells, "cells_total": total, "solved": solved}


def score_toy(generation, example):
    """The Sudoku toy (ours): the completion IS the grid (rewards.toy_reward / toy_solved)."""
    puzzle = example["puzzle"]
    total = puzzle.count("0")
    solved = bool(toy_solved(generation, example))
    # pred: the grid as toy_reward reads it; toy_reward is the share of blanks filled right, so
    # times the blank count it gives the cell count
    return {"pred": generation.lstrip()[:len(puzzle)], "correct": solved, "score": float(solved),
            "cells_correct": round(toy_reward(generation, example) * total), "cells_total": total,
            "solved": solved}


_SUDOKU_PUZZLE_IN_QUESTION = re.compile(r"Sudoku puzzle: ([0-9]{16})")
D1_RELEASED_TASK_NAMES = {"gsm8k": "gsm8k", "math500": "math", "math": "math", "countdown": "countdown",
                          "sudoku": "sudoku"}  # d1's file-name task -> ours


def d1_example_from_released(task, item):
    """Our example dict from one item {question, generations, ground_truth} of d1's released eval JSON
    (`{task}_instruct_{gen_length}_{steps}_{rank}_generations.json`; task may be d1's "math500").
      gsm8k      ground_truth is d1's parsed float, or null for the 2 negative answers -> answer "18"
                 ("0.5" for non-integers), or None: no gold, always wrong, as in d1 (gsm8k_gold_eval)
      math500    ground_truth = MATH-500's answer string -> answer
      countdown  ground_truth = [[n1, n2, n3], target] -> nums, target
      sudoku     the puzzle is read from the question ("Solve the following Sudoku puzzle: <16 digits>"),
                 solution = ground_truth
    `question` is d1's eval question text."""
    if task not in D1_RELEASED_TASK_NAMES:
        raise ValueError(f"unknown d1 task {task!r}; expected one of {sorted(D1_RELEASED_TASK_NAMES)}")
    task = D1_RELEASED_TASK_NAMES[task]
    question, gold = item["question"], item["ground_truth"]
    if task == "gsm8k":
        # null: the negative GSM8K answers d1 found no gold for; no answer here either, so always wrong
        if gold is None:
            answer = None
        else:  # "18", not "18.0": the same string load_gsm8k stores, and it parses back to the same float
            gold = float(gold)
            answer = str(int(gold)) if gold.is_integer() else repr(gold)
        ex = {"question": question, "answer": answer}
    elif task == "math":
        ex = {"question": question, "answer": str(gold)}
    elif task == "countdown":
        nums, target = gold
        ex = {"nums": list(nums), "target": target, "answer": str(target)}
    else:  # sudoku
        # d1's Sudoku items store only the solution; the puzzle is read back from the question text
        match = _SUDOKU_PUZZLE_IN_QUESTION.search(question)
        if match is None:
            raise ValueError(f"no 16-digit Sudoku puzzle in question {question[:80]!r}")
        ex = {"puzzle": match.group(1), "solution": str(gold), "answer": str(gold)}
    return ex

