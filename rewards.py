"""
Reward functions for diffu-GRPO: every training reward of d1 (arXiv 2504.12216) with d1's exact
values and quirks (d1-spec §6), plus a toy 4x4-Sudoku reward for the CPU demo.

Every reward is a pure function  f(completion: str, example: dict) -> float  that never raises.
`completion` is the decoded completion with special tokens stripped (d1-spec §2.4); `example` is
one dataset row (keys below). A task's rewards are SUMMED, each with weight 1 (d1 sets no reward
weights), see REWARDS and total_reward() at the bottom. Maximum totals (MAX_REWARD):

    task       functions (max each)                                              max total
    gsm8k      xmlcount .5, soft_format .5, strict_format .5, int_answer .5,       4.0
               gsm8k_correctness 2.0                                    (§6.1)
    math       math_correctness 2.0, math_format 1.0                    (§6.2)    3.0
    countdown  countdown_reward 1.0                                     (§6.3)    1.0
    sudoku     sudoku_reward 1.0                                        (§6.4)    1.0
    toy        toy_reward 1.0 (ours, not d1)                                      1.0

Example keys: gsm8k {"answer": text after "####"}; math {"answer": gold final answer} or
{"solution": full solution, gold = its last \\boxed{}}; countdown {"nums": [int], "target": int};
sudoku / toy {"puzzle", "solution"}: 16-char strings, "0" = blank.

d1's bugs are reproduced by default, because they shape d1's reward scale and dynamics (§10.9):
  - soft/strict format regexes lack re.DOTALL, so multi-line reasoning scores 0 (fixed upstream later);
  - math_format tests for the non-raw "\\boxed" == backspace + "oxed", so it is 0.75 / 0.25;
  - xmlcount subtracts 0.001 x the WHOLE completion when it ends exactly at "</answer>".
Set D1_BUGS = False (or pass fixed=True to those four functions) for the repaired versions.

Deliberate differences from d1 (safety; model text is never executed): Countdown equations go
through a tiny hand-written parser instead of eval(), with limits on length, nesting and size;
"**" and "//" are rejected (d1's eval would compute them; its prompt only allows + - * /). The
d1 regexes that can backtrack quadratically on hostile text are replaced by linear scans with the
same semantics (tests/test_rewards.py checks them against `re` on random strings), and a \boxed{}
longer than MAX_BOX_CHARS counts as unbalanced. None of this changes a score on realistic text.
"""
import math
import re
import warnings
from fractions import Fraction

D1_BUGS = True  # module-wide default for the `fixed` keyword: True = behave exactly like d1 @ 837888f


def _is_fixed(fixed):
    # fixed=None defers to the module switch, so a training script can flip D1_BUGS once
    return (not D1_BUGS) if fixed is None else bool(fixed)

# -----------------------------------------------------------------------------
# GSM8K (d1-spec §6.1): five functions, summed, max 4.0

XML_TAG_REWARD = 0.125       # per well-placed tag (4 tags -> 0.5)
XML_TRAILING_PENALTY = 0.001  # per character after the closing answer tag
SOFT_FORMAT_REWARD = 0.5
STRICT_FORMAT_REWARD = 0.5
INT_REWARD = 0.5
GSM8K_CORRECT_REWARD = 2.0


def _after_last(text, sep, if_absent):
    # str.split(sep)[-1] without building the list: text after the last sep
    i = text.rfind(sep)
    return if_absent if i < 0 else text[i + len(sep):]


