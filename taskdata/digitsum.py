"""
Digit sum (ours, not d1): the worked example of README "Adding a task", a CPU toy in d1's tags.

The model reads a number and writes its digits' sum, reasoning first, in d1's format:

    prompt      Digit sum: 4821
    completion  <reasoning>
                4+8+2+1=15
                </reasoning>
                <answer>
                15
                </answer>

Held out by number: a test number never occurs in training. Its record (TASK, at the end, registered
by one line of tasks.py) names the maker, the reward and the parser below; everything else (prompts,
lengths, splits, scripts) reads the record.

    from taskdata import digitsum
    train, test = digitsum.split_numbers(seed=0)
    digitsum.make_problems(train, 2, seed=1)   # [{"prompt": "Digit sum: ...", "completion": ..., ...}]
"""
import random

from taskdata.answers import last_tag_content
from taskdata.task import Task, each, made_label, made_prompt, toy_split

NUMBERS = range(10, 10_000)  # 2 to 4 digits: sums up to 36
HELD_OUT = 0.2               # share of the numbers kept for evaluation
PROMPT = "Digit sum: {n}"
COMPLETION = "<reasoning>\n{steps}={total}\n</reasoning>\n<answer>\n{total}\n</answer>"


def split_numbers(seed=0, held_out=HELD_OUT):
    """(train, test) lists of numbers: a seeded split, so no test number is ever seen in training."""
    numbers = list(NUMBERS)
    random.Random(seed).shuffle(numbers)
    n_test = round(held_out * len(numbers))
    return sorted(numbers[n_test:]), sorted(numbers[:n_test])


def make_problems(pool, n, seed):
    """n problems drawn from `pool` (with repeats), each with its label as the SFT completion."""
    rng, out = random.Random(seed), []
    for _ in range(n):
        number = rng.choice(pool)
        digits = [int(d) for d in str(number)]
        total = str(sum(digits))
        out.append({"prompt": PROMPT.format(n=number), "number": number, "answer": total,
                    "completion": COMPLETION.format(steps="+".join(map(str, digits)), total=total)})
    return out


def digitsum_reward(completion, example):
    """1.0 when the last <answer> holds the digit sum, else 0.0 (a pure function that never raises)."""
    got = last_tag_content(completion)
    return float(got is not None and got.strip() == example["answer"])


def score(generation, example):
    """The eval parser: the reward's reading, as the other toys are scored."""
    correct = digitsum_reward(generation, example) == 1.0
    return {"pred": last_tag_content(generation), "correct": correct, "score": float(correct)}


# lengths from `python tasks.py --lengths --task digitsum --model-dir out/ds/init` (d1's tags as single
# tokens): the longest label 21 + its end of turn fits canvas 32; prompt + label 59 + 1 fits 64
TASK = Task(name="digitsum", prompt=made_prompt, make=toy_split(split_numbers, make_problems),
            rewards=(digitsum_reward,), max_reward=1.0, score=each(score), parser_version="digitsum-1",
            scoring_fields=("answer",), eval_prefill="", canvas=32, block=16, sft_max_length=64,
            sft_completion=made_label, needs_tags=True, eval_batch=100)
