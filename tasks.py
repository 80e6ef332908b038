"""
The tasks: d1's exact prompt strings and the task registry, TASKS. A task's record (Task, in
taskdata/task.py) is all a script needs: how to read (a file or hub id) or generate it, training
and d1's eval prompts, rewards and their maximum, the eval parser with its version and the fields
it reads, the canvas and SFT lengths (nowhere else), SFT completion, held-out split, whether the
tiny model needs d1's tags as single tokens. sft.py, grpo.py, eval.py and the tests read it; a new
task is its module (data functions and record), one line here, and its tests (README "Adding a
task").

Examples are plain dicts: `prompt` (the training user message, NOT yet chat-rendered: d1's RL
prompt, docs/d1.md §7.1; s1K's SFT message, §5.1), `answer` (gold, as text), the task's own fields
(taskdata/readers.py and code_data.py, the toys' makers), for SFT `completion`. eval_message()
builds d1's eval prompts (docs/d1.md §8.2: \\boxed{} format, "<reasoning>" prefill). Token ids come
only from modelio/tokenizer.prompt_ids(); docs/d1.md §2.4: the chat template trims the message (a
system prompt's leading "\\n" goes), and d1's RL left cut to MAX_PROMPT_LENGTH tokens is max_length.

Rendered RL and eval prompts of one example per task (tiny byte-level tokenizer by default), and
the lengths a task's labels need under a model's tokenizer (what its record's lengths must hold):
    python tasks.py [--model-dir /path/to/LLaDA-8B-Instruct] [--data-dir ../shared/data]
    python tasks.py --lengths --task mcq --data out/mcq/train.jsonl [--model-dir DIR]
"""
import argparse
from pathlib import Path

import numpy as np

import rewards as R
from modelio.hub import resolve_model
from modelio.tokenizer import D1_TAGS, load_tokenizer, make_tiny_tokenizer, prompt_ids
from taskdata import code_data, countdown_toy, digitsum, mcq, parsers, pbe, puzzles, readers
from taskdata.task import (D1_SCORING_FIELDS, EVAL_PREFILL, Task, check_canvas, each,  # noqa: F401
                           label_lengths, lengths_report, made_label, made_prompt, question,
                           toy_split, with_system)  # EVAL_PREFILL, label_lengths: as tasks.X too

# -----------------------------------------------------------------------------
# Prompt strings, character-exact to d1 @ 837888f (docs/d1.md §5.1, §7.1, §8.2). Do not "tidy"
# them: the odd spaces, stray quote and missing separators are what LLaDA was trained/evaluated on.
# RL system prompt (docs/d1.md §7.1): GSM8K, MATH, Countdown; the template trims its first "\n".
SYSTEM_PROMPT = ("\nRespond in the following format:\n<reasoning>\n...\n</reasoning>\n"
                 "<answer>\n...\n</answer>\n")
# SFT system prompt (docs/d1.md §5.1): "Your reasoning here" where the RL prompt says "...".
SFT_SYSTEM_PROMPT = ("\nRespond in the following format:\n<reasoning>\nYour reasoning here\n"
                     "</reasoning>\n<answer>\n...\n</answer>\n")
# Inserted between SYSTEM_PROMPT and the MATH problem during RL (note the space before "\n\n").
MATH_RL_INSTRUCTION = ("\n\nYou are a math expert. You will be given a question to solve. "
                       "Solve it step by step. Wrap the final answer in a \\boxed{}. \n\n")
# Countdown RL instruction, {nums} the list repr, e.g. [44, 19, 35]; ONE "\n" after SYSTEM_PROMPT.
COUNTDOWN_RL_TEMPLATE = (
    "\nUsing only the numbers {nums}, create an arithmetic expression that evaluates to exactly "
    "{target}. You must use all numbers from the list, and each number must be used exactly once. "
    "You may use the operations +, -, *, and / as needed. After reasoning, provide only your final "
    "expression inside <answer></answer> tags without including an equals sign or the target "
    "number. For example, if the numbers are [2, 3, 4] and the target is 5, a valid answer is: "
    "<answer>\n2*4-3\n</answer>")
