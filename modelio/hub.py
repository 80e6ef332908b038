"""
--model-dir as users type it: a local directory, a Hugging Face hub cache, or a hub id. Every
script resolves it here to one local directory in the official layout (modelio/checkpoint.py reads
only local files), and records where that directory came from.

    local directory      out/sft, /data/LLaDA-8B-Instruct               (as is; a `hf download --local-dir`
                                                                          copy keeps its commit)
    hub cache snapshot   ~/.cache/huggingface/hub/models--GSAI-ML--LLaDA-8B-Instruct/snapshots/<commit>
    hub cache repo       ~/.cache/huggingface/hub/models--GSAI-ML--LLaDA-8B-Instruct   (its refs/main)
    hub id               GSAI-ML/LLaDA-8B-Instruct, GSAI-ML/LLaDA-8B-Instruct@<branch, tag or commit>

A hub id goes through huggingface_hub (installed with transformers): from the local cache when
HF_HUB_OFFLINE=1, downloaded otherwise (HF_HUB_CACHE / HF_HOME choose the cache, as for every HF
tool). The cache's own root (the folder holding models--*) is not a model: one line names the ids
it holds. Every failure is one ValueError / FileNotFoundError that says what would work.

    from modelio.hub import resolve_model
    src = resolve_model("GSAI-ML/LLaDA-8B-Instruct")   # ModelSource(path=".../snapshots/<commit>", ...)
"""
import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path

# owner/name[@revision] as the hub spells repo ids: letters, digits, - _ . (no leading dot, no "..")
HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>[\w./-]+))?$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")  # a snapshot folder's name: the commit it holds
REPO_FOLDER = re.compile(r"^models--(?P<owner>[^/]+?)--(?P<name>.+)$")  # the cache's folder of one model
# what a model needs from its repo: weights, configs, tokenizer, chat template and remote code, never the
# other formats some repos also ship (pytorch_model.bin, onnx, gguf: as large as the weights again)
DOWNLOAD_PATTERNS = ["*.safetensors", "*.json", "*.py", "*.jinja", "*.txt", "*.model", "tokenizer*"]
TRUE = ("1", "true", "yes", "on")  # huggingface_hub's spelling of a true environment flag


@dataclass(frozen=True)
class ModelSource:
    path: str            # the local directory the scripts load
    spec: str            # what the user typed
    repo: str = None     # owner/name when it came from the hub or a hub cache
    revision: str = None  # the commit of that snapshot


def offline():
    """HF_HUB_OFFLINE, read now (huggingface_hub reads it once, when first imported)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in TRUE


def resolve_model(spec, cache_dir=None, revision=None):
    """--model-dir -> ModelSource. A directory that exists is read as a checkpoint, a hub cache
    snapshot, a cache's repo folder or (refused) a cache root; a value that does not exist and
    has the shape owner/name[@revision] is a hub id. Anything else is returned as is, for the
    caller's "does not exist" check. `revision`: the commit a hub id without @revision resolves
    to (a resumed run keeps the commit it started from, ops/resume.recorded_revision)."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return _local(spec, path)
    m = HUB_ID.match(str(spec))
    # out/sfx with out/ present is a mistyped local path, not a hub id: the caller says it does not exist
    if m is None or path.exists() or path.parent.is_dir():
        return ModelSource(str(spec), str(spec))
    return _from_hub(spec, m["repo"], m["revision"] or revision, cache_dir)


def config_dir(spec):
    """The directory holding --model-dir's config.json without downloading anything: a local
    directory (a checkpoint or a hub cache's folder), or a hub id's cached snapshot; None where there
    is none yet (the scripts' checks then say what is wrong). For decisions made before the model
    loads, such as the trainers' preset by the model's size."""
    path = Path(spec).expanduser()
    try:
        if path.is_dir():
            return resolve_model(spec).path
        m = HUB_ID.match(str(spec))
        if m is None:
            return None
        from huggingface_hub import try_to_load_from_cache
        found = try_to_load_from_cache(m["repo"], "config.json", revision=m["revision"])
        return str(Path(found).parent) if isinstance(found, str) else None
    except (ValueError, OSError):  # a cache root, an unreadable folder: said by the checks later
        return None


