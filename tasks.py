"""
The d1 tasks: the exact d1 prompt strings and the data loaders.

Every example is a plain dict. Always present: `prompt` (the d1 RL user message, docs/d1.md §7.1, NOT yet
chat-rendered) and `answer` (the gold answer as a string). Per task also:
  gsm8k      question, solution (full worked answer ending "#### N"; answer = text after ####)
  math       question (= problem), solution when the file has one (d1's RL reward boxes it at reward time)
  countdown  nums (list[int]), target (int); generated ones add `expression` (one solution)
  sudoku     puzzle, solution (16-char strings, '0' = blank)
  toy        puzzle, solution, completion (= solution: the SFT target of the CPU demo)
  s1k        question, completion (the SFT assistant turn, §5.1); prompt is the SFT user message
  code       question, solution (reference program, = answer), tests (KodCode's pytest source, d1's reward)
  humaneval, humaneval_plus, mbpp, mbpp_plus, leetcode (the code benchmarks; RL-able too):
             question, solution (reference, = answer), entry_point, task_id, program_prefix (code that
             goes before the model's: HumanEval's prompt, MBPP's test imports), unit_tests (list of
             snippets run after program_prefix + code; each passes if it raises nothing)
The eval prompts differ from the RL ones (docs/d1.md §8.2: \\boxed{} format, "<reasoning>" prefill); eval_message()
builds them. tokenizer.prompt_ids() is the only place a user message becomes token ids.
docs/d1.md §2.4: the chat template trims the message, so the leading "\\n" of every system prompt
disappears when rendered; RL left-truncation to the last MAX_PROMPT_LENGTH tokens is prompt_ids' max_length.

Every loader reads taskdata/records.py's records: local jsonl / json / csv / parquet files, or hub dataset ids
(owner/name[:config][:split], through the optional `datasets`), with the hub's column names, as d1 loads
its GSM8K / MATH / Countdown train sets from the hub (docs/training.md).
The code sets' readers are taskdata/code_data.py, the record reading under every loader taskdata/records.py;
the procedural Sudoku / toy / Countdown makers are puzzles.py; d1's eval parsers are parsers.py.

Print the rendered RL and eval prompts of one example per task, the first of its data file or a
hand-written stand-in (tiny byte-level tokenizer unless --model-dir is given):
    python tasks.py
    python tasks.py --model-dir /path/to/LLaDA-8B-Instruct --data-dir ../shared/data
"""
import argparse
import math
from pathlib import Path

import numpy as np

from taskdata import code_data
from taskdata.answers import last_boxed
from taskdata.code_data import check_tests  # noqa: F401 (tasks.check_tests: the benchmarks' test splitter)
from taskdata.records import check_text, describe, field, read_records

# the code tasks: d1's RL set (KodCode, scored by d1's own test rewriting) and the benchmarks (scored by
# running program_prefix + code, then unit_tests); every one is scored by executing code in sandbox/run.py
CODE_BENCHMARKS = ("humaneval", "humaneval_plus", "mbpp", "mbpp_plus", "leetcode")
CODE_TASKS = ("code", *CODE_BENCHMARKS)
# the CPU toys (ours): the Sudoku toy and the code toy (pbe.py, programming by example); generated, bare prompts
TOY_TASKS = ("toy", "pbe", "countdown_toy")
TASKS = ("gsm8k", "math", "countdown", "sudoku", *TOY_TASKS, *CODE_TASKS)

# -----------------------------------------------------------------------------
# Prompt strings, character-exact to d1 @ 837888f (docs/d1.md §5.1, §7.1, §8.2). Do not "tidy" them:
# the odd spaces, the stray quote and the missing separators are what LLaDA was trained/evaluated on.

# RL system prompt (docs/d1.md §7.1), shared by GSM8K, MATH and Countdown. The leading "\n" is trimmed by the template.
SYSTEM_PROMPT = "\nRespond in the following format:\n<reasoning>\n...\n</reasoning>\n<answer>\n...\n</answer>\n"
# SFT system prompt (docs/d1.md §5.1): "Your reasoning here" where the RL prompt says "...".
SFT_SYSTEM_PROMPT = ("\nRespond in the following format:\n<reasoning>\nYour reasoning here\n</reasoning>\n"
                     "<answer>\n...\n</answer>\n")
