"""
Tests for model.py: the forward against a plain step-by-step computation on a checkpoint written
independently in the official layout, save/load, strictness, 4-bit, LoRA, tokenizer.

Run: python -m pytest tests/test_model.py -q
"""
import json
import math

import pytest
import torch
from safetensors.torch import save_file

from model import (BLOCK_LINEARS, CHAT_TEMPLATE, EOS_TOKEN, LLaDA, LLaDAConfig, LoRALinear, RMSNorm,
                   add_lora, load_tokenizer, lora_disabled, lora_state_dict, make_tiny, merge_lora,
                   special_ids)

# A small config with GQA off, like LLaDA-8B (n_kv_heads == n_heads), and one with GQA on.
SMALL = dict(d_model=32, n_heads=4, n_kv_heads=4, n_layers=2, mlp_hidden_size=48, vocab_size=40,
             embedding_size=40, mask_token_id=39, eos_token_id=38, pad_token_id=38,
             max_sequence_length=64, rope_theta=10000.0)


def official_keys(cfg):
    """The official key names and shapes, written out from llada.md §2 (not from model.py)."""
    C, H, V = cfg["d_model"], cfg["mlp_hidden_size"], cfg["embedding_size"]
    kv = cfg["n_kv_heads"] * C // cfg["n_heads"]
    keys = {"model.transformer.wte.weight": (V, C), "model.transformer.ln_f.weight": (C,),
            "model.transformer.ff_out.weight": (V, C)}
    for i in range(cfg["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        keys.update({p + "attn_norm.weight": (C,), p + "q_proj.weight": (C, C), p + "k_proj.weight": (kv, C),
                     p + "v_proj.weight": (kv, C), p + "attn_out.weight": (C, C), p + "ff_norm.weight": (C,),
                     p + "ff_proj.weight": (H, C), p + "up_proj.weight": (H, C), p + "ff_out.weight": (C, H)})
    return keys


def write_checkpoint(path, cfg, n_shards=3, seed=0, dtype=torch.float32, drop=None, add=None, reshape=None):
    """Write random weights in the official sharded layout with safetensors directly (independent
    of LLaDA.save_pretrained). Optional corruptions for the strictness tests."""
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for k, shape in official_keys(cfg).items():
        # norms around 1, matrices with std 0.3 so the forward is far from uniform
        sd[k] = (1 + 0.1 * torch.randn(shape, generator=g)) if len(shape) == 1 else 0.3 * torch.randn(shape, generator=g)
        sd[k] = sd[k].to(dtype)
    if drop:
        del sd[drop]
    if add:
        sd[add] = torch.zeros(3)
    if reshape:
        sd[reshape] = torch.zeros(2, 2, dtype=dtype)
    keys = sorted(sd)
    weight_map = {}
    for i in range(n_shards):
        fname = f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors"
        part = {k: sd[k] for k in keys[i::n_shards]}
        save_file(part, str(path / fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in part})
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (path / "config.json").write_text(json.dumps({**cfg, "model_type": "llada", "init_fn": "mitchell"}))
    return {k: v.double() for k, v in sd.items()}


