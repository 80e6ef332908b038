"""
LLaDA's official checkpoint directory, read and written without transformers' model classes.

The layout (docs/llada.md §2) is what GSAI-ML/LLaDA-8B-Instruct ships:

    config.json                          the OLMo-style field names of model.LLaDAConfig
    model-0000i-of-0000N.safetensors     bf16 tensors, keys "model.transformer.…"
    model.safetensors.index.json         {"metadata": {"total_size"}, "weight_map": key -> shard}
    tokenizer.json, tokenizer_config.json, generation_config.json
    configuration_llada.py, modeling_llada.py    remote code, named by config.json's auto_map

Our state-dict keys are LLaDA's official ones minus "model.", so reading and writing is a rename; a directory
of another registered family is the same with its own names, translated by its Family (modelio/families.py).
from_pretrained (strict, streamed, optional NF4), save_pretrained (LoRA merged on the fly, crash-safe),
save_merged (a training save: the base's other files, then the weights), make_tiny and load (what every
script calls): docs/model.md.

    model, tok = load("/path/to/LLaDA-8B-Instruct", device="cuda")

`python -m modelio.checkpoint` writes the tiny model to out/tiny-llada (tiny_main: the same for another family).
"""

import argparse
import json
import os
from pathlib import Path

import torch
import torch.nn as nn

from modelio.adapters import LoRALinear, block_linears, is_4bit, linear_4bit, lora_state_dict
from modelio.families import CONFIG_FILE, family_named, family_of_config, read_config
from modelio.hub import resolve_model
from modelio.model_files import copy_model_files, local_auto_map  # the base's other files: remote code, tokenizer
from modelio.provenance import WEIGHTS_KEY, WeightsHash
from modelio.tokenizer import load_tokenizer, make_tiny_tokenizer, prompt_ids
from model import BLOCK_LINEARS, TINY_CONFIG, LLaDA, LLaDAConfig

INDEX_FILE = "model.safetensors.index.json"
MAX_SHARD_BYTES = 5 * 2**30        # shard size cap when writing; LLaDA-8B's own shards are 2-3 GB
MAX_LISTED = 8                     # a load error spells out this many names of each kind

# -----------------------------------------------------------------------------
# Reading


def from_pretrained(path, dtype=None, device=None, load_in_4bit=False):
    """Load a local directory in the official layout (config.json + safetensors shards). dtype: None keeps
    the stored dtype; device: None means CPU. Strict: a missing or unexpected key, a shape mismatch or a
    NaN / inf tensor is one ValueError naming them. Streamed from a model built on the meta device.
    load_in_4bit: every block's seven linears become NF4 (double quantization, bf16 compute: d1's QLoRA),
    quantized as they are read; embeddings, norms and the LM head stay in `dtype` (bf16 by default)."""
    from safetensors import safe_open
    path = Path(path)
    # config, shards, truncation, keys and shapes, from the file headers, before a single weight is read
    config = verify(path)
    key_in = family_of_config(config).key_in  # the checkpoint's names -> ours (modelio/families.py)
    device = torch.device(device or "cpu")
    # with a 4-bit base the layers that stay dense default to bf16, as d1 loads them
    if load_in_4bit:
        dtype = dtype or torch.bfloat16
    # no memory and no random init: every parameter is a placeholder until its tensor arrives
    with torch.device("meta"):
        model = LLaDA(config)
    files = _shard_files(path)
    # Now read for real: safetensors memory-maps the file and copies each tensor straight to `device`; the dtype
    # cast (if any) copies that one tensor only. Peak memory: one copy of the weights (8B bf16: 16 GB) + one tensor.
    for f in files:
        with safe_open(f, framework="pt", device=str(device)) as sf:
            for k in sf.keys():
                t = sf.get_tensor(k)
                _check_finite(t, f, k)  # as stored, before a cast or quantization could hide or move it
                # under our name: LLaDA's 'model.transformer.…' -> 'transformer.…'
                _put_tensor(model, key_in(k), t.to(dtype) if dtype else t, load_in_4bit)
    return model


