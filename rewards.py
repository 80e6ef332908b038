"""
Reward functions for diffu-GRPO: every training reward of d1 (arXiv 2504.12216) with d1's exact
values and quirks (docs/d1.md §6), plus a toy 4x4-Sudoku reward for the CPU demo.

Every reward is a pure function  f(completion: str, example: dict) -> float  that never
raises. `completion` is the decoded completion with special tokens stripped (docs/d1.md §2.4);
`example` is one dataset row. A task's rewards are SUMMED, each with weight 1 (d1 sets no
reward weights; sum_rewards() at the bottom); each task's list and maximum are its record in
tasks.py.
Example keys: gsm8k {"answer": text after "####"}; math {"answer": gold final answer} or
{"solution": full solution, gold = its last \\boxed{}}; countdown {"nums": [int], "target":
int}; sudoku / toy {"puzzle", "solution"}: 16-char strings, "0" = blank; code {"tests":
KodCode's pytest source} or, for the code test sets' items, {"program_prefix": str,
"unit_tests": [snippet]}.

d1's bugs are reproduced by default, because they shape d1's reward scale and dynamics
(docs/d1.md §10.9; each function's docstring names its quirk); D1_BUGS = False (or fixed=True)
gives the repaired versions. The code reward's asserts are strict by default (sandbox/run.py
STRICT_ASSERTS, docs/code-task.md): an object that lies about equality, or a subclass of a
builtin, scores nothing, while honest programs score as with d1's plain asserts;
sandbox.run.STRICT_ASSERTS = False restores d1's plain asserts exactly.

Reading the answer (<answer> tags, \\boxed{}, MATH normalisation, d1's format regexes) is
taskdata/answers.py, shared with d1's eval parsers (taskdata/parsers.py); Countdown arithmetic
is taskdata/arith.py; the code reward's fence reading and test rewriting are
sandbox/code_prep.py. This file holds what d1 rewards for. Model text is never executed by the
trainer: Countdown equations go through a small parser, not eval(); d1's regexes that backtrack
quadratically are linear scans with the same answers; programs run in sandbox/run.py's isolated
process (docs/differences.md).

    from tasks import total_reward   # the task's rewards from the registry, summed here
    total_reward("countdown", "<answer>44 + 19 + 35</answer>",
                 {"nums": [44, 19, 35], "target": 98})   # -> (1.0, {"countdown_reward": 1.0})
"""
import math
import re
import warnings

from sandbox import code_prep
from taskdata.answers import (after_last, boxed_or_self, extract_xml_answer, is_equiv,
                              last_tag_content, soft_format_match, strict_format_match)
from taskdata.arith import evaluate_equation, reaches_target, uses_exactly
from sandbox.code_prep import extract_code  # also read from here by parsers.py and the tests
from sandbox.run import run_batch as sandbox_run_batch

D1_BUGS = True  # module-wide default for `fixed`: True = behave exactly like d1 @ 837888f


def _is_fixed(fixed):
    # fixed=None defers to the module switch, so a training script can flip D1_BUGS once
    return (not D1_BUGS) if fixed is None else bool(fixed)

# -----------------------------------------------------------------------------
# GSM8K (docs/d1.md §6.1): five functions, summed, max 4.0

XML_TAG_REWARD = 0.125       # per well-placed tag (4 tags -> 0.5)
XML_TRAILING_PENALTY = 0.001  # per character after the closing answer tag
SOFT_FORMAT_REWARD = 0.5
STRICT_FORMAT_REWARD = 0.5
INT_REWARD = 0.5
GSM8K_CORRECT_REWARD = 2.0


