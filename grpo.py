"""
diffu-GRPO: reinforcement learning for a masked diffusion LM, d1's second stage (arXiv 2504.12216
Sec. 3; docs/d1.md §3-4). GRPO (DeepSeekMath, arXiv 2402.03300) needs per-token log-probs
log π(o_k | q), which a diffusion model does not give cheaply. d1's answer, the one-step estimator
(logprob.py): mask the whole completion and each prompt token with probability p = 0.15, run ONE
forward pass, and read every completion token's log-prob off it. The random prompt mask is drawn
from a seed that is stored, so the current, old and reference policies score each sample under the
same masked prompt q'.

One round, as written out in the loop below:
  1. rollout: for each prompt, G completions with sample.py (d1's exact sampler)
  2. rewards r_i: the sum of the task's reward functions on the decoded text (rewards.py)
  3. advantages A_i = r_i - mean(r_group)   (no division by the std, following Dr. GRPO; optional)
  4. μ mask seeds; for each, old and reference per-token log-probs, once, without gradients
     (reference = the base model with LoRA adapters switched off, or a frozen copy)
  5. μ optimizer steps; step j uses mask seed j:
       ρ_ik = exp(ℓθ_ik - ℓold_ik)
       L = mean over completion tokens of  -min(ρ A, clip(ρ, 1-ε, 1+ε) A) + β (e^(ℓref-ℓθ) - (ℓref-ℓθ) - 1)
     where "completion tokens" are those up to and including the first EOS, and the mean runs over
     all tokens of the micro-batch (token-level, as d1 does: longer answers weigh more).

The methods after d1 plug in through one seam, the objective registry (OBJECTIVES): wd1, JustGRPO,
SPG, ESPO and the trajectory likelihood of d2 / TraceRL, each a file of methods/ with its loss, its
likelihood and the passes it needs; --rollout-cache / --rollout-threshold take Fast-dLLM's sampler
(methods/sampling.py). Deliberate differences from d1 (docs/differences.md) are noted where they happen.
Runs survive crashes and preemption (--resume continues bit for bit, docs/reliability.md).

Run:
    python grpo.py                                   # toy Sudoku on the tiny model (after python sft.py), CPU
    python grpo.py --resume auto                     # after a crash or a stop (exit 75): continue if there is a save
    torchrun --nproc_per_node=8 grpo.py --task gsm8k --data openai/gsm8k:main:train \\
        --model-dir out/sft-s1k --out-dir out/grpo-gsm8k      # a real task: --preset 8b; --objective wd1: wd1
"""
import argparse
import os
import time
from dataclasses import dataclass, field, replace

import torch

import tasks
from eval import validation_curve
from logprob import SEED_STRIDE, mask_generator, mask_seeds, one_step_logprobs
from methods import espo, estimators, justgrpo, sampling, spg, trajectory, wd1
from methods.common import Objective
from ops.best import Best
from ops.checks import check_grpo_args, require, upfront
from ops.ddp import clip_grad_norm, finish, init_training, reseed, set_grad_sync, step_if_finite, wrap_for_training
from ops.metrics import log_metrics, mean_over_ranks, open_metrics, progress, report_round, round_metrics
from ops.resume import save_checkpoint
from ops.trainers import (add_training_flags, check_model_and_out_dir, load_policy, load_reference,
                          parse_with_preset, start_run, stop_if_stalled)
from sample import check_schedule, generate
from taskdata.data import group_prompts, load_rl_data
from taskdata.splits import add_protocol_flags, check_protocol_flags, protocol_split