def xmlcount(completion, example=None, *, fixed=None):
    """Tag-count reward in (-inf, 0.5]: +0.125 for each of the four tags seen exactly once, minus
    0.001 per trailing character. d1 quirk (default): when "\\n</answer>\\n" is absent (the usual
    case: completions end exactly at </answer>), the third term's "tail" is the whole text, so long
    completions go negative; and ending exactly at "\\n</answer>" earns +0.001."""
    text, fixed = completion, _is_fixed(fixed)
    score = 0.0
    if text.count("<reasoning>\n") == 1:
        score += XML_TAG_REWARD
    if text.count("\n</reasoning>\n") == 1:
        score += XML_TAG_REWARD
    if text.count("\n<answer>\n") == 1:
        score += XML_TAG_REWARD
        # d1 measures text.split("\n</answer>\n")[-1], i.e. everything when the tag is absent
        tail = _after_last(text, "\n</answer>\n", "" if fixed else text)
        score -= XML_TRAILING_PENALTY * len(tail)
    if text.count("\n</answer>") == 1:
        score += XML_TAG_REWARD
        # the -1 forgives the newline expected after the tag; with none, d1 pays a +0.001 bonus
        excess = len(_after_last(text, "\n</answer>", text)) - 1
        score -= XML_TRAILING_PENALTY * (max(excess, 0) if fixed else excess)
    return score


# d1 checks re.match(r"<reasoning>.*?</reasoning>\s*<answer>.*?</answer>", text). With DOTALL that
# regex backtracks quadratically on e.g. "<reasoning></reasoning><answer>" x 50k, so we answer the
# same yes/no question with one forward scan. Without DOTALL "." stops at "\n" (d1's bug): the
# first .*? must stay on the first line, and "</answer>" must follow <answer> on the same line.
_REASONING_THEN_ANSWER = re.compile(r"</reasoning>\s*<answer>")


def _soft_format_match(text, dotall):
    if not text.startswith("<reasoning>"):
        return False
    first_nl = text.find("\n", len("<reasoning>"))
    last_start = len(text) if (dotall or first_nl < 0) else first_nl  # where </reasoning> may start
    close = newline = -1  # cached next "</answer>" / "\n" at or after q: keeps the scan linear
    for m in _REASONING_THEN_ANSWER.finditer(text, len("<reasoning>")):
        if m.start() > last_start:
            break
        q = m.end()  # the second .*? starts here
        if close < q:
            close = text.find("</answer>", q)
        if close < 0:
            return False  # no closing tag anywhere later: later candidates can't do better
        if dotall:
            return True
        if newline < q:
            newline = text.find("\n", q)
            newline = len(text) if newline < 0 else newline
        if close < newline:
            return True
    return False


def soft_format(completion, example=None, *, fixed=None):
    """0.5 if the text STARTS with <reasoning>...</reasoning> <answer>...</answer>, else 0.
    d1 bug (default): no DOTALL, so any newline inside the reasoning gives 0."""
    return SOFT_FORMAT_REWARD if _soft_format_match(completion, _is_fixed(fixed)) else 0.0


# d1 checks re.match(r"^<reasoning>\n.*?\n</reasoning>\n<answer>\n.*?\n</answer>\n$", text). All
# pieces are literals around two .*?, so: fixed head, fixed tail ("$" also matches before one
# final "\n"), and the middle literal somewhere in between. No DOTALL -> both .*? are newline-free.
_STRICT_HEAD, _STRICT_MID = "<reasoning>\n", "\n</reasoning>\n<answer>\n"
_STRICT_TAILS = ("\n</answer>\n", "\n</answer>\n\n")


def _strict_format_match(text, dotall):
    if not text.startswith(_STRICT_HEAD):
        return False
    for tail in _STRICT_TAILS:
        if not text.endswith(tail):
            continue
        lo, hi = len(_STRICT_HEAD), len(text) - len(tail)  # the regex's middle part is text[lo:hi]
        if dotall:
            if text.find(_STRICT_MID, lo, hi) >= 0:
                return True
            continue
        i = text.find("\n", lo, hi)  # the newline-free first .*? ends at the first newline
        if i >= 0 and text.startswith(_STRICT_MID, i, hi) and text.find("\n", i + len(_STRICT_MID), hi) < 0:
            return True
    return False


