"""
diffu-GRPO: reinforcement learning for a masked diffusion LM, d1's second stage (arXiv 2504.12216
Sec. 3; d1-spec §3-4). GRPO (DeepSeekMath, arXiv 2402.03300) needs per-token log-probs
log π(o_k | q), which a diffusion model does not give cheaply. d1's answer, the one-step estimator
(logprob.py): mask the whole completion and each prompt token with probability p = 0.15, run ONE
forward pass, and read every completion token's log-prob off it. The random prompt mask is drawn
from a seed that is stored, so the current, old and reference policies score each sample under the
same masked prompt q'.

One round, as written out in the loop below:
  1. rollout: for each prompt, G completions with sample.py (temperature 0.9, block 32, ...)
  2. rewards r_i: the sum of the task's reward functions on the decoded text (rewards.py; code is
     executed in sandbox.py, a micro-batch's programs in parallel)
  3. advantages A_i = r_i - mean(r_group)   (no division by the std, following Dr. GRPO; optional)
  4. μ mask seeds; for each, old and reference per-token log-probs, once, without gradients
     (reference = the base model with LoRA adapters switched off, or a frozen copy)
  5. μ optimizer steps; step j uses mask seed j:
       ρ_ik = exp(ℓθ_ik - ℓold_ik)
       L = mean over completion tokens of  -min(ρ A, clip(ρ, 1-ε, 1+ε) A) + β (e^(ℓref-ℓθ) - (ℓref-ℓθ) - 1)
     where "completion tokens" are those up to and including the first EOS, and the mean runs over
     all tokens of the micro-batch (token-level, as d1 does: longer answers weigh more).

Deliberate differences from d1's code (each is also noted where it happens):
  - a dedicated torch.Generator per mask seed instead of reseeding every global RNG;
  - mask seed j is used by step j: μ distinct masks per round (d1's `_step % μ` indexing with
    gradient accumulation 2 gives only μ/2 distinct masks);
  - rollouts and old/ref log-probs run in eval mode (no LoRA dropout), so ρ = 1 exactly at the
    first inner step; d1 leaves dropout on everywhere;
  - the sampler draws its Gumbel noise in float64 (d1's RL copy: bf16);
  - long prompts are cut from the left as d1 does, but we print how many were cut.

Runs that survive (README "Reliability"): bad input is one line before anything starts
(checks.py); every --save-every rounds a save that a crash cannot spoil (resume.py), from which
--resume continues bit for bit (every random stream is keyed by seed, round and micro-batch); a
non-finite loss or gradient skips the step on every rank, --max-bad-steps in a row stop the run.

Scale: torchrun DDP (LoRA, d1's set-up) or, for full fine-tuning, --fsdp (FSDP2: fp32 master
weights, gradients and AdamW state sharded over the ranks, bf16 compute on GPU; the frozen
reference copy is sharded too). --autocast runs every forward (rollout, old/ref, policy) under
torch.autocast(bf16) with the weights kept in --dtype.

Run:
    python grpo.py                                   # toy Sudoku on the tiny model, CPU, minutes
    python grpo.py --resume                          # after a crash: the same flags plus --resume
    torchrun --nproc_per_node=8 grpo.py --preset 8b --task gsm8k --data gsm8k/train.jsonl \\
        --model-dir LLaDA-8B-Instruct --out-dir out/grpo-gsm8k
    torchrun --nproc_per_node=8 grpo.py --preset 8b --fsdp --no-load-in-4bit --lora-r 0 \\
        --gradient-checkpointing --task gsm8k --data gsm8k/train.jsonl \\
        --model-dir out/sft-s1k-full --out-dir out/grpo-gsm8k-full     # full fine-tuning, sharded
    torchrun --nproc_per_node=8 grpo.py --preset 8b --task code --data KodCode-Light-RL-10K.jsonl \
        --model-dir LLaDA-8B-Instruct --out-dir out/grpo-code     # d1's code RL; programs run in sandbox.py
    torchrun --nproc_per_node=8 grpo.py --preset 8b --task leetcode \
        --data ../shared/data/leetcode_dataset/LeetCodeDataset-v0.2.0-train.jsonl.gz --out-dir out/grpo-leetcode
"""
import argparse
import os
import random
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from tqdm import tqdm

import eval as evaluation  # the toy's held-out accuracy for --eval-every
from lib.adapters import add_lora, lora_disabled
from lib.checkpoint import from_pretrained, load
from ops.checks import InputError, check_data_paths, check_fraction, check_model_dir, require, upfront
from ops.ddp import (DIST_TIMEOUT_S, check_training_flags, clip_grad_norm, finish, init_training, reseed, set_grad_sync,
                 shard_model, step_if_finite, wrap_for_training)
from logprob import ELBO_DRAWS, ESTIMATOR_ROWS, ESTIMATORS, estimate_logprobs
from ops.metrics import log_metrics, open_metrics
from model import BLOCK_LINEARS, compile_blocks
from ops.resume import check_run_dir, complete_saves, publish, restore_optimizer, resume_weights, save_checkpoint
from sample import check_schedule, generate
from lib.tokenizer import prompt_ids

# The two presets: the CPU toy, and the paper's recipe for LLaDA-8B (d1-spec §4.3; train.yaml).
# Any flag given on the command line overrides its preset value. The toy's lr is 1e-4: at 3e-4 (the
# default until 2026-11-24) the toy peaked mid-run and then decayed (gradient-norm spikes, ratios far
# from 1), and after clean-label SFT Adam's normalised steps random-walked the weights away from the
# SFT optimum; 1e-4 ended higher on all 3 seeds of `make run` (README, "What we measured about d1")
PRESETS = {
    "tiny": dict(num_generations=6, prompts_per_step=16, groups_per_micro=16, num_iterations=2,
                 epsilon=0.5, beta=0.0, p_mask=0.15, lr=1e-4, weight_decay=0.0, grad_clip=1.0,
                 gen_length=16, block_length=16, diffusion_steps=8, temperature=1.0,
                 max_prompt_length=256, lora_r=0, lora_alpha=64.0, load_in_4bit=False, rounds=30),
    "8b": dict(num_generations=6, prompts_per_step=16, groups_per_micro=1, num_iterations=12,
               epsilon=0.5, beta=0.04, p_mask=0.15, lr=3e-6, weight_decay=0.1, grad_clip=0.2,
               gen_length=256, block_length=32, diffusion_steps=128, temperature=0.9,
               max_prompt_length=200, lora_r=128, lora_alpha=64.0, load_in_4bit=True, rounds=700),
}

