"""
Tests for tasks.py: loaders on the real shared data, the exact d1 prompt strings, prompt_ids (the one way a
prompt becomes token ids) against the code paths it replaced at every call site, and d1's eval subsets.
CPU only, a few seconds.

    python -m pytest tests/test_tasks.py -q

The prompt strings are written out again below from docs/d1.md §5.1 / docs/d1.md §7.1 / docs/d1.md §8.2 in a different form
(triple-quoted text where possible; the RL system prompt is in tests/conftest.py), so a typo in tasks.py
cannot be copied into its own test. Data tests skip when ../shared/data is absent. The generators are
tested in tests/test_puzzles.py.
"""
import json
import subprocess
import sys
from fractions import Fraction

from functools import partial

import numpy as np
import pytest

import tasks
from methods import grpo as field
from taskdata import parsers
from conftest import REPO, RL_SYSTEM, SHARED_DATA, countdown_rl, exact_eval, literals, valid_by_rules
from taskdata.puzzles import countdown_values, make_countdown, make_sudoku, make_toy, solve_sudoku, split_grids
from modelio.tokenizer import prompt_ids
from taskdata.readers import read_countdown
from taskdata.splits import d1_eval_subset
from taskdata.task import EVAL_PREFILL, MAX_PROMPT_LENGTH, label_lengths
from tasks import (
    TASKS,
    eval_message,
    eval_prefill,
    eval_question,
    load_task,
)

# the readers through the registry, prompts on top, as every script loads them
load_gsm8k, load_math, load_countdown, load_sudoku, load_s1k = (
    partial(load_task, name) for name in ("gsm8k", "math", "countdown", "sudoku", "s1k"))
CODE_TASKS = ("code", *tasks.names("code"))  # KodCode and the benchmarks: d1's code prompt
D1_PARSED = ("gsm8k", "math", "countdown", "sudoku")  # d1's released eval parsers (docs/d1.md §8.3)

needs_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data not present")

# -----------------------------------------------------------------------------
# d1's prompt strings, re-typed from the spec

SFT_SYSTEM = RL_SYSTEM.replace("<reasoning>\n...\n", "<reasoning>\nYour reasoning here\n")
MATH_RL_MIDDLE = ("\n\nYou are a math expert. You will be given a question to solve. Solve it step by step. "
                  "Wrap the final answer in a \\boxed{}. \n\n")
SUDOKU_SYSTEM = """
Please solve the following 4x4 Sudoku puzzle. The puzzle is provided as a 16-character string reading left-to-right, top-to-bottom, where '0' represents empty cells.

Rules:
- Fill empty cells with digits 1-4
- Each row must contain digits 1-4 exactly once
- Each column must contain digits 1-4 exactly once
- Each 2x2 box must contain digits 1-4 exactly once

Important: Your solution must be a COMPLETE 16-character string with only the digits 1-4, representing your final solved grid.

Respond in this exact format:
<reasoning>
Your step-by-step solving process
</reasoning>
<answer>
[16-character solution string with no spaces or separators]
</answer>
"""
EVAL_FORMAT = "Respond in the following format:\n<reasoning>\nYour reasoning here\n</reasoning>\n<answer>\n\\boxed{...}\n</answer>"
MATH_EXPERT = ("You are a math expert. You will be given a question to solve. Solve it step by step. "
               "Wrap the final answer in a \\boxed{}.")
GSM8K_EVAL = MATH_EXPERT + " \n" + EVAL_FORMAT             # the space after "\boxed{}."
MATH_EVAL = MATH_EXPERT + "\n" + EVAL_FORMAT + '" \n'      # the stray quote, space, newline
COUNTDOWN_EVAL = ("Using only the provided numbers, create an arithmetic expression that evaluates to exactly the "
                  "provided target number. You may use the operations +, -, *, and / as needed, but each number "
                  "must be used exactly once. Think step-by-step. After reasoning, provide only your final "
                  "expression inside \\boxed{} tags without including an equals sign or the target number. "
                  "For example: \\boxed{a + b * c}" + EVAL_FORMAT)  # no separator before "Respond"
HEAD = "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\n"
TAIL = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    # the tiny LLaDA written to disk and loaded back exactly like the 8B's tokenizer
    from modelio.checkpoint import make_tiny
    from modelio.tokenizer import load_tokenizer
    return load_tokenizer(make_tiny(tmp_path_factory.mktemp("tiny") / "tiny-llada"))


