"""
Tests for checkpoint.py: strict loading names every problem, save -> load is bit-exact with the
official keys and shards, LoRA adapters are merged on the fly when saving, and save_merged puts
adapters trained on a 4-bit base onto the original weights. The checkpoint these read is written
independently of checkpoint.py (write_checkpoint in tests/conftest.py).

Run: python -m pytest tests/test_checkpoint.py -q
"""
import json

import pytest
import torch

from conftest import SMALL, official_keys, write_checkpoint
from lib.adapters import LoRALinear, add_lora, lora_state_dict
from lib.checkpoint import from_pretrained, save_merged, save_pretrained


@pytest.mark.parametrize("corruption, needle", [
    (dict(drop="model.transformer.blocks.1.up_proj.weight"), "missing keys (1): model.transformer.blocks.1.up_proj"),
    (dict(add="model.transformer.blocks.0.q_proj.bias"), "unexpected keys (1): model.transformer.blocks.0.q_proj.bias"),
    (dict(reshape="model.transformer.ln_f.weight"), "model.transformer.ln_f.weight: checkpoint (2, 2) vs model (32,)"),
])
def test_strict_loading_names_the_problem(tmp_path, corruption, needle):
    write_checkpoint(tmp_path, SMALL, **corruption)
    with pytest.raises(ValueError) as e:
        from_pretrained(tmp_path)
    assert needle in str(e.value)


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        from_pretrained(tmp_path)


def test_save_load_is_bit_exact_with_official_keys(tmp_path, ckpt):
    path, _ = ckpt
    model = from_pretrained(path, dtype=torch.bfloat16)
    save_pretrained(model, tmp_path / "out", max_shard_bytes=6000)  # force several shards
    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(official_keys(SMALL))
    assert len(set(index["weight_map"].values())) > 2
    again = from_pretrained(tmp_path / "out")
    for (k1, a), (k2, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert k1 == k2 and a.dtype == b.dtype == torch.bfloat16 and torch.equal(a, b)
    # saving again with one shard replaces the old shards instead of leaving stale files
    save_pretrained(again, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").glob("*.safetensors")) == ["model-00001-of-00001.safetensors"]
    assert json.loads((tmp_path / "out" / "config.json").read_text())["init_fn"] == "mitchell"


def test_save_with_adapters_merges_on_the_fly_and_keeps_training_state(tmp_path, ckpt):
    path, _ = ckpt
    model = from_pretrained(path).eval()
    add_lora(model, r=4, alpha=8, dropout=0.0)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, LoRALinear):
                m.lora_B.normal_(0, 0.5)
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        adapted = model(ids)
    save_pretrained(model, tmp_path / "merged")
    assert isinstance(model.transformer.blocks[0].q_proj, LoRALinear)  # the model is untouched
    index = json.loads((tmp_path / "merged" / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(official_keys(SMALL))  # no lora / base keys leak out
    with torch.no_grad():
        torch.testing.assert_close(from_pretrained(tmp_path / "merged")(ids), adapted, atol=1e-4, rtol=1e-4)


def test_save_merged_puts_4bit_trained_adapters_on_the_original_weights(tmp_path, ckpt):
    path, _ = ckpt
    q = from_pretrained(path, load_in_4bit=True)
    add_lora(q, r=4, alpha=8, dropout=0.0, targets=("q_proj", "up_proj"))
    with torch.no_grad():
        for n, p in q.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    save_merged(q, path, tmp_path / "merged")
    # expected: the full-precision base with the very same adapters
    full = from_pretrained(path)
    add_lora(full, r=4, alpha=8, dropout=0.0, targets=("q_proj", "up_proj"))
    full.load_state_dict(lora_state_dict(q), strict=False)
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        torch.testing.assert_close(from_pretrained(tmp_path / "merged")(ids), full(ids), atol=1e-4, rtol=1e-4)


def test_tiny_ids_are_the_tiny_tokenizers(tmp_path):
    # model.TINY_IDS (random tiny models in tools/ and model.py's demo) must be what make_tiny reads off the tokenizer
    from lib.checkpoint import make_tiny
    from model import TINY_IDS
    config = from_pretrained(make_tiny(tmp_path / "tiny")).config
    assert {k: getattr(config, k) for k in TINY_IDS} == TINY_IDS