# flags a --resume may change without a note: how long to run, how often to save, where to stop
RESUME_MAY_CHANGE = {"rounds", "resume", "force", "save_every", "keep_last", "eval_every", "dist_timeout",
                     "max_bad_steps"}

# -----------------------------------------------------------------------------
# the math, as small pure functions


def completion_mask(completion, eos_id):
    """(B, N) float: 1 for tokens up to AND including the first EOS, 0 after (all ones if there
    is no EOS). d1 trains on the EOS itself and ignores the EOS padding that follows it."""
    is_eos = completion == eos_id  # (B, N)
    # number of EOS strictly before position k; the first EOS has 0 before it and is kept
    eos_before = torch.cumsum(is_eos.long(), dim=1) - is_eos.long()  # (B, N)
    # (B, N): what follows the first EOS is the EOS padding of the fixed-length canvas (d1-spec §2.4)
    return (eos_before == 0).float()


def group_advantages(rewards, group_size, scale_std=False, eps=1e-4):
    """A_i = r_i - mean of its group of G consecutive samples, (B,) -> (B,). d1 does not divide by
    the group std (Dr. GRPO, arXiv 2503.20783); scale_std=True gives the original GRPO form."""
    # rows [0:G], [G:2G], ... are one prompt's group: group_prompts repeats each prompt G times in a row
    r = rewards.view(-1, group_size)  # (num_groups, G)
    # A_i = r_i - mean of its group (d1-spec §4.2): a completion is judged only against
    # its siblings, so no value network is needed; the advantages of a group sum to 0
    adv = r - r.mean(dim=1, keepdim=True)  # (num_groups, G)
    if scale_std:
        # original GRPO: (r - mean) / (std + eps), unbiased std as torch's default. A group of equal rewards
        # has std 0 and adv 0: eps turns 0/0 into 0 instead of NaN
        adv = adv / (r.std(dim=1, keepdim=True) + eps)
    return adv.view(-1)


def grpo_loss(logp, old_logp, ref_logp, advantages, mask, epsilon, beta):
    """diffu-GRPO's clipped surrogate + β·k3 KL, averaged over the micro-batch's completion tokens.
    logp (B, N) with grad; old_logp, ref_logp (B, N) without (ref may be None when β = 0);
    advantages (B,); mask (B, N). Returns (loss, stats dict of floats)."""
    adv = advantages[:, None]  # (B, 1): every token of a completion shares its advantage
    ratio = torch.exp(logp - old_logp)  # (B, N); exactly 1 at the first step after the rollout
    # PPO's clipped surrogate (d1-spec §4.2; d1 trains with ε = 0.5; its config default is 0.2). For A > 0 the
    # clip removes any gain from raising ρ above 1 + ε; for A < 0, from lowering it below 1 - ε
    unclipped = ratio * adv  # (B, N)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * adv  # (B, N)
    per_token = -torch.min(unclipped, clipped)  # (B, N) the pessimistic PPO bound
    # β = 0: no reference pass at all (ref_logp is None) and the logged KL is 0
    kl = torch.zeros_like(logp)
    if beta != 0.0:
        # Schulman's k3 estimator of KL(π_θ || π_ref): e^(ref - θ) - (ref - θ) - 1 >= 0
        # evaluated at samples of π_old with no importance weight, as TRL does (d1-spec §4.2)
        d = ref_logp - logp  # (B, N)
        kl = torch.exp(d) - d - 1  # (B, N), >= 0 elementwise
        per_token = per_token + beta * kl
    # ONE token count for the whole micro-batch, not a mean per sequence (TRL's choice at d1's commit):
    # a longer answer weighs more (d1 issue #1: "we normalize by the number of effective tokens").
    # clamp: never 0 / 0
    n = mask.sum().clamp(min=1)
    loss = (per_token * mask).sum() / n  # scalar
    with torch.no_grad():
        # clip_frac: tokens where the clip binds (min picks the clipped term: no gradient). Deviation, in
        # logging only: TRL at d1's commit logs the share with ρA < clip(ρ)A (d1-spec §4.2), the other side
        stats = {"kl": ((kl * mask).sum() / n).item(),
                 "clip_frac": (((unclipped > clipped).float() * mask).sum() / n).item(),
                 # how far the policy has moved from θ_old on these tokens: mean ρ and mean |ρ - 1|
                 "ratio_mean": ((ratio * mask).sum() / n).item(),
                 "ratio_dev": (((ratio - 1).abs() * mask).sum() / n).item()}
    return loss, stats


def analytic_passes(steps, num_iterations, beta):
    """Model calls of one round (one rollout + μ inner steps, one micro-batch)."""
    mu = num_iterations
    # each call is one batched forward over the B completions, so none of these scales with B.
    # rollout: one per denoising step (the exact sampler never stops early: every block runs all its steps);
    # old / ref: one no-grad forward per mask seed, ref only when β > 0; policy: one forward and one
    # backward per inner step, one micro-batch per optimizer step
    return {"rollout_fwd": steps, "old_fwd": mu, "ref_fwd": mu if beta > 0 else 0,
            "policy_fwd": mu, "policy_bwd": mu}


def round_metrics(batches, G, update_stats, reward_parts):
    """One round's log line, this rank's share: mean reward, the mean within-group std of the
    rewards, the share of groups whose rewards are all equal (zero advantage: no learning signal),
    the mean completion length (tokens up to the first EOS), the update's loss / KL / clip
    fraction / ratio / gradient norm, each reward function's mean (`reward_parts`: sums over the
    completions), and token_nll: the mean -log π_old(o_k | q') of the sampled completion tokens
    under the first mask seed, an estimate of the policy's per-token entropy (exact for on-policy
    samples only if the one-step marginals were the sampler's: a proxy, watched for collapse)."""
    rewards = torch.cat([b.rewards for b in batches])  # (local completions,)
    # logged only (d1's reward_std). A group with std 0 has all advantages 0, so its surrogate term gives
    # no gradient (only the KL acts): zero_std_groups counts those (d1's zero_std_ratio, same 1e-6)
    group_std = rewards.view(-1, G).std(dim=1)  # (local groups,)
    nll = {}
    if batches[0].old:  # the old log-probs of mask seed 0, (b, N) per micro-batch
        tokens = sum(b.mask.sum() for b in batches).clamp(min=1)
        nll = {"token_nll": (-sum((b.old[0] * b.mask).sum() for b in batches) / tokens).item()}
    return {"reward": rewards.mean().item(), "reward_std": group_std.mean().item(),
            "zero_std_groups": (group_std < 1e-6).float().mean().item(),
            "completion_len": torch.cat([b.mask.sum(1) for b in batches]).mean().item(),
            **nll, **update_stats, **{f"r/{k}": v / len(rewards) for k, v in reward_parts.items()}}


