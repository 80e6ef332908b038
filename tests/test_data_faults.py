"""
Fault injection for the data readers (taskdata/records.py and the loaders of tasks.py and taskdata/code_data.py):
each fault is a real file in tmp_path, read through the real reader, and each is ONE ValueError line
naming file:line (file[i] for a JSON array, "file row i" for parquet) and, where one field is at fault,
that field: a gzip file cut short (also when the records a run needs come before the cut), a line
nested deeper than Python's parser goes, NaN / Infinity where a value is needed, a field of the wrong
type, bytes or escapes that are not text. End to end, grpo.py and sft.py answer each with exit 2, one
stderr line, no traceback, and nothing written. CPU, about 30 seconds (the end-to-end runs).

    python -m pytest tests/test_data_faults.py -q
"""
import gzip
import io
import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tasks
from conftest import REPO
from taskdata.records import read_records
from ops.checks import USAGE_EXIT

# one good record per task, in the column names of its files; each fault goes in the record after it
GOOD = {
    "gsm8k": {"question": "Tom has 3 apples and buys 4. How many?", "answer": "3+4=7\n#### 7"},
    "math": {"problem": "What is $2^{10}$?", "answer": "1024"},
    "countdown": {"nums": [1, 2, 3], "target": 6},
    "sudoku": {"Puzzle": "3102200002100320", "Solution": "3142243142131324"},
    "s1k": {"question": "How many?", "thinking_trajectories": ["Count them."], "attempt": "128"},
    "code": {"question": "Write add(a, b).", "solution": "def add(a, b):\n    return a + b\n",
             "test": "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"},
    "humaneval": {"task_id": "HumanEval/0", "prompt": 'def add(a, b):\n    """Add."""\n',
                  "canonical_solution": "    return a + b\n", "entry_point": "add",
                  "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"},
    "mbpp": {"task_id": 11, "text": "Write add.", "code": "def add(a, b):\n    return a + b",
             "test_list": ["assert add(1, 2) == 3"], "test_setup_code": ""},
    "mbpp_plus": {"task_id": "Mbpp/11", "prompt": '"""\nWrite add.\nassert add(1, 2) == 3\n"""\n',
                  "canonical_solution": "def add(a, b):\n    return a + b", "entry_point": "add",
                  "assertion": "assert add(1, 2) == 3"},
    "leetcode": {"task_id": "echo", "query": "Return a.", "prompt": "from typing import *\n",
                 "completion": "class Solution:\n    def f(self, a):\n        return a\n",
                 "test": "def check(candidate):\n    assert candidate(1) == 1\n", "entry_point": "Solution().f"},
}
NUMBER = "a string or a finite number"  # what MATH's answer may be
DEEP = 200_000  # levels of nesting: far past Python's recursion limit (1000)


def write_lines(path, lines, end="\n"):
    path.write_text("\n".join(lines) + end, encoding="utf-8")
    return path


def with_bad_second(path, task, bad):
    """A jsonl file: the task's good record, then `bad` (a JSON text, so NaN and odd escapes stay as typed)."""
    return write_lines(path, [json.dumps(GOOD[task]), bad])


def one_line_error(fn, *args):
    with pytest.raises(ValueError) as info:
        fn(*args)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def text_before_cut(data):
    """What gzip's own streaming reader gets out of a cut gzip file before it says the stream ended early:
    the independent account of where the text stops."""
    out = bytearray()
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
        try:
            while chunk := f.read(1):
                out += chunk
        except EOFError:
            pass
    return bytes(out)


def gsm8k_rows(n):
    return [{"question": f"Tom has {i} apples and buys 4. How many?", "answer": f"{i}+4={i + 4}\n#### {i + 4}"}
            for i in range(n)]


# -----------------------------------------------------------------------------
# a gzip file cut short


def test_test_oracle_reads_a_whole_gzip_file():
    text = "".join(json.dumps(r) + "\n" for r in gsm8k_rows(5)).encode()
    assert text_before_cut(gzip.compress(text)) == text


