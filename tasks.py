"""
The d1 tasks: data loaders, the exact d1 prompt strings, chat rendering, and procedural generators.

Every example is a plain dict. Always present: `prompt` (the d1 RL user message, d1-spec §7.1, NOT yet
chat-rendered) and `answer` (the gold answer as a string). Per task also:
  gsm8k      question, solution (full worked answer ending "#### N"; answer = text after ####)
  math       question (= problem), solution when the file has one (d1's RL reward boxes it at reward time)
  countdown  nums (list[int]), target (int); generated ones add `expression` (one solution)
  sudoku     puzzle, solution (16-char strings, '0' = blank)
  toy        puzzle, solution, completion (= solution: the SFT target of the CPU demo)
  s1k        question, completion (the SFT assistant turn, §5.1); prompt is the SFT user message
The eval prompts differ from the RL ones (§8.2: \\boxed{} format, "<reasoning>" prefill); they are
built by eval_message() / render_eval(). d1-spec §2.4: the chat template trims the message, so the
leading "\\n" of every system prompt disappears when rendered; RL left-truncation to the last
MAX_PROMPT_LENGTH tokens is encode()'s job.
d1's "generous" EVAL parsers (§8.3) and score_eval(), the one scorer eval.py uses, are near the end.

Files are read from local paths only (no hub, no network); see ../shared/data/README.md. d1 itself
loads GSM8K/MATH/Countdown train sets from the HF hub; we take the same rows from jsonl/csv files.
Real 4x4 Sudoku train data is not available, so make_sudoku() generates puzzles from the 288 grids.

Print a few rendered examples of every task (tiny byte-level tokenizer unless --model-dir is given):
    python tasks.py
    python tasks.py --model-dir /path/to/LLaDA-8B-Instruct --data-dir ../shared/data
"""
import argparse
import csv
import itertools
import json
import random
import re
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import numpy as np

from rewards import (COUNTDOWN_TOL, evaluate_equation, is_equiv, last_boxed_only_string, remove_boxed, toy_reward,
                     toy_solved)

TASKS = ("gsm8k", "math", "countdown", "sudoku", "toy")

# -----------------------------------------------------------------------------
# Prompt strings, character-exact to d1 @ 837888f (d1-spec §5.1, §7.1, §8.2). Do not "tidy" them:
# the odd spaces, the stray quote and the missing separators are what LLaDA was trained/evaluated on.

# RL system prompt (§7.1), shared by GSM8K, MATH and Countdown. The leading "\n" is trimmed by the template.
SYSTEM_PROMPT = "\nRespond in the following format:\n<reasoning>\n...\n</reasoning>\n<answer>\n...\n</answer>\n"
# SFT system prompt (§5.1): "Your reasoning here" where the RL prompt says "...".
SFT_SYSTEM_PROMPT = ("\nRespond in the following format:\n<reasoning>\nYour reasoning here\n</reasoning>\n"
                     "<answer>\n...\n</answer>\n")
# Inserted between SYSTEM_PROMPT and the MATH problem during RL (note the space before "\n\n").
MATH_RL_INSTRUCTION = ("\n\nYou are a math expert. You will be given a question to solve. Solve it step by step. "
                       "Wrap the final answer in a \\boxed{}. \n\n")
# Countdown RL instruction; {nums} is the Python list repr, e.g. [44, 19, 35]. Only ONE "\n" after SYSTEM_PROMPT.
COUNTDOWN_RL_TEMPLATE = (
    "\nUsing only the numbers {nums}, create an arithmetic expression that evaluates to exactly {target}. "
    "You must use all numbers from the list, and each number must be used exactly once. "
    "You may use the operations +, -, *, and / as needed. After reasoning, provide only your final "
    "expression inside <answer></answer> tags without including an equals sign or the target number. "
    "For example, if the numbers are [2, 3, 4] and the target is 5, a valid answer is: <answer>\n2*4-3\n</answer>")
# Sudoku system prompt, RL and eval alike (§7.1); written line by line so every "\n" is visible.
SUDOKU_SYSTEM_PROMPT = (
    "\n"
    "Please solve the following 4x4 Sudoku puzzle. The puzzle is provided as a 16-character string reading "
    "left-to-right, top-to-bottom, where '0' represents empty cells.\n"
    "\n"
    "Rules:\n"
    "- Fill empty cells with digits 1-4\n"
    "- Each row must contain digits 1-4 exactly once\n"
    "- Each column must contain digits 1-4 exactly once\n"
    "- Each 2x2 box must contain digits 1-4 exactly once\n"
    "\n"
    "Important: Your solution must be a COMPLETE 16-character string with only the digits 1-4, "
    "representing your final solved grid.\n"
    "\n"
    "Respond in this exact format:\n"
    "<reasoning>\n"
    "Your step-by-step solving process\n"
    "</reasoning>\n"
    "<answer>\n"
    "[16-character solution string with no spaces or separators]\n"
    "</answer>\n")