def xmlcount(completion, example=None, *, fixed=None):
    """Tag-count reward in (-inf, 0.5]: +0.125 for each of the four tags seen exactly once,
    minus 0.001 per trailing character. d1 quirks (default): when "\\n</answer>\\n" is absent
    (the usual case: completions end exactly at </answer>), the third term's "tail" is the
    whole text, so long completions go negative; ending exactly at "\\n</answer>" earns +0.001;
    and a closing tag written twice, "\\n</answer>\\n</answer>\\n", leaves a 10-character tail
    (see _xml_tail)."""
    text = completion
    fixed = _is_fixed(fixed)
    score = 0.0
    if text.count("<reasoning>\n") == 1:
        score += XML_TAG_REWARD
    if text.count("\n</reasoning>\n") == 1:
        score += XML_TAG_REWARD
    if text.count("\n<answer>\n") == 1:
        score += XML_TAG_REWARD
        score -= XML_TRAILING_PENALTY * len(_xml_tail(text, "\n</answer>\n", fixed))
    if text.count("\n</answer>") == 1:
        score += XML_TAG_REWARD
        # the -1 forgives the newline expected after the tag; with none, d1 pays a +0.001 bonus
        excess = len(_xml_tail(text, "\n</answer>", fixed)) - 1
        score -= XML_TRAILING_PENALTY * (max(excess, 0) if fixed else excess)
    return score


def _xml_tail(text, tag, fixed):
    # The text after the closing tag, whose length xmlcount charges. d1 measures
    # text.split(tag)[-1] (docs/d1.md §6.1 says "after the last"): the whole text when the tag
    # is absent, and when it repeats, not always after the last one, because split scans left
    # to right and never overlaps. In "\n</answer>\n</answer>\n" the second "\n</answer>\n"
    # shares the first one's final "\n", so split finds only the first and the tail is
    # "</answer>\n": 0.365 where the last-occurrence reading gives 0.375. Reproduced as the
    # reward d1 trained with; fixed: after the LAST occurrence, "" if none.
    return after_last(text, tag, "") if fixed else text.split(tag)[-1]


def soft_format(completion, example=None, *, fixed=None):
    """0.5 if the text STARTS with <reasoning>...</reasoning> <answer>...</answer>, else 0.
    d1 bug (default): no DOTALL, so any newline inside the reasoning gives 0. d1's regex, as a
    linear scan: answers.soft_format_match."""
    return SOFT_FORMAT_REWARD if soft_format_match(completion, _is_fixed(fixed)) else 0.0


def strict_format(completion, example=None, *, fixed=None):
    """0.5 for exactly "<reasoning>\\n…\\n</reasoning>\\n<answer>\\n…\\n</answer>\\n", else 0.
    d1 bug (default): no DOTALL, so it needs one-line reasoning AND a trailing newline
    (≈ never). d1's regex, as a linear scan: answers.strict_format_match."""
    return STRICT_FORMAT_REWARD if strict_format_match(completion, _is_fixed(fixed)) else 0.0


def int_answer(completion, example=None):
    """d1's "int" reward: 0.5 if the extracted answer is all digits (str.isdigit: "-3", "2.5"
    fail; it also accepts non-ASCII digits such as "²" or "٣", as d1's does)."""
    return INT_REWARD if extract_xml_answer(completion).isdigit() else 0.0


def gsm8k_gold(example):
    # the row's answer may still be the full GSM8K solution; d1 keeps the text after "####"
    answer = str(example["answer"])
    return answer.split("####")[-1].strip()


# d1 grades GSM8K with no number parsing at all; its eval parser (docs/d1.md §8.3) is more
# lenient, which is why eval accuracy and training reward can disagree wildly on the same text.
def gsm8k_correctness(completion, example):
    """2.0 on an EXACT string match of the extracted answer with the gold: "\\boxed{18}", "$18"
    and "18.0" all score 0 (docs/d1.md §6.1; why d1's initial GSM8K reward is near zero)."""
    correct = extract_xml_answer(completion) == gsm8k_gold(example)
    return GSM8K_CORRECT_REWARD if correct else 0.0

# -----------------------------------------------------------------------------
# MATH (docs/d1.md §6.2): the last box against the gold, Hendrycks-MATH equality (answers.py)

MATH_CORRECT_REWARD = 2.0
MATH_FORMAT_SCALE = 0.5        # format reward = 0.5 * (answer-tag part + boxed part)
MATH_ANSWER_TAG_SCORE = 1.0    # "<answer>" present
MATH_BOXED_SCORE = 1.0         # the answer span is boxed
MATH_NOT_BOXED_SCORE = 0.5     # it is not
D1_BOXED_NEEDLE = "\boxed"     # NOT raw: "\b" is a backspace, so this is "\x08oxed" (d1's bug)


