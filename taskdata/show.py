"""
What `python tasks.py` prints: the rendered RL and eval prompts of one example per task (the tiny
byte-level tokenizer by default, or a model's), or with --lengths what one task's record must hold
for its labels under a model's tokenizer. tasks.py hands in its registry and functions.

    python tasks.py [--model-dir /path/to/LLaDA-8B-Instruct] [--data-dir ../shared/data]
    python tasks.py --lengths --task mcq --data out/mcq/train.jsonl [--model-dir DIR]
"""
import argparse
from pathlib import Path

from modelio.hub import resolve_model
from modelio.tokenizer import load_tokenizer, make_tiny_tokenizer, prompt_ids
from taskdata.task import MAX_PROMPT_LENGTH, lengths_report

# an example per task: a file's first item (in the shared data folder), else a hand-written one
FILES = {"gsm8k": "gsm8k/test.jsonl", "math": "math500/test.jsonl", "sudoku": "d1_sudoku/4x4_test_sudoku.csv",
         "countdown": "d1_countdown/countdown_cd3_test.jsonl", "humaneval": "humaneval/HumanEval.jsonl.gz"}
STAND_INS = {
    "gsm8k": {"question": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "7"},
    "math": {"question": "What is $2^{10}$?", "answer": "1024"},
    "countdown": {"nums": [2, 3, 4], "target": 5, "answer": "5"},
    "sudoku": {"puzzle": "1030301221404020", "solution": "1234341221434321", "answer": "1234341221434321"}}
SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def example(name, task, args):
    """One example of task `name` to render, or None (read from a file, and none is here)."""
    data = Path(args.data_dir)
    if task.make:  # the toys generate theirs
        return task.make_examples("test", 1, seed=0)[0]
    if args.data or name in FILES and (data / FILES[name]).is_file():
        return task.read_examples(args.data or data / FILES[name])[0]
    if name in STAND_INS:
        return task.with_prompt(STAND_INS[name])
    return None


def main(registry, heldout, eval_message, check_tags, argv=None):
    """`python tasks.py`: registry tasks.TASKS; heldout, eval_message, check_tags: tasks.py's."""
    parser = argparse.ArgumentParser(prog="tasks.py", description="print the rendered RL and eval prompts "
                                     "of every task, or (--lengths) what one task's lengths must hold")
    parser.add_argument("--model-dir", type=str, default=None,
                        help="tokenizer: a model directory or hub id (default: a fresh tiny one)")
    parser.add_argument("--data-dir", type=str, default=str(SHARED_DATA),
                        help="the shared data folder (../shared/data)")
    parser.add_argument("--task", type=str, default="", help="one task (default: every task)")
    parser.add_argument("--data", type=str, default="",
                        help="--task's file or hub id (default: the shared data's, where there is one)")
    parser.add_argument("--lengths", action="store_true", help="--task's longest label and prompt under "
                        "the model's tokenizer and template: its canvas and sft_max_length")
    args = parser.parse_args(argv)
    if args.model_dir:
        tok = load_tokenizer(resolve_model(args.model_dir).path)
    else:
        tok = make_tiny_tokenizer()  # byte-level, with LLaDA's chat template: the real rendering
    if (args.task or args.lengths) and args.task not in registry:
        raise ValueError(f"unknown task {args.task!r}; expected one of {', '.join(registry)}")
    if args.lengths:  # every training and held-out label of a toy, every record of a file
        task = registry[args.task]
        if task.make:
            exs = task.make_examples("train", 2000, 0) + [ex for _, ex in heldout(args.task)]
        else:
            exs = task.read_examples(args.data)
        try:  # a tokenizer that splits d1's tags: the record is not for it
            check_tags(args.task, tok)
        except ValueError as e:
            raise SystemExit(f"tasks.py: {e}") from None
        report, ok = lengths_report(task, tok, exs, args.model_dir or "the tiny model")
        print(report)
        raise SystemExit(0 if ok else 1)  # 1: a record's length is too short for its labels
    for name, task in registry.items():
        if args.task and name != args.task:
            continue
        ex = example(name, task, args)
        if ex is None:  # s1K, KodCode, the other code sets, a task of ours read from a file
            print(f"===== {name}: read from a file, none here: python tasks.py --task {name} --data FILE\n")
            continue
        # RL: the user message, uncut (the header says what d1's left cut keeps); eval: + prefill
        rl = prompt_ids(tok, ex["prompt"])
        ev = prompt_ids(tok, eval_message(name, ex), prefill=task.eval_prefill)
        print(f"===== {name}  (answer {str(ex['answer'])[:40]!r}; RL prompt {len(rl)} tokens, "
              f"eval prompt {len(ev)} tokens; d1 RL keeps the last {MAX_PROMPT_LENGTH})")
        print(f"--- RL prompt ---\n{tok.decode(rl)}\n--- eval prompt ---\n{tok.decode(ev)}\n")
