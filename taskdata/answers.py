"""
Reading an answer out of a generation: the pieces that d1's training rewards (rewards.py, docs/d1.md §6)
and d1's eval parsers (parsers.py, §8.3) share, so both score the same text the same way.

  RL format       soft_format_match / strict_format_match: d1's two format regexes, as linear scans
  tag contents    last_tag_content / first_tag_content (<answer>...</answer>), extract_xml_answer (docs/d1.md §6.1)
  \\boxed{}        last_boxed_only_string, remove_boxed and the variants boxed_or_self / last_boxed
  MATH equality   strip_string, is_equiv: Hendrycks-MATH normalisation as in d1's math500_utils (docs/d1.md §6.2)
  numbers         find_numbers (d1's eval number pattern), float_or_none (Python's float(), never raising)

Every function is pure and never executes model text. d1's regexes that can backtrack quadratically on
hostile text are replaced by linear scans with the same semantics (tests/test_answers.py checks them
against `re` on random strings), and a \\boxed{} longer than MAX_BOX_CHARS counts as unbalanced. None of
this changes a result on realistic text.

    from taskdata.answers import is_equiv, last_boxed_only_string, remove_boxed
    is_equiv(remove_boxed(last_boxed_only_string(r"so \\boxed{\\dfrac12}")), "0.5")  # True
"""
import re

MAX_BOX_CHARS = 100_000  # ours: a \boxed{...} longer than this counts as unbalanced
_BRACE_RUN = re.compile(r"\{+|\}+")
_NUMBER = re.compile(r"-?\d+\.?\d*")  # d1's number pattern: "1,000" -> "1", "3.5.1" -> "3.5"


def after_last(text, sep, if_absent):
    """The text after the LAST sep (if_absent when there is none). Equals str.split(sep)[-1] for any sep
    that cannot overlap itself ("<answer>", "\\boxed "); for one that can, such as "\\n</answer>\\n",
    str.split's left-to-right scan may skip the last occurrence (see rewards.xmlcount)."""
    i = text.rfind(sep)
    return if_absent if i < 0 else text[i + len(sep):]

# -----------------------------------------------------------------------------
# d1's RL format (rewards.soft_format, strict_format; docs/d1.md §6.1)

# d1 checks re.match(r"<reasoning>.*?</reasoning>\s*<answer>.*?</answer>", text). With DOTALL that
# regex backtracks quadratically on e.g. "<reasoning></reasoning><answer>" x 50k, so we answer the
# same yes/no question with one forward scan. Without DOTALL "." stops at "\n" (d1's bug): the
# first .*? must stay on the first line, and "</answer>" must follow <answer> on the same line.
_REASONING_THEN_ANSWER = re.compile(r"</reasoning>\s*<answer>")


def soft_format_match(text, dotall):
    """Whether re.match(r"<reasoning>.*?</reasoning>\\s*<answer>.*?</answer>", text) matches
    (with re.DOTALL when `dotall`): rewards.soft_format's question, in one forward scan."""
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


# d1 checks re.match(r"^<reasoning>\n.*?\n</reasoning>\n<answer>\n.*?\n</answer>\n$", text). All
# pieces are literals around two .*?, so: fixed head, fixed tail ("$" also matches before one
# final "\n"), and the middle literal somewhere in between. No DOTALL -> both .*? are newline-free.
_STRICT_HEAD = "<reasoning>\n"
_STRICT_MID = "\n</reasoning>\n<answer>\n"
_STRICT_TAILS = ("\n</answer>\n", "\n</answer>\n\n")


def strict_format_match(text, dotall):
    """Whether re.match(r"^<reasoning>\\n.*?\\n</reasoning>\\n<answer>\\n.*?\\n</answer>\\n$",
    text) matches (with re.DOTALL when `dotall`): rewards.strict_format's question, in one scan."""
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
        if (i >= 0 and text.startswith(_STRICT_MID, i, hi)
                and text.find("\n", i + len(_STRICT_MID), hi) < 0):
            return True
    return False

# -----------------------------------------------------------------------------
# Tag contents