def math_gold(example):
    # MATH-500 rows carry the final answer; d1's train rows only a solution with a \boxed{}
    if example.get("answer") is not None:
        return str(example["answer"])
    return boxed_or_self(str(example["solution"]))


def math_correctness(completion, example, *, fixed=None):
    """2.0 if the LAST box anywhere in the completion (not only in <answer>) is_equiv the gold.
    d1 quirk (default): an "a/b" with a side that is no integer makes d1's normaliser raise, so
    "x / y" is compared raw and does not equal "x/y" (answers._fix_a_slash_b); fixed=True
    compares normalised."""
    # no box at all -> the whole completion is the guess, which only matches a bare answer
    guess = boxed_or_self(completion)
    correct = is_equiv(guess, math_gold(example), fixed=_is_fixed(fixed))
    return MATH_CORRECT_REWARD if correct else 0.0


def math_format(completion, example=None, *, fixed=None):
    """d1's "boxed_and_answer_tags_format": 0.5 * ((1 if "<answer>" in text else 0) + (1 if
    the first answer span, or the whole text without a tag, is boxed else 0.5)). d1 bug
    (default): "boxed" means it contains "\\x08oxed", so in practice it is 0.75 with <answer>,
    else 0.25; fixed=True tests for a real "\\boxed" (values 0.25 .. 1.0)."""
    needle = "\\boxed" if _is_fixed(fixed) else D1_BOXED_NEEDLE
    has_tag = "<answer>" in completion
    # d1's boxed_in_answer looks for the box only in
    # r.split("<answer>")[1].split("</answer>")[0]: the text after the FIRST "<answer>" up to
    # the next "</answer>" or "<answer>" (docs/d1.md §6.2 omits this reassignment of r), so a
    # box after </answer> earns nothing. That is what the reward is for (a box inside the
    # answer, the format of the eval prompts), not the bug, so fixed=True keeps it.
    span = completion
    if has_tag:
        span = completion.split("<answer>", 2)[1].split("</answer>", 1)[0]
    tag = MATH_ANSWER_TAG_SCORE if has_tag else 0.0
    boxed = MATH_BOXED_SCORE if needle in span else MATH_NOT_BOXED_SCORE
    return MATH_FORMAT_SCALE * (tag + boxed)

# -----------------------------------------------------------------------------
# Countdown (docs/d1.md §6.3) and Sudoku (docs/d1.md §6.4)

COUNTDOWN_CORRECT = 1.0    # the numbers each used once, the target reached
COUNTDOWN_FORMAT = 0.1     # a tagged answer that is wrong in any way
COUNTDOWN_NO_ANSWER = 0.0  # no <answer> tag
MAX_EQUATION_CHARS = 200   # ours: d1 has no limit; a real answer is ~15 characters
_EQUATION_CHARS = re.compile(r"^[\d+\-*/().\s]+$")  # d1's whitelist, checked before evaluating


def countdown_reward(completion, example):
    """0 without an <answer> tag; 1.0 if the last tagged equation uses exactly the given
    numbers (each once; "2.5" counts as 2 and 5) and evaluates to the target within 1e-5; else
    0.1."""
    # The order of d1's checks only decides 0 vs 0.1: everything after "has an answer tag" that
    # goes wrong is the same 0.1 "format" score, so the cheap length check can come first.
    equation = last_tag_content(completion)
    if equation is None:
        return COUNTDOWN_NO_ANSWER
    equation = equation.strip()
    if len(equation) > MAX_EQUATION_CHARS:  # also keeps uses_exactly's int() off huge numbers
        return COUNTDOWN_FORMAT
    # the multiset of integers written down (d1's \d+: "2.5" is 2 and 5) == the given numbers
    if not uses_exactly(equation, example["nums"]):
        return COUNTDOWN_FORMAT
    if not _EQUATION_CHARS.match(equation):
        return COUNTDOWN_FORMAT
    value = evaluate_equation(equation)  # None where d1's eval raised (bad syntax, x/0, ...)
    # the target may be an int, "23" or 7.5 alike: compared exactly
    return COUNTDOWN_CORRECT if reaches_target(value, example["target"]) else COUNTDOWN_FORMAT


