"""
Masked SFT for LLaDA: the first stage of d1 (docs/d1.md §5; LLaDA GUIDELINES.md "SFT").

A masked diffusion model is fine-tuned by corrupting the ANSWER and asking for it back. For
each sequence [prompt | answer], the answer ending in <|eot_id|> and right-padded with EOS:

    t ~ U(0, 1),   p = (1 - eps) t + eps,   eps = 1e-3
    every answer position (EOS padding included) is replaced by [MASK] with probability p;
    the prompt is never masked;
    loss = sum over masked answer positions of CE(logits_i, x_i) / p / (answer positions)

The 1/p weight makes this an upper bound on the answer's negative log-likelihood (LLaDA paper,
arXiv 2502.09992, Eq. 5); dividing by the number of answer positions, pads included, is LLaDA's
rule (and d1's). Training on the EOS padding is how the model learns to end its answer and fill
the rest of its fixed-length canvas with EOS (the sequences: taskdata/data.encode_sft).

Around it (docs/training.md): LoRA as d1's (r 128, alpha 256 on q, k, v) or full fine-tuning
(--fsdp shards it), the best save by eval loss kept with LoRA merged (diffu-GRPO starts from
the merged SFT model, docs/d1.md §5.3), torchrun DDP written out, saves that --resume
continues bit for bit (docs/reliability.md).

Run:
    python sft.py                # toy Sudoku on the tiny model, CPU, ~1 min
    python sft.py --resume       # after a crash: the same flags plus --resume
    # d1's SFT (--preset 8b); full fine-tuning, sharded: docs/training.md
    torchrun --nproc_per_node=8 sft.py --task s1k --data simplescaling/s1K:train \\
        --model-dir GSAI-ML/LLaDA-8B-Instruct --out-dir out/sft-s1k
"""
import argparse
import math
import os
import random
import sys
import time
from collections import Counter

import torch
import torch.distributed as dist
import torch.nn.functional as F

import tasks
from modelio.checkpoint import TINY_DIR, write_default
from modelio.families import read_config
from modelio.tokenizer import load_tokenizer
from ops.checks import check_sft_args, require, upfront
from ops.ddp import (clip_grad_norm, finish, init_training, reseed, set_grad_sync,
                     step_if_finite, wrap_for_training)
from ops.metrics import log_metrics, open_metrics, progress
from ops.resume import save_checkpoint
from ops.trainers import (add_training_flags, check_model_and_out_dir, load_policy,
                          parse_with_preset, per_rank, ranks, start_run, stop_if_stalled)
from taskdata.data import encode_sft, load_sft_data

SFT_EPS = 1e-3  # minimum masking probability (LLaDA GUIDELINES.md)
# The defaults, by the model's size (a flag given overrides): the CPU toy's full fine-tuning of
# the tiny model; d1's SFT of LLaDA-8B-Instruct on s1K (docs/d1.md §5.3): LoRA r 128 / alpha
# 256 on q, k, v, lr 1e-5, weight decay 0.1, max grad norm 1.0, batch 8 (1 x 4 on 2 GPUs), 20
# epochs, no warmup; --max-length is the task's (d1's 4096, taskdata/task.py). Gradient
# checkpointing is ours: d1 fits 4096 tokens with DeepSpeed's CPU offload instead
PRESETS = {
    "tiny": dict(lora_r=0, lora_alpha=256.0, lora_targets="q_proj,k_proj,v_proj", lr=2e-3,
                 weight_decay=0.0, grad_clip=1.0, batch_size=per_rank(32), grad_accum=ranks(),
                 max_steps=400, epochs=0, warmup_steps=10, gradient_checkpointing=False,
                 cut_labels=False),
    "8b": dict(lora_r=128, lora_alpha=256.0, lora_targets="q_proj,k_proj,v_proj", lr=1e-5,
               weight_decay=0.1, grad_clip=1.0, batch_size=1, grad_accum=8,
               max_steps=0, epochs=20, warmup_steps=0, gradient_checkpointing=True,
               cut_labels=True),
}

