"""
The tasks: d1's exact prompt strings and the task registry, TASKS. A task's record (Task, in
taskdata/task.py) is all a script needs: how to read (a file or hub id) or generate it,
training and d1's eval prompts, rewards and their maximum, the eval parser with its version and
the fields it reads, the canvas and SFT lengths (nowhere else), SFT completion, held-out split,
whether the tiny model needs d1's tags as single tokens. sft.py, grpo.py, eval.py and the tests
read it; a new task is its module (data functions and record), one line here, and its tests
(README "Adding a task").

Examples are plain dicts: `prompt` (the training user message, NOT yet chat-rendered: d1's RL
prompt, docs/d1.md §7.1; s1K's SFT message, §5.1), `answer` (gold, as text), the task's own
fields (taskdata/readers.py and code_data.py, the toys' makers), for SFT `completion`.
eval_message() builds d1's eval prompts (docs/d1.md §8.2: \\boxed{} format, "<reasoning>"
prefill). Token ids come only from modelio/tokenizer.prompt_ids(); docs/d1.md §2.4: the chat
template trims the message (a system prompt's leading "\\n" goes), and d1's RL left cut to
MAX_PROMPT_LENGTH tokens (taskdata/task.py) is prompt_ids' max_length.

    python tasks.py [--model-dir DIR]   # one example's rendered RL and eval prompts per task
    python tasks.py --lengths --task mcq --data out/mcq/train.jsonl  # what its lengths hold
"""
import rewards as R
from modelio.tokenizer import D1_TAGS
from taskdata import (code_data, countdown_toy, digitsum, mcq, parsers, pbe, puzzles, readers,
                      show)
from taskdata.splits import d1_subset
from taskdata.task import (D1_GEN_LENGTHS, D1_SCORING_FIELDS, Task, check_canvas, each,
                           made_label, made_prompt, question, toy_split, with_system)

# -----------------------------------------------------------------------------
# Prompt strings, character-exact to d1 @ 837888f (docs/d1.md §5.1, §7.1, §8.2). Do not
# "tidy" them: the odd spaces, stray quote and missing separators are what LLaDA was trained
# and evaluated on.
# RL system prompt (docs/d1.md §7.1): GSM8K, MATH, Countdown; the template trims its first
# "\n".
SYSTEM_PROMPT = ("\nRespond in the following format:\n<reasoning>\n...\n</reasoning>\n"
                 "<answer>\n...\n</answer>\n")
# SFT system prompt (docs/d1.md §5.1): "Your reasoning here" where the RL prompt says "...".
SFT_SYSTEM_PROMPT = ("\nRespond in the following format:\n<reasoning>\nYour reasoning here\n"
                     "</reasoning>\n<answer>\n...\n</answer>\n")
# Inserted between SYSTEM_PROMPT and the MATH problem during RL (note the space before "\n\n").
MATH_RL_INSTRUCTION = ("\n\nYou are a math expert. You will be given a question to solve. "
                       "Solve it step by step. Wrap the final answer in a \\boxed{}. \n\n")
# Countdown RL instruction, {nums} the list repr, e.g. [44, 19, 35]; ONE "\n" after
# SYSTEM_PROMPT.
COUNTDOWN_RL_TEMPLATE = (
    "\nUsing only the numbers {nums}, create an arithmetic expression that evaluates to "
    "exactly {target}. You must use all numbers from the list, and each number must be used "
    "exactly once. You may use the operations +, -, *, and / as needed. After reasoning, "
    "provide only your final expression inside <answer></answer> tags without including an "
    "equals sign or the target number. For example, if the numbers are [2, 3, 4] and the "
    "target is 5, a valid answer is: <answer>\n2*4-3\n</answer>")
# Sudoku system prompt, RL and eval alike (docs/d1.md §7.1); line by line: every "\n" shows.
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
    "Important: Your solution must be a COMPLETE 16-character string with only the digits "
    "1-4, representing your final solved grid.\n"
    "\n"
    "Respond in this exact format:\n"
    "<reasoning>\n"
    "Your step-by-step solving process\n"
    "</reasoning>\n"
    "<answer>\n"
    "[16-character solution string with no spaces or separators]\n"
    "</answer>\n")
