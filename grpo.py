"""
diffu-GRPO: reinforcement learning for a masked diffusion LM, d1's second stage (arXiv 2504.12216
Sec. 3; docs/d1.md §3-4). GRPO (DeepSeekMath, arXiv 2402.03300) needs per-token log-probs, which a
diffusion model does not give cheaply. d1's answer, the one-step estimator (logprob.py): mask the
whole completion and each prompt token with probability p = 0.15, run ONE forward pass, read every
completion token's log-prob off it. The prompt mask's seed is stored, so the current, old and
reference policies score each sample under the same masked prompt q'.

One round, as written out in the loop below:
  1. rollout: for each prompt, G completions with sample.py (d1's exact sampler)
  2. rewards r_i: the sum of the task's reward functions on the decoded text (rewards.py)
  3. advantages A_i = r_i - mean(r_group)   (no division by the std, following Dr. GRPO; optional)
  4. μ mask seeds; for each, old and reference per-token log-probs, once, without gradients
     (reference = the base model with LoRA adapters switched off, or a frozen copy)
  5. μ optimizer steps; step j uses mask seed j:
       ρ_ik = exp(ℓθ_ik - ℓold_ik)
       L = mean over completion tokens of
           -min(ρ A, clip(ρ, 1-ε, 1+ε) A) + β (e^(ℓref-ℓθ) - (ℓref-ℓθ) - 1)
     where "completion tokens" are those up to and including the first EOS, and the mean runs over
     all tokens of the micro-batch (token-level, as d1 does: longer answers weigh more).

Later methods plug in through the objective registry (OBJECTIVES: wd1, JustGRPO, SPG, ESPO, d2's
trajectory, methods/) and --rollout-cache / --rollout-threshold (Fast-dLLM, methods/sampling.py).
Deviations from d1 (docs/differences.md) are noted where they happen; --resume goes on bit for bit.

Run:
    python grpo.py                  # toy Sudoku on the tiny model (after python sft.py), CPU
    torchrun --nproc_per_node=8 grpo.py --task gsm8k --data openai/gsm8k:main:train \\
        --model-dir out/sft-s1k --out-dir out/grpo-gsm8k     # a real task: --preset 8b
"""
import argparse
import os
import time
from collections import Counter
from dataclasses import dataclass, field, replace

import torch

import tasks
from eval import validation_curve
from logprob import mask_generator, mask_seeds, one_step_logprobs, rollout_generator
from methods import espo, estimators, justgrpo, sampling, spg, trajectory, wd1
from methods.common import Objective
from modelio.families import pad_mask
from ops.best import Best
from ops.checks import check_grpo_args, upfront
from ops.ddp import (clip_grad_norm, finish, init_training, reseed, set_grad_sync, step_if_finite,
                     wrap_for_training)
from ops.metrics import mean_over_ranks, open_metrics, progress, report_round, round_metrics
from ops.resume import save_checkpoint
from ops.trainers import (add_training_flags, check_model_and_out_dir, load_policy, load_reference,
                          parse_with_preset, start_run, stop_if_stalled)
from sample import check_schedule, generate
from taskdata.data import group_prompts, load_rl_data
from taskdata.splits import add_protocol_flags, protocol_split

# The presets, by the model's size (a flag given overrides): the CPU toy (lr 1e-4: 3e-4 peaked,
# then decayed on 3 seeds, docs/findings.md); the testbed (docs/testbed.md); d1's recipe for
# LLaDA-8B (docs/d1.md §4.3); the other objectives' papers' (methods/); lengths: the task's
TINY = dict(num_generations=6, prompts_per_step=16, groups_per_micro=16, num_iterations=2,
            epsilon=0.5, beta=0.0, p_mask=0.15, lr=1e-4, weight_decay=0.0, grad_clip=1.0,
            temperature=1.0, max_prompt_length=256, lora_r=0, lora_alpha=64.0, load_in_4bit=False,
            rounds=30)
PRESETS = {
    "tiny": TINY, "testbed": dict(TINY, task="countdown_toy", num_iterations=4, rounds=40),
    "8b": dict(num_generations=6, prompts_per_step=16, groups_per_micro=1, num_iterations=12,
               epsilon=0.5, beta=0.04, p_mask=0.15, lr=3e-6, weight_decay=0.1, grad_clip=0.2,
               temperature=0.9, max_prompt_length=200, lora_r=128, lora_alpha=64.0,
               load_in_4bit=True, rounds=700),
    "justgrpo": justgrpo.PRESET, "spg": spg.PRESET, "espo": espo.PRESET,
}

