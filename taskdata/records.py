"""
Reading a data set one record at a time, each with where it came from: the plumbing under every
loader of tasks.py and taskdata/code_data.py, so every `--data` value is read here.

What `--data` may name:
  a jsonl file   one JSON object a line, blank lines allowed; where = "file:line"
  a JSON array   one array of objects (e.g. an s1K dump); where = "file[i]"
  a csv          with a header (d1's Sudoku files), every field a string; where = "file:line"
  a parquet      how the Hugging Face hub ships its data sets; rows as plain Python values, read with
                 pyarrow; where = "file row i" (from 0, as the hub's viewer counts). A file is parquet
                 if it ends .parquet or starts with PAR1.
  any of them gzipped: a file ending .gz or starting with gzip's magic bytes (HumanEval.jsonl.gz)
  a hub id       owner/name[@revision][:config][:split] when no local file has that name and it is
                 not a mistyped path (is_hub_dataset): ONE field after the id is the split, TWO are
                 config:split (default split: train, a slice allowed: train[:100]). Read from the hub
                 cache's files (taskdata/hub_data.py), else with the optional `datasets` package;
                 where = "spec row i". E.g. openai/gsm8k:main:train, simplescaling/s1K.

Every failure is one ValueError / FileNotFoundError naming the file (or hub id), the line or row, the
field at fault (field()) and the likely cause, at load time, never at reward time. A file is read whole
before any record is handed out, so a gzip file cut short is an error even before the records a run needs.

    from taskdata.records import field, read_records
    for where, rec in read_records("gsm8k/test.jsonl"):
        question = field(rec, "question", where)   # ValueError "gsm8k/test.jsonl:7: missing field ..."
"""
import csv
import gzip
import hashlib
import json
import os
import re
import zlib
from pathlib import Path

from taskdata import hub_data

CSV_FIRST_ROW = 2  # a csv's line 1 is its header, so the first record is line 2
PARQUET_MAGIC = b"PAR1"  # parquet's first (and last) 4 bytes
GZIP_MAGIC = b"\x1f\x8b"
JSON = json.JSONDecoder()  # json.loads' own decoder; raw_decode reads one element of an array at a time
JSON_SPACE = re.compile(r"[ \t\n\r]*")  # the whitespace JSON allows between values
PYARROW_SOURCE = r"^Could not open Parquet input source '[^']*': "  # the head of pyarrow's open errors
KIND_NAMES = {str: "a string", list: "a list", dict: "an object"}  # field()'s kinds, as an error line says them
# other binary formats a data file turns out to be, named when it is not UTF-8 text
OTHER_BINARY = {b"PK\x03\x04": "a zip archive (an .xlsx is one): unpack or export it first",
                b"BZh": "bzip2-compressed: decompress it first (only gzip is read as it is)",
                b"\xfd7zXZ\x00": "xz-compressed: decompress it first (only gzip is read as it is)",
                b"\x28\xb5\x2f\xfd": "zstd-compressed: decompress it first (only gzip is read as it is)"}
# a value ending like this names a local file, even when it does not exist: a mistyped path, never a hub id
DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet", ".gz", ".tsv", ".txt")
HUB_SPLIT = "train"  # the split a hub id without one reads (the hub's training data)
# owner/name[@revision][:config][:split]. Owner and name start alphanumeric, so ./x and ../x are
# paths; a revision may hold slashes (refs/convert/parquet); a split may end in a slice, train[:100]
HUB_FIELD = r"[\w.-]+(?:\[[^\]]*\])?"
HUB_SPEC = re.compile(rf"(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>[^:@\s]+))?"
                      rf"(?::(?P<first>{HUB_FIELD}))?(?::(?P<second>{HUB_FIELD}))?", re.ASCII)


def read_records(path):
    """[(where, record)] from a local data file or a hub dataset id (module docstring); `where` names
    the file and line or row, so that a loader's error points at the bad record."""
    if Path(path).is_file():
        return _file_records(Path(path))
    if Path(path).is_dir():
        raise FileNotFoundError(folder_hint(path))
    if is_hub_dataset(path):
        return _hub_records(str(path))
    if _hub_shaped(path) and not os.path.exists(path):
        # hub-shaped, but inside a folder that is here (is_hub_dataset): say why the hub was not asked
        raise FileNotFoundError(f"data file not found: {path} (not read as a hub dataset id: the folder "
                                f"{os.path.dirname(str(path))}/ is here)")
    raise FileNotFoundError(f"data file not found: {path}")


