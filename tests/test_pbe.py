"""
Tests for pbe.py, the code toy's data: the renderer keeps the meaning, the classes are distinct and
their programs compute them, the split holds out whole classes, and every item is well-posed (checked
by brute force over all classes), fits the 48-token canvas and is solved by its own completion through
d1's reward code (rewards.prepare_code_tests) with the tests run by a plain in-process exec (our own
programs only; the sandbox is tests/test_sandbox.py).

Run: python -m pytest tests/test_pbe.py -q
"""
import random

import pbe
from rewards import extract_code, prepare_code_tests


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


def test_render_keeps_meaning_on_random_trees():
    rng = random.Random(0)
    trees = [t for ts in pbe.expressions().values() for t in ts]
    for tree in rng.sample(trees, 3000):
        text = pbe.render(tree)
        for x in pbe.X:
            try:
                want = pbe.evaluate(tree, x)
            except ZeroDivisionError:
                continue
            assert eval(text, {"x": x}) == want, (tree, text)
    assert pbe.render(("-", "x", ("+", 1, "x"))) == "x-(1+x)" and pbe.render(("*", ("+", "x", 1), 3)) == "(x+1)*3"


def test_classes_distinct_nonconstant_and_computed_by_their_program():
    table = pbe.classes()
    outs = [o for o, _ in table]
    assert len(set(outs)) == len(outs) > 100
    for o, program in table:
        assert len(set(o)) > 1 and max(map(abs, o)) <= pbe.MAX_ABS_OUTPUT
        assert tuple(eval(program, {"x": x}) for x in pbe.X) == o
    # the shortest text wins: x+1 and 1+x are one class, written "1+x" (same length, smaller string)
    assert dict(table)[tuple(x + 1 for x in pbe.X)] == "1+x"


def test_enumeration_counts_by_hand():
    e = pbe.expressions(3)
    # n plain leaves (x, the constants) and abs(x); 7 binary ops over n x n leaf pairs, and abs of each; 3 leaves:
    # binary ops over (leaf, 2-leaf) and (2-leaf, leaf) pairs of the trees without abs
    n = len(pbe.CONSTANTS) + 1  # the plain leaves: x and the constants
    assert len(e[1]) == n + 1 and e[1][-1] == ("abs", "x")
    assert len(e[2]) == 2 * 7 * n * n
    assert len(e[3]) == 7 * 2 * n * (7 * n * n)
    assert set(pbe.expressions(2)) == {1, 2}


def test_split_disjoint_complete_and_seeded():
    train, test = pbe.split_classes(seed=0)
    assert not set(train) & set(test) and len(train) + len(test) == len(pbe.classes())
    assert pbe.split_classes(seed=0) == (train, test) != pbe.split_classes(seed=1)
    assert abs(len(test) / len(pbe.classes()) - pbe.HELD_OUT) < 0.01


def test_items_well_posed_short_and_solved_by_their_completion():
    table = pbe.classes()
    train, test = pbe.split_classes(seed=0)
    items = pbe.make_pbe(test, 100, seed=3)
    assert items == pbe.make_pbe(test, 100, seed=3) != pbe.make_pbe(test, 100, seed=4)
    assert len({ex["class_id"] for ex in items}) > 10  # many functions, not one
    for ex in items:
        assert ex["class_id"] in test and len(ex["completion"]) <= 48
        shown = dict(map(int, p[2:].split(")=")) for p in ex["prompt"].split(";"))
        hidden = [int(line.split("(")[1].split(")")[0]) for line in ex["tests"].splitlines()]
        outs = table[ex["class_id"]][0]
        assert tuple(shown) == pbe.SHOWN_X and len(hidden) == pbe.N_HIDDEN and not set(shown) & set(hidden)
        assert all(outs[pbe.X.index(x)] == y for x, y in shown.items())
        # brute force: no other class agrees with the shown pairs
        assert sum(all(o[pbe.X.index(x)] == y for x, y in shown.items()) for o, _ in table) == 1
        code, _ = extract_code(ex["completion"])
        program, calls = prepare_code_tests(code, ex["tests"])
        assert run_trusted(program, calls) == [True] * pbe.N_HIDDEN
    # the functions the fixed inputs do not determine are never drawn
    ambiguous = set(test) - set(pbe.well_posed(test))
    assert ambiguous and not ambiguous & {ex["class_id"] for ex in pbe.make_pbe(test, 500, seed=5)}
