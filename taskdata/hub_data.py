"""
A hub dataset id found in the Hugging Face hub cache, without the `datasets` package: what
`hf download --repo-type dataset openai/gsm8k` leaves on disk is enough to read openai/gsm8k:main:test
offline. taskdata/records.py asks here first for every hub id, reads the files found with its own readers,
and turns to `datasets` only for a repo whose data is not in the cache at all.

The cache is huggingface_hub's (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub; read at
call time), one folder a repo:
    datasets--openai--gsm8k/refs/main               the commit that the branch main points at
    datasets--openai--gsm8k/snapshots/<commit>/...  the repo's files at that commit (links into blobs/)
The revision: none -> refs/main; a branch or tag -> refs/<it> (refs/convert/parquet too); a commit, or a
prefix of one that names one snapshot -> snapshots/<it>. A revision that is not cached is refused with what
is: never another revision in its place. Configs and splits are named as the hub names them, from the
repository's own layout: the `configs:` of the YAML header of its README.md, else the hub's conventions
    {split}.parquet  {split}-00000-of-00001.parquet  data/{split}-*.parquet     config "default"
    {config}/{split}-*.parquet  {config}/{split}/0000.parquet (refs/convert/parquet)
for any of .parquet, .jsonl, .json and .csv, gzipped or not. A split may carry a slice, as `datasets`
spells one: train[:100], train[10:20], train[-5:], train[:10%]; the rows are cut after reading.

    from taskdata.hub_data import find
    found = find("openai/gsm8k:main:test", "openai/gsm8k", "main", "test", None)
    found.commit, found.files      # '<40 hex>', ['main/test-00000-of-00001.parquet']
"""
import os
import re
from dataclasses import dataclass
from pathlib import Path

DATA_FILE = re.compile(r"\.(parquet|jsonl|json|csv)(\.gz)?$")  # the files a split is made of (records.py reads them)
COMMIT = re.compile(r"[0-9a-f]{40}")  # a snapshot folder's name
SHORT_COMMIT = re.compile(r"[0-9a-f]{7,39}")  # a commit as `git log --oneline` and the hub's pages show it
SLICE = re.compile(r"(?P<name>[^\[]+)(?:\[(?P<start>-?\d+%?)?:(?P<stop>-?\d+%?)?\])?")
TRUE = ("1", "true", "yes", "on")  # huggingface_hub's spelling of a true environment flag
# a YAML line "key: value" or "key:" (and not a plain value such as a path)
YAML_KEY = re.compile(r"""(?:"[^"]*"|'[^']*'|[^\s"'\[{#-][^:#]*?)\s*:(?:\s|$)""")


@dataclass(frozen=True)
class HubFiles:
    repo: str        # owner/name
    config: str      # the config read (named, the only one, or the README's default)
    split: str       # the split's name, without its slice
    bounds: tuple    # the slice's (start, stop) as typed ("10", "5%", None), or None for every row
    commit: str      # the 40-hex commit of the snapshot read
    snapshot: str    # the snapshot folder
    files: tuple     # the split's files relative to the snapshot, in read order

    @property
    def paths(self):
        return [Path(self.snapshot, f) for f in self.files]


def cache_dir():
    """huggingface_hub's cache folder, from the environment as it is now (huggingface_hub reads it once, when
    first imported, so a test's or a launcher's HF_HUB_CACHE set later would be missed there)."""
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    path = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return os.path.expanduser(os.path.expandvars(path))


