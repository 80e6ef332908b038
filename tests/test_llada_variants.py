"""
Tests that LLaDA's other official checkpoints, GSAI-ML/LLaDA-8B-Base and GSAI-ML/LLaDA-1.5, load as
LLaDA exactly as GSAI-ML/LLaDA-8B-Instruct does. Their config.json files are below, verbatim.
  - model.LLaDAConfig.from_dict parses each one strictly, into the 8B shape, and loses no key.
  - On the meta device (no memory), LLaDA(config) has the parameter count that a formula gives from the
    config fields. That count is also the real checkpoints' index total_size / 2 (bf16).
  - modelio.checkpoint.verify accepts a header-only 8B checkpoint for each config, with real key names and
    shapes. Its 16 GB shard is a sparse file, so it costs no disk space.
  - A tiny model dir carrying each real config's non-shape fields loads through load / from_pretrained
    and a hub id. save_pretrained writes every key of the real config back, with auto_map cut to the
    remote code that is there (local_auto_map).
No network; every test runs in seconds.

Run: python -m pytest tests/test_llada_variants.py -q
"""
import hashlib
import json
import os

import pytest
import torch

from conftest import official_keys, write_hub_cache
from modelio.checkpoint import from_pretrained, load, make_tiny, save_pretrained, verify
from modelio.hub import resolve_model
from modelio.tokenizer import load_tokenizer, special_ids
from model import LLaDA, LLaDAConfig

# -----------------------------------------------------------------------------
# The real config.json files (copied by hand from public copies of the hub files; the test below checks
# the copies are byte-exact by their git blob ids)
#
# LLaDA-8B-Base, LLaDA-1.5 and LLaDA-8B-Instruct ship the SAME config.json, byte for byte. Each copy is
# 1385 bytes, 54 lines, with no final newline; that matches the hub listing (1.39 kB, docs/llada.md §2).
# All three have git blob 021f5f1dbc5c4ff994be034f80a68eda43023de6:
#   Base:     github QuentinFitteRey/LLada-Reasoning @ 4bfec79d1d9f06cbb9928479dac293763c4c98d6,
#             llada_local/config.json (a hub clone of Base: its README is the "LLaDA-8B-Base" model card)
#   1.5:      same repo and commit, llada_local_1.5/config.json (its README is the "LLaDA 1.5" card)
#   Instruct: github yinj66/support_basis @ 66e6761ac3bb6b857dde77c13a5694fcee5b92f5,
#             "LLaDA-8B-Instruct-B&S-light/config.json"
# The Base and 1.5 copies also hold each checkpoint's model.safetensors.index.json, and both say
# total_size 16031162368 (291 tensors).
OFFICIAL_CONFIG_JSON = r"""{
  "activation_type": "silu",
  "alibi": false,
  "alibi_bias_max": 8.0,
  "architectures": [
    "LLaDAModelLM"
  ],
  "attention_dropout": 0.0,
  "attention_layer_norm": false,
  "attention_layer_norm_with_affine": true,
  "auto_map": {
    "AutoConfig": "configuration_llada.LLaDAConfig",
    "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM",
    "AutoModel": "modeling_llada.LLaDAModelLM"
  },
  "bias_for_layer_norm": false,
  "block_group_size": 1,
  "block_type": "llama",
  "d_model": 4096,
  "embedding_dropout": 0.0,
  "embedding_size": 126464,
  "eos_token_id": 126081,
  "flash_attention": false,
  "include_bias": false,
  "include_qkv_bias": false,
  "init_cutoff_factor": null,
  "init_device": "meta",
  "init_fn": "mitchell",
  "init_std": 0.02,
  "input_emb_norm": false,
  "layer_norm_type": "rms",
  "layer_norm_with_affine": true,
  "mask_token_id": 126336,
  "max_sequence_length": 4096,
  "mlp_hidden_size": 12288,
  "mlp_ratio": 4,
  "model_type": "llada",
  "multi_query_attention": null,
  "n_heads": 32,
  "n_kv_heads": 32,
  "n_layers": 32,
  "pad_token_id": 126081,
  "precision": "amp_bf16",
  "residual_dropout": 0.0,
  "rms_norm_eps": 1e-05,
  "rope": true,
  "rope_full_precision": true,
  "rope_theta": 500000.0,
  "scale_logits": false,
  "transformers_version": "4.46.3",
  "use_cache": false,
  "vocab_size": 126464,
  "weight_tying": false
}"""