SUDOKU_QUESTION = "Solve the following Sudoku puzzle: {puzzle}\n"  # RL prompt adds "\n\n" before it, as eval does
# Eval system prompts (§8.2). GSM8K: a space after "\boxed{}.".
GSM8K_EVAL_PROMPT = ("You are a math expert. You will be given a question to solve. Solve it step by step. "
                     "Wrap the final answer in a \\boxed{}. \nRespond in the following format:\n<reasoning>\n"
                     "Your reasoning here\n</reasoning>\n<answer>\n\\boxed{...}\n</answer>")
# MATH500: no space after "\boxed{}.", and a stray '" \n' after </answer> (a typo in d1's triple-quoted string).
MATH_EVAL_PROMPT = ("You are a math expert. You will be given a question to solve. Solve it step by step. "
                    "Wrap the final answer in a \\boxed{}.\nRespond in the following format:\n<reasoning>\n"
                    "Your reasoning here\n</reasoning>\n<answer>\n\\boxed{...}\n</answer>\" \n")
# Countdown: d1 concatenates two strings with no separator, hence "c}Respond".
COUNTDOWN_EVAL_PROMPT = (
    "Using only the provided numbers, create an arithmetic expression that evaluates to exactly the provided "
    "target number. You may use the operations +, -, *, and / as needed, but each number must be used exactly "
    "once. Think step-by-step. After reasoning, provide only your final expression inside \\boxed{} tags without "
    "including an equals sign or the target number. For example: \\boxed{a + b * c}Respond in the following "
    "format:\n<reasoning>\nYour reasoning here\n</reasoning>\n<answer>\n\\boxed{...}\n</answer>")
COUNTDOWN_QUESTION = "Numbers: {nums}\nTarget: {target}"
EVAL_PROMPTS = {"gsm8k": GSM8K_EVAL_PROMPT, "math": MATH_EVAL_PROMPT,
                "countdown": COUNTDOWN_EVAL_PROMPT, "sudoku": SUDOKU_SYSTEM_PROMPT}
EVAL_PREFILL = "<reasoning>"  # eval.py hard-codes add_reasoning=True: the assistant turn starts with it
# The CPU toy task: a bare prompt, since with the byte-level tiny tokenizer every prompt character is a token.
TOY_PROMPT = "Sudoku: {puzzle}"
MAX_PROMPT_LENGTH = 200  # d1's RL max_prompt_length: keep the LAST 200 prompt tokens (§2.4)


def rl_prompt(task, ex):
    """The d1 RL user message (§7.1) for an example holding question / nums+target / puzzle."""
    if task == "gsm8k":
        return SYSTEM_PROMPT + "\n\n" + ex["question"]
    if task == "math":
        return SYSTEM_PROMPT + MATH_RL_INSTRUCTION + ex["question"]
    if task == "countdown":
        return SYSTEM_PROMPT + COUNTDOWN_RL_TEMPLATE.format(nums=list(ex["nums"]), target=ex["target"])
    if task == "sudoku":
        return SUDOKU_SYSTEM_PROMPT + "\n\n" + SUDOKU_QUESTION.format(puzzle=ex["puzzle"])
    if task == "toy":
        return TOY_PROMPT.format(puzzle=ex["puzzle"])
    raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")


def eval_question(task, ex):
    """The question part of d1's eval message (§8.2); the text d1's eval files store as `question`."""
    if task == "countdown":
        return COUNTDOWN_QUESTION.format(nums=list(ex["nums"]), target=ex["target"])
    if task == "sudoku":
        return SUDOKU_QUESTION.format(puzzle=ex["puzzle"])
    return ex["question"]  # GSM8K question / MATH problem, verbatim


def eval_message(task, ex):
    """The d1 EVAL user message (§8.2): eval system prompt + "\\n\\n" + question. The toy task has no
    separate eval format: it is evaluated on its training prompt."""
    if task == "toy":
        return rl_prompt(task, ex)
    if task not in EVAL_PROMPTS:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    return EVAL_PROMPTS[task] + "\n\n" + eval_question(task, ex)


def render(tokenizer, user_message, prefill=""):
    """One user turn through the model's chat template, with the assistant header, plus `prefill`.
    LLaDA's template adds BOS itself and trims the message (§1), exactly like TRL's
    maybe_apply_chat_template in d1's RL and eval.py's create_prompt."""
    messages = [{"role": "user", "content": user_message}]
    # tokenize=False: the text is what d1 tokenizes; add_generation_prompt opens the assistant turn
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return text + prefill  # the prefill is appended AFTER the template, so it is never trimmed


def render_eval(tokenizer, task, ex):
    """The full d1 eval prompt text. The toy task gets no "<reasoning>" prefill: its answer is 16 bare digits."""
    return render(tokenizer, eval_message(task, ex), "" if task == "toy" else EVAL_PREFILL)


