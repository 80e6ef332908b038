"""
Tests for rewards.py: d1's training rewards (docs/d1.md §6) and our toy reward, table-driven.

  1. hand-made (completion, example, expected) tables for every function, one row per branch or
     d1 quirk, run with d1's bugs (the default) and, where they differ, with fixed=True;
  2. the fast format scanners against Python's `re` running d1's patterns (docs/d1.md §6), and xmlcount, math_format
     and sudoku_reward against properties written from docs/d1.md §6 (default and fixed=True), on random
     strings; the four places where d1's code and a literal reading of the spec of d1's rewards (docs/d1.md §6) part on hostile text,
     with d1's and the repaired values;
  3. d1's released LLaDA generations (../shared/data/d1_eval_baselines; skipped without it): every
     reward is a finite float in its range, takes only its documented values, and MATH correctness
     reproduces the paper's LLaDA MATH500 accuracies 26.0 / 32.4 / 36.2 exactly;
  4. hostile strings (1 MB garbage, deep nesting, huge numbers, code) never raise and run fast.
The answer-reading helpers the rewards use (tags, \\boxed{}, MATH equality) are tested in
tests/test_answers.py, the Countdown arithmetic in tests/test_arith.py.

Run:  .venv/bin/python -m pytest tests/test_rewards.py -q
"""
import json
import dataclasses
import math
import random
import re
import time

import pytest

import rewards
import tasks
from conftest import SHARED_DATA, random_texts
from rewards import (
    countdown_reward,
    gsm8k_correctness,
    int_answer,
    math_correctness,
    math_format,
    soft_format,
    strict_format,
    sudoku_reward,
    toy_reward,
    toy_solved,
    xmlcount,
)
from tasks import TASKS, total_reward

REWARDS = {name: t.rewards for name, t in TASKS.items() if t.rewards}  # each RL task's list, from the registry
CODE_TASKS = ("code", *tasks.names("code"))

# -----------------------------------------------------------------------------
# 1. GSM8K

GOOD = "<reasoning>\nr\n</reasoning>\n<answer>\n42\n</answer>"  # 48 chars, ends at </answer>
LONG = "<reasoning>\n" + "x" * 1000 + "\n</reasoning>\n<answer>\n42\n</answer>"  # 1047 chars

# (completion, d1 value, fixed value)
XMLCOUNT_CASES = [
    ("", 0.0, 0.0),
    ("<reasoning>\n", 0.125, 0.125),
    ("<reasoning>\n<reasoning>\n", 0.0, 0.0),                           # a tag twice earns nothing
    (GOOD + "\n", 0.5, 0.5),                                            # trailing newline: max
    (GOOD, 0.501 - 0.001 * 48, 0.5),                                    # quirk: whole length, +0.001
    (LONG, 0.501 - 1.047, 0.5),                                         # quirk: long -> negative
    (GOOD + "\nJUNK", 0.5 - 0.004 - 0.004, 0.5 - 0.004 - 0.004),       # real trailing text
]


@pytest.mark.parametrize("text, d1, fixed", XMLCOUNT_CASES)
def test_xmlcount(text, d1, fixed):
    assert xmlcount(text, {}) == pytest.approx(d1, abs=1e-12)
    assert xmlcount(text, {}, fixed=True) == pytest.approx(fixed, abs=1e-12)


SOFT_CASES = [
    ("<reasoning>one line</reasoning><answer>42</answer>", 0.5, 0.5),
    ("<reasoning>\nmulti\nline\n</reasoning>\n<answer>\n42\n</answer>", 0.0, 0.5),  # the DOTALL bug
    ("<reasoning>r</reasoning>\n\n<answer>42</answer>", 0.5, 0.5),        # \s* spans newlines
    ("<reasoning>r</reasoning><answer>\n42\n</answer>", 0.0, 0.5),         # answer over lines
    ("<reasoning>a</reasoning>b</reasoning><answer>4</answer>", 0.5, 0.5),  # lazy .*? backtracks
    ("<reasoning>r</reasoning><answer>42</answer> and more", 0.5, 0.5),   # only a prefix must match
    ("Sure! <reasoning>r</reasoning><answer>42</answer>", 0.0, 0.0),      # re.match: at the start
    ("<reasoning>r</reasoning> so <answer>42</answer>", 0.0, 0.0),
    ("<reasoning>r</reasoning><answer>42", 0.0, 0.0),
    ("", 0.0, 0.0),
]
STRICT_CASES = [
    (GOOD + "\n", 0.5, 0.5),
    (GOOD + "\n\n", 0.5, 0.5),                                  # "$" also matches before a final \n
    (GOOD, 0.0, 0.0),                                           # no trailing newline: the usual case
    (GOOD + "\nx", 0.0, 0.0),
    ("<reasoning>\na\nb\n</reasoning>\n<answer>\n42\n</answer>\n", 0.0, 0.5),  # the DOTALL bug
    ("<reasoning>\nr\n</reasoning>\n<answer>\n4\n2\n</answer>\n", 0.0, 0.5),
    ("<reasoning>\n</reasoning>\n<answer>\n42\n</answer>\n", 0.0, 0.0),  # needs "\n" before </reasoning>
]


