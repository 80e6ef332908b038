"""
Tests for Dream's decoding orders in methods/sampling.py (remasking="origin" | "maskgit_plus" | "topk_margin" |
"entropy"), built from sample.py's pieces.
CPU only, a fake deterministic model, seconds.

    python -m pytest tests/test_dream_sampler.py -q

The main check is token-for-token equality (greedy) with a plain per-step loop written below from Dream's
`diffusion_generate` (its generation_utils.py): one canvas, no blocks, Python-level confidences, the count
int(num_mask * (1 - s / t)) from the batch-average mask count. The rest: "origin"'s coin flips by their
frequencies, alg_temp's position draws by theirs, Dream's count table by hand, record=True, refusals, the CLI.
"""
import math
import os
import sys
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from methods.sampling import dream_transfer_tokens, generate  # noqa: E402

V, MASK = 32, 31  # tiny vocabulary; the last id is the mask

# -----------------------------------------------------------------------------
# a fake model, a recorder and the independent reference


class CanvasModel(nn.Module):
    """Logits (B, L, V): a fixed random function of the whole canvas (each column's token and place, mixed
    with every other column's by a random (L, L) matrix), so every token written changes later predictions.
    Already aligned with positions, as model.py returns a Dream model's (shifted) logits."""

    def __init__(self, seed=0, D=16, max_len=64):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.config = SimpleNamespace(mask_token_id=MASK)
        self.emb, self.pos = torch.randn(V, D, generator=g), torch.randn(max_len, D, generator=g)
        self.mix, self.out = torch.randn(max_len, max_len, generator=g), torch.randn(D, V, generator=g)

    def forward(self, x, attention_mask=None):
        L = x.shape[1]
        h = self.emb[x] + self.pos[:L]                         # (B, L, D)
        return torch.tanh(h + self.mix[:L, :L] @ h / L ** 0.5) @ self.out  # (B, L, V)