TOY_START = "out/sft"  # the toys' start model without --model-dir: what `python sft.py` writes

# -----------------------------------------------------------------------------
# the math, as small pure functions


def completion_mask(completion, eos_id):
    """(B, N) float: 1 for tokens up to AND including the first EOS, 0 after (all ones if there
    is no EOS). d1 trains on the EOS itself and ignores the EOS padding that follows it."""
    is_eos = completion == eos_id  # (B, N)
    # EOS before position k: 0 up to the first EOS, then the canvas's EOS padding (d1.md §2.4)
    eos_before = torch.cumsum(is_eos.long(), dim=1) - is_eos.long()  # (B, N)
    return (eos_before == 0).float()  # (B, N)


def group_advantages(rewards, group_size, scale_std=False, eps=1e-4):
    """A_i = r_i - mean of its group of G consecutive samples, (B,) -> (B,). d1 does not divide by
    the group std (Dr. GRPO, arXiv 2503.20783); scale_std=True gives the original GRPO form."""
    r = rewards.view(-1, group_size)  # (groups, G): group_prompts repeats a prompt G times in a row
    # a completion is judged only against its siblings: no value network (docs/d1.md §4.2)
    adv = r - r.mean(dim=1, keepdim=True)  # (groups, G), each row sums to 0
    if scale_std:
        # original GRPO: (r - mean) / (std + eps); equal rewards have std 0: eps turns 0/0 into 0
        adv = adv / (r.std(dim=1, keepdim=True) + eps)
    return adv.view(-1)


def masked_mean(x, mask):
    """Σ x·mask / Σ mask over every entry of the micro-batch (one count, never 0 / 0)."""
    return (x * mask).sum() / mask.sum().clamp(min=1)


def grpo_loss(logp, old_logp, ref_logp, advantages, mask, epsilon, beta):
    """diffu-GRPO's clipped surrogate + β·k3 KL, averaged over the micro-batch's answer tokens.
    logp (B, N) with grad; old_logp, ref_logp (B, N) without (ref may be None when β = 0);
    advantages (B,); mask (B, N). -> (loss, stats dict of floats)."""
    ratio = torch.exp(logp - old_logp)  # (B, N); exactly 1 at the first step after the rollout
    # PPO's clipped surrogate per token, every token sharing its completion's advantage (docs/d1.md
    # §4.2; d1: ε = 0.5); where the clipped term is the smaller, the clip binds: no gradient
    unclipped = ratio * advantages[:, None]  # (B, N)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * advantages[:, None]  # (B, N)
    per_token = -torch.min(unclipped, clipped)  # (B, N)
    kl = torch.zeros_like(logp)  # β = 0: no reference pass at all, and the logged KL is 0
    if beta != 0.0:
        # Schulman's k3 estimator of KL(π_θ || π_ref), e^(ref - θ) - (ref - θ) - 1 >= 0, at
        # samples of π_old, no importance weight, as TRL (docs/d1.md §4.2)
        d = ref_logp - logp  # (B, N)
        kl = torch.exp(d) - d - 1
        per_token = per_token + beta * kl
    # ONE token count for the whole micro-batch, not a mean per sequence (TRL at d1's commit): a
    # longer answer weighs more (d1 issue #1)
    loss = masked_mean(per_token, mask)  # scalar
    with torch.no_grad():
        # clip_frac: where the clip binds (TRL at d1's commit logs the other side, ρA < clip(ρ)A:
        # §4.2); ratio_mean / ratio_dev: how far the policy moved from θ_old, ρ and |ρ - 1|
        mean = lambda x: masked_mean(x, mask).item()
        stats = {"kl": mean(kl), "clip_frac": mean((unclipped > clipped).float()),
                 "ratio_mean": mean(ratio), "ratio_dev": mean((ratio - 1).abs())}
    return loss, stats


# -----------------------------------------------------------------------------
# The objective registry, the seam later methods plug in through (README "Adding an objective"):
# d1's loss above, a file of methods/ each. An entry (methods/common.Objective) says what it reads
# of a round: its loss, its likelihood (d1's: the one-step estimate), the passes it needs.


def d1_loss(logp, b, j, hp):  # micro-batch b at inner step j
    return grpo_loss(logp, b.old[j], b.ref[j] if hp.beta else None, b.adv, b.mask, hp.epsilon,
                     hp.beta)