@pytest.mark.parametrize("members", [1, 2])  # a gzip file may be several members one after the other
def test_truncated_gzip_names_the_line_where_its_text_stops(tmp_path, members):
    text = "".join(json.dumps(r) + "\n" for r in gsm8k_rows(60)).encode()
    half = text.index(b"\n", len(text) // 2) + 1
    payload = b"".join(gzip.compress(part) for part in ([text] if members == 1 else [text[:half], text[half:]]))
    path = tmp_path / "gsm8k.jsonl.gz"
    for cut in (12, len(payload) // 3, len(payload) // 2 + 7, len(payload) - 30, len(payload) - 9, len(payload) - 1):
        path.write_bytes(payload[:cut])
        before = text_before_cut(payload[:cut])
        lines = before.count(b"\n")
        if not before:
            expected = f"{path}: truncated gzip file (it stops before any text"
        elif before.endswith(b"\n"):
            expected = f"{path}:{lines}: truncated gzip file (its text stops after line {lines},"
        else:
            expected = f"{path}:{lines + 1}: truncated gzip file (its text stops in line {lines + 1}, cut in two"
        assert one_line_error(read_records, path).startswith(expected), cut


def test_truncated_gzip_is_an_error_even_when_the_needed_records_came_first(tmp_path):
    payload = gzip.compress("".join(json.dumps(r) + "\n" for r in gsm8k_rows(200)).encode())
    path = tmp_path / "gsm8k.jsonl.gz"
    path.write_bytes(payload[:len(payload) * 3 // 4])  # three quarters: well over a hundred whole records
    assert len(text_before_cut(path.read_bytes()).splitlines()) > 100
    assert ": truncated gzip file (its text stops in line " in one_line_error(tasks.load_task, "gsm8k", path)
    for empty in (b"", b"\x1f"):  # nothing left but (part of) the magic bytes
        path.write_bytes(empty)
        assert one_line_error(read_records, path).startswith(f"{path}: truncated gzip file ({len(empty)} of its")


def test_cut_jsonl_and_json_array_say_truncated(tmp_path):
    rows = [json.dumps(r) for r in gsm8k_rows(3)]
    cut = write_lines(tmp_path / "cut.jsonl", [*rows[:2], rows[2][:30]], end="")  # no newline at the end
    assert one_line_error(read_records, cut).startswith(f"{cut}:3: malformed JSON line (Unterminated string")
    assert one_line_error(read_records, cut).endswith("(the last line, and the file does not end in a newline: "
                                                     "truncated?)")
    array = tmp_path / "cut.json"
    array.write_text("[\n" + ",\n".join(rows)[:-20])
    message = one_line_error(read_records, array)
    assert message.startswith(f"{array}:4: not valid JSON (Unterminated string starting at, column ")
    assert message.endswith("(the file does not end with the array's closing ']': truncated?)")


# -----------------------------------------------------------------------------
# nesting deeper than Python's parser goes


def test_deep_jsonl_line_names_its_line(tmp_path):
    deep = '{"question": "q", "answer": ' + "[" * DEEP + "]" * DEEP + "}"
    path = with_bad_second(tmp_path / "g.jsonl", "gsm8k", deep)
    assert one_line_error(read_records, path).startswith(f"{path}:2: JSON nested too deeply")
    array = tmp_path / "g.json"  # in an array: the element and its line
    array.write_text("[\n" + json.dumps(GOOD["gsm8k"]) + ",\n" + deep + "\n]")
    assert one_line_error(read_records, array).startswith(f"{array}[1] (line 3): JSON nested too deeply")


def test_deep_test_source_names_its_record(tmp_path):
    deep = dict(GOOD["humaneval"], test="def check(candidate):\n    assert candidate(1, 2) == " + "-" * DEEP + "3\n")
    path = with_bad_second(tmp_path / "he.jsonl", "humaneval", json.dumps(deep))
    assert one_line_error(tasks.load_task, "humaneval", path) == \
        f"{path}:2: field 'test' is nested too deeply for Python's parser"


# -----------------------------------------------------------------------------
# NaN and Infinity: json reads them as floats; where a loader needs a value they are named with their field


@pytest.mark.parametrize("task, bad, says", [
    ("gsm8k", '{"question": "q", "answer": NaN}', "field 'answer' must be a string, got float nan"),
    ("math", '{"problem": "p", "answer": Infinity}', f"field 'answer' must be {NUMBER}, got float inf"),
    ("math", '{"problem": "p", "answer": 1e999}', f"field 'answer' must be {NUMBER}, got float inf"),
    ("countdown", '{"nums": [1, 2, 3], "target": -Infinity}', "numbers [1, 2, 3] / target -inf are not integers"),
    ("countdown", '{"nums": [1, NaN, 3], "target": 4}', "numbers [1, nan, 3] / target 4 are not integers"),
])
def test_nan_and_infinity_where_a_value_is_needed(tmp_path, task, bad, says):
    path = with_bad_second(tmp_path / "d.jsonl", task, bad)
    assert one_line_error(tasks.load_task, task, path) == f"{path}:2: {says}"


def test_nan_in_a_field_no_loader_reads_is_kept(tmp_path):
    # MbppPlus.jsonl.gz holds -Infinity among its plus_input test values: the file must stay readable
    bad = '{"question": "q", "answer": "#### 1", "inputs": [-Infinity]}'
    path = with_bad_second(tmp_path / "g.jsonl", "gsm8k", bad)
    assert tasks.load_task("gsm8k", path)[1]["answer"] == "1"


# -----------------------------------------------------------------------------
# a field of the wrong type: named with what it holds, never a TypeError in a prompt or a reward


@pytest.mark.parametrize("task, change, says", [
    ("gsm8k", {"answer": 5}, "field 'answer' must be a string, got int 5"),
    ("gsm8k", {"question": ["q"]}, "field 'question' must be a string, got list ['q']"),
    ("math", {"problem": {"text": "p"}}, "field 'problem' must be a string, got dict {'text': 'p'}"),
    ("math", {"answer": True}, f"field 'answer' must be {NUMBER}, got bool True"),
    ("countdown", {"nums": [1, 2, True]}, "numbers [1, 2, True] / target 6 are not integers"),
    ("countdown", {"nums": [1.5, 2, 3]}, "numbers [1.5, 2, 3] / target 6 are not integers"),
    ("countdown", {"nums": "1,2,3"}, "field 'nums' must be a list, got str '1,2,3'"),
    ("sudoku", {"Puzzle": 3102200002100320}, "field 'Puzzle' must be a string, got int 3102200002100320"),
    ("s1k", {"attempt": 128}, "field 'attempt' must be a string, got int 128"),
    ("s1k", {"thinking_trajectories": [5]}, "field 'thinking_trajectories' must be a string or a list of strings, "
                                            "got int 5"),
    ("code", {"test": ["assert add(1, 2) == 3"]}, "field 'test' must be a string, got list ['assert add(1, 2) == 3']"),
    ("code", {"solution": "  "}, "field 'solution' is empty"),
    ("humaneval", {"test": "def check(candidate):\n    assert (\n"},
     "field 'test': SyntaxError: '(' was never closed (<unknown>, line 2)"),
    ("humaneval", {"entry_point": None}, "missing field 'entry_point'"),
    ("mbpp", {"test_list": []}, "field 'test_list' must be a non-empty list of strings, got list []"),
    ("mbpp", {"test_list": "assert add(1, 2) == 3"}, "field 'test_list' must be a list, got str 'assert add(1, "),
    ("mbpp", {"test_imports": [1]}, "field 'test_imports' must be a list of strings, got list [1]"),
    ("mbpp_plus", {"assertion": ["assert add(1, 2) == 3"]}, "field 'assertion' must be a string, got list "),
    ("leetcode", {"entry_point": 5}, "field 'entry_point' must be a string, got int 5"),
])
def test_wrong_type_names_the_field(tmp_path, task, change, says):
    path = with_bad_second(tmp_path / "d.jsonl", task, json.dumps({**GOOD[task], **change}))
    assert one_line_error(tasks.load_task, task, path).startswith(f"{path}:2: {says}")


@pytest.mark.parametrize("task", sorted(GOOD))
def test_the_good_records_load(tmp_path, task):
    path = write_lines(tmp_path / "d.jsonl", [json.dumps(GOOD[task])] * 2)
    assert len(tasks.load_task(task, path)) == 2


# -----------------------------------------------------------------------------
# bytes and escapes that are not text


def test_non_utf8_byte_in_a_gzipped_jsonl_names_its_line(tmp_path):
    rows = [json.dumps(r).encode() for r in gsm8k_rows(2)]
    path = tmp_path / "g.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n".join([*rows, b'{"question": "caf\xe9", "answer": "#### 1"}']) + b"\n"))
    assert one_line_error(read_records, path).startswith(f"{path}:3: not UTF-8 text (byte 0xe9 at column 18)")


def test_non_utf8_string_in_parquet_names_row_and_field(tmp_path):
    # pyarrow writes a binary column viewed as string without checking it; to_pylist then fails to decode
    question = pa.array([b"fine", b"caf\xe9 au lait", b"ok"], pa.binary()).view(pa.string())
    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"question": question, "answer": ["#### 1", "#### 2", "#### 3"]}), path)
    assert one_line_error(read_records, path).startswith(
        f"{path} row 1: field 'question' is not UTF-8 text (byte 0xe9 at byte 4 of its value)")