@pytest.mark.parametrize("text, d1, fixed", SOFT_CASES)
def test_soft_format(text, d1, fixed):
    assert soft_format(text, {}) == d1
    assert soft_format(text, {}, fixed=True) == fixed


@pytest.mark.parametrize("text, d1, fixed", STRICT_CASES)
def test_strict_format(text, d1, fixed):
    assert strict_format(text, {}) == d1
    assert strict_format(text, {}, fixed=True) == fixed


def test_module_switch_and_keyword_override(monkeypatch):
    multi = SOFT_CASES[1][0]
    monkeypatch.setattr(rewards, "D1_BUGS", False)
    assert soft_format(multi, {}) == 0.5 and math_format(r"\boxed{1}", {}) == 0.5
    assert soft_format(multi, {}, fixed=False) == 0.0  # the keyword wins over the module switch


@pytest.mark.parametrize("text, expected", [
    ("<answer>42</answer>", 0.5), ("<answer>-3</answer>", 0.0), ("<answer>2.5</answer>", 0.0),
    (r"<answer>\boxed{18}</answer>", 0.0), ("", 0.0), ("<answer>١٢</answer>", 0.5),  # str.isdigit quirk
])
def test_int_answer(text, expected):
    assert int_answer(text, {}) == expected


@pytest.mark.parametrize("text, answer, expected", [
    ("<answer>18</answer>", "18", 2.0),
    ("<reasoning>\n...\n</reasoning>\n<answer>\n18\n</answer>", "18", 2.0),
    ("18", "18", 2.0),                                   # no tags: the whole (stripped) text
    ("<answer>18</answer>", "She makes 9 * 2 = 18.\n#### 18", 2.0),  # a raw GSM8K answer works too
    (r"<answer>\boxed{18}</answer>", "18", 0.0),         # exact string match only
    ("<answer>$18</answer>", "18", 0.0),
    ("<answer>18.0</answer>", "18", 0.0),
    ("<answer>1,000</answer>", "1000", 0.0),
    ("<answer>17</answer>", "18", 0.0),
])
def test_gsm8k_correctness(text, answer, expected):
    assert gsm8k_correctness(text, {"answer": answer}) == expected

# -----------------------------------------------------------------------------
# 1. MATH

HALF = {"answer": r"\frac{1}{2}"}


@pytest.mark.parametrize("text, example, expected", [
    (r"<answer>\boxed{\frac{1}{2}}</answer>", HALF, 2.0),
    (r"\boxed{0.5}", HALF, 2.0), (r"\boxed{\dfrac12}", HALF, 2.0),
    (r"first \boxed{1}, finally \boxed{0.5}", HALF, 2.0),
    (r"\boxed{0.5}, no wait: \boxed{1}", HALF, 0.0),          # the LAST box counts
    ("0.5", HALF, 2.0),                                        # no box: the whole text is the guess
    ("<answer>0.5</answer>", HALF, 0.0),                       # ... tags included
    (r"\boxed{0.5", HALF, 0.0),                                # unbalanced -> whole text
    (r"\boxed{1,000}", {"answer": "1000"}, 0.0), (r"\boxed{1,000}", {"answer": "1,000"}, 2.0),
    (r"\boxed{x = 5}", {"answer": "5"}, 2.0),
    (r"\boxed{2}", {"solution": r"So $x = \boxed{2}$."}, 2.0),  # gold from a solution's last box
])
def test_math_correctness(text, example, expected):
    assert math_correctness(text, example) == expected


@pytest.mark.parametrize("text, d1, fixed", [
    (r"<answer>\boxed{1}</answer>", 0.75, 1.0),
    (r"\boxed{1}", 0.25, 0.5),
    ("<answer>1</answer>", 0.75, 0.75),
    ("", 0.25, 0.25),
    ("<answer>\x08oxed", 1.0, 0.75),   # d1 really looks for backspace + "oxed"
])
def test_math_format(text, d1, fixed):
    assert math_format(text, {}) == d1
    assert math_format(text, {}, fixed=True) == fixed

