"""
Tests for sample.py, the semi-autoregressive masked-diffusion sampler. CPU only, tiny random model.

    python -m pytest tests/test_sample.py -q

The main check is token-for-token equality (greedy) with a deliberately naive re-implementation of
LLaDA's reference sampler written below with Python loops, following docs llada.md Sec. 5 literally
(full-sequence confidence, -inf right of the block and on unmasked positions, a sort per row).
The rest are invariants: the prompt never changes, blocks finish left to right, each step writes
exactly the scheduled number of tokens, seeds reproduce, bad arguments raise.
"""
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from model import LLaDA, LLaDAConfig  # noqa: E402
from sample import generate, num_transfer_tokens, sample_tokens, select_top_k  # noqa: E402

V, MASK, EOS = 64, 63, 62  # tiny vocab; the ids only live here, the sampler reads model.config

# -----------------------------------------------------------------------------
# fixtures and helpers


@pytest.fixture(scope="module")
def model():
    # init_std 0.1: peaked enough that argmax is not a coin flip, flat enough that fp32
    # confidences do not saturate at 1.0 (saturation would create ties and make top-k ambiguous)
    cfg = LLaDAConfig(d_model=32, n_heads=4, n_kv_heads=4, n_layers=2, mlp_hidden_size=64,
                      vocab_size=V, embedding_size=V, mask_token_id=MASK, eos_token_id=EOS,
                      max_sequence_length=256, init_std=0.1)
    torch.manual_seed(0)
    return LLaDA(cfg).eval()


