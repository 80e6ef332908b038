"""
diffu-GRPO, d1's second stage (arXiv 2504.12216 Sec. 3; docs/d1.md §3-4): GRPO (arXiv
2402.03300) on a masked diffusion LM, whose per-token log-probs come from d1's one-step
estimator (logprob.py): the completion fully masked, each prompt token masked with p = 0.15,
ONE forward pass; the prompt mask's seed is kept, so the current, old and reference policies
score a sample under the same masked prompt q'. One round, as train()'s loop writes it out:
  1. rollout: G completions per prompt with d1's sampler (sample.py)
  2. rewards r_i: the sum of the task's reward functions on the decoded text (rewards.py)
  3. advantages A_i = r_i - mean(r_group)   (no division by the std, as Dr. GRPO)
  4. μ mask seeds; for each, old and reference per-token log-probs, once, without gradients
  5. μ optimizer steps, step j under mask seed j, on
       L = mean_ik -min(ρ_ik A_i, clip(ρ_ik, 1-ε, 1+ε) A_i) + β (e^(r-θ) - (r-θ) - 1)
     with ρ_ik = exp(ℓθ_ik - ℓold_ik), r-θ = ℓref_ik - ℓθ_ik, the mean over the micro-batch's
     tokens up to and including each first EOS (token-level, as d1: long answers weigh more)
  6. logging and saving
A change to d1's round goes into the loop or the functions it calls (README "Changing d1
itself"); deviations from d1 (docs/differences.md) are said where they happen.

Run:
    python grpo.py                  # toy Sudoku on the tiny model (after python sft.py), CPU
    torchrun --nproc_per_node=8 grpo.py --task gsm8k --data openai/gsm8k:main:train \\
        --model-dir out/sft-s1k --out-dir out/grpo-gsm8k     # a real task: --preset 8b
"""
import argparse
import functools
import time
from collections import Counter
from dataclasses import dataclass, field

import torch

import tasks
from eval import validation_curve
from logprob import mask_generator, mask_seeds, one_step_logprobs, rollout_generator
from modelio.families import left_pad_mask
from ops import ddp, trainers
from ops.best import Best
from ops.metrics import mean_over_ranks, open_metrics, progress, report_round, round_metrics
from ops.metrics import no_signal_note, timed
from ops.resume import save_checkpoint
from sample import check_schedule, generate
from taskdata.data import group_prompts

# The presets, by the model's size (a flag given overrides): the CPU toy (lr 1e-4: 3e-4 peaked,
# then decayed on 3 seeds, docs/findings.md); the testbed (docs/testbed.md); d1's recipe for
# LLaDA-8B (docs/d1.md §4.3). Lengths: the task's (tasks.py); the toys' micro-batch: one per rank
TINY = dict(num_generations=6, prompts_per_step=16, groups_per_micro=trainers.per_rank(16),
            num_iterations=2, epsilon=0.5, beta=0.0, p_mask=0.15, lr=1e-4, weight_decay=0.0,
            grad_clip=1.0, temperature=1.0, max_prompt_length=256, lora_r=0, lora_alpha=64.0,
            load_in_4bit=False, rounds=30)
D1_8B = dict(num_generations=6, prompts_per_step=16, groups_per_micro=1, num_iterations=12,
             epsilon=0.5, beta=0.04, p_mask=0.15, lr=3e-6, weight_decay=0.1, grad_clip=0.2,
             temperature=0.9, max_prompt_length=200, lora_r=128, lora_alpha=64.0,
             load_in_4bit=True, rounds=700)
TESTBED = dict(TINY, task="countdown_toy", num_iterations=4, rounds=40)
PRESETS = {"tiny": TINY, "testbed": TESTBED, "8b": D1_8B}
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
    """A_i = r_i - mean of its group of G consecutive samples, (B,) -> (B,). d1 does not divide
    by the group std (Dr. GRPO, arXiv 2503.20783); scale_std=True is the original GRPO form."""
    r = rewards.view(-1, group_size)  # (groups, G): group_prompts repeats a prompt G times
    # a completion is judged only against its siblings: no value network (docs/d1.md §4.2)
    adv = r - r.mean(dim=1, keepdim=True)  # (groups, G), each row sums to 0
    if scale_std:
        # original GRPO: (r - mean) / (std + eps); equal rewards have std 0: eps makes 0/0 0
        adv = adv / (r.std(dim=1, keepdim=True) + eps)
    return adv.view(-1)