# Sudoku system prompt, RL and eval alike (docs/d1.md §7.1); line by line, so every "\n" shows.
SUDOKU_SYSTEM_PROMPT = (
    "\n"
    "Please solve the following 4x4 Sudoku puzzle. The puzzle is provided as a 16-character "
    "string reading left-to-right, top-to-bottom, where '0' represents empty cells.\n"
    "\n"
    "Rules:\n"
    "- Fill empty cells with digits 1-4\n"
    "- Each row must contain digits 1-4 exactly once\n"
    "- Each column must contain digits 1-4 exactly once\n"
    "- Each 2x2 box must contain digits 1-4 exactly once\n"
    "\n"
    "Important: Your solution must be a COMPLETE 16-character string with only the digits 1-4, "
    "representing your final solved grid.\n"
    "\n"
    "Respond in this exact format:\n"
    "<reasoning>\n"
    "Your step-by-step solving process\n"
    "</reasoning>\n"
    "<answer>\n"
    "[16-character solution string with no spaces or separators]\n"
    "</answer>\n")
SUDOKU_QUESTION = "Solve the following Sudoku puzzle: {puzzle}\n"  # after "\n\n", in RL as in eval
# Eval system prompts (docs/d1.md §8.2). GSM8K: a space after "\boxed{}.".
GSM8K_EVAL_PROMPT = ("You are a math expert. You will be given a question to solve. "
                     "Solve it step by step. Wrap the final answer in a \\boxed{}. \n"
                     "Respond in the following format:\n<reasoning>\nYour reasoning here\n"
                     "</reasoning>\n<answer>\n\\boxed{...}\n</answer>")
# MATH500: no space after "\boxed{}.", and a stray '" \n' after </answer> (d1's triple-quote typo).
MATH_EVAL_PROMPT = ("You are a math expert. You will be given a question to solve. "
                    "Solve it step by step. Wrap the final answer in a \\boxed{}.\n"
                    "Respond in the following format:\n<reasoning>\nYour reasoning here\n"
                    "</reasoning>\n<answer>\n\\boxed{...}\n</answer>\" \n")
# Countdown: d1 concatenates two strings with no separator, hence "c}Respond".
COUNTDOWN_EVAL_PROMPT = (
    "Using only the provided numbers, create an arithmetic expression that evaluates to exactly "
    "the provided target number. You may use the operations +, -, *, and / as needed, but each "
    "number must be used exactly once. Think step-by-step. After reasoning, provide only your "
    "final expression inside \\boxed{} tags without including an equals sign or the target number. "
    "For example: \\boxed{a + b * c}Respond in the following format:\n<reasoning>\n"
    "Your reasoning here\n</reasoning>\n<answer>\n\\boxed{...}\n</answer>")
COUNTDOWN_QUESTION = "Numbers: {nums}\nTarget: {target}"  # docs/d1.md §8.2, {nums} a list repr
# Code (docs/coding.md §1.1: d1's later get_code_questions): SYSTEM_PROMPT, this (space before
# "\n\n", as in d1's f-string), the question: KodCode's, or the benchmarks' (ours, d1's code eval
# was not released, docs/coding.md §1.5), which taskdata/code_data.py writes as it reads the files.
CODE_RL_INSTRUCTION = ("\n\nYou are a coding expert. You will be given a coding problem to solve. "
                       "Solve it step by step. \n\n")
MAX_PROMPT_LENGTH = 200  # d1's RL max_prompt_length: the LAST 200 prompt tokens (docs/d1.md §2.4)
D1_GEN_LENGTHS = (128, 256, 512)  # d1 reports each task at all three (Table 1; docs/d1.md §8.4)
MBPP_TEST_IDS = (11, 510)  # MBPP's test split (its README); d1's 257 = the sanitized records in it

# -----------------------------------------------------------------------------
# The messages, one small function per format


def countdown_question(ex):
    # list(): a tuple or numpy row must print as d1's "[44, 19, 35]", the text LLaDA was trained on
    return COUNTDOWN_QUESTION.format(nums=list(ex["nums"]), target=ex["target"])


def countdown_rl(ex):
    return COUNTDOWN_RL_TEMPLATE.format(nums=list(ex["nums"]), target=ex["target"])


def sudoku_question(ex):
    return SUDOKU_QUESTION.format(puzzle=ex["puzzle"])


def s1k_completion(ex):
    """The s1K assistant turn (docs/d1.md §5.1): no newlines in the tags, unlike the RL format."""
    return "<reasoning>" + ex["trace"] + "</reasoning>\n<answer>" + ex["answer"] + "</answer>"


def code_items(read):
    """A code set's reader (taskdata/code_data.py) with the reference program as the gold answer."""
    return lambda path: [{**ex, "answer": ex["solution"]} for ex in read(path)]