def strict_format(completion, example=None, *, fixed=None):
    """0.5 for exactly "<reasoning>\\n…\\n</reasoning>\\n<answer>\\n…\\n</answer>\\n", else 0.
    d1 bug (default): no DOTALL, so it needs one-line reasoning AND a trailing newline (≈ never)."""
    return STRICT_FORMAT_REWARD if _strict_format_match(completion, _is_fixed(fixed)) else 0.0


def extract_xml_answer(text):
    """Text after the LAST <answer>, cut at the next </answer>, stripped (whole text if no tag)."""
    # an unclosed "<answer>42" still yields "42": the model is not punished for a cut-off tail
    answer = _after_last(text, "<answer>", text)
    end = answer.find("</answer>")
    return (answer if end < 0 else answer[:end]).strip()


def int_answer(completion, example=None):
    """d1's "int" reward: 0.5 if the extracted answer is all digits (str.isdigit: "-3", "2.5" fail;
    note it also accepts non-ASCII digits such as "²" or "٣", as d1's does)."""
    return INT_REWARD if extract_xml_answer(completion).isdigit() else 0.0


def gsm8k_gold(example):
    # the row's answer may still be the full GSM8K solution; d1 keeps the text after "####"
    answer = str(example["answer"])
    return answer.split("####")[-1].strip()


# d1 grades GSM8K with no number parsing at all; its eval parser (d1-spec §8.3) is more lenient,
# which is why eval accuracy and training reward can disagree wildly on the same text.
def gsm8k_correctness(completion, example):
    """2.0 on an EXACT string match of the extracted answer with the gold: "\\boxed{18}", "$18"
    and "18.0" all score 0 (d1-spec §6.1; why d1's initial GSM8K reward is near zero)."""
    return GSM8K_CORRECT_REWARD if extract_xml_answer(completion) == gsm8k_gold(example) else 0.0

# -----------------------------------------------------------------------------
# MATH (d1-spec §6.2): Hendrycks-MATH answer normalisation, as used by d1's math500_utils

MATH_CORRECT_REWARD = 2.0
MATH_FORMAT_SCALE = 0.5        # format reward = 0.5 * (answer-tag part + boxed part)
MATH_ANSWER_TAG_SCORE = 1.0    # "<answer>" present
MATH_BOXED_SCORE, MATH_NOT_BOXED_SCORE = 1.0, 0.5
D1_BOXED_NEEDLE = "\boxed"     # NOT raw: "\b" is a backspace, so this is "\x08oxed" (d1's bug)
MAX_BOX_CHARS = 100_000        # ours: a \boxed{...} longer than this counts as unbalanced
_BRACE_RUN = re.compile(r"\{+|\}+")


def last_boxed_only_string(string):
    """The last "\\boxed{…}" (or "\\fbox{…}" when there is no \\boxed) with balanced braces.
    Special cases (d1's version): if "\\boxed " (with a space) occurs anywhere, return "\\boxed "
    + the text after its last occurrence up to the next "$"; None if the braces never close
    (or not within MAX_BOX_CHARS); the input itself if there is no box at all."""
    if "\\boxed " in string:
        rest = _after_last(string, "\\boxed ", "")
        return "\\boxed " + rest.split("$", 1)[0]
    idx = string.rfind("\\boxed")
    if idx < 0:
        idx = string.rfind("\\fbox")
    if idx < 0:
        return string
    # Walk the braces from there: the box ends at the first "}" that brings the count back to 0
    # (a "}" before any "{" sends the count negative, and it can still come back later). We step
    # over whole runs like "}}}}" at once, and give up after MAX_BOX_CHARS (ours, not d1's: a real
    # box is a few dozen characters) so "\boxed}" + "{}" * 10**6 can't cost a second.
    depth = 0
    for m in _BRACE_RUN.finditer(string, idx, idx + MAX_BOX_CHARS):
        run = m.end() - m.start()
        if m.group()[0] == "{":
            depth += run
        elif 0 < depth <= run:
            return string[idx:m.start() + depth]
        else:
            depth -= run
    return None