# The presets: the CPU toy; the testbed (clean labels, 1-3 reasoning lines, many answers: docs/testbed.md); the
# paper's recipe for LLaDA-8B (docs/d1.md §4.3; train.yaml), and the other objectives' papers' (methods/). A flag
# given on the command line overrides its preset value. The toy's lr is 1e-4: 3e-4 peaked mid-run, then decayed on
# all 3 seeds (docs/findings.md)
PRESETS = {
    "tiny": dict(num_generations=6, prompts_per_step=16, groups_per_micro=16, num_iterations=2,
                 epsilon=0.5, beta=0.0, p_mask=0.15, lr=1e-4, weight_decay=0.0, grad_clip=1.0,
                 gen_length=16, block_length=16, diffusion_steps=8, temperature=1.0,
                 max_prompt_length=256, lora_r=0, lora_alpha=64.0, load_in_4bit=False, rounds=30),
    "testbed": dict(task="countdown_toy", num_generations=6, prompts_per_step=16, groups_per_micro=16,
                    num_iterations=4, epsilon=0.5, beta=0.0, p_mask=0.15, lr=1e-4, weight_decay=0.0, grad_clip=1.0,
                    gen_length=48, block_length=16, diffusion_steps=24, temperature=1.0,
                    max_prompt_length=256, lora_r=0, lora_alpha=64.0, load_in_4bit=False, rounds=40),
    "8b": dict(num_generations=6, prompts_per_step=16, groups_per_micro=1, num_iterations=12,
               epsilon=0.5, beta=0.04, p_mask=0.15, lr=3e-6, weight_decay=0.1, grad_clip=0.2,
               gen_length=256, block_length=32, diffusion_steps=128, temperature=0.9,
               max_prompt_length=200, lora_r=128, lora_alpha=64.0, load_in_4bit=True, rounds=700),
    "justgrpo": justgrpo.PRESET, "spg": spg.PRESET, "espo": espo.PRESET,
}

TOY_START = "out/sft"  # the toys' start model without --model-dir: what `python sft.py` writes

# -----------------------------------------------------------------------------
# the math, as small pure functions


def completion_mask(completion, eos_id):
    """(B, N) float: 1 for tokens up to AND including the first EOS, 0 after (all ones if there
    is no EOS). d1 trains on the EOS itself and ignores the EOS padding that follows it."""
    is_eos = completion == eos_id  # (B, N)
    # number of EOS strictly before position k; the first EOS has 0 before it and is kept
    eos_before = torch.cumsum(is_eos.long(), dim=1) - is_eos.long()  # (B, N)
    # (B, N): what follows the first EOS is the EOS padding of the fixed-length canvas (docs/d1.md §2.4)
    return (eos_before == 0).float()


def group_advantages(rewards, group_size, scale_std=False, eps=1e-4):
    """A_i = r_i - mean of its group of G consecutive samples, (B,) -> (B,). d1 does not divide by
    the group std (Dr. GRPO, arXiv 2503.20783); scale_std=True gives the original GRPO form."""
    r = rewards.view(-1, group_size)  # (num_groups, G): group_prompts repeats each prompt G times in a row
    # a completion is judged only against its siblings, so no value network is needed (docs/d1.md §4.2)
    adv = r - r.mean(dim=1, keepdim=True)  # (num_groups, G), each row sums to 0
    if scale_std:
        # original GRPO: (r - mean) / (std + eps); a group of equal rewards has std 0: eps turns 0/0 into 0
        adv = adv / (r.std(dim=1, keepdim=True) + eps)
    return adv.view(-1)


def masked_mean(x, mask):
    """Σ x·mask / Σ mask over every entry of the micro-batch (one count, never 0 / 0)."""
    return (x * mask).sum() / mask.sum().clamp(min=1)