def reference_forward(sd, cfg, ids, mask=None):
    """LLaDA's forward written out step by step in float64 with explicit loops over heads and an
    explicit rotation per (position, frequency) pair, following llada.md §1 and §3."""
    B, T = ids.shape
    C, nh, nkv, eps, theta = cfg["d_model"], cfg["n_heads"], cfg["n_kv_heads"], 1e-5, cfg["rope_theta"]
    hd = C // nh

    def rms(x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w

    def rotate(x):  # x (T, hd): pair j with j + hd/2, angle = t * theta^(-2j/hd)
        out = x.clone()
        for t in range(T):
            for j in range(hd // 2):
                a = t * theta ** (-2 * j / hd)
                x1, x2 = x[t, j], x[t, j + hd // 2]
                out[t, j] = x1 * math.cos(a) - x2 * math.sin(a)
                out[t, j + hd // 2] = x2 * math.cos(a) + x1 * math.sin(a)
        return out

    h = sd["model.transformer.wte.weight"][ids]  # (B, T, C)
    for i in range(cfg["n_layers"]):
        w = {k.split(".")[-2]: v for k, v in sd.items() if f".blocks.{i}." in k}
        a = rms(h, w["attn_norm"])
        q, k, v = a @ w["q_proj"].T, a @ w["k_proj"].T, a @ w["v_proj"].T
        o = torch.zeros(B, T, C, dtype=torch.float64)
        for b in range(B):
            for head in range(nh):
                kvh = head // (nh // nkv)
                qh = rotate(q[b, :, head * hd:(head + 1) * hd])
                kh = rotate(k[b, :, kvh * hd:(kvh + 1) * hd])
                scores = qh @ kh.T / math.sqrt(hd)  # (T, T), no causal mask
                if mask is not None:
                    scores[:, mask[b] == 0] = -math.inf
                o[b, :, head * hd:(head + 1) * hd] = scores.softmax(-1) @ v[b, :, kvh * hd:(kvh + 1) * hd]
        h = h + o @ w["attn_out"].T
        m = rms(h, w["ff_norm"])
        gate, up = m @ w["ff_proj"].T, m @ w["up_proj"].T
        h = h + (gate * torch.sigmoid(gate) * up) @ w["ff_out"].T
    return rms(h, sd["model.transformer.ln_f.weight"]) @ sd["model.transformer.ff_out.weight"].T


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("official")
    sd = write_checkpoint(path, SMALL)
    return path, sd


def test_sharded_checkpoint_matches_reference_forward(ckpt):
    path, sd = ckpt
    model = LLaDA.from_pretrained(path).eval()
    assert model.config.extra["init_fn"] == "mitchell"  # unknown keys are carried, not dropped
    ids = torch.randint(0, 40, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = model(ids).double()
    ref = reference_forward(sd, SMALL, ids)
    assert ours.shape == (2, 7, 40)
    torch.testing.assert_close(ours, ref, atol=2e-4, rtol=1e-4)


def test_key_padding_mask_matches_reference_and_hides_pads(ckpt):
    path, sd = ckpt
    model = LLaDA.from_pretrained(path).eval()
    ids = torch.randint(0, 38, (2, 6), generator=torch.Generator().manual_seed(2))
    ids[0, :2] = 38  # left padding on row 0
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[0, :2] = 0
    with torch.no_grad():
        ours = model(ids, attention_mask=mask).double()
        # changing what sits under the pads must not change any real position's logits
        ids2 = ids.clone()
        ids2[0, :2] = 5
        ours2 = model(ids2, attention_mask=mask).double()
        no_mask = model(ids).double()
    torch.testing.assert_close(ours, reference_forward(sd, SMALL, ids, mask), atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(ours[0, 2:], ours2[0, 2:], atol=1e-5, rtol=0)
    torch.testing.assert_close(ours[1], no_mask[1], atol=1e-5, rtol=0)  # all-ones row == no mask
    assert (ours[0, 2:] - no_mask[0, 2:]).abs().max() > 1e-3  # the mask did something


def test_gqa_config_matches_reference(tmp_path):
    cfg = {**SMALL, "n_kv_heads": 2}
    sd = write_checkpoint(tmp_path, cfg, n_shards=2)
    model = LLaDA.from_pretrained(tmp_path).eval()
    ids = torch.randint(0, 40, (1, 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).double(), reference_forward(sd, cfg, ids), atol=2e-4, rtol=1e-4)


@pytest.mark.parametrize("corruption, needle", [
    (dict(drop="model.transformer.blocks.1.up_proj.weight"), "missing keys (1): model.transformer.blocks.1.up_proj"),
    (dict(add="model.transformer.blocks.0.q_proj.bias"), "unexpected keys (1): model.transformer.blocks.0.q_proj.bias"),
    (dict(reshape="model.transformer.ln_f.weight"), "model.transformer.ln_f.weight: checkpoint (2, 2) vs model (32,)"),
])
def test_strict_loading_names_the_problem(tmp_path, corruption, needle):
    write_checkpoint(tmp_path, SMALL, **corruption)
    with pytest.raises(ValueError) as e:
        LLaDA.from_pretrained(tmp_path)
    assert needle in str(e.value)


def test_unsupported_config_is_refused_in_one_error():
    with pytest.raises(ValueError) as e:
        LLaDAConfig.from_dict({**SMALL, "block_type": "sequential", "alibi": True, "weight_tying": True,
                               "attention_layer_norm": True, "include_bias": True})
    msg = str(e.value)
    for needle in ("block_type='sequential'", "alibi=True", "weight_tying=True", "attention_layer_norm=True",
                   "include_bias=True"):
        assert needle in msg
    with pytest.raises(ValueError, match="not divisible"):
        LLaDAConfig.from_dict({**SMALL, "n_heads": 5})


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        LLaDA.from_pretrained(tmp_path)


def test_llada_8b_config_is_accepted_and_has_8b_params():
    cfg = LLaDAConfig()  # the defaults are LLaDA-8B's config.json values
    with torch.device("meta"):
        n = LLaDA(cfg).num_params()
    assert n == 8_015_581_184  # llada.md §1: computed from the checkpoint shapes


def test_save_load_is_bit_exact_with_official_keys(tmp_path, ckpt):
    path, _ = ckpt
    model = LLaDA.from_pretrained(path, dtype=torch.bfloat16)
    model.save_pretrained(tmp_path / "out", max_shard_bytes=6000)  # force several shards
    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(official_keys(SMALL))
    assert len(set(index["weight_map"].values())) > 2
    again = LLaDA.from_pretrained(tmp_path / "out")
    for (k1, a), (k2, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert k1 == k2 and a.dtype == b.dtype == torch.bfloat16 and torch.equal(a, b)
    # saving again with one shard replaces the old shards instead of leaving stale files
    again.save_pretrained(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").glob("*.safetensors")) == ["model-00001-of-00001.safetensors"]
    assert json.loads((tmp_path / "out" / "config.json").read_text())["init_fn"] == "mitchell"


def test_rmsnorm_casts_back_before_the_weight_multiply():
    norm = RMSNorm(8, 1e-5).to(torch.bfloat16)
    norm.weight.data = torch.linspace(0.5, 2, 8).to(torch.bfloat16)
    x = torch.randn(3, 8).to(torch.bfloat16)
    x32 = x.float()
    expected = (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(torch.bfloat16) * norm.weight
    assert torch.equal(norm(x), expected)


def test_4bit_loading_runs_and_matches_dequantized_weights(ckpt):
    import bitsandbytes.functional as bnbF
    path, _ = ckpt
    q = LLaDA.from_pretrained(path, load_in_4bit=True).eval()
    layer = q.transformer.blocks[0].q_proj
    assert type(layer).__name__ == "Linear4bit" and layer.weight.quant_state.quant_type == "nf4"
    assert q.transformer.ff_out.weight.dtype == torch.bfloat16  # LM head stays unquantized
    # the same model with each 4-bit weight replaced by its dequantized bf16 value
    dense = LLaDA.from_pretrained(path, dtype=torch.bfloat16).eval()
    for qb, db in zip(q.transformer.blocks, dense.transformer.blocks):
        for name in BLOCK_LINEARS:
            w = getattr(qb, name).weight
            getattr(db, name).weight.data = bnbF.dequantize_4bit(w.data, w.quant_state)
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        a, b = q(ids).float(), dense(ids).float()
    assert a.shape == (2, 6, 40) and torch.isfinite(a).all()
    assert (a - b).abs().max() < 0.1 * b.abs().max()  # bf16 compute on both sides


def test_lora_zero_init_disable_and_merge(ckpt):
    path, _ = ckpt
    model = LLaDA.from_pretrained(path).eval()
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        base = model(ids)
    trainable = add_lora(model, r=4, alpha=8, dropout=0.0, targets=("q_proj", "v_proj", "ff_out"))
    assert len(trainable) == 2 * 3 * SMALL["n_layers"]  # A and B for 3 targets per block
    assert all(n.count("lora_") == 1 for n, p in model.named_parameters() if p.requires_grad)
    assert not isinstance(model.transformer.ff_out, LoRALinear)  # the LM head is never adapted
    with torch.no_grad():
        torch.testing.assert_close(model(ids), base, atol=0, rtol=0)  # B = 0: exactly the base
        for m in model.modules():
            if isinstance(m, LoRALinear):
                m.lora_B.normal_(0, 0.5)
        adapted = model(ids)
        assert (adapted - base).abs().max() > 1e-2
        with lora_disabled(model):
            torch.testing.assert_close(model(ids), base, atol=0, rtol=0)
        torch.testing.assert_close(model(ids), adapted, atol=0, rtol=0)  # re-enabled on exit
    assert len(lora_state_dict(model)) == len(trainable)
    merge_lora(model)
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    assert set(k for k in model.state_dict()) == set(k[len("model."):] for k in official_keys(SMALL))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), adapted, atol=1e-4, rtol=1e-4)


def test_lora_on_4bit_base_trains_and_merges(ckpt):
    path, _ = ckpt
    model = LLaDA.from_pretrained(path, load_in_4bit=True)
    params = add_lora(model, r=4, alpha=8, dropout=0.0, targets=("q_proj", "up_proj"))
    ids = torch.randint(0, 40, (1, 6), generator=torch.Generator().manual_seed(6))
    model(ids).float().logsumexp(-1).sum().backward()
    assert all(p.grad is not None for p in params[0::2]) and all(p.dtype == torch.float32 for p in params)
    with torch.no_grad():
        for p in params[1::2]:
            p.normal_(0, 0.5)
        adapted = model(ids).float()
        merge_lora(model)
        merged = model(ids).float()
    assert model.transformer.blocks[0].q_proj.weight.dtype == torch.bfloat16
    assert (merged - adapted).abs().max() < 0.05 * adapted.abs().max()  # bf16 rounding only


def test_gradient_checkpointing_gives_the_same_gradients(ckpt):
    path, _ = ckpt
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(7))
    grads = []
    for gc in (False, True):
        model = LLaDA.from_pretrained(path)
        model.gradient_checkpointing = gc
        model(ids).logsumexp(-1).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(grads[0], grads[1])


def test_tiny_model_dir_is_official_layout_and_tokenizer_is_llada_like(tmp_path):
    path = make_tiny(tmp_path / "tiny", n_layers=1, max_shard_bytes=200_000)
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["architectures"] == ["LLaDAModelLM"] and cfg["block_type"] == "llama"
    index = json.loads((path / "model.safetensors.index.json").read_text())
    assert all(k.startswith("model.transformer.") for k in index["weight_map"])
    assert len(set(index["weight_map"].values())) > 1
    model, tok = LLaDA.from_pretrained(path), load_tokenizer(path)
    ids = special_ids(tok, model.config)
    assert len({ids.mask, ids.eos, ids.eot, ids.bos}) == 4 and ids.pad == ids.eos
    assert tok.convert_ids_to_tokens(ids.eos) == EOS_TOKEN
    text = "Numbers: [3, 7]\nTarget: 10 ünïcode"
    assert tok.decode(tok(text, add_special_tokens=False).input_ids) == text  # byte-level round trip
    assert tok("A", add_special_tokens=False).input_ids == [ord("A")]  # no BOS added automatically
    rendered = tok.apply_chat_template([{"role": "user", "content": "\nhi "}], add_generation_prompt=True,
                                       tokenize=False)
    assert rendered == ("<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n")  # llada.md §4, content trimmed
    assert tok.chat_template == CHAT_TEMPLATE
    batch = tok(["ab", "abcd"], padding=True, add_special_tokens=False).input_ids
    assert batch[0][:2] == [ids.eos, ids.eos]  # left padding with EOS, as LLaDA/d1 batch prompts


def test_save_with_adapters_merges_on_the_fly_and_keeps_training_state(tmp_path, ckpt):
    path, _ = ckpt
    model = LLaDA.from_pretrained(path).eval()
    add_lora(model, r=4, alpha=8, dropout=0.0)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, LoRALinear):
                m.lora_B.normal_(0, 0.5)
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        adapted = model(ids)
    model.save_pretrained(tmp_path / "merged")
    assert isinstance(model.transformer.blocks[0].q_proj, LoRALinear)  # the model is untouched
    index = json.loads((tmp_path / "merged" / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(official_keys(SMALL))  # no lora / base keys leak out
    with torch.no_grad():
        torch.testing.assert_close(LLaDA.from_pretrained(tmp_path / "merged")(ids), adapted, atol=1e-4, rtol=1e-4)


def test_save_merged_puts_4bit_trained_adapters_on_the_original_weights(tmp_path, ckpt):
    from model import save_merged
    path, _ = ckpt
    q = LLaDA.from_pretrained(path, load_in_4bit=True)
    add_lora(q, r=4, alpha=8, dropout=0.0, targets=("q_proj", "up_proj"))
    with torch.no_grad():
        for n, p in q.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    save_merged(q, path, tmp_path / "merged")
    # expected: the full-precision base with the very same adapters
    full = LLaDA.from_pretrained(path)
    add_lora(full, r=4, alpha=8, dropout=0.0, targets=("q_proj", "up_proj"))
    full.load_state_dict(lora_state_dict(q), strict=False)
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        torch.testing.assert_close(LLaDA.from_pretrained(tmp_path / "merged")(ids), full(ids), atol=1e-4, rtol=1e-4)