def _check_finite(t, file, key, hint="a model with it computes NaN; copy or save the weights again"):
    """Refuse a tensor holding NaN or inf, naming it and its file: one such weight makes every loss NaN, and a
    run then skips every step and blames the learning rate (an eval scores 0% and says nothing). aminmax is one
    read of the tensor with no temporary (NaN propagates into both results, an inf is an extreme); isfinite would
    write a bool tensor as large and, on CPU in bf16, ran 58x slower (1 GiB: 11.5 s against 0.2 s, 2 cores)."""
    if not t.is_floating_point() or not t.numel():
        return
    # aminmax has no kernel for 8-bit floats: those (never ours) are widened first
    x = t if t.dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64) else t.float()
    if not torch.isfinite(torch.stack(torch.aminmax(x))).all():  # one sync per tensor on a GPU
        bad = int(x.numel() - torch.isfinite(x).sum())  # the slow count, on the failure path only
        raise ValueError(f"{file}: tensor {key} holds {bad:,} NaN or inf values (of {t.numel():,}): {hint}")


def verify(path):
    """Check an official-layout directory without reading a weight -> its LLaDAConfig: config.json parses
    into a supported config; every shard the index names is there and complete; every key and shape is
    what the config asks for. from_pretrained runs it first, the entry scripts up front
    (checks.check_model_dir); a NaN or inf weight from_pretrained refuses as it is read (_check_finite)."""
    path = Path(path)
    # the family by model_type; every field the model needs there and of its type (modelio/families.py)
    raw, family, config = read_config(path)
    # every official key the model needs, with its shape: 291 tensors for LLaDA-8B (docs/llada.md §2)
    with torch.device("meta"):
        expected = {family.key_out(k): tuple(v.shape) for k, v in LLaDA(config).state_dict().items()}
    found, dtypes = header_info(path)
    _check_keys(path, expected, found, dtypes, SAFETENSORS_DTYPES.get(raw.get("torch_dtype")))
    return config


SAFETENSORS_DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}  # config.json's torch_dtype names


def header_info(path):
    """({key: shape}, {key: dtype}) of a checkpoint directory's shards, from their headers (no weight read)."""
    shapes = {}
    kinds = {}
    for f in _shard_files(Path(path)):
        file_shapes, file_kinds = _header_shapes(f)
        shapes.update(file_shapes)
        kinds.update(file_kinds)
    return shapes, kinds


def stored_dtype(path):
    """The dtype a checkpoint's weights are stored in, as config.json's torch_dtype names it: that field
    where it is set, else the shards' own (the released LLaDA-8B-Instruct's config.json has none; its
    headers say BF16): the most common of the floating dtypes in the headers; None when neither says."""
    named = read_config(Path(path))[0].get("torch_dtype")
    if named:
        return named
    by_name = {v: k for k, v in SAFETENSORS_DTYPES.items()}
    kinds = [by_name[k] for k in header_info(path)[1].values() if k in by_name]
    return max(set(kinds), key=kinds.count) if kinds else None


def _header_shapes(file):
    """({key: shape}, {key: dtype}) from a safetensors file's header (8-byte little-endian length, then JSON), and a
    check that the file holds all the bytes the header promises: a copy cut short by a full disk or
    a killed transfer is named here, instead of as safetensors' bare "invalid header" later."""
    size = os.path.getsize(file)
    with open(file, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        try:
            if not 0 < n <= size - 8:
                raise ValueError
            header = json.loads(f.read(n))
            tensors = {k: v for k, v in header.items() if k != "__metadata__"}
            data_end = max((v["data_offsets"][1] for v in tensors.values()), default=0)
            shapes = {k: tuple(v["shape"]) for k, v in tensors.items()}
            kinds = {k: v["dtype"] for k, v in tensors.items()}
        except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError):
            raise ValueError(f"{file} is not a readable safetensors file (corrupt or truncated header); "
                             f"copy or save it again") from None
    if size != 8 + n + data_end:
        raise ValueError(f"{file} is truncated or padded: its header describes {8 + n + data_end:,} bytes, "
                         f"the file has {size:,}; copy or save it again")
    return shapes, kinds