class Recorder(nn.Module):
    """Wraps a model and keeps a copy of every canvas it is called with."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config, self.inputs = model, model.config, []

    def forward(self, x, attention_mask=None):
        self.inputs.append(x.clone())
        return self.model(x, attention_mask=attention_mask)


def prompts(B=2, P=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, MASK, (B, P), generator=g)  # different prompts per row, no mask


@torch.no_grad()
def dream_reference(model, prompt, gen_length, steps, alg, eps=1e-3, block_length=None):
    """Greedy Dream, one step at a time: per masked column a softmax, the best non-mask token (sample.py's
    one deviation: the mask is never written) and Dream's confidence; the batch-average count; per row the
    k best columns. block_length (ours, not Dream's): the same inside each block in turn, left to right."""
    B, P = prompt.shape
    block_length = block_length or gen_length
    x = torch.cat([prompt, torch.full((B, gen_length), MASK)], dim=1)
    spb = steps // (gen_length // block_length)
    timesteps = torch.linspace(1, eps, spb + 1)
    for end in range(P + block_length, P + gen_length + 1, block_length):
        for i in range(spb):
            mask_index = x == MASK
            mask_index[:, end:] = False  # nothing right of the block (all of the canvas without blocks)
            logits = model(x).float()
            t, s = timesteps[i], timesteps[i + 1]
            num_mask = mask_index.sum() / B  # Dream's num_mask_token: the batch AVERAGE
            k = int(num_mask * (1 - s / t)) if i < spb - 1 else int(num_mask)
            new = x.clone()
            for row in range(B):
                conf, tok = {}, {}
                for j in range(x.shape[1]):
                    if not mask_index[row, j]:
                        continue
                    p = torch.softmax(logits[row, j], dim=-1).tolist()
                    tok[j] = max((v for v in range(V) if v != MASK), key=lambda v: p[v])
                    if alg == "maskgit_plus":
                        conf[j] = p[tok[j]]
                    elif alg == "topk_margin":
                        top = sorted(p, reverse=True)
                        conf[j] = top[0] - top[1]
                    else:  # entropy
                        conf[j] = sum(q * math.log(q + 1e-10) for q in p)
                order = sorted(conf, key=lambda j: -conf[j])
                # honesty guard: a (near-)tie at the cut would make the expected output depend on rounding
                assert k == 0 or k >= len(order) or conf[order[k - 1]] - conf[order[k]] > 1e-5, "near tie"
                for j in order[:k]:
                    new[row, j] = tok[j]
            x = new
    return x

# -----------------------------------------------------------------------------
# greedy equality with the reference


@pytest.mark.parametrize("alg", ["maskgit_plus", "topk_margin", "entropy"])
@pytest.mark.parametrize("gen_length,steps", [(16, 16), (16, 5), (12, 4), (8, 1)])
def test_matches_dream_reference_greedy(alg, gen_length, steps):
    model, prompt = CanvasModel(), prompts(B=2)
    out = generate(model, prompt, gen_length=gen_length, block_length=gen_length, steps=steps, remasking=alg)
    ref = dream_reference(model, prompt, gen_length, steps, alg)
    assert not bool((ref == MASK).any())
    assert torch.equal(out, ref)


@pytest.mark.parametrize("alg", ["maskgit_plus", "entropy"])
def test_blocks_run_dream_schedule_per_block(alg):
    # semi-AR Dream (ours): each block in turn gets Dream's schedule and ranking
    model, prompt = CanvasModel(seed=1), prompts(B=2, seed=1)
    out = generate(model, prompt, gen_length=16, block_length=8, steps=10, remasking=alg, eps=0.01)
    assert torch.equal(out, dream_reference(model, prompt, 16, 10, alg, eps=0.01, block_length=8))


def test_orders_differ_and_differ_from_llada():
    # the orders must matter, or the equality tests above would prove little
    model, prompt = CanvasModel(), prompts(B=2)
    outs = [generate(model, prompt, gen_length=16, block_length=16, steps=8, remasking=r)
            for r in ("low_confidence", "maskgit_plus", "topk_margin", "entropy")]
    assert len({tuple(o.flatten().tolist()) for o in outs}) == 4


def test_dream_counts_by_hand():
    # ts = linspace(1, 1e-3, 5) = 1, .75025, .5005, .25075, .001: 12 * .24975 = 2.997 -> 2; 10 * (1 - .5005 /
    # .75025) = 3.33 -> 3; 7 * .499 = 3.49 -> 3; the last step the 4 left
    assert dream_transfer_tokens(torch.tensor([12]), 4, 1e-3).tolist() == [[2, 3, 3, 4]]
    assert dream_transfer_tokens(torch.tensor([10, 10]), 4, 1e-3).tolist() == [[2, 2, 2, 4]] * 2
    # the batch-average quirk: rows of 12 and 8 blanks both get the counts of 10
    assert dream_transfer_tokens(torch.tensor([12, 8]), 4, 1e-3).tolist() == [[2, 2, 2, 4]] * 2
    # one token per step over 16 steps floors 16 * .0624 to 0 first, and leaves 2 to the last
    assert dream_transfer_tokens(torch.tensor([16]), 16, 1e-3).tolist() == [[0] + [1] * 14 + [2]]

# -----------------------------------------------------------------------------
# "origin": independent coin flips


def written_per_step(rec, out):
    """(steps, B) number of columns written at each step, from the recorded canvases."""
    cs = rec.inputs + [out]
    return torch.stack([((a == MASK) & (b != MASK)).sum(dim=1) for a, b in zip(cs, cs[1:])])


def test_origin_writes_each_blank_with_probability_1_minus_s_over_t():
    B, P, G, S = 4000, 2, 8, 4
    rec = Recorder(CanvasModel())
    out = generate(rec, prompts(B=B, P=P), gen_length=G, block_length=G, steps=S, remasking="origin",
                   generator=torch.Generator().manual_seed(0))
    cs = rec.inputs + [out]
    ts = [1 - i * (1 - 1e-3) / S for i in range(S + 1)]  # linspace(1, eps, S + 1), by hand
    for i in range(S):
        blanks = int((cs[i] == MASK).sum())
        share = int(((cs[i] == MASK) & (cs[i + 1] != MASK)).sum()) / blanks
        p = 1 - ts[i + 1] / ts[i] if i < S - 1 else 1.0  # .24975, .3329, .499, then all
        assert abs(share - p) < 4 * (p * (1 - p) / blanks) ** 0.5 + 1e-12, (i, share, p)
    assert not bool((out == MASK).any()) and torch.equal(out[:, :P], prompts(B=B, P=P))


def test_origin_with_eps_near_one_writes_little_then_everything_greedily():
    model, prompt = CanvasModel(), prompts(B=2)
    rec = Recorder(model)
    out = generate(rec, prompt, gen_length=16, block_length=16, steps=4, remasking="origin", eps=0.99,
                   generator=torch.Generator().manual_seed(0))
    per_step = written_per_step(rec, out)                          # (4, 2)
    assert int(per_step[:-1].sum()) <= 2                            # p = 1 - s/t is about .0025 per step
    assert per_step.sum(dim=0).tolist() == [16, 16] and not bool((out == MASK).any())
    # every written token is the greedy choice (mask excluded) at the canvas it was written on
    for before, after in zip(rec.inputs, rec.inputs[1:] + [out]):
        logits = model(before)
        logits[..., MASK] = float("-inf")
        new = (before == MASK) & (after != MASK)
        assert torch.equal(after[new], logits.argmax(-1)[new])
    # and with Dream's default eps the early steps do write: the schedule is read
    rec2 = Recorder(model)
    out2 = generate(rec2, prompt, gen_length=16, block_length=16, steps=4, remasking="origin",
                    generator=torch.Generator().manual_seed(0))
    assert int(written_per_step(rec2, out2)[:-1].sum()) > 8

# -----------------------------------------------------------------------------
# alg_temp: positions drawn from softmax(confidence / alg_temp)


class FixedLogits(nn.Module):
    """Every completion column j predicts token 0 with probability a[j], token 1 otherwise, whatever the canvas."""

    def __init__(self, a):
        super().__init__()
        self.config = SimpleNamespace(mask_token_id=2)
        self.a = torch.tensor(a)

    def forward(self, x, attention_mask=None):
        B, L = x.shape
        logits = torch.full((B, L, 3), -30.0)
        logits[:, L - len(self.a):, 0], logits[:, L - len(self.a):, 1] = self.a.log(), (1 - self.a).log()
        return logits


def test_alg_temp_draws_the_first_position_from_softmax_of_confidence():
    a, tau, B = [0.9, 0.7, 0.6, 0.55], 0.2, 20000
    rec = Recorder(FixedLogits(a))
    # 4 blanks over 2 steps: step 0 writes int(4 * .4995) = 1 position, drawn by its confidence
    generate(rec, torch.zeros((B, 1), dtype=torch.long), gen_length=4, block_length=4, steps=2,
             remasking="maskgit_plus", alg_temp=tau, generator=torch.Generator().manual_seed(0))
    first = rec.inputs[1][:, 1:] != 2                               # (B, 4) the column written at step 0
    assert first.sum(dim=1).eq(1).all()
    # confidence at T = 0: the best token's probability over the whole vocabulary (mask included, ~1e-13)
    conf = torch.tensor([max(x, 1 - x) for x in a], dtype=torch.float64)
    want = torch.softmax(conf / tau, dim=0)                         # .57, .21, .13, .10
    got = first.double().mean(dim=0)
    assert torch.allclose(got, want, atol=4 * (0.25 / B) ** 0.5), (got, want)

# -----------------------------------------------------------------------------
# record=True, refusals, CLI


@pytest.mark.parametrize("alg", ["origin", "entropy"])
def test_record_gives_commit_step_and_logp(alg):
    model, prompt, stats = CanvasModel(), prompts(B=2), {}
    rec = Recorder(model)
    out = generate(rec, prompt, gen_length=12, block_length=12, steps=4, remasking=alg, record=True, stats=stats,
                   generator=torch.Generator().manual_seed(0))
    for i, (before, after) in enumerate(zip(rec.inputs, rec.inputs[1:] + [out])):
        new = ((before == MASK) & (after != MASK))[:, 5:]           # (B, 12)
        assert torch.equal(stats["commit_step"] == i, new)
        lp = torch.log_softmax(model(before).float(), -1).gather(-1, after[..., None]).squeeze(-1)[:, 5:]
        assert torch.allclose(stats["token_logp"][new], lp[new])


class NoForward(nn.Module):
    config = SimpleNamespace(mask_token_id=MASK)

    def forward(self, *a, **kw):
        raise AssertionError("the model was called before the arguments were checked")


@pytest.mark.parametrize("kw,match", [
    (dict(remasking="entropy", cache="prefix"), "cache"),
    (dict(remasking="origin", cache="dual"), "cache"),
    (dict(remasking="topk_margin", threshold=0.9), "threshold"),
    (dict(remasking="entropy", eps=1.0), "eps"),
    (dict(remasking="origin", eps=-0.1), "eps"),
    (dict(remasking="origin", alg_temp=0.5), "alg_temp"),
    (dict(remasking="low_confidence", alg_temp=0.5), "alg_temp"),
    (dict(remasking="entropy", alg_temp=-1.0), "alg_temp"),
    (dict(remasking="dream"), "remasking"),
])
def test_bad_combinations_refused_in_one_line(kw, match):
    with pytest.raises(ValueError, match=match) as e:
        generate(NoForward(), prompts(), gen_length=8, block_length=8, steps=4, **kw)
    assert "\n" not in str(e.value)


def test_d1s_sampler_refuses_dreams_orders():
    import sample
    with pytest.raises(ValueError, match="remasking"):
        sample.generate(NoForward(), prompts(), gen_length=8, block_length=8, steps=4, remasking="entropy")


def test_cli_help_shows_dream_options(monkeypatch, capsys):
    import runpy
    monkeypatch.setattr(sys, "argv", ["sampling.py", "--help"])
    with pytest.raises(SystemExit):
        runpy.run_path(os.path.join(os.path.dirname(__file__), "..", "methods", "sampling.py"), run_name="__main__")
    text = " ".join(capsys.readouterr().out.split())
    assert "--eps" in text and "default: 0.001" in text and "--alg-temp" in text
    assert all(r in text for r in ("origin", "maskgit_plus", "topk_margin", "entropy", "default: low_confidence"))