# -----------------------------------------------------------------------------
# 1. Countdown

CD = {"nums": [44, 19, 35], "target": 98}
FAST_S = 0.5  # every hostile Countdown answer must be scored in less than this


@pytest.mark.parametrize("text, example, expected", [
    ("<answer>44 + 19 + 35</answer>", CD, 1.0),
    ("<reasoning>...</reasoning>\n<answer>\n(44 + 19) + 35\n</answer>", CD, 1.0),
    ("44 + 19 + 35", CD, 0.0),                                  # no answer tag
    ("<answer>44 + 19</answer>", CD, 0.1),                      # a number missing
    ("<answer>44 + 19 + 35 + 0</answer>", CD, 0.1),             # an extra number
    ("<answer>44 + 44 + 10</answer>", {"nums": [44, 10, 3], "target": 98}, 0.1),  # used twice
    ("<answer>44+19+35 = 98</answer>", CD, 0.1),                # the target counts as a number
    (r"<answer>\boxed{44+19+35}</answer>", CD, 0.1),            # d1's eval format: invalid here
    ("<answer>44 * 19 - 35</answer>", CD, 0.1),                 # valid, wrong value
    ("<answer>1</answer> <answer>44+19+35</answer>", CD, 1.0),  # the LAST tag
    ("<answer>44+19+35</answer> <answer>1</answer>", CD, 0.1),
    ("<answer></answer>", CD, 0.1),
    ("<answer>6 / 3 * 4</answer>", {"nums": [6, 4, 3], "target": 8}, 1.0),   # true division
    ("<answer>10 / 4 * 3</answer>", {"nums": [10, 4, 3], "target": 7.5}, 1.0),
    ("<answer>2.5 * 4</answer>", {"nums": [2, 5, 4], "target": 10}, 1.0),     # "2.5" = 2 and 5
    ("<answer>(44 +\n19) + 35</answer>", CD, 1.0),              # newline inside () is fine ...
    ("<answer>44 +\n19 + 35</answer>", CD, 0.1),                # ... outside it is a SyntaxError
    ("<answer>6 / (4 - 4)</answer>", {"nums": [6, 4, 4], "target": 1}, 0.1),  # division by zero
    ("<answer>1/0</answer>", {"nums": [1, 0], "target": 0}, 0.1),
    ("<answer>2**3*1</answer>", {"nums": [2, 3, 1], "target": 8}, 0.1),  # ours: ** rejected (d1: 1.0)
    ("<answer>2**100</answer>", {"nums": [2, 100], "target": 4}, 0.1),
    ("<answer>9999999999*9999999999</answer>", {"nums": [9999999999] * 2, "target": 1}, 0.1),
    ("<answer>" + "(" * 10_000 + "1" + ")" * 10_000 + "</answer>", {"nums": [1], "target": 1}, 0.1),
    ("<answer>__import__('os').system('true')</answer>", CD, 0.1),
    ("<answer>" + "x9(" * 350_000 + "</answer>", CD, 0.1),      # 1 MB of garbage
    ("<answer>" * 100_000, CD, 0.0),
])
def test_countdown_reward(text, example, expected):
    t0 = time.perf_counter()
    assert countdown_reward(text, example) == expected
    assert time.perf_counter() - t0 < FAST_S

# -----------------------------------------------------------------------------
# 1. Sudoku and the toy task

SUDOKU = {"puzzle": "4320004330100004", "solution": "4321124334122134"}  # 8 blanks


@pytest.mark.parametrize("text, example, expected", [
    ("<answer>\n4321124334122134\n</answer>", SUDOKU, 1.0),
    ("<answer>4321\n1243\n3412\n2134</answer>", SUDOKU, 1.0),          # non-digits are dropped
    ("<answer>4320004330100004</answer>", SUDOKU, 0.0),                # a copy of the puzzle
    ("<answer>4321</answer>", SUDOKU, 1 / 8),                          # right-padded with "0"
    ("<answer>43211243</answer>", SUDOKU, 3 / 8),
    ("<answer>43211243341221349999</answer>", SUDOKU, 1.0),            # cut to 16
    ("<answer>4321124334122134</answer><answer>0</answer>", SUDOKU, 0.0),  # the LAST tag
    ("<answer>abc</answer>", SUDOKU, 0.0),
    ("4321124334122134", SUDOKU, 0.0),                                  # no tag
    ("<answer>4321124334122134</answer>", {"puzzle": "4321124334122134", "solution": "4321124334122134"}, 0.0),
])
def test_sudoku_reward(text, example, expected):
    assert sudoku_reward(text, example) == pytest.approx(expected)