# LLaDA-8B-Instruct's config after a transformers save_pretrained, as users' own copies look:
# github radi-cho/reasoning-diffusion @ 49e3510e8fffd3b4297abae4548f91d76833196d,
# LLaDA-8B-Instruct/config.json (git blob c71f4e0724646f6d9895c65da058429518464f2f). It is the official file's
# values plus "_name_or_path" and "torch_dtype", another "transformers_version", written as transformers writes
# a config (keys sorted, indent 2, a final newline): built so here, and its blob id checks it is that file
RESAVED_INSTRUCT_JSON = json.dumps({**json.loads(OFFICIAL_CONFIG_JSON), "_name_or_path": "GSAI-ML/LLaDA-8B-Instruct",
                                    "torch_dtype": "bfloat16", "transformers_version": "4.46.2"},
                                   indent=2, sort_keys=True) + "\n"

# hub id (or a label) -> the config.json text it ships
VARIANTS = {
    "GSAI-ML/LLaDA-8B-Base": OFFICIAL_CONFIG_JSON,
    "GSAI-ML/LLaDA-1.5": OFFICIAL_CONFIG_JSON,
    "GSAI-ML/LLaDA-8B-Instruct": OFFICIAL_CONFIG_JSON,
    "LLaDA-8B-Instruct re-saved by transformers": RESAVED_INSTRUCT_JSON,
}
# the git blob ids of the source files the literals were copied from (see above)
BLOB_IDS = {OFFICIAL_CONFIG_JSON: "021f5f1dbc5c4ff994be034f80a68eda43023de6",
            RESAVED_INSTRUCT_JSON: "c71f4e0724646f6d9895c65da058429518464f2f"}
# model.safetensors.index.json of the real Base and 1.5 checkpoints: metadata.total_size (bf16 bytes)
INDEX_TOTAL_SIZE = 16_031_162_368
# the fields that give the shape (and the special ids that must fit the vocabulary): a tiny model keeps
# its own; every other key comes from the real config
SHAPE_KEYS = ("d_model", "n_heads", "n_kv_heads", "n_layers", "mlp_hidden_size", "vocab_size",
              "embedding_size", "mask_token_id", "eos_token_id", "pad_token_id")
TINY_SHAPE = dict(d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)
# stand-ins for the remote code the hub repos ship: only their presence matters to local_auto_map
REMOTE_CODE = ("configuration_llada.py", "modeling_llada.py")

variants = pytest.mark.parametrize("name", list(VARIANTS))


def real(name):
    return json.loads(VARIANTS[name])


def formula_params(cfg):
    """Parameters of an OLMo 'llama'-block LLaDA, written out from the config fields (docs/llada.md §1-2):
    per block two RMSNorm weights, q/k/v/out projections and the three gated-MLP matrices; then wte, the
    final norm and an untied LM head."""
    d, nh, L, h = cfg["d_model"], cfg["n_heads"], cfg["n_layers"], cfg["mlp_hidden_size"]
    nkv, hd = cfg["n_kv_heads"] or nh, d // nh
    V = cfg["embedding_size"] or cfg["vocab_size"]
    per_block = 2 * d + d * nh * hd + 2 * d * nkv * hd + nh * hd * d + 3 * d * h
    return L * per_block + V * d + d + (0 if cfg["weight_tying"] else V * d)


def assert_keeps(saved, cfg, skip=()):
    """Every key of cfg is in `saved` with cfg's value (keys in `skip` aside)."""
    lost = {k: (v, saved.get(k, "<missing>")) for k, v in cfg.items() if k not in skip and saved.get(k, object()) != v}
    assert not lost, f"keys lost or changed (real value, ours): {lost}"


# -----------------------------------------------------------------------------
# The real configs parse into the 8B


def test_the_literals_are_byte_exact_copies_of_their_sources():
    # git's blob id: sha1 of "blob <size>\0" + bytes. An edit to a literal (even whitespace) changes it
    for text, blob in BLOB_IDS.items():
        data = text.encode()
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob
    # Base, 1.5 and Instruct ship one and the same file
    assert len(OFFICIAL_CONFIG_JSON.encode()) == 1385 and OFFICIAL_CONFIG_JSON.count("\n") + 1 == 54