def encode(tokenizer, text, max_length=None):
    """Token ids of rendered text. add_special_tokens=False because the template already holds BOS; with
    max_length, keep the LAST max_length ids as d1's RL does (which can cut BOS and the instructions)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids[-max_length:] if max_length else ids


# -----------------------------------------------------------------------------
# Loaders. Every failure is one ValueError / FileNotFoundError naming the file (and line or record).

def _read_records(path):
    """[(where, record)] from a jsonl file, a json array, or a csv with a header. `where` is
    "file:line" (or "file[i]" for a json array) so errors point at the bad record."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".csv":  # csv module keeps every field a string: Sudoku's leading zeros survive
        rows = csv.DictReader(text.splitlines())
        return [(f"{path}:{i}", row) for i, row in enumerate(rows, start=2)]  # line 1 is the header
    if text.lstrip().startswith("["):  # one JSON array (e.g. an s1K dump)
        try:
            return [(f"{path}[{i}]", rec) for i, rec in enumerate(json.loads(text))]
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e})") from None
    records = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue  # tolerate blank lines (e.g. a trailing one)
        try:
            records.append((f"{path}:{i}", json.loads(line)))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: malformed JSON line ({e.msg})") from None
    if not records:  # an empty dataset would only fail much later, far from its cause
        raise ValueError(f"{path}: no records")
    return records


def _field(rec, key, where):
    if not isinstance(rec, dict) or rec.get(key) is None:  # None: a csv row with too few columns
        have = sorted(rec) if isinstance(rec, dict) else type(rec).__name__
        raise ValueError(f"{where}: missing field {key!r} (record has {have})")
    return rec[key]


def _last_boxed(text):
    """Content of the last \\boxed{...} in text, or None if there is none or it is unbalanced. Uses the
    same extraction as the MATH reward (rewards.py), so gold answers and predictions agree."""
    from rewards import last_boxed_only_string, remove_boxed
    box = last_boxed_only_string(text) if "\\boxed" in text else None  # d1 returns the text itself if no box
    try:
        return remove_boxed(box) if box else None
    except ValueError:  # not a \boxed{...} form
        return None


def load_gsm8k(path):
    """GSM8K jsonl (question, answer ending "#### N"). answer = text after "####", stripped, like d1's
    extract_hash_answer (the RL gold is compared as an exact string)."""
    out = []
    for where, rec in _read_records(path):
        question, solution = _field(rec, "question", where), _field(rec, "answer", where)
        if "####" not in solution:
            raise ValueError(f"{where}: field 'answer' has no '#### <answer>' line")
        # split("####")[1], not [-1]: d1's extract_hash_answer; commas such as "1,000" are kept as d1 keeps them
        ex = {"question": question, "solution": solution, "answer": solution.split("####")[1].strip()}
        out.append({"prompt": rl_prompt("gsm8k", ex), **ex})
    return out


def load_math(path):
    """MATH jsonl (problem + answer and/or solution). answer = the `answer` field (MATH-500) or else the last
    \\boxed{} of `solution` (full MATH test, and d1's RL train set which only has solutions)."""
    out = []
    for where, rec in _read_records(path):
        ex = {"question": _field(rec, "problem", where)}
        if "solution" in rec:
            ex["solution"] = rec["solution"]
        if "answer" in rec:  # MATH-500's own answer column: d1's eval compares against exactly this
            ex["answer"] = str(rec["answer"])
        else:
            ex["answer"] = _last_boxed(_field(rec, "solution", where))
            if ex["answer"] is None:
                raise ValueError(f"{where}: no 'answer' field and no balanced \\boxed{{}} in 'solution'")
        out.append({"prompt": rl_prompt("math", ex), **ex})
    return out


def load_countdown(path, n_numbers=3):
    """Countdown jsonl: d1's test format {"input": "a,b,c", "output": "T"} or HF rows {"nums": [...],
    "target": T}. Keeps only rows with n_numbers numbers (d1 filters the 3to4 train set to 3; None keeps all)."""
    out = []
    for where, rec in _read_records(path):
        d1_format = isinstance(rec, dict) and "input" in rec  # d1's test file: "30,100,93" and "23", strings
        raw_nums = _field(rec, "input" if d1_format else "nums", where)
        raw_target = _field(rec, "output" if d1_format else "target", where)
        try:
            nums = [int(x) for x in (raw_nums.split(",") if d1_format else raw_nums)]
            target = int(raw_target)
        except (TypeError, ValueError, AttributeError):
            raise ValueError(f"{where}: numbers {raw_nums!r} / target {raw_target!r} are not integers") from None
        if n_numbers is not None and len(nums) != n_numbers:
            continue  # d1 trains on 3-number problems only; the HF set also has 4-number rows
        ex = {"nums": nums, "target": target, "answer": str(target)}
        out.append({"prompt": rl_prompt("countdown", ex), **ex})
    return out


def load_sudoku(path):
    """Sudoku csv with header Puzzle,Solution (16-char strings, '0' = blank), read as strings."""
    out = []
    for where, rec in _read_records(path):
        puzzle, solution = _field(rec, "Puzzle", where).strip(), _field(rec, "Solution", where).strip()
        if len(puzzle) != 16 or len(solution) != 16 or not (puzzle + solution).isdigit():
            raise ValueError(f"{where}: Puzzle/Solution must be 16-digit strings, got {puzzle!r}, {solution!r}")
        out.append(sudoku_example(puzzle, solution))
    return out