class Recorder(nn.Module):
    """Wraps a model and stores every input (and attention mask) it is called with."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config = model, model.config
        self.inputs, self.masks, self.grad_enabled = [], [], []

    def forward(self, input_ids, attention_mask=None):
        self.inputs.append(input_ids.clone())
        self.masks.append(None if attention_mask is None else attention_mask.clone())
        self.grad_enabled.append(torch.is_grad_enabled())
        return self.model(input_ids, attention_mask=attention_mask)


def make_prompt(B=2, P=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, EOS, (B, P), generator=g)  # ids below EOS: no mask, no eos


def left_padded_batch(lengths=(3, 7, 5), seed=0):
    """Prompts of different lengths, left-padded with EOS (as LLaDA/d1 do) + their 1/0 mask."""
    g = torch.Generator().manual_seed(seed)
    P = max(lengths)
    prompt = torch.full((len(lengths), P), EOS, dtype=torch.long)
    attention_mask = torch.zeros((len(lengths), P), dtype=torch.long)
    for j, n in enumerate(lengths):
        prompt[j, P - n:] = torch.randint(0, EOS, (n,), generator=g)
        attention_mask[j, P - n:] = 1
    return prompt, attention_mask


@torch.no_grad()
def reference_generate(model, prompt, attention_mask, gen_length, block_length, steps, cfg_scale=0.0):
    """Greedy LLaDA sampler, llada.md Sec. 5 step by step, loops instead of vectorisation.
    One addition that sample.py also makes: the mask token is excluded from the argmax."""
    B, P = prompt.shape
    L = P + gen_length
    x = torch.full((B, L), MASK, dtype=torch.long)
    x[:, :P] = prompt
    prompt_index = x != MASK
    am = None
    if attention_mask is not None:
        am = torch.cat([attention_mask, torch.ones(B, gen_length, dtype=attention_mask.dtype)], 1)
    num_blocks = gen_length // block_length
    spb = steps // num_blocks
    for b in range(num_blocks):
        block_end = P + (b + 1) * block_length
        schedule = []
        for j in range(B):
            m = int((x[j, P + b * block_length:block_end] == MASK).sum())
            schedule.append([m // spb + (1 if i < m % spb else 0) for i in range(spb)])
        for i in range(spb):
            mask_index = x == MASK
            if cfg_scale > 0:
                un_x = x.clone()
                un_x[prompt_index] = MASK
                am2 = None if am is None else torch.cat([am, am])
                both = model(torch.cat([x, un_x]), attention_mask=am2).float()
                logits = both[B:] + (cfg_scale + 1) * (both[:B] - both[B:])
            else:
                logits = model(x, attention_mask=am).float()
            choice = logits.clone()
            choice[..., MASK] = float("-inf")
            x0 = choice.argmax(-1)
            conf = F.softmax(logits, dim=-1).gather(-1, x0[..., None]).squeeze(-1)
            conf[:, block_end:] = float("-inf")
            x0 = torch.where(mask_index, x0, x)
            conf = torch.where(mask_index, conf, torch.tensor(float("-inf")))
            for j in range(B):
                k = schedule[j][i]
                order = sorted(range(L), key=lambda t: -conf[j, t].item())
                vals = [conf[j, t].item() for t in order]
                # honesty guard: an exact tie at the cut would make the expected output ambiguous
                assert k == 0 or k == L or vals[k - 1] != vals[k], "tie at top-k boundary; change the seed"
                for t in order[:k]:
                    x[j, t] = x0[j, t]
    return x


def canvases(rec, out):
    """The canvas before every forward plus the final output: len = steps + 1."""
    return [t[: out.shape[0]] for t in rec.inputs] + [out]

# -----------------------------------------------------------------------------
# equality with the reference


# includes steps_per_block not dividing block_length (8 over 3, 8 over 6) and one token per step
@pytest.mark.parametrize("gen_length,block_length,steps",
                         [(16, 16, 16), (16, 8, 4), (24, 8, 12), (16, 4, 8), (16, 8, 6), (8, 8, 3)])
def test_matches_reference_greedy(model, gen_length, block_length, steps):
    prompt = make_prompt(B=2, P=5)
    out = generate(model, prompt, gen_length=gen_length, block_length=block_length, steps=steps)
    ref = reference_generate(model, prompt, None, gen_length, block_length, steps)
    assert out.shape == (2, 5 + gen_length) and out.dtype == torch.long
    assert torch.equal(out, ref)


@pytest.mark.parametrize("use_mask", [False, True])
def test_matches_reference_left_padded(model, use_mask):
    prompt, am = left_padded_batch()
    am = am if use_mask else None
    out = generate(model, prompt, attention_mask=am, gen_length=16, block_length=8, steps=6)
    ref = reference_generate(model, prompt, am, 16, 8, 6)
    assert torch.equal(out, ref)


def test_attention_mask_extended_and_passed(model):
    prompt, am = left_padded_batch()
    rec = Recorder(model)
    generate(rec, prompt, attention_mask=am, gen_length=8, block_length=4, steps=4)
    assert len(rec.masks) == 4
    for m in rec.masks:
        assert torch.equal(m[:, :prompt.shape[1]], am) and bool((m[:, prompt.shape[1]:] == 1).all())
    # and the mask actually matters for a model that honours it: pads are not attended
    no_mask = generate(model, prompt, gen_length=8, block_length=4, steps=4)
    with_mask = generate(model, prompt, attention_mask=am, gen_length=8, block_length=4, steps=4)
    assert not torch.equal(no_mask, with_mask)


def test_cfg_matches_reference_and_doubles_batch(model):
    prompt = make_prompt(B=2, P=5)
    rec = Recorder(model)
    out = generate(rec, prompt, gen_length=8, block_length=4, steps=4, cfg_scale=1.5)
    assert torch.equal(out, reference_generate(model, prompt, None, 8, 4, 4, cfg_scale=1.5))
    for inp in rec.inputs:
        assert inp.shape == (4, 13)  # [cond; uncond]
        cond, uncond = inp[:2], inp[2:]
        assert bool((uncond[:, :5] == MASK).all())           # prompt fully masked
        assert torch.equal(uncond[:, 5:], cond[:, 5:])       # generated part identical
        assert torch.equal(cond[:, :5], prompt)
    # guidance changes the result relative to plain sampling
    assert not torch.equal(out, generate(model, prompt, gen_length=8, block_length=4, steps=4))

# -----------------------------------------------------------------------------
# invariants of the schedule


@pytest.mark.parametrize("remasking,temperature",
                         [("low_confidence", 0.0), ("random", 0.0), ("low_confidence", 1.0)])
def test_schedule_invariants(model, remasking, temperature):
    P, G, K, S = 4, 24, 8, 9  # 3 blocks x 3 steps, 8 tokens over 3 steps -> 3, 3, 2
    prompt = make_prompt(B=3, P=P)
    rec = Recorder(model)
    out = generate(rec, prompt, gen_length=G, block_length=K, steps=S, temperature=temperature,
                   remasking=remasking, generator=torch.Generator().manual_seed(0))
    cs = canvases(rec, out)
    assert len(rec.inputs) == S and not any(rec.grad_enabled)
    assert torch.equal(out[:, :P], prompt)                   # prompt unchanged
    assert not bool((out == MASK).any())                     # nothing left masked
    spb = S // (G // K)
    for n in range(S):
        b, i = divmod(n, spb)
        start, end = P + b * K, P + (b + 1) * K
        before, after = cs[n], cs[n + 1]
        if i == 0:  # a block starts only once everything left of it is written
            assert not bool((before[:, :start] == MASK).any())
            assert bool((before[:, start:] == MASK).all())
        changed = before != after
        assert changed.sum(1).tolist() == [[3, 3, 2][i]] * 3  # exactly the scheduled count per row
        assert not bool(changed[:, :start].any()) and not bool(changed[:, end:].any())
        assert bool((before[changed] == MASK).all())           # only blanks get written
        assert not bool((after[changed] == MASK).any())        # ... with real tokens, never re-masked


def test_mask_id_from_config_and_explicit_agree(model):
    prompt = make_prompt()
    a = generate(model, prompt, gen_length=8, block_length=8, steps=4)
    b = generate(model, prompt, gen_length=8, block_length=8, steps=4, mask_id=MASK)
    assert torch.equal(a, b)


def test_keeps_train_mode_and_greedy_is_deterministic(model):
    prompt = make_prompt()
    model.train()
    try:
        a = generate(model, prompt, gen_length=8, block_length=4, steps=4)
        assert model.training
    finally:
        model.eval()
    b = generate(model, prompt, gen_length=8, block_length=4, steps=4)
    c = generate(model, prompt, gen_length=8, block_length=4, steps=4)
    assert torch.equal(b, c)
    assert torch.equal(a, b)  # the tiny model has no dropout, so train mode gives the same tokens


@pytest.mark.parametrize("kw", [dict(remasking="random"), dict(temperature=1.0),
                                dict(temperature=0.7, remasking="random")])
def test_seeded_sampling_reproducible(model, kw):
    prompt = make_prompt(B=2, P=5)
    run = lambda seed: generate(model, prompt, gen_length=16, block_length=8, steps=8,
                                generator=torch.Generator().manual_seed(seed), **kw)
    assert torch.equal(run(0), run(0))
    assert not torch.equal(run(0), run(1))

# -----------------------------------------------------------------------------
# the pure helpers


def test_num_transfer_tokens_table():
    got = num_transfer_tokens(torch.tensor([10, 8, 3, 0, 4]), 4)
    want = [[3, 3, 2, 2], [2, 2, 2, 2], [1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]]
    assert got.tolist() == want
    assert num_transfer_tokens(torch.tensor([7]), 1).tolist() == [[7]]


def test_select_top_k_per_row():
    conf = torch.tensor([[0.1, 0.9, float("-inf"), 0.5], [0.3, 0.2, 0.8, 0.1]])
    got = select_top_k(conf, torch.tensor([2, 1]))
    assert got.tolist() == [[False, True, False, True], [False, False, True, False]]


def test_gumbel_sampling_matches_softmax():
    # 40k independent positions sharing one logit vector: empirical frequencies ~ softmax(logits / T)
    logits = torch.tensor([1.0, 0.0, -1.0, 2.0])
    for T in (1.0, 0.5):
        x = sample_tokens(logits.expand(1, 40000, 4), T, torch.Generator().manual_seed(0))
        freq = torch.bincount(x.flatten(), minlength=4).double() / x.numel()
        assert torch.allclose(freq, F.softmax(logits.double() / T, -1), atol=0.01)
    assert sample_tokens(logits.expand(1, 3, 4), 0.0).tolist() == [[3, 3, 3]]

# -----------------------------------------------------------------------------
# argument errors


@pytest.mark.parametrize("kw,match", [
    (dict(gen_length=10, block_length=4, steps=4), "multiple of block_length"),
    (dict(gen_length=16, block_length=8, steps=3), "multiple of the number of blocks"),
    (dict(gen_length=16, block_length=4, steps=2), "at least one step"),
    (dict(gen_length=16, block_length=8, steps=0), "steps"),
    (dict(gen_length=0, block_length=8, steps=4), "positive"),
    (dict(gen_length=8, block_length=8, steps=4, remasking="lowest"), "remasking"),
    (dict(gen_length=8, block_length=8, steps=4, temperature=-1.0), "temperature"),
])
def test_bad_arguments_raise(model, kw, match):
    with pytest.raises(ValueError, match=match):
        generate(model, make_prompt(), **kw)


def test_prompt_with_mask_raises(model):
    prompt = make_prompt()
    prompt[0, 2] = MASK
    with pytest.raises(ValueError, match="mask token"):
        generate(model, prompt, gen_length=8, block_length=8, steps=4)


def test_mask_token_is_never_written(model):
    # a model that loves the mask token: it would be every position's argmax. LLaDA's code would
    # "write" it and leave blanks behind; ours must pick the best real token instead.
    class MaskLover(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner, self.config = inner, inner.config

        def forward(self, input_ids, attention_mask=None):
            logits = self.inner(input_ids, attention_mask=attention_mask).clone()
            logits[..., MASK] += 10.0
            return logits

    lover, prompt = MaskLover(model), make_prompt()
    assert bool((lover(prompt).argmax(-1) == MASK).all())
    out = generate(lover, prompt, gen_length=16, block_length=8, steps=8, temperature=0.5,
                   generator=torch.Generator().manual_seed(0))
    assert not bool((out == MASK).any())


def test_cli_runs_on_tiny_model(tmp_path, monkeypatch, capsys):
    # run sample.py's __main__ in this process (a subprocess would spend seconds re-importing torch)
    import runpy
    from model import make_tiny
    model_dir = str(make_tiny(tmp_path / "tiny", d_model=32, n_heads=4, n_kv_heads=4, n_layers=1,
                              mlp_hidden_size=64))
    script = os.path.join(os.path.dirname(__file__), "..", "sample.py")
    monkeypatch.setattr(sys, "argv", ["sample.py", "--model-dir", model_dir, "--prompt", "Hi",
                                      "--gen-length", "16", "--block-length", "8", "--steps", "8",
                                      "--temperature", "0.5"])
    runpy.run_path(script, run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    assert "'gen_length': 16" in out[0] and len(out) >= 2  # resolved config, then the completion
