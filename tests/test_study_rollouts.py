"""
Tests for lab/study_rollouts.py: the modes it compares, and its figures for one checkpoint against
what they must be (the exact sampler makes `steps` calls; a threshold at most that; the shares are shares;
the nll is the one-step estimator's on the same rollout).

Run:  .venv/bin/python -m pytest tests/test_study_rollouts.py -q
"""
import copy
import json
from contextlib import nullcontext

import torch

import grpo
import methods.grpo
import tasks
from conftest import write_digit_model
from lab.study_rollouts import group_stats, main, modes
from modelio.checkpoint import load
from taskdata.data import group_prompts, load_rl_data
from logprob import one_step_logprobs


def test_modes_cover_both_threshold_rules():
    m = modes([0.9, 0.5])
    assert list(m)[:2] == ["exact", "dual cache"] and len(m) == 2 + 2 * 2
    assert m["dual + τ 0.5 fast_dllm"] == ("dual", 0.5, "fast_dllm") and m["exact"][:2] == ("none", 0.0)


def test_group_stats_of_one_rollout(tmp_path):
    write_digit_model(tmp_path / "m")
    model, tok = load(tmp_path / "m")
    gargs = methods.grpo.parse_args(["--num-generations", "3", "--gen-length", "16", "--block-length", "8",
                                     "--diffusion-steps", "8", "--num-examples", "8"])
    exs = load_rl_data(gargs, tasks.TASKS)[:4]
    exact = group_stats(model, tok, exs, gargs, seed=0)
    assert exact["calls"] == 8 and 1 / 3 <= exact["distinct"] <= 1 and 0 <= exact["zero_spread"] <= 1
    # the nll is the one-step estimator's on that very rollout, recomputed here
    prompt = group_prompts(tok, exs, 3, gargs.max_prompt_length, model.config.eos_token_id)[0]
    hp = grpo.hyper(gargs)  # the exact sampler: d1's rollout
    completion, _ = grpo.rollout(model, prompt, torch.Generator().manual_seed(0), nullcontext, hp)
    mask = grpo.completion_mask(completion, model.config.eos_token_id)
    logp = one_step_logprobs(model, prompt, completion, p_mask_prompt=0.0)
    assert abs(exact["nll"] - (-(logp * mask).sum() / mask.sum()).item()) < 1e-6
    fast = copy.copy(gargs)
    fast.rollout_cache, fast.rollout_threshold = "dual", 0.05
    assert group_stats(model, tok, exs, fast, seed=0)["calls"] < 8  # the threshold ends blocks early


def test_cli_writes_the_table(tmp_path, capsys):
    write_digit_model(tmp_path / "m")
    main(["--model-dir", str(tmp_path / "m"), "--prompts", "2", "--seeds", "1", "--thresholds", "0.5",
          "--num-generations", "2", "--num-examples", "4", "--json", str(tmp_path / "t.json")])
    table = json.loads((tmp_path / "t.json").read_text())["table"]
    assert set(table) == set(modes([0.5])) and "dual + τ 0.5 certainty" in capsys.readouterr().out
