"""
Asserts that a program cannot fake: the verdict of a unit test's comparison comes from code the program
does not control, on values the program cannot disguise.

A plain `assert add(1, 2) == 3` asks the returned object whether it equals 3, and an object can answer
anything: a class whose __eq__ always says True passes every equality assert of HumanEval, MBPP and
KodCode while computing nothing (so can a subclass of int, a spoofed __class__, a metaclass, or a patched
builtin). RL finds such hacks. Here each covered assert of a test is rewritten, before the program runs,
into `yield (kind, op, *operands)`: the test's own code computes the operands in the program's namespace,
as before, and hands them to check() below, which

  1. accepts only plain values: objects whose type IS (identity, not isinstance, which a class can fake)
     one of the builtin scalars (None, bool, int, float, complex, str, bytes) or containers (list, tuple,
     dict, set, frozenset) of plain values. Builtin types cannot be patched, and type() reads an object's
     real type, whatever its __class__ says;
  2. only then compares them, with the operator written in this file: on plain values every __eq__,
     __lt__, __contains__, __hash__ and __bool__ that runs is a builtin's.

Covered forms (one operator; operands without comparisons, boolean operators or conditional expressions
of their own, whose truthiness the program's objects would decide):
  assert a == b / a != b / a < b / a <= b / a > b / a >= b / a in b / a not in b
  assert a is None / a is not None (or True / False)      assert not a      assert a (a call, a name, ...)
  assert abs(a - b) < tol (or <=)                          assert math.isclose(a, b, rel_tol=..., abs_tol=...)
  assert a == pytest.approx(b, rel=..., abs=...) (or !=: KodCode's tests)
abs, math.isclose and pytest.approx's rule are the ones here, not the names the program could rebind. Every other
assert runs as written and is counted as not covered (`covered` per test), so each benchmark's share of
strictly checked tests is known (python -m tools.strict_check).

What is rewritten (sandbox/strict_rewrite.py, in the trainer's process): the asserts at the top level of
each test snippet (run as the body of a generator function whose `global` line keeps the snippet's names
in the program's namespace, as before), and those in the program's own top-level test functions that a
test snippet calls as `name()` (KodCode's pytest functions after d1's split). Nested functions and
classes keep their asserts as written.

Honest programs score as before whenever their values are plain: that is the comparison the assert made.
The standard library's Counter, OrderedDict and defaultdict count as the dicts they hold (VETTED_DICTS),
and re's match and pattern objects as scalars. A value of any other type (a namedtuple, a dataclass, a
deque) fails a covered assert; the benchmarks' reference solutions measure what that costs
(docs/code-task.md).

This file is standard library only. sandbox/run.py hands it, compiled, to the runner (sandbox/runner.py)
with the rewritten code, and the runner executes it into a namespace of its own BEFORE the program runs,
so the names below (the builtins captured as _type, _abs, ...) are bound before the program can patch
anything. Where the line lies (a program that reaches into
the runner's frames, gc or memory) is in docs/code-task.md.
"""
import collections
import math
import re

# bound now, before any program runs: check() never looks a builtin up at call time
_type, _len, _abs, _isclose, _dict_keys, _dict_values = type, len, abs, math.isclose, dict.keys, dict.values
all, zip, max, float = all, zip, max, float  # the builtins approx_equal calls, bound in this namespace
_dict_items = dict.items
# the standard library's dict subclasses that honest solutions return (MBPP 40 and 88: a Counter), captured
# now: a value of exactly one of these classes is compared as the plain dict of its items, read by dict's
# own C code, so methods the program may have patched onto the class (Counter.__eq__) are never called
VETTED_DICTS = (collections.Counter, collections.OrderedDict, collections.defaultdict)
_Counter, _OrderedDict, _defaultdict = VETTED_DICTS
_NoneType, _bool, _int, _float, _complex, _str, _bytes = type(None), bool, int, float, complex, str, bytes
_list, _tuple, _dict, _set, _frozenset = list, tuple, dict, set, frozenset
# builtin iterables whose elements are then checked in turn: range, and a dict's views (C-level, over the
# dict's own storage whatever class the dict is)
_range, _keys, _values, _items = range, type({}.keys()), type({}.values()), type({}.items())
# immutable C types honest solutions return for a truth test (MBPP+ 737, 787, 794: `assert f(s)` on a
# re.search result): scalars here (a match is always true, equal only to itself)
_Match, _Pattern = re.Match, re.Pattern
MAX_NODES = 1_000_000  # values with more nodes (or a cycle) are not plain: the per-test timer is the other bound

# the one-operator comparisons a covered assert may make, by the operator's AST class name
COMPARE_OPS = {
    "Eq": lambda a, b: a == b, "NotEq": lambda a, b: a != b, "Lt": lambda a, b: a < b,
    "LtE": lambda a, b: a <= b, "Gt": lambda a, b: a > b, "GtE": lambda a, b: a >= b,
    "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b,
    "Is": lambda a, b: a is b, "IsNot": lambda a, b: a is not b,
}


