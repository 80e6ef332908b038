"""
Tests for sft.py: the noising (prompt never masked, rate p), the loss against a hand computation,
the sequence layout, and the DDP equivalence of 2 gloo processes with 1 process.

Run: python -m pytest tests/test_sft.py -q
"""
import sys

import pytest
import torch

from conftest import REPO, run, torchrun
from modelio.checkpoint import from_pretrained, make_tiny
from modelio.tokenizer import load_tokenizer
from ops.metrics import read_metrics
from sft import SFT_EPS, get_lr, sft_loss, sft_noise
from taskdata.data import encode_example

MASK = 99


def test_noise_never_masks_the_prompt_and_masks_answers_at_rate_p():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 50, (2000, 30), generator=g)
    plen = torch.randint(1, 20, (2000,), generator=g)
    t = torch.rand(2000, generator=g)
    noisy, masked, p = sft_noise(x, plen, MASK, g, t=t)
    is_prompt = torch.arange(30)[None] < plen[:, None]
    assert not masked[is_prompt].any() and torch.equal(noisy[is_prompt], x[is_prompt])
    assert torch.equal(noisy[masked], torch.full_like(noisy[masked], MASK))
    assert torch.equal(noisy[~masked], x[~masked])
    torch.testing.assert_close(p, (1 - SFT_EPS) * t + SFT_EPS)
    # empirical masking rate of answer tokens against p, pooled over rows in 5 bins of p
    for lo in torch.arange(0, 1, 0.2):
        rows = (p >= lo) & (p < lo + 0.2)
        frac = masked[rows][~is_prompt[rows]].float().mean()
        expected = (p[rows][:, None].expand(-1, 30)[~is_prompt[rows]]).mean()
        assert abs(frac - expected) < 0.02
    # same generator seed, same noise
    a = sft_noise(x[:4], plen[:4], MASK, torch.Generator().manual_seed(5))
    b = sft_noise(x[:4], plen[:4], MASK, torch.Generator().manual_seed(5))
    assert torch.equal(a[0], b[0]) and torch.equal(a[2], b[2])


def test_sft_loss_matches_hand_computation():
    g = torch.Generator().manual_seed(1)
    B, L, V = 3, 8, 11
    x = torch.randint(0, V, (B, L), generator=g)
    plen = torch.tensor([2, 5, 3])
    masked = torch.rand(B, L, generator=g) < 0.6
    masked &= torch.arange(L)[None] >= plen[:, None]
    p = torch.tensor([0.3, 0.9, 0.55])
    logits = torch.randn(B, L, V, generator=g)
    num = 0.0
    for b in range(B):
        for i in range(L):
            if masked[b, i]:
                logz = torch.logsumexp(logits[b, i], 0)
                num += float(logz - logits[b, i, x[b, i]]) / float(p[b])
    n_answer = sum(L - int(k) for k in plen)  # answer positions, pads included
    assert abs(sft_loss(logits, x, masked, p, plen).item() - num / n_answer) < 1e-5


def test_encode_example_layout(tmp_path):
    tok = load_tokenizer(make_tiny(tmp_path / "t", n_layers=1, d_model=32, n_heads=4, n_kv_heads=4,
                                   mlp_hidden_size=64))
    eot, eos = tok.convert_tokens_to_ids("<|eot_id|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    ids, plen, left_out = encode_example(tok, {"prompt": "hi", "completion": "12"}, 40, eot, eos)
    assert len(ids) == 40 and left_out == ""
    assert tok.decode(ids[:plen]).endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert ids[plen:plen + 4] == [ord("1"), ord("2"), eot, eos] and set(ids[plen + 3:]) == {eos}
    long = {"prompt": "hi", "completion": "1234567890"}
    # too long: one line naming the lengths, never a silent cut; with cut=True (d1's s1K) the answer is cut
    with pytest.raises(ValueError, match=rf"completion does not fit --max-length {plen + 4}: prompt {plen} \+ "
                                         rf"completion 10 = {plen + 10} tokens, \+ 1 with its end of turn"):
        encode_example(tok, long, plen + 4, eot, eos)
    cut, _, left_out = encode_example(tok, long, plen + 4, eot, eos, cut=True)
    assert cut[plen:] == [ord(c) for c in "1234"] and left_out == "cut"  # never the prompt
    # a completion that fills the canvas exactly leaves out only the end-of-turn token (the Sudoku toy)
    exact, _, left_out = encode_example(tok, long, plen + 10, eot, eos)
    assert exact[plen:] == [ord(c) for c in "1234567890"] and left_out == "eot"
    with pytest.raises(ValueError, match="a prompt does not fit --max-length 5"):
        encode_example(tok, long, 5, eot, eos, cut=True)


def test_lr_schedule():
    assert get_lr(0, 100, 1.0, 10) == 0.1 and get_lr(9, 100, 1.0, 10) == 1.0
    assert abs(get_lr(55, 100, 1.0, 10) - 0.5) < 1e-9 and get_lr(100, 100, 1.0, 10) == 0.0


def test_ddp_two_processes_equal_one_process(tmp_path):
    model_dir = make_tiny(tmp_path / "tiny", d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)
    common = ["--model-dir", str(model_dir), "--num-examples", "40", "--max-steps", "3", "--batch-size", "4",
              "--grad-accum", "2", "--max-length", "52", "--cut-labels", "--eval-every", "100", "--eval-fraction", "0.1",
              "--lr", "1e-2", "--lora-r", "4", "--lora-alpha", "8", "--lora-dropout", "0"]
    run([sys.executable, str(REPO / "sft.py"), *common, "--out-dir", str(tmp_path / "one")], REPO)
    run(torchrun(2) + [str(REPO / "sft.py"), *common, "--out-dir", str(tmp_path / "two")], REPO)
    start, one, two = (from_pretrained(p).state_dict() for p in (model_dir, tmp_path / "one", tmp_path / "two"))
    assert max((one[k] - start[k]).abs().max().item() for k in one) > 1e-3  # it trained
    for k in one:
        torch.testing.assert_close(one[k], two[k], atol=1e-5, rtol=1e-4)
    # metrics.jsonl: one line per step, the same losses on 1 and 2 processes, eval loss at the last step only
    m1, m2 = (read_metrics(str(tmp_path / p)) for p in ("one", "two"))
    assert [r["step"] for r in m1] == [r["step"] for r in m2] == [1, 2, 3]
    assert all(abs(a["loss"] - b["loss"]) < 1e-4 and a["tokens"] == 2 * 4 * 52 for a, b in zip(m1, m2))
    assert ["eval_loss" in r for r in m1] == [False, False, True] and m1[0]["grad_norm"] > 0