def grpo_loss(logp, old_logp, ref_logp, advantages, mask, epsilon, beta):
    """diffu-GRPO's clipped surrogate + β·k3 KL, averaged over the micro-batch's completion tokens.
    logp (B, N) with grad; old_logp, ref_logp (B, N) without (ref may be None when β = 0);
    advantages (B,); mask (B, N). Returns (loss, stats dict of floats)."""
    ratio = torch.exp(logp - old_logp)  # (B, N); exactly 1 at the first step after the rollout
    # PPO's clipped surrogate per token, every token of a completion sharing its advantage (docs/d1.md §4.2; d1
    # trains with ε = 0.5); where the clipped term is the smaller one, the clip binds and no gradient flows
    unclipped = ratio * advantages[:, None]  # (B, N)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * advantages[:, None]  # (B, N)
    per_token = -torch.min(unclipped, clipped)  # (B, N)
    kl = torch.zeros_like(logp)  # β = 0: no reference pass at all, and the logged KL is 0
    if beta != 0.0:
        # Schulman's k3 estimator of KL(π_θ || π_ref), e^(ref - θ) - (ref - θ) - 1 >= 0, evaluated at samples of
        # π_old with no importance weight, as TRL does (docs/d1.md §4.2)
        d = ref_logp - logp  # (B, N)
        kl = torch.exp(d) - d - 1
        per_token = per_token + beta * kl
    # ONE token count for the whole micro-batch, not a mean per sequence (TRL's choice at d1's commit): a
    # longer answer weighs more (d1 issue #1)
    loss = masked_mean(per_token, mask)  # scalar
    with torch.no_grad():
        # clip_frac: tokens where the clip binds. Deviation, in logging only: TRL at d1's commit logs the share
        # with ρA < clip(ρ)A (docs/d1.md §4.2), the other side. ratio_mean / ratio_dev: how far the policy has
        # moved from θ_old on these tokens, mean ρ and mean |ρ - 1|
        stats = {"kl": masked_mean(kl, mask).item(), "clip_frac": masked_mean((unclipped > clipped).float(), mask).item(),
                 "ratio_mean": masked_mean(ratio, mask).item(), "ratio_dev": masked_mean((ratio - 1).abs(), mask).item()}
    return loss, stats


# -----------------------------------------------------------------------------
# The objective registry, the seam every later method plugs in through (README "Adding an objective"): d1's
# diffu-GRPO, written out above, and one entry per file of methods/. An entry (methods/common.Objective) says
# what the objective reads of a round: its loss, its likelihood (d1's: the one-step estimate), the passes.


def d1_loss(logp, b, j, hp):  # micro-batch b at inner step j, under d1's flags
    return grpo_loss(logp, b.old[j], b.ref[j] if hp.beta else None, b.adv, b.mask, hp.epsilon, hp.beta)


def one_step(model, b, generator, hp, mask_id):  # d1's likelihood of micro-batch b: the one-step estimate
    return one_step_logprobs(model, b.prompt, b.completion, mask_id, hp.p_mask, generator)  # (b, N)


D1 = Objective(d1_loss, logprobs=one_step)
OBJECTIVES = {"diffu_grpo": D1, "wd1": wd1.OBJECTIVE, "justgrpo": justgrpo.OBJECTIVE, "spg": spg.OBJECTIVE,
              "espo": espo.OBJECTIVE, "trajectory": replace(D1, **trajectory.LIKELIHOOD)}  # d1's loss, another ℓ


@dataclass(frozen=True)
class Hyper:
    """One round's hyper-parameters: all a phase of the round reads of the flags (round_setup)."""
    G: int              # completions per prompt (d1: 6)
    mu: int             # μ, optimizer steps per rollout (d1: 12)
    epsilon: float      # PPO clip range ε (d1: 0.5)
    beta: float         # KL coefficient β (d1: 0.04); 0 skips the reference passes
    p_mask: float       # prompt masking probability of the one-step estimator (d1: 0.15)
    gen_length: int     # the rollout sampler: canvas, block, steps, temperature (d1: 256, 32, 128, 0.9)
    block_length: int
    steps: int
    temperature: float
    grad_clip: float    # max gradient norm (d1: 0.2)
    scale_std: bool     # divide advantages by the group std (original GRPO; d1: no)
    own: dict = field(default_factory=dict)  # the objective's own flags (methods/), by name


def round_setup(args):
    """The flags -> (Hyper, the objective, the rollout sampler): looked up once. The objective's likelihood
    is its own, or d1's one-step estimate (--estimator: another estimator, methods/estimators.py); the
    sampler is None for d1's exact sampler, else methods/sampling.py's with the --rollout-* options."""
    obj = OBJECTIVES[args.objective]
    if obj.logprobs in (None, one_step) and args.estimator != "one_step":
        obj = replace(obj, logprobs=estimators.likelihood(args.estimator))
    hp = Hyper(args.num_generations, args.num_iterations, args.epsilon, args.beta, args.p_mask, args.gen_length,
               args.block_length, args.diffusion_steps, args.temperature, args.grad_clip, args.scale_std,
               {k: getattr(args, k) for k in obj.options})
    sampler = sampling.rollout_sampler(args.rollout_cache, args.rollout_threshold, args.rollout_threshold_rule,
                                       record=obj.trace)
    return hp, replace(obj, logprobs=obj.logprobs or one_step), sampler


