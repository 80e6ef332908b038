"""
Which weights a number came from, and where those weights came from.

The fingerprint. Two fine-tunes of one base share their config.json and their index's weight map, so
neither says which weights a directory holds. A save of ours records the hash of every tensor as it
is written (save_pretrained: `weights_sha256` in the index's metadata, no extra read; sha256 of 16 GB
is about 10 s at the 1.5 GB/s of a core with SHA extensions, 0.36 GB/s measured on a shared core here); for a
directory we did not write, the shards' headers (every key, dtype, shape and offset), their sizes, and
64 bytes at the start, middle and end of every tensor are hashed (`sampled`: a few hundred small reads
for LLaDA-8B). fingerprint(dir) holds both; eval.py's manifests record it and `--resume` compares it.
The sampled hash is a check, not a proof: a change that misses every sampled window (a few rows of
an embedding) is invisible to it, which is why our own saves carry the full one.

The chain. Every save (save_info.json) and every eval manifest holds a `provenance` record:
    base    the model the chain started from: hub id, commit, snapshot path, fingerprint
    model   the model this run started from (a save: the model it is), as typed and as an absolute path
    data    what it read: a file's absolute path and sha256, or a hub dataset's id, config, split and
            the commit actually read (taskdata/records.data_record)
A run started from one of our saves takes `base` from that save's record, so out/sft -> out/grpo ->
eval all name the hub commit the SFT run started from, wherever the directories move.

    from modelio.provenance import fingerprint, start_record
    fingerprint("out/sft")   # {"weights_sha256": "…" or None, "sampled": "…"}
"""
import hashlib
import json
import os

import torch

from modelio.hub import resolve_model

INDEX_FILE = "model.safetensors.index.json"  # checkpoint.py's name (not imported: checkpoint imports this)
INFO_FILE = "save_info.json"  # ops/resume.py's name for a save's record (modelio stays below ops)
WEIGHTS_KEY = "weights_sha256"  # the index metadata entry save_pretrained writes
SAMPLE = 64  # bytes read at the start, middle and end of each tensor for the sampled hash


class WeightsHash:
    """The hash of a checkpoint's tensors, fed as they are written: sha256 over the sorted lines
    "key dtype shape sha256(bytes)", so it does not depend on how the tensors are split into shards."""

    def __init__(self):
        self.lines = []

    def add(self, key, t):
        data = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()  # the bytes as stored
        dtype = str(t.dtype).removeprefix("torch.")
        self.lines.append(f"{key} {dtype} {list(t.shape)} {hashlib.sha256(data).hexdigest()}\n")

    def hexdigest(self):
        return hashlib.sha256("".join(sorted(self.lines)).encode()).hexdigest()


def _shards(model_dir):
    """The safetensors files of a directory, sorted: those its index names, or every *.safetensors."""
    index = os.path.join(model_dir, INDEX_FILE)
    if os.path.isfile(index):
        with open(index) as f:
            return sorted(set(json.load(f).get("weight_map", {}).values()))
    # none: a directory not written yet (the scripts' tiny default, before load() makes it)
    return sorted(n for n in os.listdir(model_dir) if n.endswith(".safetensors")) if os.path.isdir(model_dir) else []


def saved_hash(model_dir):
    """The weights_sha256 our save_pretrained recorded in the index, or None (not one of our saves)."""
    index = os.path.join(model_dir, INDEX_FILE)
    if not os.path.isfile(index):
        return None
    with open(index) as f:
        return (json.load(f).get("metadata") or {}).get(WEIGHTS_KEY)


def sampled_hash(model_dir):
    """sha256 over each shard's name, size and header, and SAMPLE bytes at the start, middle and end of
    each of its tensors (their data offsets from the header). Cheap at any size. None without shards."""
    shards, h = _shards(model_dir), hashlib.sha256()
    if not shards:
        return None
    for name in shards:
        path = os.path.join(model_dir, name)
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            head = f.read(n)
            h.update(f"{name} {os.path.getsize(path)}\n".encode() + head)
            tensors = {k: v for k, v in json.loads(head).items() if k != "__metadata__"}
            for key in sorted(tensors):
                begin, end = tensors[key]["data_offsets"]
                for at in sorted({begin, max(begin, (begin + end) // 2 - SAMPLE // 2), max(begin, end - SAMPLE)}):
                    f.seek(8 + n + at)
                    h.update(f.read(min(SAMPLE, end - at)))
    return h.hexdigest()


def fingerprint(model_dir):
    """{"weights_sha256": the save's full hash or None, "sampled": sampled_hash}: equal for the same
    weights, different for two fine-tunes of one base."""
    return {WEIGHTS_KEY: saved_hash(model_dir), "sampled": sampled_hash(model_dir)}


def model_record(typed, path, repo=None, commit=None):
    """A model as a record: what was typed, its absolute path, its hub id and commit (None for a plain
    directory), its fingerprint."""
    return {"typed": typed, "path": os.path.abspath(path), "id": repo, "commit": commit,
            "fingerprint": fingerprint(path)}


def recorded(model_dir):
    """The provenance record a save of ours carries in save_info.json, or None."""
    info = os.path.join(model_dir, INFO_FILE)
    if not os.path.isfile(info):
        return None
    with open(info) as f:
        return json.load(f).get("provenance")


def chain(model, data):
    """The provenance of a run that starts from (or evaluates) `model` (model_record) on `data` (a list of
    data records): `base` is the base named by the model's own record when it is one of our saves, else
    the model itself."""
    before = recorded(model["path"])
    return {"base": before["base"] if before else model, "model": model, "data": data}


def start_record(typed, path, revision, data):
    """chain() of the model a run starts from (or evaluates), as the scripts know it: what was typed, the
    resolved directory (a hub snapshot names its id and commit) and the hub commit it resolved to; `data`:
    the data records (taskdata/records.data_record)."""
    src = resolve_model(path)
    return chain(model_record(typed, path, src.repo, revision or src.revision), data)


# two manifests' model_fingerprints (ops/results.py writes them: config.json, the index, fingerprint())
def other_weights(old, new):
    """Whether two manifests' model_fingerprints are of different weights. A manifest from before the weights
    were fingerprinted is compared on what it has (config and index), as it was then."""
    a, b = old.get("model_fingerprint") or {}, new.get("model_fingerprint") or {}
    return any(a.get(k) != b.get(k) for k in a if k in b)


def same_weights(a, b):
    """The short fingerprint two manifests share when both recorded their weights' and they are equal
    (lab.evals compare says so), else None."""
    if _weights_hash(a) is None or other_weights(a, b) or _weights_hash(a) != _weights_hash(b):
        return None
    return weights_short(a)


def _weights_hash(manifest):
    """A manifest's weights fingerprint: the save's hash when it has one, else the sampled one, else None."""
    w = (manifest.get("model_fingerprint") or {}).get("weights") or {}
    return w.get("weights_sha256") or w.get("sampled")


def weights_short(manifest):
    """_weights_hash, short, for a message."""
    return (_weights_hash(manifest) or "none recorded")[:12]