def load_s1k(path):
    """s1K for SFT (§5.1): question, thinking_trajectories (list: d1 uses [0]; a string also works), attempt.
    prompt = the SFT user message; completion = the assistant turn,
    "<reasoning>" + trace + "</reasoning>\\n<answer>" + attempt + "</answer>" (no newlines inside the tags)."""
    records = _read_records(path)
    needed = ("question", "thinking_trajectories", "attempt")
    first = records[0][1] if records else {}
    if not isinstance(first, dict) or any(k not in first for k in needed):
        # e.g. ../shared/data/s1k_questions_no_traces/s1k.json: problem/solution with an EMPTY `thinking`
        have = sorted(first) if isinstance(first, dict) else type(first).__name__
        raise ValueError(f"{path}: no s1K reasoning traces: SFT needs fields {list(needed)} (HF simplescaling/s1K), "
                         f"but the first record has {have}. The questions-only copy cannot be used for SFT.")
    out = []
    for where, rec in records:
        trace = _field(rec, "thinking_trajectories", where)
        # s1K stores a list with one trajectory (d1 takes [0]); s1K-1.1-style dumps may hold a plain string
        trace = trace[0] if isinstance(trace, list) and trace else trace
        if not isinstance(trace, str) or not trace:
            raise ValueError(f"{where}: empty 'thinking_trajectories' (no reasoning trace)")
        question, attempt = _field(rec, "question", where), _field(rec, "attempt", where)
        out.append({"prompt": SFT_SYSTEM_PROMPT + "\n\n" + question, "question": question, "answer": attempt,
                    "completion": "<reasoning>" + trace + "</reasoning>\n<answer>" + attempt + "</answer>"})
    return out


def load_toy(path):
    """The d1 Sudoku csv in the toy format (bare prompt, 16-digit completion), e.g. the 8-blank test set."""
    return [toy_example(ex["puzzle"], ex["solution"]) for ex in load_sudoku(path)]


LOADERS = {"gsm8k": load_gsm8k, "math": load_math, "countdown": load_countdown, "sudoku": load_sudoku,
           "toy": load_toy, "s1k": load_s1k}


def load_task(name, path):
    """Examples of task `name` from the local file `path`."""
    if name not in LOADERS:
        raise ValueError(f"unknown task {name!r}; expected one of {sorted(LOADERS)}")
    return LOADERS[name](path)


def d1_eval_subset(n_items, k=256, seed=42):
    """Indices d1 evaluates: np.random.seed(42); np.random.choice(n, k, replace=False) (§8.1 item 3). A private
    RandomState gives the same stream without touching numpy's global RNG. k=None/-1 (GSM8K, MATH) or n < k
    (where d1 would crash) -> all items in order; n == k (Countdown) -> a permutation, as in d1."""
    if k is None or k < 0 or n_items < k:
        return list(range(n_items))
    # legacy MT19937 seeding: identical to np.random.seed(42) followed by np.random.choice
    return np.random.RandomState(seed).choice(n_items, k, replace=False).tolist()


# -----------------------------------------------------------------------------
# 4x4 Sudoku: all 288 grids, a brute-force solver, and seeded puzzle generators.

def _units():
    """The 12 groups of cell indices that must hold 1-4 exactly once: 4 rows, 4 columns, 4 2x2 boxes."""
    rows = [[4 * r + c for c in range(4)] for r in range(4)]
    cols = [[4 * r + c for r in range(4)] for c in range(4)]
    boxes = [[4 * (br + r) + bc + c for r in range(2) for c in range(2)] for br in (0, 2) for bc in (0, 2)]
    return rows + cols + boxes


UNITS = _units()


def is_valid_grid(s):
    """True iff s is a complete, valid 4x4 Sudoku as a 16-char string."""
    return (isinstance(s, str) and len(s) == 16 and set(s) <= set("1234")
            and all(len({s[i] for i in unit}) == 4 for unit in UNITS))


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
            if all(len({cells[j] for j in u if j <= i}) == sum(j <= i for j in u) for u in UNITS if i in u):
                fill(i + 1)
        cells[i] = ""
    fill(0)
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
    n_test = round(len(grids) * test_fraction)
    return sorted(grids[n_test:]), sorted(grids[:n_test])


def sudoku_example(puzzle, solution):
    """One example in d1's Sudoku format (RL prompt §7.1; the gold answer is the 16-digit solution)."""
    ex = {"puzzle": puzzle, "solution": solution, "answer": solution}
    return {"prompt": rl_prompt("sudoku", ex), **ex}


def toy_example(puzzle, solution):
    """One toy example: the same puzzle behind a bare prompt, and the solution as the SFT completion."""
    ex = {"puzzle": puzzle, "solution": solution, "answer": solution, "completion": solution}
    return {"prompt": rl_prompt("toy", ex), **ex}


