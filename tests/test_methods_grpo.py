"""
Tests for the field's RL entry point (methods/grpo.py): its phases plugged into grpo.train; with no
field flag it is d1's round exactly; every estimator scores inner step j under mask seed j; an
objective without an old pass makes none; fast rollouts change which completions are sampled,
never how they are scored.

Run: python -m pytest tests/test_methods_grpo.py -q
"""
import hashlib
import math
import sys
from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch

import grpo
from conftest import REPO, run, tiny_model, write_digit_model
from grpo import MicroBatch, completion_mask, policy_step
from lab.cost import analytic_passes
from logprob import mask_seeds
from methods import grpo as field
from methods.estimators import ESTIMATORS
from modelio.adapters import lora_disabled
from ops.metrics import read_metrics
from test_grpo import Spy, inner_steps_use_their_seeds


def round_of(args):
    """The field's round for parsed flags: its objective, Hyper and the three phase functions."""
    obj = field.objective_of(args)
    return SimpleNamespace(args=args, obj=obj, hp=field.hyper(args, obj),
                           rollout=field.rollout_of(args, obj), old_ref=field.old_ref_of(obj),
                           micro=field.micro_of(obj))


def test_without_field_flags_the_entry_point_is_grpo_py(tmp_path):
    # the same flags through grpo.py and python -m methods.grpo: bit-identical weights
    model_dir = tmp_path / "tiny"
    write_digit_model(model_dir)
    common = ["--model-dir", str(model_dir), "--num-examples", "8", "--prompts-per-step", "2",
              "--groups-per-micro", "1", "--num-generations", "3", "--num-iterations", "2",
              "--diffusion-steps", "4", "--rounds", "2", "--lr", "1e-2", "--beta", "0.04"]
    run([sys.executable, str(REPO / "grpo.py"), *common, "--out-dir", str(tmp_path / "core")], REPO)
    run([sys.executable, "-m", "methods.grpo", *common, "--out-dir", str(tmp_path / "field")], REPO)
    digest = [hashlib.sha256((tmp_path / d / "model-00001-of-00001.safetensors").read_bytes()).hexdigest()
              for d in ("core", "field")]
    assert digest[0] == digest[1]


def test_d1_record_is_grpo_py_own_functions():
    args = field.parse_args([])
    r = round_of(args)
    assert r.obj is not None and r.obj.loss is grpo.d1_loss and r.obj.logprobs is grpo.one_step
    assert r.rollout is grpo.rollout  # no flag asks for another sampler
    assert {"objective", "estimator", "rollout_cache"} <= set(vars(args)) and "objective" not in vars(
        grpo.parse_args([]))


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_inner_step_j_uses_mask_seed_j(monkeypatch, estimator):
    # every estimator, through the field's phases: the ratio is exactly 1 at inner step j under seed j
    r = round_of(field.parse_args(["--p-mask", "0.5", "--beta", "0", "--estimator", estimator, "--grad-clip", "0"]))
    inner_steps_use_their_seeds(monkeypatch, r.hp, r.old_ref, r.micro)


def test_an_objective_without_old_pass_makes_no_old_or_ref_calls():
    # wd1 reads neither θ_old nor θ_ref: score_old_ref runs no forward at all, and analytic_passes counts none
    model = tiny_model()
    spy = Spy(model)
    prompt, completion = torch.randint(0, 48, (3, 10)), torch.randint(0, 49, (3, 6))
    batch = MicroBatch(0, [], prompt, completion, torch.ones(3, 6), adv=torch.tensor([1.0, -1.0, 0.0]))
    for objective, calls in (("wd1", 0), ("diffu_grpo", 2 * 2)):  # diffu_grpo: old and ref, 2 seeds
        args = field.parse_args(["--objective", objective, "--beta", "0.04", "--num-generations", "3"])
        r = round_of(args)
        spy.seen.clear()
        batch.old, batch.ref = [], []
        r.old_ref(spy, None, lambda: lora_disabled(model), [batch], [5, 6], r.hp, nullcontext)
        assert len(spy.seen) == calls
        passes = analytic_passes(args)
        assert passes["old_fwd"] + passes["ref_fwd"] == calls
    # and its update runs on the batch without old log-probs
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    r = round_of(field.parse_args(["--objective", "wd1", "--num-generations", "3"]))
    st = policy_step(model, [batch], 0, 5, opt, list(model.parameters()), r.hp, nullcontext,
                     model.config.mask_token_id, accum=1, micro=r.micro)
    assert st["skipped"] == 0.0 and math.isfinite(st["loss"]) and "seq_logp" in st and r.obj is not field.D1


