"""
Tests for answers.py: reading an answer out of a generation, shared by the training rewards and d1's eval
parsers. Table-driven: <answer> tags, \\boxed{} extraction, Hendrycks-MATH normalisation (docs/d1.md §6.2),
numbers; the linear tag scanners against Python's `re` running d1's patterns (docs/d1.md §6), and is_equiv (d1's
default and fixed=True) against properties written from docs/d1.md §6.2, on random strings.
(first_tag_content is checked against d1's re.search in tests/test_parsers.py.)

Run:  .venv/bin/python -m pytest tests/test_answers.py -q
"""
import random
import re

import pytest

from conftest import random_texts
from taskdata import answers
from taskdata.answers import (
    after_last,
    boxed_or_self,
    extract_xml_answer,
    find_numbers,
    float_or_none,
    is_equiv,
    last_boxed,
    last_boxed_only_string,
    last_tag_content,
    remove_boxed,
    strip_string,
)

# -----------------------------------------------------------------------------
# tags


@pytest.mark.parametrize("text, expected", [
    ("<answer>\n 42 \n</answer>", "42"),
    ("<answer>1</answer> <answer>2</answer>", "2"),   # the LAST tag
    ("<answer>a</answer>b</answer>", "a"),             # cut at the first closing tag after it
    ("<answer>5", "5"),                                # unclosed: everything after
    ("no tags 7 ", "no tags 7"),                       # no tag: the whole text
])
def test_extract_xml_answer(text, expected):
    assert extract_xml_answer(text) == expected


def test_tag_scanners_match_d1_regexes():
    for text in random_texts(20_000, seed=1):
        found = re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)
        assert last_tag_content(text) == (found[-1] if found else None), text
        assert extract_xml_answer(text) == text.split("<answer>")[-1].split("</answer>")[0].strip()

# -----------------------------------------------------------------------------
# \boxed{}


@pytest.mark.parametrize("text, expected", [
    (r"so \boxed{5}.", r"\boxed{5}"),
    (r"\boxed{1} then \boxed{\frac{1}{2}}", r"\boxed{\frac{1}{2}}"),    # the last box
    (r"\boxed{\boxed{3}}", r"\boxed{3}"),                               # nested: the inner one is last
    (r"\boxed 5$ and later \boxed{6}", r"\boxed 5"),                    # "\boxed " wins, up to "$"
    (r"\fbox{7}", r"\fbox{7}"),
    (r"\boxed{1", None),                                                # unbalanced
    (r"\boxed{\fbox{7}", None),
    ("no box at all", "no box at all"),                                 # no box: the input itself
])
def test_last_boxed_only_string(text, expected):
    assert last_boxed_only_string(text) == expected


def test_last_boxed_gives_up_on_giant_boxes():
    inner = "x" * (answers.MAX_BOX_CHARS - len(r"\boxed{}"))
    assert last_boxed_only_string(r"\boxed{" + inner + "}") == r"\boxed{" + inner + "}"
    assert last_boxed_only_string(r"\boxed{" + inner + "x}") is None  # ours: one character too long


