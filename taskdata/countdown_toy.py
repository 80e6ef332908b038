"""
The testbed (ours, not d1): Countdown with small numbers, written reasoning, and many correct answers.

d1's Countdown asks for an equation that reaches a target with each given number used once. Here
the numbers are small (1..MAX_NUM) and there are 2 to 4 of them, so a 1M-parameter model can do the
arithmetic, and most problems have several solutions. The SFT label is ONE of them (the random
expression the problem was drawn from), written out step by step, in d1's format, so d1's own
Countdown reward scores it, in RL and at evaluation (taskdata/parsers.py says why not d1's eval parser):

    prompt      Countdown: 3 5 7 -> 22
    completion  <reasoning>
                3*5=15
                15+7=22
                </reasoning>
                <answer>
                3*5+7
                </answer>

Why this task (docs/testbed.md): its labels are clean, yet imitation cannot be the whole story.
Each problem's labels spread over several solutions, and a masked diffusion model decodes several
tokens at once, so an SFT model mixes steps of different solutions; a reward on the final equation
prefers any one consistent solution. The reasoning has 1 to 3 lines, so completions vary in length.
Held out by structure: a test problem's MULTISET of numbers never occurs in training, with any target.

    from taskdata import countdown_toy
    train, test = countdown_toy.split_multisets(seed=0)
    countdown_toy.make_problems(train, 2, seed=1)   # [{"prompt": "Countdown: ...", "completion": ..., ...}]
    python -m taskdata.countdown_toy                     # counts, solutions per problem, lengths, samples
"""
import itertools
import random
import statistics
from fractions import Fraction
from functools import lru_cache

from taskdata.puzzles import countdown_values

MAX_NUM = 9              # numbers are 1..MAX_NUM
N_NUMBERS = (2, 3, 4)    # how many numbers a problem has (uniform)
MAX_TARGET = 99          # targets, and every intermediate value, are integers in 1..MAX_TARGET
HELD_OUT = 0.2           # share of the number multisets kept for evaluation
OPS = ("+", "-", "*", "/")
# The label orders docs/testbed.md compares (make_problems' `order`; the testbed's own is "free"): "left" and
# "right" make every label combine the numbers in prompt order, from the left ((a op b) op c) or from the
# right (the last two first, with the target before the numbers in the prompt, so that the first step's
# numbers sit at a fixed distance from the answer). The testbed's label-order study hands them in
ORDERS = ("free", "left", "right")
PROMPT = "Countdown: {nums} -> {target}"
RIGHT_PROMPT = "Countdown to {target}: {nums}"  # order "right": the target first
COMPLETION = "<reasoning>\n{steps}\n</reasoning>\n<answer>\n{answer}\n</answer>"
PREC = {"+": 1, "-": 1, "*": 2, "/": 2}


@lru_cache(maxsize=None)
def multisets():
    """Every sorted tuple of N_NUMBERS numbers in 1..MAX_NUM (2: 45, 3: 165, 4: 495)."""
    return [m for n in N_NUMBERS for m in itertools.combinations_with_replacement(range(1, MAX_NUM + 1), n)]


def split_multisets(seed=0, held_out=HELD_OUT):
    """(train, test) lists of number multisets: a seeded split, so a test problem's numbers (in any
    order, with any target) never appear in training."""
    ms = list(multisets())
    random.Random(seed).shuffle(ms)
    n_test = round(held_out * len(ms))
    return sorted(ms[n_test:]), sorted(ms[:n_test])


def _render(node):
    """(text, op) of an expression tree node: a leaf int, or (op, left, right). Parentheses only where
    Python's precedence needs them, so the answer is the shortest faithful equation."""
    if isinstance(node, int):
        return str(node), None
    op, left, right = node
    lt, lop = _render(left)
    rt, rop = _render(right)
    if lop and PREC[lop] < PREC[op]:
        lt = f"({lt})"
    # the right side also needs them at equal precedence when op does not associate: a-(b+c), a/(b*c)
    if rop and (PREC[rop] < PREC[op] or (PREC[rop] == PREC[op] and op in "-/")):
        rt = f"({rt})"
    return f"{lt}{op}{rt}", op


