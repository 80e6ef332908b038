"""
Tests for model.py: the forward against a plain step-by-step computation on a checkpoint written
independently in the official layout (tests/conftest.py), GQA, the key-padding mask, config
validation, the 8B parameter count, RMSNorm's casts, gradient checkpointing.

Run: python -m pytest tests/test_model.py -q
"""
import math

import pytest
import torch

from conftest import SMALL, write_checkpoint
from modelio.checkpoint import from_pretrained
from model import LLaDA, LLaDAConfig, RMSNorm


def reference_forward(sd, cfg, ids, mask=None):
    """LLaDA's forward written out step by step in float64 with explicit loops over heads and an
    explicit rotation per (position, frequency) pair, following docs/llada.md §1 and §3."""
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


def test_sharded_checkpoint_matches_reference_forward(ckpt):
    path, sd = ckpt
    model = from_pretrained(path).eval()
    assert model.config.extra["init_fn"] == "mitchell"  # unknown keys are carried, not dropped
    ids = torch.randint(0, 40, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = model(ids).double()
    ref = reference_forward(sd, SMALL, ids)
    assert ours.shape == (2, 7, 40)
    torch.testing.assert_close(ours, ref, atol=2e-4, rtol=1e-4)


def test_key_padding_mask_matches_reference_and_hides_pads(ckpt):
    path, sd = ckpt
    model = from_pretrained(path).eval()
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
    model = from_pretrained(tmp_path).eval()
    ids = torch.randint(0, 40, (1, 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).double(), reference_forward(sd, cfg, ids), atol=2e-4, rtol=1e-4)


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


def test_llada_8b_config_is_accepted_and_has_8b_params():
    cfg = LLaDAConfig()  # the defaults are LLaDA-8B's config.json values
    with torch.device("meta"):
        n = LLaDA(cfg).num_params()
    assert n == 8_015_581_184  # docs/llada.md §1: computed from the checkpoint shapes


def test_rmsnorm_casts_back_before_the_weight_multiply():
    norm = RMSNorm(8, 1e-5).to(torch.bfloat16)
    norm.weight.data = torch.linspace(0.5, 2, 8).to(torch.bfloat16)
    x = torch.randn(3, 8).to(torch.bfloat16)
    x32 = x.float()
    expected = (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(torch.bfloat16) * norm.weight
    assert torch.equal(norm(x), expected)


def test_gradient_checkpointing_gives_the_same_gradients(ckpt):
    path, _ = ckpt
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(7))
    grads = []
    for gc in (False, True):
        model = from_pretrained(path)
        model.gradient_checkpointing = gc
        model(ids).logsumexp(-1).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(grads[0], grads[1])


def test_logits_at_reads_the_same_columns_as_the_full_forward(ckpt):
    # only the requested columns of each row go through the final norm and the head (JustGRPO reads one per row)
    path, _ = ckpt
    model = from_pretrained(path).eval()
    x = torch.randint(0, 38, (3, 9), generator=torch.Generator().manual_seed(4))
    cols = torch.tensor([[0, 8], [4, 4], [7, 2]])  # (B, K), any order, repeats allowed
    with torch.no_grad():
        full = model(x)  # (3, 9, V)
        some = model(x, logits_at=cols)  # (3, 2, V)
    assert some.shape == (3, 2, full.shape[-1])
    assert torch.allclose(some, full.gather(1, cols[..., None].expand(-1, -1, full.shape[-1])), atol=1e-6)