def remove_boxed(s):
    """"\\boxed{x}" -> "x", "\\boxed x" -> "x"; anything else (None, \\fbox{x}, plain text) raises
    ValueError, as the Hendrycks helper does with an assert; callers fall back on failure."""
    if s is not None and s.startswith("\\boxed "):
        return s[len("\\boxed "):]
    if s is not None and s.startswith("\\boxed{") and s.endswith("}"):
        return s[len("\\boxed{"):-1]
    raise ValueError(f"not a boxed answer: {s if s is None else s[:50]!r}")


def _fix_fracs(s):
    # "\frac12" -> "\frac{1}{2}", "\frac1{2}" -> "\frac{1}{2}" (only when the first arg lacks braces)
    parts = s.split("\\frac")
    out = [parts[0]]
    for part in parts[1:]:
        if part == "":
            raise ValueError("\\frac without argument")  # is_equiv then compares the raw strings
        if part[0] == "{":
            out.append(part)
            continue
        if len(part) < 2:
            return s  # "\frac" + one char: leave the whole string alone
        a, b, rest = part[0], part[1], part[2:]
        out.append("{" + a + "}" + (b + rest if b == "{" else "{" + b + "}" + rest))
    return "\\frac".join(out)


def _fix_a_slash_b(s):
    # "3/4" -> "\frac{3}{4}", but only for two canonical integers ("03/4", "3.0/4" stay as they are)
    if s.count("/") != 1:
        return s
    a, b = s.split("/")
    try:
        if str(int(a)) == a and str(int(b)) == b:
            return "\\frac{" + a + "}{" + b + "}"
    except ValueError:
        pass
    return s


def _fix_sqrt(s):
    # "\sqrt3" -> "\sqrt{3}"; a bare "\sqrt" at the very end is malformed (is_equiv then compares raw)
    parts = s.split("\\sqrt")
    for i in range(1, len(parts)):
        if parts[i] == "":
            raise ValueError("\\sqrt without argument")
        if parts[i][0] != "{":
            parts[i] = "{" + parts[i][0] + "}" + parts[i][1:]
    return "\\sqrt".join(parts)


def strip_string(string):
    """Hendrycks-MATH normalisation, in its order; may raise ValueError on malformed input."""
    # Pure text surgery, no algebra: two answers are "equal" only if they normalise to the same
    # string, so "1/2" == "0.5" == "\dfrac{1}{2}" but "1,000" != "1000" and "2x" != "x2".
    # The order is kept as is, quirks included: spaces go only after the sqrt fix, so "\sqrt 3"
    # becomes "\sqrt{}3" (and still equals another "\sqrt 3", but not "\sqrt{3}").
    for old, new in (("\n", ""), ("\\!", ""), ("\\\\", "\\"), ("tfrac", "frac"), ("dfrac", "frac"),
                     ("\\left", ""), ("\\right", ""), ("^{\\circ}", ""), ("^\\circ", ""), ("\\$", "")):
        string = string.replace(old, new)
    # units on the right: "5 \text{ cm}" -> "5 "; more than one "\text{ " is an error upstream
    if string.count("\\text{ ") > 1:
        raise ValueError("several \\text{ units")
    string = string.split("\\text{ ")[0]
    string = string.replace("\\%", "")
    string = string.replace(" .", " 0.").replace("{.", "{0.")  # ".5" -> "0.5" everywhere
    if string == "":
        return string
    if string[0] == ".":
        string = "0" + string
    if string.count("=") == 1 and len(string.split("=")[0]) <= 2:
        string = string.split("=")[1]  # "x = 5" -> " 5" (short left-hand side only)
    string = _fix_sqrt(string)
    string = string.replace(" ", "")
    string = _fix_fracs(string)
    if string == "0.5":  # the one decimal with a special case (0.25 vs \frac14 stays unequal)
        string = "\\frac{1}{2}"
    return _fix_a_slash_b(string)