def one_step(model, b, rng, hp, mask_id):  # d1's likelihood of micro-batch b, (b, N); pads: Dream's
    return one_step_logprobs(model, b.prompt, b.completion, mask_id, hp.p_mask, rng, b.pad_mask)


D1 = Objective(d1_loss, logprobs=one_step)
OBJECTIVES = {"diffu_grpo": D1, "wd1": wd1.OBJECTIVE, "justgrpo": justgrpo.OBJECTIVE,
              "spg": spg.OBJECTIVE, "espo": espo.OBJECTIVE,
              "trajectory": replace(D1, **trajectory.LIKELIHOOD)}  # d1's loss, another likelihood


@dataclass(frozen=True)
class Hyper:
    """One round's hyper-parameters: all the round's phases read of the flags (round_setup)."""
    G: int              # completions per prompt (d1: 6)
    mu: int             # μ, optimizer steps per rollout (d1: 12)
    epsilon: float      # PPO clip range ε (d1: 0.5)
    beta: float         # KL coefficient β (d1: 0.04); 0 skips the reference passes
    p_mask: float       # prompt masking probability of the one-step estimator (d1: 0.15)
    gen_length: int     # the rollout sampler's canvas (d1: 256),
    block_length: int   # block (d1: 32),
    steps: int          # steps (d1: 128)
    temperature: float  # and temperature (d1: 0.9)
    grad_clip: float    # max gradient norm (d1: 0.2)
    scale_std: bool     # divide advantages by the group std (original GRPO; d1: no)
    own: dict = field(default_factory=dict)  # the objective's own flags (methods/), by name


def round_setup(args):
    """The flags -> (Hyper, the objective, the rollout sampler), once. The likelihood: the
    objective's own, else d1's one-step estimate (or --estimator's); the sampler: None for d1's."""
    obj = OBJECTIVES[args.objective]
    if obj.logprobs in (None, one_step) and args.estimator != "one_step":
        obj = replace(obj, logprobs=estimators.likelihood(args.estimator))
    hp = Hyper(args.num_generations, args.num_iterations, args.epsilon, args.beta, args.p_mask,
               args.gen_length, args.block_length, args.diffusion_steps, args.temperature,
               args.grad_clip, args.scale_std, {k: getattr(args, k) for k in obj.options})
    sampler = sampling.rollout_sampler(args.rollout_cache, args.rollout_threshold,
                                       args.rollout_threshold_rule, record=obj.trace)
    return hp, replace(obj, logprobs=obj.logprobs or one_step), sampler


@dataclass
class MicroBatch:
    """groups_per_micro prompt groups of G completions each: the unit of every pass. The rollout
    (step 1) fills the first seven fields and pad_mask; steps 2-4 of the round fill the others."""
    index: int                # global micro-batch index of the round: keys its noise and masks
    examples: list            # (b,) the task examples, each G times, b = groups_per_micro * G
    prompt: torch.Tensor      # (b, P) left-padded prompt ids
    completion: torch.Tensor  # (b, N) sampled completion ids
    mask: torch.Tensor        # (b, N) 1 up to and including the first EOS (completion_mask)
    calls: int = 0            # the sampler's model calls (fewer than steps only with a threshold)
    trace: dict = None        # the sampler's record (objective.trace): commit_step, token_logp
    rewards: torch.Tensor = None  # (b,) summed task rewards (step 2)
    adv: torch.Tensor = None      # (b,) group-relative advantages (step 3)
    old: list = field(default_factory=list)  # μ x (b, N) log-probs under θ_old, per seed (step 4)
    ref: list = field(default_factory=list)  # μ x (b, N) under θ_ref; empty when β = 0 (step 4)
    pad_mask: torch.Tensor = None  # (b, P) 0 on the left pads Dream hides; None: LLaDA attends them


# -----------------------------------------------------------------------------
# The phases of a round that touch the model, as functions: the loop below calls them, and so
# does lab/bench.py, so the benchmark times (and its pass-count test checks) the trainer itself.