# -----------------------------------------------------------------------------
# Seeds. Every random stream of a run is keyed by what it is for (run seed, round, mask seed,
# global micro-batch index), never by rank or by how many draws came before, so a run gives the
# same numbers on any world size and after a resume (both tested). Strides are primes larger than
# any count they multiply, so two keys never collide.

SEED_STRIDE = 1_000_003    # between run seeds, and between mask seeds: > micro-batches per round
ROUND_STRIDE = 10_007      # between rounds of one run's rollout noise: > micro-batches per round
MASK_SEED_STRIDE = 7_919   # the μ mask seeds of round r come from generator seed * 7919 + r
MASK_SEED_RANGE = 2**12    # d1 draws its mask seeds in [0, 4096)
FIXED_MASK_SEED = 42       # d1's fixed-mask ablation (Fig. 4): seed 42 at every step


def mask_generator(seed, micro_index):
    """The generator behind one micro-batch's prompt mask under mask seed `seed`. Keyed by the
    GLOBAL micro-batch index, so θ, θ_old and θ_ref (and any world size) get identical masks."""
    # A CPU generator: logprob.prompt_mask draws on the generator's device, so the mask is the same
    # whichever device the model is on; it is only (b, P) uniforms. d1 instead reseeds every global RNG
    # with the mask seed (accelerate's set_seed), which also ties the next round's sampling noise to the
    # last mask seed (d1-spec §3.2)
    return torch.Generator().manual_seed(seed * SEED_STRIDE + micro_index)


def rollout_generator(seed, rnd, micro_index, device):
    """The sampling noise of one micro-batch's rollout, keyed by (run seed, round, global micro-batch)."""
    # on the model's device: the sampler draws (b, block, V) float64 Gumbel noise every step, which from a
    # CPU generator was 3/4 of an 8B rollout's time on an H100 (128 steps: 53 s -> 20 s; bench.py, 2026-11-22)
    return torch.Generator(device=device).manual_seed(seed * SEED_STRIDE + rnd * ROUND_STRIDE + micro_index)


def mask_seeds(seed, rnd, num_iterations, fixed=False):
    """The μ mask seeds of round `rnd`; inner step j uses seed j for every micro-batch."""
    if fixed:
        # d1's ablation (random_masking False): the same q' for all μ steps (d1-spec §3.2)
        return [FIXED_MASK_SEED] * num_iterations
    # its own generator, keyed by (run seed, round): a resumed or re-sharded run draws the same seeds,
    # and drawing them consumes no other stream
    g = torch.Generator().manual_seed(seed * MASK_SEED_STRIDE + rnd)
    # d1: torch.randint(0, 2**12, (μ,)) once per generation round (d1-spec §3.2)
    return torch.randint(0, MASK_SEED_RANGE, (num_iterations,), generator=g).tolist()


@dataclass
class MicroBatch:
    """groups_per_micro prompt groups of G completions each: the unit of every pass. The rollout
    (step 1) fills the first five fields; the others are filled by steps 2-4 of the round."""
    index: int                # global micro-batch index of the round: keys its noise and masks
    examples: list            # (b,) the task examples, each repeated G times, b = groups_per_micro * G
    prompt: torch.Tensor      # (b, P) left-padded prompt ids
    completion: torch.Tensor  # (b, N) sampled completion ids
    mask: torch.Tensor        # (b, N) 1 up to and including the first EOS (completion_mask)
    rewards: torch.Tensor = None  # (b,) summed task rewards (step 2)
    adv: torch.Tensor = None      # (b,) group-relative advantages (step 3)
    old: list = field(default_factory=list)  # μ x (b, N) log-probs under θ_old, one per mask seed (step 4)
    ref: list = field(default_factory=list)  # μ x (b, N) under θ_ref; empty when β = 0 (step 4)




def pad_left(rows, pad_id):
    """List of id lists -> (B, P) long, left-padded with pad_id (LLaDA pads with EOS; attended)."""
    P = max(len(r) for r in rows)
    # left padding keeps each prompt's last token next to the completion canvas. The pads are EOS and
    # attended, as in d1, which never passes an attention mask (d1-spec §1)
    return torch.tensor([[pad_id] * (P - len(r)) + r for r in rows])


def load_rl_data(args):
    """Examples (each with `task`) for one or several tasks: `--task gsm8k,math --data a.jsonl,b.jsonl`
    trains d1's unified model. The toy task generates unlabelled puzzles from the training grids."""
    from lib import puzzles
    import tasks
    names = args.task.split(",")
    paths = args.data.split(",") if args.data else []
    examples = []
    for i, name in enumerate(names):
        if name == "toy":
            # unlabelled: RL needs only the puzzle, the reward checks the answer. From the training grids of the
            # split sft.py uses, never the test grids of eval.py's held-out set
            train_grids, _ = puzzles.split_grids(seed=args.data_seed)
            exs = puzzles.make_toy(train_grids, args.num_examples, args.data_seed + 1, *map(int, args.toy_blanks.split(',')))
        elif name == "pbe":
            # the code toy: functions of the training classes only (eval.py holds out whole classes)
            from lib import pbe
            train_classes, _ = pbe.split_classes(seed=args.data_seed)
            exs = pbe.make_pbe(train_classes, args.num_examples, args.data_seed + 1)
        elif i < len(paths):
            exs = tasks.load_task(name, paths[i])
        else:
            raise ValueError(f"--task {name} needs a file in --data (comma list, same order as --task)")
        # each example carries its task, so a mixed round scores every completion with its own task's rewards
        examples += [{**ex, "task": name} for ex in exs]
    random.Random(42).shuffle(examples)  # d1 shuffles with seed 42
    return examples