def _shard_files(path):
    """The safetensors files of a checkpoint directory: those named by the index if there is one."""
    # With an index, it is the authority: a stray *.safetensors file is ignored, and a shard it
    # names but that is absent fails here, not later as a list of "missing keys".
    if (path / INDEX_FILE).is_file():
        try:
            weight_map = json.loads((path / INDEX_FILE).read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{path / INDEX_FILE} is not a valid index ({type(e).__name__}: {e})") from None
        files = [path / f for f in sorted(set(weight_map.values()))]
        absent = [f.name for f in files if not f.is_file()]
        if absent:
            raise FileNotFoundError(f"{INDEX_FILE} in {path} names shards that are absent: {absent}")
        return files
    # no index: a single model.safetensors, or a bare directory of shards
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {path}")
    return files


def _check_keys(path, expected, found, dtypes, want_dtype=None):
    """One ValueError naming every missing key, unexpected key, shape mismatch and tensor not stored
    in config.json's torch_dtype (want_dtype, when it names one; MAX_LISTED of each kind spelled
    out): a half-loaded model would compute something else without saying so."""
    # a truncated download or the wrong directory shows up as missing keys; another architecture
    # (e.g. OLMo's fused att_proj) as unexpected ones; a config.json from other weights as shapes or dtypes
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    common = sorted(set(found) & set(expected))
    wrong = [f"{k}: checkpoint {found[k]} vs model {expected[k]}" for k in common if found[k] != expected[k]]
    other = [f"{k} ({dtypes[k]})" for k in common if want_dtype and dtypes[k] != want_dtype]
    if missing or unexpected or wrong or other:
        # every kind in one message, so a single failed load tells the whole story
        msg = [f"checkpoint in {path} does not match the config:"]
        for label, items in (("missing keys", missing), ("unexpected keys", unexpected), ("shape mismatches", wrong),
                             (f"tensors not in config.json's torch_dtype {want_dtype}", other)):
            if items:
                more = f" … and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else ""
                msg.append(f"{label} ({len(items)}): {', '.join(items[:MAX_LISTED])}{more}")
        raise ValueError(msg[0] + " " + "; ".join(msg[1:]))  # one line, the whole story


def _put_tensor(model, key, t, load_in_4bit):
    """Install tensor t as parameter `key` (e.g. 'transformer.blocks.3.q_proj.weight')."""
    module_name, _, attr = key.rpartition(".")  # 'transformer.blocks.3.q_proj', 'weight'
    module = model.get_submodule(module_name)
    parent_name, _, child = module_name.rpartition(".")  # 'transformer.blocks.3', 'q_proj'
    # block linears become quantized when their weight arrives (not the LM head); a q/k/v bias stays dense
    if load_in_4bit and child in BLOCK_LINEARS and ".blocks." in key and attr == "weight":
        bias = None if module.bias is None or module.bias.is_meta else module.bias
        model.get_submodule(parent_name).register_module(child, linear_4bit(t, bias))
    else:
        # replaces the meta placeholder without a copy; requires_grad is True, add_lora freezes later
        setattr(module, attr, nn.Parameter(t))


# -----------------------------------------------------------------------------
# Writing


def save_pretrained(model, path, max_shard_bytes=MAX_SHARD_BYTES):
    """Write config.json + model-0000i-of-0000N.safetensors + model.safetensors.index.json with the official
    key names. LoRA adapters are merged on the fly, tensor by tensor (W + (alpha/r) B A), without touching
    the model. Shards are written to a temporary name and renamed, the index last, so a crash never leaves
    an index naming half-written files. config.json's auto_map keeps only the remote code in `path`."""
    from safetensors.torch import save_file
    # dequantized NF4 is not the original bf16 weights: refuse rather than write a lossy copy
    for name, m in model.named_modules():
        if is_4bit(m):
            raise ValueError(f"{name} is 4-bit quantized; the official layout stores bf16 weights. Save lora_state_dict"
                             "(model) instead, or load the base without load_in_4bit, add the adapters and save that.")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    # (official key, size in bytes, how to get the tensor): merged weights are computed only
    # when their shard is written, so at most one shard of extra memory is ever used.
    entries, family = [], family_of_config(model.config)
    for key, t in model.state_dict().items():  # LLaDA: 'transformer.…' -> official 'model.transformer.…'
        # the official layout has no place for adapters: they are folded into their base weight
        if ".lora_A" in key or ".lora_B" in key:
            continue
        # a LoRA-wrapped linear: its merged weight goes under the plain name, ….q_proj.weight (merged_weight
        # passed uncalled: the merge runs when its shard is written), its bias (if any) unchanged, ….q_proj.bias
        key = key.replace(".base.bias", ".bias")
        if key.endswith(".base.weight"):
            layer = model.get_submodule(key[:-len(".base.weight")])
            entries.append((family.key_out(key.replace(".base.weight", ".weight")), t.numel() * t.element_size(),
                            layer.merged_weight))
        else:
            # t=t binds this iteration's tensor; a plain closure would return the loop's last one
            entries.append((family.key_out(key), t.numel() * t.element_size(), lambda t=t: t))
    shards = _group_shards(entries, max_shard_bytes)
    n, weight_map, total, digest = len(shards), {}, 0, WeightsHash()
    mode = 0o666 & ~_umask()  # safetensors creates files 0600; a shared cluster needs them as readable as the rest
    for i, shard in enumerate(shards):
        # the official naming: model-00001-of-00006.safetensors
        fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        # safetensors writes host memory: each tensor goes to CPU, contiguous, one shard at a time
        tensors = {k: get().detach().to("cpu").contiguous() for k, _, get in shard}
        for k, t in tensors.items():  # every tensor written, as it is written (LoRA merged, cast): none non-finite
            _check_finite(t, path / fname, k, hint="not written (the shard and the save are not made)")
        save_file(tensors, path / (fname + ".tmp"), metadata={"format": "pt"})  # HF wants format=pt
        os.chmod(path / (fname + ".tmp"), mode)
        # os.replace is atomic: a crash leaves either the old shard or the complete new one
        os.replace(path / (fname + ".tmp"), path / fname)
        # total_size in the index counts the stored bytes, as transformers' own index does
        for k, t in tensors.items():
            weight_map[k] = fname
            total += t.numel() * t.element_size()
            digest.add(k, t)  # the fingerprint of what was written (modelio/provenance.py)
        # free this shard's host copies before the next one is built
        del tensors
    # config.json records the stored dtype the way transformers does ("torch_dtype": "bfloat16")
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    _write_json(path / CONFIG_FILE, local_auto_map({**family.config_to_json(model.config), "torch_dtype": dtype}, path))
    # the index last, so it never names a shard that is not complete on disk
    _write_json(path / INDEX_FILE, {"metadata": {"total_size": total, WEIGHTS_KEY: digest.hexdigest()},
                                    "weight_map": dict(sorted(weight_map.items()))})
    # remove shards of an earlier save with a different shard count (never anything else)
    for f in path.glob("model*.safetensors"):
        if f.name not in weight_map.values():
            f.unlink()


def _umask():
    """The process's umask (read by setting it, so set back at once)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _group_shards(entries, max_shard_bytes):
    """Greedy sharding in key order: a new shard starts when the next tensor would overflow."""
    shards, current, size = [], [], 0
    # entry = (key, bytes, get). A tensor bigger than the cap still gets a shard of its own,
    # because a shard is only closed when it already holds something.
    for entry in entries:
        if current and size + entry[1] > max_shard_bytes:
            shards.append(current)
            current, size = [], 0
        current.append(entry)
        size += entry[1]
    shards.append(current)
    return shards


def _write_json(file, obj):
    """Write via a temporary name and rename, so a reader never sees a half-written file."""
    tmp = Path(str(file) + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, file)


_NOTED = set()  # the bases whose saves printed their family's remote-code note (once a process)


def save_merged(model, base_dir, out_dir):
    """A model trained from base_dir, saved so that every tool that reads the base reads it too: the
    base's other files byte for byte (copy_model_files), then save_pretrained. With a 4-bit base the
    official layout still stores full-precision weights, so adapters trained on an NF4 base are merged
    onto the ORIGINAL weights re-read from base_dir (on CPU, streamed), never onto dequantized ones
    (d1 likewise evaluates its QLoRA adapters on the bf16 base)."""
    # the copy first: config.json, written next, keeps the auto_map entries whose code is now there
    copied = copy_model_files(base_dir, out_dir)
    note = family_of_config(model.config).remote_code_note
    if note and any(name.endswith(".py") for name in copied) and str(base_dir) not in _NOTED:  # once a run
        _NOTED.add(str(base_dir))
        print(note)
    if any(is_4bit(m) for m in model.modules()):
        # only the small lora_A / lora_B tensors are taken from the trained model
        adapters = lora_state_dict(model)
        full = from_pretrained(base_dir)  # stored dtype, CPU: 16 GB of RAM for LLaDA-8B
        # wrap the same layers of the full-precision copy, load the trained adapters into them, and
        # let save_pretrained merge them (alpha is recovered as scaling * r)
        for block, name, path in block_linears(full, BLOCK_LINEARS):
            layer = model.get_submodule(path)
            if isinstance(layer, LoRALinear):  # same rank / alpha as the trained adapter
                setattr(block, name, LoRALinear(getattr(block, name), layer.lora_A.shape[0],
                                                layer.scaling * layer.lora_A.shape[0]))
        # strict=False: the dict holds only adapter keys; every base weight stays as read from disk
        full.load_state_dict({k: v.cpu() for k, v in adapters.items()}, strict=False)
        model = full
    save_pretrained(model, out_dir)


# -----------------------------------------------------------------------------
# The tiny model, and load()

# A small LLaDA for the CPU pipeline and the tests: same code path as the 8B, ~0.9M parameters.
# 4 layers of 4 heads x 32 dims, MLP 3x wide; LLaDA-8B's own rope_theta, eps and init_std, so the
# same numerics run. vocab_size and the special ids come from the tokenizer in make_tiny; the family's
# config.json keys and architecture from modelio/families.py (Family.tiny_extras, Family.tiny)
TINY_DIR = os.path.join("out", "tiny-llada")  # where the scripts' defaults expect the tiny model


def make_tiny(path, seed=0, max_shard_bytes=MAX_SHARD_BYTES, tags=False, family="llada", **overrides):
    """Write a randomly initialised tiny LLaDA + its tokenizer to `path` in the official layout, loaded from
    then on exactly like LLaDA-8B-Instruct. Returns the path.
    tags: d1's format tags as single tokens (the testbed's tokenizer); overrides: TINY_CONFIG fields;
    family: the name of a registered family (modelio/families.py), written in its layout with its tokens."""
    fam = family_named(family)
    tok = make_tiny_tokenizer(tags=tags, **(fam.tiny_tokenizer or {}))
    # byte tokenizer: 256 byte ids, then the family's special tokens (LLaDA: BOS 256, EOS 257, mask 258, ...)
    ids = {role: tok.convert_tokens_to_ids(t) for role, t in fam.tokens.items()}
    # the vocabulary and special ids come from the tokenizer, as config.json's do for the 8B
    shape = {**TINY_CONFIG, **fam.tiny, **overrides}
    config = LLaDAConfig(**{**shape, "vocab_size": len(tok), "embedding_size": len(tok),
                            "mask_token_id": ids["mask"], "eos_token_id": ids["eos"], "pad_token_id": ids["eos"]})
    config.extra = {k: ids["bos"] if k == "bos_token_id" else v for k, v in fam.tiny_extras.items()}
    torch.manual_seed(seed)  # the random init is reproducible from the seed
    model = LLaDA(config)
    path = Path(path)
    # the same writer a trained 8B goes through, so every load of the tiny model tests the layout
    save_pretrained(model, path, max_shard_bytes=max_shard_bytes)
    # tokenizer.json, tokenizer_config.json and the chat template beside the weights, as in the HF repo
    tok.save_pretrained(str(path))
    # like the official generation_config.json (docs/llada.md §1), minus its transformers_version
    _write_json(path / "generation_config.json", {"bos_token_id": ids["bos"], "eos_token_id": ids["eos"]})
    return path


def write_default(path):
    """Whether `path` is the scripts' default tiny model, written here on first use: a fresh clone runs end
    to end without downloading anything (no other missing path is ever filled with a random model)."""
    if str(path) != TINY_DIR:
        return False
    if not Path(path).exists():
        make_tiny(path)
    return True


def load(path=TINY_DIR, device=None, dtype=None, load_in_4bit=False):
    """(model, tokenizer) from a checkpoint directory, a hub cache or a hub id. Only the default tiny
    directory is created when missing: a mistyped path to real weights must fail, not silently give
    a random model."""
    if not write_default(path):  # a hub id or a hub cache: its local snapshot (modelio/hub.py); a directory as is
        path = resolve_model(path).path
    model = from_pretrained(path, dtype=dtype, device=device, load_in_4bit=load_in_4bit)
    return model, load_tokenizer(path)


def tiny_main(family="llada", out_dir=TINY_DIR, argv=None):
    """The command line that writes a family's tiny model (`python -m modelio.checkpoint`: LLaDA's) and
    runs one forward pass of it, read back from disk through the official layout, as the 8B would be."""
    tiny = {**TINY_CONFIG, **family_named(family).tiny}  # its query heads per key/value head are kept
    parser = argparse.ArgumentParser(description=f"write the tiny {family} model in its official layout and run "
                                                 f"one forward pass")
    parser.add_argument("--out-dir", type=str, default=out_dir, help="where to write the tiny model")
    parser.add_argument("--seed", type=int, default=0, help="random init seed")
    parser.add_argument("--tags", action="store_true", help="d1's format tags as single tokens (the testbed's)")
    parser.add_argument("--d-model", type=int, default=TINY_CONFIG["d_model"], help="width (MLP 3x, heads of 32)")
    parser.add_argument("--n-layers", type=int, default=TINY_CONFIG["n_layers"], help="transformer blocks")
    parser.add_argument("--rope-theta", type=float, default=None,
                        help=f"RoPE base (default: the family's, {tiny['rope_theta']:g})")
    args = parser.parse_args(argv)
    n_heads = args.d_model // 32
    shape = dict(d_model=args.d_model, n_layers=args.n_layers, mlp_hidden_size=3 * args.d_model, n_heads=n_heads,
                 n_kv_heads=max(1, n_heads // (tiny["n_heads"] // tiny["n_kv_heads"])),
                 **({"rope_theta": args.rope_theta} if args.rope_theta else {}))
    make_tiny(args.out_dir, seed=args.seed, tags=args.tags, family=family, **shape)
    model, tok = load(args.out_dir)
    # one user turn through the chat template, rendered exactly as for the 8B
    ids = torch.tensor([prompt_ids(tok, "Hello")])  # (1, P)
    logits = model(ids)  # (1, P, V)
    print(f"wrote {args.out_dir}: {model.num_params():,} parameters, {len(tok)} tokens")
    print(f"prompt {tok.decode(ids[0])!r} -> {ids.shape[1]} tokens -> logits {tuple(logits.shape)}")


if __name__ == "__main__":
    tiny_main()