def _sample_puzzles(grids, n, seed, min_blanks, max_blanks, unique, max_tries=10_000):
    """n (puzzle, solution) pairs: pick a grid, blank a random number of random cells, and (if unique)
    reject puzzles with more than one solution. Duplicates across the n draws are possible."""
    if not grids or not 0 <= min_blanks <= max_blanks <= 16:
        raise ValueError(f"need grids and 0 <= min_blanks ({min_blanks}) <= max_blanks ({max_blanks}) <= 16")
    rng, out = random.Random(seed), []
    for _ in range(n):
        for _ in range(max_tries):
            grid = rng.choice(grids)
            # blank count first, then which cells: every count in the range is equally likely
            blanks = set(rng.sample(range(16), rng.randint(min_blanks, max_blanks)))
            puzzle = "".join("0" if i in blanks else d for i, d in enumerate(grid))
            if not unique or len(solve_sudoku(puzzle)) == 1:
                out.append((puzzle, grid))
                break
        else:
            raise ValueError(f"no unique puzzle found in {max_tries} tries; lower max_blanks ({max_blanks})")
    return out


def make_sudoku(grids, n, seed, min_blanks=6, max_blanks=10, unique=True):
    """n d1-format Sudoku examples blanked from `grids` (d1's test puzzles have 8 blanks)."""
    return [sudoku_example(p, s) for p, s in _sample_puzzles(grids, n, seed, min_blanks, max_blanks, unique)]


def make_toy(grids, n, seed, min_blanks=2, max_blanks=5):
    """n toy examples (prompt "Sudoku: <puzzle>", completion = the 16-digit solution), unique solutions only."""
    return [toy_example(p, s) for p, s in _sample_puzzles(grids, n, seed, min_blanks, max_blanks, True)]


def partial_label(example, unfilled_prob, seed):
    """The toy's labelled SFT data are INCOMPLETE: the annotator leaves each blank cell unfilled
    ("0", as in the puzzle) with probability unfilled_prob and writes the right digit otherwise.
    With unfilled_prob > 0.5 imitation learns to leave blanks open, so greedy decoding does; a
    reward that checks the answer is what teaches the model to fill them in. The completion
    becomes the partial grid; the true `solution` is kept for scoring."""
    rng = random.Random(f"{seed}:{example['puzzle']}")  # per-puzzle stream: order-independent
    label = [c if p != "0" or rng.random() >= unfilled_prob else "0"
             for p, c in zip(example["puzzle"], example["solution"])]
    return {**example, "completion": "".join(label)}


# -----------------------------------------------------------------------------
# Countdown: exact enumeration of every expression that uses each number once.

def countdown_values(nums):
    """{value: expression} over all expressions using every number exactly once with + - * / (exact
    Fractions; division by zero skipped). Combine any two terms, recurse: covers every binary tree."""
    def combine(terms):
        if len(terms) == 1:
            yield terms[0]
            return
        for i, j in itertools.combinations(range(len(terms)), 2):
            (a, ea), (b, eb) = terms[i], terms[j]
            rest = [t for k, t in enumerate(terms) if k not in (i, j)]
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
        nums = [rng.randint(1, max_num) for _ in range(n_numbers)]
        values = countdown_values(nums)
        targets = sorted(int(v) for v in values if v.denominator == 1 and min_target <= v <= max_target)
        if not targets:
            continue  # nothing in range is reachable from these numbers: draw again
        # uniform over distinct reachable targets, not over expressions (which would favour easy values)
        target = rng.choice(targets)
        ex = {"nums": nums, "target": target, "answer": str(target), "expression": values[Fraction(target)]}
        out.append({"prompt": rl_prompt("countdown", ex), **ex})
    if len(out) == n:
        return out
    raise ValueError(f"could not draw {n} problems with targets in [{min_target}, {max_target}] from 1..{max_num}")


# -----------------------------------------------------------------------------
# d1's "generous" EVAL parsers (d1-spec §8.3), the ones behind every accuracy in the paper's Table 1
# (d1's eval/parse_and_get_acc.py @ 837888f). They are NOT the RL rewards of rewards.py:
#   GSM8K      first \boxed{} (then <answer>), compared as a float   (RL: exact string in <answer>)
#   MATH       last \boxed{} anywhere, else first <answer>           (RL: the same last box, else the text)
#   Countdown  last \boxed{}, \times/\div/\cdot -> * /, "a+b=c" -> a+b (RL: last <answer> only)
#   Sudoku     5 fallback patterns, non-digits KEPT, cell micro-average (RL: digits of the last <answer>)
# so eval accuracy and training reward can disagree on the same text. Each parser is a small pure
# function; score_eval() is the one entry point eval.py needs. Re-scoring d1's released
# LLaDA-8B-Instruct generations (../shared/data/d1_eval_baselines) with these reproduces Table 1's
# LLaDA row exactly (tests/test_parsers.py).
#
# Regexes: d1's patterns are kept verbatim (one Sudoku pattern loses a redundant "\s*", see there).
# Those that begin with a literal tag and then ".*?" are run with .match() at the FIRST occurrence of
# the tag instead of .search(): the lazy ".*?" from there already reaches every later position, so the
# result is identical, but a text without a match costs one scan instead of one scan per occurrence
# (quadratic). "<answer>(.*?)</answer>" is a plain find() for the same reason. What stays quadratic is
# bounded by a line or a run of blanks: < 0.1 s even on 8k-character hostile text (a 512-token
# generation is ~2k characters); tests/test_parsers.py times it.

