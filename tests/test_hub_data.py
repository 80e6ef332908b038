"""
Tests for taskdata/hub_data.py and its wiring in taskdata/records.py: a hub dataset id read from the
Hugging Face hub cache without the `datasets` package. Each cache is laid out here as `hf download
--repo-type dataset` leaves it (blobs/<sha256>, snapshots/<commit>/<path> linking into blobs/, refs/<name>
holding a commit), and huggingface_hub's own scan_cache_dir must accept it. The rows read back are compared
with the rows written; revisions, configs and splits either read their own files or are refused in one line
naming what is cached; data_record, the folder hint and Countdown's kept-rows line. No network. CPU, seconds.

    python -m pytest tests/test_hub_data.py -q
"""
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import types

import huggingface_hub
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tasks
from conftest import SHARED_DATA
from taskdata import hub_data
from taskdata.readers import read_countdown
from taskdata.records import data_record, folder_hint, read_records

COMMIT_A, COMMIT_B, COMMIT_C = "a1" * 20, "b2" * 20, "c3" * 20
GSM8K = SHARED_DATA / "gsm8k"
COUNTDOWN = SHARED_DATA / "countdown_tasks_3to4_prefix" / "test.parquet"
# openai/gsm8k's README header as the hub shows it: dataset_info first (nested, with a | block), then configs
GSM8K_README = """---
annotations_creators:
- crowdsourced
dataset_info:
- config_name: main
  features:
  - name: question
    dtype: string
  splits:
  - name: train
    num_examples: 7473
  description: |
    configs: not a key here
    - split: nor a list item
configs:
- config_name: main
  data_files:
  - split: train
    path: main/train-*
  - split: test
    path: main/test-*
- config_name: socratic
  data_files:
  - split: train
    path: socratic/train-*
  - split: test
    path: socratic/test-*
---

# Dataset Card for GSM8K
"""


def gsm8k_rows(split, n, start=0):
    """n rows of GSM8K's `split` (the real file beside the repo, else made up), as the hub's columns."""
    path = GSM8K / f"{split}.jsonl"
    if path.is_file():
        lines = path.read_text(encoding="utf-8").splitlines()[start:start + n]
        return [{"question": r["question"], "answer": r["answer"]} for r in map(json.loads, lines)]
    return [{"question": f"{split} question {i}?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1}"}
            for i in range(start, start + n)]


def parquet_bytes(rows):
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def jsonl_bytes(rows):
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def write_dataset(cache, repo_id, commit, files, refs=("main",)):
    """`files` ({path in the repo: bytes}) laid out as the hub cache holds a dataset at `commit`: each file's
    bytes in blobs/<sha256>, snapshots/<commit>/<path> a relative link to its blob, refs/<ref> holding the
    commit for each of `refs` (a ref with slashes, refs/convert/parquet, is a file in folders). -> snapshot."""
    repo = cache / f"datasets--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    for rel, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    for ref in refs:
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return snapshot


def assert_hub_accepts(cache, repo_id, revisions):
    """huggingface_hub's own scan of the cache finds the dataset with exactly these {commit: {refs}}, and
    nothing it calls corrupt."""
    info = huggingface_hub.scan_cache_dir(cache)
    assert not info.warnings, info.warnings
    (repo,) = [r for r in info.repos if r.repo_id == repo_id]
    assert repo.repo_type == "dataset"
    assert {r.commit_hash: set(r.refs) for r in repo.revisions} == revisions


class StandInDataset(list):
    """What datasets.load_dataset returns, as far as we read it: the rows, and `cache_files`, the arrow files
    it wrote under its own cache (datasets' Dataset.cache_files: [{"filename": ...}])."""
    cache_files = []


def stand_in_datasets(monkeypatch, rows=(), cache_folder=None):
    """A `datasets` module whose load_dataset records its calls and returns `rows`, as read from arrow files
    in cache_folder (datasets' <cache>/<owner>___<name>/<config>/<version>/<commit>/) when given."""
    calls = []

    def load_dataset(path, name=None, split=None, revision=None):
        calls.append((path, name, split, revision))
        dataset = StandInDataset(dict(r) for r in rows)
        if cache_folder is not None:
            dataset.cache_files = [{"filename": os.path.join(cache_folder, f"set-{split}.arrow")}]
        return dataset
    module = types.ModuleType("datasets")
    module.load_dataset = load_dataset
    module.logging = types.SimpleNamespace(get_verbosity=lambda: 30, set_verbosity=lambda v: None,
                                           set_verbosity_error=lambda: None)
    monkeypatch.setitem(sys.modules, "datasets", module)
    return calls