# -----------------------------------------------------------------------------
# the math, as small pure functions


def sft_noise(input_ids, prompt_lengths, mask_id, generator=None, t=None):
    """Corrupt the answers. input_ids (B, L), prompt_lengths (B,) -> noisy (B, L), masked
    (B, L) bool, p (B,). t (B,) may be given (the eval set's fixed levels), else t ~ U(0,1)."""
    B, L = input_ids.shape
    if t is None:
        t = torch.rand(B, generator=generator)  # one level per sequence (docs/d1.md §5.2)
    # LLaDA's eps floor: t near 0 would blow up sft_loss's 1/p weight; now it is <= 1000
    p = (1 - SFT_EPS) * t + SFT_EPS  # (B,) masking probability, never 0
    # position i is masked iff u_i < p: each answer position independently with probability p
    u = torch.rand(B, L, generator=generator)  # drawn on CPU: same masks on any device
    # answer = every position from the prompt length on, EOS pads included (d1 masks those too,
    # §5.2). On CPU, like u, so the masks are built where they were drawn
    is_answer = torch.arange(L)[None, :] >= prompt_lengths.cpu()[:, None]  # (B, L)
    # d1 masks every position and then restores the prompt; and-ing with is_answer is the same
    masked = (u < p[:, None]) & is_answer  # the prompt is never masked
    masked = masked.to(input_ids.device)
    p = p.to(input_ids.device)
    return torch.where(masked, mask_id, input_ids), masked, p


def sft_loss(logits, input_ids, masked, p, prompt_lengths):
    """sum over masked answer positions of CE / p, divided by the number of answer positions
    (pads included), summed over the batch: LLaDA's SFT loss. logits (B, L, V) -> scalar."""
    # index first, then upcast: only the M masked rows become fp32, never the whole (B, L, V)
    # logits (bf16 under --autocast); unmasked positions carry no loss (d1's labels are -100)
    ce = F.cross_entropy(logits[masked].float(), input_ids[masked], reduction="none")  # (M,)
    # the 1/p weight of the ELBO (LLaDA Eq. 5): a token masked at low noise counts more
    weights = (1.0 / p)[:, None].expand_as(masked)[masked]  # (M,) each token's 1/p
    # d1's denominator (docs/d1.md §5.2): ONE count of non-prompt positions for the batch,
    # pads included. LLaDA's GUIDELINES divide each row by its own answer length, then by B
    # (docs/llada.md §7); the two agree when every prompt has the same length
    n_answer = (input_ids.shape[1] - prompt_lengths).sum()  # answer positions in the batch
    return (ce * weights).sum() / n_answer


def get_lr(step, max_steps, lr, warmup_steps):
    """Linear warmup, then linear decay to 0 (HF's default schedule, which d1's SFT used)."""
    if step < warmup_steps:
        # step + 1: the first step already moves (HF's warmup gives lr 0 at step 0)
        return lr * (step + 1) / warmup_steps
    # d1's SFT had no warmup (docs/d1.md §5.3): --warmup-steps 0 gives exactly HF's linear
    # decay lr * (max_steps - step) / max_steps; max(1, .) guards warmup_steps == max_steps
    return lr * max(0.0, (max_steps - step) / max(1, max_steps - warmup_steps))