def masked_mean(x, mask):
    """Σ x·mask / Σ mask over every entry of the micro-batch (one count, never 0 / 0)."""
    return (x * mask).sum() / mask.sum().clamp(min=1)


def grpo_loss(logp, old_logp, ref_logp, advantages, mask, epsilon, beta):
    """diffu-GRPO's clipped surrogate + β·k3 KL, averaged over the micro-batch's answers.
    logp (B, N) with grad; old_logp, ref_logp (B, N) without (ref may be None when β = 0);
    advantages (B,); mask (B, N). -> (loss, stats dict of floats)."""
    ratio = torch.exp(logp - old_logp)  # (B, N); exactly 1 at the first step after the rollout
    # PPO's clipped surrogate per token, each token with its completion's advantage (§4.2)
    unclipped = ratio * advantages[:, None]  # (B, N)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * advantages[:, None]  # (B, N)
    per_token = -torch.min(unclipped, clipped)  # (B, N)
    kl = torch.zeros_like(logp)  # β = 0: no reference pass at all, and the logged KL is 0
    if beta != 0.0:
        # Schulman's k3 estimator of KL(π_θ || π_ref) at samples of π_old, as TRL (§4.2)
        d = ref_logp - logp  # (B, N)
        kl = torch.exp(d) - d - 1
        per_token = per_token + beta * kl
    # ONE token count for the micro-batch, not a mean per sequence (TRL at d1's commit, §4.2)
    loss = masked_mean(per_token, mask)  # scalar
    with torch.no_grad():  # clip_frac: where the clip binds; ratio_*: how far the policy moved
        stats = {"kl": masked_mean(kl, mask).item(),
                 "clip_frac": masked_mean((unclipped > clipped).float(), mask).item(),
                 "ratio_mean": masked_mean(ratio, mask).item(),
                 "ratio_dev": masked_mean((ratio - 1).abs(), mask).item()}
    return loss, stats


@dataclass(frozen=True)
class Hyper:
    """One round's hyper-parameters: all that the round's phases read of the flags."""
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


def hyper(args):
    """The flags -> the round's Hyper."""
    return Hyper(args.num_generations, args.num_iterations, args.epsilon, args.beta,
                 args.p_mask, args.gen_length, args.block_length, args.diffusion_steps,
                 args.temperature, args.grad_clip, args.scale_std)


@dataclass
class MicroBatch:
    """groups_per_micro prompt groups of G completions: each pass's unit; steps 1-4 fill it"""
    index: int                # global micro-batch index of the round: keys its noise and masks
    examples: list            # (b,) the task examples, each G times, b = groups_per_micro * G
    prompt: torch.Tensor      # (b, P) left-padded prompt ids
    completion: torch.Tensor  # (b, N) sampled completion ids
    mask: torch.Tensor        # (b, N) 1 up to and including the first EOS (completion_mask)
    pad_mask: torch.Tensor = None  # (b, P) 0 on left pads the model hides; None: attended (d1)
    record: dict = field(default_factory=dict)  # the rollout's record: {"model_calls": ...}
    rewards: torch.Tensor = None  # (b,) summed task rewards (step 2)
    adv: torch.Tensor = None      # (b,) group-relative advantages (step 3)
    old: list = field(default_factory=list)  # μ x (b, N) log-probs under θ_old (step 4)
    ref: list = field(default_factory=list)  # μ x (b, N) under θ_ref; [] if β = 0 (step 4)


# -----------------------------------------------------------------------------
# The phases of a round that touch the model; train() takes each as a parameter (d1's default)


def rollout(model, prompt, generator, amp, hp, attention_mask=None, sample=generate):
    """Step 1: a completion per prompt row, (b, P) -> ((b, N), record), with `sample` (d1's),
    the pads hidden where attention_mask says. Eval mode: θ_old is what samples."""
    model.eval()
    # d1's rollout sampler: low-confidence remasking, no CFG (docs/d1.md §2.3); (b, P + N)
    with amp():
        out = sample(model, prompt, attention_mask=attention_mask, gen_length=hp.gen_length,
                     block_length=hp.block_length, steps=hp.steps,
                     temperature=hp.temperature, generator=generator)
    record = {"model_calls": hp.steps}  # one forward per step
    return out[:, prompt.shape[1]:], record  # (b, N): the sampler never changes the prompt