SUDOKU_QUESTION = "Solve the following Sudoku puzzle: {puzzle}\n"  # after "\n\n", RL and eval
# Eval system prompts (docs/d1.md §8.2). GSM8K: a space after "\boxed{}.".
GSM8K_EVAL_PROMPT = ("You are a math expert. You will be given a question to solve. "
                     "Solve it step by step. Wrap the final answer in a \\boxed{}. \n"
                     "Respond in the following format:\n<reasoning>\nYour reasoning here\n"
                     "</reasoning>\n<answer>\n\\boxed{...}\n</answer>")
# MATH500: no space after "\boxed{}.", a stray '" \n' after </answer> (d1's triple-quote typo)
MATH_EVAL_PROMPT = ("You are a math expert. You will be given a question to solve. "
                    "Solve it step by step. Wrap the final answer in a \\boxed{}.\n"
                    "Respond in the following format:\n<reasoning>\nYour reasoning here\n"
                    "</reasoning>\n<answer>\n\\boxed{...}\n</answer>\" \n")
# Countdown: d1 concatenates two strings with no separator, hence "c}Respond".
COUNTDOWN_EVAL_PROMPT = (
    "Using only the provided numbers, create an arithmetic expression that evaluates to "
    "exactly the provided target number. You may use the operations +, -, *, and / as needed, "
    "but each number must be used exactly once. Think step-by-step. After reasoning, provide "
    "only your final expression inside \\boxed{} tags without including an equals sign or the "
    "target number. For example: \\boxed{a + b * c}Respond in the following format:\n"
    "<reasoning>\nYour reasoning here\n</reasoning>\n<answer>\n\\boxed{...}\n</answer>")
COUNTDOWN_QUESTION = "Numbers: {nums}\nTarget: {target}"  # docs/d1.md §8.2; {nums}: a list
# Code (docs/coding.md §1.1: d1's later get_code_questions): SYSTEM_PROMPT, this (space
# before "\n\n", as in d1's f-string), the question: KodCode's, or the code test sets' (ours,
# d1's code eval was not released, docs/coding.md §1.5), which taskdata/code_data.py writes.
CODE_RL_INSTRUCTION = ("\n\nYou are a coding expert. You will be given a coding problem to "
                       "solve. Solve it step by step. \n\n")

# -----------------------------------------------------------------------------
# The messages, one small function per format


def countdown_question(ex):
    # list(): a tuple or numpy row must print as d1's "[44, 19, 35]", the text LLaDA trained on
    return COUNTDOWN_QUESTION.format(nums=list(ex["nums"]), target=ex["target"])


def countdown_rl(ex):
    return COUNTDOWN_RL_TEMPLATE.format(nums=list(ex["nums"]), target=ex["target"])


def sudoku_question(ex):
    return SUDOKU_QUESTION.format(puzzle=ex["puzzle"])


def s1k_completion(ex):
    """The s1K assistant turn (docs/d1.md §5.1): no newlines in the tags, unlike RL's."""
    return "<reasoning>" + ex["trace"] + "</reasoning>\n<answer>" + ex["answer"] + "</answer>"


# -----------------------------------------------------------------------------
# The registry