def random_solution(nums, rng, order="free"):
    """One random way to combine all of nums, Countdown style: pick two terms (any two, or in prompt order:
    ORDERS) and an operation whose result is an integer in 1..MAX_TARGET, replace them by it, repeat.
    -> (value, steps, tree); value 0 when a draw got stuck."""
    terms = [(n, n) for n in nums]  # (value, tree)
    steps = []
    while len(terms) > 1:
        # which two terms to combine: any two (Countdown's freedom), or the next ones in prompt order
        i, j = {"free": lambda: rng.sample(range(len(terms)), 2), "left": lambda: (0, 1),
                "right": lambda: (len(terms) - 1, len(terms) - 2)}[order]()
        (a, ta), (b, tb) = terms[i], terms[j]
        if a < b and order == "free":  # write the larger first, so - and / stay positive and whole more often
            (a, ta), (b, tb) = (b, tb), (a, ta)
        ok = [op for op in OPS if {"+": a + b <= MAX_TARGET, "-": a > b, "*": a * b <= MAX_TARGET,
                                   "/": a % b == 0 and b > 1}[op]]
        if not ok:  # stuck (in prompt order, e.g. 2 then 9: 2-9 < 0, 2/9 not whole, 2*9 fine unless capped)
            return 0, steps, None
        op = rng.choice(ok)
        v = {"+": a + b, "-": a - b, "*": a * b, "/": a // b}[op]
        rest = [t for k, t in enumerate(terms) if k not in (i, j)]
        terms = [(v, (op, ta, tb))] + rest if order == "left" else rest + [(v, (op, ta, tb))]
        steps.append(f"{a}{op}{b}={v}")
    value, tree = terms[0]
    return value, steps, tree


def make_problems(multiset_pool, n, seed, max_target=MAX_TARGET, order="free"):
    """n problems: a multiset from the pool, its numbers shuffled, a random solution drawn as above (in
    `order`); its value (in 1..max_target) is the target, its steps and equation are the label."""
    prompt = RIGHT_PROMPT if order == "right" else PROMPT
    # the pool by count of numbers, once: a problem draws the count first, uniform over N_NUMBERS (uniform
    # over multisets would be 70 % fours), then a multiset of that count
    by_count = {}
    for m in multiset_pool:
        by_count.setdefault(len(m), []).append(m)
    counts = sorted(by_count)
    rng, out = random.Random(seed), []
    while len(out) < n:
        nums = list(rng.choice(by_count[rng.choice(counts)]))
        rng.shuffle(nums)
        value, steps, tree = random_solution(nums, rng, order)
        if not 1 <= value <= max_target:
            continue
        answer = _render(tree)[0]
        ex = {"nums": nums, "target": value, "answer": str(value), "expression": answer,
              "prompt": prompt.format(nums=" ".join(map(str, nums)), target=value),
              "completion": COMPLETION.format(steps="\n".join(steps), answer=answer)}
        out.append(ex)
    return out


def solutions(nums, target):
    """The number of right FIRST steps: (pair of numbers, operation) whose result can still reach the
    target with the other numbers. Distinct solution expressions are hard to count (a+b+c in how many
    orders?); this counts the different ways a model can start right."""
    count = 0
    for i, j in itertools.combinations(range(len(nums)), 2):
        a, b = max(nums[i], nums[j]), min(nums[i], nums[j])
        rest = [x for k, x in enumerate(nums) if k not in (i, j)]
        for v in {a + b, a - b, a * b, Fraction(a, b)}:
            # with no number left, countdown_values([v]) is {v}: the same test covers the last step
            if v > 0 and v.denominator == 1 and Fraction(target) in countdown_values(rest + [int(v)]):
                count += 1
    return count


def describe(seed=0, n=2000):
    train, test = split_multisets(seed)
    exs = make_problems(train, n, seed=1)
    lengths = [len(ex["completion"]) for ex in exs]
    starts = [solutions(ex["nums"], ex["target"]) for ex in exs]
    print(f"multisets: {len(train)} train, {len(test)} test; distinct problems in {n}: "
          f"{len({(tuple(e['nums']), e['target']) for e in exs})}")
    print(f"completion chars: mean {statistics.mean(lengths):.1f}, std {statistics.pstdev(lengths):.1f}, "
          f"min {min(lengths)}, max {max(lengths)}")
    print(f"right first steps per problem: mean {statistics.mean(starts):.2f}; share with >1: "
          f"{sum(s > 1 for s in starts) / n:.2f}")
    for ex in exs[:3]:
        print(ex["prompt"], "|", ex["completion"].replace("\n", " "))


if __name__ == "__main__":
    describe()