def one_step(model, b, generator, hp, mask_id=None):
    """d1's likelihood of micro-batch b, (b, N): the one-step estimate of each token."""
    return one_step_logprobs(model, b.prompt, b.completion, mask_id, hp.p_mask, generator,
                             b.pad_mask)


@torch.no_grad()
def score_old_ref(model, ref_model, ref_context, batches, seeds, hp, amp, logprobs=one_step):
    """Step 4: per mask seed and micro-batch, θ_old's and (β > 0) θ_ref's log-probs under the
    same masks (a generator rebuilt from (seed, b.index)); ref_model None: ref_context's"""
    model.eval()
    ref = ref_model if ref_model is not None else model
    for b in batches:
        for s in seeds:
            # one seed at a time: d1's masks (§3.2) at 1/μ of d1's memory; mask_id: model's
            with amp():
                b.old.append(logprobs(model, b, mask_generator(s, b.index), hp, None))
                if hp.beta:
                    with ref_context():  # a fresh generator from the same key: θ_old's masks
                        b.ref.append(logprobs(ref, b, mask_generator(s, b.index), hp, None))


def d1_loss(logp, b, j, hp):
    """d1's loss of micro-batch b at inner step j from the policy's log-probs logp (b, N)."""
    ref = b.ref[j] if hp.beta else None  # β = 0: no reference pass ran
    return grpo_loss(logp, b.old[j], ref, b.adv, b.mask, hp.epsilon, hp.beta)


def micro_step(model, b, j, generator, hp, amp, mask_id, accum, logprobs=one_step,
               loss=d1_loss):
    """Step 5 on micro-batch b at inner step j: log-probs, loss, backward. -> its stats."""
    # ρ compares one masked view (§3.2); deviation: seed j for each micro-batch (d1: _step % μ)
    with amp():
        logp = logprobs(model, b, generator, hp, mask_id)  # (b, N)
    value, stats = loss(logp, b, j, hp)
    # HF divides each micro-batch loss by the accumulation steps in d1 too (§4.2)
    (value / accum).backward()  # DDP / FSDP average over ranks
    return {"loss": value.item(), **stats}


def policy_step(model, batches, j, seed, optimizer, params, hp, amp, mask_id, accum,
                run=None, micro=micro_step):
    """Step 5, inner step j of μ: every micro-batch's pass (micro) under mask seed `seed`, one
    clipped optimizer step. -> mean stats, grad_norm, skipped (1.0: non-finite, no step)."""
    model.train()  # LoRA dropout (if any) only in the policy pass
    stats = {}
    for i, b in enumerate(batches):
        ddp.set_grad_sync(model, i == len(batches) - 1)  # DDP / FSDP: all-reduce on the last
        generator = mask_generator(seed, b.index)  # the key of the old/ref passes of seed j
        for k, v in micro(model, b, j, generator, hp, amp, mask_id, accum).items():
            stats[k] = stats.get(k, 0.0) + v / accum
    stats["grad_norm"] = ddp.clip_grad_norm(params, hp.grad_clip)  # d1: max_grad_norm 0.2
    # a NaN or inf anywhere skips the step on every rank, weights and AdamW state untouched
    stepped = ddp.step_if_finite(optimizer, run, stats["loss"], stats["grad_norm"])
    stats["skipped"] = float(not stepped)
    return stats


# -----------------------------------------------------------------------------

def parse_args(argv=None, presets=PRESETS, add_flags=None):
    """The flags, a preset's values as defaults (a flag given wins); add_flags adds more."""
    parser = argparse.ArgumentParser(description="diffu-GRPO (d1 stage 2)")
    parser.add_argument("--preset", type=str, choices=sorted(presets), help="the defaults, by "
                        "the model's size: tiny / testbed (CPU; countdown_toy), 8b (d1's)")
    # d1's algorithm (--num-generations, --epsilon, ...), the optimizer, the protocol's splits
    trainers.add_grpo_flags(parser)  # ops/trainers.py; their values: PRESETS
    # start model (d1: the merged SFT), run dir, data, set-up, saves, system: ops/trainers.py
    trainers.add_training_flags(parser, tasks.TASKS, (TOY_START, "which `python sft.py` "
                                "writes"), "out/grpo", "the latest save")
    if add_flags is not None:
        add_flags(parser)
    return trainers.parse_with_preset(parser, presets, tasks.TASKS, argv)


