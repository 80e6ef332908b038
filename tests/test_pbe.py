"""
Tests for pbe.py, the code toy's data: the classes equal an independent brute force over program
strings, the renderer keeps the meaning, the split holds out whole classes, and
every item is well-posed (checked by brute force over all classes), fits the 48-token canvas and is
solved by its own completion, both by a plain in-process exec of the fenced code and through d1's
reward code (rewards.prepare_code_tests). exec is fine here: these are our own generated programs
(the sandbox is tests/test_sandbox.py).

Run: python -m pytest tests/test_pbe.py -q
"""
import random
import re

from taskdata import pbe
from rewards import extract_code, prepare_code_tests

ASSERT_TARGET = re.compile(r"assert\s+(\w+)\s*\(")  # how d1's reward finds the function the tests call


def run_trusted(program, calls):
    """exec OUR generated program and its test calls in one namespace -> [passed]."""
    ns = {}
    exec(program, ns)
    out = []
    for call in calls:
        try:
            exec(call, ns)
            out.append(True)
        except AssertionError:
            out.append(False)
    return out


def fenced_code(completion):
    """The code between ```python\\n and \\n``` (written out here, not d1's extract_code)."""
    assert completion.startswith("```python\n") and completion.endswith("\n```")
    return completion[len("```python\n"):-len("\n```")]


def outputs(text):
    """A program text's outputs on X by Python's own eval (None where it divides by zero)."""
    try:
        return tuple(eval(text, {"x": x}) for x in pbe.X)
    except ZeroDivisionError:
        return None


def test_classes_equal_a_brute_force_over_strings():
    # the built grammar written as strings: with 2 leaves every operand is x or a constant, so no
    # parentheses are needed and the strings are exactly the rendered programs
    leaves = ["x"] + [str(c) for c in pbe.CONSTANTS]
    infix = [op for op in pbe.BINARY if op in ("+", "-", "*", "//", "%")]
    pairs = [f"{a}{op}{b}" for a in leaves for b in leaves for op in infix]
    pairs += [f"{f}({a},{b})" for a in leaves for b in leaves for f in pbe.BINARY if f in ("min", "max")]
    texts = leaves + ["abs(x)"] + pairs + [f"abs({t})" for t in pairs]
    best = {}
    for text in texts:
        outs = outputs(text)
        if outs is None or len(set(outs)) == 1 or max(map(abs, outs)) > pbe.MAX_ABS_OUTPUT:
            continue
        best[outs] = min(best.get(outs, text), text, key=lambda t: (len(t), t))
    assert dict(pbe.classes()) == best
    assert len(texts) == sum(map(len, pbe.expressions().values()))  # the same 61,308 programs


def test_classes_distinct_nonconstant_and_computed_by_their_program():
    table = pbe.classes()
    outs = [o for o, _ in table]
    assert len(set(outs)) == len(outs) > 100
    for o, program in table:
        # outputs() is None on a division by zero anywhere on X
        assert outputs(program) == o and len(set(o)) > 1 and max(map(abs, o)) <= pbe.MAX_ABS_OUTPUT
    # the shortest text wins: x+1 and 1+x are one class, written "1+x" (same length, smaller string)
    assert dict(table)[tuple(x + 1 for x in pbe.X)] == "1+x"
    # x//0 and x%0 never appear; x%(x-x) cannot (2 leaves); constants and x-x are gone
    assert not any(re.search(r"(//|%)0\b", p) for _, p in table) and "x-x" not in dict(map(reversed, table))


ALL_OPS = ("+", "-", "*", "//", "%", "min", "max")  # what render() and evaluate() know


def test_render_keeps_meaning_on_random_trees(monkeypatch):
    # every operator and 3-leaf trees, over a few constants (100 constants make 18M 3-leaf trees)
    monkeypatch.setattr(pbe, "BINARY", ALL_OPS)
    monkeypatch.setattr(pbe, "CONSTANTS", tuple(range(10)))
    rng = random.Random(0)
    trees = [t for ts in pbe.expressions(3).values() for t in ts]
    for tree in rng.sample(trees, 3000):
        text = pbe.render(tree)
        for x in pbe.X:
            try:
                want = pbe.evaluate(tree, x)
            except ZeroDivisionError:
                continue
            assert eval(text, {"x": x}) == want, (tree, text)
    assert pbe.render(("-", "x", ("+", 1, "x"))) == "x-(1+x)" and pbe.render(("*", ("+", "x", 1), 3)) == "(x+1)*3"


