"""
Tests for taskdata/records.py: `--data` as the Hugging Face hub ships it. Parquet in each hub set's own
column names and types loads through tasks.load_task exactly like the same rows as JSONL (the
independent path); the real Countdown parquet agrees with its derived JSONL; hub dataset ids parse
and read through a stand-in `datasets` module (no network); every read failure is one line naming
the file, line or row, and cause; records_sha256 against an independent hash. CPU, about a second.

    python -m pytest tests/test_records.py -q
"""
import gzip
import hashlib
import io
import json
import sys
import types
import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tasks
from taskdata import readers
from conftest import SHARED_DATA
from taskdata.records import is_hub_dataset, parse_hub_spec, read_records, records_sha256
from ops.checks import InputError, check_data_paths

COUNTDOWN_PREFIX = SHARED_DATA / "countdown_tasks_3to4_prefix"

# -----------------------------------------------------------------------------
# one small set per hub data set, in that set's column names and arrow types

TEST_INFO = pa.struct([("docstring", pa.string()), ("function_declaration", pa.string()),
                       ("function_name", pa.string()), ("parameter_list", pa.string())])

HUB_SETS = {
    # openai/gsm8k (main)
    "gsm8k": (pa.schema([("question", pa.string()), ("answer", pa.string())]), [
        {"question": "Tom has 3 apples and buys 4. How many?", "answer": "3+4=<<3+4=7>>7\n#### 7"},
        {"question": "A café sells 1,000 cups a day…", "answer": "So 1,000\n#### 1,000"}]),
    # simplescaling/s1K (cot is null in every row)
    "s1k": (pa.schema([("solution", pa.string()), ("question", pa.string()), ("cot_type", pa.string()),
                       ("source_type", pa.string()), ("metadata", pa.string()), ("cot", pa.string()),
                       ("thinking_trajectories", pa.list_(pa.string())), ("attempt", pa.string())]), [
        {"solution": "128", "question": "How many?", "cot_type": "math", "source_type": "qq8933/AIME_1983_2024",
         "metadata": "{'ID': '1991-5', 'Year': 1991}", "cot": None,
         "thinking_trajectories": ["Let me count.\nThere are 128."], "attempt": "128"},
        {"solution": "$x=2$", "question": "Solve $x^2=4$, $x>0$.", "cot_type": "math", "source_type": "AI-MO",
         "metadata": "{}", "cot": None, "thinking_trajectories": ["x = ±2; positive: 2"], "attempt": "$2$"}]),
    # KodCode/KodCode-Light-RL-10K (a subset of its columns, nested test_info included)
    "code": (pa.schema([("version", pa.string()), ("style", pa.string()), ("subset", pa.string()),
                        ("question_id", pa.string()), ("question", pa.string()), ("solution", pa.string()),
                        ("test", pa.string()), ("test_info", pa.list_(TEST_INFO)),
                        ("gpt_pass_sequence", pa.list_(pa.int64())), ("gpt_pass_trial_num", pa.int64()),
                        ("gpt_difficulty", pa.string()), ("gpt_pass_percentage", pa.float64())]), [
        {"version": "v1.0", "style": "instruct", "subset": "Leetcode", "question_id": "Leetcode_1_I",
         "question": "Write a function add(a, b) that returns a + b.", "solution": "def add(a, b):\n    return a + b\n",
         "test": "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n",
         "test_info": [{"docstring": None, "function_declaration": "def add(a, b):", "function_name": "add",
                        "parameter_list": "(a, b)"}],
         "gpt_pass_sequence": [1, 1, 1], "gpt_pass_trial_num": 3, "gpt_difficulty": "easy",
         "gpt_pass_percentage": 1.0}]),
    # Jiayi-Pan/Countdown-Tasks-3to4: d1 keeps the 3-number rows
    "countdown": (pa.schema([("target", pa.int64()), ("nums", pa.list_(pa.int64()))]), [
        {"target": 98, "nums": [44, 19, 35]}, {"target": 64, "nums": [63, 95, 96, 2]},
        {"target": 28, "nums": [95, 11, 56]}]),
    # HuggingFaceH4/MATH-500 (answer given; level an int)
    "math": (pa.schema([("problem", pa.string()), ("solution", pa.string()), ("answer", pa.string()),
                        ("subject", pa.string()), ("level", pa.int64()), ("unique_id", pa.string())]), [
        {"problem": "What is $2^{10}$?", "solution": "$2^{10} = \\boxed{1024}$", "answer": "1024",
         "subject": "Algebra", "level": 1, "unique_id": "test/algebra/1.json"}]),
}