@variants
def test_a_real_config_parses_to_the_8b_shape_and_loses_no_key(name):
    raw = real(name)
    cfg = LLaDAConfig.from_dict(raw)
    shape = dict(d_model=cfg.d_model, n_heads=cfg.n_heads, kv_heads=cfg.kv_heads, head_dim=cfg.head_dim,
                 n_layers=cfg.n_layers, hidden_size=cfg.hidden_size, vocab_size=cfg.vocab_size,
                 padded_vocab=cfg.padded_vocab, rope_theta=cfg.rope_theta, rms_norm_eps=cfg.rms_norm_eps,
                 max_sequence_length=cfg.max_sequence_length, mask_token_id=cfg.mask_token_id,
                 eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id)
    assert shape == dict(d_model=4096, n_heads=32, kv_heads=32, head_dim=128, n_layers=32, hidden_size=12288,
                         vocab_size=126464, padded_vocab=126464, rope_theta=500000.0, rms_norm_eps=1e-5,
                         max_sequence_length=4096, mask_token_id=126336, eos_token_id=126081, pad_token_id=126081)
    # what save_pretrained writes comes from to_dict: every key of the real file, with its value
    assert_keeps(cfg.to_dict(), raw)
    assert cfg.extra["auto_map"] == raw["auto_map"] and cfg.extra["architectures"] == ["LLaDAModelLM"]


@pytest.mark.parametrize("key, value", [("alibi", True), ("block_type", "sequential"), ("weight_tying", True),
                                        ("activation_type", "swiglu"), ("include_bias", True), ("n_kv_heads", 5)])
def test_a_real_config_with_one_other_feature_is_refused_by_name(key, value):
    with pytest.raises(ValueError, match=f"not supported.*{key}"):
        LLaDAConfig.from_dict({**real("GSAI-ML/LLaDA-8B-Base"), key: value})


