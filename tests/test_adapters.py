"""
Tests for adapters.py: NF4 4-bit loading against the dequantized weights, LoRA (zero init, the
disabled reference policy, merging), and LoRA trained on a 4-bit base.

Run: python -m pytest tests/test_adapters.py -q
"""
import torch

from conftest import SMALL, official_keys
from modelio.adapters import LoRALinear, add_lora, lora_disabled, lora_state_dict, merge_lora
from modelio.checkpoint import from_pretrained
from model import BLOCK_LINEARS


def test_4bit_loading_runs_and_matches_dequantized_weights(ckpt):
    import bitsandbytes.functional as bnbF
    path, _ = ckpt
    q = from_pretrained(path, load_in_4bit=True).eval()
    layer = q.transformer.blocks[0].q_proj
    assert type(layer).__name__ == "Linear4bit" and layer.weight.quant_state.quant_type == "nf4"
    assert q.transformer.ff_out.weight.dtype == torch.bfloat16  # LM head stays unquantized
    # the same model with each 4-bit weight replaced by its dequantized bf16 value
    dense = from_pretrained(path, dtype=torch.bfloat16).eval()
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
    model = from_pretrained(path).eval()
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
    # LoRA's init and the B draws below come from the global RNG: seeded here, or the result depended on
    # the tests that ran before (the merged error went from 2 % to 5.8 % of the output, past the bound)
    torch.manual_seed(0)
    model = from_pretrained(path, load_in_4bit=True)
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