# Every record names its fields (taskdata/task.py says each; one left out is d1's setting or
# "none"). Records of ours that need none of d1's rewards live in their module: digitsum, mcq
CODE_SYSTEM = SYSTEM_PROMPT + CODE_RL_INSTRUCTION  # the code tasks' system prompt, instruction
CODE_PROMPT = with_system(CODE_SYSTEM, question)
CODE_REWARDS = (R.xmlcount, R.coding_reward)  # d1's code reward list, max 2.0
D1_FIELDS = D1_SCORING_FIELDS  # what d1's parsers read, kept in each eval record for --rescore
TASKS = {t.name: t for t in [
    Task(name="gsm8k", prompt=with_system(SYSTEM_PROMPT + "\n\n", question),
         load=readers.read_gsm8k,
         rewards=(R.xmlcount, R.soft_format, R.strict_format, R.int_answer,
                  R.gsm8k_correctness),
         max_reward=4.0, score=each(parsers.score_gsm8k),
         parser_version=parsers.PARSER_VERSION, scoring_fields=D1_FIELDS,
         eval_system=GSM8K_EVAL_PROMPT),
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
    # s1K: SFT data only (no reward or eval parser): SFT system prompt, blank line, question
    Task(name="s1k", prompt=with_system(SFT_SYSTEM_PROMPT + "\n\n", question),
         load=readers.read_s1k, sft_completion=s1k_completion),
    # d1's code RL set (KodCode, scored by its pytest source) and the code test sets (scored by
    # running program_prefix + code, then unit_tests: ours, d1's code eval was not released);
    # every program runs in sandbox/run.py. The test sets are RL-able too; the eval message is
    # the RL one
    Task(name="code", prompt=CODE_PROMPT, load=code_data.with_answer(code_data.read_kodcode),
         rewards=CODE_REWARDS, max_reward=2.0),
    Task(name="humaneval", prompt=CODE_PROMPT,
         load=code_data.with_answer(code_data.read_humaneval), rewards=CODE_REWARDS,
         max_reward=2.0, score=parsers.score_code_batch, parser_version="code-1",
         scoring_fields=D1_FIELDS, code=True),
    Task(name="humaneval_plus", prompt=CODE_PROMPT,
         load=code_data.with_answer(code_data.read_humaneval), rewards=CODE_REWARDS,
         max_reward=2.0, score=parsers.score_code_batch, parser_version="code-1",
         scoring_fields=D1_FIELDS, code=True),
    Task(name="mbpp", prompt=CODE_PROMPT,
         load=code_data.with_answer(code_data.read_mbpp), rewards=CODE_REWARDS,
         max_reward=2.0, score=parsers.score_code_batch, parser_version="code-1",
         scoring_fields=D1_FIELDS, heldout=code_data.mbpp_test, code=True),
    Task(name="mbpp_plus", prompt=CODE_PROMPT,
         load=code_data.with_answer(code_data.read_mbpp_plus), rewards=CODE_REWARDS,
         max_reward=2.0, score=parsers.score_code_batch, parser_version="code-1",
         scoring_fields=D1_FIELDS, code=True),
    Task(name="leetcode", prompt=CODE_PROMPT,
         load=code_data.with_answer(code_data.read_leetcode), rewards=CODE_REWARDS,
         max_reward=2.0, score=parsers.score_code_batch, parser_version="code-1",
         scoring_fields=D1_FIELDS, code=True),
    # the CPU toys (ours): generated from their own train/test split, bare prompts the makers
    # write (Sudoku toy: "Sudoku: <puzzle>", completion the 16 digits); d1's Sudoku csv files
    # load too
    Task(name="toy", prompt=puzzles.toy_prompt, load=puzzles.read_toy, make=puzzles.sudoku_toy,
         rewards=(R.toy_reward,), max_reward=1.0, score=each(parsers.score_toy),
         parser_version="toy-1", scoring_fields=D1_FIELDS, eval_prefill="", canvas=16,
         block=16, sft_max_length=63, sft_completion=made_label, eval_batch=100),
    # the code toy (taskdata/pbe.py): d1's coding reward alone, no bonus (a bare fence)
    Task(name="pbe", prompt=made_prompt, make=toy_split(pbe.split_classes, pbe.make_pbe),
         rewards=(R.coding_reward,), max_reward=1.0, score=parsers.score_pbe_batch,
         parser_version="pbe-1", scoring_fields=D1_FIELDS, eval_prefill="",
         canvas=pbe.CANVAS, block=16, sft_max_length=128, sft_completion=made_label,
         eval_batch=100),
    # the testbed (taskdata/countdown_toy.py), in d1's tags: d1's Countdown reward
    Task(name="countdown_toy", prompt=made_prompt,
         make=toy_split(countdown_toy.split_multisets, countdown_toy.make_problems),
         rewards=(R.countdown_reward,), max_reward=1.0,
         score=each(parsers.score_countdown_toy), parser_version="countdown_toy-1",
         scoring_fields=D1_FIELDS, eval_prefill="", canvas=48, block=16, sft_max_length=96,
         sft_completion=made_label, needs_tags=True, preset="testbed", eval_batch=100),
    digitsum.TASK,  # README "Adding a task": a generated toy (taskdata/digitsum.py)
    mcq.TASK,  # README "Adding a task": a task read from a file (taskdata/mcq.py)
]}


