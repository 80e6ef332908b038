"""
Multiple choice read from a file (ours, not d1): README "Adding a task"'s second worked example, a task
whose items come from --data rather than a maker. The file is shaped like the hub's allenai/ai2_arc
(jsonl, json, csv or parquet, or the hub id itself): one record per question,

    {"id": "...", "question": "...", "choices": {"text": ["...", ...], "label": ["A", ...]},
     "answerKey": "B"}

and the model answers in d1's tags:

    prompt      Which gas do plants take in?
                A. oxygen
                B. carbon dioxide
                Answer with the letter of the correct choice.
    completion  <reasoning>
                carbon dioxide
                </reasoning>
                <answer>
                B
                </answer>

render_choices() is the one way choices become text: a second multiple-choice task imports it. The
record (TASK, at the end) is registered by one line of tasks.py. Sample files in ai2_arc's shape
(synthetic sums, for the tiny model; no real data ships with the repository):

    python -m taskdata.mcq --out-dir out/mcq      # out/mcq/train.jsonl (2000), out/mcq/test.parquet (200)
"""
import argparse
import json
import os
import random

from taskdata.answers import last_tag_content
from taskdata.records import field, read_records
from taskdata.task import Task, each

INSTRUCTION = "Answer with the letter of the correct choice."
COMPLETION = "<reasoning>\n{text}\n</reasoning>\n<answer>\n{label}\n</answer>"


def render_choices(labels, texts):
    """'A. oxygen\\nB. carbon dioxide': each label, a dot, its text, a line each."""
    return "\n".join(f"{label}. {text}" for label, text in zip(labels, texts))


def read_mcq(path):
    """ai2_arc-shaped records -> examples: question, labels, texts, answer (the key's label) and
    answer_text; a key that names no choice is one error naming the record."""
    out = []
    for where, rec in read_records(path):
        choices = field(rec, "choices", where, dict)
        labels, texts = field(choices, "label", where, list), field(choices, "text", where, list)
        key = str(field(rec, "answerKey", where))
        if len(labels) != len(texts) or key not in labels:
            raise ValueError(f"{where}: answerKey {key!r} must be one of the {len(labels)} labels "
                             f"{labels} (with {len(texts)} texts)")
        out.append({"question": field(rec, "question", where, str), "labels": labels, "texts": texts,
                    "answer": key, "answer_text": texts[labels.index(key)]})
    return out


def mcq_prompt(ex):
    return f"{ex['question']}\n{render_choices(ex['labels'], ex['texts'])}\n{INSTRUCTION}"


def mcq_label(ex):
    return COMPLETION.format(text=ex["answer_text"], label=ex["answer"])


def mcq_reward(completion, example):
    """1.0 when the last <answer> holds the right label, else 0.0 (pure, never raises)."""
    got = last_tag_content(completion)
    return float(got is not None and got.strip() == example["answer"])


def score(generation, example):
    """The eval parser: the last <answer>'s label, counted only if it is one of the item's choices
    (so it reads `labels` beside `answer`: both are in the record's scoring_fields)."""
    got = last_tag_content(generation)
    pred = None if got is None or got.strip() not in example["labels"] else got.strip()
    return {"pred": pred, "correct": pred == example["answer"], "score": float(pred == example["answer"])}


PAIRS = [(a, b) for a in range(1, 10) for b in range(1, 10)]
TEST_PAIRS = PAIRS[::5]  # 17 of the 81 sums are held out: no test question is asked in training


def sample_records(n, seed, test=False):
    """n questions "What is a + b?" with four numeric choices, in ai2_arc's shape, from the training or
    the held-out pairs (a file to run the recipe on the tiny model; any ai2_arc-shaped file or hub id
    reads the same way)."""
    pairs = TEST_PAIRS if test else [p for p in PAIRS if p not in TEST_PAIRS]
    rng, out = random.Random(seed), []
    for i in range(n):
        a, b = rng.choice(pairs)
        wrong = rng.sample(sorted(set(range(2, 19)) - {a + b}), 3)
        texts = [str(v) for v in rng.sample([a + b, *wrong], 4)]
        out.append({"id": f"sum-{'test' if test else 'train'}-{i}", "question": f"What is {a} + {b}?",
                    "choices": {"text": texts, "label": list("ABCD")},
                    "answerKey": "ABCD"[texts.index(str(a + b))]})
    return out


# lengths from `python tasks.py --lengths --task mcq --data out/mcq/train.jsonl` (the tiny tokenizer,
# whose bytes are an upper bound on a real tokenizer's tokens): the longest label 48 + its end of turn
# fits canvas 64 (blocks of 16); prompt + label 155 + 1 fits 160
TASK = Task(name="mcq", prompt=mcq_prompt, load=read_mcq, rewards=(mcq_reward,), max_reward=1.0,
            score=each(score), parser_version="mcq-1", scoring_fields=("answer", "labels"),
            eval_prefill="", canvas=64, block=16, sft_max_length=160, sft_completion=mcq_label,
            eval_batch=100)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="write sample files in ai2_arc's shape: train.jsonl, "
                                     "test.parquet")
    parser.add_argument("--out-dir", type=str, default="out/mcq", help="where the two files go")
    parser.add_argument("--train", type=int, default=2000, help="training questions")
    parser.add_argument("--test", type=int, default=200, help="test questions")
    parser.add_argument("--seed", type=int, default=0, help="the draws' seed")
    args = parser.parse_args()
    import pyarrow as pa  # only here: the parquet file (it is in requirements.txt)
    import pyarrow.parquet as pq
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "train.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in sample_records(args.train, args.seed))
    pq.write_table(pa.Table.from_pylist(sample_records(args.test, args.seed, test=True)),
                   os.path.join(args.out_dir, "test.parquet"))
    print(f"wrote {args.out_dir}/train.jsonl ({args.train}) and {args.out_dir}/test.parquet ({args.test})")