def test_enumeration_counts_by_hand(monkeypatch):
    monkeypatch.setattr(pbe, "CONSTANTS", tuple(range(10)))  # 3-leaf trees over 100 constants: 18M
    for ops in (pbe.BINARY, ALL_OPS):
        monkeypatch.setattr(pbe, "BINARY", ops)
        e, k = pbe.expressions(3), len(ops)
        # n plain leaves (x, the constants) and abs(x); k binary ops over n x n leaf pairs, and abs of each;
        # 3 leaves: binary ops over (leaf, 2-leaf) and (2-leaf, leaf) pairs of the trees without abs
        n = len(pbe.CONSTANTS) + 1  # the plain leaves: x and the constants
        assert len(e[1]) == n + 1 and e[1][-1] == ("abs", "x")
        assert len(e[2]) == 2 * k * n * n
        assert len(e[3]) == k * 2 * n * (k * n * n)
    assert set(pbe.expressions(2)) == {1, 2}


def test_split_disjoint_complete_and_seeded():
    train, test = pbe.split_classes(seed=0)
    assert not set(train) & set(test) and sorted(train + test) == list(range(len(pbe.classes())))
    assert pbe.split_classes(seed=0) == (train, test) != pbe.split_classes(seed=1)
    assert abs(len(test) / len(pbe.classes()) - pbe.HELD_OUT) < 0.01


def check_item(ex, table, class_ids):
    """Everything one item must satisfy, computed from the class table and the item's text alone."""
    assert ex["class_id"] in class_ids and len(ex["completion"]) <= pbe.CANVAS
    assert ex["answer"] == pbe.FENCE.format(ex["program"]) and ex["program"] == table[ex["class_id"]][1]
    shown = dict(map(int, p[2:].split(")=")) for p in ex["prompt"].split(";"))
    lines = ex["tests"].split("\n")
    # every line one d1-style assert on f
    assert all(line.startswith("assert f(") for line in lines)
    assert [m.group(1) for m in map(ASSERT_TARGET.match, lines)] == ["f"] * pbe.N_HIDDEN
    hidden = [int(line.split("(")[1].split(")")[0]) for line in lines]
    outs = table[ex["class_id"]][0]
    assert tuple(shown) == pbe.SHOWN_X and len(set(hidden)) == pbe.N_HIDDEN and not set(shown) & set(hidden)
    assert set(hidden) <= set(pbe.X) and all(outs[pbe.X.index(x)] == y for x, y in shown.items())
    # brute force: no other class agrees with the shown pairs
    assert sum(all(o[pbe.X.index(x)] == y for x, y in shown.items()) for o, _ in table) == 1
    # the completion passes its own tests: plain exec of the fenced code, then each assert line
    assert run_trusted(fenced_code(ex["completion"]), lines) == [True] * pbe.N_HIDDEN


def test_items_well_posed_short_and_solved_by_their_completion():
    table = pbe.classes()
    train, test = pbe.split_classes(seed=0)
    items = pbe.make_pbe(test, 100, seed=3)
    assert items == pbe.make_pbe(test, 100, seed=3) != pbe.make_pbe(test, 100, seed=4)
    assert len({ex["class_id"] for ex in items}) > 10  # many functions, not one
    for ex in items:
        check_item(ex, table, test)
        assert ex["completion"] == ex["answer"]
    for ex in pbe.make_pbe(train, 300, seed=3):
        check_item(ex, table, train)
    # the functions the fixed inputs do not determine are never drawn
    ambiguous = set(test) - set(pbe.well_posed(test))
    assert ambiguous and not ambiguous & {ex["class_id"] for ex in pbe.make_pbe(test, 500, seed=5)}


def test_items_pass_through_d1_reward_code():
    # d1's path: first ```python fence, the def renamed to the tests' target, one call per assert
    for ex in pbe.make_pbe(pbe.split_classes(seed=0)[1], 50, seed=7):
        code, _ = extract_code(ex["completion"])
        program, calls = prepare_code_tests(code, ex["tests"])
        assert run_trusted(program, calls) == [True] * pbe.N_HIDDEN
