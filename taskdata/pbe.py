"""
The CPU code toy (ours, not d1): programming by example over small integers. A hidden function of
one integer from a tiny grammar; the prompt shows a few of its input/output pairs; the model writes
a fenced one-line Python function; the reward is the share of hidden tests it passes, executed by
sandbox/run.py through d1's own coding reward (rewards.coding_reward: the first ```python fence, its
first `def` renamed to the target of the first `assert NAME(`, every `assert` line one test). It
exercises the whole path of the real code task on the tiny model in minutes.

    prompt      f(-4)=-11;f(-1)=-8;f(0)=-7;f(1)=-6;f(2)=-5;f(5)=-2
    completion  ```python
                def f(x):return x-7
                ```
    tests       assert f(3)==-4 ... (8 hidden inputs, none of them shown)

Grammar: E := x | c | E op E | abs(E), op in + - * (BINARY; // % min max are built too), c in 0..99,
at most LEAVES = 2 leaves, with abs only around x or around a whole expression (abs(x), abs(x-3),
abs(7*x)). In practice: c+x, c-x, x-c, c*x, abs of those, x*x. A function is its semantics, the tuple of
outputs on X = -5..9: programs with equal outputs are one class, written by its shortest program
(ties: the smaller string). Constant functions, functions that divide by zero somewhere on X and
outputs beyond ±MAX_ABS_OUTPUT (long prompts) are left out. split_classes() holds out whole classes,
so an evaluated function was never trained on; make_pbe() shows the pairs on the fixed inputs
SHOWN_X and draws only functions those determine among ALL classes (well-posed).

    from taskdata import pbe
    train, test = pbe.split_classes(seed=0)
    pbe.make_pbe(train, 2, seed=1)    # [{"prompt": "f(-4)=..;...", "completion": "```python\\n...```", ...}]
    python -m taskdata.pbe                 # pbe.describe(): counts, well-posed share, longest completion, samples
"""
import random
from functools import lru_cache

X = tuple(range(-5, 10))      # the input domain: shown and hidden inputs come from here
CONSTANTS = tuple(range(100))  # c in 0..99
BINARY = ("+", "-", "*")       # evaluate() and render() also know "//", "%", "min", "max"
# What the tiny model can learn here, measured (greedy, held-out classes, seed 0):
#   c in 0..19 with + - * // % min max: 156 classes, only 102 distinct training prompts. SFT memorised
#     them (51 % of training functions right) and solved no held-out function (0 % for 3 seeds, after
#     SFT and after diffu-GRPO; docs/LOG.md): nothing to generalise from, and no reward on held-out items;
#   c in 0..99 with + - * // % min max: 652 classes, but // % min max add few of them and need arithmetic
#     to read off (x%51 from f(-1)=50): 0 % held out after 1500 SFT steps;
#   c in 0..99 with + - * (this grammar): 509 classes, 425 training prompts, the constant readable from
#     f(0) or f(1). After 2500 SFT steps 31 % of training and 13 % of held-out functions right; with
#     c in 0..49 (220 training classes) 8 % and 0 %: the copy rule needs many constants to be learnt.
# With 3 leaves and c in 0..9 (3,066 classes) the model wrote no valid program after 400 SFT steps;
# expressions(3) builds that grammar
LEAVES = 2
MAX_ABS_OUTPUT = 999          # keeps every shown pair short (byte tokenizer: one token per character)
# The shown inputs are the same in every prompt, so the pairs sit at the same places: the tiny model
# did not learn to read 4 pairs at random inputs (0 % even on training functions after 600 SFT steps).
# These six determine 499 of the 509 functions; the other 10 are never drawn
SHOWN_X = (-4, -1, 0, 1, 2, 5)
N_HIDDEN = 8                  # hidden tests, drawn from the 9 other inputs
HELD_OUT = 0.15               # share of the semantic classes kept for evaluation
FENCE = "```python\ndef f(x):return {}\n```"  # the completion; d1's reward reads the first ```python fence
CANVAS = 48                   # completion tokens the toy generates (its record in tasks.py): every completion must fit
# Python precedence of what a node renders as: calls and atoms bind tightest
PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}


def render(node):
    """An expression tree -> the shortest Python text with the same meaning (parentheses only where
    precedence needs them). Leaves are "x" or an int; inner nodes (op, a, b) or ("abs", a)."""
    if not isinstance(node, tuple):
        return str(node)
    if node[0] == "abs" or node[0] in ("min", "max"):
        return f"{node[0]}({','.join(render(c) for c in node[1:])})"
    op, a, b = node
    left, right = render(a), render(b)
    if _prec(a) < PREC[op]:
        left = f"({left})"
    # a right operand of equal precedence needs parentheses except under + (x-(a+b), x*(a//b), ...)
    if _prec(b) < PREC[op] or (_prec(b) == PREC[op] and op != "+"):
        right = f"({right})"
    return f"{left}{op}{right}"


def _prec(node):
    return PREC[node[0]] if isinstance(node, tuple) and node[0] in PREC else 3