# Inserted between SYSTEM_PROMPT and the MATH problem during RL (note the space before "\n\n").
MATH_RL_INSTRUCTION = ("\n\nYou are a math expert. You will be given a question to solve. Solve it step by step. "
                       "Wrap the final answer in a \\boxed{}. \n\n")
# Countdown RL instruction; {nums} is the Python list repr, e.g. [44, 19, 35]. Only ONE "\n" after SYSTEM_PROMPT.
COUNTDOWN_RL_TEMPLATE = (
    "\nUsing only the numbers {nums}, create an arithmetic expression that evaluates to exactly {target}. "
    "You must use all numbers from the list, and each number must be used exactly once. "
    "You may use the operations +, -, *, and / as needed. After reasoning, provide only your final "
    "expression inside <answer></answer> tags without including an equals sign or the target number. "
    "For example, if the numbers are [2, 3, 4] and the target is 5, a valid answer is: <answer>\n2*4-3\n</answer>")
# Sudoku system prompt, RL and eval alike (docs/d1.md §7.1); written line by line so every "\n" is visible.
SUDOKU_SYSTEM_PROMPT = (
    "\n"
    "Please solve the following 4x4 Sudoku puzzle. The puzzle is provided as a 16-character string reading "
    "left-to-right, top-to-bottom, where '0' represents empty cells.\n"
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
SUDOKU_QUESTION = "Solve the following Sudoku puzzle: {puzzle}\n"  # RL prompt adds "\n\n" before it, as eval does
# Eval system prompts (docs/d1.md §8.2). GSM8K: a space after "\boxed{}.".
GSM8K_EVAL_PROMPT = ("You are a math expert. You will be given a question to solve. Solve it step by step. "
                     "Wrap the final answer in a \\boxed{}. \nRespond in the following format:\n<reasoning>\n"
                     "Your reasoning here\n</reasoning>\n<answer>\n\\boxed{...}\n</answer>")
# MATH500: no space after "\boxed{}.", and a stray '" \n' after </answer> (a typo in d1's triple-quoted string).
MATH_EVAL_PROMPT = ("You are a math expert. You will be given a question to solve. Solve it step by step. "
                    "Wrap the final answer in a \\boxed{}.\nRespond in the following format:\n<reasoning>\n"
                    "Your reasoning here\n</reasoning>\n<answer>\n\\boxed{...}\n</answer>\" \n")
# Countdown: d1 concatenates two strings with no separator, hence "c}Respond".
COUNTDOWN_EVAL_PROMPT = (
    "Using only the provided numbers, create an arithmetic expression that evaluates to exactly the provided "
    "target number. You may use the operations +, -, *, and / as needed, but each number must be used exactly "
    "once. Think step-by-step. After reasoning, provide only your final expression inside \\boxed{} tags without "
    "including an equals sign or the target number. For example: \\boxed{a + b * c}Respond in the following "
    "format:\n<reasoning>\nYour reasoning here\n</reasoning>\n<answer>\n\\boxed{...}\n</answer>")
# Countdown eval question (docs/d1.md §8.2): {nums} is again the list repr, "Numbers: [44, 19, 35]\nTarget: 98"
COUNTDOWN_QUESTION = "Numbers: {nums}\nTarget: {target}"
# Sudoku has no eval prompt of its own: d1 evaluates it with the RL system prompt
EVAL_PROMPTS = {"gsm8k": GSM8K_EVAL_PROMPT, "math": MATH_EVAL_PROMPT,
                "countdown": COUNTDOWN_EVAL_PROMPT, "sudoku": SUDOKU_SYSTEM_PROMPT}
EVAL_PREFILL = "<reasoning>"  # eval.py hard-codes add_reasoning=True: the assistant turn starts with it
# Code (docs/coding.md §1.1: d1's later get_code_questions): SYSTEM_PROMPT, this, then the KodCode question.
# Note the space before "\n\n" at the end, as in d1's f-string.
CODE_RL_INSTRUCTION = ("\n\nYou are a coding expert. You will be given a coding problem to solve. Solve it step by step. "
                       "\n\n")
# The benchmarks' questions, which go after it, are ours (d1's code eval script was not released,
# docs/coding.md §1.5): taskdata/code_data.py writes them as it reads the files.
# The CPU toy task: a bare prompt, since with the byte-level tiny tokenizer every prompt character is a token.
TOY_PROMPT = "Sudoku: {puzzle}"
MAX_PROMPT_LENGTH = 200  # d1's RL max_prompt_length: keep the LAST 200 prompt tokens (docs/d1.md §2.4)


def rl_prompt(task, ex):
    """The d1 RL user message (docs/d1.md §7.1) for an example holding question / nums+target / puzzle."""
    if task == "gsm8k":
        # GSM8K: system prompt, blank line, question
        return SYSTEM_PROMPT + "\n\n" + ex["question"]
    if task == "math":
        # MATH: the instruction carries its own "\n\n" on both sides
        return SYSTEM_PROMPT + MATH_RL_INSTRUCTION + ex["question"]
    if task == "countdown":
        # list(): a tuple or numpy row must still print as d1's "[44, 19, 35]", the text LLaDA was trained on
        return SYSTEM_PROMPT + COUNTDOWN_RL_TEMPLATE.format(nums=list(ex["nums"]), target=ex["target"])
    if task == "sudoku":
        # Sudoku: its own system prompt, then the same question line as the eval prompt
        return SUDOKU_SYSTEM_PROMPT + "\n\n" + SUDOKU_QUESTION.format(puzzle=ex["puzzle"])
    if task == "toy":
        # toy (ours): no system prompt at all; with the byte tokenizer each character is a token
        return TOY_PROMPT.format(puzzle=ex["puzzle"])
    if task in ("pbe", "countdown_toy"):
        # the code toy and the testbed (ours): their makers write the bare prompt, "f(1)=4;f(2)=7;..." and
        # "Countdown: 3 5 7 -> 22"
        return ex["prompt"]
    if task in CODE_TASKS:
        # d1's code prompt (docs/coding.md §1.1), for KodCode and the benchmarks alike
        return SYSTEM_PROMPT + CODE_RL_INSTRUCTION + ex["question"]
    raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")


def eval_question(task, ex):
    """The question part of d1's eval message (docs/d1.md §8.2); the text d1's eval files store as `question`."""
    if task == "countdown":
        # the same list repr as the RL prompt
        return COUNTDOWN_QUESTION.format(nums=list(ex["nums"]), target=ex["target"])
    if task == "sudoku":
        return SUDOKU_QUESTION.format(puzzle=ex["puzzle"])
    return ex["question"]  # GSM8K question / MATH problem, verbatim


def eval_message(task, ex):
    """The d1 EVAL user message (docs/d1.md §8.2): eval system prompt + "\\n\\n" + question. The toys and the
    code tasks are evaluated on their training prompt."""
    if task in TOY_TASKS or task in CODE_TASKS:
        # no d1 eval prompt is known for code (docs/coding.md §1.5): the RL message, which an RL-trained
        # model knows; the toys have a single bare format
        return rl_prompt(task, ex)
    if task not in EVAL_PROMPTS:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    # eval.py joins the eval system prompt and the question with a blank line, for every task
    return EVAL_PROMPTS[task] + "\n\n" + eval_question(task, ex)


def eval_prefill(task):
    """What d1's eval puts after the assistant header (docs/d1.md §8.2: eval.py hard-codes add_reasoning=True).
    The toys get no "<reasoning>" prefill: their answers are 16 bare digits / a bare fenced one-liner."""
    return "" if task in TOY_TASKS else EVAL_PREFILL


def sudoku_example(puzzle, solution):
    """One example in d1's Sudoku format (RL prompt docs/d1.md §7.1; the gold answer is the 16-digit solution)."""
    # answer = solution: the Sudoku reward and eval parser score cells against these 16 digits
    ex = {"puzzle": puzzle, "solution": solution, "answer": solution}
    return {"prompt": rl_prompt("sudoku", ex), **ex}


def toy_example(puzzle, solution):
    """One toy example: the same puzzle behind a bare prompt, and the solution as the SFT completion."""
    # completion = solution: the CPU demo's SFT target is the bare 16 digits (puzzles.partial_label
    # may blank some of them out later)
    ex = {"puzzle": puzzle, "solution": solution, "answer": solution, "completion": solution}
    return {"prompt": rl_prompt("toy", ex), **ex}


# -----------------------------------------------------------------------------
# Loaders. Every failure is one ValueError / FileNotFoundError naming the file (and line or record):
# taskdata/records.py reads the records, each with where it came from.

def load_gsm8k(path):
    """GSM8K jsonl (question, answer ending "#### N"). answer = text after "####", stripped, like d1's
    extract_hash_answer (the RL gold is compared as an exact string)."""
    out = []
    for where, rec in read_records(path):
        question, solution = field(rec, "question", where, str), field(rec, "answer", where, str)
        # every GSM8K solution ends in "#### N": one without it is a broken file, said here and not at reward time
        if "####" not in solution:
            raise ValueError(f"{where}: field 'answer' has no '#### <answer>' line")
        # split("####")[1], not [-1]: d1's extract_hash_answer; commas such as "1,000" are kept as d1 keeps them
        ex = {"question": question, "solution": solution, "answer": solution.split("####")[1].strip()}
        out.append({"prompt": rl_prompt("gsm8k", ex), **ex})
    return out


def load_math(path):
    """MATH jsonl (problem + answer and/or solution). answer = the `answer` field (MATH-500) or else the last
    \\boxed{} of `solution` (full MATH test, and d1's RL train set which only has solutions)."""
    out = []
    for where, rec in read_records(path):
        # d1 reads the `problem` column; here it is `question`, as in every task
        ex = {"question": field(rec, "problem", where, str)}
        # a null is no value (a parquet column with gaps): it would otherwise become the gold answer 'None'
        if rec.get("solution") is not None:
            # kept when present: d1's RL reward reads the gold answer out of it at reward time (docs/d1.md §6.2)
            ex["solution"] = field(rec, "solution", where, str)
        if rec.get("answer") is not None:  # MATH-500's own answer column: d1's eval compares against exactly this
            ex["answer"] = _math_answer(rec["answer"], where)
        else:
            # only a solution (d1's RL train set): the gold is its last box, the reading the reward also uses
            ex["answer"] = last_boxed(field(rec, "solution", where))
            if ex["answer"] is None:
                raise ValueError(f"{where}: no 'answer' field and no balanced \\boxed{{}} in 'solution'")
        out.append({"prompt": rl_prompt("math", ex), **ex})
    return out


def _math_answer(answer, where):
    """MATH-500's answer as text: a string, or a number a hand-written file may hold (5, 0.5). A bool or a
    float nan / inf (a parquet float column) would become the gold 'True' or 'nan': refused."""
    number = isinstance(answer, (int, float)) and not isinstance(answer, bool) and math.isfinite(answer)
    if not (isinstance(answer, str) or number):
        raise ValueError(f"{where}: field 'answer' must be a string or a finite number, got {describe(answer)}")
    return str(answer)


def _integer(value):
    """An int, a string of one (d1's file: "30") or an integral float (44.0); None for anything else: int()
    alone would take True as 1, cut 3.7 to 3 and raise OverflowError for inf."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None  # is_integer: False for nan and inf
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def load_countdown(path, n_numbers=3):
    """Countdown jsonl: d1's test format {"input": "a,b,c", "output": "T"} or HF rows {"nums": [...],
    "target": T}. Keeps only rows with n_numbers numbers (d1 filters the 3to4 train set to 3; None keeps all)."""
    out = []
    for where, rec in read_records(path):
        d1_format = isinstance(rec, dict) and "input" in rec  # d1's test file: "30,100,93" and "23", strings
        # d1's file stores the numbers as one string "30,100,93", HF rows as a list of ints
        raw_nums = field(rec, "input" if d1_format else "nums", where, str if d1_format else list)
        raw_target = field(rec, "output" if d1_format else "target", where)
        nums = [_integer(x) for x in (raw_nums.split(",") if d1_format else raw_nums)]
        target = _integer(raw_target)
        if target is None or None in nums:
            raise ValueError(f"{where}: numbers {raw_nums!r} / target {raw_target!r} are not integers")
        if n_numbers is not None and len(nums) != n_numbers:
            continue  # d1 trains on 3-number problems only; the HF set also has 4-number rows
        # answer is the target as text, like every task's; the reward checks the expression against nums and target
        ex = {"nums": nums, "target": target, "answer": str(target)}
        out.append({"prompt": rl_prompt("countdown", ex), **ex})
    return out


def load_sudoku(path):
    """Sudoku csv with header Puzzle,Solution (16-char strings, '0' = blank), read as strings."""
    out = []
    for where, rec in read_records(path):
        # stripped of blanks around the fields; then exactly 16 digits each, so a grid that lost its leading
        # zeros on the way (read as a number somewhere) fails here, not silently in the reward
        puzzle, solution = field(rec, "Puzzle", where, str).strip(), field(rec, "Solution", where, str).strip()
        if len(puzzle) != 16 or len(solution) != 16 or not (puzzle + solution).isdigit():
            raise ValueError(f"{where}: Puzzle/Solution must be 16-digit strings, got {puzzle!r}, {solution!r}")
        out.append(sudoku_example(puzzle, solution))
    return out


def load_s1k(path):
    """s1K for SFT (docs/d1.md §5.1): question, thinking_trajectories (list: d1 uses [0]; a string also works), attempt.
    prompt = the SFT user message; completion = the assistant turn,
    "<reasoning>" + trace + "</reasoning>\\n<answer>" + attempt + "</answer>" (no newlines inside the tags)."""
    records = read_records(path)
    needed = ("question", "thinking_trajectories", "attempt")
    # checked once, on the first record: a copy without traces lacks them in every record, and one
    # clear message beats a thousand
    first = records[0][1] if records else {}
    if not isinstance(first, dict) or any(k not in first for k in needed):
        # e.g. ../shared/data/s1k_questions_no_traces/s1k.json: problem/solution with an EMPTY `thinking`
        have = sorted(first) if isinstance(first, dict) else type(first).__name__
        raise ValueError(f"{path}: no s1K reasoning traces: SFT needs fields {list(needed)} (HF simplescaling/s1K), "
                         f"but the first record has {have}. The questions-only copy cannot be used for SFT.")
    out = []
    for where, rec in records:
        trace = field(rec, "thinking_trajectories", where)
        # s1K stores a list with one trajectory (d1 takes [0]); s1K-1.1-style dumps may hold a plain string
        trace = trace[0] if isinstance(trace, list) and trace else trace
        if not trace and isinstance(trace, (str, list)):
            raise ValueError(f"{where}: empty 'thinking_trajectories' (no reasoning trace)")
        if not isinstance(trace, str):
            raise ValueError(f"{where}: field 'thinking_trajectories' must be a string or a list of strings, "
                             f"got {describe(trace)}")
        check_text(trace, "thinking_trajectories", where)
        question, attempt = field(rec, "question", where, str), field(rec, "attempt", where, str)
        # prompt: the SFT user message (docs/d1.md §5.1); completion: the assistant turn, with no newlines inside the
        # tags, unlike the RL format
        out.append({"prompt": SFT_SYSTEM_PROMPT + "\n\n" + question, "question": question, "answer": attempt,
                    "completion": "<reasoning>" + trace + "</reasoning>\n<answer>" + attempt + "</answer>"})
    return out


def load_toy(path):
    """The d1 Sudoku csv in the toy format (bare prompt, 16-digit completion), e.g. the 8-blank test set."""
    return [toy_example(ex["puzzle"], ex["solution"]) for ex in load_sudoku(path)]


def _code_loader(task, read):
    """The loader of a code task: taskdata/code_data.py reads the items, d1's code prompt goes on top."""
    # every code item in one format: rewards.coding_reward and parsers.score_code_batch read it
    return lambda path: [{"prompt": rl_prompt(task, ex), **ex, "answer": ex["solution"]} for ex in read(path)]


