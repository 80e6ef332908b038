"""
Tests for grpo.py's math (loss, advantages, masks) against hand computations, and the DDP
equivalence of a 2-process gloo run with 1 process on the same global batch.

Run: python -m pytest tests/test_grpo.py -q
"""
import argparse
import json
import math
import subprocess
import sys
from contextlib import nullcontext

import pytest
import torch

import grpo
from conftest import REPO, SHARED_DATA, run, tiny_model, torchrun, write_digit_model
from grpo import MicroBatch, completion_mask, group_advantages, grpo_loss, policy_step, score_old_ref
from modelio.adapters import add_lora, lora_disabled
from modelio.checkpoint import from_pretrained
from taskdata.data import load_rl_data, pad_left
from logprob import FIXED_MASK_SEED, mask_generator, mask_seeds, one_step_logprobs
from ops.metrics import read_metrics, round_metrics


def test_completion_mask_keeps_up_to_and_including_first_eos():
    E = 9
    comp = torch.tensor([[1, 2, E, E, E], [1, E, 3, E, 4], [1, 2, 3, 4, 5], [E, E, 1, 2, 3]])
    expected = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]).float()
    assert torch.equal(completion_mask(comp, E), expected)


def test_group_advantages_hand_computed_and_zero_mean():
    r = torch.tensor([1.0, 0.0, 0.5, 2.0, 2.0, 2.0])
    adv = group_advantages(r, 3)
    torch.testing.assert_close(adv, torch.tensor([0.5, -0.5, 0.0, 0.0, 0.0, 0.0]))
    r = torch.randn(40)
    adv = group_advantages(r, 8)
    assert adv.view(5, 8).mean(1).abs().max() < 1e-6
    scaled = group_advantages(r, 8, scale_std=True)
    torch.testing.assert_close(scaled.view(5, 8).std(1), torch.ones(5) * (1 - 1e-3), atol=1e-3, rtol=0)


def hand_loss(logp, old, ref, adv, mask, eps, beta):
    """The diffu-GRPO objective written token by token with python floats (docs/d1.md §4.2)."""
    num, den, kl_sum = 0.0, 0.0, 0.0
    for i in range(len(logp)):
        for k in range(len(logp[0])):
            if mask[i][k] == 0:
                continue
            rho = math.exp(logp[i][k] - old[i][k])
            term = -min(rho * adv[i], min(max(rho, 1 - eps), 1 + eps) * adv[i])
            d = ref[i][k] - logp[i][k]
            kl = math.exp(d) - d - 1
            num += term + beta * kl
            kl_sum += kl
            den += 1
    return num / den, kl_sum / den


def test_grpo_loss_matches_hand_computation():
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(4, 6, generator=g) * 3
    old = logp + 0.6 * torch.randn(4, 6, generator=g)  # ratios well outside [0.5, 1.5] too
    ref = logp + 0.3 * torch.randn(4, 6, generator=g)
    adv = torch.tensor([1.0, -0.5, 0.25, -0.75])
    mask = torch.tensor([[1, 1, 1, 0, 0, 0], [1] * 6, [1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]]).float()
    for beta in (0.0, 0.04):
        loss, stats = grpo_loss(logp, old, ref, adv, mask, epsilon=0.5, beta=beta)
        expected, kl = hand_loss(logp.tolist(), old.tolist(), ref.tolist(), adv.tolist(), mask.tolist(), 0.5, beta)
        assert abs(loss.item() - expected) < 1e-5
        if beta:
            assert abs(stats["kl"] - kl) < 1e-5
    assert 0 < stats["clip_frac"] < 1


def test_zero_variance_group_gives_zero_gradient_and_sign_is_right():
    logp = (-torch.rand(6, 5)).requires_grad_()
    adv = group_advantages(torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 0.0]), 3)  # group 1: all equal
    loss, _ = grpo_loss(logp, logp.detach(), None, adv, torch.ones(6, 5), 0.5, 0.0)
    loss.backward()
    assert torch.all(logp.grad[:3] == 0)  # no signal from a group whose rewards are all equal
    # positive advantage: raising the token's log-prob lowers the loss (gradient is negative)
    assert torch.all(logp.grad[3] < 0) and torch.all(logp.grad[4:] > 0)