def is_equiv(str1, str2):
    """Equal after strip_string; if normalisation fails, fall back to raw string equality."""
    if str1 is None or str2 is None:  # None = "no answer could be extracted"
        return str1 is None and str2 is None
    try:
        return strip_string(str1) == strip_string(str2)
    except ValueError:
        return str1 == str2


def _boxed_or_self(text):
    # d1: remove_boxed(last_boxed_only_string(text)); if that throws, the whole text
    try:
        return remove_boxed(last_boxed_only_string(text))
    except ValueError:
        return text


def math_gold(example):
    # MATH-500 rows carry the final answer; d1's train rows only a solution with a \boxed{} answer
    if example.get("answer") is not None:
        return str(example["answer"])
    return _boxed_or_self(str(example["solution"]))


def math_correctness(completion, example):
    """2.0 if the LAST box anywhere in the completion (not only in <answer>) is_equiv the gold."""
    # no box at all -> the whole completion is the guess, which only matches a bare answer
    return MATH_CORRECT_REWARD if is_equiv(_boxed_or_self(completion), math_gold(example)) else 0.0


def math_format(completion, example=None, *, fixed=None):
    """d1's "boxed_and_answer_tags_format": 0.5 * ((1 if "<answer>" in text else 0) + (1 if boxed
    else 0.5)). d1 bug (default): "boxed" means the text contains "\\x08oxed", so in practice it is
    0.75 with <answer>, else 0.25; fixed=True tests for a real "\\boxed" (values 0.25 .. 1.0)."""
    needle = "\\boxed" if _is_fixed(fixed) else D1_BOXED_NEEDLE
    tag = MATH_ANSWER_TAG_SCORE if "<answer>" in completion else 0.0
    boxed = MATH_BOXED_SCORE if needle in completion else MATH_NOT_BOXED_SCORE
    return MATH_FORMAT_SCALE * (tag + boxed)

# -----------------------------------------------------------------------------
# Countdown (d1-spec §6.3) and Sudoku (§6.4)

COUNTDOWN_CORRECT, COUNTDOWN_FORMAT, COUNTDOWN_NO_ANSWER = 1.0, 0.1, 0.0
COUNTDOWN_TOL = 1e-5
MAX_EQUATION_CHARS = 200   # ours: d1 has no limit; a real answer is ~15 characters
MAX_PAREN_DEPTH = 100      # ours: bounds the recursion (Python's parser stops at 200 levels)
MAX_LITERAL = 10**6        # ours: bigger literals are invalid (Countdown numbers are <= 100)
MAX_ABS_VALUE = 10**12     # ours: any intermediate value beyond this is invalid
_EQUATION_CHARS = re.compile(r"^[\d+\-*/().\s]+$")  # d1's whitelist, checked before evaluating
# one token per match: number | operator/paren | blanks | line break | any other char (= invalid)
_TOKEN = re.compile(r"(\d+\.\d*|\.\d+|\d+|[-+*/()])|([ \t\f]+)|([\n\r]+)|(.)", re.ASCII | re.DOTALL)