# -----------------------------------------------------------------------------
# loaders on the real files


@needs_data
def test_gsm8k_files():
    test, train = load_gsm8k(SHARED_DATA / "gsm8k/test.jsonl"), load_gsm8k(SHARED_DATA / "gsm8k/train.jsonl")
    assert (len(test), len(train)) == (1319, 7473)
    ex = test[0]
    assert ex["answer"] == "18" and ex["solution"].endswith("#### 18")
    assert ex["question"].startswith("Janet’s ducks lay 16 eggs per day.")
    assert ex["prompt"] == RL_SYSTEM + "\n\n" + ex["question"]
    assert train[0]["answer"] == "72"
    assert all(e["answer"] and "####" not in e["answer"] for e in test + train)


@needs_data
def test_math_files():
    m500 = load_math(SHARED_DATA / "math500/test.jsonl")
    full = load_math(SHARED_DATA / "math_test_full/test.jsonl")
    assert (len(m500), len(full)) == (500, 5000)
    assert m500[0]["answer"] == "\\left( 3, \\frac{\\pi}{2} \\right)"  # the `answer` field, as given
    assert m500[0]["prompt"] == RL_SYSTEM + MATH_RL_MIDDLE + m500[0]["question"]
    # no `answer` field in the full test set: the last \boxed{} of the solution, nested braces intact
    known = {0: "2", 1: "10", 2: "\\dfrac{9}{7}", 3: "i", 5: "402", 6: "x \\in [-2,7]"}
    assert {i: full[i]["answer"] for i in known} == known
    # cross-check the extractor: every MATH-500 problem is in the full set, and its box == MATH-500's answer
    boxed = {e["question"]: e["answer"] for e in full}
    assert all(boxed[e["question"]] == e["answer"] for e in m500)


@needs_data
def test_countdown_files():
    d1 = load_countdown(SHARED_DATA / "d1_countdown/countdown_cd3_test.jsonl")
    assert len(d1) == 256
    assert (d1[0]["nums"], d1[0]["target"], d1[0]["answer"]) == ([30, 100, 93], 23, "23")
    assert all(len(e["nums"]) == 3 and all(1 <= x <= 100 for x in e["nums"]) and 1 <= e["target"] <= 100 for e in d1)
    assert d1[0]["prompt"] == countdown_rl("[30, 100, 93]", 23)
    rows_file = SHARED_DATA / "countdown_tasks_3to4_prefix/countdown_tasks_3to4_rows_0_11263.jsonl"
    rows = load_countdown(rows_file)  # d1 keeps only 3-number rows
    assert len(rows) == 5583 and (rows[0]["nums"], rows[0]["target"]) == ([44, 19, 35], 98)
    assert len(read_countdown(rows_file, n_numbers=None)) == 11264
    # every d1 test problem is solvable, and the enumerator's expression checks out independently
    for e in d1:
        expr = countdown_values(e["nums"])[Fraction(e["target"])]
        assert exact_eval(expr) == e["target"] and literals(expr) == sorted(e["nums"])


@needs_data
def test_sudoku_file():
    exs = load_sudoku(SHARED_DATA / "d1_sudoku/4x4_test_sudoku.csv")
    assert len(exs) == 500
    assert (exs[0]["puzzle"], exs[0]["solution"]) == ("3102200002100320", "3142243142131324")  # leading zeros kept
    for e in exs:
        assert e["puzzle"].count("0") == 8 and e["answer"] == e["solution"] and valid_by_rules(e["solution"])
        assert all(p in ("0", s) for p, s in zip(e["puzzle"], e["solution"]))
        assert e["solution"] in solve_sudoku(e["puzzle"])
    assert exs[0]["prompt"] == SUDOKU_SYSTEM + "\n\nSolve the following Sudoku puzzle: 3102200002100320\n"
    toy = load_task("toy", SHARED_DATA / "d1_sudoku/4x4_test_sudoku.csv")  # the same puzzles, toy format
    assert toy[0]["prompt"] == "Sudoku: 3102200002100320" and toy[0]["completion"] == "3142243142131324"


@needs_data
def test_shipped_s1k_has_no_traces():
    with pytest.raises(ValueError, match="reasoning traces") as err:
        load_s1k(SHARED_DATA / "s1k_questions_no_traces/s1k.json")
    assert "thinking_trajectories" in str(err.value) and "attempt" in str(err.value) and "s1k.json" in str(err.value)


