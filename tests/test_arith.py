"""
Tests for arith.py: the Countdown arithmetic the reward (docs/d1.md §6.3) and d1's eval parser (docs/d1.md §8.3) share.
Python's own grammar is the reference: what eval() accepts for + - * / ( ) is a value here, what it
rejects (and "**", "//", which d1's prompt never allows) is None. Hostile inputs are in test_rewards.py.

Run:  .venv/bin/python -m pytest tests/test_arith.py -q
"""
from fractions import Fraction

import pytest

from taskdata.arith import evaluate_equation, reaches_target, uses_exactly


@pytest.mark.parametrize("expr, expected", [
    ("2*4-3", 5), ("-(-3)", 3), ("--3", 3), ("-+-3", 3), ("2*-3", -6), ("1.", 1), (".5+1", Fraction(3, 2)),
    ("00+1", 1), ("7/2", Fraction(7, 2)), (" ( 1 ) ", 1), ("\t1\f+2", 3),
    ("01", None), ("1..2", None), ("1 2", None), ("2(3)", None), ("(1)(2)", None), ("()", None),
    ("7//2", None), ("2**3", None), ("1/0", None), ("1/(2-2)", None), ("(1", None), ("1)", None),
    ("1\n+2", None), ("1\xa0+2", None), ("٣+1", None), ("", None), ("+", None),
    ("(" * 100 + "1" + ")" * 100, 1), ("(" * 101 + "1" + ")" * 101, None),   # MAX_PAREN_DEPTH = 100
    ("1000000*1000000", 10**12), ("1000000*1000000*2", None), ("1000001", None),
    ("-" * 100_000 + "1", 1),                                                # unary chains: no recursion
])
def test_evaluate_equation(expr, expected):
    assert evaluate_equation(expr) == expected


def test_uses_exactly_and_reaches_target():
    assert uses_exactly("44 + 19 + 35", [35, 44, 19]) and uses_exactly("2.5 * 4", [2, 5, 4])  # "2.5" is 2 and 5
    assert not uses_exactly("44 + 44", [44, 10]) and not uses_exactly("44+19+35 = 98", [44, 19, 35])
    assert not uses_exactly("1" * 5000, [1])  # Python refuses int() of a > 4300-digit run: invalid, no crash
    assert reaches_target(Fraction(15, 2), 7.5) and reaches_target(Fraction(23), "23")
    assert not reaches_target(Fraction(23) + Fraction(1, 10**4), 23) and not reaches_target(None, 23)