def sudoku_toy(split, n, seed, data_seed=0, blanks=(2, 5), unfilled=0.0):
    """The Sudoku toy from the grids of one side of the split; SFT labels may leave blanks open."""
    exs = puzzles.make_toy(puzzles.split_grids(seed=data_seed)[split == "test"], n, seed, *blanks)
    # partial labels (puzzles.partial_label): imitation leaves blanks open, diffu-GRPO fills them
    return [puzzles.partial_label(ex, unfilled, seed) for ex in exs] if unfilled else exs


def d1_subset(examples):
    return d1_eval_subset(len(examples))  # Countdown and Sudoku: d1's 256 items (docs/d1.md §8.1)


def mbpp_test(examples):
    # d1's 257 MBPP items: the test split, task_id 11-510 (of sanitized MBPP; 500 of the full file)
    return [i for i, ex in enumerate(examples)
            if MBPP_TEST_IDS[0] <= ex["task_id"] <= MBPP_TEST_IDS[1]]


def toy_from_file(path):
    return [puzzles.toy_example(ex["puzzle"], ex["solution"]) for ex in readers.read_sudoku(path)]


# -----------------------------------------------------------------------------
# The registry


# Every record names its fields (taskdata/task.py says each; one left out is d1's setting or
# "none"). Records of ours that need none of d1's rewards live in their module: digitsum, mcq
CODE_SYSTEM = SYSTEM_PROMPT + CODE_RL_INSTRUCTION  # the code tasks' system prompt and instruction
D1_FIELDS = D1_SCORING_FIELDS  # what d1's parsers read, kept in each eval record for --rescore
TASKS = {t.name: t for t in [
    Task(name="gsm8k", prompt=with_system(SYSTEM_PROMPT + "\n\n", question),
         load=readers.read_gsm8k,
         rewards=(R.xmlcount, R.soft_format, R.strict_format, R.int_answer, R.gsm8k_correctness),
         max_reward=4.0, score=each(parsers.score_gsm8k), parser_version=parsers.PARSER_VERSION,
         scoring_fields=D1_FIELDS, eval_system=GSM8K_EVAL_PROMPT),
    # MATH: the instruction carries its own "\n\n" on both sides
    Task(name="math", prompt=with_system(SYSTEM_PROMPT + MATH_RL_INSTRUCTION, question),
         load=readers.read_math, rewards=(R.math_correctness, R.math_format), max_reward=3.0,
         score=each(parsers.score_math), parser_version=parsers.PARSER_VERSION,
         scoring_fields=D1_FIELDS, eval_system=MATH_EVAL_PROMPT),
    # Countdown: only ONE "\n" after the system prompt, which the template carries
    Task(name="countdown", prompt=with_system(SYSTEM_PROMPT, countdown_rl),
         load=readers.read_countdown, rewards=(R.countdown_reward,), max_reward=1.0,
         score=each(parsers.score_countdown), parser_version=parsers.PARSER_VERSION,
         scoring_fields=D1_FIELDS, eval_system=COUNTDOWN_EVAL_PROMPT,
         eval_question=countdown_question, heldout=d1_subset),
    # Sudoku: its own system prompt for RL and eval alike (d1 has no Sudoku eval prompt)
    Task(name="sudoku", prompt=with_system(SUDOKU_SYSTEM_PROMPT + "\n\n", sudoku_question),
         load=readers.read_sudoku, rewards=(R.sudoku_reward,), max_reward=1.0,
         score=each(parsers.score_sudoku), parser_version=parsers.PARSER_VERSION,
         scoring_fields=D1_FIELDS, eval_system=SUDOKU_SYSTEM_PROMPT,
         eval_question=sudoku_question, heldout=d1_subset, cells=True),
    # s1K: SFT data only (no reward or eval parser): SFT system prompt, a blank line, the question
    Task(name="s1k", prompt=with_system(SFT_SYSTEM_PROMPT + "\n\n", question),
         load=readers.read_s1k, sft_completion=s1k_completion),
    # d1's code RL set (KodCode, scored by its pytest source) and the code benchmarks (scored by
    # running program_prefix + code, then unit_tests: ours, d1's code eval was not released); every
    # program runs in sandbox/run.py. The benchmarks are RL-able too; the eval message is the RL one
    Task(name="code", prompt=with_system(CODE_SYSTEM, question),
         load=code_items(code_data.read_kodcode), rewards=(R.xmlcount, R.coding_reward),
         max_reward=2.0),
    Task(name="humaneval", prompt=with_system(CODE_SYSTEM, question),
         load=code_items(code_data.read_humaneval), rewards=(R.xmlcount, R.coding_reward),
         max_reward=2.0, score=parsers.score_code_batch, parser_version="code-1",
         scoring_fields=D1_FIELDS, code=True),
    Task(name="humaneval_plus", prompt=with_system(CODE_SYSTEM, question),
         load=code_items(code_data.read_humaneval), rewards=(R.xmlcount, R.coding_reward),
         max_reward=2.0, score=parsers.score_code_batch, parser_version="code-1",
         scoring_fields=D1_FIELDS, code=True),
    Task(name="mbpp", prompt=with_system(CODE_SYSTEM, question),
         load=code_items(code_data.read_mbpp), rewards=(R.xmlcount, R.coding_reward),
         max_reward=2.0, score=parsers.score_code_batch, parser_version="code-1",
         scoring_fields=D1_FIELDS, heldout=mbpp_test, code=True),
    Task(name="mbpp_plus", prompt=with_system(CODE_SYSTEM, question),
         load=code_items(code_data.read_mbpp_plus), rewards=(R.xmlcount, R.coding_reward),
         max_reward=2.0, score=parsers.score_code_batch, parser_version="code-1",
         scoring_fields=D1_FIELDS, code=True),
    Task(name="leetcode", prompt=with_system(CODE_SYSTEM, question),
         load=code_items(code_data.read_leetcode), rewards=(R.xmlcount, R.coding_reward),
         max_reward=2.0, score=parsers.score_code_batch, parser_version="code-1",
         scoring_fields=D1_FIELDS, code=True),
    # the CPU toys (ours): generated from their own train/test split, bare prompts the makers write
    # (Sudoku toy: "Sudoku: <puzzle>", completion the 16 digits); d1's Sudoku csv files load too
    Task(name="toy", prompt=puzzles.toy_prompt, load=toy_from_file, make=sudoku_toy,
         rewards=(R.toy_reward,), max_reward=1.0, score=each(parsers.score_toy),
         parser_version="toy-1", scoring_fields=D1_FIELDS, eval_prefill="", canvas=16, block=16,
         sft_max_length=63, sft_completion=made_label, eval_batch=100),
    # the code toy (taskdata/pbe.py): d1's coding reward alone, no bonus (a bare fence, no <answer>)
    Task(name="pbe", prompt=made_prompt, make=toy_split(pbe.split_classes, pbe.make_pbe),
         rewards=(R.coding_reward,), max_reward=1.0, score=parsers.score_pbe_batch,
         parser_version="pbe-1", scoring_fields=D1_FIELDS, eval_prefill="", canvas=pbe.CANVAS,
         block=16, sft_max_length=128, sft_completion=made_label, eval_batch=100),
    # the testbed (taskdata/countdown_toy.py), in d1's tags: d1's Countdown reward on its equation
    Task(name="countdown_toy", prompt=made_prompt,
         make=toy_split(countdown_toy.split_multisets, countdown_toy.make_problems),
         rewards=(R.countdown_reward,), max_reward=1.0, score=each(parsers.score_countdown_toy),
         parser_version="countdown_toy-1", scoring_fields=D1_FIELDS, eval_prefill="",
         canvas=48, block=16, sft_max_length=96, sft_completion=made_label, needs_tags=True,
         preset="testbed", eval_batch=100),
    digitsum.TASK,  # README "Adding a task": a generated toy (taskdata/digitsum.py)
    mcq.TASK,  # README "Adding a task": a task read from a file (taskdata/mcq.py)
]}


