"""
Tests for the Dream family (methods/dream.py, on model.py's generic options and modelio's readers and writers)
against an independent implementation: transformers' Qwen2, which is Dream's architecture run causally.
The checkpoint these read is written by transformers (Qwen2ForCausalLM.save_pretrained: Dream's key names)
with a Dream config.json beside it, never by modelio/checkpoint. Qwen2 is run with an all-zero 4-D attention mask
(every position attends every position) and its logits read shifted, which is what Dream's modeling and
generation files do; fp32 logits must agree to float rounding.

The scripts run on a tiny Dream through the field's entry points (python -m methods.sft / methods.grpo /
methods.eval); d1's own scripts, which register LLaDA alone, refuse a Dream directory in one line naming them.

Run: python -m pytest tests/test_dream.py -q
"""
import json
import math
import shutil
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from methods import sampling
from methods.dream import DREAM, TINY_TOKENIZER, make_tiny_dream
from model import LLaDA
from modelio.checkpoint import from_pretrained, load, make_tiny, save_pretrained
from modelio.tokenizer import load_tokenizer, make_tiny_tokenizer, prompt_ids, special_ids
from sample import generate

# a small Qwen2 shape: grouped-query attention (4 query heads, 2 key/value heads), untied head, Dream's RoPE base
QWEN = dict(vocab_size=264, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, rope_theta=1e6, rms_norm_eps=1e-6, max_position_embeddings=512,
            tie_word_embeddings=False)
MASK, EOS = 259, 256  # the tiny Dream tokenizer's <|mask|> and <|endoftext|>


def dream_config():
    """config.json as Dream-v0-Instruct-7B writes it, at QWEN's shape and the tiny tokenizer's ids."""
    return {"architectures": ["DreamModel"], "auto_map": {"AutoConfig": "configuration_dream.DreamConfig",
                                                          "AutoModel": "modeling_dream.DreamModel"},
            "model_type": "Dream", **QWEN, "hidden_act": "silu", "initializer_range": 0.02, "mask_token_id": MASK,
            "pad_token_id": EOS, "eos_token_id": EOS, "bos_token_id": EOS, "rope_scaling": None,
            "use_sliding_window": False, "sliding_window": None, "max_window_layers": 2, "attention_dropout": 0.0,
            "torch_dtype": "float32", "use_cache": False, "transformers_version": "4.46.2"}