TOY = {"puzzle": "0301100300122100", "solution": "4321124334122134"}  # 8 blanks: cells 0 2 5 6 8 9 14 15


@pytest.mark.parametrize("text, expected, solved", [
    ("4321124334122134", 1.0, True),
    ("  \n4321124334122134 and then some text", 1.0, True),   # leading whitespace, trailing text
    ("0301100300122100", 0.0, False),                           # a copy of the puzzle
    ("4321", 2 / 8, False),                                     # too short: missing cells are wrong
    ("4321124334122139", 7 / 8, False),
    ("", 0.0, False),
    ("<answer>4321124334122134</answer>", 0.0, False),          # the toy format has no tags
])
def test_toy_reward(text, expected, solved):
    assert toy_reward(text, TOY) == pytest.approx(expected)
    assert toy_solved(text, TOY) is solved


def test_total_reward_sums_components(monkeypatch):
    text = GOOD + "\n"  # strict format, but the reasoning spans lines: soft_format is 0 with d1 bugs
    total, parts = total_reward("gsm8k", text, {"answer": "42"})
    assert parts == {"xmlcount": 0.5, "soft_format": 0.0, "strict_format": 0.5, "int_answer": 0.5,
                     "gsm8k_correctness": 2.0}
    assert total == 3.5
    monkeypatch.setattr(rewards, "D1_BUGS", False)  # with the DOTALL fix the same text gets the max
    assert total_reward("gsm8k", text, {"answer": "42"})[0] == TASKS["gsm8k"].max_reward == 4.0
    assert all(REWARDS[t] == REWARDS["code"] for t in CODE_TASKS)
    assert [len(REWARDS[t]) for t in ("gsm8k", "math", "countdown", "sudoku", "toy", "code")] == [5, 2, 1, 1, 1, 2]
    # d1's maxima (docs/d1.md §6): the sum of the functions' own maxima (the code bonus needs <answer> tags)
    assert {t: TASKS[t].max_reward for t in ("gsm8k", "math", "countdown", "sudoku", "code")} == {
        "gsm8k": 4.0, "math": 3.0, "countdown": 1.0, "sudoku": 1.0, "code": 2.0}


def test_total_reward_failing_component_counts_zero(monkeypatch):
    def broken(completion, example):
        raise RuntimeError("bug")
    monkeypatch.setitem(TASKS, "toy", dataclasses.replace(TASKS["toy"], rewards=(toy_reward, broken)))
    with pytest.warns(UserWarning, match="broken"):
        total, parts = total_reward("toy", TOY["solution"], TOY)
    assert total == 1.0 and parts["toy_reward"] == 1.0 and math.isnan(parts["broken"])

# -----------------------------------------------------------------------------
# 2. fast scanners == d1's regexes (run by `re`) on random strings built from the relevant pieces

SOFT_RE = r"<reasoning>.*?</reasoning>\s*<answer>.*?</answer>"
STRICT_RE = r"^<reasoning>\n.*?\n</reasoning>\n<answer>\n.*?\n</answer>\n$"


def test_format_scanners_match_d1_regexes():
    hits = {}
    for text in random_texts(20_000):
        for flags, fixed in ((0, False), (re.DOTALL, True)):
            soft = bool(re.match(SOFT_RE, text, flags))
            strict = bool(re.match(STRICT_RE, text, flags))
            assert (soft_format(text, {}, fixed=fixed) > 0) == soft, (text, fixed)
            assert (strict_format(text, {}, fixed=fixed) > 0) == strict, (text, fixed)
            hits[("soft", fixed)] = hits.get(("soft", fixed), 0) + soft
            hits[("strict", fixed)] = hits.get(("strict", fixed), 0) + strict
    assert min(hits.values()) > 100, hits  # every matcher said "yes" often enough to be tested


# Default (d1) vs repaired values on random strings, checked against properties written from docs/d1.md §6
# and the comments in rewards.py, each built independently of the code under test

PIECES = ["<reasoning>\n", "\n</reasoning>\n", "\n<answer>\n", "\n</answer>\n", "<answer>", "</answer>",
          "</answer>\n", "\n", " ", "x", "\x08oxed", "\\boxed{1}", "4321", "1243", "3412", "2134", "²", "①", "٣", "1", "4"]