def get(name):
    """The record of task `name`; an unknown name is one line listing the known ones."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; expected one of {', '.join(TASKS)}")
    return TASKS[name]


def names(has):
    """The tasks with field `has` set, in registry order: names("rewards") = the RL tasks, "score"
    the evaluable ones, "make" the generated toys, "code" the code benchmarks."""
    return tuple(n for n, t in TASKS.items() if getattr(t, has))


# -----------------------------------------------------------------------------
# What the scripts call


def eval_question(task, ex):
    """The question part of d1's eval message (docs/d1.md §8.2): d1's eval files' `question`."""
    return get(task).eval_question(ex)


def eval_message(task, ex):
    """d1's EVAL user message (docs/d1.md §8.2): eval system prompt, blank line, question. Toys and
    code tasks: the training prompt (no d1 eval prompt is known for code, docs/coding.md §1.5)."""
    t = get(task)
    return t.eval_system + "\n\n" + t.eval_question(ex) if t.eval_system else t.prompt(ex)


def eval_prefill(task):
    """What d1's eval puts after the assistant header (docs/d1.md §8.2: eval.py hard-codes
    add_reasoning=True); the toys' answers are bare digits / a bare fence, with no "<reasoning>"."""
    return get(task).eval_prefill


def with_prompt(task, ex):
    """An example of `task` with its training prompt first (and SFT completion, if it has one)."""
    return get(task).with_prompt(ex)


