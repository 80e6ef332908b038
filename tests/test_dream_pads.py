"""
Dream hides its left pads and never trains its pad row; LLaDA does neither (d1's behaviour, kept).

Dream's own generate and eval pass a key-padding mask for a left-padded batch, and its embedding has
padding_idx = pad = EOS. Checked here on a tiny Dream: a left-padded batch of prompts of different
lengths through our greedy samplers and every likelihood gives what a loop over each row unpadded
gives; the pad row stays bit for bit through real AdamW steps with weight decay; LLaDA's padded batch
is not masked (its pads are attended as d1's) and its pad row trains.

Dream's hiding and freezing are the core's generic options (modelio/families.left_pad_mask,
ops/trainers.freeze_pad_row), switched on by its Family record (methods/dream.py: hide_pads,
pad_row_frozen); the scripts run it through the field's entry points (python -m methods.sft).

Run: python -m pytest tests/test_dream_pads.py -q
"""
import json
import sys
from dataclasses import replace

import pytest
import torch

import grpo
from eval import run_items
from logprob import one_step_logprobs
import methods.dream  # noqa: F401  (registers the Dream family: make_tiny(family="dream"))
from methods import grpo as field_grpo
from methods import sampling
from methods.estimators import estimate_logprobs
from methods.justgrpo import ar_logprobs
from modelio.checkpoint import from_pretrained, make_tiny
from modelio.families import hides_pads, left_pad_mask
from ops.trainers import freeze_pad_row
from sample import generate
from taskdata.data import pad_left, real_tokens


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """{family: its tiny model, eval mode, fp32}."""
    root = tmp_path_factory.mktemp("pads")
    return {f: from_pretrained(make_tiny(root / f, family=f)).eval() for f in ("dream", "llada")}


def prompt_rows(model):
    """Three prompts of different lengths; the shortest begins with EOS, the pad id: a pad only by position."""
    g = torch.Generator().manual_seed(3)
    rows = [torch.randint(0, 256, (n,), generator=g).tolist() for n in (5, 9, 12)]
    rows[0][0] = model.config.eos_token_id
    return rows


def test_the_family_decides_and_the_mask_comes_from_the_lengths(tiny):
    assert hides_pads(tiny["dream"]) and not hides_pads(tiny["llada"])
    rows = [[7, 256, 3], [256], [1, 2, 3, 4]]  # 256: an EOS inside a prompt is a token, not a pad
    assert pad_left(rows, 256).tolist() == [[256, 7, 256, 3], [256, 256, 256, 256], [1, 2, 3, 4]]
    assert real_tokens(rows).tolist() == [[0, 1, 1, 1], [0, 0, 0, 1], [1, 1, 1, 1]]
    assert left_pad_mask(tiny["llada"], real_tokens(rows)) is None  # LLaDA: no mask at all, as d1
    assert torch.equal(left_pad_mask(tiny["dream"], real_tokens(rows)), real_tokens(rows))


@pytest.mark.parametrize("remasking", ["low_confidence", "entropy"])  # d1's order and one of Dream's
def test_a_padded_dream_batch_generates_and_scores_as_its_rows_unpadded(tiny, remasking):
    model = tiny["dream"]
    rows = prompt_rows(model)
    prompt, am = pad_left(rows, model.config.eos_token_id), left_pad_mask(model, real_tokens(rows))  # (B, P)
    P, N = prompt.shape[1], 8
    kw = dict(gen_length=N, block_length=4, steps=8, remasking=remasking)
    run = (lambda p, m: sampling.generate(model, p, attention_mask=m, **kw)) if remasking == "entropy" else \
        (lambda p, m: generate(model, p, attention_mask=m, **kw))
    out = run(prompt, am)[:, P:]  # (B, N) greedy
    for i, r in enumerate(rows):  # each row alone, no pad and no mask
        assert torch.equal(out[i], run(torch.tensor([r]), None)[0, len(r):]), f"row {i}"
    # the scores of those completions: d1's one-step estimate (p_mask 0: no random draw) and JustGRPO's AR one
    with torch.no_grad():
        batch = [one_step_logprobs(model, prompt, out, p_mask_prompt=0.0, attention_mask=am),
                 ar_logprobs(model, prompt, out, attention_mask=am)]  # (B, N) each
        for i, r in enumerate(rows):
            alone = [one_step_logprobs(model, torch.tensor([r]), out[i:i + 1], p_mask_prompt=0.0),
                     ar_logprobs(model, torch.tensor([r]), out[i:i + 1])]
            for b, a in zip(batch, alone):
                assert (b[i] - a[0]).abs().max() < 1e-5
    # without the mask the padded rows read their pads: another answer (what LLaDA does, below)
    with torch.no_grad():
        attended = one_step_logprobs(model, prompt, out, p_mask_prompt=0.0)
    assert (attended[0] - batch[0][0]).abs().max() > 1e-4