# -----------------------------------------------------------------------------
# Seeds. Every random stream of a run is keyed by what it is for (run seed, round, mask seed, global
# micro-batch index), never by rank or by how many draws came before, so a run gives the same numbers
# on any world size and after a resume (both tested). The prompt masks' keys are logprob.py's
# (mask_generator, mask_seeds); the rollouts' noise is keyed here.

ROUND_STRIDE = 10_007  # between rounds of one run's rollout noise: a prime > micro-batches per round


def rollout_generator(seed, rnd, micro_index, device):
    """The sampling noise of one micro-batch's rollout, keyed by (run seed, round, global micro-batch)."""
    # on the model's device: (b, block, V) float64 Gumbel noise drawn on CPU was 3/4 of an 8B rollout's time
    return torch.Generator(device=device).manual_seed(seed * SEED_STRIDE + rnd * ROUND_STRIDE + micro_index)


@dataclass
class MicroBatch:
    """groups_per_micro prompt groups of G completions each: the unit of every pass. The rollout
    (step 1) fills the first seven fields; the others are filled by steps 2-4 of the round."""
    index: int                # global micro-batch index of the round: keys its noise and masks
    examples: list            # (b,) the task examples, each repeated G times, b = groups_per_micro * G
    prompt: torch.Tensor      # (b, P) left-padded prompt ids
    completion: torch.Tensor  # (b, N) sampled completion ids
    mask: torch.Tensor        # (b, N) 1 up to and including the first EOS (completion_mask)
    calls: int = 0            # the sampler's model calls for this rollout (fewer than steps only with threshold)
    trace: dict = None        # the sampler's record (objective.trace): commit_step, token_logp (b, N) each
    rewards: torch.Tensor = None  # (b,) summed task rewards (step 2)
    adv: torch.Tensor = None      # (b,) group-relative advantages (step 3)
    old: list = field(default_factory=list)  # μ x (b, N) log-probs under θ_old, one per mask seed (step 4)
    ref: list = field(default_factory=list)  # μ x (b, N) under θ_ref; empty when β = 0 (step 4)


# -----------------------------------------------------------------------------
# The phases of a round that touch the model, as functions: the loop below calls them, and so
# does lab/bench.py, so the benchmark times (and its pass-count test checks) the trainer itself.


def rollout(model, prompt, generator, amp, hp, sampler=None):
    """Step 1: one completion per prompt row, (b, P) -> ((b, N), the sampler's record: model calls, and
    what a trajectory objective reads). d1's exact sampler, or `sampler` (round_setup). Eval mode: no LoRA
    dropout in the sampler (d1 leaves it on): the old policy is the sampling one."""
    model.eval()
    # d1's rollout sampler: low-confidence remasking, no CFG (docs/d1.md §2.3); one model call per step
    kw = dict(gen_length=hp.gen_length, block_length=hp.block_length, steps=hp.steps, temperature=hp.temperature,
              generator=generator)
    stats = {"model_calls": hp.steps}
    with amp():  # no grad inside either sampler
        out = generate(model, prompt, **kw) if sampler is None else sampler(model, prompt, **kw, stats=stats)
    return out[:, prompt.shape[1]:], stats  # (b, N): the sampler never changes the prompt


@torch.no_grad()
def score_old_ref(model, ref_model, ref_context, batches, seeds, obj, hp, amp):
    """Step 4: per mask seed and micro-batch, θ_old's likelihood and, when β > 0, θ_ref's, under the very
    same masks (a generator rebuilt from (seed, b.index)), as the objective reads them (one that draws no
    mask: once, for every seed); ref_model None: `model` inside ref_context. Fills each .old / .ref."""
    model.eval()
    for b in batches:
        for s in seeds if obj.seeded else seeds[:1]:
            # one seed at a time: d1's masks (one no-grad μ·b-row forward, docs/d1.md §3.2) at 1/μ of its memory
            with amp():
                if obj.needs_old:  # (b, N) for d1's estimator
                    b.old.append(obj.logprobs(model, b, mask_generator(s, b.index), hp, None))
                if obj.needs_ref and hp.beta:
                    with ref_context():  # a fresh generator from the same key: exactly the masks θ_old saw
                        b.ref.append(obj.logprobs(ref_model if ref_model is not None else model, b,
                                                  mask_generator(s, b.index), hp, None))
        if not obj.seeded:  # the same likelihood serves every inner step
            b.old, b.ref = b.old * len(seeds), b.ref * len(seeds)