def group_prompts(tokenizer, exs, G, max_prompt_length, pad_id):
    """The prompt rows of one micro-batch: each example's chat-rendered prompt G times, cut from
    the left to max_prompt_length (d1 keeps the last tokens), left-padded. -> ((b, P), cut count)"""
    rows, n_cut = [], 0
    for ex in exs:
        # the uncut length only counts what the cut drops (a warning); tokenizing twice costs
        # microseconds next to a rollout, and the cut itself stays in tokenizer.prompt_ids
        n_cut += len(prompt_ids(tokenizer, ex["prompt"])) > max_prompt_length
        # keep the LAST max_prompt_length tokens, as d1's prompt_ids[:, -200:] (d1-spec §2.4): a long prompt
        # loses its BOS and the start of its instructions, hence the warning
        ids = prompt_ids(tokenizer, ex["prompt"], max_length=max_prompt_length)
        rows += [ids] * G  # consecutive G rows share a prompt: one group
    return pad_left(rows, pad_id), n_cut


# -----------------------------------------------------------------------------
# Set-up, in the order FSDP needs: load -> LoRA -> resumed weights -> wrap (DDP or FSDP) ->
# reference -> optimizer -> resumed optimizer state, because sharding replaces every parameter by
# a DTensor, and the optimizer must hold those. What a save holds, and its resume, is in resume.py.


def load_policy(args, run):
    """The start model (d1: the merged SFT model) with its LoRA adapters, not yet wrapped.
    -> (model, tokenizer, ref_context): the context in which `model` is the reference policy
    (adapters off), or a do-nothing context for full fine-tuning (a frozen copy, load_reference)."""
    # --load-in-4bit (the 8b preset, as d1): NF4 base with double quantization, bf16 compute (d1-spec §4.3)
    model, tokenizer = load(args.model_dir, device=run.device, dtype=run.dtype, load_in_4bit=args.load_in_4bit)
    ref_context = nullcontext
    if args.lora_r > 0:
        # d1: r 128, alpha 64, dropout 0.05. Of the seven names in d1's config only q, k, v and up_proj exist in
        # LLaDA's blocks, so those four are the default targets (d1-spec §4.3)
        add_lora(model, r=args.lora_r, alpha=args.lora_alpha, dropout=args.lora_dropout,
                 targets=tuple(args.lora_targets.split(",")))
        # π_ref costs no second copy of the weights: the frozen base IS the reference (d1: disable_adapter(),
        # d1-spec §3.2). It never moves: d1's sync_ref_model is a no-op under PEFT
        ref_context = lambda: lora_disabled(model)
    model.gradient_checkpointing = args.gradient_checkpointing  # under FSDP: inside each sharded block
    if args.compile:  # not with --fsdp (check_args)
        compile_blocks(model)  # in place: state-dict keys, LoRA and resume are unaffected
    return model, tokenizer, ref_context


def load_reference(args, run):
    """Full fine-tuning with β > 0: a frozen copy of the start model, loaded after the policy is
    sharded so that a GPU never holds two full copies, and sharded the same way. It never trains,
    so it needs no fp32 masters: save_dtype (bf16 on GPU, what FSDP's mixed precision computes in
    anyway). LoRA (the reference is the base, adapters off) or β = 0: None."""
    # LoRA: the reference is `model` inside ref_context; β = 0: nothing to compare against
    if args.lora_r > 0 or not args.beta:
        return None
    # the START model (--model-dir), like d1's adapter-disabled base: π_ref stays where training began
    ref_model = from_pretrained(args.model_dir, dtype=run.save_dtype, device=run.device).eval()
    if args.fsdp:  # no optimizer, no gradients
        shard_model(ref_model.requires_grad_(False), run.device_type)
    return ref_model


# -----------------------------------------------------------------------------
# The phases of a round that touch the model, as functions: the loop below calls them, and so
# does bench.py, so the benchmark times (and its pass-count test checks) the trainer itself.


def rollout(model, prompt, generator, amp, gen_length, block_length, steps, temperature):
    """Step 1: one completion per prompt row, (b, P) -> (b, N). Eval mode: no LoRA dropout in the
    sampler (d1 leaves it on), so the old policy that scores these samples is the sampling one."""
    model.eval()
    with amp():
        # generate's defaults are d1's rollout sampler: low-confidence remasking, no CFG; the 8b preset adds
        # block 32, 128 steps, τ 0.9, i.e. 2 tokens per step (d1-spec §2.3)
        out = generate(model, prompt, gen_length=gen_length, block_length=block_length, steps=steps,
                       temperature=temperature, generator=generator)  # (b, P + N); no grad inside
    # (b, N): the sampler never changes the prompt, so only the completion canvas is kept
    return out[:, prompt.shape[1]:]


def preset_rollout(model, prompt, generator, preset="tiny"):
    """rollout() with a preset's sampler settings, for scripts outside the trainer (study_*.py)."""
    p = PRESETS[preset]
    return rollout(model, prompt, generator, nullcontext, p["gen_length"], p["block_length"], p["diffusion_steps"],
                   p["temperature"])


@torch.no_grad()
def score_old_ref(model, ref_model, ref_context, batches, seeds, p_mask, beta, amp, estimator="one_step"):
    """Step 4: for every mask seed and micro-batch, the old policy's per-token log-probs and, when
    β > 0, the reference's, once per round, under the very same masked prompt q' (a generator
    rebuilt from the same key). ref_model None: the reference is `model` inside ref_context
    (LoRA adapters off). Appends (b, N) tensors to each batch's .old / .ref, one per seed."""
    model.eval()
    for b in batches:
        for s in seeds:
            with amp():
                # d1 runs all μ seeds as one no-grad forward of μ·b rows (d1-spec §3.2); one seed at a time gives the
                # same masks at 1/μ of the activation memory
                # --estimator (d1: one_step); the generator is rebuilt from the key, so every call sees the same masks
                b.old.append(estimate_logprobs(model, b.prompt, b.completion, estimator, p_mask,
                                               mask_generator(s, b.index)))  # (b, N)
                if beta:
                    with ref_context():
                        # a fresh generator from the same key: the reference scores exactly the q' the old policy saw
                        b.ref.append(estimate_logprobs(ref_model if ref_model is not None else model, b.prompt,
                                                       b.completion, estimator, p_mask,
                                                       mask_generator(s, b.index)))  # (b, N)