def last_tag_content(text, tag="answer"):
    """Content of the last match of re.findall(r"<tag>(.*?)</tag>", text, re.DOTALL), or None.
    A forward scan with the same non-overlapping semantics; findall itself is quadratic on
    "<answer>" x 100k with no closing tag. The Countdown and Sudoku rewards read this (docs/d1.md §6.3, §6.4)."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    pos, last = 0, None
    while True:
        # each search resumes after the previous closing tag, like findall's non-overlapping matches
        start = text.find(open_tag, pos)
        if start < 0:
            return last
        end = text.find(close_tag, start + len(open_tag))
        if end < 0:
            return last  # no later match can close either
        last, pos = text[start + len(open_tag):end], end + len(close_tag)


def first_tag_content(text, tag="answer"):
    """Content of the FIRST re.search(r"<tag>(.*?)</tag>", text, re.DOTALL), or None (not stripped).
    The mirror of last_tag_content, as a linear scan. d1's eval parsers fall back to this (docs/d1.md §8.3)."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    start = text.find(open_tag)
    if start < 0:
        return None
    # the first opening tag is the match whenever any closing tag follows it; if none does, no later
    # opening tag can match either
    end = text.find(close_tag, start + len(open_tag))
    return None if end < 0 else text[start + len(open_tag):end]


def extract_xml_answer(text):
    """Text after the LAST <answer>, cut at the next </answer>, stripped (whole text if no tag).
    d1's GSM8K rewards read this (docs/d1.md §6.1)."""
    # an unclosed "<answer>42" still yields "42": the model is not punished for a cut-off tail
    answer = after_last(text, "<answer>", text)
    # d1: text.split("<answer>")[-1].split("</answer>")[0].strip()
    end = answer.find("</answer>")
    return (answer if end < 0 else answer[:end]).strip()

# -----------------------------------------------------------------------------
# \boxed{} extraction (the Hendrycks-MATH helpers in d1's version)


def last_boxed_only_string(string):
    """The last "\\boxed{…}" (or "\\fbox{…}" when there is no \\boxed) with balanced braces.
    Special cases (d1's version): if "\\boxed " (with a space) occurs anywhere, return "\\boxed "
    + the text after its last occurrence up to the next "$"; None if the braces never close
    (or not within MAX_BOX_CHARS); the input itself if there is no box at all."""
    # "\boxed 5" (a space, no brace): d1's special case, checked before any brace box
    if "\\boxed " in string:
        rest = after_last(string, "\\boxed ", "")
        return "\\boxed " + rest.split("$", 1)[0]
    # the LAST \boxed; \fbox only when there is no \boxed at all
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
        # a run of "{" opens; a run of "}" at least as long as a positive count ends the box at its
        # (depth)-th brace; a shorter run, or any run while the count is <= 0, lowers the count
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
    # the outer wrapper only: inner braces belong to the content ("\boxed{\frac{1}{2}}" -> "\frac{1}{2}")
    if s is not None and s.startswith("\\boxed{") and s.endswith("}"):
        return s[len("\\boxed{"):-1]
    # one exception type for every failure, so callers can fall back with a single except
    raise ValueError(f"not a boxed answer: {s if s is None else s[:50]!r}")


def boxed_or_self(text):
    """The MATH reward's reading (docs/d1.md §6.2): the content of the last box, or the whole text when there is
    no box or it is unbalanced (d1: remove_boxed(last_boxed_only_string(text)); if that throws, the text)."""
    try:
        return remove_boxed(last_boxed_only_string(text))
    except ValueError:
        return text


def last_boxed(text):
    """Content of the last \\boxed{...} in text, or None if there is none or it is unbalanced. The
    loaders read gold answers from MATH solutions with it, so gold answers and predictions agree."""
    box = last_boxed_only_string(text) if "\\boxed" in text else None  # d1 returns the text itself if no box
    try:
        return remove_boxed(box) if box else None
    except ValueError:  # not a \boxed{...} form
        return None

# -----------------------------------------------------------------------------
# MATH answer equality: Hendrycks-MATH normalisation, as used by d1's math500_utils (docs/d1.md §6.2, §8.3)