def rollout(model, prompt, generator, amp, hp, sampler=None, attention_mask=None):
    """Step 1: a completion per prompt row, (b, P) -> ((b, N), the sampler's record), d1's sampler
    or `sampler`, pads hidden where attention_mask says. Eval mode: θ_old is what sampled."""
    model.eval()
    # d1's rollout sampler: low-confidence remasking, no CFG (docs/d1.md §2.3); one call per step
    kw = dict(gen_length=hp.gen_length, block_length=hp.block_length, steps=hp.steps,
              temperature=hp.temperature, generator=generator, attention_mask=attention_mask)
    rec = {"model_calls": hp.steps}  # a method's sampler records its own calls (and its trace)
    with amp():  # no grad inside either sampler; (b, P + N)
        out = sampler(model, prompt, stats=rec, **kw) if sampler else generate(model, prompt, **kw)
    return out[:, prompt.shape[1]:], rec  # (b, N): the sampler never changes the prompt


@torch.no_grad()
def score_old_ref(model, ref_model, ref_context, batches, seeds, obj, hp, amp):
    """Step 4: per mask seed and micro-batch, θ_old's and (β > 0) θ_ref's likelihood under the
    same masks (a generator rebuilt from (seed, b.index)); no ref_model: `model` in ref_context."""
    model.eval()
    ref = ref_model if ref_model is not None else model
    for b in batches:
        for s in seeds if obj.seeded else seeds[:1]:
            # one seed at a time: d1's masks (one μ·b-row forward, §3.2) at 1/μ of its memory
            with amp():
                if obj.needs_old:  # (b, N) for d1's estimator
                    b.old.append(obj.logprobs(model, b, mask_generator(s, b.index), hp, None))
                if obj.needs_ref and hp.beta:
                    with ref_context():  # a fresh generator from the same key: θ_old's masks
                        b.ref.append(obj.logprobs(ref, b, mask_generator(s, b.index), hp, None))
        if not obj.seeded:  # the same likelihood serves every inner step
            b.old, b.ref = b.old * len(seeds), b.ref * len(seeds)


def policy_step(model, batches, j, seed, optimizer, params, obj, hp, amp, mask_id, accum, run=None):
    """Step 5, inner step j of μ: each micro-batch's log-probs under mask seed `seed` into the
    loss, gradients accumulated (averaged over ranks on the last), one clipped optimizer step. ->
    the stats (means over micro-batches), grad_norm, skipped (1.0: non-finite somewhere, no step)"""
    model.train()  # LoRA dropout (if any) only in the policy pass
    stats = {}
    for i, b in enumerate(batches):
        set_grad_sync(model, i == len(batches) - 1)  # DDP / FSDP: all-reduce on the last one only
        generator = mask_generator(seed, b.index)  # the key of the old/ref passes of seed j
        if obj.policy_pass is not None:  # its own forwards and backwards (JustGRPO: chunks)
            st = obj.policy_pass(model, b, j, generator, hp, mask_id, accum, amp, obj.loss)
        else:
            with amp():
                # ρ compares the same masked view (docs/d1.md §3.2). Deviation: step j uses seed j
                # for every micro-batch; d1's `_step % μ` gives each only μ/2 masks
                logp = obj.logprobs(model, b, generator, hp, mask_id)  # (b, N)
            loss, st = obj.loss(logp, b, j, hp)  # tensors in, a scalar out
            # HF divides each micro-batch loss by the accumulation steps in d1 too (§4.2)
            (loss / accum).backward()  # mean over micro-batches; DDP / FSDP average over ranks
            st = {"loss": loss.item(), **st}
        for k, v in st.items():
            stats[k] = stats.get(k, 0.0) + v / accum
    stats["grad_norm"] = clip_grad_norm(params, hp.grad_clip)  # d1: max_grad_norm 0.2
    # a NaN or inf anywhere skips the step on every rank, weights and AdamW state untouched
    stats["skipped"] = float(not step_if_finite(optimizer, run, stats["loss"], stats["grad_norm"]))
    return stats


# -----------------------------------------------------------------------------