def policy_step(model, batches, j, seed, optimizer, params, obj, hp, amp, mask_id, accum, run=None):
    """Step 5, inner step j of μ: every micro-batch's log-probs under mask seed `seed` (a forward and a
    backward each) into the objective, gradients accumulated (averaged over ranks on the last one),
    then one clipped optimizer step. `model`: the wrapped policy (no .config under DDP: mask_id).
    -> loss and statistics (means over this rank's micro-batches), grad_norm, skipped (1.0: a
    non-finite loss or gradient on some rank of `run`, the step not taken)."""
    model.train()  # LoRA dropout (if any) only in the policy pass
    stats = {}
    for i, b in enumerate(batches):
        set_grad_sync(model, i == len(batches) - 1)  # DDP / FSDP: all-reduce only on the last micro-batch
        if obj.policy_pass is not None:  # its own forwards and backwards (JustGRPO: chunks of positions)
            st = obj.policy_pass(model, b, j, mask_generator(seed, b.index), hp, mask_id, accum, amp, obj.loss)
        else:
            with amp():
                # the key of the old/ref passes of seed j, so ρ compares the same masked view (docs/d1.md §3.2).
                # Deviation: step j uses seed j for every micro-batch; d1's `_step % μ` gives each only μ/2 masks
                logp = obj.logprobs(model, b, mask_generator(seed, b.index), hp, mask_id)  # (b, N)
            loss, st = obj.loss(logp, b, j, hp)  # tensors in, a scalar out
            # HF divides each micro-batch loss by the accumulation steps in d1 too (docs/d1.md §4.2)
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
    """The flags, flat, with a preset's values as defaults (any flag given overrides its preset
    value). A function, so that lab/ measures exactly what these flags would run."""
    parser = argparse.ArgumentParser(description="diffu-GRPO (d1 stage 2)")
    parser.add_argument("--preset", type=str, choices=sorted(PRESETS), help="the defaults: tiny for the CPU toys, "
                        "testbed for countdown_toy, 8b (d1's recipe) as soon as --task holds a real task")
    parser.add_argument("--model-dir", type=str, default="", help="the start model (d1: the merged SFT model): a "
                        "directory in the official layout, a hub cache snapshot, or a hub id owner/name[@revision] "
                        f"(default: {TOY_START}, which `python sft.py` writes, for the toys; a real task must name one)")
    parser.add_argument("--out-dir", type=str, default="out/grpo", help="the run: saves/step-N, metrics.jsonl, and "
                        "the latest save as the run's model")
    parser.add_argument("--compile", action="store_true", help="torch.compile each block (docs/performance.md)")
    # the algorithm's hyper-parameters (d1's values: docs/d1.md §4.3)
    g = parser.add_argument_group("diffu-GRPO")
    g.add_argument("--objective", type=str, default="diffu_grpo", choices=sorted(OBJECTIVES), help="step 5's "
                   "loss: diffu_grpo (d1) or one of methods/ (docs/objectives.md)")
    g.add_argument("--rounds", type=int, help="rollout rounds; each gives num_iterations optimizer steps")
    g.add_argument("--prompts-per-step", type=int, help="prompts per round over all ranks (d1: 16)")
    g.add_argument("--num-generations", type=int, help="G, completions per prompt (d1: 6)")
    g.add_argument("--groups-per-micro", type=int, help="prompt groups per micro-batch (d1: 1)")
    g.add_argument("--num-iterations", type=int, help="μ, optimizer steps per rollout (d1: 12 or 8)")
    g.add_argument("--epsilon", type=float, help="PPO clip range ε (d1: 0.5)")
    g.add_argument("--beta", type=float, help="KL coefficient β (d1: 0.04); 0 skips the reference passes")
    g.add_argument("--p-mask", type=float, help="prompt masking probability of the estimator (d1: 0.15)")
    g.add_argument("--max-prompt-length", type=int, help="longer prompts are cut from the left (d1: 200)")
    g.add_argument("--lr", type=float, help="AdamW learning rate (d1: 3e-6)")
    g.add_argument("--warmup-rounds", type=int, default=0, help="lr rises linearly over N rounds (d1: ~0)")
    g.add_argument("--weight-decay", type=float, help="AdamW weight decay (d1: 0.1)")
    g.add_argument("--grad-clip", type=float, help="max gradient norm (d1: 0.2; 0: no clipping, still logged)")
    g.add_argument("--lora-r", type=int, help="LoRA rank, 0 = full fine-tuning (d1: 128)")
    g.add_argument("--lora-alpha", type=float, help="LoRA alpha (d1: 64)")
    g.add_argument("--gen-length", type=int, help="completion canvas length (d1: 256)")
    g.add_argument("--block-length", type=int, help="semi-AR block length (d1: 32)")
    g.add_argument("--diffusion-steps", type=int, help="sampler steps (d1: 128)")
    g.add_argument("--temperature", type=float, help="rollout temperature (d1: 0.9)")
    g.add_argument("--fixed-mask-seed", action="store_true", help="d1's ablation: mask seed 42 for every step")
    g.add_argument("--scale-std", action="store_true", help="divide advantages by the group std (original GRPO)")
    g.add_argument("--estimator", type=str, default="one_step", choices=estimators.ESTIMATORS, help="per-token "
                   f"log-probs: one_step (d1), coupled (DiffuCoder), elbo (LLaDA's MC ELBO, {estimators.ELBO_DRAWS} "
                   "draws; methods/estimators.py)")
    parser.add_argument("--save-every", type=int, default=10, help="save every N rounds (and at the end)")
    sampling.add_rollout_flags(parser)  # Fast-dLLM's rollouts, off by default: d1's exact sampler
    add_protocol_flags(parser)  # --sudoku-split, --val-size, --eval-every, --test-curve (taskdata/splits.py)
    add_training_flags(parser, tasks.TASKS)  # data, model set-up, saves, resume, system: sft.py's too (ops/trainers.py)
    for add in dict.fromkeys(o.flags for o in OBJECTIVES.values() if o.flags):  # each objective's own flags
        add(parser)
    # d1's four LoRA targets (docs/d1.md §4.3); 4000 unlabelled toy puzzles
    parser.set_defaults(lora_targets="q_proj,k_proj,v_proj,up_proj", num_examples=4000)
    return parse_with_preset(parser, PRESETS, tasks.TASKS, argv)