CLOSE_NL, CLOSE = "\n</answer>\n", "\n</answer>"


def piece_texts(n, seed=0):
    rng = random.Random(seed)
    for _ in range(n):
        yield "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))


def tail_after_scan(text, sep):
    """Length of the text after the last match that a left-to-right, non-overlapping scan for sep finds
    (each search resumes just past the previous match); the whole text when there is none."""
    resume, pos = 0, text.find(sep)
    while pos >= 0:
        resume = pos + len(sep)
        pos = text.find(sep, resume)
    return len(text) - resume


def tail_after_last(text, sep):
    """Length of the text after the LAST occurrence of sep (overlaps allowed); 0 when there is none."""
    pos = text.rfind(sep)
    return 0 if pos < 0 else len(text) - pos - len(sep)


def overlaps_itself(text, sep):
    """Two occurrences of sep share characters (e.g. "\\n</answer>\\n</answer>\\n")."""
    starts = [i for i in range(len(text)) if text.startswith(sep, i)]
    return any(b - a < len(sep) for a, b in zip(starts, starts[1:]))


def test_xmlcount_default_and_fixed_on_random_strings():
    # The default's two penalties measure the tail after the scan above (whole text if no tag); fixed=True
    # the tail after the last occurrence (none if no tag) and never pays the +0.001 for ending at "\n</answer>".
    # Would fail for a default measuring after the last occurrence (0.375 where d1 gives 0.365 on
    # GOOD + "\n</answer>\n"), or for a fixed path keeping the whole-text penalty.
    overlapping = differing = 0
    for text in piece_texts(20_000):
        tags = 0.125 * sum(text.count(t) == 1 for t in ("<reasoning>\n", "\n</reasoning>\n", "\n<answer>\n", CLOSE))
        d1 = fixed = tags
        if text.count("\n<answer>\n") == 1:
            d1 -= 0.001 * tail_after_scan(text, CLOSE_NL)
            fixed -= 0.001 * tail_after_last(text, CLOSE_NL)
        if text.count(CLOSE) == 1:
            d1 -= 0.001 * (tail_after_scan(text, CLOSE) - 1)
            fixed -= 0.001 * max(tail_after_last(text, CLOSE) - 1, 0)
        assert xmlcount(text, {}) == pytest.approx(d1, abs=1e-12), repr(text)
        assert xmlcount(text, {}, fixed=True) == pytest.approx(fixed, abs=1e-12), repr(text)
        # so the two differ only where the closing tag is absent or overlaps itself
        if abs(d1 - fixed) > 1e-12:
            assert CLOSE_NL not in text or overlaps_itself(text, CLOSE_NL), repr(text)
        differing += abs(d1 - fixed) > 1e-12
        overlapping += overlaps_itself(text, CLOSE_NL) and text.count("\n<answer>\n") == 1
    assert overlapping > 40 and differing > 1000, (overlapping, differing)


def first_answer_span(text):
    """From just after the first "<answer>" up to the next "<answer>" or "</answer>", whichever comes
    first (or the end); the whole text when there is no "<answer>"."""
    i = text.find("<answer>")
    if i < 0:
        return text
    i += len("<answer>")
    ends = [j for j in (text.find("<answer>", i), text.find("</answer>", i)) if j >= 0]
    return text[i:min(ends, default=len(text))]


def swap_box_needles(text):
    # "\boxed" <-> backspace + "oxed": neither piece can appear across a swapped one's border
    return text.replace("\\boxed", "\0").replace("\x08oxed", "\\boxed").replace("\0", "\x08oxed")


def test_math_format_default_and_fixed_on_random_strings():
    # fixed=True: 0.5 * (tag + box in the first answer span); the default is the same test for d1's
    # "\x08oxed" needle, so it equals the fixed value on the text with the two needles swapped. Would fail
    # for a default that looked for a real "\boxed", or for a box searched after "</answer>".
    seen = set()
    for text in piece_texts(20_000, seed=1):
        if "\0" in text:
            continue
        expected = 0.5 * (("<answer>" in text) + (1.0 if "\\boxed" in first_answer_span(text) else 0.5))
        assert math_format(text, {}, fixed=True) == expected, repr(text)
        assert math_format(text, {}) == math_format(swap_box_needles(text), {}, fixed=True), repr(text)
        seen.add((math_format(text, {}), expected))
    assert len(seen) >= 8, seen  # every default value with every fixed value


ASCII_DIGITS = set("0123456789")