@pytest.fixture(scope="module")
def dream(tmp_path_factory):
    """(directory, the transformers Qwen2 holding the same weights)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM
    path = tmp_path_factory.mktemp("dream")
    torch.manual_seed(0)
    qwen = Qwen2ForCausalLM(Qwen2Config(**QWEN, attn_implementation="eager")).eval()
    with torch.no_grad():  # HF initialises biases and norms to constants: random ones exercise every term
        for name, p in qwen.named_parameters():
            if p.dim() == 1:
                p.normal_(1.0 if "norm" in name else 0.0, 0.3)
    qwen.save_pretrained(str(path))  # model.embed_tokens, model.layers.N.self_attn.q_proj(.bias), ..., lm_head
    make_tiny_tokenizer(**TINY_TOKENIZER).save_pretrained(str(path))
    (path / "config.json").write_text(json.dumps(dream_config()))
    return path, qwen


def qwen_logits(qwen, ids, attention_mask=None):
    """Dream's forward through transformers' Qwen2: bidirectional (an additive 4-D mask of zeros, or
    Dream's pairwise padding mask), positions cumsum(mask) - 1 with pads at 1, logits read shifted by one."""
    B, T = ids.shape
    keep = torch.ones(B, T, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    pair = keep[:, None, :, None] & keep[:, None, None, :]                  # (B, 1, T, T), as Dream builds it
    mask4 = torch.zeros(B, 1, T, T).masked_fill(~pair, torch.finfo(torch.float32).min)
    pos = (keep.long().cumsum(-1) - 1).masked_fill(~keep, 1)                # (B, T)
    with torch.no_grad():
        logits = qwen(input_ids=ids, attention_mask=mask4, position_ids=pos).logits  # (B, T, V)
    return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)


def test_forward_equals_qwen2_run_bidirectionally_and_read_shifted(dream):
    path, qwen = dream
    model = from_pretrained(path).eval()
    assert model.config.logit_shift and model.config.kv_heads == 2 and model.transformer.blocks[0].q_proj.bias is not None
    ids = torch.randint(0, 256, (3, 20), generator=torch.Generator().manual_seed(1))
    ids[:, 8:] = MASK  # a prompt and a masked completion, as every rollout and estimator sees it
    with torch.no_grad():
        ours = model(ids)                                                   # (B, T, V)
        causal = qwen(input_ids=ids).logits
    ref = qwen_logits(qwen, ids)
    assert (ours - ref).abs().max() < 1e-5
    # the comparison can fail: Qwen2's own causal forward, or the logits unshifted, are far off
    assert (ours - torch.cat([causal[:, :1], causal[:, :-1]], 1)).abs().max() > 1e-2
    assert (ours[:, 1:] - ref[:, :-1]).abs().max() > 1e-2
    # logits_at reads the same shifted columns as the full forward
    cols = torch.tensor([[0, 5, 19], [3, 3, 8], [19, 1, 2]])
    with torch.no_grad():
        picked = model(ids, logits_at=cols)
    assert torch.allclose(picked, ours.gather(1, cols[..., None].expand(-1, -1, ours.shape[-1])), atol=1e-6)


def test_left_padded_rows_equal_dreams_positions_counted_from_the_first_token(dream):
    # Dream's generate gives a padded row positions cumsum(mask) - 1; model.py keeps the column index. RoPE is
    # relative and pads are hidden as keys, so both give the same logits: checked against Qwen2 fed Dream's
    path, qwen = dream
    model = from_pretrained(path).eval()
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(2))
    ids[:, 10:] = MASK
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, :4] = 0  # row 1 is left-padded by 4
    ids[1, :4] = EOS
    ref = qwen_logits(qwen, ids, mask)
    with torch.no_grad():
        ours = model(ids, attention_mask=mask)
        unmasked = model(ids)  # d1's forward attends the pads too: another answer for the padded row
    # columns whose shifted source column i - 1 is a real token: row 0 all but column 0, row 1 from column 5
    assert (ours[0, 1:] - ref[0, 1:]).abs().max() < 1e-5 and (ours[1, 5:] - ref[1, 5:]).abs().max() < 1e-5
    assert (unmasked[1, 5:] - ref[1, 5:]).abs().max() > 1e-3


def test_a_kv_cache_window_is_refused():
    model = make_tiny_model()
    ids = torch.full((1, 8), MASK)
    with torch.no_grad():
        _, kv = model(ids, return_kv=True)
        with pytest.raises(ValueError, match="shifted logits"):
            model(ids[:, 4:], past_kv=kv, start=4)


def make_tiny_model():
    torch.manual_seed(0)
    cfg = DREAM.config_from_json(dream_config())
    return LLaDA(cfg).eval()


def test_save_writes_the_same_directory_back(dream, tmp_path):
    path, _ = dream
    model = from_pretrained(path)
    save_pretrained(model, tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "config.json").read_text())
    # every key and value of Dream's config.json comes back, auto_map only where its code is (none here)
    assert saved == {k: v for k, v in dream_config().items() if k != "auto_map"}
    theirs = load_file(str(path / "model.safetensors"))
    ours = {}
    for f in (tmp_path / "out").glob("*.safetensors"):
        ours.update(load_file(str(f)))
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in theirs)