def get(name):
    """The record of task `name`; an unknown name is one line listing the known ones."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; expected one of {', '.join(TASKS)}")
    return TASKS[name]


def names(has):
    """The tasks with field `has` set, in registry order: names("rewards") = the RL tasks,
    "score" the evaluable ones, "make" the generated toys, "code" the code test sets."""
    return tuple(n for n, t in TASKS.items() if getattr(t, has))


# -----------------------------------------------------------------------------
# What the scripts call


def eval_question(task, ex):
    """The question part of d1's eval message (docs/d1.md §8.2): its eval files' `question`."""
    return get(task).eval_question(ex)


def eval_message(task, ex):
    """d1's EVAL user message (docs/d1.md §8.2): eval system prompt, blank line, question.
    Toys and code tasks: the training prompt (d1 has no code eval prompt: docs/coding.md
    §1.5)."""
    t = get(task)
    return t.eval_system + "\n\n" + t.eval_question(ex) if t.eval_system else t.prompt(ex)


def eval_prefill(task):
    """What d1's eval puts after the assistant header (docs/d1.md §8.2: eval.py hard-codes
    add_reasoning=True); the toys' answers are bare digits / a bare fence, no "<reasoning>"."""
    return get(task).eval_prefill


def with_prompt(task, ex):
    """An example of `task` with its training prompt first (and SFT completion, if any)."""
    return get(task).with_prompt(ex)


def load_task(name, path):
    """Examples of task `name` from the local file or hub dataset id `path`."""
    return get(name).read_examples(path)


def make_examples(name, split, n, seed, data_seed=0, **kw):
    """n examples of toy `name` from one side ("train" | "test") of its --data-seed split."""
    return get(name).make_examples(split, n, seed, data_seed, **kw)


def generated(task):
    """Whether all of --task (a comma list) are generated CPU toys (its model may be tiny)."""
    return all(name in TASKS and TASKS[name].make for name in task.split(","))


def check_tags(task, tokenizer):
    """A task needing d1's four tags as single tokens (needs_tags: the testbed, whose short
    canvas the byte tokenizer's 8-12 tokens per tag would fill) refuses a tokenizer that splits
    them."""
    for name in [n for n in task.split(",") if n in TASKS and TASKS[n].needs_tags]:
        for tag in D1_TAGS:
            n_ids = len(tokenizer(tag, add_special_tokens=False)["input_ids"])
            if n_ids != 1:
                raise ValueError(f"--task {name} needs d1's tags as single tokens, and this "
                                 f"tokenizer writes {tag} in {n_ids}: write the tiny model "
                                 f"with `python -m modelio.checkpoint --tags --out-dir DIR` "
                                 f"and pass --model-dir DIR")


def check_tokenizer(task, tokenizer, examples, canvas=0, flag="--gen-length"):
    """The checks of a model's tokenizer before its weights load: d1's tags (check_tags), and
    every label within `canvas` (grpo.py: --gen-length), else the record's own (sft.py); a task
    without one is not checked (d1's s1K traces are longer than its RL canvas by design)."""
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
    """[(item id, example)] that eval.py scores: a toy's n items from the TEST side of its
    split; else the test file's items, d1's subset unless `full` (Countdown, Sudoku: 256 items;
    MBPP: its test split). An id is the item's position in its file: stable, so --compare can
    pair items."""
    t = get(name)
    if t.make:
        return list(enumerate(t.make_examples("test", n, TEST_SEED, data_seed, blanks=blanks)))
    if not data:
        raise ValueError(f"--task {name} needs --data: its test file, or a hub dataset id "
                         "owner/name[:config][:split]")
    examples = load_task(name, data)
    ids = t.heldout(examples) if t.heldout and not full else range(len(examples))
    return [(int(i), examples[i]) for i in ids]


def score_eval_batch(task, generations, examples):
    """The task's eval parser over many items (code tasks run their programs in parallel)."""
    t = get(task)
    if t.score is None:
        raise ValueError(f"task {task!r} has no eval parser; evaluable: "
                         f"{', '.join(names('score'))}")
    return t.score(generations, examples)


def score_eval(task, generation, example):
    """One generation scored by `task`'s eval parser (their returns: taskdata/parsers.py)."""
    return score_eval_batch(task, [generation], [example])[0]


def total_reward(task, completion, example):
    """(sum of the task's rewards, {function name: value}) (rewards.sum_rewards)."""
    return R.sum_rewards(get(task).rewards, completion, example)


def total_rewards(completions, examples):
    """[total_reward(ex["task"], completion, ex)], the programs of a group run in parallel."""
    return R.sum_rewards_batch(completions, examples, lambda ex: get(ex["task"]).rewards)


# -----------------------------------------------------------------------------
if __name__ == "__main__":
    # one example's rendered RL and eval prompts per task, or --lengths (taskdata/show.py)
    show.main(TASKS, heldout, eval_message, check_tags)