def test_lone_surrogate_escape_names_the_field(tmp_path):
    path = with_bad_second(tmp_path / "g.jsonl", "gsm8k", r'{"question": "caf\udce9", "answer": "#### 1"}')
    assert one_line_error(tasks.load_task, "gsm8k", path).startswith(
        f"{path}:2: field 'question' holds a lone surrogate ('\\udce9' at character 4)")
    s1k = with_bad_second(tmp_path / "s.jsonl", "s1k", r'{"question": "q", "thinking_trajectories": ["\ud800"], '
                                                       r'"attempt": "1"}')
    assert one_line_error(tasks.load_task, "s1k", s1k).startswith(f"{s1k}:2: field 'thinking_trajectories' holds a lone")
    # a surrogate PAIR is one character (an emoji), and HumanEvalPlus's files hold such escapes
    pair = with_bad_second(tmp_path / "p.jsonl", "gsm8k", r'{"question": "smile \ud83d\ude00", "answer": "#### 1"}')
    assert tasks.load_task("gsm8k", pair)[1]["question"] == "smile \U0001F600"


def test_integer_beyond_python_s_digit_limit_names_its_line(tmp_path):
    path = with_bad_second(tmp_path / "c.jsonl", "countdown", '{"nums": [1, 2, 3], "target": ' + "9" * 5000 + "}")
    assert one_line_error(read_records, path).startswith(f"{path}:2: unreadable JSON value (ValueError: Exceeds")