def test_s1k_formats(tmp_path):
    rec = {"question": "What is 1+1?", "thinking_trajectories": ["One plus one is two."], "attempt": "2"}
    want = "<reasoning>One plus one is two.</reasoning>\n<answer>2</answer>"
    (tmp_path / "s1k.jsonl").write_text(json.dumps(rec) + "\n")
    (tmp_path / "s1k.json").write_text(json.dumps([{**rec, "thinking_trajectories": "One plus one is two."}]))
    for name in ("s1k.jsonl", "s1k.json"):  # jsonl with a list trace, json array with a string trace
        [ex] = load_task("s1k", tmp_path / name)
        assert ex["completion"] == want and ex["answer"] == "2"
        assert ex["prompt"] == SFT_SYSTEM + "\n\nWhat is 1+1?"


# -----------------------------------------------------------------------------
# error cases


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        load_gsm8k(tmp_path / "nope.jsonl")


def test_missing_field_names_file_line_and_field(tmp_path):
    f = tmp_path / "g.jsonl"
    f.write_text(json.dumps({"question": "q", "answer": "#### 1"}) + "\n" + json.dumps({"question": "q"}) + "\n")
    with pytest.raises(ValueError, match=r"g\.jsonl:2: missing field 'answer'"):
        load_gsm8k(f)


def test_malformed_line_names_file_and_line(tmp_path):
    f = tmp_path / "cd.jsonl"
    f.write_text('{"input": "1,2,3", "output": "6"}\n\n{"input": "1,2,3", "output": \n')
    with pytest.raises(ValueError, match=r"cd\.jsonl:3: malformed JSON"):
        load_countdown(f)


