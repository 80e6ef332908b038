"""
Tests for sample.py, the semi-autoregressive masked-diffusion sampler. CPU only, tiny random model.

    python -m pytest tests/test_sample.py -q

The main check is token-for-token equality (greedy) with a deliberately naive re-implementation of
LLaDA's reference sampler written below with Python loops, following docs/llada.md §5 literally
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
from methods import sampling  # noqa: E402
from sample import (check_generate_args, draw_device, generate, num_transfer_tokens, sample_tokens,  # noqa: E402
                    select_top_k, uniform)

V, MASK, EOS = 64, 63, 62  # tiny vocab; the ids only live here, the sampler reads model.config

# -----------------------------------------------------------------------------
# fixtures and helpers


def small_llada(n_kv_heads=4, seed=0):
    # init_std 0.1: peaked enough that argmax is not a coin flip, flat enough that fp32
    # confidences do not saturate at 1.0 (saturation would create ties and make top-k ambiguous)
    cfg = LLaDAConfig(d_model=32, n_heads=4, n_kv_heads=n_kv_heads, n_layers=2, mlp_hidden_size=64,
                      vocab_size=V, embedding_size=V, mask_token_id=MASK, eos_token_id=EOS,
                      max_sequence_length=256, init_std=0.1)
    torch.manual_seed(seed)
    return LLaDA(cfg).eval()


@pytest.fixture(scope="module")
def model():
    return small_llada()


class Recorder(nn.Module):
    """Wraps a model and stores every input (and attention mask) it is called with."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config = model, model.config
        self.inputs, self.masks, self.grad_enabled = [], [], []

    def forward(self, input_ids, attention_mask=None, **cache_kw):
        self.inputs.append(input_ids.clone())
        self.masks.append(None if attention_mask is None else attention_mask.clone())
        self.grad_enabled.append(torch.is_grad_enabled())
        return self.model(input_ids, attention_mask=attention_mask, **cache_kw)


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
    """Greedy LLaDA sampler, docs/llada.md §5 step by step, loops instead of vectorisation.
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


@pytest.mark.parametrize("kw", [dict(), dict(remasking="random", temperature=0.7), dict(temperature=1.0),
                                dict(gen_length=24, block_length=8, steps=12, temperature=0.9)])
@pytest.mark.parametrize("padded", [False, True])
def test_field_sampler_with_no_option_is_d1s_sampler(model, kw, padded):
    # methods/sampling.py builds on sample.py's pieces: with every option off, the same tokens under the same
    # noise, and the same forwards (checked on the inputs the model saw)
    prompt, am = left_padded_batch() if padded else (make_prompt(B=3, P=5), None)
    kw = {"gen_length": 16, "block_length": 8, "steps": 8, **kw}
    recs = [Recorder(model), Recorder(model)]
    ours = generate(recs[0], prompt, attention_mask=am, generator=torch.Generator().manual_seed(3), **kw)
    field = sampling.generate(recs[1], prompt, attention_mask=am, generator=torch.Generator().manual_seed(3), **kw)
    assert torch.equal(ours, field)
    assert all(torch.equal(a, b) for a, b in zip(recs[0].inputs, recs[1].inputs))


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


def test_noise_is_drawn_on_the_generators_own_device():
    # a CPU generator draws on the CPU whatever the model's device, so its numbers are the same on any device
    g = torch.Generator()
    assert draw_device(g, "cuda") == g.device == torch.device("cpu")
    assert draw_device(None, "cpu") == "cpu"
    u = uniform((3,), torch.Generator().manual_seed(4), "cpu")
    assert torch.equal(u, torch.rand(3, generator=torch.Generator().manual_seed(4)))


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
    (dict(gen_length=8, block_length=8, steps=4, remasking="entropy"), "remasking"),  # Dream's: the field's
])
def test_bad_arguments_raise(model, kw, match):
    with pytest.raises(ValueError, match=match):
        generate(model, make_prompt(), **kw)


@pytest.mark.parametrize("kw,match", [
    (dict(cache="full"), "cache"),
    (dict(threshold=0.9, remasking="random"), "threshold"),
    (dict(threshold=1.5), "threshold"),
    (dict(threshold=0.9, threshold_rule="peak"), "threshold_rule"),
    (dict(remasking="lowest"), "remasking"),
])
def test_field_options_that_do_not_combine_raise(model, kw, match):
    with pytest.raises(ValueError, match=match):
        sampling.generate(model, make_prompt(), gen_length=8, block_length=8, steps=4, **kw)


def test_arguments_are_checked_before_any_forward(model):
    # generate() checks everything in check_generate_args, once, at the top: a bad call never reaches
    # the model, and the good layout comes back as (num_blocks, steps_per_block)
    class NoForward(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config

        def forward(self, *a, **kw):
            raise AssertionError("the model was called before the arguments were checked")
    with pytest.raises(ValueError, match="attention_mask shape"):
        generate(NoForward(model.config), make_prompt(), attention_mask=torch.ones(1, 1, dtype=torch.long),
                 gen_length=8, block_length=8, steps=4)
    assert check_generate_args(make_prompt(), None, 16, 8, 4, 0.0, "low_confidence", MASK) == (2, 2)


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

    from modelio.checkpoint import make_tiny
    model_dir = str(make_tiny(tmp_path / "tiny", d_model=32, n_heads=4, n_kv_heads=4, n_layers=1,
                              mlp_hidden_size=64))
    script = os.path.join(os.path.dirname(__file__), "..", "sample.py")
    monkeypatch.setattr(sys, "argv", ["sample.py", "--model-dir", model_dir, "--prompt", "Hi",
                                      "--gen-length", "16", "--block-length", "8", "--steps", "8",
                                      "--temperature", "0.5"])
    runpy.run_path(script, run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    assert "'gen_length': 16" in out[0] and len(out) >= 2  # resolved config, then the completion

# -----------------------------------------------------------------------------
# the cached sampler (Fast-dLLM options): an independent layer-by-layer "stale keys" forward,
# a loop-by-loop cached sampler built on it, and the exactness/approximation boundaries


def stale_forward(model, x_old, x_new, s, e, attention_mask=None):
    """fp64 logits (B, e - s, V) of canvas columns [s, e) of x_new when, in every layer, the keys and
    values of the columns OUTSIDE [s, e) are those of a plain forward of x_old: what a cache made
    from x_old gives. Written out per layer and per head, with RoPE as complex rotations of the
    pairs (j, j + hd/2) - a different formulation from model.py's rotate-half."""
    cfg = model.config
    nh, nkv, hd = cfg.n_heads, cfg.kv_heads, cfg.head_dim
    sd = {k: v.double() for k, v in model.state_dict().items()}
    L = x_old.shape[1]
    angles = torch.arange(L, dtype=torch.float64)[:, None] * \
        cfg.rope_theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)  # (L, hd/2)
    rot = torch.polar(torch.ones_like(angles), angles)                       # (L, hd/2) complex

    def rope(t, cols):  # t (B, T, heads, hd) at canvas columns `cols`
        c = torch.complex(t[..., :hd // 2], t[..., hd // 2:]) * rot[cols][None, :, None, :]
        return torch.cat([c.real, c.imag], dim=-1)

    def rms(h, w):
        return h / torch.sqrt((h * h).mean(-1, keepdim=True) + cfg.rms_norm_eps) * w

    def attend(q, k, v):  # q (B, Tq, nh, hd), k/v (B, L, nkv, hd) -> (B, Tq, nh * hd)
        outs = []
        for head in range(nh):
            kvh = head // (nh // nkv)
            scores = q[:, :, head] @ k[:, :, kvh].transpose(1, 2) / hd ** 0.5  # (B, Tq, L)
            if attention_mask is not None:
                scores = scores.masked_fill(attention_mask[:, None, :] == 0, float("-inf"))
            outs.append(scores.softmax(-1) @ v[:, :, kvh])
        return torch.cat(outs, dim=-1)

    h_old = sd["transformer.wte.weight"][x_old]          # (B, L, C): a plain full forward
    h_win = sd["transformer.wte.weight"][x_new[:, s:e]]  # (B, T, C): the window
    B, T = h_win.shape[:2]
    for i in range(cfg.n_layers):
        w = {k.split(".")[-2]: v for k, v in sd.items() if f"blocks.{i}." in k}
        qkv = []
        for h, cols in ((h_old, torch.arange(L)), (h_win, torch.arange(s, e))):
            a = rms(h, w["attn_norm"])
            q = rope((a @ w["q_proj"].T).view(B, len(cols), nh, hd), cols)
            k = rope((a @ w["k_proj"].T).view(B, len(cols), nkv, hd), cols)
            qkv.append((q, k, (a @ w["v_proj"].T).view(B, len(cols), nkv, hd)))
        (q_o, k_o, v_o), (q_w, k_w, v_w) = qkv
        k_mix, v_mix = k_o.clone(), v_o.clone()
        k_mix[:, s:e], v_mix[:, s:e] = k_w, v_w  # fresh inside the window, stale outside
        new = []
        for h, y in ((h_old, attend(q_o, k_o, v_o)), (h_win, attend(q_w, k_mix, v_mix))):
            h = h + y @ w["attn_out"].T
            m = rms(h, w["ff_norm"])
            gate = m @ w["ff_proj"].T
            new.append(h + (F.silu(gate) * (m @ w["up_proj"].T)) @ w["ff_out"].T)
        h_old, h_win = new
    return rms(h_win, sd["transformer.ln_f.weight"]) @ sd["transformer.ff_out.weight"].T


@torch.no_grad()
def reference_cached_generate(model, prompt, gen_length, block_length, steps, cache, threshold=None):
    """Greedy sampler, loops. cache "prefix" / "dual": step 0 of a block is a plain forward, later
    steps see the window [block start, stop) fresh and every other column as it was at the block's
    start; cache "exact": every step sees the current canvas (stale_forward with x_old = x).
    threshold: write max(scheduled, #confidence >= threshold) tokens; stop the block when done."""
    B, P = prompt.shape
    x = torch.cat([prompt, torch.full((B, gen_length), MASK)], dim=1)
    spb = steps // (gen_length // block_length)
    for start in range(P, P + gen_length, block_length):
        end = start + block_length
        stop = x.shape[1] if cache == "prefix" else end
        x_start = x.clone()  # the canvas the block's cache is made from
        sched = [block_length // spb + (i < block_length % spb) for i in range(spb)]
        for i in range(spb):
            if not bool((x[:, start:end] == MASK).any()):
                break
            if cache == "exact":
                x_start = x.clone()
            logits = stale_forward(model, x_start, x, start, stop)[:, :block_length].float()
            probs = F.softmax(logits, dim=-1)  # confidence from the untouched logits
            logits[..., MASK] = float("-inf")  # the mask token is never chosen
            for j in range(B):
                blanks = [t for t in range(block_length) if x[j, start + t] == MASK]
                choice = {t: int(logits[j, t].argmax()) for t in blanks}
                conf = {t: probs[j, t, choice[t]].item() for t in blanks}
                k = sched[i]
                if threshold is not None:
                    k = max(k, sum(c >= threshold for c in conf.values()))
                for t in sorted(blanks, key=lambda t: -conf[t])[:k]:
                    x[j, start + t] = choice[t]
    return x


@pytest.fixture(scope="module")
def gqa_model():
    return small_llada(n_kv_heads=2, seed=1)  # grouped-query attention: 2 kv heads for 4 heads


@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize("which", ["model", "gqa_model"])
def test_window_forward_with_a_fresh_cache_equals_the_full_forward(which, use_mask, request):
    m = request.getfixturevalue(which)
    prompt, am = left_padded_batch()
    am = torch.cat([am, torch.ones(3, 12, dtype=am.dtype)], 1) if use_mask else None
    x = torch.cat([prompt, torch.randint(0, EOS, (3, 12), generator=torch.Generator().manual_seed(2))], 1)
    with torch.no_grad():
        full, kv = m(x, attention_mask=am, return_kv=True)  # (B, 19, V)
        for s, e in [(7, 11), (11, 19), (0, 19)]:  # a dual window, a prefix window, everything
            win = m(x[:, s:e], attention_mask=am, past_kv=kv, start=s)
            assert torch.allclose(win, full[:, s:e], atol=1e-5)
    assert len(kv) == m.config.n_layers and kv[0][0].shape == (3, m.config.kv_heads, 19, 8)


@pytest.mark.parametrize("which", ["model", "gqa_model"])
def test_window_forward_with_a_stale_cache_matches_the_layerwise_reference(which, request):
    m = request.getfixturevalue(which)
    g = torch.Generator().manual_seed(3)
    x_old = torch.cat([make_prompt(B=2, P=5), torch.full((2, 12), MASK)], 1)
    x_new = x_old.clone()
    x_new[:, 5:9] = torch.randint(0, EOS, (2, 4), generator=g)  # the block got written since
    with torch.no_grad():
        _, kv = m(x_old, return_kv=True)
        for s, e in [(5, 9), (5, 17)]:
            got = m(x_new[:, s:e], past_kv=kv, start=s).double()
            ref = stale_forward(m, x_old, x_new, s, e)
            assert torch.allclose(got, ref, atol=1e-5)
            # and it IS an approximation: a fresh full forward of x_new differs
            assert not torch.allclose(m(x_new)[:, s:e].double(), ref, atol=1e-3)


@pytest.mark.parametrize("cache,threshold", [("prefix", None), ("dual", None), ("dual", 0.05), (None, 0.05)])
def test_cached_sampler_matches_the_loop_reference(model, cache, threshold):
    prompt = make_prompt(B=2, P=5)
    out = sampling.generate(model, prompt, gen_length=16, block_length=8, steps=8, cache=cache, threshold=threshold)
    ref = reference_cached_generate(model, prompt, 16, 8, 8, cache or "exact", threshold)
    assert torch.equal(out, ref)


def test_reference_in_exact_mode_is_the_exact_sampler(model):
    # guards the reference itself: with x_old = x every step, stale_forward is a plain forward
    prompt = make_prompt(B=2, P=5)
    assert torch.equal(reference_cached_generate(model, prompt, 16, 8, 8, "exact"),
                       generate(model, prompt, gen_length=16, block_length=8, steps=8))


@pytest.mark.parametrize("cache", ["prefix", "dual"])
def test_one_step_per_block_makes_the_cache_exact(model, cache):
    # every step is then a block's refresh step: a full forward of the current canvas
    prompt, am = left_padded_batch()
    kw = dict(attention_mask=am, gen_length=24, block_length=8, steps=3)
    assert torch.equal(sampling.generate(model, prompt, cache=cache, **kw), generate(model, prompt, **kw))


@pytest.mark.parametrize("cache", ["prefix", "dual"])
def test_cached_steps_forward_only_the_window(model, cache):
    prompt = make_prompt(B=2, P=5)
    rec = Recorder(model)
    sampling.generate(rec, prompt, gen_length=24, block_length=8, steps=12, cache=cache)
    widths = [t.shape[1] for t in rec.inputs]
    window = lambda b: 8 if cache == "dual" else 24 - 8 * b  # block, or block + masked suffix
    assert widths == [w for b in range(3) for w in [29] + [window(b)] * 3]


def test_threshold_writes_at_least_the_schedule_and_saves_passes(model):
    prompt = make_prompt(B=3, P=4)
    rec, stats = Recorder(model), {}
    out = sampling.generate(rec, prompt, gen_length=24, block_length=8, steps=24, threshold=0.05, stats=stats)
    cs = canvases(rec, out)
    assert len(rec.inputs) < 24 and not bool((out == MASK).any())  # fewer passes, all filled
    assert stats["model_calls"] == len(rec.inputs)  # what grpo.py logs as rollout_calls
    for before, after in zip(cs, cs[1:]):
        assert bool(((before == MASK) & (after != MASK)).any())  # every pass writes something
        assert bool((after[before != MASK] == before[before != MASK]).all())  # never re-masked
    # a threshold this model never reaches (its confidences stay well below 1) changes nothing
    same = sampling.generate(model, prompt, gen_length=24, block_length=8, steps=24, threshold=1.0)
    assert torch.equal(same, generate(model, prompt, gen_length=24, block_length=8, steps=24))


# -----------------------------------------------------------------------------
# which blanks a threshold writes when sampling (T > 0): Fast-dLLM's rule against ours, by exact enumeration


class FixedLogits(nn.Module):
    """A 'model' whose every position predicts the same distribution, whatever the canvas: position j of
    the completion has p(token 0) = p0[j], p(token 1) = 1 - p0[j]; token 2 is the mask (never chosen)."""

    def __init__(self, p0):
        super().__init__()
        self.config = LLaDAConfig(vocab_size=3, embedding_size=3, mask_token_id=2, eos_token_id=1, pad_token_id=1)
        self.p0 = torch.tensor(p0, dtype=torch.float64)

    def forward(self, x, attention_mask=None):
        B, L = x.shape
        n = len(self.p0)
        logits = torch.full((B, L, 3), -30.0, dtype=torch.float64)  # prompt columns: anything
        logits[:, L - n:, 0], logits[:, L - n:, 1] = self.p0.log(), (1 - self.p0).log()  # (B, n): the marginals
        return logits


def enumerate_fast_dllm(p0, threshold):
    """P(position j ends as token 0) under Fast-dLLM's rule for a block of 2 blanks, 2 steps (one
    scheduled write each): step 1 draws both, writes the more confident draw and every draw whose own
    probability is >= τ; step 2 writes what is left, drawn again. Every branch enumerated."""
    prob = lambda j, t: p0[j] if t == 0 else 1 - p0[j]  # a draw's probability = its confidence at T = 1
    p_zero = [0.0, 0.0]
    for d0 in (0, 1):
        for d1 in (0, 1):
            w = prob(0, d0) * prob(1, d1)
            conf = [prob(0, d0), prob(1, d1)]
            top = 0 if conf[0] > conf[1] else 1  # no ties in the test's marginals
            for j, d in enumerate((d0, d1)):
                written_now = j == top or conf[j] >= threshold
                # written now: its first draw; else drawn again at step 2 and written whatever it is
                p_zero[j] += w * ((d == 0) if written_now else p0[j])
    return p_zero


def test_threshold_rules_by_exact_enumeration():
    p0, tau, B = [0.6, 0.7], 0.5, 40_000
    model = FixedLogits(p0)
    prompt = torch.zeros((B, 1), dtype=torch.long)
    freq = {}
    for rule in ("fast_dllm", "certainty"):
        out = sampling.generate(model, prompt, gen_length=2, block_length=2, steps=2, temperature=1.0, threshold=tau,
                       threshold_rule=rule, generator=torch.Generator().manual_seed(0))[:, 1:]  # (B, 2)
        freq[rule] = (out == 0).double().mean(dim=0).tolist()
    se = 4 * (0.25 / B) ** 0.5  # four standard errors of a share, at its widest
    # Fast-dLLM's rule accepts a draw at once only when it hit the likely token, and draws again otherwise:
    # the samples lean toward the mode (0.768 and 0.91 instead of 0.6 and 0.7, by enumeration)
    expect = enumerate_fast_dllm(p0, tau)
    assert expect[0] == pytest.approx(0.768) and expect[1] == pytest.approx(0.91)
    assert all(abs(f - e) < se for f, e in zip(freq["fast_dllm"], expect)), (freq, expect)
    # ours: both positions peak at >= τ, so both are written at step 1 with their first draw: the marginals
    assert all(abs(f - p) < se for f, p in zip(freq["certainty"], p0)), freq
    # greedy, the two rules are one
    greedy = [sampling.generate(model, prompt[:4], gen_length=2, block_length=2, steps=2, threshold=tau, threshold_rule=r)
              for r in ("fast_dllm", "certainty")]
    assert torch.equal(*greedy)