def test_csv_field_over_the_csv_module_s_limit_names_its_line(tmp_path):
    path = write_lines(tmp_path / "s.csv", ["Puzzle,Solution", "3102200002100320,3142243142131324",
                                            "3" * 200_000 + ",3142243142131324"])
    assert one_line_error(read_records, path) == f"{path}:3: malformed csv (field larger than field limit (131072))"


# -----------------------------------------------------------------------------
# end to end: the entry scripts say it in one line, exit 2, and write nothing


GRPO = ["--prompts-per-step", "2", "--groups-per-micro", "1", "--num-generations", "2", "--num-iterations", "1",
        "--gen-length", "16", "--block-length", "16", "--diffusion-steps", "4", "--rounds", "1", "--lora-r", "4",
        "--lora-alpha", "8", "--max-prompt-length", "64"]
SFT = ["--batch-size", "2", "--grad-accum", "1", "--max-steps", "1", "--max-length", "200", "--lora-r", "4",
       "--lora-alpha", "8", "--eval-fraction", "0"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from modelio.checkpoint import make_tiny
    return make_tiny(tmp_path_factory.mktemp("tiny") / "model", d_model=32, n_heads=4, n_kv_heads=4, n_layers=1,
                     mlp_hidden_size=64)


def cut_gzip(path):
    """Dozens of whole gsm8k records and a cut: the run needs only two prompts."""
    payload = gzip.compress("".join(json.dumps(r) + "\n" for r in gsm8k_rows(41)).encode())
    path.write_bytes(payload[:-40])
    line = text_before_cut(payload[:-40]).count(b"\n") + 1  # cut in two (asserted by the message)
    assert line > 30
    return path, f"{path}:{line}: truncated gzip file (its text stops in line {line}, cut in two"


def bad_parquet(path):
    question = pa.array([b"fine", b"caf\xe9"], pa.binary()).view(pa.string())
    pq.write_table(pa.table({"question": question, "answer": ["#### 1", "#### 2"]}), path)
    return path, f"{path} row 1: field 'question' is not UTF-8 text"


def bad_jsonl(bad, says):
    return lambda path: (with_bad_second(path, "gsm8k", bad), f"{path}:2: {says}")


@pytest.mark.parametrize("name, make", [
    ("g.jsonl.gz", cut_gzip),
    ("g.jsonl", bad_jsonl('{"question": "q", "answer": ' + "[" * DEEP + "]" * DEEP + "}", "JSON nested too deeply")),
    ("g.jsonl", bad_jsonl('{"question": "q", "answer": NaN}', "field 'answer' must be a string, got float nan")),
    ("g.jsonl", bad_jsonl('{"question": ["q"], "answer": "#### 1"}', "field 'question' must be a string")),
    ("g.jsonl", bad_jsonl(r'{"question": "caf\udce9", "answer": "#### 1"}', "field 'question' holds a lone")),
    ("g.parquet", bad_parquet),
], ids=["gzip-cut", "deep", "nan", "wrong-type", "lone-surrogate", "parquet-not-utf8"])
def test_grpo_says_the_data_fault_in_one_line_and_writes_nothing(tmp_path, tiny, name, make):
    path, says = make(tmp_path / name)
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "grpo.py", "--task", "gsm8k", "--data", str(path), "--model-dir", str(tiny),
                          *GRPO, "--out-dir", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    lines = res.stderr.strip().splitlines()
    assert res.returncode == USAGE_EXIT and len(lines) == 1, res.stderr[-3000:]
    assert lines[0].startswith(f"grpo.py: error: {says}"), lines[0]
    assert not out.exists()


def test_sft_says_a_wrong_type_in_one_line_and_writes_nothing(tmp_path, tiny):
    path = with_bad_second(tmp_path / "s1k.jsonl", "s1k", json.dumps({**GOOD["s1k"], "attempt": float("nan")}))
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "sft.py", "--task", "s1k", "--data", str(path), "--model-dir", str(tiny),
                          *SFT, "--out-dir", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert res.returncode == USAGE_EXIT and res.stderr.strip().splitlines() == [
        f"sft.py: error: {path}:2: field 'attempt' must be a string, got float nan"], res.stderr[-3000:]
    assert not out.exists()