def check_args(args, world_size, objective):
    """Every flag that cannot work, as one ValueError: the protocol's (taskdata/splits.py), then ranges and
    combinations (ops/checks.py) with the tasks, the sampler's layout, the objective's own, the data paths."""
    check_protocol_flags(args, tasks.TASKS)  # --val-size, --sudoku-split, --test-curve
    check_grpo_args(args, world_size, tasks.names("rewards"), check_schedule, objective.check)


# -----------------------------------------------------------------------------

if __name__ == "__main__":
    args = parse_args()
    hp, objective, sampler = round_setup(args)  # the round's hyper-parameters, objective and sampler, once

    # bad input is one line and exit 2 before anything is loaded or written (ops/checks.py)
    with upfront():
        world_size = int(os.environ.get("WORLD_SIZE", 1))  # torchrun's; the process group comes after
        check_args(args, world_size, objective)  # every flag that cannot work
        examples = load_rl_data(args, tasks.TASKS)  # every task's prompts, shuffled once (d1: seed 42)
        examples, val, split = protocol_split(args, examples, tasks.TASKS)  # Sudoku split, validation carved out
        require(args.prompts_per_step <= len(examples), f"--prompts-per-step {args.prompts_per_step} is more than "
                f"the {len(examples)} prompts in the data")
        # d1-LLaDA's RL starts from the MERGED SFT model (d1 issue #8)
        check_model_and_out_dir(args, TOY_START if tasks.generated(args.task) else None, "diffu-GRPO starts from "
                                "the SFT model: run `python sft.py` first, or pass --model-dir (make run: out/toy/seed0/sft)")
    # one log column per reward function, as d1
    comp_names = sorted({f.__name__ for ex in examples for f in tasks.get(ex["task"]).rewards})

    # distributed init, as nanoGPT's: torchrun sets RANK / LOCAL_RANK / WORLD_SIZE (one process without them);
    # a lost rank stops in one line, and the precision and the seed are set (ops/ddp.py)
    run = init_training(args)
    device, master, world_size, rank = run.device, run.master, run.world_size, run.rank
    G = hp.G  # d1's batch (docs/d1.md §4.1): 16 prompts x G = 6 per step, on any world size
    accum = args.prompts_per_step // args.groups_per_micro // world_size  # micro-batches per rank per step

    # model: the start model with LoRA adapters (the reference policy: adapters off), --resume's weights put back
    raw_model, tokenizer, ref_context, saved = load_policy(args, run, lambda tok: tasks.check_tags(args.task, tok))
    # DDP: every rank holds the model, and backward averages the trainable gradients over the ranks (nanoGPT's);
    # --fsdp shards weights, gradients and AdamW state instead; one process: the model as is (ops/ddp.py)
    model = wrap_for_training(raw_model, run, args.fsdp)
    ref_model = load_reference(args, run)  # full fine-tuning with β > 0: a frozen copy of the start model
    params = [p for p in raw_model.parameters() if p.requires_grad]  # after sharding: FSDP's are DTensors
    optimizer = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.99), weight_decay=args.weight_decay)  # d1's
    start_round = start_run(args, run, raw_model, optimizer, saved, "round")[0]  # --resume's round, else 0
    # LLaDA: mask 126336, EOS 126081 <|endoftext|> (also the pad). EOS ends the completion mask (docs/d1.md §10.5)
    mask_id, eos_id = raw_model.config.mask_token_id, raw_model.config.eos_token_id

    # -------------------------------------------------------------------------
    # the loop: one rollout round, then μ optimizer steps on it
    t_start = time.time()
    # the split's record beside the flags, which stay as typed (--resume auto compares them)
    metrics_file, elapsed0 = open_metrics(args.out_dir, {**split, **vars(args), "world_size": world_size},
                                          start_round) if master else (None, 0.0)
    # --eval-every: val_acc from the start model on, the best round kept (ops/best.py); --test-curve: the toy's study
    curve = validation_curve(args, raw_model, tokenizer, val) if args.eval_every and master else None
    best = Best(args, run, start_round, lambda s: save_checkpoint(args, run, raw_model, optimizer, s, split, False))
    if curve and start_round == 0:
        log_metrics(metrics_file, {"step": 0, "elapsed_s": 0.0, **curve()})
    best.update(0, curve, saved=False)  # the start model, on a fresh run: the round to beat
    bar = progress(range(start_round, args.rounds), master, desc="grpo", initial=start_round, total=args.rounds)
    bad_steps = 0  # optimizer steps skipped in a row (non-finite loss or gradient); --max-bad-steps stops the run
    for rnd in bar:
        reseed(args.seed, rnd, rank)  # LoRA dropout's draws, keyed by round: a resume draws the same
        for group in optimizer.param_groups:  # constant after --warmup-rounds (d1: 0; docs/testbed.md)
            group["lr"] = args.lr * min(1.0, (rnd + 1) / max(1, args.warmup_rounds))
        # every rank sees the same prompt list for the round and takes micro-batches rank, rank + world_size, ...
        first = rnd * args.prompts_per_step  # walk the (shuffled) data in order; resume-safe
        round_examples = [examples[(first + i) % len(examples)] for i in range(args.prompts_per_step)]

        # 1. rollout: G completions per prompt, noise keyed by (seed, round, global micro-batch)
        t0, timing, batches, n_cut = time.time(), {}, [], 0
        for i, m in enumerate([m * world_size + rank for m in range(accum)]):  # this rank's global micro-batches
            bar.set_description_str(f"grpo: rollout {i + 1}/{accum}")  # the phase in the bar: a round takes minutes
            exs = round_examples[m * args.groups_per_micro:(m + 1) * args.groups_per_micro]
            prompt, cut = group_prompts(tokenizer, exs, G, args.max_prompt_length, eos_id)  # EOS is LLaDA's pad
            prompt, n_cut = prompt.to(device), n_cut + cut  # (b, P), b = groups_per_micro * G
            # raw_model, not the DDP wrapper: no gradient sync here. Under FSDP every rank makes the same calls
            completion, record = rollout(raw_model, prompt, rollout_generator(args.seed, rnd, m, device), run.amp,
                                         hp, sampler)  # (b, N), the sampler's record
            batches.append(MicroBatch(m, [ex for ex in exs for _ in range(G)], prompt, completion,
                                      completion_mask(completion, eos_id), record["model_calls"], record))
        timing["rollout"] = time.time() - t0

        # 2. rewards and 3. advantages (groups never span ranks, so this is local)
        t0, comp_sum = time.time(), {name: 0.0 for name in comp_names}
        bar.set_description_str("grpo: reward")
        for b in batches:
            # as d1: specials stripped, so the text also holds what follows the first EOS (docs/d1.md §2.4)
            texts = tokenizer.batch_decode(b.completion, skip_special_tokens=True)
            # r_i = the plain sum of the task's reward functions, all weights 1 (docs/d1.md §4.2); the code
            # reward runs the micro-batch's programs in parallel sandboxes
            scored = tasks.total_rewards(texts, b.examples)  # [(r_i, {reward function: value})]
            b.rewards = torch.tensor([total for total, _ in scored])  # (b,)
            for _, parts in scored:
                for name, v in parts.items():
                    comp_sum[name] += v
            b.adv = group_advantages(b.rewards, G, hp.scale_std).to(device)  # (b,): groups are rows [0:G], ...
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
            st = policy_step(model, batches, j, s, optimizer, params, objective, hp, run.amp, mask_id, accum, run)
            for k, v in st.items():
                stats[k] = stats.get(k, 0.0) + v / len(seeds)  # skipped: the share of the μ steps
            bad_steps = bad_steps + 1 if st["skipped"] else 0  # the same on every rank (a collective decision)
            stop_if_stalled(bad_steps, args, run, metrics_file, {"step": rnd + 1, "elapsed_s": elapsed0 + time.time()
                            - t_start - (curve.seconds if curve else 0), "skipped": stats["skipped"]},
                            f"in round {rnd + 1}", "lower --lr, or check the data and the start model")
        timing["update"] = time.time() - t0

        # 6. logging: every metric averaged over the ranks (one all-reduce), one JSON line per round in metrics.jsonl
        metrics = mean_over_ranks(round_metrics(batches, G, stats, comp_sum), run)
        if master:  # the console line, and the round's record in metrics.jsonl (with the curve, when due)
            report_round(bar, metrics_file, rnd + 1, metrics, timing, curve,
                         elapsed0 + time.time() - t_start - (curve.seconds if curve else 0), n_cut)
        # SIGTERM / SIGUSR1 / Ctrl-C, or --max-hours, on any rank: every rank saves this round, exits 75 (ops/stop.py)
        stopping = run.stop.requested(run)
        if (saved := stopping or (rnd + 1) % args.save_every == 0 or rnd + 1 == args.rounds):
            save_checkpoint(args, run, raw_model, optimizer, rnd + 1, split)  # every rank; rank 0 writes
        best.update(rnd + 1, curve, saved)  # a better val_acc: this round's save becomes best.json's
        if stopping and rnd + 1 < args.rounds:
            run.stop.exit(run, metrics_file, args.out_dir, rnd + 1, "round", stopping)
    if master:
        metrics_file.close()
        print(f"done in {time.time() - t_start:.0f}s; model in {args.out_dir}, metrics in {metrics_file.name}")
    finish(run)  # every rank waits for rank 0's last save, then the group goes down together