def one_line_error(exc_type, fn, *args):
    with pytest.raises(exc_type) as info:
        fn(*args)
    assert "\n" not in str(info.value), str(info.value)
    return str(info.value)


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """An empty hub cache named by HF_HUB_CACHE, online, run from a folder without owner folders in it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    (tmp_path / "hub").mkdir()
    return tmp_path / "hub"


def expect(spec, rows):
    return [(f"{spec} row {i}", r) for i, r in enumerate(rows)]


# -----------------------------------------------------------------------------
# openai/gsm8k: configs main and socratic, splits train and test


@pytest.fixture(params=["readme", "conventions"])
def gsm8k(request, cache):
    """openai/gsm8k as `hf download` caches it (main's train in two shards here), with its README's configs or
    without a README (the same configs from the hub's {config}/{split}-* convention). -> the rows written."""
    rows = {("main", "train"): gsm8k_rows("train", 6), ("main", "test"): gsm8k_rows("test", 4),
            ("socratic", "train"): gsm8k_rows("train", 3, start=6), ("socratic", "test"): gsm8k_rows("test", 2, 4)}
    files = {"main/train-00000-of-00002.parquet": parquet_bytes(rows["main", "train"][:4]),
             "main/train-00001-of-00002.parquet": parquet_bytes(rows["main", "train"][4:]),
             "main/test-00000-of-00001.parquet": parquet_bytes(rows["main", "test"]),
             "socratic/train-00000-of-00001.parquet": parquet_bytes(rows["socratic", "train"]),
             "socratic/test-00000-of-00001.parquet": parquet_bytes(rows["socratic", "test"]),
             ".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"}
    if request.param == "readme":
        files["README.md"] = GSM8K_README.encode()
    write_dataset(cache, "openai/gsm8k", COMMIT_A, files)
    assert_hub_accepts(cache, "openai/gsm8k", {COMMIT_A: {"main"}})
    return rows


def test_gsm8k_configs_and_splits_read_their_own_rows(gsm8k, tmp_path):
    for config, split in gsm8k:
        spec = f"openai/gsm8k:{config}:{split}"
        assert read_records(spec) == expect(spec, gsm8k[config, split])
    # main's train: two shards, read in name order, rows counted across them
    assert [w for w, _ in read_records("openai/gsm8k:main:train")] == [f"openai/gsm8k:main:train row {i}"
                                                                       for i in range(6)]
    # through the loader, the same examples as the rows written to a local file
    local = tmp_path / "test.jsonl"
    local.write_bytes(jsonl_bytes(gsm8k["main", "test"]))
    assert tasks.load_task("gsm8k", "openai/gsm8k:main:test") == tasks.load_task("gsm8k", local)


def test_gsm8k_missing_config_or_split_is_refused_with_the_list(gsm8k):
    assert one_line_error(ValueError, read_records, "openai/gsm8k:test") == (
        "openai/gsm8k:test: openai/gsm8k has configs main, socratic: name one, as in openai/gsm8k:main:test")
    message = one_line_error(ValueError, read_records, "openai/gsm8k:main:validation")
    assert message.startswith("openai/gsm8k:main:validation: config main of openai/gsm8k at commit a1a1")
    assert message.endswith("has no split 'validation'; its splits: test, train")
    assert one_line_error(ValueError, read_records, "openai/gsm8k:mian:test").endswith(
        "has no config 'mian'; its configs: main, socratic")


# -----------------------------------------------------------------------------
# other layouts: data/{split}-*, {split}.jsonl, README configs


def test_single_config_data_folder_and_split_slices(cache):
    train, test = gsm8k_rows("train", 10), gsm8k_rows("test", 3)
    write_dataset(cache, "owner/single", COMMIT_A, {
        "data/train-00000-of-00002.parquet": parquet_bytes(train[:7]),
        "data/train-00001-of-00002.parquet": parquet_bytes(train[7:]),
        "data/test-00000-of-00001.parquet": parquet_bytes(test)})
    assert_hub_accepts(cache, "owner/single", {COMMIT_A: {"main"}})
    assert read_records("owner/single") == expect("owner/single", train)  # the only config; train by default
    assert read_records("owner/single:test") == expect("owner/single:test", test)
    assert read_records("owner/single:default:test") == expect("owner/single:default:test", test)
    # slices as `datasets` reads them: rows cut after reading, counted from 0 again
    for sliced, want in [("train[:3]", train[:3]), ("train[6:9]", train[6:9]), ("train[-2:]", train[8:]),
                         ("train[:30%]", train[:3]), ("train[:15%]", train[:2]), ("train[80%:]", train[8:])]:
        assert read_records(f"owner/single:{sliced}") == expect(f"owner/single:{sliced}", want)
    assert "split 'train[3]' not understood" in one_line_error(ValueError, read_records, "owner/single:train[3]")


def test_jsonl_and_gzipped_files_named_by_split(cache):
    train, test = gsm8k_rows("train", 3), gsm8k_rows("test", 2)
    write_dataset(cache, "owner/lines", COMMIT_A, {"train.jsonl": jsonl_bytes(train),
                                                    "test.jsonl.gz": gzip.compress(jsonl_bytes(test))})
    assert_hub_accepts(cache, "owner/lines", {COMMIT_A: {"main"}})
    assert read_records("owner/lines") == expect("owner/lines", train)
    assert read_records("owner/lines:test") == expect("owner/lines:test", test)


README_CONFIGS = """---
license: mit
configs:
  - config_name: listed   # the split train from a block list of files, in the order listed
    data_files:
      - "raw/b.jsonl"
      - raw/a.jsonl
  - config_name: 'split_up'
    default: true
    data_files:
      - split: train
        path: [raw/a.jsonl, "raw/b.jsonl"]
      - split: validation
        path: held/*.csv
  - config_name: one
    data_files: raw/a.jsonl
  - config_name: everything
    data_files:
      train: raw/**
tags:
- math
---
text
"""


def test_readme_configs_decide_configs_splits_and_order(cache):
    a, b = gsm8k_rows("train", 2), gsm8k_rows("train", 3, start=2)
    csv = "question,answer\nheld one?,#### 1\nheld two?,#### 2\n"
    snapshot = write_dataset(cache, "owner/carded", COMMIT_A, {
        "README.md": README_CONFIGS.encode(), "raw/a.jsonl": jsonl_bytes(a), "raw/b.jsonl": jsonl_bytes(b),
        "held/v.csv": csv.encode(), "data/test.jsonl": jsonl_bytes(a)})  # data/test: no config names it
    assert_hub_accepts(cache, "owner/carded", {COMMIT_A: {"main"}})
    assert read_records("owner/carded:listed:train") == expect("owner/carded:listed:train", b + a)
    assert read_records("owner/carded") == expect("owner/carded", a + b)  # split_up: the README's default
    assert read_records("owner/carded:one:train") == expect("owner/carded:one:train", a)
    assert read_records("owner/carded:everything:train") == expect("owner/carded:everything:train", a + b)
    assert [r for _, r in read_records("owner/carded:split_up:validation")] == [
        {"question": "held one?", "answer": "#### 1"}, {"question": "held two?", "answer": "#### 2"}]
    assert one_line_error(ValueError, read_records, "owner/carded:split_up:test").endswith(
        "its splits: train, validation")
    layout, default = hub_data.readme_layout(snapshot)
    assert default == "split_up" and layout == {
        "listed": {"train": ["raw/b.jsonl", "raw/a.jsonl"]}, "one": {"train": ["raw/a.jsonl"]},
        "everything": {"train": ["raw/a.jsonl", "raw/b.jsonl"]},
        "split_up": {"train": ["raw/a.jsonl", "raw/b.jsonl"], "validation": ["held/v.csv"]}}


@pytest.mark.parametrize("readme", [GSM8K_README, README_CONFIGS])
def test_the_small_yaml_reader_agrees_with_pyyaml(readme):
    yaml = pytest.importorskip("yaml")  # an independent reader where one is installed; never needed by the code
    header = readme.split("---\n")[1]
    assert hub_data._yaml_configs(readme) == yaml.safe_load(header)["configs"]


def test_lines_of_a_block_text_are_not_read_as_keys():
    readme = ("---\nconfigs:\n- config_name: a\n  description: |\n    - split: test\n    data_files: x\n"
              "  data_files: a.csv\n- config_name: b\n---\n")
    assert hub_data._yaml_configs(readme) == [{"config_name": "a", "description": "|", "data_files": "a.csv"},
                                              {"config_name": "b"}]


# -----------------------------------------------------------------------------
# revisions


@pytest.fixture()
def revisions(cache):
    """owner/rev at three commits: A on main, B tagged v1.0, C the parquet conversion (refs/convert/parquet)."""
    rows = {c: gsm8k_rows("test", 2, start=i * 2) for i, c in enumerate((COMMIT_A, COMMIT_B, COMMIT_C))}
    write_dataset(cache, "owner/rev", COMMIT_A, {"train.parquet": parquet_bytes(rows[COMMIT_A])})
    write_dataset(cache, "owner/rev", COMMIT_B, {"data/train-00000-of-00001.parquet": parquet_bytes(rows[COMMIT_B])},
                  refs=("v1.0",))
    write_dataset(cache, "owner/rev", COMMIT_C, {"default/train/0000.parquet": parquet_bytes(rows[COMMIT_C][:1]),
                                                  "default/train/0001.parquet": parquet_bytes(rows[COMMIT_C][1:])},
                  refs=("refs/convert/parquet",))
    assert_hub_accepts(cache, "owner/rev", {COMMIT_A: {"main"}, COMMIT_B: {"v1.0"},
                                            COMMIT_C: {"refs/convert/parquet"}})
    return rows


def test_each_revision_reads_its_own_rows(revisions, monkeypatch):
    calls = stand_in_datasets(monkeypatch, [{"question": "from datasets"}])
    for spec, commit in [("owner/rev", COMMIT_A), ("owner/rev@main", COMMIT_A), ("owner/rev@v1.0", COMMIT_B),
                         (f"owner/rev@{COMMIT_B}", COMMIT_B), (f"owner/rev@{COMMIT_B[:8]}", COMMIT_B),
                         ("owner/rev@refs/convert/parquet:default:train", COMMIT_C)]:
        assert read_records(spec) == expect(spec, revisions[commit]), spec
    assert calls == []  # the cache answered: `datasets` was never asked


@pytest.mark.parametrize("revision", ["v2.0", "d4" * 20, "refs/pr/1"])
def test_an_uncached_revision_is_refused_naming_the_cached_ones(revisions, monkeypatch, revision):
    calls = stand_in_datasets(monkeypatch, [{"question": "another revision"}])
    message = one_line_error(ValueError, read_records, f"owner/rev@{revision}")
    assert message.startswith(f"owner/rev@{revision}: revision {revision} of owner/rev is not in the hub cache")
    for ref, commit in [("main", COMMIT_A), ("v1.0", COMMIT_B), ("refs/convert/parquet", COMMIT_C)]:
        assert f"{ref} -> {commit}" in message
    assert f"snapshots {COMMIT_A}, {COMMIT_B}, {COMMIT_C}" in message
    assert f"--revision {revision}" in message and calls == []  # never `datasets`, which would read another


def test_a_ref_whose_snapshot_is_gone_and_a_missing_blob_are_one_line(revisions, cache):
    repo = cache / "datasets--owner--rev"
    (repo / "refs" / "main").write_text("e5" * 20)
    assert f"refs/main of owner/rev in the hub cache ({repo}) points at commit {'e5' * 20}, whose snapshot is not " \
           f"there" in one_line_error(ValueError, read_records, "owner/rev")
    link = repo / "snapshots" / COMMIT_B / "data" / "train-00000-of-00001.parquet"
    (link.parent / os.readlink(link)).unlink()
    assert one_line_error(ValueError, read_records, "owner/rev@v1.0").startswith(
        f"{link}: a link into the hub cache's blobs/ whose blob is missing")


# -----------------------------------------------------------------------------
# the cache first, `datasets` only for a repo it does not hold


@pytest.mark.parametrize("datasets", ["absent", "stand-in"])
@pytest.mark.parametrize("offline", ["", "1"])
def test_the_cache_is_read_with_or_without_datasets_online_or_off(cache, monkeypatch, datasets, offline):
    rows = gsm8k_rows("test", 3)
    write_dataset(cache, "openai/gsm8k", COMMIT_A, {"main/test-00000-of-00001.parquet": parquet_bytes(rows)})
    calls = stand_in_datasets(monkeypatch, [{"question": "from datasets"}]) if datasets == "stand-in" else []
    if datasets == "absent":
        monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` raises ImportError
    monkeypatch.setenv("HF_HUB_OFFLINE", offline)
    assert read_records("openai/gsm8k:main:test") == expect("openai/gsm8k:main:test", rows)
    assert one_line_error(ValueError, read_records, "openai/gsm8k:main:train").endswith("its splits: test")
    assert calls == []


def test_datasets_reads_what_the_cache_does_not_hold(cache, monkeypatch):
    # `datasets` leaves only README.md of a repo in the hub cache (its data goes to its own cache): not held here
    write_dataset(cache, "openai/gsm8k", COMMIT_A, {"README.md": GSM8K_README.encode()})
    rows = gsm8k_rows("test", 2)
    calls = stand_in_datasets(monkeypatch, rows)
    assert read_records("openai/gsm8k:main:test") == expect("openai/gsm8k:main:test", rows)
    assert read_records("other/set@v1:test") == expect("other/set@v1:test", rows)
    assert calls == [("openai/gsm8k", "main", "test", None), ("other/set", None, "test", "v1")]


@pytest.mark.parametrize("flag", ["HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"])
def test_offline_datasets_is_not_asked_for_a_revision_it_would_replace(cache, monkeypatch, flag):
    calls = stand_in_datasets(monkeypatch, gsm8k_rows("test", 2))
    monkeypatch.setenv(flag, "1")
    assert one_line_error(ValueError, read_records, "other/set@v1:test") == (
        f"other/set@v1:test: no local file of that name, and other/set@v1 is not in the hub cache ({cache}); "
        f"offline, the `datasets` package would read another cached revision in its place: download it "
        f"(hf download --repo-type dataset other/set --revision v1)")
    assert calls == []
    read_records("other/set:test")  # no revision named: `datasets` may read what it has
    assert calls == [("other/set", None, "test", None)]


def test_cache_dir_follows_huggingface_hub(tmp_path, monkeypatch):
    # huggingface_hub's own answer, from a fresh interpreter (it reads the environment once, on import)
    for env in [{"HF_HUB_CACHE": str(tmp_path / "a")}, {"HF_HOME": str(tmp_path / "home")},
                {"XDG_CACHE_HOME": str(tmp_path / "xdg")}, {}]:
        for k in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        theirs = subprocess.run([sys.executable, "-c", "from huggingface_hub import constants; "
                                 "print(constants.HF_HUB_CACHE)"], capture_output=True, text=True, check=True)
        assert hub_data.cache_dir() == theirs.stdout.strip(), env


# -----------------------------------------------------------------------------
# data_record, the folder hint, Countdown's kept rows


def test_data_record_of_a_file_and_of_a_hub_id(gsm8k, tmp_path, monkeypatch):
    local = tmp_path / "test.jsonl"
    local.write_bytes(jsonl_bytes(gsm8k["main", "test"]))
    assert data_record("test.jsonl") == {"typed": "test.jsonl", "path": str(local),
                                         "sha256": hashlib.sha256(local.read_bytes()).hexdigest()}
    rows = gsm8k["main", "train"]
    as_lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()
    snapshot = tmp_path / "hub" / "datasets--openai--gsm8k" / "snapshots" / COMMIT_A
    assert data_record(f"openai/gsm8k@{COMMIT_A[:10]}:main:train") == {
        "typed": f"openai/gsm8k@{COMMIT_A[:10]}:main:train", "id": "openai/gsm8k", "config": "main",
        "split": "train", "revision": COMMIT_A[:10], "commit": snapshot.name, "snapshot": str(snapshot),
        "files": ["main/train-00000-of-00002.parquet", "main/train-00001-of-00002.parquet"],
        "sha256": hashlib.sha256(as_lines).hexdigest()}
    # read through `datasets`: the same hash of the same rows, no commit known
    stand_in_datasets(monkeypatch, rows)
    assert data_record("other/set:main:train") == {
        "typed": "other/set:main:train", "id": "other/set", "config": "main", "split": "train", "revision": None,
        "commit": None, "snapshot": None, "files": [], "sha256": hashlib.sha256(as_lines).hexdigest()}
    # ... and from datasets' own cache, whose folder is named by the hub commit it read: that commit
    folder = str(tmp_path / "datasets" / "other___set" / "main" / "0.0.0" / COMMIT_A)
    stand_in_datasets(monkeypatch, rows, cache_folder=folder)
    record = data_record("other/set:main:train")
    assert (record["commit"], record["snapshot"], record["files"]) == (COMMIT_A, folder, [])
    # a folder not named by a commit (a local loading script's hash) names none
    stand_in_datasets(monkeypatch, rows, cache_folder=str(tmp_path / "datasets" / "set" / "main" / "0.0.0" / "ab12"))
    assert data_record("other/set:main:train")["commit"] is None


def test_folder_hint_names_the_data_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "data" / "gsm8k"
    folder.mkdir(parents=True)
    for name in ("train.jsonl", "test.jsonl", "SOURCE.md"):
        (folder / name).write_text("{}\n")
    line = "--data data/gsm8k is a folder; give one of its data files: data/gsm8k/test.jsonl, data/gsm8k/train.jsonl"
    assert folder_hint("data/gsm8k") == line
    assert one_line_error(FileNotFoundError, read_records, "data/gsm8k") == line
    for i in range(7):
        (folder / f"shard{i}.parquet").write_text("x")
    assert folder_hint("data/gsm8k").endswith("data/gsm8k/shard5.parquet and 3 more")
    (tmp_path / "repo" / "main").mkdir(parents=True)  # a downloaded repo: its files one level down
    (tmp_path / "repo" / "main" / "test-00000-of-00001.parquet").write_text("x")
    assert folder_hint("repo").endswith("give one of its data files: repo/main/test-00000-of-00001.parquet")
    (tmp_path / "empty").mkdir()
    assert folder_hint("empty").startswith("--data empty is a folder with no data files (none ends .jsonl, .json")


def test_countdown_says_how_many_rows_it_kept(tmp_path, capsys):
    rows = [{"nums": [1, 2, 3], "target": 6}, {"nums": [1, 2, 3, 4], "target": 10}, {"nums": [2, 3, 4], "target": 9},
            {"nums": [5, 6, 7, 8], "target": 26}, {"nums": [7, 8, 9], "target": 24}]
    path = tmp_path / "cd.jsonl"
    path.write_bytes(jsonl_bytes(rows))
    assert len(read_countdown(path)) == 3
    assert capsys.readouterr().err == (f"Countdown: kept 3 of 5 rows of {path} (d1 trains on 3-number problems; "
                                       f"the others are dropped)\n")
    assert len(read_countdown(path, n_numbers=None)) == 5 and capsys.readouterr().err == ""  # nothing dropped


@pytest.mark.skipif(not COUNTDOWN.is_file(), reason="shared Countdown parquet not present")
def test_countdown_line_on_the_real_file(capsys):
    nums = pq.read_table(COUNTDOWN, columns=["nums"]).column("nums").to_pylist()
    three = sum(len(n) == 3 for n in nums)
    assert len(read_countdown(COUNTDOWN)) == three
    assert capsys.readouterr().err == (f"Countdown: kept {three} of {len(nums)} rows of {COUNTDOWN} (d1 trains on "
                                       f"3-number problems; the others are dropped)\n")
    d1_test = SHARED_DATA / "d1_countdown" / "countdown_cd3_test.jsonl"  # all 3-number: nothing to say
    if d1_test.is_file():
        assert len(read_countdown(d1_test)) == 256 and capsys.readouterr().err == ""