def load_task(name, path):
    """Examples of task `name` from the local file or hub dataset id `path`."""
    return get(name).read_examples(path)


def make_examples(name, split, n, seed, data_seed=0, **kw):
    """n examples of toy `name` from one side ("train" | "test") of its --data-seed split."""
    return get(name).make_examples(split, n, seed, data_seed, **kw)


def generated(task):
    """Whether all of --task (a comma list) are generated CPU toys (whose model may be tiny)."""
    return all(name in TASKS and TASKS[name].make for name in task.split(","))


def check_names(task, has):
    """--task's names (a comma list) are tasks with `has` set (names(has)), or one ValueError."""
    for name in task.split(","):
        if name not in names(has):
            raise ValueError(f"--task: unknown task {name!r}; one of {', '.join(names(has))}")


def check_tags(task, tokenizer):
    """A task needing d1's four tags as single tokens (needs_tags: the testbed, whose short canvas
    the byte tokenizer's 8-12 tokens per tag would fill) refuses a tokenizer that splits them."""
    for name in [n for n in task.split(",") if n in TASKS and TASKS[n].needs_tags]:
        for tag in D1_TAGS:
            n_ids = len(tokenizer(tag, add_special_tokens=False)["input_ids"])
            if n_ids != 1:
                raise ValueError(f"--task {name} needs d1's tags as single tokens, and this "
                                 f"tokenizer writes {tag} in {n_ids}: write the tiny model with "
                                 f"`python -m modelio.checkpoint --tags --out-dir DIR` and pass "
                                 f"--model-dir DIR")


def check_tokenizer(task, tokenizer, examples, canvas=0, flag="--gen-length"):
    """The checks of a model's tokenizer before its weights load: d1's tags (check_tags), and every
    label within `canvas` (grpo.py: --gen-length), else the record's own (sft.py); a task without
    one is not checked (d1's s1K traces are longer than its RL canvas by design)."""
    check_tags(task, tokenizer)
    if canvas:
        check_canvas(task, tokenizer, examples, canvas, flag)
    elif get(task).canvas:  # sft.py: one task
        check_canvas(task, tokenizer, examples, get(task).canvas, f"task {task}'s canvas")


def eval_lengths(task):
    """eval.py's default generation lengths: the task's canvas, or d1's 128, 256 and 512."""
    return (get(task).canvas,) if get(task).canvas else D1_GEN_LENGTHS


TEST_SEED = 12345  # the toys' held-out items: one fixed stream from the test side of the split


def heldout(name, data=None, full=False, n=200, data_seed=0, blanks=(2, 5)):
    """[(item id, example)] that eval.py scores: a toy's n items from the TEST side of its split;
    else the test file's items, d1's subset unless `full` (Countdown, Sudoku: 256 items; MBPP: its
    test split). An id is the item's position in its file: stable, so --compare can pair items."""
    t = get(name)
    if t.make:
        return list(enumerate(t.make_examples("test", n, TEST_SEED, data_seed, blanks=blanks)))
    if not data:
        raise ValueError(f"--task {name} needs --data PATH (its local test file)")
    examples = load_task(name, data)
    ids = t.heldout(examples) if t.heldout and not full else range(len(examples))
    return [(int(i), examples[i]) for i in ids]


def d1_eval_subset(n_items, k=256, seed=42):
    """Indices d1 evaluates: np.random.seed(42); np.random.choice(n, k, replace=False)
    (docs/d1.md §8.1 item 3). n == k (Countdown) -> a permutation, as in d1."""
    # k=None/-1 (GSM8K, MATH: d1's subsample -1) or n < k (where d1 would crash): all items in order
    if k is None or k < 0 or n_items < k:
        return list(range(n_items))
    # private RandomState: np.random.seed(42)+choice's stream (legacy MT19937); global RNG untouched
    return np.random.RandomState(seed).choice(n_items, k, replace=False).tolist()


def score_eval_batch(task, generations, examples):
    """The task's eval parser over many items (the code tasks run their programs in parallel)."""
    t = get(task)
    if t.score is None:
        raise ValueError(f"task {task!r} has no eval parser; evaluable: "
                         f"{', '.join(names('score'))}")
    return t.score(generations, examples)