def test_sudoku_default_keeps_unicode_digits_as_wrong_cells():
    # d1 keeps every str.isdigit() character as a cell. Independent construction: put an ASCII "0" (never a
    # solution digit, it is the blank marker) in place of each such non-ASCII character; the repaired
    # 0-9 reward on that text is the default's value. Would fail for a default that drops "²" like
    # fixed=True does: "4321²124334122134" scores 2/8 here, 1.0 when "²" is dropped.
    differing = 0
    for text in piece_texts(20_000, seed=2):
        zeroed = "".join("0" if c.isdigit() and c not in ASCII_DIGITS else c for c in text)
        d1 = sudoku_reward(text, SUDOKU)
        assert d1 == sudoku_reward(zeroed, SUDOKU, fixed=True), repr(text)
        differing += d1 != sudoku_reward(text, SUDOKU, fixed=True)
    assert differing > 100, differing

# -----------------------------------------------------------------------------
# 2. Hostile strings where d1's code is not what a literal reading of the spec of d1's rewards (docs/d1.md §6) says: d1's value
# by default, the repaired one with fixed=True and with the module switch D1_BUGS off


def test_xmlcount_closing_tag_twice(monkeypatch):
    # "\n</answer>\n</answer>\n": the second "\n</answer>\n" shares the first one's final "\n", so d1's
    # text.split finds only the first: the tail is "</answer>\n" (10 characters), not "" after the last one
    text = GOOD + "\n</answer>\n"
    assert xmlcount(text, {}) == pytest.approx(0.365, abs=1e-12)
    assert xmlcount(text, {}, fixed=True) == pytest.approx(0.375, abs=1e-12)
    monkeypatch.setattr(rewards, "D1_BUGS", False)
    assert xmlcount(text, {}) == pytest.approx(0.375, abs=1e-12)


@pytest.mark.parametrize("text, d1, fixed", [
    ("<answer>4321²124334122134</answer>", 2 / 8, 1.0),   # "²" takes cell 4, every later cell shifts
    ("<answer>①321124334122134</answer>", 1.0, 2 / 8),    # "①" fills given cell 0; dropping it shifts
    ("<answer>²</answer>", 0.0, 0.0),                      # a "digit" to d1, but never a solution digit
])
def test_sudoku_reward_keeps_str_isdigit_chars(monkeypatch, text, d1, fixed):
    assert sudoku_reward(text, SUDOKU) == pytest.approx(d1)
    assert sudoku_reward(text, SUDOKU, fixed=True) == pytest.approx(fixed)
    monkeypatch.setattr(rewards, "D1_BUGS", False)
    assert sudoku_reward(text, SUDOKU) == pytest.approx(fixed)


@pytest.mark.parametrize("text, d1, fixed", [
    ("<answer>42</answer> \x08oxed", 0.75, 0.75),         # d1 looks only inside the first answer span ...
    (r"<answer>42</answer> \boxed{42}", 0.75, 0.75),      # ... in both modes: a box after </answer> is no format
    ("<answer>a<answer>\x08oxed</answer>", 0.75, 0.75),  # the span ends at the next "<answer>" too
    ("<answer>\x08oxed<answer></answer>", 1.0, 0.75),
    (r"<answer>x<answer>\boxed{1}</answer>", 0.75, 0.75),
    (r"no tag, \boxed{1}", 0.25, 0.5),                    # no tag: the whole text is searched
])
def test_math_format_looks_only_in_first_answer_span(monkeypatch, text, d1, fixed):
    assert math_format(text, {}) == d1
    assert math_format(text, {}, fixed=True) == fixed
    monkeypatch.setattr(rewards, "D1_BUGS", False)
    assert math_format(text, {}) == fixed


@pytest.mark.parametrize("text, answer", [
    (r"\boxed{x / y}", "x/y"), (r"\boxed{\pi / 2}", r"\pi/2"), (r"\boxed{3.0 / 4}", "3.0/4"),
])
def test_math_correctness_slash_with_non_integer_side(monkeypatch, text, answer):
    # d1's normaliser raises on "a/b" when int() can't read a side, and is_equiv falls back to the raw
    # strings, which differ by the spaces (answers._fix_a_slash_b); repaired: compared normalised
    assert math_correctness(text, {"answer": answer}) == 0.0
    assert math_correctness(text, {"answer": answer}, fixed=True) == 2.0
    assert math_correctness(text.replace(" ", ""), {"answer": answer}) == 2.0  # raw equality still counts
    monkeypatch.setattr(rewards, "D1_BUGS", False)
    assert math_correctness(text, {"answer": answer}) == 2.0