class Spy(torch.nn.Module):
    """Records every input the wrapped model sees."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config, self.seen = model, model.config, []

    def forward(self, ids, attention_mask=None):
        self.seen.append(ids.clone())
        return self.model(ids, attention_mask)


def test_ratio_is_one_at_theta_old_and_masks_identical_for_policy_old_ref():
    model = tiny_model()
    add_lora(model, r=4, alpha=8, dropout=0.0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.3)  # the adapted policy differs from the reference
    spy = Spy(model)
    prompt = torch.randint(0, 48, (4, 10))
    completion = torch.randint(0, 49, (4, 6))
    seed, micro = 1234, 3
    with torch.no_grad():
        old = one_step_logprobs(spy, prompt, completion, p_mask_prompt=0.5, generator=mask_generator(seed, micro))
        with lora_disabled(model):
            ref = one_step_logprobs(spy, prompt, completion, p_mask_prompt=0.5, generator=mask_generator(seed, micro))
    logp = one_step_logprobs(spy, prompt, completion, p_mask_prompt=0.5, generator=mask_generator(seed, micro))
    assert torch.equal(spy.seen[0], spy.seen[1]) and torch.equal(spy.seen[0], spy.seen[2])
    assert (spy.seen[0][:, :10] == 49).any()  # some prompt tokens really were masked
    assert torch.equal(logp.detach(), old)  # ratio exactly 1 at the first inner step
    assert (ref - old).abs().max() > 1e-3  # and the reference really is another model
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    loss, stats = grpo_loss(logp, old, ref, adv, torch.ones(4, 6), 0.5, 0.04)
    assert stats["clip_frac"] == 0.0
    loss.backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if "lora_A" in n)
    # another micro-batch index gives another mask
    other = one_step_logprobs(spy, prompt, completion, p_mask_prompt=0.5, generator=mask_generator(seed, micro + 1))
    assert not torch.equal(spy.seen[-1], spy.seen[0]) and other.shape == old.shape


def test_pad_left():
    assert pad_left([[1, 2], [3], [4, 5, 6]], 0).tolist() == [[0, 1, 2], [0, 0, 3], [4, 5, 6]]


@pytest.mark.parametrize("lora", [False, True])
def test_ddp_two_processes_equal_one_process(tmp_path, lora):
    model_dir = tmp_path / "tiny"
    write_digit_model(model_dir)
    common = ["--model-dir", str(model_dir), "--task", "toy", "--num-examples", "32", "--rounds", "2", "--toy-blanks", "6,8",
              "--prompts-per-step", "4", "--groups-per-micro", "1", "--num-generations", "3",
              "--num-iterations", "2", "--gen-length", "16", "--block-length", "16", "--diffusion-steps", "4",
              "--beta", "0.04", "--lr", "1e-2", "--save-every", "100"]
    if lora:
        common += ["--lora-r", "4", "--lora-alpha", "8", "--lora-dropout", "0"]
    out1 = run([sys.executable, str(REPO / "grpo.py"), *common, "--out-dir", str(tmp_path / "one")], REPO)
    run(torchrun(2) + [str(REPO / "grpo.py"), *common, "--out-dir", str(tmp_path / "two")], REPO)
    start, one, two = (from_pretrained(p).state_dict() for p in (model_dir, tmp_path / "one", tmp_path / "two"))
    moved = max((one[k] - start[k]).abs().max().item() for k in one)
    assert moved > 1e-3, out1[-2000:]  # the run really trained
    for k in one:
        torch.testing.assert_close(one[k], two[k], atol=1e-5, rtol=1e-4)


def test_resume_continues_the_same_run(tmp_path):
    model_dir = tmp_path / "tiny"
    write_digit_model(model_dir)
    common = ["--model-dir", str(model_dir), "--num-examples", "16", "--prompts-per-step", "2", "--toy-blanks", "6,8",
              "--groups-per-micro", "2", "--num-generations", "3", "--num-iterations", "2", "--gen-length", "16",
              "--block-length", "16", "--diffusion-steps", "4", "--lr", "1e-2", "--save-every", "1",
              "--lora-r", "4", "--lora-alpha", "8", "--lora-dropout", "0", "--beta", "0.04", "--warmup-rounds", "4"]
    grpo = [sys.executable, str(REPO / "grpo.py")]
    run(grpo + common + ["--rounds", "2", "--out-dir", str(tmp_path / "straight")], REPO)
    run(grpo + common + ["--rounds", "1", "--out-dir", str(tmp_path / "resumed")], REPO)
    out = run(grpo + common + ["--rounds", "2", "--resume", "--out-dir", str(tmp_path / "resumed")], REPO)
    assert "resumed from" in out and "round 2:" in out and "round 1:" not in out
    # --warmup-rounds 4: round r steps at lr * r / 4, also after a resume (the lr is a function of the round)
    for d in ("straight", "resumed"):
        state = torch.load(tmp_path / d / "saves" / "step-000002" / "trainer_state.pt", weights_only=False)
        assert [g["lr"] for g in state["optimizer"]["param_groups"]] == [1e-2 * 2 / 4]
    a, b = (from_pretrained(tmp_path / p).state_dict() for p in ("straight", "resumed"))
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=1e-5)
    # metrics.jsonl: one line per round, and the resumed file tells the same run (bar wall-clock times)
    straight, resumed = (read_metrics(str(tmp_path / p)) for p in ("straight", "resumed"))
    assert [r["step"] for r in straight] == [r["step"] for r in resumed] == [1, 2]
    for x, y in zip(straight, resumed):
        assert x.keys() == y.keys() and {"reward", "loss", "kl", "ratio_mean", "grad_norm", "token_nll"} <= x.keys()
        for k in x:
            if k != "elapsed_s" and not k.startswith("s_"):
                assert abs(x[k] - y[k]) < 1e-4 * (1 + abs(x[k])), (k, x[k], y[k])
    # ratio exactly 1 at the first inner step of each round, so its mean over the two steps stays near 1
    assert abs(straight[0]["ratio_mean"] - 1) < 0.5 and straight[0]["grad_norm"] > 0


def test_mask_seeds_fixed_ablation_and_keys():
    assert mask_seeds(0, 5, 4, fixed=True) == [FIXED_MASK_SEED] * 4  # d1 Fig. 4: seed 42 at every step
    a, b, c = mask_seeds(0, 5, 12), mask_seeds(0, 6, 12), mask_seeds(1, 5, 12)
    assert a == mask_seeds(0, 5, 12) and all(0 <= s < 4096 for s in a)  # keyed, in d1's range
    assert a != b and a != c  # another round or run seed: other masks





def inner_steps_use_their_seeds(monkeypatch, hp, old_ref=score_old_ref, micro=grpo.micro_step):
    """score_old_ref stores old log-probs per seed; policy_step j must score under seed j, so that the
    ratio is exactly 1 before the first update (and is not for any other seed). The field's phases
    (tests/test_methods_grpo.py) pass their own old_ref and micro."""
    model = tiny_model()
    g = torch.Generator().manual_seed(0)
    prompt, completion = torch.randint(0, 48, (3, 10), generator=g), torch.randint(0, 49, (3, 6), generator=g)
    batch = MicroBatch(7, [], prompt, completion, torch.ones(3, 6), adv=torch.tensor([1.0, -1.0, 0.0]))
    seeds = [11, 12, 13]
    old_ref(model, None, None, [batch], seeds, hp, torch.no_grad)
    assert len(batch.old) == 3 and not torch.equal(batch.old[0], batch.old[1])
    seen = []
    monkeypatch.setattr(grpo, "grpo_loss", lambda logp, old, *a: (seen.append((logp.detach(), old)),
                                                                   grpo_loss(logp, old, *a))[1])
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # weights stay θ_old
    for j in range(3):
        policy_step(model, [batch], j, seeds[j], opt, list(model.parameters()), hp, nullcontext,
                    model.config.mask_token_id, accum=1, micro=micro)
        logp, old = seen[-1]
        assert torch.equal(logp, batch.old[j]) and torch.equal(old, batch.old[j])
    assert not torch.equal(seen[0][0], batch.old[1])


def test_inner_step_j_uses_mask_seed_j(monkeypatch):
    inner_steps_use_their_seeds(monkeypatch, grpo.hyper(grpo.parse_args(["--p-mask", "0.5", "--beta", "0",
                                                                         "--grad-clip", "0"])))


def test_load_rl_data_several_tasks_shuffled_with_d1_seed():
    if not (SHARED_DATA / "gsm8k").exists():
        pytest.skip("needs ../shared/data")
    from tasks import TASKS, load_task
    paths = [SHARED_DATA / "gsm8k/test.jsonl", SHARED_DATA / "d1_countdown/countdown_cd3_test.jsonl"]
    args = argparse.Namespace(task="gsm8k,countdown", data=",".join(map(str, paths)))
    exs = load_rl_data(args, TASKS)
    n_gsm, n_cd = len(load_task("gsm8k", paths[0])), len(load_task("countdown", paths[1]))
    assert len(exs) == n_gsm + n_cd
    assert sum(ex["task"] == "gsm8k" for ex in exs) == n_gsm  # every example tagged with its task
    # shuffled (not one task after the other), the same way every time (d1: seed 42)
    assert {ex["task"] for ex in exs[:50]} == {"gsm8k", "countdown"}
    assert [ex["prompt"] for ex in load_rl_data(args, TASKS)] == [ex["prompt"] for ex in exs]
    with pytest.raises(ValueError, match="needs a file"):
        load_rl_data(argparse.Namespace(task="gsm8k,math", data=str(paths[0])), TASKS)


def test_round_metrics_against_a_hand_count():
    # two micro-batches of two groups of G = 3; group rewards (1, 0, 0), (1, 1, 1) | (0.5, 0.5, 0.5), (2, 0, 1)
    def mb(rewards, lengths, rows, calls):
        mask = torch.tensor([[1.0] * n + [0.0] * (4 - n) for n in lengths])  # (6, 4)
        return MicroBatch(0, [], None, torch.tensor(rows), mask, record={"model_calls": calls},
                          rewards=torch.tensor(rewards))
    # distinct completions are compared on what the mask keeps (up to the first EOS): tokens after it never count
    rows_a = [[5, 6, 7, 8], [5, 9, 9, 9], [5, 6, 1, 1], [1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 5]]
    rows_b = [[7, 1, 1, 1], [7, 2, 2, 2], [7, 3, 3, 3], [4, 4, 0, 0], [4, 4, 9, 9], [4, 5, 0, 0]]
    batches = [mb([1, 0, 0, 1, 1, 1], [4, 1, 2, 3, 4, 4], rows_a, 8), mb([0.5, 0.5, 0.5, 2, 0, 1], [1, 1, 1, 2, 2, 2],
                                                                        rows_b, 5)]
    m = round_metrics(batches, 3, {"loss": 0.25}, {"correctness": 6.0})
    # by hand, the sets of visible prefixes: {5678, 5, 56}, {123, 1234, 1235}, {7}, {44, 44, 45}
    assert m["distinct"] == pytest.approx((3 + 3 + 1 + 2) / 12)
    assert m["rollout_calls"] == 6.5  # the mean over the two rollouts
    std = lambda xs: math.sqrt(sum((x - sum(xs) / 3) ** 2 for x in xs) / 2)  # sample std, as torch
    assert abs(m["reward"] - 8.5 / 12) < 1e-6
    assert abs(m["reward_std"] - (std([1, 0, 0]) + 0 + 0 + std([2, 0, 1])) / 4) < 1e-6
    assert m["zero_std_groups"] == 0.5  # two of four groups carry no signal
    assert abs(m["completion_len"] - 27 / 12) < 1e-6
    assert m["loss"] == 0.25 and m["r/correctness"] == 0.5


def test_test_curve_logs_a_heldout_curve_that_ends_at_eval_py(tmp_path):
    # --eval-every with --test-curve: the lab's study curve, held-out greedy accuracy before round 1 and after each
    # round; the last point must be what eval.py reports for the saved model on the same items (same protocol, code)
    model_dir = tmp_path / "tiny"
    write_digit_model(model_dir)
    out = tmp_path / "grpo"
    run([sys.executable, str(REPO / "grpo.py"), "--model-dir", str(model_dir), "--out-dir", str(out),
         "--num-examples", "8", "--prompts-per-step", "2", "--groups-per-micro", "2", "--num-generations", "3",
         "--num-iterations", "1", "--diffusion-steps", "4", "--rounds", "2", "--lr", "1e-2",
         "--eval-every", "1", "--test-curve", "--eval-items", "20"], REPO)
    curve = [(r["step"], r["heldout_acc"]) for r in read_metrics(str(out)) if "heldout_acc" in r]
    assert [s for s, _ in curve] == [0, 1, 2]
    run([sys.executable, str(REPO / "eval.py"), "--model-dir", str(out), "--toy-items", "20",
         "--out-dir", str(tmp_path / "eval"), "--json", str(tmp_path / "eval.json")], REPO)
    assert json.loads((tmp_path / "eval.json").read_text())[0]["accuracy"] == curve[-1][1]
    # the test curve is the toy's only; --eval-every otherwise needs a validation split (--val-size)
    p = subprocess.run([sys.executable, str(REPO / "grpo.py"), "--eval-every", "1", "--task", "gsm8k",
                        "--out-dir", str(tmp_path / "refused")], cwd=REPO, capture_output=True, text=True)
    assert p.returncode != 0 and "--eval-every measures the validation split" in p.stderr