def is_plain(x):
    """1 if x is a builtin scalar or a builtin container of them, by exact type, all the way down; 2 if
    so once the VETTED_DICTS inside are read as dicts (as_plain); 0 otherwise."""
    stack, n, vetted = [x], 0, False
    while stack:
        v = stack.pop()
        n += 1
        if n > MAX_NODES:
            return False
        t = _type(v)
        # `is`, never `in` a set of types: a metaclass could answer a hash and an equality for its class
        if t is _NoneType or t is _bool or t is _int or t is _float or t is _str or t is _complex or t is _bytes \
                or t is _Match or t is _Pattern:
            continue
        if t is _list or t is _tuple or t is _set or t is _frozenset or t is _range or t is _keys or \
                t is _values or t is _items:
            stack.extend(v)  # the builtin's own iteration: no code of the program runs
        elif t is _dict or t is _Counter or t is _OrderedDict or t is _defaultdict:
            vetted = vetted or t is not _dict
            stack.extend(_dict_keys(v))  # dict's own views, whatever the class says its keys are
            stack.extend(_dict_values(v))
        else:
            return 0
    return 2 if vetted else 1


def as_plain(v):
    """A value is_plain() gave 2 with every vetted dict read as the plain dict of its items (a
    Counter compares with a dict as that dict: what the plain assert's comparison comes to)."""
    t = _type(v)
    if t is _dict or t is _Counter or t is _OrderedDict or t is _defaultdict:
        return {as_plain(k): as_plain(w) for k, w in _dict_items(v)}
    if t is _list:
        return [as_plain(e) for e in v]
    if t is _tuple:
        return _tuple([as_plain(e) for e in v])
    return v  # scalars; sets, frozensets, ranges and views hold only hashable, hence no dict, values


def check(item):
    """One covered assertion, yielded as (kind, op, *operands) -> None if it holds, else why not."""
    kind, op, operands = item[0], item[1], item[2:]
    if kind == "isclose" or kind == "approx":  # (a, b, {keyword: value}, the test's function): keywords plain too
        operands = (operands[0], operands[1], *_dict_values(operands[2]))
    kinds = [is_plain(v) for v in operands]
    if 0 in kinds:
        return "strict: a value is not a plain builtin"
    if 2 in kinds:  # a Counter or OrderedDict somewhere: compare the plain dicts of their items
        if kind == "isclose" or kind == "approx":
            return f"strict: {kind} of a Counter or OrderedDict"
        operands = [as_plain(v) for v in operands]
    if kind == "cmp":
        ok = COMPARE_OPS[op](operands[0], operands[1])
    elif kind == "not":
        ok = not operands[0]
    elif kind == "truth":
        ok = not not operands[0]
    elif kind == "absdiff":
        ok = COMPARE_OPS[op](_abs(operands[0] - operands[1]), operands[2])
    elif kind == "approx":  # actual == pytest.approx(expected, ...), or !=
        ok = approx_equal(item[2], item[3], **item[4]) == (op == "Eq")
    else:  # "isclose"
        ok = _isclose(item[2], item[3], **item[4])
    return None if ok else f"strict {kind} {op}".rstrip()


def approx_equal(actual, expected, rel=None, abs=None, nan_ok=False):
    """pytest.approx's rule, on plain values (KodCode's tests use it): a number is within
    max(rel * |expected|, abs) of the expected one (rel 1e-6 and abs 1e-12 unless given; abs alone
    means rel 0), lists and tuples elementwise at equal length, dicts per key, anything else equal."""
    t = _type(expected)
    if t is _list or t is _tuple:
        ta = _type(actual)
        return (ta is _list or ta is _tuple) and _len(actual) == _len(expected) and \
            all(approx_equal(a, e, rel, abs, nan_ok) for a, e in zip(actual, expected))
    if t is _dict:
        return _type(actual) is _dict and _dict_keys(actual) == _dict_keys(expected) and \
            all(approx_equal(actual[k], expected[k], rel, abs, nan_ok) for k in _dict_keys(expected))
    if t is _bool:  # pytest: a bool equals only that bool
        return _type(actual) is _bool and actual == expected
    if not (t is _int or t is _float or t is _complex):
        if rel is not None:
            raise TypeError("approx: a relative tolerance for a value that is not a number")  # as pytest does
        return actual == expected
    ta = _type(actual)
    if not (ta is _int or ta is _float or ta is _complex or ta is _bool):
        return False
    if actual == expected:
        return True
    if expected != expected or actual != actual:  # nan
        return nan_ok and expected != expected and actual != actual
    if _abs(expected) == float("inf") or _abs(actual) == float("inf"):
        return False
    rel = (0.0 if abs is not None else 1e-6) if rel is None else rel
    return _abs(actual - expected) <= max(rel * _abs(expected), 1e-12 if abs is None else abs)