def field(rec, key, where, kind=None):
    """rec[key], or one ValueError for every loader's missing field: the record, the field, and what the
    record does have. `kind` (str, list, ...): the type the value must have, else one ValueError naming
    the field and what it holds (not a TypeError deep in a prompt or a reward)."""
    if not isinstance(rec, dict) or rec.get(key) is None:  # None: a csv row with too few columns
        have = sorted(rec) if isinstance(rec, dict) else type(rec).__name__
        raise ValueError(f"{where}: missing field {key!r} (record has {have})")
    if kind is not None and not isinstance(rec[key], kind):
        raise ValueError(f"{where}: field {key!r} must be {KIND_NAMES.get(kind, kind)}, got {describe(rec[key])}")
    return check_text(rec[key], key, where) if isinstance(rec[key], str) else rec[key]


def check_text(value, key, where):
    """`value` (a string), unless it holds a lone surrogate: JSON's \\ud800-\\udfff escape without its pair
    reads as a str that no tokenizer and no UTF-8 file can take (a TypeError deep in the tokenizer)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{where}: field {key!r} holds a lone surrogate ({value[e.start]!r} at character "
                         f"{e.start + 1}), not text: written from bytes decoded with errors='surrogateescape', "
                         f"or a character cut in half") from None
    return value


def describe(value):
    """A value's type and its start, for an error line: int 5, list ['q'], float nan."""
    shown = repr(value)
    return f"{type(value).__name__} {shown if len(shown) <= 40 else shown[:37] + '...'}"


def _nonempty(records, source):
    """The records, unless there are none: an empty dataset would only fail much later, far from its cause."""
    if not records:
        raise ValueError(f"{source}: no records")
    return records


def _first_line(exc, drop=None):
    """An exception's type and the first line of its message (less the prefix matching regex `drop`):
    enough to say what went wrong, in one line."""
    message = (str(exc).strip().splitlines() or [""])[0]
    if drop:
        message = re.sub(drop, "", message)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


# -----------------------------------------------------------------------------
# local files: gzip and parquet are recognised by their first bytes, whatever the file is called

def _file_records(path):
    data = _gunzip(path, path.read_bytes())
    if data.startswith(PARQUET_MAGIC) or path.name.endswith(".parquet"):
        return _parquet_records(path, data)
    return _text_records(path, _decode(path, data))


def _gunzip(path, raw):
    """The file's bytes, decompressed when they are gzip; a .gz that is not gzip, or a truncated or
    corrupt one, is one ValueError. Read whole, never streamed: a cut file is an error even when the
    records a run needs come before the cut."""
    if path.suffix == ".gz" and GZIP_MAGIC.startswith(raw):  # empty, or cut inside gzip's two magic bytes
        raise ValueError(f"{path}: truncated gzip file ({len(raw)} of its bytes are here, no text); download "
                         f"or copy it again")
    if not raw.startswith(GZIP_MAGIC):
        if path.suffix == ".gz":
            raise ValueError(f"{path}: named .gz but not gzip data (it starts {raw[:8]!r}); "
                             f"rename it if it is plain text")
        return raw
    try:
        return gzip.decompress(raw)
    except EOFError:  # the stream stops before gzip's end marker: an interrupted download or copy
        where, stop = _gzip_cut(path, _gzip_prefix(raw))
        raise ValueError(f"{where}: truncated gzip file ({stop}, before gzip's end-of-stream marker); download "
                         f"or copy it again") from None
    except (OSError, zlib.error) as e:  # BadGzipFile is an OSError
        raise ValueError(f"{path}: not a readable gzip file ({_first_line(e)})") from None


def _gzip_prefix(raw):
    """The text a cut gzip file holds before the cut: each member (a gzip file may be several, one after
    the other) decompressed as far as its bytes go."""
    text = []
    while raw:
        member = zlib.decompressobj(wbits=31)  # 31: gzip's header and trailer around the deflate stream
        try:
            text.append(member.decompress(raw))
        except zlib.error:
            break
        if not member.eof:  # the member the cut fell in
            break
        raw = member.unused_data
    return b"".join(text)


def _gzip_cut(path, text):
    """(where, how) the text a cut gzip file holds stops: in a line (cut in two), after a line (the cut fell
    between lines, or in gzip's trailer), or before any text."""
    lines = text.count(b"\n")
    if not text:
        return str(path), "it stops before any text"
    if text.endswith(b"\n"):
        return f"{path}:{lines}", f"its text stops after line {lines}"
    return f"{path}:{lines + 1}", f"its text stops in line {lines + 1}, cut in two"