def parse_args(argv=None):
    """The flags, with a preset's values as defaults (a flag given wins); lab/ measures them too."""
    parser = argparse.ArgumentParser(description="diffu-GRPO (d1 stage 2)")
    parser.add_argument("--preset", type=str, choices=sorted(PRESETS), help="the defaults, by the "
                        "model's size: tiny / testbed (CPU-sized; countdown_toy), 8b (d1's)")
    parser.add_argument("--compile", action="store_true", help="torch.compile each block")
    parser.add_argument("--save-every", type=int, default=10, help="save every N rounds and last")
    # the algorithm (d1's values: docs/d1.md §4.3)
    g = parser.add_argument_group("diffu-GRPO")
    g.add_argument("--objective", type=str, default="diffu_grpo", choices=sorted(OBJECTIVES),
                   help="step 5's loss: diffu_grpo (d1) or one of methods/ (docs/objectives.md)")
    g.add_argument("--rounds", type=int, help="rollout rounds; each gives μ optimizer steps")
    g.add_argument("--prompts-per-step", type=int, help="prompts per round over all ranks (d1: 16)")
    g.add_argument("--num-generations", type=int, help="G, completions per prompt (d1: 6)")
    g.add_argument("--groups-per-micro", type=int, help="prompt groups per micro-batch (d1: 1)")
    g.add_argument("--num-iterations", type=int, help="μ, optimizer steps per rollout (d1: 12)")
    g.add_argument("--epsilon", type=float, help="PPO clip range ε (d1: 0.5)")
    g.add_argument("--beta", type=float, help="KL coefficient β (d1: 0.04); 0 skips the reference")
    g.add_argument("--p-mask", type=float, help="prompt masking probability (d1: 0.15)")
    g.add_argument("--max-prompt-length", type=int, help="prompts cut from the left (d1: 200)")
    g.add_argument("--lr", type=float, help="AdamW learning rate (d1: 3e-6)")
    g.add_argument("--warmup-rounds", type=int, default=0, help="lr rises over N rounds (d1: ~0)")
    g.add_argument("--weight-decay", type=float, help="AdamW weight decay (d1: 0.1)")
    g.add_argument("--grad-clip", type=float, help="max gradient norm (d1: 0.2; 0: no clipping)")
    g.add_argument("--adam-beta2", type=float, default=0.99, help="AdamW β2 (d1: 0.99)")
    g.add_argument("--lora-r", type=int, help="LoRA rank, 0 = full fine-tuning (d1: 128)")
    g.add_argument("--lora-alpha", type=float, help="LoRA alpha (d1: 64)")
    g.add_argument("--gen-length", type=int, help="completion canvas length (d1: 256)")
    g.add_argument("--block-length", type=int, help="semi-AR block length (d1: 32)")
    g.add_argument("--diffusion-steps", type=int, help="sampler steps (d1: 128)")
    g.add_argument("--temperature", type=float, help="rollout temperature (d1: 0.9)")
    g.add_argument("--fixed-mask-seed", action="store_true", help="d1's ablation: mask seed 42")
    g.add_argument("--scale-std", action="store_true", help="advantages / group std (GRPO's)")
    g.add_argument("--estimator", type=str, default="one_step", choices=estimators.ESTIMATORS,
                   help="per-token log-probs: one_step (d1's), or methods/estimators.py's")
    sampling.add_rollout_flags(parser)  # Fast-dLLM's rollouts, off by default: d1's exact sampler
    add_protocol_flags(parser)  # --sudoku-split, --val-size, --eval-every, ... (taskdata/splits.py)
    # start model (d1: the merged SFT), run dir, data, set-up, saves, system: ops/trainers.py
    add_training_flags(parser, tasks.TASKS, (TOY_START, "which `python sft.py` writes"), "out/grpo",
                       "the latest save")
    for add in dict.fromkeys(o.flags for o in OBJECTIVES.values() if o.flags):  # each objective's
        add(parser)
    # d1's four LoRA targets (docs/d1.md §4.3); 4000 unlabelled toy puzzles
    parser.set_defaults(lora_targets="q_proj,k_proj,v_proj,up_proj", num_examples=4000)
    return parse_with_preset(parser, PRESETS, tasks.TASKS, argv)


# -----------------------------------------------------------------------------

