"""
The readers of d1's task files: GSM8K, MATH, Countdown, Sudoku and s1K, each a local file or a hub
dataset id, read with the hub's column names (taskdata/records.py reads the records). A reader
returns plain example dicts holding the task's fields and its gold `answer` as text; tasks.py's
registry puts the prompt (and the SFT completion) on top. Every failure is one ValueError or
FileNotFoundError naming the file and line (or record).

    from taskdata.readers import read_gsm8k
    read_gsm8k("gsm8k/test.jsonl")[0]   # {"question": ..., "solution": ..., "answer": "18"}
"""
import math
import sys

from taskdata.answers import last_boxed
from taskdata.records import check_text, describe, field, read_records


def read_gsm8k(path):
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
        out.append(ex)
    return out


def read_math(path):
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
        out.append(ex)
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


def read_countdown(path, n_numbers=3):
    """Countdown jsonl: d1's test format {"input": "a,b,c", "output": "T"} or HF rows {"nums": [...],
    "target": T}. Keeps only rows with n_numbers numbers (d1 filters the 3to4 train set to 3; None keeps all);
    when that drops rows, one line on stderr says how many were kept, so that a run's data size is no surprise."""
    out, records = [], read_records(path)
    for where, rec in records:
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
        out.append(ex)
    if len(out) < len(records):
        print(f"Countdown: kept {len(out)} of {len(records)} rows of {path} (d1 trains on {n_numbers}-number "
              f"problems; the others are dropped)", file=sys.stderr)
    return out


def read_sudoku(path):
    """Sudoku csv with header Puzzle,Solution (16-char strings, '0' = blank), read as strings."""
    out = []
    for where, rec in read_records(path):
        # stripped of blanks around the fields; then exactly 16 digits each, so a grid that lost its leading
        # zeros on the way (read as a number somewhere) fails here, not silently in the reward
        puzzle, solution = field(rec, "Puzzle", where, str).strip(), field(rec, "Solution", where, str).strip()
        if len(puzzle) != 16 or len(solution) != 16 or not (puzzle + solution).isdigit():
            raise ValueError(f"{where}: Puzzle/Solution must be 16-digit strings, got {puzzle!r}, {solution!r}")
        # answer = solution: the Sudoku reward and eval parser score cells against these 16 digits
        out.append({"puzzle": puzzle, "solution": solution, "answer": solution})
    return out


def read_s1k(path):
    """s1K for SFT (docs/d1.md §5.1): question, thinking_trajectories (list: d1 uses [0]; a string also
    works), attempt.
    -> question, trace (the first thinking trace), answer (= attempt); tasks.py's s1k record builds the SFT
    prompt and completion from them."""
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
        # s1K stores a list with one trace (d1 takes [0]); s1K-1.1-style dumps may hold a plain string
        trace = trace[0] if isinstance(trace, list) and trace else trace
        if not trace and isinstance(trace, (str, list)):
            raise ValueError(f"{where}: empty 'thinking_trajectories' (no reasoning trace)")
        if not isinstance(trace, str):
            raise ValueError(f"{where}: field 'thinking_trajectories' must be a string or a list of strings, "
                             f"got {describe(trace)}")
        check_text(trace, "thinking_trajectories", where)
        question, attempt = field(rec, "question", where, str), field(rec, "attempt", where, str)
        out.append({"question": question, "trace": trace, "answer": attempt})
    return out