def _local(spec, path):
    """A local directory: a checkpoint (perhaps a snapshot of a hub cache), a cache repo folder, or a cache root."""
    if (path / "config.json").is_file():
        # a snapshot of a hub cache: .../models--owner--name/snapshots/<commit>; the commit is its name
        repo = REPO_FOLDER.match(path.resolve().parent.parent.name)
        if path.resolve().parent.name == "snapshots" and repo:
            return ModelSource(str(path), spec, f"{repo['owner']}/{repo['name']}", path.name)
        return ModelSource(str(path), spec, revision=_local_dir_commit(path))
    snapshots = path / "snapshots"
    if snapshots.is_dir():  # models--owner--name/: refs/main names the snapshot a download of `main` left
        repo = REPO_FOLDER.match(path.resolve().name)
        ref = path / "refs" / "main"
        found = sorted(p.name for p in snapshots.iterdir() if p.is_dir())
        commit = ref.read_text().strip() if ref.is_file() else (found[0] if len(found) == 1 else None)
        if commit is None or commit not in found:
            raise FileNotFoundError(f"--model-dir {spec} is a hub cache folder without a snapshot of main "
                                    f"(snapshots: {found or 'none'}); give {snapshots}/<commit>")
        return ModelSource(str(snapshots / commit), spec, repo and f"{repo['owner']}/{repo['name']}", commit)
    held = sorted(f"{m['owner']}/{m['name']}" for p in path.iterdir() if (m := REPO_FOLDER.match(p.name)))
    if held:  # the cache's root: say which ids it can give, and how
        raise FileNotFoundError(f"--model-dir {spec} is a hub cache holding {', '.join(held[:4])}: give the id "
                                f"(--model-dir {held[0]}, with HF_HUB_CACHE={spec}) or its snapshot folder, "
                                f"{path / ('models--' + held[0].replace('/', '--'))}/snapshots/<commit>")
    return ModelSource(str(path), spec)


def _local_dir_commit(path):
    """The commit a `hf download --local-dir` copy came from: huggingface_hub notes it on the first line of
    .cache/huggingface/download/config.json.metadata in that folder. None for any other directory."""
    note = path / ".cache" / "huggingface" / "download" / "config.json.metadata"
    first = note.read_text().split("\n", 1)[0].strip() if note.is_file() else ""
    return first if COMMIT.match(first) else None


def _from_hub(spec, repo, revision, cache_dir):
    """A hub id through huggingface_hub: the cache's snapshot offline, a download (or the cache) otherwise."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import (GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError,
                                        RevisionNotFoundError)
    if int(os.environ.get("RANK", 0)) != 0:  # every rank resolves (the hub's file locks share one download),
        from huggingface_hub.utils import disable_progress_bars  # but one set of bars is enough
        disable_progress_bars()
    try:
        path = snapshot_download(repo, revision=revision, cache_dir=cache_dir, local_files_only=offline(),
                                 allow_patterns=DOWNLOAD_PATTERNS)
    except GatedRepoError:
        raise ValueError(f"--model-dir {spec}: the hub model is gated; accept its terms on the hub and log in "
                         f"(`hf auth login`)") from None
    except RepositoryNotFoundError:
        raise FileNotFoundError(f"--model-dir {spec}: not a local directory, and the hub has no model {repo} "
                                f"(or it is private: `hf auth login`)") from None
    except RevisionNotFoundError:
        raise FileNotFoundError(f"--model-dir {spec}: the hub model {repo} has no revision {revision!r}") from None
    except LocalEntryNotFoundError:
        cache = Path(cache_dir or constants.HF_HUB_CACHE)
        raise FileNotFoundError(f"--model-dir {spec}: not a local directory, not in the hub cache ({cache}), "
                                f"{_not_cached(repo, revision, cache)}") from None
    return ModelSource(path, spec, repo, Path(path).name)


def _not_cached(repo, revision, cache):
    """Why a hub id is not in `cache`, and what would work: the cached revisions of the same id, an id the cache
    holds that is close to a mistyped one, or (nothing close) how to download it."""
    held = sorted(f"{m['owner']}/{m['name']}" for p in (cache.iterdir() if cache.is_dir() else [])
                  if (m := REPO_FOLDER.match(p.name)))
    if repo in held:  # the model is here, the revision is not
        folder = cache / f"models--{repo.replace('/', '--')}"
        refs = sorted(str(p.relative_to(folder / "refs")) for p in (folder / "refs").rglob("*") if p.is_file())
        snaps = sorted(p.name for p in (folder / "snapshots").glob("*") if p.is_dir())
        return (f"which holds {repo} at {', '.join(refs + snaps) or 'no snapshot'} but not at {revision}: give one of "
                f"those as {repo}@<revision>, or download {revision} where there is network")
    close = difflib.get_close_matches(repo, held, n=1, cutoff=0.8)
    if close:  # a typo: name the id that is here rather than suggest downloading the typo
        return f"which holds {close[0]}: did you mean --model-dir {close[0]}?"
    how = ("HF_HUB_OFFLINE=1 forbids downloading: download it where there is network (`hf download "
           f"{repo}{' --revision ' + revision if revision else ''}`) into this cache" if offline()
           else "and the hub could not be reached")
    return how + (f" (the cache holds {', '.join(held[:4])})" if held else "") + "; or give a local directory"