def _blank_cell_accuracy(guess, puzzle, solution):
    # fraction of the puzzle's blank cells ("0") where the guess has the solution's digit
    blanks = [i for i, c in enumerate(puzzle) if c == "0"]  # givens earn nothing: copying free
    if not blanks:
        return 0.0  # d1: nothing to fill in scores 0, not 1
    return sum(i < len(guess) and guess[i] == solution[i] for i in blanks) / len(blanks)


_ASCII_NON_DIGITS = re.compile(r"[^0-9]+")  # fixed=True: what Sudoku answers are written with


def sudoku_reward(completion, example, *, fixed=None):
    """Fraction of blank cells right, in [0, 1]. The guess is the DIGITS of the last
    <answer>…</answer> (other characters dropped), right-padded with "0" / cut to the grid
    size. d1 quirk (default): a digit is anything str.isdigit() accepts, "²" and "①" too;
    fixed: 0-9 only."""
    answer = last_tag_content(completion)
    if answer is None:
        return 0.0
    # "4321 1243 ..." and "4321\n1243..." both work. d1 keeps every char with str.isdigit()
    # (docs/d1.md §6.4 says "digits only"): a "²" or "①" stays in the guess, fills a cell with
    # a non-solution "digit" and shifts every cell after it. Reproduced as d1 trained with it
    digits = (_ASCII_NON_DIGITS.sub("", answer) if _is_fixed(fixed)
              else "".join(filter(str.isdigit, answer)))
    if not digits:
        return 0.0
    # pad with "0", which never equals a solution digit: a short answer just loses those cells
    n = len(example["puzzle"])
    guess = digits[:n].ljust(n, "0")
    return _blank_cell_accuracy(guess, example["puzzle"], example["solution"])

# -----------------------------------------------------------------------------
# Toy task (ours): 4x4 Sudoku in a compact format, the completion IS the 16 solution digits

def toy_reward(completion, example):
    """Fraction of the puzzle's blank cells whose digit in the completion (its first 16
    characters after leading whitespace; anything after is ignored) equals the solution's. In
    [0, 1]."""
    # no tags, no digit filtering: the tiny demo model must learn the exact output format too
    guess = completion.lstrip()[:len(example["puzzle"])]
    return _blank_cell_accuracy(guess, example["puzzle"], example["solution"])


def toy_solved(completion, example):
    """Accuracy for the toy task: every blank cell right (False for a puzzle with none)."""
    return toy_reward(completion, example) == 1.0

# -----------------------------------------------------------------------------
# Code (d1's coding_reward_func, in later commits of its reward_func.py; docs/coding.md
# §1.2-1.3): run the completion's first ```python fence against the item's unit tests. Reading
# the fence and d1's test rewriting are sandbox/code_prep.py; programs run in sandbox/run.py's
# isolated subprocess

# d1's is_in_answer_reward: the graded fence lies inside <answer>...</answer>
CODE_IN_ANSWER_BONUS = 0.5
# ours: longer completions score 0 (keeps code_prep's lazy regexes linear enough)
MAX_CODE_COMPLETION = 100_000


def prepare_code_tests(code, tests, *, fixed=None):
    """d1's test preparation (code_prep.prepare_code_tests) under the D1_BUGS switch ->
    (program, test calls), None (tests name no target: reward 0) or "" (not run: the bonus
    only)."""
    return code_prep.prepare_code_tests(code, tests, fixed=_is_fixed(fixed))


def coding_reward(completion, example, *, fixed=None, run=None):
    """Share of the item's unit tests that the completion's program passes, plus 0.5 when the
    fence is inside <answer>: in [0, 1.5]. KodCode items (example["tests"], pytest source) go
    through d1's test rewriting (prepare_code_tests); the code test sets' items (tasks.py:
    program_prefix, unit_tests, ours) run program_prefix + code, then each unit test.
    `run(program, calls) -> [bool]` executes (default: sandbox.run.run_tests); coding_rewards
    scores a whole group in parallel the same way."""
    run_batch = None  # coding_rewards' default: sandbox.run.run_batch
    if run is not None:
        def run_batch(jobs):
            return [run(program, calls) for program, calls in jobs]
    return coding_rewards([completion], [example], fixed=fixed, run_batch=run_batch)[0]


