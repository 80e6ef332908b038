"""
Countdown arithmetic without eval(): the exact value of a "+ - * / ( )" expression, and d1's check that
an expression uses exactly the given numbers. Shared by the Countdown reward (rewards.py, docs/d1.md §6.3)
and d1's Countdown eval parser (parsers.py, §8.3).

d1 evaluates the model's text with a restricted Python eval(). Ours is a tiny hand-written
recursive-descent parser over exact Fractions (no float rounding, model text is never executed), with
limits on nesting and size. It follows Python's grammar for this subset, so the two agree on
+ - * / ( ) arithmetic; they differ only on "**" and "//" (d1 computes them, we reject them; d1's
prompt allows only + - * /) and on values far beyond anything 3 numbers <= 100 can reach.

    from taskdata.arith import evaluate_equation, uses_exactly
    evaluate_equation("(44 + 19) + 35")            # Fraction(98, 1)
    uses_exactly("2.5 * 4", [2, 5, 4])             # True: d1 reads "2.5" as the integers 2 and 5
"""
import re
from fractions import Fraction

COUNTDOWN_TOL = 1e-5       # d1: |value - target| < 1e-5 counts as reaching the target (reward and eval)
MAX_PAREN_DEPTH = 100      # ours: bounds the recursion (Python's parser stops at 200 levels)
MAX_LITERAL = 10**6        # ours: bigger literals are invalid (Countdown numbers are <= 100)
MAX_ABS_VALUE = 10**12     # ours: any intermediate value beyond this is invalid
# one token per match: number | operator/paren | blanks | line break | any other char (= invalid)
_TOKEN = re.compile(r"(\d+\.\d*|\.\d+|\d+|[-+*/()])|([ \t\f]+)|([\n\r]+)|(.)", re.ASCII | re.DOTALL)
_INTEGERS = re.compile(r"\d+")  # d1's pattern for the numbers written in an expression


def uses_exactly(expr, nums):
    """d1's check that the integers written in expr (r"\\d+", so "2.5" is 2 and 5) are exactly the
    multiset nums: each given number used once, nothing else."""
    try:
        # sorted lists compare as multisets: every given number exactly once and no other integer anywhere
        # in the text; int() reads "07" as 7, as d1's does
        used = sorted(int(n) for n in _INTEGERS.findall(expr))
    except ValueError:  # a > 4300-digit run: Python refuses int(); d1's validator catches it -> invalid
        return False
    return used == sorted(int(n) for n in nums)


# raised anywhere inside the tokenizer or parser and caught once at the top: every failure is None
class _BadEquation(Exception):
    pass


def _tokenize(expr):
    # Python's tokenizer rules for this alphabet: blanks anywhere, line breaks only inside (),
    # ASCII digits only ("٣" or "\xa0" make eval raise a SyntaxError, so they are invalid here too)
    tokens, depth = [], 0
    for m in _TOKEN.finditer(expr):
        tok, _, newline, other = m.groups()
        # a line break outside parentheses would end Python's expression, so eval raises: invalid here too
        if other is not None or (newline is not None and depth <= 0):
            raise _BadEquation(f"unexpected character {m.group()!r}")
        if tok is not None:  # blanks and allowed line breaks are dropped here
            # depth only tells whether a line break is inside parentheses; the parser checks the balance
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
    # recursive descent over the token list with one cursor; `level` counts the open parentheses
    pos = 0

    def take():  # next token, "" at the end
        nonlocal pos
        pos += 1
        return tokens[pos - 1] if pos <= len(tokens) else ""

    def peek():
        # the next token without consuming it; "" at the end matches no operator, so every loop stops there
        return tokens[pos] if pos < len(tokens) else ""

    def check(v):
        # every intermediate result is bounded, so exact Fractions cannot grow to huge numerators and
        # denominators on hostile input
        if abs(v) > MAX_ABS_VALUE:
            raise _BadEquation("value too large")
        return v

    def expression(level):  # expression := term (("+" | "-") term)*
        # left-associative as in Python: 1 - 2 - 3 is (1 - 2) - 3
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
            # d1's eval raises ZeroDivisionError here, an invalid expression for its reward and its eval alike
            if op == "/" and rhs == 0:
                raise _BadEquation("division by zero")
            # "/" is true division, as Python 3's: exact with Fractions ("7 / 2" is 7/2, not 3)
            value = check(value * rhs if op == "*" else value / rhs)
        return value

    def factor(level):  # factor := ("+" | "-")* (number | "(" expression ")")
        # unary signs, any number of them: "-3", "+-3", "--3" are all valid Python
        sign = 1
        while peek() in ("+", "-"):  # a loop, not recursion: "-----3" costs no stack
            sign = -sign if take() == "-" else sign
        tok = take()
        # a parenthesized expression: one level deeper, and it must be closed
        if tok == "(":
            if level >= MAX_PAREN_DEPTH:  # bounds the recursion, whatever the input
                raise _BadEquation("too deeply nested")
            value = expression(level + 1)
            if take() != ")":
                raise _BadEquation("unclosed parenthesis")
            # a sign before parentheses applies to their whole value: -(2 + 3) is -5
            return sign * value
        # a number: _TOKEN only produces well-formed decimals ("1.", ".5", "12")
        if tok[:1].isdigit() or tok[:1] == ".":
            if "." not in tok and tok[0] == "0" and tok.strip("0"):
                raise _BadEquation("leading zero")  # Python 3: "01" is a SyntaxError, "00" is 0
            value = Fraction(tok)  # exact: "2.5" -> 5/2, so no float rounding anywhere
            if value > MAX_LITERAL:
                raise _BadEquation("literal too large")
            return sign * value
        raise _BadEquation(f"unexpected token {tok!r}")

    try:
        # any syntax or limit error anywhere means "not an expression" (None), as an exception does in d1
        value = expression(0)
    except _BadEquation:
        return None
    return value if pos == len(tokens) else None  # leftovers: "1 2", "(1)(2)", "1)", ...


def reaches_target(value, target):
    """d1's value check: value (a Fraction, or None for an invalid expression) is within COUNTDOWN_TOL
    of target (int, "23" or 7.5 alike, compared exactly)."""
    # str() first, so an int, a string "23" and a float 7.5 all become exact Fractions
    return value is not None and abs(value - Fraction(str(target))) < COUNTDOWN_TOL