def offline():
    """HF_HUB_OFFLINE or HF_DATASETS_OFFLINE, read now: no download may happen."""
    return any(os.environ.get(k, "").strip().lower() in TRUE for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def repo_folder(repo):
    return Path(cache_dir(), "datasets--" + repo.replace("/", "--"))


def find(spec, repo, config, split, revision):
    """The files of `repo`'s split in the hub cache (HubFiles), or None when no snapshot of the repo there
    holds a data file (not downloaded; `datasets` leaves only its README.md in this cache). A repo that is
    cached but lacks the revision, the config or the split is one ValueError naming what it has."""
    folder = repo_folder(repo)
    if not any(DATA_FILE.search(f) for snap in _snapshots(folder) for f in _files(folder / "snapshots" / snap)):
        return None
    name, bounds = split_slice(spec, split)
    commit = _commit(spec, folder, repo, revision)
    snapshot = folder / "snapshots" / commit
    layout, default = readme_layout(snapshot)
    if layout is None:
        layout, default = conventions(snapshot), None
    where = f"{repo} at commit {commit[:12]} in the hub cache"
    if not layout:
        raise ValueError(f"{spec}: {where} holds no data files ({', '.join(_files(snapshot)[:6]) or 'no files'}): "
                         f"download them (hf download --repo-type dataset {repo}{_rev(revision)})")
    if config is None:
        if len(layout) > 1 and default is None:
            raise ValueError(f"{spec}: {repo} has configs {', '.join(sorted(layout))}: name one, as in "
                             f"{repo}{'@' + revision if revision else ''}:{sorted(layout)[0]}:{split}")
        config = default or next(iter(layout))
    if config not in layout:
        raise ValueError(f"{spec}: {where} has no config {config!r}; its configs: {', '.join(sorted(layout))}")
    files = layout[config].get(name)
    if files is None:
        raise ValueError(f"{spec}: config {config} of {where} has no split {name!r}; its splits: "
                         f"{', '.join(sorted(layout[config]))}")
    if not files:  # named by the README, its files not downloaded (hf download --include ...)
        raise ValueError(f"{spec}: the files of split {name} of {where} are not in its snapshot {snapshot}: "
                         f"download them (hf download --repo-type dataset {repo}{_rev(revision)})")
    for f in files:  # a link whose blob is gone: an interrupted download, or blobs/ pruned by hand
        if not (snapshot / f).exists():
            raise ValueError(f"{snapshot / f}: a link into the hub cache's blobs/ whose blob is missing: "
                             f"download {repo} again (hf download --repo-type dataset {repo}{_rev(revision)})")
    return HubFiles(repo, config, name, bounds, commit, str(snapshot), tuple(files))


def _rev(revision):
    return f" --revision {revision}" if revision else ""


def _snapshots(folder):
    snaps = folder / "snapshots"
    return sorted(p.name for p in snaps.iterdir() if p.is_dir()) if snaps.is_dir() else []


def _refs(folder):
    """{ref name: commit} of a cached repo: refs/main -> main, refs/refs/convert/parquet -> refs/convert/parquet."""
    refs = folder / "refs"
    files = sorted(p for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else []
    return {p.relative_to(refs).as_posix(): p.read_text().strip() for p in files}


def _commit(spec, folder, repo, revision):
    """The commit `revision` names in the cache (module docstring), or one ValueError listing what is cached."""
    refs, snapshots = _refs(folder), _snapshots(folder)
    wanted = revision or "main"
    if wanted in refs:
        commit = refs[wanted]
        if commit not in snapshots:
            raise ValueError(f"{spec}: refs/{wanted} of {repo} in the hub cache ({folder}) points at commit {commit}, "
                             f"whose snapshot is not there: download it again (hf download --repo-type dataset "
                             f"{repo}{_rev(revision)})")
        return commit
    # a commit: whole, or a prefix that names one snapshot (a prefix of two is as good as none)
    matches = [s for s in snapshots if s.startswith(wanted)] if SHORT_COMMIT.fullmatch(wanted) or \
        COMMIT.fullmatch(wanted) else []
    if len(matches) == 1:
        return matches[0]
    cached = "; ".join(filter(None, [
        "refs " + ", ".join(f"{r} -> {c}" for r, c in refs.items()) if refs else "",
        "snapshots " + ", ".join(snapshots) if snapshots else ""]))
    what = f"revision {revision}" if revision else "refs/main (the revision read when none is named)"
    raise ValueError(f"{spec}: {what} of {repo} is not in the hub cache ({folder}), which holds {cached}: name one "
                     f"of those with @, or download it (hf download --repo-type dataset {repo}{_rev(revision)})")


def _files(root):
    """Every file under `root` (links included), as paths relative to it, sorted; hidden ones left out."""
    out = []
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        out += [Path(top, n).relative_to(root).as_posix() for n in names if not n.startswith(".")]
    return sorted(out)


# -----------------------------------------------------------------------------
# configs and splits: the README's `configs:` or the hub's file-name conventions

def conventions(root):
    """{config: {split: [files]}} of the files under `root` by the hub's conventions (module docstring)."""
    layout = {}
    for path in _files(root):
        parts = path.split("/")
        if not DATA_FILE.search(path) or len(parts) > 3:
            continue
        if len(parts) == 3:  # the parquet conversion: {config}/{split}/0000.parquet
            config, split = parts[0], parts[1]
        else:  # {split}-00000-of-00001.parquet, test.jsonl: the split is the name up to its first - or .
            config = "default" if len(parts) == 1 or parts[0] == "data" else parts[0]
            split = re.split(r"[-.]", parts[-1])[0]
        layout.setdefault(config, {}).setdefault(split, []).append(path)
    return layout


def readme_layout(snapshot):
    """({config: {split: [files]}}, the default config or None) from the `configs:` of README.md's YAML header,
    or (None, None) when it has none. data_files: a pattern, a list of them (the split train), or a list of
    {split, path} with path a pattern or a list of them; patterns are globs relative to data_dir if given."""
    readme = Path(snapshot, "README.md")
    configs = _yaml_configs(readme.read_text(encoding="utf-8", errors="replace")) if readme.is_file() else None
    if not configs:
        return None, None
    layout, default = {}, None
    for entry in configs:
        if not isinstance(entry, dict):
            continue
        name, base = str(entry.get("config_name", "default")), str(entry.get("data_dir") or "")
        if entry.get("default") is True:
            default = name
        data_files = entry.get("data_files")
        if data_files is None:  # data_dir alone: the conventions inside that folder
            found = conventions(Path(snapshot, base))
            layout[name] = {s: [f"{base}/{f}" for f in fs] for c in found.values() for s, fs in c.items()}
            continue
        if isinstance(data_files, dict):  # {split: pattern(s)}, as load_dataset's data_files= takes them
            data_files = [{"split": k, "path": v} for k, v in data_files.items()]
        if not isinstance(data_files, list) or not all(isinstance(d, dict) for d in data_files):
            data_files = [{"split": "train", "path": data_files}]
        layout[name] = {}
        for d in data_files:
            patterns = [p for p in (d.get("path") if isinstance(d.get("path"), list) else [d.get("path")]) if p]
            files = layout[name].setdefault(str(d.get("split", "train")), [])
            for pattern in patterns:
                pattern = "/".join(filter(None, [base.strip("/"), str(pattern).strip("/")]))
                files += [f for f in _glob(snapshot, pattern) if f not in files]
    return (layout, default) if layout else (None, None)  # nothing read from it: the conventions decide


def _glob(root, pattern):
    """The files matching a hub pattern (* within a folder, ** across them), relative to root, sorted."""
    pattern += "/*" if pattern.endswith("**") else ""  # pathlib's ** alone matches folders only
    return sorted(p.relative_to(root).as_posix() for p in Path(root).glob(pattern) if p.is_file())


def _yaml_configs(text):
    """The `configs:` value of a README's YAML header (between its first two --- lines), or None: a reader of
    just the YAML that such a block uses (block lists and mappings, plain and quoted scalars, [a, b]), so
    that no YAML package is needed."""
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").split("\n")
    ends = [i for i, line in enumerate(lines) if line.strip() == "---"]
    if len(ends) < 2 or ends[0] != 0:
        return None
    header = lines[1:ends[1]]
    start = next((i for i, line in enumerate(header) if re.fullmatch(r"configs:\s*", line)), None)
    if start is None:
        return None
    block = []
    for line in header[start + 1:]:  # the block ends at the next top-level key
        if line.strip() and not line[0].isspace() and not line.startswith("-") and not line.startswith("#"):
            break
        block.append(line)
    lines = [(len(s) - len(s.lstrip(" ")), s.strip()) for s in block if s.strip() and not s.strip().startswith("#")]
    return _yaml_block(lines, 0, lines[0][0])[0] if lines else None


def _yaml_block(lines, i, indent):
    """(value, index after it) of the block list or mapping whose first line is lines[i], at `indent`.
    Lines indented deeper than a scalar (a | block, say) are skipped, never misread as keys."""
    if lines[i][1].startswith("-"):
        items = []
        while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("-"):
            rest = lines[i][1][1:].lstrip()
            if not rest:  # "-" alone: the item is the block below it
                if i + 1 < len(lines) and lines[i + 1][0] > indent:
                    value, i = _yaml_block(lines, i + 1, lines[i + 1][0])
                else:
                    value, i = None, i + 1
            elif YAML_KEY.match(rest):  # "- key: value": a mapping whose first key sits after the dash
                lines[i] = (indent + len(lines[i][1]) - len(rest), rest)
                value, i = _yaml_block(lines, i, lines[i][0])
            else:
                value, i = _scalar(rest), _skip_deeper(lines, i + 1, indent)
            items.append(value)
        return items, i
    mapping = {}
    while i < len(lines) and lines[i][0] == indent and not lines[i][1].startswith("-"):
        key, _, rest = lines[i][1].partition(":")
        key, rest = _scalar(key), rest.strip()
        nxt = lines[i + 1] if i + 1 < len(lines) else (-1, "")
        if not rest and (nxt[0] > indent or (nxt[0] == indent and nxt[1].startswith("-"))):
            mapping[key], i = _yaml_block(lines, i + 1, nxt[0])
        else:
            mapping[key], i = _scalar(rest) if rest else None, _skip_deeper(lines, i + 1, indent)
    return mapping, i


def _skip_deeper(lines, i, indent):
    while i < len(lines) and lines[i][0] > indent:
        i += 1
    return i


def _scalar(text):
    """A YAML scalar: 'quoted', "quoted", [a, b], true / false, or plain text (less a trailing # comment)."""
    text = text.strip()
    if len(text) > 1 and text[0] in "'\"" and text.endswith(text[0]):
        return text[1:-1].replace("''", "'") if text[0] == "'" else text[1:-1].replace('\\"', '"')
    text = re.sub(r"\s+#.*$", "", text)
    if text.startswith("[") and text.endswith("]"):
        return [_scalar(t) for t in text[1:-1].split(",") if t.strip()]
    return {"true": True, "false": False}.get(text.lower(), text)


# -----------------------------------------------------------------------------
# split slices

def split_slice(spec, split):
    """train[10:20] -> ("train", ("10", "20")); train -> ("train", None); anything else one ValueError."""
    m = SLICE.fullmatch(split)
    if m is None:
        raise ValueError(f"{spec}: split {split!r} not understood: give a split name, with a slice if need be "
                         f"(train[:100], train[10:20], train[-5:], train[:10%])")
    return m["name"], (m["start"], m["stop"]) if "[" in split else None


def take(rows, bounds):
    """rows[start:stop] for a slice as split_slice gives it; a percentage is of the split's rows, rounded to the
    nearest row as `datasets` rounds it."""
    if bounds is None:
        return rows

    def index(b):
        if b is None:
            return None
        return round(float(b[:-1]) * len(rows) / 100) if b.endswith("%") else int(b)
    return rows[index(bounds[0]):index(bounds[1])]


def datasets_cache(dataset):
    """{"commit", "snapshot"} of a split `datasets` read: its arrow files lie in
    <cache>/<owner>___<name>/<config>/<version>/<commit>/, the folder named by the hub commit it read (offline
    too: the cached version it fell back to); {None, None} where the folder is not named by a commit."""
    files = [f["filename"] for f in getattr(dataset, "cache_files", None) or [] if "filename" in f]
    folder = os.path.dirname(files[0]) if files else ""
    if not COMMIT.fullmatch(os.path.basename(folder)):
        return {"commit": None, "snapshot": None}
    return {"commit": os.path.basename(folder), "snapshot": folder}