def policy_step(model, batches, j, seed, optimizer, params, amp, mask_id, epsilon, beta, p_mask, grad_clip, accum,
                estimator="one_step", run=None):
    """Step 5, inner step j of μ: the policy's log-probs of every micro-batch under mask seed
    `seed` (one forward + one backward each), gradients accumulated over the micro-batches and,
    under DDP / FSDP, averaged over ranks on the last one; then one clipped optimizer step.
    `model` is the wrapped policy (DDP / FSDP / plain; a DDP wrapper has no .config, hence
    mask_id). Returns the loss, KL, clip fraction and ratio statistics averaged over this rank's
    micro-batches, the gradient norm before clipping, and skipped: 1.0 when the step was not taken
    because the loss or the gradient norm was not finite on some rank (ddp.step_if_finite; `run`:
    the ranks to agree with, None for one process)."""
    model.train()  # LoRA dropout (if any) only in the policy pass
    stats = {}
    for i, b in enumerate(batches):
        set_grad_sync(model, i == len(batches) - 1)  # reduce only on the last micro-batch
        with amp():
            # the key of the old/ref passes of seed j, so ρ compares the same masked view (d1-spec §3.2). Deviation:
            # step j uses seed j for every micro-batch, μ distinct masks per round; d1's `_step % μ` with gradient
            # accumulation 2 gives each micro-batch only μ/2
            logp = estimate_logprobs(model, b.prompt, b.completion, estimator, p_mask, mask_generator(seed, b.index),
                                     mask_id)  # (b, N)
        # (b, N) tensors in, a scalar out: the token mean of this micro-batch
        loss, st = grpo_loss(logp, b.old[j], b.ref[j] if beta else None, b.adv, b.mask, epsilon, beta)
        # HF divides each micro-batch loss by the accumulation steps in d1 too (d1-spec §4.2)
        (loss / accum).backward()  # mean over micro-batches; DDP / FSDP average over ranks
        for k, v in {"loss": loss.item(), **st}.items():
            stats[k] = stats.get(k, 0.0) + v / accum
    # d1: max_grad_norm 0.2; grad_clip 0 clips nothing but the norm is still logged
    stats["grad_norm"] = clip_grad_norm(params, grad_clip)
    # constant lr, as d1's constant_with_warmup after a handful of steps. A NaN or inf anywhere (a
    # fp overflow, a poisoned batch) skips the step on every rank, weights and AdamW state untouched
    stats["skipped"] = float(not step_if_finite(optimizer, run, stats["loss"], stats["grad_norm"]))
    return stats


# -----------------------------------------------------------------------------