def last_tag_content(text, tag="answer"):
    """Content of the last match of re.findall(r"<tag>(.*?)</tag>", text, re.DOTALL), or None.
    A forward scan with the same non-overlapping semantics; findall itself is quadratic on
    "<answer>" x 100k with no closing tag."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    pos, last = 0, None
    while True:
        start = text.find(open_tag, pos)
        if start < 0:
            return last
        end = text.find(close_tag, start + len(open_tag))
        if end < 0:
            return last  # no later match can close either
        last, pos = text[start + len(open_tag):end], end + len(close_tag)


class _BadEquation(Exception):
    pass


def _tokenize(expr):
    # Python's tokenizer rules for this alphabet: blanks anywhere, line breaks only inside (),
    # ASCII digits only ("٣" or "\xa0" make eval raise a SyntaxError, so they are invalid here too)
    tokens, depth = [], 0
    for m in _TOKEN.finditer(expr):
        tok, _, newline, other = m.groups()
        if other is not None or (newline is not None and depth <= 0):
            raise _BadEquation(f"unexpected character {m.group()!r}")
        if tok is not None:  # blanks and allowed line breaks are dropped here
            depth += (tok == "(") - (tok == ")")
            tokens.append(tok)
    return tokens


def evaluate_equation(expr):
    """Exact value (a Fraction) of + - * / ( ) arithmetic on decimal numbers, or None if the text
    is not such an expression, is too large or divides by zero. Follows Python's grammar for this
    subset (what d1's eval sees): unary +/- chains, true division, "1." and ".5" are numbers,
    "01" is an error; "**", "//" and implicit multiplication "2(3)" are errors (d1: ** and // work)."""
    try:
        tokens = _tokenize(expr)
    except _BadEquation:
        return None
    pos = 0

    def take():  # next token, "" at the end
        nonlocal pos
        pos += 1
        return tokens[pos - 1] if pos <= len(tokens) else ""

    def peek():
        return tokens[pos] if pos < len(tokens) else ""

    def check(v):
        if abs(v) > MAX_ABS_VALUE:
            raise _BadEquation("value too large")
        return v

    def expression(level):  # expression := term (("+" | "-") term)*
        value = term(level)
        while peek() in ("+", "-"):
            op = take()
            rhs = term(level)
            value = check(value + rhs if op == "+" else value - rhs)
        return value

    def term(level):  # term := factor (("*" | "/") factor)*
        value = factor(level)
        while peek() in ("*", "/"):
            op = take()
            rhs = factor(level)  # "2**3" / "7//2": the second operator is no factor -> error
            if op == "/" and rhs == 0:
                raise _BadEquation("division by zero")
            value = check(value * rhs if op == "*" else value / rhs)
        return value

    def factor(level):  # factor := ("+" | "-")* (number | "(" expression ")")
        sign = 1
        while peek() in ("+", "-"):  # a loop, not recursion: "-----3" costs no stack
            sign = -sign if take() == "-" else sign
        tok = take()
        if tok == "(":
            if level >= MAX_PAREN_DEPTH:  # bounds the recursion, whatever the input
                raise _BadEquation("too deeply nested")
            value = expression(level + 1)
            if take() != ")":
                raise _BadEquation("unclosed parenthesis")
            return sign * value
        if tok[:1].isdigit() or tok[:1] == ".":
            if "." not in tok and tok[0] == "0" and tok.strip("0"):
                raise _BadEquation("leading zero")  # Python 3: "01" is a SyntaxError, "00" is 0
            value = Fraction(tok)  # exact: "2.5" -> 5/2, so no float rounding anywhere
            if value > MAX_LITERAL:
                raise _BadEquation("literal too large")
            return sign * value
        raise _BadEquation(f"unexpected token {tok!r}")

    try:
        value = expression(0)
    except _BadEquation:
        return None
    return value if pos == len(tokens) else None  # leftovers: "1 2", "(1)(2)", "1)", ...


def countdown_reward(completion, example):
    """0 without an <answer> tag; 1.0 if the last tagged equation uses exactly the given numbers
    (each once; "2.5" counts as 2 and 5) and evaluates to the target within 1e-5; else 0.1."""
    # The order of d1's checks only decides 0 vs 0.1: everything after "has an answer tag" that
    # goes wrong is the same 0.1 "format" score, so the cheap length check can come first.
    equation = last_tag_content(completion)
    if equation is None:
        return COUNTDOWN_NO_ANSWER
    equation = equation.strip()
    if len(equation) > MAX_EQUATION_CHARS:  # also keeps int() below away from 10k-digit numbers
        return COUNTDOWN_FORMAT
    # multiset of the integers written down (d1's \d+, so "2.5" is 2 and 5) == the given numbers
    if sorted(int(n) for n in re.findall(r"\d+", equation)) != sorted(int(n) for n in example["nums"]):
        return COUNTDOWN_FORMAT
    if not _EQUATION_CHARS.match(equation):
        return COUNTDOWN_FORMAT
    value = evaluate_equation(equation)
    if value is None:
        return COUNTDOWN_FORMAT  # d1: eval raised (syntax error, division by zero, ...)
    target = Fraction(str(example["target"]))  # int, "23" or 7.5 alike, compared exactly
    return COUNTDOWN_CORRECT if abs(value - target) < COUNTDOWN_TOL else COUNTDOWN_FORMAT


def _blank_cell_accuracy(guess, puzzle, solution):
    # fraction of the puzzle's blank cells ("0") where the guess has the solution's digit
    blanks = [i for i, c in enumerate(puzzle) if c == "0"]  # givens earn nothing: copying is free
    if not blanks:
        return 0.0  # d1: nothing to fill in scores 0, not 1
    return sum(i < len(guess) and guess[i] == solution[i] for i in blanks) / len(blanks)


def sudoku_reward(completion, example):
    """Fraction of blank cells right, in [0, 1]. The guess is the DIGITS of the last
    <answer>…</answer> (other characters dropped), right-padded with "0" / cut to the grid size."""
    answer = last_tag_content(completion)
    if answer is None:
        return 0.0
    digits = re.sub(r"\D+", "", answer)  # "4321 1243 ..." and "4321\n1243..." both work
    if not digits:
        return 0.0
    # pad with "0", which never equals a solution digit: a short answer just loses those cells
    n = len(example["puzzle"])
    return _blank_cell_accuracy(digits[:n].ljust(n, "0"), example["puzzle"], example["solution"])

# -----------------------------------------------------------------------------
# Toy task (ours): 4x4 Sudoku in a compact format, the completion IS the 16 solution digits


def toy_reward(completion, example):
    """Fraction of the puzzle's blank cells whose digit in the completion (its first 16 characters
    after leading whitespace; anything after is ignored) equals the solution's. In [0, 1]."""
    # no tags, no digit filtering: the tiny demo model must learn the exact output format too
    guess = completion.lstrip()[:len(example["puzzle"])]
    return _blank_cell_accuracy(guess, example["puzzle"], example["solution"])


def toy_solved(completion, example):
    """Accuracy for the toy task: every blank cell right (False for a puzzle without blanks)."""
    return toy_reward(completion, example) == 1.0

# -----------------------------------------------------------------------------
# Per-task reward lists and the total (each weight 1, as in d1's TRL config)

REWARDS = {
    "gsm8k": [xmlcount, soft_format, strict_format, int_answer, gsm8k_correctness],
    "math": [math_correctness, math_format],
    "countdown": [countdown_reward],
    "sudoku": [sudoku_reward],
    "toy": [toy_reward],
}
MAX_REWARD = {"gsm8k": 4.0, "math": 3.0, "countdown": 1.0, "sudoku": 1.0, "toy": 1.0}


def total_reward(task, completion, example):
    """(sum of the task's rewards, {function name: value}) for logging every component. Like TRL's
    nansum in d1, a component that raises is logged as NaN, and NaN/inf count as 0 in the sum;
    the functions above are written never to get there."""
    parts = {}  # insertion-ordered, so logs list the components in d1's order
    for fn in REWARDS[task]:
        try:
            value = float(fn(completion, example))
        except Exception as e:  # a bug, not a bad completion: warn (once per call site), don't crash
            warnings.warn(f"reward {fn.__name__} failed: {e!r}")
            value = math.nan
        parts[fn.__name__] = value
    return sum(v for v in parts.values() if math.isfinite(v)), parts