# -----------------------------------------------------------------------------
# fast rollouts (--rollout-cache / --rollout-threshold): they change which completions are sampled, never how
# they are scored


@pytest.mark.parametrize("cache,threshold,rule", [("none", 0.0, "certainty"), ("prefix", 0.0, "certainty"),
                                                  ("dual", 0.0, "certainty"), ("none", 0.03, "certainty"),
                                                  ("dual", 0.03, "certainty"), ("dual", 0.03, "fast_dllm")])
def test_ratio_is_exactly_one_at_inner_step_zero_for_every_rollout_mode(cache, threshold, rule):
    import copy
    model = tiny_model()
    prompt = torch.randint(0, 48, (2, 5), generator=torch.Generator().manual_seed(1)).repeat_interleave(3, dim=0)
    args = field.parse_args(["--num-iterations", "2", "--beta", "0.04", "--p-mask", "0.3", "--gen-length", "12",
                            "--block-length", "4", "--diffusion-steps", "12", "--temperature", "1.0",
                            "--rollout-cache", cache, "--rollout-threshold", str(threshold),
                            "--rollout-threshold-rule", rule])
    r = round_of(args)
    completion, sampler = r.rollout(model, prompt, torch.Generator().manual_seed(0), nullcontext,
                                    r.hp)  # (6, 12), 3 blocks of 4 steps
    # the mode acts: a threshold this low ends blocks early; without one, every step runs
    assert (sampler["model_calls"] < 12) if threshold else (sampler["model_calls"] == 12)
    b = MicroBatch(0, [], prompt, completion, completion_mask(completion, 48), record=sampler,
                   adv=torch.tensor([1.0, -1.0, 0.5, -0.5, 0.25, -0.25]))
    ref_model = copy.deepcopy(model).requires_grad_(False)  # full fine-tuning: the reference is a frozen copy
    seeds = mask_seeds(5, 0, 2)
    r.old_ref(model, ref_model, nullcontext, [b], seeds, r.hp, nullcontext)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-2)
    first = policy_step(model, [b], 0, seeds[0], opt, params, r.hp, nullcontext, 49, accum=1,
                        micro=r.micro)
    # θ_old was scored by the estimator under the same mask, not by the sampler: ρ = 1 bit for bit
    assert first["ratio_mean"] == 1.0 and first["ratio_dev"] == 0.0 and first["clip_frac"] == 0.0
    second = policy_step(model, [b], 1, seeds[1], opt, params, r.hp, nullcontext, 49, accum=1,
                         micro=r.micro)
    assert second["ratio_dev"] > 0  # the first step did move the policy


def test_fast_rollout_run_logs_its_rollouts(tmp_path):
    model_dir = tmp_path / "tiny"
    write_digit_model(model_dir)
    common = ["--model-dir", str(model_dir), "--num-examples", "16", "--prompts-per-step", "2", "--toy-blanks", "6,8",
              "--groups-per-micro", "1", "--num-generations", "3", "--num-iterations", "2", "--gen-length", "16",
              "--block-length", "8", "--diffusion-steps", "8", "--lr", "1e-2", "--rounds", "3", "--save-every", "10"]
    fast = common + ["--rollout-cache", "dual", "--rollout-threshold", "0.3"]
    cmd = [sys.executable, "-m", "methods.grpo"]
    run(cmd + fast + ["--out-dir", str(tmp_path / "fast")], REPO)
    run(cmd + common + ["--out-dir", str(tmp_path / "exact")], REPO)
    fast, exact = (read_metrics(str(tmp_path / d)) for d in ("fast", "exact"))
    # every round logs the rollouts: the exact sampler makes all 8 calls, the threshold at most 8
    assert all(r["rollout_calls"] == 8 for r in exact) and all(0 < r["rollout_calls"] <= 8 for r in fast)
    assert all(1 / 3 <= r["distinct"] <= 1 for r in fast + exact)