@variants
def test_a_real_config_builds_the_8b_on_the_meta_device(name):
    raw = real(name)
    with torch.device("meta"):
        model = LLaDA(LLaDAConfig.from_dict(raw))
    n = sum(p.numel() for p in model.parameters())
    assert n == formula_params(raw) == 8_015_581_184 == INDEX_TOTAL_SIZE // 2
    # the official names and shapes (written out from docs/llada.md §2 in conftest), all 291 of them
    shapes = {"model." + k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes == official_keys(raw) and len(shapes) == 291


# -----------------------------------------------------------------------------
# verify() on a full-size checkpoint whose 16 GB shard is a sparse file: real keys and shapes, no disk


@pytest.fixture()
def sparse_ok(tmp_path):
    probe = tmp_path / "probe"
    with open(probe, "wb") as f:
        f.truncate(2**30)
    if os.stat(probe).st_blocks * 512 > 2**20:  # the filesystem would really write the zeros
        pytest.skip("no sparse files on this filesystem")
    probe.unlink()


def write_header_only(path, config_json, shapes):
    """config.json + one bf16 safetensors shard holding `shapes` (header written here by the format's
    spec: 8-byte little-endian length, JSON header, data), its data a hole, + the index."""
    path.mkdir()
    (path / "config.json").write_text(config_json)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for k, shape in sorted(shapes.items()):
        size = 2 * torch.Size(shape).numel()
        header[k] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    shard = "model-00001-of-00001.safetensors"
    with open(path / shard, "wb") as f:
        f.write(len(blob).to_bytes(8, "little") + blob)
        f.truncate(8 + len(blob) + offset)
    (path / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": offset}, "weight_map": {k: shard for k in shapes}}))
    return offset


@variants
def test_verify_accepts_the_8b_layout_of_a_real_config(tmp_path, sparse_ok, name):
    raw = real(name)
    total = write_header_only(tmp_path / "ckpt", VARIANTS[name], official_keys(raw))
    assert total == INDEX_TOTAL_SIZE  # what the real index says
    assert_keeps(verify(tmp_path / "ckpt").to_dict(), raw)


def test_verify_refuses_the_8b_layout_under_another_mlp_width(tmp_path, sparse_ok):
    raw = real("GSAI-ML/LLaDA-8B-Base")
    write_header_only(tmp_path / "ckpt", json.dumps({**raw, "mlp_hidden_size": 11008}), official_keys(raw))
    # ff_proj, up_proj and ff_out of each of the 32 blocks
    with pytest.raises(ValueError, match=r"shape mismatches \(96\): model.transformer.blocks.0.ff_out.weight: "
                                         r"checkpoint \(4096, 12288\) vs model \(4096, 11008\)"):
        verify(tmp_path / "ckpt")


# -----------------------------------------------------------------------------
# A tiny model carrying a real config's other fields: load, save, hub id


def tiny_with_real_fields(path, name):
    """make_tiny's model with config.json = the real config's keys, the tiny shape, special ids and stored
    dtype aside -> (path, the config.json written)."""
    make_tiny(path, **TINY_SHAPE)
    tiny = json.loads((path / "config.json").read_text())
    # torch_dtype (the re-saved Instruct's "bfloat16") describes the stored weights: the tiny one's are fp32
    cfg = {**real(name), **{k: tiny[k] for k in (*SHAPE_KEYS, "torch_dtype") if k in tiny}}
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return path, cfg


@variants
def test_a_tiny_model_with_a_real_configs_fields_loads_and_saves_them_back(tmp_path, name):
    path, cfg = tiny_with_real_fields(tmp_path / "tiny", name)
    model, tok = load(str(path))
    assert model.config.d_model == TINY_SHAPE["d_model"]
    # the carried model_type ("llada") picks LLaDA's special tokens, and the tokenizer agrees with config.json
    ids = special_ids(tok, model.config)
    assert (ids.mask, ids.eos) == (cfg["mask_token_id"], cfg["eos_token_id"])
    assert_keeps(model.config.to_dict(), cfg)
    with torch.no_grad():
        assert model(torch.tensor([[1, 2, cfg["mask_token_id"]]])).shape == (1, 3, cfg["embedding_size"])
    # no remote code beside the save: every key written back but auto_map, which would name absent files
    save_pretrained(model, tmp_path / "plain")
    saved = json.loads((tmp_path / "plain" / "config.json").read_text())
    assert "auto_map" not in saved and saved["torch_dtype"] == "float32"
    assert_keeps(saved, cfg, skip=("auto_map", "torch_dtype"))
    # with the remote code there (as save_merged copies it from the base), the real auto_map goes back as is
    (tmp_path / "full").mkdir()
    for f in REMOTE_CODE:
        (tmp_path / "full" / f).write_text("# stand-in\n")
    save_pretrained(model, tmp_path / "full")
    saved = json.loads((tmp_path / "full" / "config.json").read_text())
    assert_keeps(saved, cfg, skip=("torch_dtype",))
    # and the save loads again, bit for bit
    again = from_pretrained(tmp_path / "full")
    assert_keeps(again.config.to_dict(), cfg, skip=("torch_dtype",))
    for (k, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), k


@pytest.mark.parametrize("repo_id", ["GSAI-ML/LLaDA-8B-Base", "GSAI-ML/LLaDA-1.5"])
def test_the_hub_ids_of_base_and_1_5_resolve_and_load(tmp_path, monkeypatch, repo_id):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # no local folder named like the id's owner
    src, cfg = tiny_with_real_fields(tmp_path / "src", repo_id)
    commit = "c0ffee" * 6 + "c0ff"
    write_hub_cache(tmp_path / "cache", repo_id, src, commit)
    resolved = resolve_model(repo_id, cache_dir=tmp_path / "cache")
    assert (resolved.repo, resolved.revision) == (repo_id, commit)
    # load() takes the snapshot, and the cache's folder of the model (models--GSAI-ML--LLaDA-1.5) too
    for spec in (resolved.path, tmp_path / "cache" / f"models--{repo_id.replace('/', '--')}"):
        model, _ = load(str(spec))
        assert_keeps(model.config.to_dict(), cfg)


def test_base_s_broken_special_tokens_map_is_read_around(tmp_path, capsys):
    # LLaDA-8B-Base's special_tokens_map.json lacks a comma after "<|mdm_mask|>" (the 19 bytes it has over
    # Instruct's); transformers refuses the whole tokenizer for it. load_tokenizer reads the special tokens
    # from tokenizer_config.json instead and says so once
    path, _ = tiny_with_real_fields(tmp_path / "tiny", "GSAI-ML/LLaDA-8B-Base")
    good = load_tokenizer(path)
    (path / "special_tokens_map.json").write_text(
        '{\n  "additional_special_tokens": [\n    "<|mdm_mask|>"\n    "<|start_header_id|>"\n  ],\n'
        '  "bos_token": "<|startoftext|>",\n  "eos_token": "<|endoftext|>"\n}\n')
    with pytest.raises(json.JSONDecodeError):
        json.loads((path / "special_tokens_map.json").read_text())
    tok = load_tokenizer(path)
    assert "special_tokens_map.json is not valid JSON" in capsys.readouterr().err
    text = "<|startoftext|>hi<|mdm_mask|><|eot_id|>"
    assert tok(text)["input_ids"] == good(text)["input_ids"] and tok.all_special_ids == good.all_special_ids
    assert (path / "special_tokens_map.json").read_text().count(",") == 2  # the directory itself is left as it is