def test_llada_attends_its_pads_as_before(tiny):
    model = tiny["llada"]
    rows = prompt_rows(model)
    prompt = pad_left(rows, model.config.eos_token_id)
    am = left_pad_mask(model, real_tokens(rows))
    assert am is None
    completion = torch.randint(0, 256, (3, 8), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        padded = one_step_logprobs(model, prompt, completion, p_mask_prompt=0.0, attention_mask=am)
        alone = one_step_logprobs(model, torch.tensor([rows[0]]), completion[:1], p_mask_prompt=0.0)
        out = generate(model, prompt, attention_mask=am, gen_length=8, block_length=4, steps=8)
        again = generate(model, prompt, gen_length=8, block_length=4, steps=8)  # d1's call, no mask argument
    assert (padded[0] - alone[0]).abs().max() > 1e-4  # the pads are read, as d1 reads them
    assert torch.equal(out, again)


def micro_batch(model, rows, pad_value, N=8):
    """A grpo.MicroBatch of `rows` left-padded with `pad_value` instead of EOS, as a round fills it."""
    real = real_tokens(rows)
    prompt = torch.where(real.bool(), pad_left(rows, model.config.eos_token_id), pad_value)
    g = torch.Generator().manual_seed(5)
    completion = torch.randint(0, 256, (len(rows), N), generator=g)
    record = {"commit_step": torch.randint(0, 4, (len(rows), N), generator=g), "token_logp": torch.zeros(len(rows), N)}
    return grpo.MicroBatch(0, [], prompt, completion, torch.ones(len(rows), N), record=record,
                           pad_mask=left_pad_mask(model, real))


@pytest.mark.parametrize("family", ["dream", "llada"])
def test_every_likelihood_reads_no_hidden_pad(tiny, family):
    # the same batch with other ids in the pad positions: every objective's likelihood and every --estimator
    # is unchanged on Dream (the pads are hidden from every forward) and changes on LLaDA (they are attended)
    model, rows = tiny[family], prompt_rows(tiny[family])
    hp = field_grpo.Hyper(G=1, mu=1, epsilon=0.5, beta=0.0, p_mask=0.3, gen_length=8, block_length=4, steps=4,
                    temperature=1.0, grad_clip=1.0, scale_std=False,
                    own={"ar_chunk": 4, "spg_draws": 2, "spg_beta": 1.5, "spg_omega": 0.5, "espo_draws": 2,
                         "trajectory_segments": 2, "gdsd_draws": 2, "gdsd_psi": 10.0,
                         "gdsd_epsilon_high": 0.0})
    likelihoods = {name: obj.logprobs or grpo.one_step for name, obj in field_grpo.OBJECTIVES.items()}
    likelihoods |= {f"--estimator {e}": lambda m, b, g, hp, mask_id, e=e: estimate_logprobs(
        m, b.prompt, b.completion, e, hp.p_mask, g, mask_id, b.pad_mask) for e in ("coupled", "elbo")}
    eos_padded, other = micro_batch(model, rows, model.config.eos_token_id), micro_batch(model, rows, 42)
    for name, logprobs in likelihoods.items():
        with torch.no_grad():
            a, b = (logprobs(model, mb, torch.Generator().manual_seed(6), hp, None) for mb in (eos_padded, other))
        a, b = (x[0] if isinstance(x, tuple) else x for x in (a, b))  # SPG's: (log-probs, scored)
        if family == "dream":
            assert (a - b).abs().max() < 1e-5, name
        else:
            assert (a - b).abs().max() > 1e-4, name
    assert replace(eos_padded, pad_mask=None).pad_mask is None  # LLaDA's field: None, the unmasked call


def test_eval_gives_a_dream_item_the_same_answer_in_any_batch(tiny, tmp_path):
    # eval.py's batches: left-padded prompts of different lengths; each item as if it were alone
    model = tiny["dream"]
    from modelio.tokenizer import load_tokenizer
    tok = load_tokenizer(make_tiny(tmp_path / "tok", family="dream"))
    questions = ["What is 2+3?", "Hi", "A longer one, 7*8?"]
    items = [(i, {"question": q, "prompt": q, "answer": "1"}) for i, q in enumerate(questions)]
    kw = dict(gen_length=8, block_length=8, steps=4)
    together = run_items(model, tok, "gsm8k", items, batch_size=3, **kw)
    alone = run_items(model, tok, "gsm8k", items, batch_size=1, **kw)
    assert [r["generation"] for r in together] == [r["generation"] for r in alone]


# -----------------------------------------------------------------------------
# the pad row: frozen for Dream under full fine-tuning (its padding_idx), trained for LLaDA


@pytest.mark.parametrize("family", ["dream", "llada"])
def test_the_pad_row_stays_through_adamw_steps_with_weight_decay_for_dream_only(tiny, family, tmp_path):
    model = from_pretrained(make_tiny(tmp_path / family, family=family)).train()
    pad = model.config.pad_token_id
    w = model.transformer.wte.weight
    before = w.detach().clone()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.1)
    assert freeze_pad_row(model, opt) == (pad if family == "dream" else None)
    ids = torch.tensor([[pad, pad, 5, 6, 7, pad], [1, pad, 2, 3, pad, 4]])  # the pad as an input, so it has a gradient
    for _ in range(3):
        opt.zero_grad()
        model(ids).float().logsumexp(-1).mean().backward()
        if family == "dream":
            assert not w.grad[pad].any()  # zeroed as computed: the clipped norm does not count it
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    rows = torch.arange(w.shape[0]) != pad
    assert not torch.equal(w[rows], before[rows])  # the other rows train
    assert torch.equal(w[pad], before[pad]) == (family == "dream")