@pytest.fixture(autouse=True)
def empty_hub_cache(tmp_path_factory, monkeypatch):
    """An empty hub cache, online: hub ids go to the stand-in `datasets`, never to a real cache on this machine
    (tests/test_hub_data.py reads from caches it builds)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path_factory.mktemp("empty_hub_cache")))
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)


def write_parquet(path, schema, rows):
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def stand_in_datasets(monkeypatch, rows=(), error=None):
    """A `datasets` module whose load_dataset records its arguments and the logging verbosity it ran at,
    and returns `rows` (or raises). Its logging is datasets' API: get / set_verbosity, set_verbosity_error."""
    calls, level = [], {"now": 30}  # datasets' default: WARNING

    def load_dataset(path, name=None, split=None, revision=None):
        calls.append((path, name, split, revision, level["now"]))
        if error is not None:
            raise error
        return [dict(r) for r in rows]
    module = types.ModuleType("datasets")
    module.load_dataset = load_dataset
    module.logging = types.SimpleNamespace(get_verbosity=lambda: level["now"],
                                           set_verbosity=lambda v: level.update(now=v),
                                           set_verbosity_error=lambda: level.update(now=40))
    module.level = level
    monkeypatch.setitem(sys.modules, "datasets", module)
    return calls


def one_line_error(exc_type, fn, *args):
    with pytest.raises(exc_type) as info:
        fn(*args)
    message = str(info.value)
    assert "\n" not in message, message
    return message


# -----------------------------------------------------------------------------
# parquet


@pytest.mark.parametrize("task", sorted(HUB_SETS))
def test_hub_parquet_loads_like_the_same_rows_as_jsonl(tmp_path, task):
    schema, rows = HUB_SETS[task]
    parquet = write_parquet(tmp_path / "train-00000-of-00001.parquet", schema, rows)
    # the rows come back as the plain values written: nested lists and structs, ints, None
    assert [rec for _, rec in read_records(parquet)] == rows
    assert [where for where, _ in read_records(parquet)] == [f"{parquet} row {i}" for i in range(len(rows))]
    examples = tasks.load_task(task, parquet)
    assert examples and examples == tasks.load_task(task, write_jsonl(tmp_path / "same.jsonl", rows))


def test_parquet_values_keep_their_python_types(tmp_path):
    schema, rows = HUB_SETS["countdown"]
    examples = tasks.load_task("countdown", write_parquet(tmp_path / "cd.parquet", schema, rows))
    # the 4-number row is dropped as d1 does; nums print as d1's list repr in the prompt
    assert [(ex["nums"], ex["target"]) for ex in examples] == [([44, 19, 35], 98), ([95, 11, 56], 28)]
    assert all(type(n) is int for ex in examples for n in ex["nums"])
    assert "Using only the numbers [44, 19, 35], create an arithmetic expression that evaluates to exactly 98." \
        in examples[0]["prompt"]


@pytest.mark.skipif(not COUNTDOWN_PREFIX.is_dir(), reason="shared Countdown parquet not present")
def test_real_countdown_parquet_agrees_with_its_derived_jsonl():
    derived = [json.loads(line) for line in
               (COUNTDOWN_PREFIX / "countdown_tasks_3to4_rows_0_11263.jsonl").read_text().splitlines()]
    by_row = {r["row"]: (r["nums"], r["target"]) for r in derived}
    start = 0
    for name in ("train.parquet", "test.parquet"):  # the test rows follow the train rows in the hub's split
        examples = readers.read_countdown(COUNTDOWN_PREFIX / name, n_numbers=None)
        assert [(ex["nums"], ex["target"]) for ex in examples] == [by_row[start + i] for i in range(len(examples))]
        start += len(examples)
    assert start == len(derived) == 11264
    # d1's filter to 3 numbers: the count its SOURCE.md gives for the train file
    assert len(tasks.load_task("countdown", COUNTDOWN_PREFIX / "train.parquet")) == 5052