def test_a_training_save_loads_through_transformers_automodel_with_our_logits(dream, tmp_path, capsys):
    # A save as a run writes it (checkpoint.save_merged), from a base that ships Dream's remote code, read back by
    # the installed transformers' AutoModelForCausalLM with Qwen2's config (Dream's architecture run by
    # transformers' own code): the same logits as ours. Dream's modeling_dream.py itself is not in this repo and
    # is never run: a stand-in file of that name only shows that the save carries it and prints which
    # transformers versions run it (one line, once)
    from transformers import AutoModelForCausalLM, Qwen2Config
    from modelio.checkpoint import save_merged
    path, _ = dream
    base = tmp_path / "base"
    shutil.copytree(path, base)
    (base / "modeling_dream.py").write_text("raise ImportError('a stand-in name, never imported')\n")
    (base / "configuration_dream.py").write_text("raise ImportError('a stand-in name, never imported')\n")
    model = from_pretrained(base)
    with torch.no_grad():  # a fine-tune: no longer the base's weights
        model.transformer.blocks[0].q_proj.bias.add_(0.25)
    save_merged(model, base, tmp_path / "run")
    save_merged(model, base, tmp_path / "run2")  # a later save of the same run: no second note
    out = capsys.readouterr().out
    assert out.count("transformers 4.x") == 1 and "not on 5.x" in out
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["auto_map"] == dream_config()["auto_map"]  # its code is there: AutoModel + trust_remote_code
    config = Qwen2Config.from_pretrained(str(tmp_path / "run"), attn_implementation="eager")
    hf = AutoModelForCausalLM.from_pretrained(str(tmp_path / "run"), config=config).eval()
    ids = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(7))
    ids[:, 6:] = MASK
    with torch.no_grad():
        ours = from_pretrained(tmp_path / "run").eval()(ids)
        base_logits = from_pretrained(base).eval()(ids)
    assert (ours - qwen_logits(hf, ids)).abs().max() < 1e-5
    assert (base_logits - ours).abs().max() > 1e-3  # the fine-tune's weights, not the base's, were read
    save_merged(model, path, tmp_path / "plain")  # a base without remote code: nothing to say
    assert "transformers" not in capsys.readouterr().out


def corrupt(path, dst, config=None, rename=None, dtype=None):
    """A copy of the Dream directory with one thing wrong."""
    shutil.copytree(path, dst)
    cfg = {**dream_config(), **(config or {})}
    (dst / "config.json").write_text(json.dumps(cfg))
    if rename or dtype:
        sd = load_file(str(dst / "model.safetensors"))
        if rename:
            sd[rename[1]] = sd.pop(rename[0])
        if dtype:
            sd = {k: v.to(dtype) for k, v in sd.items()}
        save_file(sd, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


@pytest.mark.parametrize("change, needle", [
    (dict(rename=("lm_head.weight", "model.lm_head.weight")), "missing keys (1): lm_head.weight; unexpected keys (1)"),
    (dict(rename=("model.layers.1.self_attn.k_proj.bias", "model.layers.1.self_attn.k_proj.b")),
     "model.layers.1.self_attn.k_proj.b"),
    (dict(config={"num_key_value_heads": 4}), "model.layers.0.self_attn.k_proj.weight: checkpoint (32, 64) vs model"),
    (dict(config={"tie_word_embeddings": True}), "tie_word_embeddings=True"),
    (dict(config={"use_sliding_window": True}), "use_sliding_window=True"),
    (dict(config={"hidden_act": "gelu"}), "hidden_act='gelu'"),
    (dict(config={"rope_scaling": {"type": "yarn", "factor": 4.0}}), "rope_scaling="),
    (dict(config={"eos_token_id": None}), "eos_token_id is absent"),
    (dict(config={"model_type": "qwen2"}), "model_type 'qwen2' is not a family"),
    (dict(dtype=torch.bfloat16), "tensors not in config.json's torch_dtype F32 (27): lm_head.weight (BF16)"),
])
def test_strict_loading_refuses_in_one_line(dream, tmp_path, change, needle):
    bad = corrupt(dream[0], tmp_path / "bad", **change)
    with pytest.raises(ValueError) as e:
        from_pretrained(bad)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_tokenizer_prompts_and_special_ids(dream, tmp_path):
    path, _ = dream
    model, tok = load(path)
    ids = special_ids(tok, model.config)
    assert (ids.mask, ids.eos, ids.eot, ids.pad) == (MASK, EOS, 258, EOS)
    text = tok.decode(prompt_ids(tok, "What is 2+3?"))
    assert text == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+3?"
                    "<|im_end|>\n<|im_start|>assistant\n")
    # Dream's tokenizer_config.json sends AutoTokenizer to remote code (tokenization_dream.DreamTokenizer) and
    # ships vocab.json + merges.txt: read as Qwen2's byte-level BPE, never by running that code
    alt = tmp_path / "remote"
    alt.mkdir()
    shutil.copy(path / "config.json", alt / "config.json")  # names the family whose reader reads these files
    cfg = json.loads((path / "tokenizer_config.json").read_text())
    cfg.update(tokenizer_class="DreamTokenizer", auto_map={"AutoTokenizer": ["tokenization_dream.DreamTokenizer", None]})
    core = json.loads((path / "tokenizer.json").read_text())
    (alt / "vocab.json").write_text(json.dumps(core["model"]["vocab"]))
    (alt / "merges.txt").write_text("#version: 0.2\n")
    cfg["added_tokens_decoder"] = {str(t["id"]): {**t, "special": True} for t in core["added_tokens"]}
    (alt / "tokenizer_config.json").write_text(json.dumps(cfg))
    (alt / "tokenization_dream.py").write_text("raise SystemExit('remote code ran')\n")
    alt_tok = load_tokenizer(alt)
    assert alt_tok.convert_tokens_to_ids("<|mask|>") == MASK and alt_tok.convert_tokens_to_ids("<|im_end|>") == 258
    assert alt_tok("a b!")["input_ids"] == tok("a b!")["input_ids"] == [97, 32, 98, 33]