def parse_args(argv=None):
    """The flags, flat, with the preset's values as defaults (any flag given overrides its preset
    value). A function so that bench.py --preflight measures exactly what these flags would run."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", type=str, default="tiny", choices=sorted(PRESETS))
    # a first pass reads only --preset, so that its values can become the defaults of the full parser
    preset = PRESETS[pre.parse_known_args(argv)[0].preset]
    parser = argparse.ArgumentParser(description="diffu-GRPO (d1 stage 2)", parents=[pre])
    # data
    parser.add_argument("--task", type=str, default="toy", help="toy | pbe | gsm8k | math | countdown | sudoku | code (KodCode) | "
                        "leetcode | humaneval | mbpp ..., or a comma list")
    parser.add_argument("--data", type=str, default="", help="local data file(s), comma list matching --task")
    parser.add_argument("--num-examples", type=int, default=4000, help="toy / pbe: unlabelled puzzles / functions")
    parser.add_argument("--toy-blanks", type=str, default="2,5", help="toy: min,max blank cells per puzzle")
    parser.add_argument("--data-seed", type=int, default=0, help="toy / pbe: seed of the train/test split (same as sft.py)")
    parser.add_argument("--max-prompt-length", type=int, help="longer prompts are cut from the left (d1: 200)")
    # model
    parser.add_argument("--model-dir", type=str, default="out/sft", help="official-layout start model (d1: the merged SFT model)")
    parser.add_argument("--out-dir", type=str, default="out/grpo", help="the run: saves/step-N (official layout + "
                        "trainer_state.pt), metrics.jsonl, and the latest save as the run's model")
    parser.add_argument("--lora-r", type=int, help="LoRA rank, 0 = full fine-tuning with a frozen reference copy")
    parser.add_argument("--lora-alpha", type=float, help="LoRA alpha")
    parser.add_argument("--lora-dropout", type=float, default=0.05, help="LoRA dropout (policy passes only)")
    parser.add_argument("--lora-targets", type=str, default="q_proj,k_proj,v_proj,up_proj", help=f"comma list of {BLOCK_LINEARS}")
    parser.add_argument("--load-in-4bit", action=argparse.BooleanOptionalAction, help="NF4 base weights (QLoRA)")
    parser.add_argument("--gradient-checkpointing", action="store_true", help="recompute blocks in backward")
    parser.add_argument("--compile", action="store_true", help="torch.compile each block: fuses the elementwise "
                        "work, +30 %% policy throughput at 8B on an H100 (bench.py); first passes compile")
    parser.add_argument("--fsdp", action="store_true", help="full fine-tuning with FSDP2: weights, gradients and "
                        "AdamW state sharded over ranks, fp32 masters, bf16 compute on GPU (needs --lora-r 0 "
                        "and --no-load-in-4bit)")
    # GRPO
    parser.add_argument("--rounds", type=int, help="rollout rounds; each gives num_iterations optimizer steps")
    parser.add_argument("--prompts-per-step", type=int, help="prompts per round over all ranks (d1: 16)")
    parser.add_argument("--num-generations", type=int, help="G, completions per prompt (d1: 6)")
    parser.add_argument("--groups-per-micro", type=int, help="prompt groups per micro-batch (d1: 1)")
    parser.add_argument("--num-iterations", type=int, help="μ, optimizer steps per rollout (d1: 12 or 8)")
    parser.add_argument("--epsilon", type=float, help="PPO clip range ε (d1: 0.5)")
    parser.add_argument("--beta", type=float, help="KL coefficient β (d1: 0.04); 0 skips the reference passes")
    parser.add_argument("--p-mask", type=float, help="prompt masking probability of the estimator (d1: 0.15)")
    parser.add_argument("--estimator", type=str, default="one_step", choices=ESTIMATORS,
                        help="per-token log-probs: one_step (d1), coupled (DiffuCoder), elbo (LLaDA's MC ELBO, "
                        f"{ELBO_DRAWS} draws); see logprob.estimate_logprobs")
    parser.add_argument("--fixed-mask-seed", action="store_true", help="d1's ablation: mask seed 42 for every step")
    parser.add_argument("--scale-std", action="store_true", help="divide advantages by the group std (original GRPO)")
    # rollout
    parser.add_argument("--gen-length", type=int, help="completion canvas length (d1: 256)")
    parser.add_argument("--block-length", type=int, help="semi-AR block length (d1: 32)")
    parser.add_argument("--diffusion-steps", type=int, help="sampler steps (d1: 128)")
    parser.add_argument("--temperature", type=float, help="rollout temperature (d1: 0.9)")
    # optimization
    parser.add_argument("--lr", type=float, help="AdamW learning rate, constant (d1: 3e-6)")
    parser.add_argument("--weight-decay", type=float, help="AdamW weight decay (d1: 0.1)")
    parser.add_argument("--grad-clip", type=float, help="max grad norm (d1: 0.2)")
    parser.add_argument("--save-every", type=int, default=10, help="save every N rounds (and at the end): a crash "
                        "loses at most this many rounds")
    parser.add_argument("--keep-last", type=int, default=2, help="complete saves kept in <out-dir>/saves")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out-dir from its newest "
                        "complete save")
    parser.add_argument("--force", action="store_true", help="start over in an --out-dir that holds another run "
                        "(deletes its saves, log and model)")
    parser.add_argument("--max-bad-steps", type=int, default=3, help="stop after this many optimizer steps in a "
                        "row with a non-finite loss or gradient (each one is skipped)")
    parser.add_argument("--eval-every", type=int, default=0, help="toy: held-out greedy accuracy every N rounds "
                        "(and before the first), logged as heldout_acc in metrics.jsonl; 0 = off")
    parser.add_argument("--eval-items", type=int, default=200, help="toy: held-out puzzles for --eval-every")
    # system
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--device", type=str, default="", help="cpu | cuda (default: cuda if available)")
    parser.add_argument("--dtype", type=str, default="", help="float32 | bfloat16 weights (default: bf16 on GPU, "
                        "fp32 on CPU; with --fsdp fp32 masters); also the dtype of the saved model")
    parser.add_argument("--autocast", action="store_true", help="run every forward under torch.autocast(bf16), "
                        "weights stay in --dtype (works on CPU; refused with --fsdp on GPU, whose mixed "
                        "precision already computes in bf16)")
    parser.add_argument("--backend", type=str, default="", help="DDP backend (default: nccl on GPU, gloo on CPU)")
    parser.add_argument("--dist-timeout", type=int, default=DIST_TIMEOUT_S, help="seconds a collective waits for "
                        "a lost rank before this one stops with a message")
    # preset values fill only the flags not given on the command line
    parser.set_defaults(**preset)
    return parser.parse_args(argv)


def check_args(args, world_size):
    """Every flag that cannot work, as one InputError, before anything is loaded (checks.upfront
    turns it into one line). The data, the model directory and --out-dir are checked after it."""
    from rewards import REWARDS
    for name in args.task.split(","):
        require(name in REWARDS, f"--task: unknown task {name!r}; one of {', '.join(sorted(REWARDS))}")
    # G = 1: every completion is its group's mean, every advantage 0: the run would learn nothing, silently
    require(args.num_generations >= 2, f"--num-generations must be >= 2 (GRPO compares completions of one prompt; "
                                       f"G = {args.num_generations} gives every advantage 0)")
    for flag in ("rounds", "prompts_per_step", "groups_per_micro", "num_iterations", "save_every",
                 "max_prompt_length", "eval_items"):
        require(getattr(args, flag) >= 1, f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")
    # every rank must run the same number of passes or DDP / FSDP hang: divisibility up front
    n_micro = args.prompts_per_step // args.groups_per_micro
    require(args.prompts_per_step % args.groups_per_micro == 0 and n_micro % world_size == 0,
            f"--prompts-per-step {args.prompts_per_step} must split into micro-batches of --groups-per-micro "
            f"{args.groups_per_micro} groups, a multiple of the {world_size} ranks")
    require(args.epsilon > 0, f"--epsilon (the clip range) must be > 0, got {args.epsilon}")
    require(args.beta >= 0, f"--beta must be >= 0, got {args.beta}")
    require(args.temperature >= 0, f"--temperature must be >= 0, got {args.temperature}")
    check_fraction("--p-mask", args.p_mask)  # p = 1 would mask the whole prompt: q' says nothing of q
    check_training_flags(args)  # optimizer, LoRA / 4-bit, saves, precision: shared with sft.py
    require(not (args.compile and args.fsdp), "--compile with --fsdp is not supported yet (untested); drop one of them")
    try:  # gen / block / steps must divide (sample.check_schedule's rule), named by our flags
        check_schedule(args.gen_length, args.block_length, args.diffusion_steps)
    except ValueError as e:
        raise InputError(f"--gen-length {args.gen_length} / --block-length {args.block_length} / --diffusion-steps "
                         f"{args.diffusion_steps}: {e}") from None
    # rank 0 evaluates alone: fine under DDP (a plain forward), a hang under FSDP (forwards are collectives)
    require(not args.eval_every or (args.task == "toy" and not args.fsdp),
            "--eval-every measures the toy's held-out accuracy, without --fsdp; use eval.py otherwise")
    require(args.eval_every >= 0, f"--eval-every must be >= 0, got {args.eval_every}")


# -----------------------------------------------------------------------------

if __name__ == "__main__":
    args = parse_args()

    # -------------------------------------------------------------------------
    # bad input is one line and exit 2 before anything is loaded or written (checks.py): the flags,
    # every data line, the model directory's headers, and what --out-dir already holds
    with upfront():
        world_size = int(os.environ.get("WORLD_SIZE", 1))  # torchrun's; the process group comes after
        check_args(args, world_size)
        check_data_paths([p for p in args.data.split(",") if p])
        # data: the prompts of every task, shuffled once (d1: seed 42); a malformed line is named file:line
        examples = load_rl_data(args)
        require(args.prompts_per_step <= len(examples), f"--prompts-per-step {args.prompts_per_step} is more than "
                f"the {len(examples)} prompts in the data")
        # d1-LLaDA's RL starts from the MERGED SFT model (d1 issue #8); "+diffu-GRPO" from LLaDA-8B-Instruct
        require(os.path.isdir(args.model_dir), f"no model in {args.model_dir}: diffu-GRPO starts from the SFT "
                "model; run `python sft.py` first (it writes out/sft) or pass --model-dir")
        check_model_dir(args.model_dir)
        check_run_dir(args)  # last: --force deletes
    from rewards import REWARDS, total_rewards
    # every reward function of every task in the data: one log column each, d1 logs each one's mean too
    comp_names = sorted({f.__name__ for ex in examples for f in REWARDS[ex["task"]]})

    # -------------------------------------------------------------------------
    # distributed init (torchrun sets RANK / LOCAL_RANK / WORLD_SIZE), precision, seed (ddp.py)
    run = init_training(args)
    device, master, world_size, rank = run.device, run.master, run.world_size, run.rank
    # d1's batch (d1-spec §4.1): 16 prompts x G = 6 -> 96 completions per optimizer step, one group per
    # GPU micro-batch (8 GPUs x accumulation 2); here --prompts-per-step 16 --groups-per-micro 1 on any
    # world size gives the same update (check_args made sure the micro-batches split over the ranks)
    G = args.num_generations
    n_micro = args.prompts_per_step // args.groups_per_micro  # micro-batches per round, all ranks
    accum = n_micro // world_size  # micro-batches per rank per optimizer step

    # -------------------------------------------------------------------------
    # model: policy (+ LoRA), resumed weights, DDP / FSDP, reference, optimizer (set-up helpers above)
    raw_model, tokenizer, ref_context = load_policy(args, run)
    # LLaDA: mask 126336, EOS 126081 <|endoftext|> (also the pad; d1-spec §1). EOS, not <|eot_id|>, ends
    # the completion mask (d1-spec §10.5)
    mask_id, eos_id = raw_model.config.mask_token_id, raw_model.config.eos_token_id
    resumed_from, state = resume_weights(args, run, raw_model)  # --resume: the newest complete save
    start_round = state["step"] if state else 0
    model = wrap_for_training(raw_model, run, args.fsdp)  # raw_model: the unwrapped (or sharded) policy
    ref_model = load_reference(args, run)
    # the trainable tensors: the LoRA matrices, or every parameter, read AFTER sharding (DTensors)
    params = [p for p in raw_model.parameters() if p.requires_grad]
    # d1: adamw_torch, lr 3e-6, betas (0.9, 0.99), weight decay 0.1 (d1-spec §4.3; the presets)
    optimizer = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.99), weight_decay=args.weight_decay)
    if state is not None:
        restore_optimizer(args, run, raw_model, optimizer, state)
        if master:
            changed = {k: (v, getattr(args, k)) for k, v in state["args"].items()
                       if k not in RESUME_MAY_CHANGE and getattr(args, k, v) != v}
            print(f"resumed from {resumed_from} at round {start_round}" +
                  "".join(f"\n  note: --{k.replace('_', '-')} was {a}, now {b}" for k, (a, b) in changed.items()))
            publish(resumed_from, args.out_dir)  # mends a publish that the crash may have torn
        # drop the loaded state before training: it may hold the optimizer state and, under FSDP, the fp32
        # masters (LLaDA-8B: 32 GB)
        del state
    if master:
        print(f"trainable parameters: {sum(p.numel() for p in params):,} of {raw_model.num_params():,}")

    # -------------------------------------------------------------------------
    # the loop: one rollout round, then μ optimizer steps on it
    t_start = time.time()
    # one JSON line per round in <out-dir>/metrics.jsonl (rank 0); a resume rewrites the rounds after its own
    metrics_file, elapsed0 = open_metrics(args.out_dir, {**vars(args), "world_size": world_size},
                                          start_round) if master else (None, 0.0)
    if args.eval_every and master:
        # held-out puzzles (heldout_acc, the items of `eval.py`, so the last point equals its number) and new
        # puzzles of the training grids (seen_grid_acc: the gap between the two curves is memorisation)
        eval_sets = evaluation.toy_curve_sets(args.eval_items, args.data_seed)
        curve_point = lambda: evaluation.toy_accuracies(raw_model, tokenizer, eval_sets)  # {name: accuracy %}
        if start_round == 0:  # the starting point of the curve: the SFT model
            log_metrics(metrics_file, {"step": 0, "elapsed_s": 0.0, **curve_point()})
    eval_s = 0.0  # seconds spent on --eval-every, kept out of elapsed_s (training time)
    bar = tqdm(range(start_round, args.rounds), desc="grpo", disable=not master,
               initial=start_round, total=args.rounds)
    bad_steps = 0  # optimizer steps skipped in a row (non-finite loss or gradient); --max-bad-steps stops the run
    for rnd in bar:
        timing = {}
        reseed(args.seed, rnd, rank)  # LoRA dropout's draws, keyed by round: a resume draws the same
        # every rank sees the same prompt list for the round and takes micro-batches rank,
        # rank + world_size, ... (each micro-batch = groups_per_micro whole groups of G)
        first = rnd * args.prompts_per_step  # walk the (shuffled) data in order; resume-safe
        round_examples = [examples[(first + i) % len(examples)] for i in range(args.prompts_per_step)]
        batches = []

        # 1. rollout: G completions per prompt, noise keyed by (seed, round, global micro-batch)
        t0 = time.time()
        n_cut = 0
        # d1's RepeatRandomSampler (seed 42) draws 16 unique prompts per step and repeats each G times
        # (d1-spec §4.1); the round's prompt list above plays that part
        for m in [m * world_size + rank for m in range(accum)]:  # this rank's global micro-batch indices
            exs = round_examples[m * args.groups_per_micro:(m + 1) * args.groups_per_micro]
            # EOS is the pad (LLaDA's pad token, d1-spec §2.4)
            prompt, cut = group_prompts(tokenizer, exs, G, args.max_prompt_length, eos_id)
            prompt, n_cut = prompt.to(device), n_cut + cut  # (b, P), b = groups_per_micro * G
            # raw_model: the DDP wrapper is kept for the one pass that needs gradient sync. Under FSDP
            # raw_model is the sharded model, so every rank must make the same calls (the exact sampler's
            # pass count is fixed)
            completion = rollout(raw_model, prompt, rollout_generator(args.seed, rnd, m, device), run.amp,
                                 args.gen_length, args.block_length, args.diffusion_steps, args.temperature)
            batches.append(MicroBatch(m, [ex for ex in exs for _ in range(G)], prompt, completion,
                                      completion_mask(completion, eos_id)))  # (b, N) each
        timing["rollout"] = time.time() - t0
        if n_cut and master:
            tqdm.write(f"warning: {n_cut} prompts longer than --max-prompt-length were cut from the left")

        # 2. rewards and 3. advantages (groups never span ranks, so this is local)
        t0 = time.time()
        comp_sum = {name: 0.0 for name in comp_names}
        for b in batches:
            # as d1: specials stripped, so the reward text also holds any non-special tokens after the first EOS,
            # which get no loss (d1-spec §2.4)
            texts = tokenizer.batch_decode(b.completion, skip_special_tokens=True)
            rewards = []
            # r_i = the plain sum of the task's reward functions, all weights 1, NaN-safe (d1-spec §4.2); the
            # code reward runs the micro-batch's programs in parallel sandboxes
            for total, parts in total_rewards(texts, b.examples):
                rewards.append(total)
                for name, v in parts.items():
                    comp_sum[name] += v
            b.rewards = torch.tensor(rewards)  # (b,)
            # consecutive G rows share a prompt, so groups are rows [0:G], [G:2G], ...
            b.adv = group_advantages(b.rewards, G, args.scale_std).to(device)  # (b,)
        timing["reward"] = time.time() - t0

        # 4. μ mask seeds, then old and reference log-probs for every seed, once, without gradients
        t0 = time.time()
        seeds = mask_seeds(args.seed, rnd, args.num_iterations, args.fixed_mask_seed)
        # before any update: θ_old is exactly the θ that sampled the rollouts
        score_old_ref(raw_model, ref_model, ref_context, batches, seeds, args.p_mask, args.beta, run.amp,
                      args.estimator)
        timing["old_ref"] = time.time() - t0

        # 5. μ optimizer steps; step j scores every micro-batch under mask seed j
        t0 = time.time()
        stats_sum = {}  # means over steps and micro-batches
        for j, s in enumerate(seeds):
            # `model` (the DDP / FSDP wrapper) here: this is the only pass that needs gradient sync
            st = policy_step(model, batches, j, s, optimizer, params, run.amp, mask_id, args.epsilon,
                             args.beta, args.p_mask, args.grad_clip, accum, args.estimator, run)
            for k, v in st.items():
                stats_sum[k] = stats_sum.get(k, 0.0) + v / len(seeds)  # skipped: the share of the μ steps
            bad_steps = bad_steps + 1 if st["skipped"] else 0  # the same on every rank (a collective decision)
            if bad_steps >= args.max_bad_steps:
                break
        if bad_steps >= args.max_bad_steps:  # the weights are still finite, but training has stalled: stop
            last = complete_saves(args.out_dir)
            if master:  # the stopped round's line: only how it ended (a resume rewrites it anyway)
                log_metrics(metrics_file, {"step": rnd + 1, "elapsed_s": elapsed0 + time.time() - t_start - eval_s,
                                           "skipped": stats_sum["skipped"]})
                print(f"stopping in round {rnd + 1}: {bad_steps} optimizer steps in a row had a non-finite loss or "
                      f"gradient norm and were skipped (weights and AdamW state untouched). Last complete save: "
                      f"{last[-1][1] if last else 'none'}; lower --lr, or check the data and the start model",
                      file=sys.stderr)
                metrics_file.close()
            finish(run)
            sys.exit(1)
        timing["update"] = time.time() - t0

        # 6. logging: every metric is averaged over ranks first
        metrics = round_metrics(batches, G, stats_sum, comp_sum)
        if run.distributed:
            # one all_reduce for all metrics; every rank scored the same number of completions, so the mean of the
            # ranks' means is the global mean
            vals = torch.tensor(list(metrics.values()), device=device)
            dist.all_reduce(vals, op=dist.ReduceOp.AVG)
            metrics = dict(zip(metrics, vals.tolist()))
        if master:
            line = " ".join(f"{k} {v:.3f}" for k, v in metrics.items())
            tqdm.write(f"round {rnd + 1}: {line} | s/phase " +
                       " ".join(f"{k} {v:.1f}" for k, v in timing.items()))
            bar.set_postfix(reward=f"{metrics['reward']:.3f}")
            # the same as data, with the round's cost in sequences through the model, all ranks: the model
            # calls of analytic_passes times the round's rows, and the scoring calls (old, ref, policy) times
            # the estimator's rows per sequence (coupled and ELBO run 2)
            rows, calls = args.prompts_per_step * G, analytic_passes(args.diffusion_steps, len(seeds), args.beta)
            k = ESTIMATOR_ROWS[args.estimator]
            fwd_rows = rows * (calls["rollout_fwd"] + k * (calls["old_fwd"] + calls["ref_fwd"] + calls["policy_fwd"]))
            record = {"step": rnd + 1, "elapsed_s": elapsed0 + time.time() - t_start - eval_s, **metrics,
                      **{f"s_{k}": v for k, v in timing.items()},
                      "fwd_rows": fwd_rows, "bwd_rows": rows * k * calls["policy_bwd"]}
            if args.eval_every and ((rnd + 1) % args.eval_every == 0 or rnd + 1 == args.rounds):
                # after the clock reading above, and subtracted from later ones: elapsed_s is training time
                t_eval = time.time()
                record.update(curve_point())
                eval_s += time.time() - t_eval
                tqdm.write(f"round {rnd + 1}: held-out accuracy {record['heldout_acc']:.1f}% "
                           f"(puzzles of training grids {record['seen_grid_acc']:.1f}%)")
            log_metrics(metrics_file, record)
        if (rnd + 1) % args.save_every == 0 or rnd + 1 == args.rounds:
            save_checkpoint(args, run, raw_model, optimizer, tokenizer, rnd + 1)  # every rank; rank 0 writes
    if master:
        metrics_file.close()
        print(f"done in {time.time() - t_start:.0f}s; model in {args.out_dir}, metrics in {metrics_file.name}")
    finish(run)  # every rank waits for rank 0's last save, then the group goes down together