# the code tasks' file readers (taskdata/code_data.py); HumanEval+ is read like HumanEval
CODE_READERS = {"code": code_data.read_kodcode, "humaneval": code_data.read_humaneval,
                "humaneval_plus": code_data.read_humaneval, "mbpp": code_data.read_mbpp,
                "mbpp_plus": code_data.read_mbpp_plus, "leetcode": code_data.read_leetcode}


# s1k is SFT data only, so it is a loader but not one of TASKS: it has no reward and no eval parser
LOADERS = {"gsm8k": load_gsm8k, "math": load_math, "countdown": load_countdown, "sudoku": load_sudoku,
           "toy": load_toy, "s1k": load_s1k,
           **{task: _code_loader(task, read) for task, read in CODE_READERS.items()}}


def load_task(name, path):
    """Examples of task `name` from the local file `path`."""
    if name not in LOADERS:
        raise ValueError(f"unknown task {name!r}; expected one of {sorted(LOADERS)}")
    return LOADERS[name](path)


def d1_eval_subset(n_items, k=256, seed=42):
    """Indices d1 evaluates: np.random.seed(42); np.random.choice(n, k, replace=False) (docs/d1.md §8.1 item 3).
    n == k (Countdown) -> a permutation, as in d1."""
    # k=None/-1 (GSM8K and MATH, d1's subsample -1) or n < k (where d1 would crash): all items in order
    if k is None or k < 0 or n_items < k:
        return list(range(n_items))
    # legacy MT19937 seeding: identical to np.random.seed(42) followed by np.random.choice, but a
    # private RandomState gives the same stream without touching numpy's global RNG
    return np.random.RandomState(seed).choice(n_items, k, replace=False).tolist()