def test_greedy_semi_ar_sampling_equals_an_independent_loop_over_qwen2(dream):
    """d1's sampler (low-confidence remasking, semi-AR blocks, temperature 0) on Dream against a plain loop
    that calls transformers' Qwen2 (bidirectional, shifted) at every step."""
    path, qwen = dream
    model = from_pretrained(path).eval()
    prompt = torch.randint(0, 256, (2, 6), generator=torch.Generator().manual_seed(3))
    gen, block, steps = 8, 4, 4
    with torch.no_grad():
        ours = generate(model, prompt, gen_length=gen, block_length=block, steps=steps, temperature=0.0)
    x = torch.cat([prompt, torch.full((2, gen), MASK)], dim=1)
    per_block = steps // (gen // block)
    for b in range(gen // block):
        lo, hi = prompt.shape[1] + b * block, prompt.shape[1] + (b + 1) * block
        for row in range(2):
            counts = [block // per_block + (s < block % per_block) for s in range(per_block)]
            for s in range(per_block):
                logits = qwen_logits(qwen, x[row:row + 1])[0].double()  # (T, V)
                logits[:, MASK] = float("-inf")  # the sampler never writes the mask token
                probs = logits.softmax(-1)
                best = {i: (probs[i].max().item(), probs[i].argmax().item()) for i in range(lo, hi) if x[row, i] == MASK}
                for i in sorted(best, key=lambda i: -best[i][0])[:counts[s]]:
                    x[row, i] = best[i][1]
    assert torch.equal(ours, x) or torch.equal(ours[:, prompt.shape[1]:], x[:, prompt.shape[1]:])


def test_the_samplers_kv_cache_is_refused_up_front_for_dream():
    model = make_tiny_model()
    calls = []
    model.register_forward_hook(lambda *a: calls.append(1))
    with pytest.raises(ValueError, match="shifted logits") as e:
        sampling.generate(model, torch.zeros(1, 4, dtype=torch.long), gen_length=8, block_length=4, steps=4,
                          cache="dual")
    assert "\n" not in str(e.value) and not calls


@pytest.fixture(scope="module")
def tiny_dream(tmp_path_factory):
    return make_tiny_dream(tmp_path_factory.mktemp("tiny") / "dream")


def test_methods_dream_writes_the_tiny_dream_and_make_tiny_reads_its_family(tmp_path):
    # `python -m methods.dream` (was modelio.checkpoint's --family dream): Dream's layout, at --d-model 64 too (2
    # query heads sharing one key/value head); make_tiny's family="dream" once the module is imported
    from conftest import REPO, run
    out = run([sys.executable, "-m", "methods.dream", "--out-dir", str(tmp_path / "cli"), "--n-layers", "1"], REPO)
    assert "wrote" in out and "logits" in out
    assert_dream_dir(tmp_path / "cli")
    same = make_tiny(tmp_path / "api", family="dream", n_layers=1, d_model=128, n_heads=4, n_kv_heads=1,
                     mlp_hidden_size=384)
    for f in ("config.json", "model.safetensors.index.json", "tokenizer.json", "model-00001-of-00001.safetensors"):
        assert (tmp_path / "cli" / f).read_bytes() == (same / f).read_bytes(), f
    run([sys.executable, "-m", "methods.dream", "--out-dir", str(tmp_path / "narrow"), "--d-model", "64",
         "--n-layers", "1"], REPO)
    assert json.loads((tmp_path / "narrow" / "config.json").read_text())["num_key_value_heads"] == 1


@pytest.mark.parametrize("script", ["sft.py", "grpo.py", "eval.py"])
def test_d1s_own_scripts_name_the_entry_point_that_reads_a_dream_directory(tiny_dream, tmp_path, script):
    import subprocess
    from conftest import REPO
    p = subprocess.run([sys.executable, script, "--model-dir", str(tiny_dream), "--out-dir", str(tmp_path / "o")],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr[-2000:]
    assert "model_type 'Dream'" in p.stderr and "python -m methods.sft / methods.grpo / methods.eval" in p.stderr
    assert not (tmp_path / "o").exists()


def assert_dream_dir(path):
    """A training save in Dream's own layout: its config.json and Qwen2 key names, loadable again."""
    assert json.loads((path / "config.json").read_text())["model_type"] == "Dream"
    keys = json.loads((path / "model.safetensors.index.json").read_text())["weight_map"]
    assert "lm_head.weight" in keys and "model.layers.0.self_attn.q_proj.bias" in keys
    assert from_pretrained(path).config.logit_shift


def test_sft_then_grpo_then_eval_run_on_dream(tiny_dream, tmp_path):
    from conftest import REPO, run
    run([sys.executable, "-m", "methods.sft", "--model-dir", str(tiny_dream), "--out-dir", str(tmp_path / "sft"),
         "--max-steps", "2", "--eval-every", "2", "--batch-size", "4", "--num-examples", "16", "--max-length", "128"],
        REPO)
    assert_dream_dir(tmp_path / "sft")
    run([sys.executable, "-m", "methods.grpo", "--model-dir", str(tmp_path / "sft"), "--out-dir",
         str(tmp_path / "grpo"), *SMALL_ROUND], REPO)
    assert_dream_dir(tmp_path / "grpo")
    out = run([sys.executable, "-m", "methods.eval", "--model-dir", str(tmp_path / "grpo"), "--out-dir",
               str(tmp_path / "eval"), "--toy-items", "4"], REPO)
    assert "accuracy" in out


SMALL_ROUND = ["--rounds", "1", "--num-examples", "4", "--prompts-per-step", "2", "--groups-per-micro", "2",
               "--num-generations", "2", "--num-iterations", "1", "--gen-length", "16", "--block-length", "16",
               "--diffusion-steps", "4"]  # the toy's canvas: its 16-digit labels fit no shorter one


@pytest.mark.parametrize("objective", ["wd1", "justgrpo", "spg", "espo", "gdsd", "trajectory"])
def test_every_objective_runs_a_round_on_dream(tiny_dream, tmp_path, objective):
    from conftest import REPO, run
    extra = {"justgrpo": ["--block-length", "1", "--diffusion-steps", "16"],
             "trajectory": ["--trajectory-segments", "2"]}.get(objective, [])
    run([sys.executable, "-m", "methods.grpo", "--model-dir", str(tiny_dream), "--out-dir", str(tmp_path / "rl"),
         *SMALL_ROUND, "--objective", objective, *extra], REPO)
    rec = [json.loads(line) for line in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert rec and all(math.isfinite(r["loss"]) for r in rec if "loss" in r)
    assert_dream_dir(tmp_path / "rl")


@pytest.mark.parametrize("order", ["entropy", "topk_margin", "maskgit_plus"])
def test_dreams_own_greedy_orders_equal_a_loop_of_its_diffusion_generate_over_qwen2(dream, order):
    """Dream's decoding (diffusion_generate: the whole canvas, linspace(1, eps) schedule, top-k confidences) run by
    methods/sampling.py on our Dream, against a loop written from Dream's generation_utils over transformers' Qwen2."""
    path, qwen = dream
    model = from_pretrained(path).eval()
    prompt = torch.randint(0, 256, (2, 5), generator=torch.Generator().manual_seed(4))
    gen, steps, eps = 10, 4, 1e-3
    with torch.no_grad():
        ours = sampling.generate(model, prompt, gen_length=gen, block_length=gen, steps=steps, temperature=0.0,
                                 remasking=order, eps=eps)
    x = torch.cat([prompt, torch.full((2, gen), MASK)], dim=1)
    t = torch.linspace(1, eps, steps + 1)
    for i in range(steps):
        blank = x == MASK
        logits = qwen_logits(qwen, x)                                       # (B, T, V), shifted
        probs = logits.softmax(-1)
        best = logits.masked_fill(torch.arange(logits.shape[-1]) == MASK, float("-inf")).argmax(-1)  # never the mask
        if order == "entropy":
            conf = (probs * torch.log(probs + 1e-10)).sum(-1)
        elif order == "topk_margin":
            top = probs.topk(2, dim=-1).values
            conf = top[..., 0] - top[..., 1]
        else:
            conf = probs.gather(-1, best[..., None])[..., 0]
        n_blank = blank.sum() / blank.shape[0]                              # the batch average, as Dream has it
        k = int(n_blank * (1 - t[i + 1] / t[i])) if i < steps - 1 else int(n_blank)
        conf = conf.masked_fill(~blank, float("-inf"))
        for row in range(2):
            for j in conf[row].topk(k).indices.tolist() if k else []:
                x[row, j] = best[row, j]
    assert (x != MASK).all() and torch.equal(ours, x)


def test_lora_and_the_4bit_base_keep_dreams_qkv_biases(dream, tmp_path):
    from modelio.adapters import add_lora, is_4bit, merge_lora
    path, _ = dream
    stored = load_file(str(path / "model.safetensors"))
    bias = "model.layers.1.self_attn.v_proj.bias"
    # LoRA on q, k, v: a save merges the adapters into the weights and writes each bias under its plain name
    model = from_pretrained(path)
    add_lora(model, r=4, alpha=8, dropout=0.0, targets=("q_proj", "k_proj", "v_proj"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    ids = torch.randint(0, 256, (1, 12), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        adapted = model(ids)
    save_pretrained(model, tmp_path / "lora")
    back = from_pretrained(tmp_path / "lora")
    assert torch.equal(back.state_dict()["transformer.blocks.1.v_proj.bias"], stored[bias])
    with torch.no_grad():
        assert (back(ids) - adapted).abs().max() < 1e-5
        assert (merge_lora(model)(ids) - adapted).abs().max() < 1e-5
    # the NF4 base (d1's QLoRA): block weights quantized, biases dense, whichever of the two a shard holds first
    q4 = from_pretrained(path, load_in_4bit=True)
    layer = q4.transformer.blocks[1].v_proj
    assert is_4bit(layer) and torch.equal(layer.bias.float(), stored[bias].bfloat16().float())
    dense = from_pretrained(path, dtype=torch.bfloat16)
    with torch.no_grad():
        a, b = q4(ids).float(), dense(ids).float()
    assert torch.isfinite(a).all() and torch.corrcoef(torch.stack([a.flatten(), b.flatten()]))[0, 1] > 0.95


def test_a_dream_hub_id_resolves_from_the_cache_and_loads(tiny_dream, tmp_path, monkeypatch):
    from conftest import write_hub_cache
    from modelio.hub import resolve_model
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # no local folder named like the id's owner
    repo, commit = "Dream-org/Dream-v0-Instruct-7B", "d7ea" * 10
    write_hub_cache(tmp_path / "cache", repo, tiny_dream, commit)
    resolved = resolve_model(repo, cache_dir=tmp_path / "cache")
    assert (resolved.repo, resolved.revision) == (repo, commit)
    model, tok = load(str(resolved.path))
    assert model.config.logit_shift and special_ids(tok, model.config).mask == MASK


@pytest.mark.parametrize("module, flag", [("methods.grpo", "--rollout-cache"), ("methods.eval", "--cache")])
def test_the_kv_cache_on_dream_is_refused_before_anything_runs(tiny_dream, tmp_path, module, flag):
    import subprocess
    from conftest import REPO
    p = subprocess.run([sys.executable, "-m", module, "--model-dir", str(tiny_dream), "--out-dir",
                        str(tmp_path / "o"), flag, "dual"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "shifted logits (Dream)" in p.stderr
    assert not (tmp_path / "o").exists()