@pytest.mark.parametrize("fsdp", [False, True])  # FSDP2: two processes, the row on the second one's shard
def test_sft_with_weight_decay_keeps_dreams_pad_row(tmp_path, fsdp):
    from conftest import REPO, run, torchrun
    from safetensors.torch import load_file
    base = make_tiny(tmp_path / "dream", family="dream")
    sft = ["-m", "methods.sft"]  # sft.py with the Dream family registered
    launch = [*torchrun(2), *sft, "--fsdp", "--grad-accum", "2"] if fsdp else [sys.executable, *sft]
    out = run([*launch, "--model-dir", str(base), "--out-dir", str(tmp_path / "sft"), "--max-steps",
               "2", "--batch-size", "4", "--num-examples", "16", "--max-length", "128", "--weight-decay", "0.1",
               "--lr", "1e-2", "--lora-r", "0"], REPO)
    assert "frozen, as the family's padding_idx" in out
    key, pad = "model.embed_tokens.weight", json.loads((base / "config.json").read_text())["pad_token_id"]
    weights = lambda d: {k: v for f in sorted(d.glob("*.safetensors")) for k, v in load_file(str(f)).items()}
    a, b = weights(base)[key], weights(tmp_path / "sft")[key]
    assert torch.equal(a[pad], b[pad]) and not torch.equal(a, b)