def evaluate(node, x):
    """The node's value at x with Python's integer semantics (// and % floor, as exec would)."""
    if node == "x":
        return x
    if not isinstance(node, tuple):
        return node
    if node[0] == "abs":
        return abs(evaluate(node[1], x))
    op, a, b = node[0], evaluate(node[1], x), evaluate(node[2], x)
    if op in ("min", "max"):
        return min(a, b) if op == "min" else max(a, b)
    return {"+": a + b, "-": a - b, "*": a * b}[op] if op in "+-*" else (a // b if op == "//" else a % b)


def expressions(max_leaves=None):
    """{leaf count: [trees]} up to max_leaves (default LEAVES): binary nodes over smaller trees, abs(x),
    and abs of every 2-leaf tree (abs(x-3); abs around 3-leaf trees would double their count)."""
    max_leaves = max_leaves or LEAVES
    by_leaves = {1: ["x", *CONSTANTS]}
    for n in range(2, max_leaves + 1):
        # the left operand takes k leaves, the right n - k
        by_leaves[n] = [(op, a, b) for k in range(1, n) for op in BINARY for a in by_leaves[k] for b in by_leaves[n - k]]
    by_leaves[1].append(("abs", "x"))  # abs of a constant is the constant
    if max_leaves >= 2:
        by_leaves[2] += [("abs", t) for t in by_leaves[2]]
    return by_leaves


@lru_cache(maxsize=None)
def classes():
    """[(outputs on X, canonical program text)], one per semantic class, sorted by outputs; class ids
    everywhere are indices into this list. Computed once (~6k trees evaluated on 15 inputs)."""
    best = {}
    for trees in expressions().values():
        for tree in trees:
            try:
                outs = tuple(evaluate(tree, x) for x in X)
            except ZeroDivisionError:
                continue  # divides by zero somewhere on X: a test could crash the reference itself
            if len(set(outs)) == 1 or max(map(abs, outs)) > MAX_ABS_OUTPUT:
                continue  # constant (the shown pairs would be the whole answer) or too long to show
            text = render(tree)
            # the shortest text wins, then the smaller string: the same program whatever the enumeration order
            if outs not in best or (len(text), text) < (len(best[outs]), best[outs]):
                best[outs] = text
    table = sorted(best.items())
    # the whole completion is generated in one canvas; a longer grammar must change CANVAS
    assert max(len(FENCE.format(text)) for _, text in table) <= CANVAS
    return table


def split_classes(seed=0, held_out=HELD_OUT):
    """(train, test) lists of class indices into classes(): a seeded split of whole functions."""
    ids = list(range(len(classes())))
    random.Random(seed).shuffle(ids)
    n_test = round(held_out * len(ids))
    return sorted(ids[n_test:]), sorted(ids[:n_test])


def well_posed(class_ids):
    """The classes of class_ids whose outputs on SHOWN_X differ from every other class's: the prompt
    then determines the function (brute force over all classes)."""
    key = lambda outs: tuple(outs[X.index(x)] for x in SHOWN_X)
    table, counts = classes(), {}
    for outs, _ in table:
        counts[key(outs)] = counts.get(key(outs), 0) + 1
    return [c for c in class_ids if counts[key(table[c][0])] == 1]


def make_pbe(class_ids, n, seed, n_hidden=N_HIDDEN):
    """n examples of the well-posed functions among class_ids (drawn with replacement): the pairs on
    SHOWN_X as the prompt, n_hidden asserts on other inputs of X as the tests. Deterministic in seed."""
    rng, table = random.Random(seed), classes()
    pool = well_posed(class_ids)
    if not pool:
        raise ValueError("no well-posed function among the given classes")
    rest = [x for x in X if x not in SHOWN_X]
    out = []
    for _ in range(n):
        cid = rng.choice(pool)
        outs, program = table[cid]
        value = dict(zip(X, outs))
        completion = FENCE.format(program)
        out.append({"prompt": ";".join(f"f({x})={value[x]}" for x in SHOWN_X),
                    "completion": completion, "answer": completion, "program": program, "class_id": cid,
                    # d1's assert style: rewards.coding_reward targets f and runs each line as a test
                    "tests": "\n".join(f"assert f({x})=={value[x]}" for x in rng.sample(rest, n_hidden))})
    return out


def describe(seed=0):
    """Print what the toy's data look like for split seed `seed`: counts, the share of functions the
    shown pairs determine, the longest completion, and three held-out items."""
    table = classes()
    train, test = split_classes(seed)
    n_programs = sum(map(len, expressions().values()))
    print(f"{n_programs:,} programs, {len(table):,} semantic classes on x in {X[0]}..{X[-1]}: "
          f"{len(train):,} train, {len(test):,} held out")
    # make_pbe draws only well-posed functions; this is the share of uniform draws that would survive
    for name, ids in (("all", range(len(table))), ("train", train), ("held out", test)):
        print(f"well-posed on {SHOWN_X} ({name}): {len(well_posed(ids))}/{len(ids)} = "
              f"{len(well_posed(ids)) / len(ids):.1%} of the functions")
    # the prompt depends on the function only, so the distinct train prompts are the well-posed train classes
    print(f"distinct train prompts: {len(well_posed(train))}")
    longest = max(len(FENCE.format(text)) for _, text in table)
    print(f"longest completion {longest} characters (canvas {CANVAS})")
    for ex in make_pbe(test, 3, seed=0):
        print(f"  {ex['prompt']:<48} {ex['completion']!r}  {ex['tests'].splitlines()[0]} ...")


if __name__ == "__main__":
    describe()