def test_parquet_is_recognised_by_its_magic_bytes_whatever_its_name(tmp_path):
    schema, rows = HUB_SETS["gsm8k"]
    named_jsonl = write_parquet(tmp_path / "gsm8k.jsonl", schema, rows)
    assert named_jsonl.read_bytes()[:4] == b"PAR1"
    assert tasks.load_task("gsm8k", named_jsonl) == tasks.load_task("gsm8k", write_jsonl(tmp_path / "real.jsonl", rows))
    # gzipped parquet: gzip is recognised first, then parquet inside it
    zipped = tmp_path / "gsm8k.parquet.gz"
    zipped.write_bytes(gzip.compress(named_jsonl.read_bytes()))
    assert [rec for _, rec in read_records(zipped)] == rows


def test_corrupt_truncated_and_empty_parquet_are_one_line(tmp_path):
    schema, rows = HUB_SETS["gsm8k"]
    whole = write_parquet(tmp_path / "whole.parquet", schema, rows).read_bytes()
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(whole[:len(whole) // 2])  # still starts with PAR1: an interrupted download
    message = one_line_error(ValueError, read_records, cut)
    assert message.startswith(f"{cut}: not a readable parquet file (ArrowInvalid: ") and "<Buffer>" not in message
    text = tmp_path / "text.parquet"
    text.write_text('{"question": "q", "answer": "#### 1"}\n')
    assert one_line_error(ValueError, read_records, text).startswith(f"{text}: not a readable parquet file")
    empty = write_parquet(tmp_path / "empty.parquet", schema, [])
    assert one_line_error(ValueError, read_records, empty) == f"{empty}: no records"


def test_parquet_without_pyarrow_says_how_to_get_it(tmp_path, monkeypatch):
    schema, rows = HUB_SETS["gsm8k"]
    path = write_parquet(tmp_path / "g.parquet", schema, rows)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # `import pyarrow.parquet` now raises ImportError
    assert "needs pyarrow: pip install -r requirements.txt" in one_line_error(ValueError, read_records, path)


# -----------------------------------------------------------------------------
# hub dataset ids


@pytest.mark.parametrize("spec, parsed", [
    ("openai/gsm8k:main:train", ("openai/gsm8k", "main", "train")),
    ("openai/gsm8k:main:test", ("openai/gsm8k", "main", "test")),
    ("simplescaling/s1K:train", ("simplescaling/s1K", None, "train")),
    ("Jiayi-Pan/Countdown-Tasks-3to4", ("Jiayi-Pan/Countdown-Tasks-3to4", None, "train")),
    ("HuggingFaceH4/MATH-500:test", ("HuggingFaceH4/MATH-500", None, "test")),
    ("openai/gsm8k@e53f048", ("openai/gsm8k", None, "train", "e53f048")),
    ("KodCode/KodCode-Light-RL-10K@refs/convert/parquet:default:train[:100]",
     ("KodCode/KodCode-Light-RL-10K", "default", "train[:100]", "refs/convert/parquet")),
])
def test_hub_spec_reaches_load_dataset_parsed(tmp_path, monkeypatch, spec, parsed):
    monkeypatch.chdir(tmp_path)  # no local folder shadows the owner
    repo, config, split, revision = (*parsed, None)[:4]
    rows = [{"target": 10, "nums": [1, 2, 3]}, {"target": 20, "nums": [4, 5, 6]}]
    calls = stand_in_datasets(monkeypatch, rows)
    assert is_hub_dataset(spec) and parse_hub_spec(spec) == (repo, config, split, revision)
    assert read_records(spec) == [(f"{spec} row 0", rows[0]), (f"{spec} row 1", rows[1])]
    # read with datasets' own notes silenced (ERROR, 40), its verbosity put back (WARNING, 30) afterwards
    assert calls == [(repo, config, split, revision, 40)] and sys.modules["datasets"].level["now"] == 30


@pytest.mark.parametrize("spec", ["gsm8k/tset.jsonl", "data/train.parquet", "x/y.jsonl.gz", "gsm8k", "./a/b",
                                  "a/b/c", "/abs/x", "a/b:c:d:e", "a/b@", "-a/b"])
def test_paths_are_never_hub_ids(tmp_path, monkeypatch, spec):
    monkeypatch.chdir(tmp_path)
    calls = stand_in_datasets(monkeypatch, [{"question": "q"}])
    assert not is_hub_dataset(spec)
    assert one_line_error(FileNotFoundError, read_records, spec) == f"data file not found: {spec}"
    assert calls == []


def test_local_names_win_over_hub_ids(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls = stand_in_datasets(monkeypatch, [{"question": "from the hub", "answer": "#### 1"}])
    (tmp_path / "openai").mkdir()
    local = write_jsonl(tmp_path / "openai" / "gsm8k", [{"question": "local", "answer": "#### 2"}])
    assert not is_hub_dataset("openai/gsm8k") and tasks.load_task("gsm8k", "openai/gsm8k")[0]["question"] == "local"
    local.unlink()  # the folder is still here: a typo inside it, not a hub id
    assert one_line_error(FileNotFoundError, read_records, "openai/gsm8k") == \
        "data file not found: openai/gsm8k (not read as a hub dataset id: the folder openai/ is here)"
    assert calls == []


def test_hub_rows_go_through_the_loaders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    schema, rows = HUB_SETS["gsm8k"]
    stand_in_datasets(monkeypatch, rows)
    assert tasks.load_task("gsm8k", "openai/gsm8k:main:train") == tasks.load_task(
        "gsm8k", write_jsonl(tmp_path / "g.jsonl", rows))
    stand_in_datasets(monkeypatch, [rows[0], {"question": "no answer"}])
    assert one_line_error(ValueError, tasks.load_task, "gsm8k", "openai/gsm8k:main:train").startswith(
        "openai/gsm8k:main:train row 1: missing field 'answer'")
    stand_in_datasets(monkeypatch, [])
    assert one_line_error(ValueError, read_records, "openai/gsm8k:main:train") == "openai/gsm8k:main:train: no records"


def test_hub_id_without_datasets_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` now raises ImportError
    message = one_line_error(ValueError, read_records, "openai/gsm8k:main:train")
    assert message.startswith("openai/gsm8k:main:train: no local file of that name")
    assert "pip install datasets" in message and "parquet files" in message


def test_hub_failure_is_one_line_with_its_type(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error = FileNotFoundError("Dataset 'nobody/nothing' doesn't exist on the Hub or cannot be accessed.\n"
                              "If the dataset is private or gated, make sure to log in.")
    stand_in_datasets(monkeypatch, error=error)
    with pytest.raises(ValueError) as info:  # a ValueError, so the scripts' up-front block says it in one line
        read_records("nobody/nothing:test")
    assert sys.modules["datasets"].level["now"] == 30  # put back after a failure too
    assert type(info.value) is ValueError and str(info.value) == (
        "nobody/nothing:test: no local file of that name, and the hub dataset nobody/nothing (config None, "
        "split test, revision default) could not be read: FileNotFoundError: Dataset 'nobody/nothing' "
        "doesn't exist on the Hub or cannot be accessed.")


# -----------------------------------------------------------------------------
# text, gzip and other bytes


def test_non_utf8_byte_names_file_line_column_and_byte(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    before = '{"question": "Zoë'  # a two-byte character before the bad byte: the column counts characters
    path.write_bytes(b'{"question": "a", "answer": "#### 1"}\n\n' + before.encode() + b"\x84 and more\"}\n")
    message = one_line_error(ValueError, tasks.load_task, "gsm8k", path)
    assert message.startswith(f"{path}:3: not UTF-8 text (byte 0x84 at column {len(before) + 1}): ")
    csv_path = tmp_path / "s.csv"
    csv_path.write_bytes(b"Puzzle,Solution\n3102200002100320,3142243142131324\n31022000\xe902100320,x\n")
    assert one_line_error(ValueError, tasks.load_task, "sudoku", csv_path).startswith(
        f"{csv_path}:3: not UTF-8 text (byte 0xe9 at column 9)")


def test_other_binary_formats_are_named(tmp_path):
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("gsm8k.jsonl", "\x00\xff" * 50)
    path = tmp_path / "gsm8k.jsonl"
    path.write_bytes(zipped.getvalue())
    assert one_line_error(ValueError, read_records, path).startswith(f"{path}: not text but a zip archive")


def test_gzip_by_name_or_magic_and_its_failures(tmp_path):
    rows = [{"question": "q", "answer": "#### 1"}, {"question": "r", "answer": "#### 2"}]
    payload = gzip.compress(write_jsonl(tmp_path / "plain.jsonl", rows).read_bytes())
    for name in ("g.jsonl.gz", "g.jsonl"):  # a gzip file read as such whatever its name
        (tmp_path / name).write_bytes(payload)
        assert read_records(tmp_path / name) == [(f"{tmp_path / name}:{i}", r) for i, r in enumerate(rows, 1)]
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(payload[:-12])
    # the second line is cut in two: 12 bytes off the end are the trailer and the end of the deflate stream
    assert one_line_error(ValueError, read_records, cut).startswith(f"{cut}:2: truncated gzip file")
    fake = tmp_path / "fake.jsonl.gz"
    fake.write_text('{"question": "q"}\n')
    assert one_line_error(ValueError, read_records, fake).startswith(f"{fake}: named .gz but not gzip data")
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(payload[:10] + bytes(20) + payload[30:])
    assert one_line_error(ValueError, read_records, broken).startswith(f"{broken}: not a readable gzip file (")


def test_line_separators_inside_json_strings_stay_in_their_record(tmp_path):
    # json.dumps(ensure_ascii=False) writes U+2028 raw; str.splitlines() would cut the record there
    rows = [{"question": "one\u2028two\x85three", "answer": "#### 1"}, {"question": "q", "answer": "#### 2"}]
    path = tmp_path / "g.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert [rec for _, rec in read_records(path)] == rows


def test_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "s.csv"
    path.write_bytes(b"\xef\xbb\xbfPuzzle,Solution\n3102200002100320,3142243142131324\n")
    assert tasks.load_task("sudoku", path)[0]["puzzle"] == "3102200002100320"


# -----------------------------------------------------------------------------
# hashes and the scripts' up-front check


def test_records_sha256(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_jsonl(tmp_path / "g.jsonl", HUB_SETS["gsm8k"][1])
    assert records_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    rows = HUB_SETS["s1k"][1]
    expected = hashlib.sha256("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()).hexdigest()
    stand_in_datasets(monkeypatch, rows)
    assert records_sha256("simplescaling/s1K") == expected
    assert records_sha256("simplescaling/s1K", records=read_records("simplescaling/s1K")) == expected
    stand_in_datasets(monkeypatch, [dict(reversed(list(r.items()))) for r in rows])  # key order: the same set
    assert records_sha256("simplescaling/s1K") == expected
    stand_in_datasets(monkeypatch, [{**rows[0], "attempt": "127"}, rows[1]])  # one value changed
    assert records_sha256("simplescaling/s1K") != expected


def test_check_data_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "datasets", None)  # the check reads nothing from the hub
    (tmp_path / "g.jsonl").write_text("{}\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "gsm8k" / "main").mkdir(parents=True)  # a downloaded repo: its data files one level down
    for name in ("gsm8k/README.md", "gsm8k/main/test-00000-of-00001.parquet", "gsm8k/main/train-00000-of-00001.parquet"):
        (tmp_path / name).write_text("")
    check_data_paths(["g.jsonl", "openai/gsm8k:main:train", "Jiayi-Pan/Countdown-Tasks-3to4"])
    for path, says in [("nope.jsonl", "--data: nope.jsonl does not exist"),
                       ("folder/tset", "--data: folder/tset does not exist"),
                       ("folder", "--data folder is a folder with no data files (none ends .jsonl, .json, .csv, "
                                  ".parquet, .gz, .tsv, .txt); give a file"),
                       ("gsm8k", "--data gsm8k is a folder; give one of its data files: "
                                 "gsm8k/main/test-00000-of-00001.parquet, gsm8k/main/train-00000-of-00001.parquet")]:
        with pytest.raises(InputError) as info:
            check_data_paths(["g.jsonl", path])
        assert str(info.value) == says