def coding_rewards(completions, examples, *, fixed=None, run_batch=None):
    """coding_reward for many completions, the programs run in parallel (sandbox/run.py's
    run_batch)."""
    run_batch = run_batch or sandbox_run_batch
    scores = []  # per completion
    jobs = []  # the (program, test calls) to run
    where = []  # per job: (its completion's index, bonus, number of tests)
    for completion, example in zip(completions, examples):
        if len(completion) > MAX_CODE_COMPLETION:
            scores.append(0.0)
            continue
        code, in_answer = extract_code(completion)
        bonus = CODE_IN_ANSWER_BONUS if in_answer else 0.0
        if not code:
            prepared = None
        elif "tests" in example:  # KodCode / d1: its test rewriting
            prepared = prepare_code_tests(code, example["tests"], fixed=fixed)
        else:  # a code test set's item (HumanEval, MBPP, LeetCode): its own prefix and tests
            program = code_prep.benchmark_program(example, code)
            prepared = (program, list(example["unit_tests"]))
        if not prepared or not prepared[1]:
            # no fence / no target: 0; not run (no def, blocklist), nothing to test: bonus only
            scores.append(0.0 if prepared is None else bonus)
            continue
        where.append((len(scores), bonus, len(prepared[1])))
        scores.append(0.0)
        jobs.append(prepared)
    for (i, bonus, n), passed in zip(where, run_batch(jobs) if jobs else []):
        scores[i] = sum(map(bool, passed)) / n + bonus
    return scores


# it runs programs: grpo.py decides the sandbox's mode up front (ops/checks.py)
coding_reward.runs_code = True


# -----------------------------------------------------------------------------
# The total of a task's rewards (each weight 1, as in d1's TRL config). tasks.py's registry
# holds each task's list and its maximum; tasks.total_reward / total_rewards call these.

# rewards that run programs are scored a group at a time (programs in parallel): the batch form
BATCHED = {coding_reward: coding_rewards}


def sum_rewards(funcs, completion, example, known=None):
    """(sum of the rewards `funcs`, {function name: value}) for logging every component. Like
    TRL's nansum in d1, a component that raises is logged as NaN, and NaN/inf count as 0 in the
    sum; the functions above are written never to get there. `known`: {function: value} already
    computed (sum_rewards_batch's batched rewards)."""
    parts = {}  # insertion-ordered, so logs list the components in d1's order
    for fn in funcs:
        try:
            value = float(known[fn] if known and fn in known else fn(completion, example))
        except Exception as e:  # a bug, not a bad completion: warn once per call site
            warnings.warn(f"reward {fn.__name__} failed: {e!r}")
            value = math.nan
        parts[fn.__name__] = value
    return sum(v for v in parts.values() if math.isfinite(v)), parts


def sum_rewards_batch(completions, examples, funcs_of):
    """[sum_rewards(funcs_of(ex), completion, ex)] for many completions, each BATCHED reward
    called once over every completion whose list holds it: a rollout group's programs run in
    parallel."""
    known = [{} for _ in completions]  # per completion: {reward function: value}
    for fn, batch_fn in BATCHED.items():
        idx = [i for i, ex in enumerate(examples) if fn in funcs_of(ex)]
        if not idx:
            continue
        try:
            values = batch_fn([completions[i] for i in idx], [examples[i] for i in idx])
        except Exception as e:  # as in sum_rewards: a bug is logged as NaN, never a crash
            warnings.warn(f"reward {fn.__name__} failed: {e!r}")
            values = [math.nan] * len(idx)
        for i, v in zip(idx, values):
            known[i][fn] = v
    return [sum_rewards(funcs_of(ex), c, ex, known=k)
            for c, ex, k in zip(completions, examples, known)]