# -----------------------------------------------------------------------------
# 3. d1's released LLaDA-8B-Instruct generations

BASELINES = SHARED_DATA / "d1_eval_baselines"
needs_data = pytest.mark.skipif(not BASELINES.is_dir(), reason=f"{BASELINES} not found")
SPECIAL_TOKENS = re.compile(r"<\|(?:eot_id|endoftext|start_header_id|end_header_id|startoftext)\|>")
# documented range (lo, hi) of every function; xmlcount has no lower bound (-0.001 per character)
RANGE = {"xmlcount": (-math.inf, 0.5), "soft_format": (0, 0.5), "strict_format": (0, 0.5),
         "int_answer": (0, 0.5), "gsm8k_correctness": (0, 2), "math_correctness": (0, 2),
         "math_format": (0.25, 1), "countdown_reward": (0, 1), "sudoku_reward": (0, 1)}


def load_baselines(task, gen_length="*"):
    """[(reward text, example)] from d1's generation files. The reward text is what diffu-GRPO
    would score: special tokens stripped (skip_special_tokens, docs/d1.md §2.4) and the "<reasoning>"
    the eval prompt prefilled put back in front, as if the model had written it."""
    rows = []
    for path in sorted(BASELINES.glob(f"{task}_instruct_{gen_length}_*_generations.json")):
        for item in json.loads(path.read_text())["generations"]:
            gt = item["ground_truth"]
            if gt is None:  # 6 GSM8K items whose gold d1's parser could not read (negative numbers)
                continue
            if task == "gsm8k":
                example = {"answer": str(int(gt)) if float(gt).is_integer() else str(gt)}
            elif task == "math500":
                example = {"answer": gt}
            elif task == "countdown":
                example = {"nums": gt[0], "target": gt[1]}
            else:
                puzzle = re.search(r"Sudoku puzzle: (\d{16})", item["question"]).group(1)
                example = {"puzzle": puzzle, "solution": gt}
            rows.append(("<reasoning>" + SPECIAL_TOKENS.sub("", item["generations"]), example))
    return rows


def score_all(task, rows):
    values = {fn.__name__: [] for fn in REWARDS[task]}
    for text, example in rows:
        for fn in REWARDS[task]:
            v = fn(text, example)
            lo, hi = RANGE[fn.__name__]
            assert isinstance(v, float) and math.isfinite(v) and lo <= v <= hi, (fn.__name__, v, text[:200])
            values[fn.__name__].append(v)
    return values


@needs_data
def test_baselines_gsm8k():
    rows = load_baselines("gsm8k")
    assert len(rows) > 3000
    v = score_all("gsm8k", rows)
    assert set(v["soft_format"]) == {0.0} and set(v["strict_format"]) == {0.0}  # the DOTALL bug at work
    assert sum(soft_format(t, ex, fixed=True) > 0 for t, ex in rows) > len(rows) // 3
    assert min(v["xmlcount"]) < 0                       # the length quirk shows on real text
    assert set(v["gsm8k_correctness"]) == {0.0, 2.0}    # eval prompts ask for \boxed{}: rare hits
    assert set(v["int_answer"]) == {0.0, 0.5}


@needs_data
def test_baselines_math500_reproduce_paper():
    v = score_all("math", load_baselines("math500"))
    assert set(v["math_format"]) == {0.25, 0.75}        # the "\b" bug: never the 0.5 / 1.0 values
    assert set(v["math_correctness"]) == {0.0, 2.0}
    # d1 Table 1, LLaDA-8B-Instruct MATH500: 26.0 / 32.4 / 36.2 at gen length 128 / 256 / 512
    for gen_length, paper in ((128, 26.0), (256, 32.4), (512, 36.2)):
        rows = load_baselines("math500", gen_length)
        accuracy = 100 * sum(math_correctness(t, ex) > 0 for t, ex in rows) / len(rows)
        assert len(rows) == 500 and accuracy == pytest.approx(paper), gen_length


@needs_data
def test_baselines_countdown():
    rows = load_baselines("countdown")
    values = score_all("countdown", rows)["countdown_reward"]
    assert len(rows) == 768 and set(values) <= {0.0, 0.1, 1.0}
    assert 1.0 in values and 0.1 in values and 0.0 in values