if __name__ == "__main__":
    args = parse_args()
    hp, objective, sampler = round_setup(args)  # the round's hyper-parameters, objective, sampler

    # the flags, data, model and out-dir checked: bad input is one line and exit 2 (ops/checks.py)
    with upfront():
        world_size = int(os.environ.get("WORLD_SIZE", 1))  # torchrun's; the group comes later
        check_grpo_args(args, world_size, tasks.TASKS, check_schedule, objective.check)
        examples = load_rl_data(args, tasks.TASKS)  # every task's prompts, shuffled (d1: seed 42)
        # the Sudoku split, and validation carved out (taskdata/splits.py)
        examples, val, split = protocol_split(args, examples, tasks.TASKS)
        # d1-LLaDA's RL starts from the MERGED SFT model (d1 issue #8); the labels fit the canvas
        labels = lambda tok: tasks.check_tokenizer(args.task, tok, examples + val, args.gen_length)
        check_model_and_out_dir(args, TOY_START if tasks.generated(args.task) else None,
                                "diffu-GRPO starts from the SFT model: run sft.py first", labels)
    # one log column per reward function, as d1
    comp_names = sorted({f.__name__ for ex in examples for f in tasks.get(ex["task"]).rewards})

    # distributed init, as nanoGPT's: torchrun sets RANK / LOCAL_RANK / WORLD_SIZE (one process
    # without them); a lost rank stops in one line; the precision and the seed (ops/ddp.py)
    run = init_training(args)
    device, master, world_size, rank = run.device, run.master, run.world_size, run.rank
    # d1's batch (docs/d1.md §4.1): 16 prompts x G = 6 per step, on any world size
    accum = args.prompts_per_step // args.groups_per_micro // world_size  # micro-batches a rank

    # model: the start model with LoRA adapters (the reference: adapters off), --resume's weights
    raw_model, tokenizer, ref_context, resumed = load_policy(args, run)  # ops/trainers.py
    # DDP: backward averages gradients over ranks (nanoGPT's); --fsdp shards weights, grads, AdamW
    model = wrap_for_training(raw_model, run, args.fsdp)
    ref_model = load_reference(args, run)  # full fine-tuning with β > 0: a frozen copy
    params = [p for p in raw_model.parameters() if p.requires_grad]  # after sharding: DTensors
    # AdamW: d1's betas, eps 1e-8 (docs/d1.md §4.3); --resume puts its state back (0: a fresh run)
    optimizer = torch.optim.AdamW(params, args.lr, (0.9, args.adam_beta2), 1e-8, args.weight_decay)
    start_round = start_run(args, run, raw_model, optimizer, resumed, "round")[0]
    # LLaDA: mask 126336, EOS 126081 (also the pad), which ends the completion mask
    mask_id, eos_id = raw_model.config.mask_token_id, raw_model.config.eos_token_id

    # -------------------------------------------------------------------------
    # the loop: one rollout round, then μ optimizer steps on it
    t_start = time.time()
    # the split and provenance beside the flags, which stay as typed (--resume auto compares them)
    rec = {**split, **vars(args), "world_size": world_size, "provenance": run.provenance}
    metrics_file, elapsed0 = open_metrics(args.out_dir, rec, start_round) if master else (None, 0.0)
    # training time: the clock of earlier runs (a resume) plus this one's, validation left out
    elapsed = lambda: elapsed0 + time.time() - t_start - (curve.seconds if curve else 0)
    # --eval-every: val_acc with eval.py's protocol (from the start model), the best round kept
    curve = validation_curve(args, raw_model, tokenizer, val) if args.eval_every and master \
        else None
    save = lambda s: save_checkpoint(args, run, raw_model, optimizer, s, split, False)
    best = Best(args, run, start_round, save, curve, metrics_file)
    bar = progress(range(start_round, args.rounds), master, desc="grpo", initial=start_round,
                   total=args.rounds)
    bad_steps = 0  # optimizer steps skipped in a row (non-finite loss or gradient)
    for rnd in bar:
        reseed(args.seed, rnd, rank)  # LoRA dropout's draws, keyed by round: resume-safe
        for group in optimizer.param_groups:  # constant after --warmup-rounds (d1: 0)
            group["lr"] = args.lr * min(1.0, (rnd + 1) / max(1, args.warmup_rounds))
        # every rank sees the round's prompts and takes micro-batches rank, rank + world_size, ...
        first = rnd * args.prompts_per_step  # walk the (shuffled) data in order; resume-safe
        round_examples = [examples[(first + i) % len(examples)]
                          for i in range(args.prompts_per_step)]

        # 1. rollout: G completions per prompt, noise keyed by (seed, round, global micro-batch)
        t0, timing, batches, n_cut = time.time(), {}, [], 0
        for i, m in enumerate([m * world_size + rank for m in range(accum)]):  # global indices
            bar.set_description_str(f"grpo: rollout {i + 1}/{accum}")  # a round takes minutes
            exs = round_examples[m * args.groups_per_micro:(m + 1) * args.groups_per_micro]
            # (b, P), b = groups_per_micro * G, EOS pads: Dream hides them, LLaDA attends them (d1)
            prompt, cut, real = group_prompts(tokenizer, exs, hp.G, args.max_prompt_length, eos_id)
            prompt, n_cut, pads = prompt.to(device), n_cut + cut, pad_mask(raw_model, real)
            # raw_model, not the DDP wrapper: no gradient sync (FSDP: every rank makes the calls)
            generator = rollout_generator(args.seed, rnd, m, device)
            completion, rec = rollout(raw_model, prompt, generator, run.amp, hp, sampler, pads)
            exs = [ex for ex in exs for _ in range(hp.G)]  # each example G times, as the prompts
            mask, calls = completion_mask(completion, eos_id), rec["model_calls"]  # (b, N), int
            batches.append(MicroBatch(m, exs, prompt, completion, mask, calls, rec, pad_mask=pads))
        timing["rollout"] = time.time() - t0

        # 2. rewards and 3. advantages (groups never span ranks, so this is local)
        t0, comp_sum = time.time(), Counter(dict.fromkeys(comp_names, 0.0))
        bar.set_description_str("grpo: reward")
        for b in batches:
            # as d1: specials stripped, so the text also holds what follows the first EOS (§2.4)
            texts = tokenizer.batch_decode(b.completion, skip_special_tokens=True)
            # r_i = the plain sum of the task's rewards, weights 1 (§4.2); code runs in sandboxes
            scored = tasks.total_rewards(texts, b.examples)  # [(r_i, {reward function: value})]
            b.rewards = torch.tensor([total for total, _ in scored])  # (b,)
            for _, parts in scored:
                comp_sum.update(parts)  # adds each reward function's values
            b.adv = group_advantages(b.rewards, hp.G, hp.scale_std).to(device)  # (b,), groups of G
        timing["reward"] = time.time() - t0

        # 4. μ mask seeds, then old and reference log-probs for every seed, once, without gradients
        t0 = time.time()
        bar.set_description_str("grpo: old/ref")
        seeds = mask_seeds(args.seed, rnd, hp.mu, args.fixed_mask_seed)
        # before any update: θ_old is exactly the θ that sampled the rollouts
        score_old_ref(raw_model, ref_model, ref_context, batches, seeds, objective, hp, run.amp)
        timing["old_ref"] = time.time() - t0

        # 5. μ optimizer steps; step j scores every micro-batch under mask seed j
        t0, stats = time.time(), {}  # means over steps and micro-batches
        for j, s in enumerate(seeds):
            bar.set_description_str(f"grpo: update {j + 1}/{len(seeds)}")
            # `model` (the DDP / FSDP wrapper): the only pass that needs gradient sync
            st = policy_step(model, batches, j, s, optimizer, params, objective, hp, run.amp,
                             mask_id, accum, run)
            for k, v in st.items():
                stats[k] = stats.get(k, 0.0) + v / len(seeds)  # skipped: the share of the μ steps
            bad_steps = bad_steps + 1 if st["skipped"] else 0  # the same on every rank
            record = {"step": rnd + 1, "elapsed_s": elapsed(), "skipped": stats["skipped"]}
            stop_if_stalled(bad_steps, args, run, metrics_file, record, f"in round {rnd + 1}",
                            "lower --lr, or check the data and the start model")
        timing["update"] = time.time() - t0

        # 6. logging: the metrics averaged over the ranks (one all-reduce), a line in metrics.jsonl
        metrics = mean_over_ranks(round_metrics(batches, hp.G, stats, comp_sum), run)
        if master:  # the console line, the round's record (with the curve, when due)
            report_round(bar, metrics_file, rnd + 1, metrics, timing, curve, elapsed(), n_cut)
        # SIGTERM / SIGUSR1 / Ctrl-C or --max-hours, on any rank: all save, exit 75 (ops/stop.py)
        stopping = run.stop.requested(run)
        if (saved := stopping or (rnd + 1) % args.save_every == 0 or rnd + 1 == args.rounds):
            save_checkpoint(args, run, raw_model, optimizer, rnd + 1, split)  # rank 0 writes
        best.update(rnd + 1, curve, saved)  # a better val_acc: best.json names this round
        if stopping and rnd + 1 < args.rounds:
            run.stop.exit(run, metrics_file, args.out_dir, rnd + 1, "round", stopping)
    if master:
        metrics_file.close()
        print(f"done in {time.time() - t_start:.0f}s; model in {args.out_dir}, metrics in "
              f"{metrics_file.name}")
    finish(run)  # every rank waits for rank 0's last save, then the group goes down together