# -----------------------------------------------------------------------------

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print rendered RL and eval prompts of every d1 task")
    parser.add_argument("--model-dir", type=str, default=None, help="tokenizer: a model directory or hub id "
                        "(default: a fresh tiny one)")
    parser.add_argument("--data-dir", type=str, default=str(Path(__file__).resolve().parent.parent / "shared" / "data"),
                        help="the shared data folder (../shared/data)")
    args = parser.parse_args()
    # imported here, not at the top: only this demo needs a tokenizer
    from modelio.tokenizer import load_tokenizer, make_tiny_tokenizer, prompt_ids
    # the tiny byte-level tokenizer carries LLaDA's chat template, so the rendering is the real one
    from modelio.hub import resolve_model  # a directory, a hub cache or a hub id
    tok = load_tokenizer(resolve_model(args.model_dir).path) if args.model_dir else make_tiny_tokenizer()
    data = Path(args.data_dir)
    # hand-written stand-ins for missing files (the generated sets are taskdata/puzzles.py's): a valid grid
    # with six blanks, d1's own Countdown example, and two short questions
    grid, puzzle = "1234341221434321", "1030301221404020"
    stand_ins = {"toy": toy_example(puzzle, grid), "sudoku": sudoku_example(puzzle, grid)}
    for task, ex in [("gsm8k", {"question": "Tom has 3 apples and buys 4 more. How many apples does he have?",
                                "answer": "7"}),
                     ("math", {"question": "What is $2^{10}$?", "answer": "1024"}),
                     ("countdown", {"nums": [2, 3, 4], "target": 5, "answer": "5"})]:
        stand_ins[task] = {"prompt": rl_prompt(task, ex), **ex}
    examples = {}
    for task, rel in [("toy", "d1_sudoku/4x4_test_sudoku.csv"), ("gsm8k", "gsm8k/test.jsonl"),
                      ("math", "math500/test.jsonl"), ("countdown", "d1_countdown/countdown_cd3_test.jsonl"),
                      ("sudoku", "d1_sudoku/4x4_test_sudoku.csv")]:
        # the real file when it is there (the toy reads d1's Sudoku test grids), else the stand-in
        examples[task] = load_task(task, data / rel)[0] if (data / rel).is_file() else stand_ins[task]
    for task, ex in examples.items():
        # RL: the user message as is, not cut here (the header line says how much d1's left cut keeps);
        # eval: the eval message plus the "<reasoning>" prefill
        rl = prompt_ids(tok, ex["prompt"])
        ev = prompt_ids(tok, eval_message(task, ex), prefill=eval_prefill(task))
        print(f"===== {task}  (answer {ex['answer']!r}; RL prompt {len(rl)} tokens, "
              f"eval prompt {len(ev)} tokens; d1 RL keeps the last {MAX_PROMPT_LENGTH})")
        print(f"--- RL prompt ---\n{tok.decode(rl)}\n--- eval prompt ---\n{tok.decode(ev)}\n")