def _parquet_records(path, data):
    """A parquet file's rows as plain Python dicts (pyarrow's to_pylist: lists, ints, nested structs as
    dicts), each with where = "file row i"."""
    try:  # imported here: only parquet needs it (it is in requirements.txt)
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError(f"{path}: reading parquet needs pyarrow: pip install -r requirements.txt "
                         f"(it pins pyarrow)") from None
    try:
        # the bytes copied into memory pyarrow owns: a reader over a Python object is released on one of
        # pyarrow's threads, and a release during the interpreter's exit aborted the process (docs/LOG.md)
        buf = pa.allocate_buffer(len(data))
        pa.FixedSizeBufferWriter(buf).write(data)
        table = pq.read_table(pa.BufferReader(buf))
        rows = table.to_pylist()
    except UnicodeDecodeError:  # a string column holding bytes that are not UTF-8 (pyarrow does not check)
        raise ValueError(_parquet_not_utf8(path, table)) from None
    except (pa.ArrowException, OSError) as e:
        # pyarrow names its input '<Buffer>' (it reads the bytes): the message names the path instead
        cause = _first_line(e, drop=PYARROW_SOURCE)
        raise ValueError(f"{path}: not a readable parquet file ({cause}); "
                         f"truncated or corrupt? download it again") from None
    return _nonempty([(f"{path} row {i}", row) for i, row in enumerate(rows)], path)


def _parquet_not_utf8(path, table):
    """'file row i: field 'name' ...' for the first value of `table` that is not UTF-8: column by column,
    then row by row in the column that fails (only after to_pylist has failed: the quick path stays quick)."""
    for name in table.column_names:
        column = table.column(name)
        try:
            column.to_pylist()
            continue
        except UnicodeDecodeError:
            pass
        for i in range(len(column)):
            try:
                column[i].as_py()
            except UnicodeDecodeError as e:
                return (f"{path} row {i}: field {name!r} is not UTF-8 text (byte 0x{e.object[e.start]:02x} at "
                        f"byte {e.start + 1} of its value): the file was written from text in another encoding")
    return f"{path}: a string column is not UTF-8 text"  # not reached: some column failed