def test_content_errors(tmp_path):
    (tmp_path / "g.jsonl").write_text(json.dumps({"question": "q", "answer": "no marker"}) + "\n")
    with pytest.raises(ValueError, match="####"):
        load_gsm8k(tmp_path / "g.jsonl")
    (tmp_path / "m.jsonl").write_text(json.dumps({"problem": "p", "solution": "no box"}) + "\n")
    with pytest.raises(ValueError, match=r"m\.jsonl:1"):
        load_math(tmp_path / "m.jsonl")
    (tmp_path / "s.csv").write_text("Puzzle,Solution\n310220000210032,3142243142131324\n")  # 15 chars
    with pytest.raises(ValueError, match=r"s\.csv:2"):
        load_sudoku(tmp_path / "s.csv")
    (tmp_path / "x.csv").write_text("Puzzle,Answer\n3102200002100320,3142243142131324\n")
    with pytest.raises(ValueError, match="'Solution'"):
        load_sudoku(tmp_path / "x.csv")
    (tmp_path / "short.csv").write_text("Puzzle,Solution\n3102200002100320,3142243142131324\n3102200002100320\n")
    with pytest.raises(ValueError, match=r"short\.csv:3: missing field 'Solution'"):
        load_sudoku(tmp_path / "short.csv")
    (tmp_path / "c.jsonl").write_text(json.dumps({"nums": [1, "x", 3], "target": 4}) + "\n")
    with pytest.raises(ValueError, match=r"c\.jsonl:1: numbers"):
        load_countdown(tmp_path / "c.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="no records"):
        load_countdown(tmp_path / "empty.jsonl")
    with pytest.raises(ValueError, match="unknown task"):
        load_task("gsm9k", tmp_path / "g.jsonl")

# -----------------------------------------------------------------------------
# prompts and rendering


EXAMPLES = {
    "gsm8k": {"question": "Q?"}, "math": {"question": "P?"},
    "countdown": {"nums": [44, 19, 35], "target": 98}, "sudoku": {"puzzle": "3102200002100320"},
    "toy": {"puzzle": "3102200002100320"},
}


def test_rl_prompts_exact():
    assert tasks.get("gsm8k").prompt(EXAMPLES["gsm8k"]) == RL_SYSTEM + "\n\nQ?"
    assert tasks.get("math").prompt(EXAMPLES["math"]) == RL_SYSTEM + MATH_RL_MIDDLE + "P?"
    assert tasks.get("countdown").prompt(EXAMPLES["countdown"]) == countdown_rl("[44, 19, 35]", 98)
    assert tasks.get("sudoku").prompt(EXAMPLES["sudoku"]) == (
        SUDOKU_SYSTEM + "\n\nSolve the following Sudoku puzzle: 3102200002100320\n")
    assert tasks.get("toy").prompt(EXAMPLES["toy"]) == "Sudoku: 3102200002100320"
    # every code task: d1's code prompt (docs/coding.md §1.1), its system prompt first
    for task in CODE_TASKS:
        assert tasks.get(task).prompt({"question": "Q?"}) == (
            RL_SYSTEM + "\n\nYou are a coding expert. You will be given a coding problem to solve. Solve it step by step. \n\nQ?")
    # the code toy and the testbed carry their own bare prompts
    assert tasks.get("countdown_toy").prompt({"prompt": "Countdown: 3 5 7 -> 22"}) == "Countdown: 3 5 7 -> 22"


def test_eval_messages_exact():
    assert eval_message("gsm8k", EXAMPLES["gsm8k"]) == GSM8K_EVAL + "\n\nQ?"
    assert eval_message("math", EXAMPLES["math"]) == MATH_EVAL + "\n\nP?"
    assert eval_message("countdown", EXAMPLES["countdown"]) == COUNTDOWN_EVAL + "\n\nNumbers: [44, 19, 35]\nTarget: 98"
    assert eval_message("sudoku", EXAMPLES["sudoku"]) == (
        SUDOKU_SYSTEM + "\n\nSolve the following Sudoku puzzle: 3102200002100320\n")
    assert "\\boxed{}. \nRespond" in GSM8K_EVAL and "c}Respond" in COUNTDOWN_EVAL  # the quirks are really there


def test_rendering(tok):
    # the tiny tokenizer maps every ASCII character to one token, so decoding gives the rendered text back
    for task, ex in EXAMPLES.items():
        rl = tok.decode(prompt_ids(tok, tasks.get(task).prompt(ex)))
        ev = tok.decode(prompt_ids(tok, eval_message(task, ex), prefill=eval_prefill(task)))
        assert rl.startswith(HEAD) and rl.endswith(TAIL)
        # the template trims the message: the system prompt's leading "\n" (and Sudoku's trailing one) vanish
        assert rl == HEAD + tasks.get(task).prompt(ex).strip() + TAIL
        prefill = "" if task == "toy" else "<reasoning>"
        assert ev == HEAD + eval_message(task, ex).strip() + TAIL + prefill
    assert tok.decode(prompt_ids(tok, RL_SYSTEM + "\n\nQ?")).startswith(
        HEAD + "Respond in the following format:\n<reasoning>")
    assert tok.decode(prompt_ids(tok, eval_message("gsm8k", EXAMPLES["gsm8k"]), prefill=EVAL_PREFILL)).endswith(
        "<|start_header_id|>assistant<|end_header_id|>\n\n<reasoning>")


@needs_data
def test_eval_questions_match_d1_baseline_files():
    # d1's eval shards the subset by rank stride (rank r of 7 gets items r, r+7, ...) and stores `question`;
    # matching all 256 questions checks both d1_eval_subset and the question format against d1's own output
    base = SHARED_DATA / "d1_eval_baselines"
    for task, data_file, n in [("sudoku", "d1_sudoku/4x4_test_sudoku.csv", 500),
                               ("countdown", "d1_countdown/countdown_cd3_test.jsonl", 256)]:
        exs = load_task(task, SHARED_DATA / data_file)
        subset = d1_eval_subset(n)
        for rank in range(7):
            gens = json.loads((base / f"{task}_instruct_256_128_{rank}_generations.json").read_text())["generations"]
            want = [eval_question(task, exs[i]) for i in subset[rank::7]]
            assert [g["question"] for g in gens] == want
    # GSM8K / MATH: the stored question is the raw question text
    gsm = {e["question"] for e in load_gsm8k(SHARED_DATA / "gsm8k/test.jsonl")}
    gens = json.loads((base / "gsm8k_instruct_256_128_0_generations.json").read_text())["generations"]
    assert all(g["question"] in gsm for g in gens)


# -----------------------------------------------------------------------------
# tokenizer.prompt_ids against the paths it replaced (model.chat_ids, later tokenizer.chat_ids; tasks.render / render_eval + encode; the
# cuts in grpo.py and eval.py), for real examples of every task


def old_prompt_ids(tok, user_text, prefill=""):
    """The ids every old path produced: the chat template rendered to TEXT, the prefill appended, then
    tokenized without special tokens (the template already holds BOS). Written out here, not imported."""
    text = tok.apply_chat_template([{"role": "user", "content": user_text}], tokenize=False,
                                   add_generation_prompt=True)
    return tok(text + prefill, add_special_tokens=False)["input_ids"]


def spread(rows, k=4):
    """k rows spread over a file, plus its longest RL prompt (the one d1's cut most likely bites)."""
    picked = [rows[i * (len(rows) - 1) // (k - 1)] for i in range(k)]
    return picked + [max(rows, key=lambda ex: len(ex["prompt"]))]


def real_examples(tmp_path):
    """{task: examples}: rows of the real test files when present (else the in-file EXAMPLES), the
    generated toy / Sudoku / Countdown sets the scripts use, and SFT prompts built by load_s1k around
    real s1K questions (the shipped copy has no traces, so a placeholder trace and attempt)."""
    train_grids, test_grids = split_grids()
    exs = {"toy": make_toy(train_grids, 3, seed=1),
           "sudoku": [tasks.with_prompt("sudoku", ex) for ex in make_sudoku(test_grids, 2, seed=0)],
           "countdown": [tasks.with_prompt("countdown", ex) for ex in make_countdown(2, seed=0)]}
    exs.update({t: exs.get(t, []) + [{**ex, "prompt": tasks.get(t).prompt(ex)}] for t, ex in EXAMPLES.items()})
    files = {"gsm8k": "gsm8k/test.jsonl", "math": "math500/test.jsonl", "toy": "d1_sudoku/4x4_test_sudoku.csv",
             "countdown": "d1_countdown/countdown_cd3_test.jsonl", "sudoku": "d1_sudoku/4x4_test_sudoku.csv"}
    for task, rel in files.items():
        if (SHARED_DATA / rel).is_file():
            exs[task] += spread(load_task(task, SHARED_DATA / rel))
    s1k = SHARED_DATA / "s1k_questions_no_traces/s1k.json"
    questions = [r["problem"] for r in json.loads(s1k.read_text())] if s1k.is_file() else ["What is 1+1?"]
    rows = [{"question": q, "thinking_trajectories": ["t"], "attempt": "a"} for q in questions]
    (tmp_path / "s1k.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    exs["s1k"] = spread(load_task("s1k", tmp_path / "s1k.jsonl"))
    return exs


def test_prompt_ids_equal_the_old_paths(tok, tmp_path):
    n, examples = 0, real_examples(tmp_path)
    assert all(examples.values())  # every task has examples to check, with or without ../shared/data
    for task, exs in examples.items():
        for ex in exs:
            full = old_prompt_ids(tok, ex["prompt"])
            # RL, SFT and the demos: the RL (or SFT) user message, no prefill, uncut
            assert prompt_ids(tok, ex["prompt"]) == full, (task, ex["prompt"][:60])
            # RL as d1 runs it: the last MAX_PROMPT_LENGTH ids (grpo.py used ids[-max_prompt_length:])
            assert prompt_ids(tok, ex["prompt"], max_length=MAX_PROMPT_LENGTH) == full[-MAX_PROMPT_LENGTH:]
            if task != "s1k":  # eval: d1's eval message + "<reasoning>"; the toy: its bare prompt, no prefill
                old = full if task == "toy" else old_prompt_ids(tok, eval_message(task, ex), "<reasoning>")
                assert prompt_ids(tok, eval_message(task, ex), prefill=eval_prefill(task)) == old
            n += 1
    # with the real test files: 4 spread rows + the longest of each file on top of the generated ones
    # (without ../shared/data, e.g. a clone elsewhere, only the generated and in-file examples: 17)
    assert n >= (20 if SHARED_DATA.is_dir() else 17)


def test_rl_prompt_is_cut_from_the_left(tok):
    """d1 keeps the LAST 200 prompt tokens (docs/d1.md §2.4): a long GSM8K prompt loses BOS and the start of the
    instructions, keeps its question's end and the assistant header; a short prompt is untouched."""
    gsm8k = SHARED_DATA / "gsm8k/test.jsonl"
    question = (max((ex["question"] for ex in load_gsm8k(gsm8k)), key=len) if gsm8k.is_file()
                else "How many eggs? " * 40)
    prompt = tasks.get("gsm8k").prompt({"question": question})
    full, cut = prompt_ids(tok, prompt), prompt_ids(tok, prompt, max_length=MAX_PROMPT_LENGTH)
    assert MAX_PROMPT_LENGTH == 200 and len(full) > 200
    assert cut == full[-200:] and len(cut) == 200
    bos = tok.convert_tokens_to_ids("<|startoftext|>")
    assert full[0] == bos and bos not in cut
    assert tok.decode(cut).endswith(question.strip()[-50:] + TAIL)
    short = tasks.get("toy").prompt(EXAMPLES["toy"])
    assert len(prompt_ids(tok, short)) < 200 and prompt_ids(tok, short, max_length=200) == prompt_ids(tok, short)
    assert prompt_ids(tok, prompt, max_length=10 ** 6) == full


def test_call_sites_use_prompt_ids(tok, tmp_path):
    """The real call sites, token for token against the old paths: grpo.py's rollout rows (each prompt
    G times, cut to d1's 200), eval.py's eval prompts, and sft.py's prompt region."""
    import eval as evaluation
    from taskdata.data import encode_example, group_prompts
    eot, eos = tok.convert_tokens_to_ids("<|eot_id|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    for task, exs in real_examples(tmp_path).items():
        for ex in exs:
            full = old_prompt_ids(tok, ex["prompt"])
            if task != "s1k":
                rows, n_cut, _ = group_prompts(tok, [ex], 3, MAX_PROMPT_LENGTH, eos)
                assert rows.tolist() == [full[-MAX_PROMPT_LENGTH:]] * 3 and n_cut == (len(full) > MAX_PROMPT_LENGTH)
                old_eval = full if task == "toy" else old_prompt_ids(tok, eval_message(task, ex), "<reasoning>")
                assert evaluation.eval_prompt_ids(tok, task, ex) == old_eval
            ids, plen, _ = encode_example(tok, {**ex, "completion": "42"}, len(full) + 8, eot, eos)
            assert ids[:plen] == full and ids[plen:plen + 3] == [ord("4"), ord("2"), eot]


# -----------------------------------------------------------------------------
# d1's eval subsets


def test_d1_eval_subset():
    state = np.random.get_state()
    sub = d1_eval_subset(500)
    assert sub[:8] == [361, 73, 374, 155, 104, 394, 377, 124] and len(set(sub)) == 256
    np.random.seed(42)
    assert sub == np.random.choice(500, 256, replace=False).tolist()  # d1's exact call
    np.random.set_state(state)
    assert sorted(d1_eval_subset(256)) == list(range(256)) and d1_eval_subset(256) != list(range(256))
    assert d1_eval_subset(100) == list(range(100)) and d1_eval_subset(1319, k=-1) == list(range(1319))
    # the global numpy RNG is left alone
    assert np.random.get_state()[1].tolist() == state[1].tolist()



# -----------------------------------------------------------------------------
# the registry: every record whole, and every generated toy's labels fit its lengths and earn its maximum


def test_every_record_is_whole():
    import grpo
    for name, t in TASKS.items():
        assert t.name == name and (t.load or t.make) and (t.rewards or t.sft_completion), name
        assert bool(t.rewards) == (t.max_reward > 0) and t.preset in grpo.PRESETS, name
        # a task that has an eval parser has a held-out split: a generated test side, or a test file
        assert not t.canvas or (t.block and t.canvas % t.block == 0), name
        # each parser has its version; d1's version only on d1's parsers (ours say their own)
        assert bool(t.parser_version) == bool(t.score), name
        assert (t.parser_version == parsers.PARSER_VERSION) == (name in D1_PARSED), name
    with pytest.raises(ValueError, match="task 'x' has an eval parser: give its parser_version"):
        tasks.Task(name="x", prompt=str, score=str)
    # every generated toy trains and evaluates; every evaluable task is also an RL task
    assert set(tasks.names("make")) <= set(tasks.names("score")) <= set(tasks.names("rewards"))
    with pytest.raises(ValueError, match="unknown task 'gsm9k'; expected one of gsm8k, math"):
        tasks.get("gsm9k")


def test_generated_labels_fit_their_lengths_and_earn_the_maximum():
    from modelio.tokenizer import make_tiny_tokenizer
    for name in tasks.names("make"):
        t = tasks.get(name)
        tok = make_tiny_tokenizer(tags=t.needs_tags)
        exs = [{**ex, "task": name} for ex in tasks.make_examples(name, "train", 40, seed=1)]
        for ex in exs:
            n_completion = len(tok(ex["completion"], add_special_tokens=False)["input_ids"])
            # the canvas holds the whole label; SFT holds prompt + label (its end-of-turn where there is room)
            assert n_completion <= t.canvas, (name, n_completion)
            assert len(prompt_ids(tok, ex["prompt"])) + n_completion <= t.sft_max_length, name
        # the label earns the task's maximum reward and is correct by its eval parser
        assert [r for r, _ in tasks.total_rewards([ex["completion"] for ex in exs], exs)] == [t.max_reward] * 40
        assert all(s["correct"] for s in tasks.score_eval_batch(name, [ex["completion"] for ex in exs], exs))
        # --rescore: a record keeps scoring_example(ex), and the parser scores it as it did live,
        # right and wrong answers alike (each item given its neighbour's label)
        gens = [ex["completion"] for ex in exs[1:9]] + [exs[0]["completion"]]
        live = tasks.score_eval_batch(name, gens, exs[:9])
        assert tasks.score_eval_batch(name, gens, [t.scoring_example(ex) for ex in exs[:9]]) == live, name
        assert not all(s["correct"] for s in live), name
        # eval's held-out items come from the other side of the split, disjoint from training's
        test = {ex["prompt"] for _, ex in tasks.heldout(name, n=40)}
        assert not test & {ex["prompt"] for ex in tasks.make_examples(name, "train", 400, seed=2)}, name


def test_toy_curve_sets_follow_the_task():
    # the curve's items are the task's own (a task it did not know once got Sudoku puzzles)
    from eval import toy_curve_sets
    for name in tasks.names("make"):
        sets = toy_curve_sets(name, n=3)
        assert sets["heldout_acc"] == tasks.heldout(name, n=3)
        assert all(ex["prompt"] == tasks.get(name).prompt(ex) for _, ex in sets["train_acc"])


def test_the_scripts_take_their_lengths_from_the_record_under_any_preset():
    import grpo
    import sft
    from ops.trainers import task_defaults
    sft_length = lambda name, params=None: task_defaults(name, params, sft.PRESETS, tasks.TASKS)[1]["max_length"]
    for name in tasks.names("make"):
        t, args = tasks.get(name), grpo.parse_args(["--task", name])
        assert (args.preset, args.gen_length, args.block_length, args.diffusion_steps) == (
            t.preset, t.canvas, t.block, t.canvas // 2), name
        assert sft_length(name) == t.sft_max_length, name
        # another preset brings its run, never its lengths (a record's canvas 64 became 16 before)
        for preset in ("8b", "tiny"):
            args = grpo.parse_args(["--task", name, "--preset", preset])
            assert (args.preset, args.gen_length) == (preset, t.canvas), (name, preset)
    args = grpo.parse_args(["--task", "mcq", "--preset", "tiny"])
    assert (args.gen_length, args.block_length, args.diffusion_steps) == (64, 16, 32)
    # d1's lengths for a task without its own; a flag given by hand wins; a preset that sets a
    # schedule keeps it (JustGRPO's one-token blocks); toys of two canvases share the longer one
    assert grpo.parse_args(["--task", "gsm8k"]).gen_length == 256 and sft_length("s1k") == 4096
    assert grpo.parse_args(["--task", "pbe", "--gen-length", "32"]).gen_length == 32
    args = field.parse_args(["--task", "gsm8k", "--preset", "justgrpo"])  # the field's preset
    assert (args.gen_length, args.block_length, args.diffusion_steps) == (256, 1, 256)
    args = grpo.parse_args(["--task", "toy,digitsum"])
    assert (args.gen_length, args.block_length, args.diffusion_steps) == (32, 16, 16)


def big_config(path):
    """A directory holding only config.json, of LLaDA-8B's shape: its size is read from the config."""
    from modelio.checkpoint import make_tiny
    make_tiny(path)
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(d_model=4096, n_heads=32, n_kv_heads=32, n_layers=32, mlp_hidden_size=12288, vocab_size=126464,
               embedding_size=126464)
    (path / "config.json").write_text(json.dumps(cfg))
    return path


def test_the_preset_follows_the_models_size_and_a_mismatch_is_one_line(tmp_path, capsys):
    import grpo
    from modelio.checkpoint import make_tiny
    from ops.trainers import model_params
    tiny, big = tmp_path / "tiny", big_config(tmp_path / "big")
    make_tiny(tiny)
    assert model_params(str(tiny)) == 920_192 and model_params(str(big)) == 8_015_581_184  # docs/model.md
    assert model_params(str(tmp_path / "none")) is None and model_params("") is None
    # make run's own case: a toy on the tiny model, said nothing
    capsys.readouterr()
    assert grpo.parse_args(["--model-dir", str(tiny)]).preset == "tiny" and not capsys.readouterr().out
    # a real task on the tiny model runs the tiny recipe, and says why (its task alone chose "8b")
    args = grpo.parse_args(["--task", "gsm8k", "--model-dir", str(tiny)])
    assert (args.preset, args.lora_r, args.gen_length) == ("tiny", 0, 256)
    assert capsys.readouterr().out == (f"preset tiny: --model-dir {tiny} has 0.9M parameters (--preset 8b "
                                       "is d1's recipe for LLaDA-8B)\n")
    # an 8B model runs d1's recipe, a toy task's lengths still its own
    args = grpo.parse_args(["--task", "toy", "--model-dir", str(big)])
    assert (args.preset, args.lora_r, args.load_in_4bit, args.gen_length) == ("8b", 128, True, 16)
    assert "preset 8b:" in capsys.readouterr().out
    # d1's 8B recipe named on the tiny model is said in one line before anything loads
    args = grpo.parse_args(["--task", "mcq", "--model-dir", str(tiny), "--preset", "8b"])
    assert args.preset == "8b" and capsys.readouterr().out == (
        f"note: --preset 8b is a recipe for a model of billions of parameters; --model-dir {tiny} has "
        "0.9M parameters: --preset tiny\n")
    grpo.parse_args(["--task", "toy", "--model-dir", str(big), "--preset", "tiny"])
    assert "note: --preset tiny is the CPU toy's recipe" in capsys.readouterr().out


def test_a_canvas_shorter_than_the_labels_is_refused_in_sft_grpo_and_eval(tmp_path):
    from modelio.checkpoint import make_tiny
    from modelio.tokenizer import make_tiny_tokenizer
    from modelio.families import read_config
    from modelio.tokenizer import load_tokenizer
    from taskdata.data import encode_sft
    from taskdata import mcq
    items = [dict(question="What is 9 + 9?", labels=list("AB"), texts=["18", "3"], answer="A", answer_text="18"),
             dict(question="What is 1 + 1?", labels=list("AB"), texts=["7", "2"], answer="B", answer_text="2")]
    tok, exs = make_tiny_tokenizer(), [tasks.with_prompt("mcq", ex) for ex in items]
    lengths = label_lengths(tok, exs)
    # the label by hand: "<reasoning>\n" 12 bytes, the text, "\n</reasoning>\n<answer>\n" 23, the label, "\n</answer>" 10
    assert [c for _, c in lengths] == [12 + 2 + 23 + 1 + 10, 12 + 1 + 23 + 1 + 10]
    tasks.check_canvas("mcq", tok, exs, 48, "--gen-length")  # exactly the longest: its end of turn left out
    with pytest.raises(ValueError, match=r"--gen-length 47 is shorter than task mcq's longest label, 48 tokens "
                                         r"\('<reasoning>\\n18"):
        tasks.check_tokenizer("mcq", tok, exs, 47)
    with pytest.raises(ValueError, match=r"--gen-lengths 32 is shorter"):
        tasks.check_canvas("mcq", tok, exs, 32, "--gen-lengths")
    # SFT: the longest example is named, with the one length that fits every label
    make_tiny(tmp_path / "m")
    total = max(p + c for p, c in lengths)
    with pytest.raises(ValueError, match=rf"f.jsonl, example 0: a completion does not fit --max-length 100: "
                                         rf"prompt \d+ \+ completion 48 = {total} tokens, \+ 1 with its end of turn"):
        encode_sft(load_tokenizer(tmp_path / "m"), read_config(tmp_path / "m")[2], exs, 100, False, "f.jsonl")
    # grpo.py: one line, exit 2, before the weights load
    data = tmp_path / "mc.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in mcq.sample_records(20, 0)))
    out = subprocess.run([sys.executable, "grpo.py", "--task", "mcq", "--data", str(data), "--model-dir",
                          str(tmp_path / "m"), "--gen-length", "32", "--out-dir", str(tmp_path / "g")],
                         cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 2 and "--gen-length 32 is shorter than task mcq's longest label" in out.stderr
    assert not (tmp_path / "g").exists()