def _fix_fracs(s):
    # "\frac12" -> "\frac{1}{2}", "\frac1{2}" -> "\frac{1}{2}" (only when the first arg lacks braces)
    parts = s.split("\\frac")
    out = [parts[0]]
    for part in parts[1:]:
        if part == "":
            raise ValueError("\\frac without argument")  # is_equiv then compares the raw strings
        # already braced, "\frac{a}...": left as written
        if part[0] == "{":
            out.append(part)
            continue
        if len(part) < 2:
            return s  # "\frac" + one char: leave the whole string alone
        # the two characters after "\frac" are the two arguments; a "{" as the second starts a braced one
        a, b, rest = part[0], part[1], part[2:]
        out.append("{" + a + "}" + (b + rest if b == "{" else "{" + b + "}" + rest))
    return "\\frac".join(out)


def _fix_a_slash_b(s, fixed=False):
    # "3/4" -> "\frac{3}{4}", but only for two canonical integers ("03/4", "+3/4" stay as they are)
    if s.count("/") != 1:
        return s
    a, b = s.split("/")
    try:
        a_int, b_int = int(a), int(b)
    except ValueError:
        # d1 quirk (docs/d1.md §6.2 lists the "a/b" step; the raise is in d1's fix_a_slash_b @ 837888f, in
        # both its reward and its eval copy): it catches only the AssertionError of its canonical check,
        # not int()'s ValueError, so a side that is no integer ("x/y", "3.0/4", "\pi/2", "/4") makes
        # strip_string raise and is_equiv compare the RAW strings: "x / y" != "x/y". We reproduce it:
        # it decides rewards and d1's MATH500 accuracy. fixed=True leaves the string as it is instead.
        if fixed:
            return s
        raise
    # canonical integers only: str(int(a)) == a rejects "03", "+3" and "1_0"
    if str(a_int) == a and str(b_int) == b:
        return "\\frac{" + a + "}{" + b + "}"
    return s


def _fix_sqrt(s):
    # "\sqrt3" -> "\sqrt{3}"; a bare "\sqrt" at the very end is malformed (is_equiv then compares raw)
    parts = s.split("\\sqrt")
    # only ONE character becomes the argument, as in the Hendrycks code: "\sqrt12" -> "\sqrt{1}2"
    for i in range(1, len(parts)):
        if parts[i] == "":
            raise ValueError("\\sqrt without argument")
        if parts[i][0] != "{":
            parts[i] = "{" + parts[i][0] + "}" + parts[i][1:]
    return "\\sqrt".join(parts)


def strip_string(string, fixed=False):
    """Hendrycks-MATH normalisation, in its order; may raise ValueError on malformed input, and (d1's
    quirk, kept unless fixed=True) on an "a/b" whose side is not an integer, see _fix_a_slash_b."""
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
    return _fix_a_slash_b(string, fixed)


def is_equiv(str1, str2, fixed=False):
    """Equal after strip_string; if normalisation fails, fall back to raw string equality. fixed=True:
    an "a/b" with a non-integer side is compared normalised, not raw (d1's quirk, see _fix_a_slash_b)."""
    if str1 is None or str2 is None:  # None = "no answer could be extracted"
        return str1 is None and str2 is None
    try:
        # a malformed answer (a bare "\frac", several units) still equals an identical raw string
        return strip_string(str1, fixed) == strip_string(str2, fixed)
    except ValueError:
        return str1 == str2

# -----------------------------------------------------------------------------
# Numbers (d1's GSM8K eval parser, §8.3; the GSM8K reward compares exact strings instead, §6.1)


def find_numbers(text):
    """Every number d1's eval pattern r"-?\\d+\\.?\\d*" finds, as strings, in order."""
    # no thousands separators and no exponents: "1,000" gives "1" and "000", "1e3" gives "1" and "3"
    return _NUMBER.findall(text)


def float_or_none(text):
    """Python's float() exactly as d1 calls it, None where it raises."""
    # " 18 ", "1e3", "1_000", "nan" and "inf" all parse
    try:
        return float(text)
    except ValueError:
        return None