def test_remove_boxed():
    assert remove_boxed(r"\boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert remove_boxed(r"\boxed 5") == "5"
    for bad in (None, r"\fbox{5}", "5", r"\boxed{5"):
        with pytest.raises(ValueError):
            remove_boxed(bad)


@pytest.mark.parametrize("text, or_self, content", [
    (r"so \boxed{\frac{1}{2}}.", r"\frac{1}{2}", r"\frac{1}{2}"),
    ("no box at all", "no box at all", None),       # the reward guesses the text; a gold needs a box
    (r"\boxed{1", r"\boxed{1", None),               # unbalanced
    (r"\fbox{7}", r"\fbox{7}", None),               # \fbox is found but never unboxed
    (r"\boxed 5$", "5", "5"),
])
def test_boxed_variants(text, or_self, content):
    # boxed_or_self: the MATH reward's reading; last_boxed: the loaders' reading of a gold solution
    assert boxed_or_self(text) == or_self
    assert last_boxed(text) == content

# -----------------------------------------------------------------------------
# MATH normalisation


@pytest.mark.parametrize("raw, expected", [
    (r"\left( 3, \frac{\pi}{2} \right)", r"(3,\frac{\pi}{2})"),
    (r"\dfrac{1}{2}", r"\frac{1}{2}"), (r"\tfrac12", r"\frac{1}{2}"), (r"\frac1{2}", r"\frac{1}{2}"),
    ("0.5", r"\frac{1}{2}"), (".5", r"\frac{1}{2}"), ("1/2", r"\frac{1}{2}"), ("03/4", "03/4"),
    ("x = 5", "5"), ("xyz = 5", "xyz=5"),                        # only a short left-hand side goes
    (r"90^\circ", "90"), (r"90^{\circ}", "90"), (r"\$5", "5"), (r"50\%", "50"),
    (r"10 \text{ cm}", "10"), (r"\sqrt3", r"\sqrt{3}"), (r"a \!b", "ab"), ("1,000", "1,000"),
    (r"\sqrt 3", r"\sqrt{}3"),                                  # quirk: spaces go after the sqrt fix
])
def test_strip_string(raw, expected):
    assert strip_string(raw) == expected


@pytest.mark.parametrize("a, b, expected", [
    ("0.5", r"\frac{1}{2}", True), (r"\left(1,2\right)", "(1,2)", True), ("x = 5", "5", True),
    (r"\dfrac{3}{4}", "3/4", True), ("1,000", "1000", False), (None, None, True), (None, "1", False),
    (r"\sqrt", r"\sqrt", True), (r"\sqrt", r"\sqrt ", False),      # strip fails -> raw comparison
    (r"5 \text{ a}\text{ b}", "5", False),
])
def test_is_equiv(a, b, expected):
    assert is_equiv(a, b) is expected


@pytest.mark.parametrize("a, b", [
    (r"x / y", "x/y"), (r"\pi / 2", r"\pi/2"), ("3.0 / 4", "3.0/4"), ("a / 4", "a/4"), (" / 4", "/4"),
])
def test_slash_with_non_integer_side_is_compared_raw(a, b):
    """d1's fix_a_slash_b lets int()'s ValueError escape (docs/d1.md §6.2; the raise is in d1's code): the
    normaliser raises and is_equiv compares the raw strings. fixed=True compares the normalised ones."""
    assert strip_string(a, fixed=True) == strip_string(b, fixed=True) == b.replace(" ", "")
    with pytest.raises(ValueError):
        strip_string(a)
    assert is_equiv(a, b) is False and is_equiv(a, b, fixed=True) is True
    assert is_equiv(b, b) is True  # raw equality still holds


def test_slash_with_integer_sides_never_raises():
    # int() reads both sides: canonical ones become \frac, the rest ("03", "+3") stay as written
    for fixed in (False, True):
        assert strip_string("3 / 4", fixed) == r"\frac{3}{4}"
        assert strip_string("03/4", fixed) == "03/4" and strip_string("+3/4", fixed) == "+3/4"


MATH_PIECES = ["/", "x", "3", "4", "0", ".", " ", "-", "+", "=", "{", "}", "\\frac", "\\sqrt", "\\pi",
               "\\text{ ", "\\%", "\\!", "0.5", "\\left", "^\\circ", "\n"]


def slash_side_not_int(s):
    """One "/" with a side int() can't read: where d1's normaliser raises (docs/d1.md §6.2, answers.py)."""
    if s.count("/") != 1:
        return False
    left, right = s.split("/")
    try:
        int(left), int(right)
    except ValueError:
        return True
    return False


def test_is_equiv_slash_quirk_on_random_strings():
    # Properties, written from docs/d1.md §6.2 and answers._fix_a_slash_b's comment (n(.) = strip_string(., fixed=True)):
    #  - fixed=True compares n(a) == n(b); a string n() can't normalise is compared raw in both modes;
    #  - the default compares RAW a == b whenever n(a) or n(b) is an "a/b" with a side that is no integer,
    #    and n(a) == n(b) everywhere else (the quirk is the only difference).
    # Would fail for a default that caught int()'s ValueError (then "x / y" == "x/y"): `raw` counts the
    # pairs where it matters.
    rng = random.Random(0)
    pieces = lambda: "".join(rng.choice(MATH_PIECES) for _ in range(rng.randint(0, 6)))
    raw = malformed = 0
    for _ in range(20_000):
        a = pieces()
        b = a.replace(" ", "") if rng.random() < 0.5 else pieces()  # often equal up to spaces
        try:
            na, nb = strip_string(a, fixed=True), strip_string(b, fixed=True)
        except ValueError:
            assert is_equiv(a, b) is is_equiv(a, b, fixed=True) is (a == b), (a, b)
            malformed += 1
            continue
        assert is_equiv(a, b, fixed=True) is (na == nb), (a, b)
        if slash_side_not_int(na) or slash_side_not_int(nb):
            assert is_equiv(a, b) is (a == b), (a, b)
            raw += (na == nb) != (a == b)
        else:
            assert is_equiv(a, b) is (na == nb), (a, b)
    assert raw > 50 and malformed > 100, (raw, malformed)

# -----------------------------------------------------------------------------
# numbers and small helpers


def test_numbers_and_after_last():
    assert find_numbers("1,000 or -3.5.1 and 7.") == ["1", "000", "-3.5", "1", "7."]  # d1's pattern, quirks too
    assert [float_or_none(t) for t in (" 18 ", "1e3", "1_000", "$18", "")] == [18.0, 1000.0, 1000.0, None, None]
    assert after_last("a|b|c", "|", None) == "c" and after_last("abc", "|", "none") == "none"
    # a separator that overlaps itself: after the LAST one, where str.split's left-to-right scan skips it
    twice = "\n</answer>\n</answer>\n"
    assert after_last(twice, "\n</answer>\n", None) == "" and twice.split("\n</answer>\n")[-1] == "</answer>\n"