PARSER_VERSION = "d1-837888f"  # recorded in eval manifests: numbers from different parsers don't compare

_GSM8K_BOX = re.compile(r"\\boxed{(.*?)}")  # no DOTALL (as in d1): a box's content stays on one line
_NUMBER = re.compile(r"-?\d+\.?\d*")       # d1's number pattern: "1,000" -> "1", "3.5.1" -> "3.5"
_ONLY_DOTS = re.compile(r"\.+")
# d1's gold: the first "#### N" of the GSM8K solution. No minus sign, so "#### -3" has NO gold (see below).
_GSM8K_GOLD = re.compile(r"####\s*\$?([\d,]+(?:\.\d+)?)")
_GSM8K_GOLD_SIGNED = re.compile(r"####\s*\$?(-?[\d,]+(?:\.\d+)?)")  # ours, opt-in: keeps the sign


def first_tag_content(text, tag="answer"):
    """Content of the FIRST re.search(r"<tag>(.*?)</tag>", text, re.DOTALL), or None (not stripped).
    The mirror of rewards.last_tag_content, as a linear scan: the first opening tag is the match
    whenever any closing tag follows it, and if none does, no later opening tag can match either."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    start = text.find(open_tag)
    if start < 0:
        return None
    end = text.find(close_tag, start + len(open_tag))
    return None if end < 0 else text[start + len(open_tag):end]


def _float_or_none(text):
    # Python's float() exactly as d1 calls it: " 18 ", "1e3", "1_000", "nan" and "inf" all parse
    try:
        return float(text)
    except ValueError:
        return None


def parse_gsm8k_eval(generation):
    """d1's GSM8K prediction (a float) or None.
    1. The boxes \\boxed{...} in order (each on one line), skipping empty / "..." / only-dots ones:
       the FIRST usable box wins, as float(content), else the FIRST number inside it
       ("\\boxed{\\$18}" -> 18.0; quirk: "\\boxed{1,000}" -> 1.0; a box without a number is skipped).
    2. No usable box: the FIRST <answer>...</answer>, stripped, as float(text), else the LAST number in it."""
    for content in _GSM8K_BOX.findall(generation):
        content = content.strip()
        if not content or _ONLY_DOTS.fullmatch(content):  # the prompt's "\boxed{...}" template, copied
            continue
        value = _float_or_none(content)
        if value is None:
            numbers = _NUMBER.findall(content)
            if not numbers:
                continue  # e.g. "\boxed{x}": try the next box
            value = float(numbers[0])
        return value
    answer = first_tag_content(generation)
    answer = answer.strip() if answer is not None else ""
    if not answer:
        return None
    value = _float_or_none(answer)
    if value is None:
        numbers = _NUMBER.findall(answer)
        value = float(numbers[-1]) if numbers else None
    return value


def gsm8k_gold_eval(answer, signed=False):
    """The gold float d1 compares against, from the full GSM8K solution ("... #### 1,000"), the bare text
    after "####" ("1,000", as load_gsm8k stores it) or an already parsed number (d1's released files).
    d1 takes the first r"####\\s*\\$?([\\d,]+(?:\\.\\d+)?)" match and drops the commas. It has no minus
    sign, so the 2 GSM8K test items with a negative answer (-10 and -3) get NO gold (None) and d1 counts
    them as processed and always wrong, even when the model answers -10: its released files store
    ground_truth = null for them (both are among the 1,130 released questions: 6 nulls over the 3
    lengths), and only counting them as wrong reproduces 69.29 / 76.37 / 78.14 (dropping them from
    the denominator gives 69.41 / 76.51 / 78.28). signed=True (ours, not d1) keeps the sign: LLaDA
    then scores 69.47 / 76.55 / 78.23 on the same files."""
    if answer is None:
        return None
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        return float(answer)
    text = str(answer)
    if "####" not in text:
        text = "#### " + text  # a bare answer goes through the same pattern as a full solution
    match = (_GSM8K_GOLD_SIGNED if signed else _GSM8K_GOLD).search(text)
    if match is None:
        return None
    return _float_or_none(match.group(1).replace(",", ""))  # None for a degenerate "#### ,"


def _d1_last_box(text):
    """What d1's eval gets from remove_boxed(last_boxed_only_string(text)): the content of the LAST box
    (rewards.py's d1 helpers, "\\boxed 5" special case included); None when that box is unbalanced
    (d1: an exception); and the WHOLE TEXT when there is no box at all. The last case is how d1's eval
    helpers behave, not a guess: falling back to <answer> there instead makes MATH500@128 26.2 (one
    unboxed "<answer>\\frac{1}{4}</answer>" counted) and Countdown@128 21.09 (one unboxed
    "<answer>96 - 48  + 26</answer>"), while d1 reports 26.0 and 20.7 (tests/test_parsers.py)."""
    if "\\boxed" not in text and "\\fbox" not in text:
        return text
    try:
        return remove_boxed(last_boxed_only_string(text))
    except ValueError:  # unbalanced box (None), or an \fbox{} (no released generation has one)
        return None


def parse_math_eval(generation):
    """d1's MATH500 prediction: the content of the LAST \\boxed{} in the whole generation; if that box
    is unbalanced or empty, the FIRST <answer>...</answer>, stripped (None if there is none; "" for an
    empty box and no answer tag, as in d1; neither ever equals a gold answer). Quirk kept from d1: a
    generation with NO box at all is its own prediction (so it is wrong unless it is just the answer),
    its <answer> tag is NOT consulted."""
    pred = _d1_last_box(generation)
    if not pred:
        answer = first_tag_content(generation)
        if answer is not None:
            pred = answer.strip()
    return pred


_COUNTDOWN_LHS = re.compile(r"([0-9+\-*/() ]+)=[0-9. ]+")  # "49 + 55 - 53 = 51" -> "49 + 55 - 53"
_INTEGERS = re.compile(r"\d+")


def parse_countdown_eval(generation):
    """d1's Countdown expression (a string, possibly not an expression at all):
    the content of the LAST \\boxed{}; if that box is unbalanced, the FIRST <answer>...</answer>
    stripped, else the whole generation; with NO box at all, the whole generation (d1: <answer> is
    not consulted then; see _d1_last_box). Then \\div -> /, \\times -> *, \\cdot -> *, and if it
    contains "<digits, + - * / ( ) and spaces>=<number>", only that left side, stripped."""
    expr = _d1_last_box(generation)
    if expr is None:
        answer = first_tag_content(generation)
        expr = answer.strip() if answer is not None else generation
    expr = expr.replace("\\div", "/").replace("\\times", "*").replace("\\cdot", "*")
    match = _COUNTDOWN_LHS.search(expr) if "=" in expr else None  # the check only skips a futile search
    return match.group(1).strip() if match else expr


def countdown_expression_correct(expr, nums, target):
    """d1's check of a parsed expression: the integers written in it (r"\\d+", so "2.5" is 2 and 5) are
    exactly the multiset `nums`, and its value is within 1e-5 of `target`.
    Deliberate difference: d1 evaluates with a restricted Python eval(); we use rewards.evaluate_equation
    (exact Fractions, never executes text). They agree on + - * / ( ) arithmetic; they differ only on
    "**" and "//" (d1 computes them, we reject them; d1's prompt allows only + - * /) and on values far
    beyond anything 3 numbers <= 100 can reach."""
    try:
        used = sorted(int(n) for n in _INTEGERS.findall(expr))
    except ValueError:  # a > 4300-digit run: Python refuses int(); d1's validator catches it -> invalid
        return False
    if used != sorted(int(n) for n in nums):
        return False
    value = evaluate_equation(expr.strip())  # None where d1's eval raises (d1's value is then inf)
    return value is not None and abs(value - Fraction(str(target))) < COUNTDOWN_TOL


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
    removed; anything else (letters, "\\", "</answer") is KEPT, unlike the RL reward. Right-padded with
    "0" / cut to 16 characters; "" when no pattern finds anything (d1 then scores 0 cells)."""
    found = ""
    for i, pattern in enumerate(_SUDOKU_PATTERNS):
        if _SUDOKU_NEEDS[i] not in generation:
            continue
        if i == 4:
            match = pattern.search(generation)
        else:  # identical to d1's .search (see the section header), minus the quadratic failure
            start = generation.find(_SUDOKU_ANCHORS[i]) if _SUDOKU_ANCHORS[i] else 0
            match = pattern.match(generation, start) if start >= 0 else None
        if match and match.group(1).strip():
            found = match.group(1).strip()
            break
    found = re.sub(r"\s", "", found)
    if not found:
        return ""
    return found[:SUDOKU_CELLS].ljust(SUDOKU_CELLS, "0")  # "0" never equals a solution digit


def sudoku_eval_cells(generation, puzzle, solution):
    """(correct_cells, empty_cells): how many of the puzzle's blanks ("0") the guess fills with the
    solution's digit. d1 reports sum(correct_cells) / sum(empty_cells) over the test set."""
    guess = parse_sudoku_eval(generation)
    blanks = [i for i, c in enumerate(puzzle) if c == "0"]
    correct = sum(guess[i] == solution[i] for i in blanks) if guess else 0
    return correct, len(blanks)


def sudoku_solved(generation, puzzle, solution):
    """Every blank cell right (our per-puzzle solve rate, reported beside d1's cell score)."""
    correct, total = sudoku_eval_cells(generation, puzzle, solution)
    return total > 0 and correct == total


def score_eval(task, generation, example):
    """Score one generation with d1's eval parser of `task`. Returns a dict with
      pred     what the parser extracted (float / str / None)
      correct  bool: the item counts as solved (Sudoku and toy: every blank cell right)
      score    the item's share of the headline metric: float(correct), except Sudoku, where it is the
               cell accuracy; aggregate Sudoku as sum(cells_correct) / sum(cells_total) (d1's micro
               average; it equals mean(score) only when every puzzle has the same number of blanks)
    and for Sudoku and toy also cells_correct, cells_total, solved.
    `example` keys: gsm8k answer (text after "####", a full solution, or a number); math answer;
    countdown nums, target; sudoku / toy puzzle, solution."""
    if task == "gsm8k":
        pred, gold = parse_gsm8k_eval(generation), gsm8k_gold_eval(example["answer"])
        correct = pred is not None and gold is not None and pred == gold  # float equality, as d1
    elif task == "math":
        pred = parse_math_eval(generation)
        correct = pred is not None and is_equiv(pred, str(example["answer"]))
    elif task == "countdown":
        pred = parse_countdown_eval(generation)
        correct = countdown_expression_correct(pred, example["nums"], example["target"])
    elif task == "sudoku":
        pred = parse_sudoku_eval(generation)
        cells, total = sudoku_eval_cells(generation, example["puzzle"], example["solution"])
        solved = total > 0 and cells == total
        return {"pred": pred, "correct": solved, "score": cells / total if total else 0.0,
                "cells_correct": cells, "cells_total": total, "solved": solved}
    elif task == "toy":  # ours: the completion IS the grid (rewards.toy_reward / toy_solved)
        puzzle = example["puzzle"]
        total = puzzle.count("0")
        solved = bool(toy_solved(generation, example))
        return {"pred": generation.lstrip()[:len(puzzle)], "correct": solved, "score": float(solved),
                "cells_correct": round(toy_reward(generation, example) * total), "cells_total": total,
                "solved": solved}
    else:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    return {"pred": pred, "correct": bool(correct), "score": float(bool(correct))}


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
    `question` is d1's eval question text; `prompt` is our RL prompt, as for every example."""
    if task not in D1_RELEASED_TASK_NAMES:
        raise ValueError(f"unknown d1 task {task!r}; expected one of {sorted(D1_RELEASED_TASK_NAMES)}")
    task = D1_RELEASED_TASK_NAMES[task]
    question, gold = item["question"], item["ground_truth"]
    if task == "gsm8k":
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
        match = _SUDOKU_PUZZLE_IN_QUESTION.search(question)
        if match is None:
            raise ValueError(f"no 16-digit Sudoku puzzle in question {question[:80]!r}")
        ex = {"puzzle": match.group(1), "solution": str(gold), "answer": str(gold)}
    return {"prompt": rl_prompt(task, ex), **ex}


# -----------------------------------------------------------------------------

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print rendered RL and eval prompts of every d1 task")
    parser.add_argument("--model-dir", type=str, default=None, help="tokenizer dir (default: a fresh tiny one)")
    parser.add_argument("--data-dir", type=str, default=str(Path(__file__).resolve().parent.parent / "shared" / "data"),
                        help="the shared data folder (../shared/data)")
    args = parser.parse_args()
    from model import load_tokenizer, make_tiny_tokenizer
    # the tiny byte-level tokenizer carries LLaDA's chat template, so the rendering is the real one
    tok = load_tokenizer(args.model_dir) if args.model_dir else make_tiny_tokenizer()
    data = Path(args.data_dir)
    train_grids, test_grids = split_grids()
    examples = {"toy": make_toy(train_grids, 1, seed=0)[0]}
    for task, rel in [("gsm8k", "gsm8k/test.jsonl"), ("math", "math500/test.jsonl"),
                      ("countdown", "d1_countdown/countdown_cd3_test.jsonl"),
                      ("sudoku", "d1_sudoku/4x4_test_sudoku.csv")]:
        # the real file when it is there, else a generated stand-in (Sudoku / Countdown only)
        if (data / rel).is_file():
            examples[task] = load_task(task, data / rel)[0]
        elif task in ("countdown", "sudoku"):
            examples[task] = (make_countdown(1, 0) if task == "countdown" else make_sudoku(test_grids, 1, 0))[0]
    for task, ex in examples.items():
        rl, ev = render(tok, ex["prompt"]), render_eval(tok, task, ex)
        print(f"===== {task}  (answer {ex['answer']!r}; RL prompt {len(encode(tok, rl))} tokens, "
              f"eval prompt {len(encode(tok, ev))} tokens; d1 RL keeps the last {MAX_PROMPT_LENGTH})")
        print(f"--- RL prompt ---\n{rl}\n--- eval prompt ---\n{ev}\n")