def score_eval(task, generation, example):
    """One generation scored by `task`'s d1 eval parser (what each returns: taskdata/parsers.py)."""
    return score_eval_batch(task, [generation], [example])[0]


def total_reward(task, completion, example):
    """(sum of the task's rewards, {function name: value}) (rewards.sum_rewards)."""
    return R.sum_rewards(get(task).rewards, completion, example)


def total_rewards(completions, examples):
    """[total_reward(ex["task"], completion, ex)], the programs of a group run in parallel."""
    return R.sum_rewards_batch(completions, examples, lambda ex: get(ex["task"]).rewards)


# -----------------------------------------------------------------------------
if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print the rendered RL and eval prompts of every "
                                     "task, or (--lengths) what one task's lengths must hold")
    parser.add_argument("--model-dir", type=str, default=None,
                        help="tokenizer: a model directory or hub id (default: a fresh tiny one)")
    parser.add_argument("--data-dir", type=str,
                        default=str(Path(__file__).resolve().parent.parent / "shared" / "data"),
                        help="the shared data folder (../shared/data)")
    parser.add_argument("--task", type=str, default="", help="one task (default: every task)")
    parser.add_argument("--data", type=str, default="", help="--task's file or hub id (default: "
                        "the shared data's, where there is one)")
    parser.add_argument("--lengths", action="store_true", help="--task's longest label and prompt "
                        "under the model's tokenizer and template: its canvas and sft_max_length")
    args = parser.parse_args()
    tok = (load_tokenizer(resolve_model(args.model_dir).path) if args.model_dir
           else make_tiny_tokenizer())  # byte-level, with LLaDA's chat template: the real rendering
    data = Path(args.data_dir)
    if args.lengths:  # every training and held-out label of a toy, every record of a file
        t = get(args.task)
        exs = t.make_examples("train", 2000, 0) + [ex for _, ex in heldout(args.task)] if t.make \
            else load_task(args.task, args.data)
        try:  # a tokenizer that splits d1's tags: the record is not for it
            check_tags(args.task, tok)
        except ValueError as e:
            raise SystemExit(f"tasks.py: {e}") from None
        report, ok = lengths_report(t, tok, exs, args.model_dir or "the tiny model")
        print(report)
        raise SystemExit(0 if ok else 1)  # 1: a record's length is too short for its labels
    # a file's first item, else hand-written: d1's Countdown example, a 6-blank grid, two questions
    files = {"gsm8k": "gsm8k/test.jsonl", "math": "math500/test.jsonl",
             "sudoku": "d1_sudoku/4x4_test_sudoku.csv",
             "countdown": "d1_countdown/countdown_cd3_test.jsonl",
             "humaneval": "humaneval/HumanEval.jsonl.gz"}
    stand_ins = {
        "gsm8k": {"question": "Tom has 3 apples and buys 4 more. How many apples does he have?",
                  "answer": "7"}, "math": {"question": "What is $2^{10}$?", "answer": "1024"},
        "countdown": {"nums": [2, 3, 4], "target": 5, "answer": "5"},
        "sudoku": {"puzzle": "1030301221404020", "solution": "1234341221434321",
                   "answer": "1234341221434321"}}
    for task, t in TASKS.items() if not args.task else [(args.task, get(args.task))]:
        if t.make:  # the toys generate theirs
            ex = t.make_examples("test", 1, seed=0)[0]
        elif args.data or task in files and (data / files[task]).is_file():
            ex = load_task(task, args.data or data / files[task])[0]
        elif task in stand_ins:
            ex = with_prompt(task, stand_ins[task])
        else:  # s1K, KodCode, the other code sets, a task of ours read from a file
            print(f"===== {task}: read from a file, none here: python tasks.py --task {task} "
                  f"--data FILE\n")
            continue
        # RL: the user message, uncut (the header says what d1's left cut keeps); eval: + prefill
        rl = prompt_ids(tok, ex["prompt"])
        ev = prompt_ids(tok, eval_message(task, ex), prefill=eval_prefill(task))
        print(f"===== {task}  (answer {str(ex['answer'])[:40]!r}; RL prompt {len(rl)} tokens, "
              f"eval prompt {len(ev)} tokens; d1 RL keeps the last {MAX_PROMPT_LENGTH})")
        print(f"--- RL prompt ---\n{tok.decode(rl)}\n--- eval prompt ---\n{tok.decode(ev)}\n")