def train(args, hp, do_rollout=rollout, do_old_ref=score_old_ref, micro=micro_step):
    """The run: checks, data, model, then the loop of rounds, each phase d1's by default."""
    # the flags, data, start model (d1: the MERGED SFT model, docs/d1.md §5) and --out-dir,
    # checked before anything loads: bad input is one line (ops/trainers.py)
    examples, val, split = trainers.rl_data(args, tasks.TASKS, check_schedule,
                                            tasks.check_tokenizer, TOY_START)
    # one log column per reward function, as d1
    comp_names = sorted({f.__name__ for ex in examples for f in tasks.get(ex["task"]).rewards})

    # distributed init as nanoGPT's (torchrun's RANK / WORLD_SIZE), precision, seed: ops/ddp.py
    run = ddp.init_training(args)
    # d1's batch (docs/d1.md §4.1): 16 prompts x G = 6 per step, on any world size
    accum = args.prompts_per_step // args.groups_per_micro // run.world_size  # micro-batches

    # model: the start model with LoRA adapters (reference: adapters off), --resume's weights
    raw_model, tokenizer, ref_context, resumed = trainers.load_policy(args, run)
    # DDP: backward averages gradients over ranks (nanoGPT's); --fsdp shards weights and AdamW
    model = ddp.wrap_for_training(raw_model, run, args.fsdp)
    ref_model = trainers.load_reference(args, run)  # full fine-tuning, β > 0: a frozen copy
    params = [p for p in raw_model.parameters() if p.requires_grad]  # after sharding: DTensors
    # AdamW: d1's betas, eps 1e-8 (docs/d1.md §4.3); --resume puts its state back
    optimizer = torch.optim.AdamW(params, args.lr, (0.9, args.adam_beta2), 1e-8,
                                  args.weight_decay)
    start_round = trainers.start_run(args, run, raw_model, optimizer, resumed, "round")[0]
    mask_id = raw_model.config.mask_token_id  # LLaDA: 126336
    eos_id = raw_model.config.eos_token_id  # LLaDA: 126081, also the pad; ends the completion

    # -------------------------------------------------------------------------
    # the loop: one rollout round, then μ optimizer steps on it
    t_start = time.time()
    # metrics.jsonl (rank 0) opens with the flags as typed, the split and provenance; elapsed0:
    # the training seconds of the runs before a resume
    run_record = {**split, **vars(args), "world_size": run.world_size,
                  "provenance": run.provenance}
    metrics_file, elapsed0 = (open_metrics(args.out_dir, run_record, start_round)
                              if run.master else (None, 0.0))
    # --eval-every: val_acc with eval.py's protocol (from the start model), the best round kept
    curve = (validation_curve(args, raw_model, tokenizer, val)
             if args.eval_every and run.master else None)

    def elapsed():  # training time so far, validation left out
        return elapsed0 + time.time() - t_start - (curve.seconds if curve else 0)
    save_best = functools.partial(save_checkpoint, args, run, raw_model, optimizer,
                                  extras=split, make_public=False)  # best.json's: unpublished
    best = Best(args, run, start_round, save_best, curve, metrics_file)
    bar = progress(range(start_round, args.rounds), run.master, desc="grpo",
                   initial=start_round, total=args.rounds)
    bad_steps = 0  # optimizer steps skipped in a row (non-finite loss or gradient)
    timing = {}  # seconds per phase of the round
    for rnd in bar:
        ddp.reseed(args.seed, rnd, run.rank)  # LoRA dropout's draws, keyed by round
        for group in optimizer.param_groups:  # constant after --warmup-rounds (d1: 0)
            group["lr"] = args.lr * min(1.0, (rnd + 1) / max(1, args.warmup_rounds))
        # every rank sees the round's prompts (the shuffled data in order: resume-safe), then
        # takes micro-batches rank, rank + world_size, ...
        round_examples = [examples[(rnd * args.prompts_per_step + i) % len(examples)]
                          for i in range(args.prompts_per_step)]

        # 1. rollout: G completions per prompt, noise keyed by (seed, round, micro-batch)
        batches = []
        n_cut = 0  # prompts cut to --max-prompt-length
        with timed(timing, "rollout"):
            for i in range(accum):
                m = i * run.world_size + run.rank  # the global micro-batch index
                bar.set_description_str(f"grpo: rollout {i + 1}/{accum}")  # rounds are long
                exs = round_examples[m * args.groups_per_micro:(m + 1) * args.groups_per_micro]
                # (b, P), b = groups_per_micro * G, EOS-padded on the left
                prompt, cut, real = group_prompts(tokenizer, exs, hp.G, args.max_prompt_length,
                                                  eos_id)
                prompt = prompt.to(run.device)
                n_cut += cut
                pads = left_pad_mask(raw_model, real)  # None: LLaDA attends its pads, as d1
                # raw_model, not the DDP wrapper: no gradient sync (FSDP: every rank calls)
                generator = rollout_generator(args.seed, rnd, m, run.device)
                completion, record = do_rollout(raw_model, prompt, generator, run.amp, hp,
                                                pads)
                exs = [ex for ex in exs for _ in range(hp.G)]  # each example G times
                mask = completion_mask(completion, eos_id)  # (b, N)
                batches.append(MicroBatch(m, exs, prompt, completion, mask, pads, record))

        # 2. rewards and 3. advantages (groups never span ranks, so this is local)
        comp_sum = Counter(dict.fromkeys(comp_names, 0.0))  # each reward function's sum
        with timed(timing, "reward", bar):
            for b in batches:
                # as d1: specials stripped, so the text also holds what follows the first EOS
                texts = tokenizer.batch_decode(b.completion, skip_special_tokens=True)
                # r_i = the plain sum of the task's rewards (§4.2); code runs sandboxed
                scored = tasks.total_rewards(texts, b.examples)  # [(r_i, {function: value})]
                b.rewards = torch.tensor([total for total, _ in scored])  # (b,)
                for _, parts in scored:
                    comp_sum.update(parts)
                b.adv = group_advantages(b.rewards, hp.G, hp.scale_std).to(run.device)  # (b,)

        # 4. μ mask seeds, then old and reference log-probs for each, once, without gradients
        seeds = mask_seeds(args.seed, rnd, hp.mu, args.fixed_mask_seed)
        with timed(timing, "old_ref", bar):  # before any update: θ_old is what sampled
            do_old_ref(raw_model, ref_model, ref_context, batches, seeds, hp, run.amp)

        # 5. μ optimizer steps; step j scores every micro-batch under mask seed j
        stats = {}  # means over steps and micro-batches
        with timed(timing, "update"):
            for j, s in enumerate(seeds):
                bar.set_description_str(f"grpo: update {j + 1}/{len(seeds)}")
                # `model` (the DDP / FSDP wrapper): the only pass that needs gradient sync
                st = policy_step(model, batches, j, s, optimizer, params, hp, run.amp, mask_id,
                                 accum, run, micro)
                for k, v in st.items():
                    stats[k] = stats.get(k, 0.0) + v / len(seeds)  # skipped: a share of steps
                bad_steps = bad_steps + 1 if st["skipped"] else 0  # the same on every rank
                stall = {"step": rnd + 1, "elapsed_s": elapsed(), "skipped": stats["skipped"]}
                hint = "lower --lr, or check the data and the start model"
                trainers.stop_if_stalled(bad_steps, args, run, metrics_file, stall,
                                         f"in round {rnd + 1}", hint)

        # 6. logging: metrics averaged over the ranks (one all-reduce), a line in metrics.jsonl
        metrics = mean_over_ranks(round_metrics(batches, hp.G, stats, comp_sum), run)
        if run.master:  # the console line, the round's record (with the curve, when due)
            report_round(bar, metrics_file, rnd + 1, metrics, timing, curve, elapsed(), n_cut)
        # SIGTERM / SIGUSR1 / Ctrl-C / --max-hours on any rank: all save, exit 75 (ops/stop.py)
        stopping = run.stop.requested(run)
        saved = stopping or (rnd + 1) % args.save_every == 0 or rnd + 1 == args.rounds
        if saved:
            save_checkpoint(args, run, raw_model, optimizer, rnd + 1, split)  # rank 0 writes
        best.update(rnd + 1, curve, saved)  # a better val_acc: best.json names this round
        if stopping and rnd + 1 < args.rounds:
            run.stop.exit(run, metrics_file, args.out_dir, rnd + 1, "round", stopping)
    if run.master:
        metrics_file.close()
        print(f"done in {time.time() - t_start:.0f}s; model in {args.out_dir}, metrics in "
              f"{metrics_file.name}{run.stop.done_note()}{no_signal_note(metrics_file.name)}")
    ddp.finish(run)  # every rank waits for rank 0's last save, then the group ends together


if __name__ == "__main__":
    args = parse_args()
    train(args, hyper(args))
