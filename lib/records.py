"""
Reading a data file one record at a time, each with where it came from: the plumbing under every
loader of tasks.py and lib/code_data.py. Standard library only.

A data file is a jsonl file (one JSON object a line, blank lines allowed), a single JSON array (e.g.
an s1K dump), or a csv with a header (d1's Sudoku files); any of them may be gzipped (the code
benchmarks ship as HumanEval.jsonl.gz, ...). Every record comes with `where`, "file:line" or
"file[i]", so that a loader's error names the bad record, and every failure is one ValueError /
FileNotFoundError naming the file: a broken file is said at load time, never at reward time.

    from lib.records import field, read_records
    for where, rec in read_records("gsm8k/test.jsonl"):
        question = field(rec, "question", where)   # ValueError "gsm8k/test.jsonl:7: missing field ..."
"""
import csv
import gzip
import json
from pathlib import Path

CSV_FIRST_ROW = 2  # a csv's line 1 is its header, so the first record is line 2


def read_records(path):
    """[(where, record)] from a jsonl file, a json array, or a csv with a header. `where` is
    "file:line" (or "file[i]" for a json array) so errors point at the bad record."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    # the code benchmarks ship gzipped (HumanEval.jsonl.gz, ...): read them as they are
    text = gzip.decompress(path.read_bytes()).decode("utf-8") if path.suffix == ".gz" else path.read_text(encoding="utf-8")
    if path.name.endswith(".csv"):  # csv module keeps every field a string: Sudoku's leading zeros survive
        rows = csv.DictReader(text.splitlines())
        return [(f"{path}:{i}", row) for i, row in enumerate(rows, start=CSV_FIRST_ROW)]
    if text.lstrip().startswith("["):  # one JSON array (e.g. an s1K dump)
        try:
            return [(f"{path}[{i}]", rec) for i, rec in enumerate(json.loads(text))]
        except json.JSONDecodeError as e:
            # from None: the message already names the file; the decoder's traceback would only add noise
            raise ValueError(f"{path}: not valid JSON ({e})") from None
    records = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue  # tolerate blank lines (e.g. a trailing one)
        try:
            records.append((f"{path}:{i}", json.loads(line)))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: malformed JSON line ({e.msg})") from None
    if not records:  # an empty dataset would only fail much later, far from its cause
        raise ValueError(f"{path}: no records")
    return records


def field(rec, key, where):
    """rec[key], or one ValueError for every loader's missing field: the record, the field, and what
    the record does have."""
    if not isinstance(rec, dict) or rec.get(key) is None:  # None: a csv row with too few columns
        have = sorted(rec) if isinstance(rec, dict) else type(rec).__name__
        raise ValueError(f"{where}: missing field {key!r} (record has {have})")
    return rec[key]