def _decode(path, data):
    """UTF-8 text (a leading byte-order mark dropped), or one ValueError naming the line and column of
    the first byte that is not UTF-8 and what the file probably is instead."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        for magic, what in OTHER_BINARY.items():
            if data.startswith(magic):
                raise ValueError(f"{path}: not text but {what}") from None
        line_start = data.rfind(b"\n", 0, e.start) + 1
        line = data.count(b"\n", 0, e.start) + 1
        # the column in characters, as an editor counts: the bytes before the bad one decode cleanly
        column = len(data[line_start:e.start].decode("utf-8")) + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x} at column {column}): text "
                         f"in another encoding (save it as UTF-8) or a binary format other than parquet and gzip "
                         f"(both are recognised by their first bytes)") from None
    return text.removeprefix("\ufeff")  # a BOM from a Windows editor would otherwise stick to the first field


def _text_records(path, text):
    """A csv, a JSON array or jsonl, told apart by the name (csv) and the first character ([)."""
    if path.name.endswith(".csv"):  # csv module keeps every field a string: Sudoku's leading zeros survive
        rows = csv.DictReader(text.splitlines())
        try:
            return _nonempty([(f"{path}:{i}", row) for i, row in enumerate(rows, start=CSV_FIRST_ROW)], path)
        except csv.Error as e:  # not a ValueError: it would leave the scripts' up-front block as a traceback
            # line_num counts the lines read before the row that failed (a field above csv's size limit)
            raise ValueError(f"{path}:{rows.line_num + 1}: malformed csv ({e})") from None
    if text.lstrip().startswith("["):  # one JSON array (e.g. an s1K dump)
        return _nonempty(_array_records(path, text), path)
    records = []
    # split at "\n" only: str.splitlines() also splits at U+2028 and other separators that JSON keeps
    # raw inside strings, which would cut a valid record in two
    lines = text.split("\n")
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue  # tolerate blank lines (e.g. a trailing one)
        try:
            records.append((f"{path}:{i}", _parse_json(line, f"{path}:{i}")))
        except json.JSONDecodeError as e:
            # a last line without its newline that does not parse is what a copy cut short leaves
            cut = " (the last line, and the file does not end in a newline: truncated?)" if i == len(lines) else ""
            raise ValueError(f"{path}:{i}: malformed JSON line ({e.msg}){cut}") from None
    return _nonempty(records, path)


def _array_records(path, text):
    """The records of one JSON array, parsed one element at a time, so that an element the parser refuses
    is named by its index and line, as a jsonl line is (json.loads of the whole array would not say which)."""
    # a cut copy ends inside the array, most often inside a string: said with any syntax error
    cut = "" if text.rstrip().endswith("]") else " (the file does not end with the array's closing ']': truncated?)"
    records, line, counted = [], 1, 0  # the line of text[counted], counted as the elements go by
    pos = _skip_space(text, text.index("[") + 1)
    while not (text.startswith("]", pos) and not records):  # [] is an empty array, [1,] is an error
        where = f"{path}[{len(records)}]"
        line, counted = line + text.count("\n", counted, pos), pos
        try:
            rec, pos = _parse_json(text, f"{where} (line {line})", pos)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg}, column {e.colno}){cut}") from None
        records.append((where, rec))
        pos = _skip_space(text, pos)
        if text.startswith("]", pos):
            break
        if not text.startswith(",", pos):
            raise ValueError(f"{path}:{_line_at(text, pos)}: not valid JSON (expected ',' or ']' "
                             f"after element {len(records) - 1}){cut}")
        pos = _skip_space(text, pos + 1)
    if text[pos + 1:].strip():
        raise ValueError(f"{path}:{_line_at(text, pos + 1)}: not valid JSON (more text after the "
                         f"array's closing ']')")
    return records


def _skip_space(text, pos):
    return JSON_SPACE.match(text, pos).end()


def _line_at(text, pos):
    return text.count("\n", 0, pos) + 1


def _parse_json(text, where, pos=None):
    """One JSON value: all of `text` (pos None) or the one starting at text[pos] (-> value, end). Nesting
    deeper than the parser allows and an integer of more digits than Python converts are one ValueError
    naming `where`; NaN, Infinity and lone surrogate escapes are read as json reads them (field() names
    a bad one a loader reads). A syntax error stays a JSONDecodeError, for the caller to word."""
    try:
        value = JSON.decode(text) if pos is None else JSON.raw_decode(text, pos)
    except RecursionError:
        raise ValueError(f"{where}: JSON nested too deeply (more levels than Python's parser allows; "
                         f"a data record needs a handful)") from None
    except json.JSONDecodeError:
        raise
    except ValueError as e:  # e.g. an integer of more digits than Python converts (sys.set_int_max_str_digits)
        raise ValueError(f"{where}: unreadable JSON value ({_first_line(e)})") from None
    return value


# -----------------------------------------------------------------------------
# hub dataset ids, through the optional `datasets` package

def is_hub_dataset(spec):
    """Whether `spec` is read as a hub dataset id: it has the form owner/name[@revision][:config][:split],
    no local file or directory has that name, and it is not a mistyped path: one ending like a data file,
    or inside a folder that is here (gsm8k/tset beside gsm8k/; modelio/hub.py reads --model-dir alike)."""
    spec = str(spec)
    return _hub_shaped(spec) and not os.path.exists(spec) and not os.path.isdir(os.path.dirname(spec))


def _hub_shaped(spec):
    """owner/name[@revision][:config][:split], not ending like a data file."""
    spec = str(spec)
    return HUB_SPEC.fullmatch(spec) is not None and not spec.lower().endswith(DATA_SUFFIXES)


def parse_hub_spec(spec):
    """owner/name[@revision][:config][:split] -> (repo, config, split, revision): one field after the id
    is the split, two are config:split; the split defaults to train, config and revision to None."""
    m = HUB_SPEC.fullmatch(str(spec))
    if m is None:
        raise ValueError(f"{spec}: not a hub dataset id (owner/name[@revision][:config][:split])")
    config, split = (m["first"], m["second"]) if m["second"] else (None, m["first"] or HUB_SPLIT)
    return m["repo"], config, split, m["revision"]


def _hub_records(spec, read_from=None):
    """The rows of a hub dataset's split, where = "spec row i": from the hub cache if it holds the repo's data
    (hub_data.find), else with the optional `datasets` package: without it, or when it fails (no such repo,
    config or split; offline and not cached), one ValueError says so. read_from (a dict): gets the commit and
    folder `datasets` read (hub_data.datasets_cache)."""
    repo, config, split, revision = parse_hub_spec(spec)
    found = hub_data.find(spec, repo, config, split, revision)
    if found is not None:
        return _cached_records(spec, found)
    # every message starts the same way: a mistyped local path without a suffix also lands here
    head = f"{spec}: no local file of that name, and"
    get = f"hf download --repo-type dataset {repo}{' --revision ' + revision if revision else ''}"
    if revision and hub_data.offline():  # offline, `datasets` reads its latest cached version, whatever revision
        raise ValueError(f"{head} {repo}@{revision} is not in the hub cache ({hub_data.cache_dir()}); offline, the "
                         f"`datasets` package would read another cached revision in its place: download it ({get})")
    try:
        import datasets
    except ImportError:
        raise ValueError(f"{head} reading it as a hub dataset id needs it in the hub cache ({get}) or the optional "
                         f"package `datasets`: pip install datasets (or download the dataset's parquet files "
                         f"and pass them to --data, which needs nothing more)") from None
    except Exception as e:  # installed but broken (e.g. a pyarrow it does not support)
        raise ValueError(f"{head} the `datasets` package failed to import ({_first_line(e)})") from None
    verbosity = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity_error()  # its offline notes ("using the latest cached version") are not ours
    try:
        dataset = datasets.load_dataset(repo, config, split=split, revision=revision)
        rows = [(f"{spec} row {i}", dict(row)) for i, row in enumerate(dataset)]
    except Exception as e:  # datasets raises many types (FileNotFoundError, ValueError, ConnectionError, ...)
        raise ValueError(f"{head} the hub dataset {repo} (config {config}, split {split}, revision "
                         f"{revision or 'default'}) could not be read: {_first_line(e)}") from None
    finally:
        datasets.logging.set_verbosity(verbosity)
    if read_from is not None:
        read_from.update(hub_data.datasets_cache(dataset))
    return _nonempty(rows, spec)


def _cached_records(spec, found):
    """The rows of a split found in the hub cache: its files read in order (several shards, one split) and
    sliced as `datasets` slices; where = "spec row i", i counting across the files."""
    rows = [rec for path in found.paths for _, rec in _file_records(path)]
    return _nonempty([(f"{spec} row {i}", rec) for i, rec in enumerate(hub_data.take(rows, found.bounds))], spec)


def data_record(spec):
    """What a manifest keeps of a --data value: a file's typed, path (absolute) and sha256; a hub id's typed, id,
    config (the one read), split, revision (as typed), commit, snapshot and files (in read order) in the hub
    cache (when `datasets` read it: the commit and folder of its own cache, hub_data.datasets_cache; no files) and
    records_sha256."""
    typed = str(spec)
    if Path(spec).is_file():
        return {"typed": typed, "path": os.path.abspath(spec), "sha256": records_sha256(spec)}
    if not is_hub_dataset(spec):
        return read_records(spec)  # neither a file nor a hub id: raises its FileNotFoundError
    repo, config, split, revision = parse_hub_spec(spec)
    found = hub_data.find(typed, repo, config, split, revision)
    if found:
        records = _cached_records(typed, found)
        read_from = {"commit": found.commit, "snapshot": found.snapshot}
    else:
        read_from = {}
        records = _hub_records(typed, read_from)
    return {"typed": typed, "id": repo, "config": found.config if found else config, "split": split,
            "revision": revision, **read_from, "files": list(found.files) if found else [],
            "sha256": records_sha256(typed, records)}


def folder_hint(path, flag="--data"):
    """One line for a folder given where a data file belongs: the data files in it, then those one level down
    (a downloaded repo's main/test-00000-of-00001.parquet), six of them named."""
    files = [p for p in sorted(Path(path).glob("*")) + sorted(Path(path).glob("*/*"))
             if p.is_file() and p.name.lower().endswith(DATA_SUFFIXES)]
    more = f" and {len(files) - 6} more" if len(files) > 6 else ""
    return (f"{flag} {path} is a folder; give one of its data files: {', '.join(map(str, files[:6]))}{more}" if files
            else f"{flag} {path} is a folder with no data files (none ends {', '.join(DATA_SUFFIXES)}); give a file")


def records_sha256(spec, records=None):
    """The sha256 that identifies a data set in a manifest. A file: of its bytes. A hub id: of its records
    as JSON lines (json.dumps with sorted keys, each line ending in a newline, UTF-8), since the files
    behind it are not ours to hash. `records`: the [(where, record)] already read, to spare a second read."""
    if Path(spec).is_file():
        h = hashlib.sha256()
        with open(spec, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    h = hashlib.sha256()
    for _, rec in records if records is not None else read_records(spec):
        # default=str: values JSON has no type for (a date column) still hash the same on every read
        h.update((json.dumps(rec, sort_keys=True, default=str) + "\n").encode("utf-8"))
    return h.hexdigest()