# -----------------------------------------------------------------------------

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="masked SFT for LLaDA (d1 stage 1)")
    parser.add_argument("--preset", type=str, choices=sorted(PRESETS),
                        help="the defaults, by the model's size: tiny (a CPU-sized model), 8b "
                        "(d1's SFT of LLaDA-8B); any flag given overrides its value")
    # data
    parser.add_argument("--toy-unfilled", type=float, default=0.55,
                        help="toy: chance a label leaves a blank cell unfilled")
    parser.add_argument("--eval-fraction", type=float, default=0.01,
                        help="held-out share for eval loss (d1: 1%%)")
    parser.add_argument("--max-length", type=int, help="prompt + answer + end of turn, "
                        "EOS-padded (the task's sft_max_length; d1: 4096)")
    parser.add_argument("--cut-labels", action=argparse.BooleanOptionalAction,
                        help="cut a completion past --max-length (d1 cuts s1K at 4096); off: "
                        "such a label is an error")
    # optimization (d1's values: docs/d1.md §5.3)
    parser.add_argument("--lr", type=float, help="AdamW learning rate (d1: 1e-5)")
    parser.add_argument("--weight-decay", type=float, help="AdamW weight decay (d1: 0.1)")
    parser.add_argument("--grad-clip", type=float,
                        help="max gradient norm (d1: 1.0; 0: no clipping, still logged)")
    parser.add_argument("--lora-r", type=int, help="LoRA rank, 0 = full fine-tuning (d1: 128)")
    parser.add_argument("--lora-alpha", type=float, help="LoRA alpha (d1: 256)")
    parser.add_argument("--batch-size", type=int, help="sequences per micro-batch per rank")
    parser.add_argument("--grad-accum", type=int,
                        help="micro-batches per optimizer step (global)")
    parser.add_argument("--max-steps", type=int,
                        help="optimizer steps (overrides --epochs if > 0)")
    parser.add_argument("--epochs", type=float, help="used when --max-steps is 0 (d1: 20)")
    parser.add_argument("--warmup-steps", type=int, help="linear warmup steps")
    parser.add_argument("--eval-every", type=int, default=100,
                        help="every N steps (and at the end): eval loss, a save (a crash "
                        "loses at most N steps), and the model published if its eval loss is "
                        "the best")
    # data, model set-up, saves, resume, system: grpo.py's too (ops/trainers.py)
    add_training_flags(parser, tasks.TASKS, (TINY_DIR, "the tiny random model"), "out/sft",
                       "the best save (LoRA merged)")
    parser.set_defaults(num_examples=512)
    args = parse_with_preset(parser, PRESETS, tasks.TASKS)

    # -------------------------------------------------------------------------
    # bad input is one line and exit 2 before anything is loaded or written (checks.py): the
    # flags, every data line (named file:line), the model's headers, what --out-dir holds
    with upfront():
        check_sft_args(args, int(os.environ.get("WORLD_SIZE", 1)), tasks.TASKS)  # torchrun's
        examples = load_sft_data(args, tasks.TASKS, args.seed)
        # the split below holds out the first eval_fraction; the rest must fill a global batch
        n_eval = (max(1, int(len(examples) * args.eval_fraction)) if args.eval_fraction > 0
                  else 0)
        require(len(examples) - n_eval >= args.batch_size * args.grad_accum,
                f"a global batch of {args.batch_size} x {args.grad_accum} sequences is more "
                f"than the {len(examples) - n_eval} training examples ({len(examples)} minus "
                f"{n_eval} held out)")
        check_model_and_out_dir(args, TINY_DIR if tasks.generated(args.task) else None)
        # tokenised once up front (SFT sets are small: s1K is 1000 rows), before the model
        # loads, after the task's checks (d1's tags; every label within its canvas)
        write_default(args.model_dir)  # the tiny default, on first use
        tokenizer = load_tokenizer(args.model_dir)
        tasks.check_tokenizer(args.task, tokenizer, examples)
        source = args.data or f"--task {args.task}"  # what an error names
        encoded = encode_sft(tokenizer, read_config(args.model_dir)[2], examples,
                             args.max_length, args.cut_labels, source)

    # distributed init (torchrun sets RANK / LOCAL_RANK / WORLD_SIZE), precision, seed (ddp.py)
    run = init_training(args)
    # --grad-accum is GLOBAL (micro-batches per optimizer step over all ranks): the update is
    # the same on any world size. d1: batch 1, accumulation 4, 2 GPUs = 8 sequences per step
    # (docs/d1.md §5.3). accum: micro-steps per rank per step (check_sft_args: it divides)
    accum = args.grad_accum // run.world_size

    # model: LoRA (d1's SFT: r 128, alpha 256, dropout 0.05 on q, k, v, docs/d1.md §5.3; the
    # base frozen) or full fine-tuning; --resume puts the newest complete save's weights back
    raw_model, _, _, saved = load_policy(args, run)
    # DDP: backward averages the trainable gradients over the ranks (nanoGPT's); --fsdp shards
    # weights, gradients and AdamW state instead; one process: the model as is (ops/ddp.py)
    model = wrap_for_training(raw_model, run, args.fsdp)
    params = [p for p in raw_model.parameters() if p.requires_grad]  # after sharding: DTensors
    # AdamW: torch's default betas (0.9, 0.999) and eps 1e-8, HF's adamw_torch, as d1's SFT
    optimizer = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.999),
                                  weight_decay=args.weight_decay)
    # --resume: the optimizer state back; the save republished if best (a crash may tear it)
    start_step, extras = start_run(
        args, run, raw_model, optimizer, saved, "step",
        republish=lambda state: state["extras"]["best_step"] == state["step"])
    raw_model.train()  # LoRA dropout on in the training passes (eval_loss: off and back)
    # the data stream: which sequences and noise each step draws, identical on all ranks; a
    # resume restores its state as the save left it, and the run draws on as it would have
    g = torch.Generator().manual_seed(args.seed)
    best = float("inf")  # the lowest eval loss so far
    best_step = 0  # its step; 0: none yet
    if extras is not None:
        g.set_state(extras["generator"].cpu())  # a CPU generator, wherever the save mapped it
        best = extras["best"]
        best_step = extras["best_step"]
        if run.master:
            print(f"  best eval loss so far {best:.4f} at step {best_step}")

    # -------------------------------------------------------------------------
    # data: a fixed held-out split; every rank builds the same lists
    mask_id = raw_model.config.mask_token_id
    # shuffled once, then the first eval_fraction is held out (n_eval, at least one item if a
    # fraction is asked for): d1 shuffles its 1000 s1K rows (seed 42), holds out the first 1%
    random.Random(args.seed).shuffle(encoded)  # the permutation depends on the length only
    left_out = Counter(e[2] for e in encoded)
    if run.master and (left_out["eot"] or left_out["cut"]):  # said, never silent
        print(f"note: of {len(encoded)} labels, {left_out['eot']} fill --max-length "
              f"{args.max_length} exactly (no end-of-turn token) and {left_out['cut']} are "
              f"cut (--cut-labels)")
    ids_all = torch.tensor([e[0] for e in encoded])  # (N, max_length)
    plen_all = torch.tensor([e[1] for e in encoded])  # (N,)
    eval_ids = ids_all[:n_eval]
    eval_plen = plen_all[:n_eval]
    train_ids = ids_all[n_eval:]
    train_plen = plen_all[n_eval:]
    global_batch = args.batch_size * args.grad_accum  # sequences per optimizer step, all ranks
    # epochs -> steps. d1's 20 epochs of 990 rows at 8 per step were 2460 steps (docs/d1.md
    # §5.3: HF floors per epoch and per GPU); this gives 2475; >= 1 (check_sft_args)
    max_steps = args.max_steps or math.ceil(args.epochs * len(train_ids) / global_batch)
    if run.master:
        print(f"{len(train_ids)} train / {n_eval} eval sequences of {args.max_length} tokens; "
              f"{max_steps} steps of {global_batch} sequences")

    @torch.no_grad()
    def eval_loss():
        """SFT loss on the held-out set with fixed noise levels t = linspace(0, 1) and a fixed
        mask seed (d1's eval also fixes t per item), so successive evals are comparable."""
        if n_eval == 0:
            return float("nan")
        # raw_model, not the DDP wrapper: no gradient bookkeeping. Under FSDP it is the sharded
        # model, whose forward is a collective: every rank runs this (the loop does)
        raw_model.eval()
        # a private generator, a fixed seed: the same masks at every eval, g left untouched
        g_eval = torch.Generator().manual_seed(1234)
        # d1's t = linspace(0, 1, len(eval)) (docs/d1.md §5.2). Deviation: a single eval item
        # (under 200 examples at 1 %) would get t = 0, where p = 1e-3 masks nothing: a loss of
        # 0.0 at every eval, the first save "best" for good; it gets t = 0.5
        t = torch.linspace(0, 1, n_eval) if n_eval > 1 else torch.full((1,), 0.5)
        total = 0.0
        for i in range(0, n_eval, args.batch_size):
            x = eval_ids[i:i + args.batch_size].to(run.device)
            pl = eval_plen[i:i + args.batch_size].to(run.device)
            noisy, masked, p = sft_noise(x, pl, mask_id, g_eval, t=t[i:i + args.batch_size])
            with run.amp():
                logits = raw_model(noisy)  # (b, L, V)
            # times the rows, / n_eval below: a mean over sequences, a short last batch too
            total += sft_loss(logits, x, masked, p, pl).item() * len(x)
        raw_model.train()
        return total / n_eval

    # -------------------------------------------------------------------------
    # the loop
    t0 = time.time()
    # one JSON line per step in <out-dir>/metrics.jsonl, rank 0; a resume rewrites later steps
    record = {**vars(args), "world_size": run.world_size, "provenance": run.provenance}
    metrics_file, elapsed0 = (open_metrics(args.out_dir, record, start_step) if run.master
                              else (None, 0.0))
    # optimizer steps skipped in a row (non-finite loss or gradient); --max-bad-steps stops it
    bad_steps = 0
    bar = progress(range(start_step, max_steps), run.master, desc="sft", initial=start_step,
                   total=max_steps)
    for step in bar:
        t_step = time.time()
        reseed(args.seed, step, run.rank)  # LoRA dropout's draws, keyed by step (for resume)
        lr = get_lr(step, max_steps, args.lr, args.warmup_steps)
        for group in optimizer.param_groups:  # set by hand each step, nanoGPT style
            group["lr"] = lr
        # One global batch = grad_accum micro-batches. Every rank draws the same whole global
        # batch and its noise (on CPU, from the same generator), then keeps micro-batches rank,
        # rank + world_size, ...: the run is identical whatever the world size (tested).
        # Deviation: sequences are drawn WITH replacement (nanoGPT's get_batch), not in
        # shuffled epochs as d1's HF Trainer does; "epochs" only sets the number of steps
        idx = torch.randint(0, len(train_ids), (global_batch,), generator=g)
        X = train_ids[idx]  # (grad_accum * b, L)
        PL = train_plen[idx]  # (grad_accum * b,)
        noisy_all, masked_all, p_all = sft_noise(X, PL, mask_id, g)
        loss_sum = 0.0
        for micro in range(accum):
            # global micro-batch micro * world_size + rank: strided over ranks, as in grpo.py
            j = (micro * run.world_size + run.rank) * args.batch_size
            sl = slice(j, j + args.batch_size)  # this rank's micro-batch
            x = X[sl].to(run.device)
            pl = PL[sl].to(run.device)
            noisy = noisy_all[sl].to(run.device)
            masked = masked_all[sl].to(run.device)
            p = p_all[sl].to(run.device)
            set_grad_sync(model, micro == accum - 1)  # DDP/FSDP: reduce on the last micro-step
            with run.amp():
                logits = model(noisy)  # (b, L, V); bf16 under --autocast, sft_loss upcasts
            # / accum: gradients add up over the micro-steps, DDP/FSDP average over the ranks
            loss = sft_loss(logits, x, masked, p, pl) / accum
            loss.backward()
            loss_sum += loss.item()  # the sum of the / accum losses: the mean micro-batch loss
        # d1: max_grad_norm 1.0 (docs/d1.md §5.3), on the averaged gradient; grad_clip 0 clips
        # nothing but the norm is still logged
        grad_norm = clip_grad_norm(params, args.grad_clip)
        # a NaN or inf loss or gradient norm on any rank skips the step everywhere (untouched)
        stepped = step_if_finite(optimizer, run, loss_sum, grad_norm)
        bad_steps = 0 if stepped else bad_steps + 1
        if run.distributed:  # the logged loss is the mean over ranks
            loss_t = torch.tensor(loss_sum, device=run.device)
            dist.all_reduce(loss_t, op=dist.ReduceOp.AVG)
            loss_sum = loss_t.item()
        bar.set_postfix(loss=f"{loss_sum:.3f}", lr=f"{lr:.2e}")
        record = {"step": step + 1, "loss": loss_sum, "lr": lr, "grad_norm": grad_norm,
                  "skipped": float(not stepped), "tokens": int(X.numel()),
                  "s_step": time.time() - t_step}  # tokens: the global batch
        stop_if_stalled(bad_steps, args, run, metrics_file,
                        {**record, "elapsed_s": elapsed0 + time.time() - t0},
                        f"at step {step + 1}")
        last = step == max_steps - 1
        if (step + 1) % args.eval_every == 0 or last:
            ev = eval_loss()  # on every rank, the whole eval set
            # rank 0's value everywhere: the save below is a collective under FSDP, so all
            # ranks must take the same decision
            if run.distributed:
                ev_t = torch.tensor(ev, device=run.device)
                dist.broadcast(ev_t, src=0)
                ev = ev_t.item()
            record["eval_loss"] = ev
            if run.master:
                bar.write(f"step {step + 1}: train loss {loss_sum:.4f}, eval loss {ev:.4f}, "
                          f"{time.time() - t0:.0f}s")
            # keep the best model by eval loss (d1: load_best_model_at_end); no eval set: the
            # last; a NaN eval loss is never the best
            is_best = n_eval == 0 or ev < best
            if is_best:
                best = ev
                best_step = step + 1
            # a save every eval (every rank: a collective under FSDP), published as the run's
            # model if it is the best; the data generator and the best so far go with it, so
            # --resume continues this exact run
            save_checkpoint(args, run, raw_model, optimizer, step + 1,
                            {"generator": g.get_state(), "best": best, "best_step": best_step,
                             "eval_loss": ev},
                            make_public=is_best)
        if run.master:
            log_metrics(metrics_file, {**record, "elapsed_s": elapsed0 + time.time() - t0})
        # SIGTERM / SIGUSR1 (a cluster's preemption or time limit), Ctrl-C or --max-hours: a
        # save, exit 75. A collective: every rank stops after the same step (ops/stop.py)
        if (stopping := run.stop.requested(run)) and not last:
            if (step + 1) % args.eval_every:  # not saved above; unpublished: the best stays
                save_checkpoint(args, run, raw_model, optimizer, step + 1,
                                {"generator": g.get_state(), "best": best,
                                 "best_step": best_step},
                                make_public=False)
            run.stop.exit(run, metrics_file, args.out_dir, step + 1, "step", stopping)
    if run.master:
        metrics_file.close()
    # every eval loss was NaN: nothing was published, and saying "done" would be a lie
    if best_step == 0:
        if run.master:
            print(f"no model written: every eval loss was NaN (the saves in "
                  f"{args.out_dir}/saves hold the last weights); lower --lr, or check the "
                  f"data", file=sys.stderr)
        finish(run)
        sys.exit(1)
    if run.master:
        print(f"done in {time.time() - t0:.0f}s; best eval loss {best:.4f} at step "
              f"{best_step}; model in {args.out_dir}{run.stop.done_note()}")
    finish(run)  # every rank waits for rank 0's last save, then the group goes down together