@needs_data
def test_baselines_sudoku():
    rows = load_baselines("sudoku")
    values = score_all("sudoku", rows)["sudoku_reward"]
    assert len(rows) == 768 and all(v * 8 == round(v * 8) for v in values)  # 8 blanks per puzzle
    assert 0.02 < sum(values) / len(values) < 0.25  # LLaDA's eval cell accuracy is 5-12 %

# -----------------------------------------------------------------------------
# 4. hostile strings: never raise, always a float, fast

MB = 1_000_000
_rng = random.Random(0)
HOSTILE = [
    "", " ", "\n" * 10, "ünïcødé 数学 ٣ ² \u202e \ufeff", "\x00" * 1000, "<answer>\x00</answer>",
    "(" * MB, ")" * MB, "{" * MB, "}" * MB, "<answer>" * 100_000, "</answer>" * 100_000,
    "<answer></answer>" * 60_000, "<reasoning></reasoning><answer>" * 30_000,
    "<reasoning>" + "</reasoning><answer>" * 50_000, "<reasoning>\n" + "\n</reasoning>\n<answer>\n" * 40_000,
    "<reasoning>" + " " * MB, r"\boxed{" * 100_000, "\\boxed{" + "{" * MB, "\\boxed" + "}" * MB,
    "\\boxed}" + "{}" * (MB // 2),  # the brace walk's worst case: 10**6 runs, never closes
    r"\boxed{\boxed{\boxed{1}}}", r"\boxed{{{1}", r"\boxed " + "$" * 1000, r"\sqrt", r"\frac",
    r"\sqrt" * 100_000, r"\frac12" * 100_000, "x = " + r"\text{ a}" * 1000, "1" * 5000 + "/2",
    "<answer>" + "9" * 100_000 + "</answer>", "<answer>" + "1" * 5000 + "/2</answer>",
    "<answer>1/0</answer>", "<answer>2**100**100</answer>", "<answer>9999999999*9999999999</answer>",
    "<answer>" + "(" * 10_000 + "1" + ")" * 10_000 + "</answer>", "<answer>" + "-" * MB + "1</answer>",
    "<answer>__import__('os').system('echo pwned')</answer>", "__import__('os')",
    "".join(chr(_rng.randrange(32, 0x3000)) for _ in range(MB)),                    # 1 MB of garbage
    "<answer>" + "".join(_rng.choice("0123456789+-*/(). ") for _ in range(MB)) + "</answer>",
]
EXAMPLES = {"gsm8k": {"answer": "18"}, "math": {"answer": r"\frac{1}{2}"}, "countdown": CD,
            "sudoku": SUDOKU, "toy": TOY,
            "code": {"tests": "from solution import f\n\ndef test_a():\n    assert f() == 1\n\ndef test_b():\n    assert f()\n"},
            # the code benchmarks' items (program prefix + unit tests) and the code toy's asserts
            "humaneval": {"program_prefix": "import math\n", "unit_tests": ["assert f(1) == 2"]},
            "pbe": {"tests": "assert f(1)==2\nassert f(2)==3"}}
# every function in REWARDS (the code benchmarks share one list: humaneval stands for them), plus the
# d1-bug functions in their fixed form
CALLS = [(task, fn.__name__, fn) for task, fns in REWARDS.items() if task in EXAMPLES for fn in fns]
CALLS += [("gsm8k", f"{fn.__name__}(fixed)", lambda c, e, fn=fn: fn(c, e, fixed=True))
          for fn in (xmlcount, soft_format, strict_format)]
CALLS += [("math", "math_format(fixed)", lambda c, e: math_format(c, e, fixed=True)),
          ("math", "math_correctness(fixed)", lambda c, e: math_correctness(c, e, fixed=True)),
          ("math", "math_correctness(solution)", lambda c, e: math_correctness(c, {"solution": c})),
          ("sudoku", "sudoku_reward(fixed)", lambda c, e: sudoku_reward(c, e, fixed=True))]


def test_hostile_strings_never_raise_and_run_fast():
    slowest, start = (0.0, None), time.perf_counter()
    for text in HOSTILE:
        for task, name, fn in CALLS:
            t0 = time.perf_counter()
            v = fn(text, EXAMPLES[task])
            dt = time.perf_counter() - t0
            assert isinstance(v, float) and not math.isnan(v), (name, text[:50])
            slowest = max(slowest, (dt, f"{name} on {text[:40]!r}"))
        total, parts = total_reward("gsm8k", text, EXAMPLES["gsm8k"])
        assert math.isfinite(total) and all(math.isfinite(p) for p in parts.values())
    assert slowest[0] < 1.0, slowest
    assert time.perf_counter() - start < 5.0
