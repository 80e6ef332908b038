"""
Tests for tokenizer.py: the tiny model directory make_tiny writes is the official layout, and its
byte-level tokenizer behaves like LLaDA's (special ids, byte round trip, no automatic BOS, the
chat template, left padding with EOS).

Run: python -m pytest tests/test_tokenizer.py -q
"""
import json

from modelio.checkpoint import from_pretrained, make_tiny
from modelio.tokenizer import CHAT_TEMPLATE, EOS_TOKEN, load_tokenizer, special_ids


def test_tiny_model_dir_is_official_layout_and_tokenizer_is_llada_like(tmp_path):
    path = make_tiny(tmp_path / "tiny", n_layers=1, max_shard_bytes=200_000)
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["architectures"] == ["LLaDAModelLM"] and cfg["block_type"] == "llama"
    index = json.loads((path / "model.safetensors.index.json").read_text())
    assert all(k.startswith("model.transformer.") for k in index["weight_map"])
    assert len(set(index["weight_map"].values())) > 1
    model, tok = from_pretrained(path), load_tokenizer(path)
    ids = special_ids(tok, model.config)
    assert len({ids.mask, ids.eos, ids.eot, ids.bos}) == 4 and ids.pad == ids.eos
    assert tok.convert_ids_to_tokens(ids.eos) == EOS_TOKEN
    text = "Numbers: [3, 7]\nTarget: 10 ünïcode"
    assert tok.decode(tok(text, add_special_tokens=False).input_ids) == text  # byte-level round trip
    assert tok("A", add_special_tokens=False).input_ids == [ord("A")]  # no BOS added automatically
    rendered = tok.apply_chat_template([{"role": "user", "content": "\nhi "}], add_generation_prompt=True,
                                       tokenize=False)
    assert rendered == ("<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n")  # docs/llada.md §4, content trimmed
    assert tok.chat_template == CHAT_TEMPLATE
    batch = tok(["ab", "abcd"], padding=True, add_special_tokens=False).input_ids
    assert batch[0][:2] == [ids.eos, ids.eos]  # left padding with EOS, as LLaDA/d1 batch prompts
