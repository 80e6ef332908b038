"""
lab/bench.py: what one diffu-GRPO round costs, measured, next to what it should cost. The round is
the one grpo.py's own flags describe (every flag not listed below is grpo.py's, parsed by
grpo.parse_args), run through grpo.py's own phase functions.

The analytic cost model is lab/cost.py's (model calls per phase; each call is ONE batched forward over
all B completions, so "passes" are per batch, not per sample); a --rollout-cache narrows the rollout's
calls (columns counted, lab/samplers.analytic_columns) and a --rollout-threshold may end blocks early:
at most `steps` (lab/rollouts.py: each mode). bench() counts the real calls with hooks on the model(s)
and reports them beside cost.analytic_passes().

FLOPs (for TFLOP/s and MFU on a GPU), with N = parameters of the matmuls (everything but the
embedding lookup) and L = prompt + gen_length tokens per sequence:
  forward  ≈ 2·N·L + 4·L²·d·n_layers  per sequence (QKᵀ and AV; small below ~2k tokens)
  fwd+bwd  ≈ 3 × forward for full fine-tuning (backward = 2× forward: grads of activations and of
           weights); ≈ 2 × forward with LoRA (frozen base: no weight grads; adapters are negligible).
MFU is against --peak-tflops, default 989 = H100/H200 SXM dense bf16 (no sparsity). Weights are random
unless --model-dir names a checkpoint: the numbers are about speed, never about quality.

More modes:
  --samplers     the exact sampler against methods/sampling.py's Fast-dLLM options (lab/samplers.py).
  --policy-mfu   the policy forward + backward alone, all weights with gradients, eager and compiled.
  --memory-plan  for the preset's real layer widths: one policy forward's saved activations, MEASURED
                 (saved_tensors_hooks) on 1- and 2-block models (a laptop does it even for the 8B
                 shape), extrapolated to the full depth (exact: blocks are identical), plus counted
                 weight / LoRA / AdamW bytes -> the QLoRA RL step's peak-memory plan (lab/memplan.py).
  --shape        --preset 8b's random-weight shape: llada-8b (default) or dream-7b (GQA 28/4 heads, q/k/v
                 biases, shifted logits, no rollout cache); a checkpoint in --model-dir brings its own.
  --sandbox      the code reward's cost (lab/sandbox_cost.py, no model).

Run (one micro-batch of one group of G unless --groups-per-micro says otherwise):
    python -m lab.bench                                   # the toy round, CPU, seconds
    python -m lab.bench --objective wd1                   # the same round under wd1: no old / ref passes
    python -m lab.bench --samplers --gen-length 256 --block-length 32 --diffusion-steps 128
    python -m lab.bench --rollout-cache dual --rollout-threshold 0.9      # the round with a fast rollout
    python -m lab.bench --preset 8b --memory-plan    # CPU: ~1 min with fast bf16 matmuls, >15 min on 1 AVX2 core
    python -m lab.bench --preset 8b --shape dream-7b --memory-plan                # the same for Dream-7B's shape
    python -m lab.bench --preset 8b --json out/bench-8b.json                     # one GPU: d1's QLoRA round
    python -m lab.bench --preset 8b --shape dream-7b        # one GPU: the QLoRA round at Dream-7B's shape
    python -m lab.bench --preset 8b --no-load-in-4bit --gradient-checkpointing   # one GPU: bf16 LoRA round
    python -m lab.bench --model-dir LLaDA-8B-Instruct --preset 8b --no-load-in-4bit --samplers
    python -m lab.bench --sandbox                         # the code reward: programs/s, one by one vs batched
"""
import argparse
import copy
import json
import os
import resource
import statistics
import sys
import time
from contextlib import nullcontext

import torch

import grpo
from grpo import MicroBatch, completion_mask, group_advantages, policy_step, rollout, score_old_ref
from modelio.adapters import add_lora, lora_disabled, quantize_blocks
from modelio.checkpoint import load
from modelio.families import model_shapes
from modelio.hub import resolve_model
from logprob import mask_generator, one_step_logprobs
from model import TINY_CONFIG, TINY_IDS, LLaDA, LLaDAConfig, compile_blocks
from ops.ddp import autocast_bf16, default_dtype
from lab.cost import analytic_passes, round_flags, scoring_cost
from lab.memplan import run_memory_plan
from lab.sandbox_cost import format_sandbox_cost, sandbox_cost
from lab.samplers import analytic_columns, compare_samplers, format_sampler_table, sync

# The benchmark's defaults per preset are grpo.py's own (one micro-batch: one group of G), so
# the 8B figures are d1's recipe as the trainer runs it. The toy's prompts are 47 tokens long
# ("Sudoku: " + 16 digits in the chat template, byte tokenizer); the 8B's are d1's longest, 200.
TOY_PROMPT_LEN = 47


def default_prompt_len(gargs):
    """The benchmark's prompt length: the toy's (47 tokens), or d1's longest that the left cut lets
    through (--max-prompt-length, 200): an upper bound on the cost."""
    return gargs.max_prompt_length if gargs.preset == "8b" else TOY_PROMPT_LEN


def matmul_params(model):
    """Parameters that take part in matmuls: all but the embedding table (a lookup)."""
    # the embedding is a gather (no FLOPs); the LM head is a real (V x C) matmul and counts
    return sum(p.numel() for n, p in model.named_parameters() if "wte" not in n)


def forward_flops(model, batch, seq_len):
    """≈ 2·N·L + 4·L²·d·n_layers per sequence, times the batch."""
    c = model.config
    # 2 FLOPs (multiply + add) per weight per token: 2·N·L. Attention scores QKᵀ and the mix AV are
    # each 2·L²·d per layer (all heads together), with no causal halving: LLaDA attends both ways.
    # At 8B, L 456: 6.8 TFLOP of matmuls against 0.11 TFLOP of attention per sequence
    return batch * (2 * matmul_params(model) * seq_len + 4 * seq_len**2 * c.d_model * c.n_layers)


def param_count(model):
    """Parameters as the unquantized model has them: a packed NF4 weight stores 2 per byte, so its
    tensor's numel is not the layer's size; its quant_state keeps the original shape."""
    # bitsandbytes' Params4bit carries a quant_state; a plain parameter has none
    qshape = lambda p: getattr(getattr(p, "quant_state", None), "shape", None)
    return sum(qshape(p).numel() if qshape(p) is not None else p.numel() for p in model.parameters())


def device_label(device):
    cuda = str(device).startswith("cuda")
    return torch.cuda.get_device_name(torch.device(device)) if cuda else f"cpu ({torch.get_num_threads()} threads)"


class PassCounter:
    """Counts forward calls of each hooked model, per phase; a backward is counted when gradient
    flows back into a forward's logits (a tensor hook), i.e. once per loss.backward()."""

    def __init__(self, model, ref_model=None):
        self.phase, self.counts, self.ref = None, {}, ref_model
        # hooks on the top-level modules: one count per model call, whatever runs inside it
        self.handles = [m.register_forward_hook(self._hook) for m in (model, ref_model) if m is not None]

    def _hook(self, module, args, output):
        phase = self.phase
        if phase == "old_ref":  # grpo.score_old_ref runs both: the reference is a frozen copy
            # (a second hooked model) or the policy with its LoRA adapters switched off
            ref = module is self.ref or any(getattr(m, "enabled", True) is False for m in module.modules())
            phase = "ref" if ref else "old"
        self.counts[phase + "_fwd"] = self.counts.get(phase + "_fwd", 0) + 1
        if phase == "rollout":  # a cached rollout's later calls forward only a window of the canvas: its width
            self.counts["rollout_columns"] = self.counts.get("rollout_columns", 0) + args[0].shape[1]
        # a cache refresh returns (logits, keys/values), never with grad; counted under the forward's phase
        if isinstance(output, torch.Tensor) and output.requires_grad:
            output.register_hook(lambda g: self.counts.update({phase + "_bwd": self.counts.get(phase + "_bwd", 0) + 1}))

    def remove(self):
        for h in self.handles:
            h.remove()


def bench(model, gargs, prompt_len=None, repeats=1, seed=0, peak_tflops=989.0, completions=None, prompt=None):
    """Run `repeats` diffu-GRPO micro-batch rounds on random prompts, through grpo.py's own phase
    functions (rollout, score_old_ref, policy_step) with the configuration that grpo.py's parsed
    flags `gargs` describe (objective, estimator, μ, β, LoRA, precision, ...: every flag reaches the
    phase it sets), and return a dict of measured numbers (pass counts per round, median seconds
    per phase, tokens/s, peak memory, FLOP/s on GPU). One micro-batch is groups_per_micro groups
    of G completions of random prompts of `prompt_len` tokens; random rewards stand in for step 2.
    gargs.lora_r > 0 adds adapters to `model` in place (the reference is then the base, LoRA off).
    The rollout is the one --rollout-cache / --rollout-threshold give; `completions`, a list, receives
    each round's (B, N) samples. `prompt` (B, P): these prompt rows instead of random ones (task_prompt)."""
    device = next(model.parameters()).device
    hp, obj, sampler = grpo.round_setup(gargs)  # the round's hyper-parameters, objective and sampler, as grpo.py
    cfg, G = model.config, gargs.num_generations
    batch_size = gargs.groups_per_micro * G
    prompt_len = prompt.shape[1] if prompt is not None else prompt_len or default_prompt_len(gargs)
    model.gradient_checkpointing = gargs.gradient_checkpointing
    # grpo.py's phase functions take a context factory: bf16 autocast under --autocast, else a no-op
    amp = lambda: autocast_bf16(device.type, gargs.autocast)
    if gargs.lora_r > 0:
        # the reference is the same model with the adapters switched off: no second copy of the weights
        params = add_lora(model, r=gargs.lora_r, alpha=gargs.lora_alpha, dropout=gargs.lora_dropout,
                          targets=tuple(gargs.lora_targets.split(",")))
        ref_model, ref_ctx = None, lambda: lora_disabled(model)
    else:
        params = list(model.parameters())
        # full fine-tuning: a frozen copy is the reference (as grpo.py), only when β > 0
        ref_model = copy.deepcopy(model).eval().requires_grad_(False) if gargs.beta > 0 else None
        ref_ctx = nullcontext
    if gargs.compile:  # after add_lora / the 4-bit swap, so the compiled blocks run; no warm-up round: the
        compile_blocks(model)  # first round's times include the compilation
    # a real AdamW, as grpo.py: its two moments per trainable parameter are part of the measured peak
    opt = torch.optim.AdamW(params, lr=gargs.lr, betas=(0.9, 0.99), weight_decay=gargs.weight_decay)
    counter = PassCounter(model, ref_model)
    # a CPU generator for the prompt and the random rewards, a device one for the sampler's noise
    g = torch.Generator().manual_seed(seed)
    rollout_g = torch.Generator(device=device).manual_seed(seed)  # as grpo.py: noise drawn on the device
    if prompt is None:  # random prompt ids below mask_id (the sampler refuses a mask in a prompt), each G times
        prompt = torch.randint(0, cfg.mask_token_id, (batch_size // G, prompt_len), generator=g)
        prompt = prompt.repeat_interleave(G, dim=0)  # (B, P): groups of G rows, as group_prompts
    prompt = prompt.to(device)
    if str(device).startswith("cuda"):
        # the peak is measured from here: weights and adapters are resident; AdamW's state appears at
        # the first optimizer step, inside the window
        torch.cuda.reset_peak_memory_stats(device)
    times, per_round = {"rollout": [], "old_ref": [], "update": []}, []
    for r in range(repeats):
        # counts are per round; every round must count the same (checked after the loop)
        counter.counts = {}
        # 1. rollout (grpo.rollout: eval mode, no grad)
        sync(device); t0 = time.perf_counter()
        counter.phase = "rollout"
        completion, trace = rollout(model, prompt, rollout_g, amp, hp, sampler)  # (B, N)
        sync(device); times["rollout"].append(time.perf_counter() - t0)
        if completions is not None:
            completions.append(completion)
        # random rewards stand in for step 2; their group advantages for step 3
        adv = group_advantages(torch.randn(batch_size, generator=g), G, gargs.scale_std).to(device)  # (B,)
        # micro-batch index 0 keys the mask generators; no examples, since the rewards are random anyway
        mask = completion_mask(completion, cfg.eos_token_id)  # (B, N)
        batch = MicroBatch(0, [], prompt, completion, mask, trace=trace, adv=adv)
        # μ mask seeds, new ones every round (any seed costs the same, so consecutive integers do)
        seeds = list(range(r * gargs.num_iterations, (r + 1) * gargs.num_iterations))
        # 2. old (and ref) log-probs for every mask seed, once, no grad: those the objective reads
        t0 = time.perf_counter()
        counter.phase = "old_ref"
        score_old_ref(model, ref_model, ref_ctx, [batch], seeds, obj, hp, amp)
        sync(device); times["old_ref"].append(time.perf_counter() - t0)
        # 3. μ policy steps: forward with grad, the objective's loss, backward, clip, optimizer step
        t0 = time.perf_counter()
        counter.phase = "policy"
        for j, s in enumerate(seeds):
            # accum=1: one micro-batch per optimizer step, so each inner step is forward, backward, clip, AdamW
            policy_step(model, [batch], j, s, opt, params, obj, hp, amp, cfg.mask_token_id, accum=1)
        sync(device); times["update"].append(time.perf_counter() - t0)
        per_round.append(dict(counter.counts))
    counter.remove()
    # the counts must not depend on the round or the data, otherwise analytic_passes is not the cost. Except
    # the rollout's under --rollout-threshold: a block ends when its tokens are written, so it depends on them
    varies = ("rollout_fwd", "rollout_columns") if gargs.rollout_threshold else ()
    fixed = [{k: v for k, v in c.items() if k not in varies} for c in per_round]
    if any(c != fixed[0] for c in fixed):
        raise RuntimeError(f"pass counts differ between rounds: {per_round}")
    keys = ("rollout_fwd", "old_fwd", "ref_fwd", "policy_fwd", "policy_bwd")
    cache = None if gargs.rollout_cache == "none" else gargs.rollout_cache
    res = {"device": device_label(device), "dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
           "params": param_count(model), "batch_size": batch_size, "prompt_len": prompt_len,
           "gen_length": gargs.gen_length, "steps": gargs.diffusion_steps, "num_iterations": gargs.num_iterations,
           "beta": gargs.beta, "lora_r": gargs.lora_r, "objective": gargs.objective, "estimator": gargs.estimator,
           "repeats": repeats, "autocast": gargs.autocast, "compile": gargs.compile,
           "gradient_checkpointing": gargs.gradient_checkpointing,
           # read off the modules: the 4-bit swap happens before bench() is called
           "load_in_4bit": any(type(m).__name__ == "Linear4bit" for m in model.modules()),
           "rollout_cache": gargs.rollout_cache, "rollout_threshold": gargs.rollout_threshold,
           # the mean over rounds: only a threshold rollout's count changes from round to round
           "passes": {k: statistics.mean(c.get(k, 0) for c in per_round) for k in keys},
           "analytic": analytic_passes(gargs),
           # the rollout's canvas columns per sample, counted and analytic (an upper bound with a threshold)
           "rollout_columns": statistics.mean(c["rollout_columns"] for c in per_round),  # every row shares a width
           "analytic_columns": analytic_columns(prompt_len, gargs.gen_length, gargs.block_length,
                                                gargs.diffusion_steps, cache),
           "seconds": {k: statistics.median(v) for k, v in times.items()}}
    # generated tokens only (B x N): the prompt is given, not sampled
    res["sampler_tokens_per_s"] = batch_size * gargs.gen_length / res["seconds"]["rollout"]
    res["forward_passes_per_sample"] = res["passes"]["rollout_fwd"]  # batched: B samples share each
    if str(device).startswith("cuda"):
        # what live tensors held at the peak
        res["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        res["memory_kind"] = "torch.cuda.max_memory_allocated"
        # what the caching allocator holds (allocated + cached free blocks): what nvidia-smi sees
        res["peak_reserved_gib"] = torch.cuda.max_memory_reserved(device) / 2**30
        res["device_memory_gib"] = torch.cuda.get_device_properties(device).total_memory / 2**30
        L = prompt_len + gargs.gen_length
        # the update phase's FLOPs: μ forwards + backwards of B sequences of L tokens. Backward is 2x the
        # forward for full fine-tuning (activation and weight gradients) -> 3x; with LoRA the frozen base
        # needs activation gradients only -> 2x (adapter FLOPs are negligible). The update time also holds
        # clipping and AdamW, so this MFU slightly understates the passes' own
        # the objective's rows per scored sequence (coupled and ELBO run 2, JustGRPO N) multiply the policy's batch
        rows = batch_size * scoring_cost(gargs)[0]
        fwdbwd = (2 if gargs.lora_r > 0 else 3) * forward_flops(model, rows, L) * gargs.num_iterations
        res["policy_tflops"] = fwdbwd / res["seconds"]["update"] / 1e12
        res["mfu"] = res["policy_tflops"] / peak_tflops
        res["peak_tflops"] = peak_tflops
    else:
        # on CPU: the process's peak resident set, Python, torch and the weights included
        res["peak_memory_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
        res["memory_kind"] = "process RSS (ru_maxrss)"
    return res


def format_table(res):
    """One aligned table: figure | value | device."""
    dev = res["device"]
    # the cost-changing flags, listed only when on
    flags = "".join(f", {k}" for k in ("load_in_4bit", "autocast", "gradient_checkpointing") if res.get(k))
    rows = [("model", f"{res['params']:,} params, {res['dtype']}, lora_r {res['lora_r']}{flags}", dev),
            ("setup", f"B {res['batch_size']}, prompt {res['prompt_len']}, gen {res['gen_length']}, "
                      f"steps {res['steps']}, μ {res['num_iterations']}, β {res['beta']}, rollout cache "
                      f"{res['rollout_cache']}, threshold {res['rollout_threshold'] or 'off'}", "")]
    for k, v in res["passes"].items():
        # measured calls beside the analytic model: a MISMATCH means the trainer's passes changed. A threshold
        # rollout may stop a block early: at most the analytic count
        bound = k == "rollout_fwd" and res["rollout_threshold"]
        ok = "ok" if v == res["analytic"][k] or (bound and v <= res["analytic"][k]) else "MISMATCH"
        rows.append((f"passes {k}", f"{v:g} ({'at most ' * bool(bound)}analytic {res['analytic'][k]}, {ok})", dev))
    rows.append(("rollout columns per sample", f"{res['rollout_columns']:g} (analytic "
                 f"{res['analytic_columns']}{', an upper bound' * bool(res['rollout_threshold'])})", dev))
    rows.append(("sampler tokens/s", f"{res['sampler_tokens_per_s']:.1f}", dev))
    rows.append(("forward passes per sample", f"{res['forward_passes_per_sample']:g} (batched over B)", dev))
    for k, v in res["seconds"].items():
        rows.append((f"seconds {k}", f"{v:.3f} (median of {res['repeats']})", dev))
    rows.append(("peak memory GiB", f"{res['peak_memory_gib']:.2f} [{res['memory_kind']}]", dev))
    if "peak_reserved_gib" in res:
        rows.append(("peak reserved GiB", f"{res['peak_reserved_gib']:.2f} of {res['device_memory_gib']:.1f} "
                                          f"[torch.cuda.max_memory_reserved]", dev))
    if "mfu" in res:
        rows.append(("policy fwd+bwd TFLOP/s", f"{res['policy_tflops']:.1f}", dev))
        rows.append(("policy MFU", f"{100 * res['mfu']:.1f}% of {res['peak_tflops']:g} TFLOP/s peak", dev))
    # column widths from the longest cell of each column
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{a:<{w[0]}}  {b:<{w[1]}}  {c}" for a, b, c in rows)


def policy_mfu(model, batch_size=6, prompt_len=200, gen_length=256, repeats=5, peak_tflops=989.0):
    """The policy pass alone, as the MFU target defines it: one_step_logprobs forward + backward of
    a (B, P + N) batch with gradients for every weight (full fine-tuning's compute; no optimizer
    step, so it fits one GPU at 8B: bf16 weights + grads + activations). Median of `repeats` after
    two warm-ups (the first also compiles, if the blocks are compiled). FLOPs: 3 x forward_flops."""
    device = next(model.parameters()).device
    cfg = model.config
    g = torch.Generator().manual_seed(0)
    # random (B, P) prompt and (B, N) completion: the policy pass alone, no rollout before it
    prompt = torch.randint(0, cfg.mask_token_id, (batch_size, prompt_len), generator=g).to(device)
    completion = torch.randint(0, cfg.mask_token_id, (batch_size, gen_length), generator=g).to(device)
    model.train()

    def step():
        logp = one_step_logprobs(model, prompt, completion, generator=mask_generator(0, 0))  # (B, N)
        # any scalar will do: the backward's FLOPs do not depend on the loss
        logp.mean().backward()
        model.zero_grad(set_to_none=False)  # keep the grad buffers: the steady state of training

    # two warm-ups (the first also compiles, if the blocks are compiled): the timed steps are steady state
    for _ in range(2):
        step()
    if device.type == "cuda":
        # the peak of the timed steps, with the grad buffers already allocated by the warm-ups
        torch.cuda.reset_peak_memory_stats(device)
    secs = []
    for _ in range(repeats):
        sync(device); t0 = time.perf_counter()
        step()
        sync(device); secs.append(time.perf_counter() - t0)
    s = statistics.median(secs)
    # 3 x forward: every weight gets a gradient here (full fine-tuning's compute)
    tflops = 3 * forward_flops(model, batch_size, prompt_len + gen_length) / s / 1e12
    res = {"seconds": s, "tflops": tflops, "mfu": tflops / peak_tflops}
    if device.type == "cuda":
        res["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return res


def add_shape_flag(parser):
    """--shape, lab.bench's and lab.preflight's: the 8b preset's random-weight shape, by its name in
    modelio.families.model_shapes() (the one place a name maps to a config)."""
    parser.add_argument("--shape", choices=list(model_shapes()), default="llada-8b", help="--preset 8b's "
                        "random-weight shape (default: %(default)s); a checkpoint in --model-dir brings its own")


def preset_config(preset, shape="llada-8b"):
    """The shape of a preset's random weights: for 8b, `shape`'s (modelio.families.model_shapes: LLaDA-8B's
    or Dream-7B's), else the tiny model's (the byte tokenizer's ids; the testbed trains the tiny model too)."""
    return model_shapes()[shape] if preset == "8b" else LLaDAConfig(**TINY_CONFIG, **TINY_IDS)


def preset_model(gargs, device, dtype, model_dir="", n_layers=0, shape="llada-8b"):
    """The model a benchmark measures: the checkpoint in model_dir if it holds one (its own config wins),
    else random weights of the preset's shape (tiny: the toy's; 8b: `shape`'s), n_layers > 0: that many blocks.
    -> (model, what it is: the checkpoint's local directory), or (None, why not) for the 8B shape on a CPU."""
    try:  # a hub id or a hub cache: its local snapshot (modelio/hub.py); "" or "none": random weights
        model_dir = resolve_model(model_dir).path if model_dir else ""
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"{os.path.basename(sys.argv[0])}: error: {e}") from None
    if model_dir and os.path.exists(os.path.join(model_dir, "config.json")):
        return load(model_dir, device=device, dtype=dtype)[0], model_dir
    if gargs.preset == "8b" and not str(device).startswith("cuda"):
        return None, "the 8B shape needs a GPU (~16 GB of bf16 weights, a round is ~PFLOPs); on CPU use the tiny preset"
    config = preset_config(gargs.preset, shape)
    if n_layers:  # e.g. 8 blocks for a full fine-tuning round: 32 blocks' fp32 AdamW state does not fit one GPU
        config.n_layers = n_layers
    torch.manual_seed(0)  # the same random weights on every run
    with torch.device(device):  # built on the device: no 32 GB fp32 CPU copy of the 8B shape
        model = LLaDA(config).to(dtype)
    return model, f"random weights{f' of {shape} shape' * (gargs.preset == '8b')}, {config.n_layers} blocks"


def main(argv=None):
    """`python -m lab.bench [grpo.py flags] [bench flags]`: every flag that is not the benchmark's
    own is grpo.py's, parsed by grpo.parse_args, so the round measured is the one those flags run.
    One micro-batch of ONE group (--groups-per-micro 1, as on each of d1's GPUs) unless given."""
    p = argparse.ArgumentParser(description="benchmark one diffu-GRPO round; every other flag is grpo.py's")
    p.add_argument("--model-dir", type=str, default="", help="official-layout checkpoint, hub cache or hub id "
                   "(default: random weights of --preset)")
    p.add_argument("--prompt-len", type=int, default=0,
                   help="prompt tokens (default: 47 for tiny, --max-prompt-length for 8b)")
    p.add_argument("--repeats", type=int, default=1, help="rounds; times are medians")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="for MFU (989 = H100/H200 dense bf16)")
    p.add_argument("--samplers", action="store_true", help="instead of a round: exact vs cached samplers, greedy")
    p.add_argument("--policy-mfu", action="store_true", help="instead of a round: the policy forward + backward "
                   "alone, all weights with grads (full fine-tuning's compute), eager and, with --compile, compiled")
    p.add_argument("--memory-plan", action="store_true", help="instead of a round: measure one policy forward's "
                   "saved activations for the preset's layer shapes (1- and 2-layer models, on CPU): the memory plan")
    p.add_argument("--world-size", type=int, default=8,
                   help="--memory-plan with --lora-r 0: FSDP2 shards over this many GPUs")
    add_shape_flag(p)
    p.add_argument("--sandbox", action="store_true", help="instead of a round: programs/s scored by sandbox/run.py, "
                   "a G = 6 group with 10 tests each, one by one vs batched")
    p.add_argument("--json", type=str, default="", help="also write the numbers here")
    args, rest = p.parse_known_args(argv)
    gargs = grpo.parse_args(round_flags(rest))  # later flags win: an explicit one overrides
    device = gargs.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = default_dtype(gargs.dtype, device.split(":")[0])  # grpo.py's default: bf16 on GPU, fp32 on CPU
    B, P = gargs.groups_per_micro * gargs.num_generations, args.prompt_len or default_prompt_len(gargs)
    if args.sandbox:  # no model: the code reward's execution cost
        res = sandbox_cost(repeats=max(3, args.repeats))
        print(format_sandbox_cost(res))  # with the checker and with d1's plain asserts
    elif args.memory_plan:  # the real widths, depth 1 and 2: fits a laptop even for the 8B shape
        res = run_memory_plan(preset_config(gargs.preset, args.shape), gargs, B, P, args.world_size, device,
                              device_label(device), args.shape if gargs.preset == "8b" else "tiny")
    else:  # a round, the policy pass alone, or the sampler table, on a real model
        model, source = preset_model(gargs, device, dtype, args.model_dir, shape=args.shape)
        if model is None:
            sys.exit(f"lab.bench --preset 8b: {source}")
        if args.policy_mfu:  # the policy pass alone, eager first: compile_blocks compiles the model in place
            res = {"device": device_label(device), "batch_size": B, "seq_len": P + gargs.gen_length,
                   "eager": policy_mfu(model, B, P, gargs.gen_length, peak_tflops=args.peak_tflops)}
            if gargs.compile:
                res["compiled"] = policy_mfu(compile_blocks(model), B, P, gargs.gen_length,
                                             peak_tflops=args.peak_tflops)
            for k in [k for k in ("eager", "compiled") if k in res]:
                r = res[k]
                print(f"policy fwd+bwd {k}, B {B}, L {res['seq_len']}: {r['seconds']:.3f} s, "
                      f"{r['tflops']:.1f} TFLOP/s, MFU {100 * r['mfu']:.1f} % of {args.peak_tflops:g}"
                      + (f", peak {r['peak_memory_gib']:.1f} GiB" if "peak_memory_gib" in r else ""))
        elif args.samplers:  # eval mode and greedy: deterministic, so a disagreement is the cache / threshold's
            model.eval()
            if gargs.compile:
                compile_blocks(model)
            # B different random prompts of P tokens each, so no padding
            prompt = torch.randint(0, model.config.mask_token_id, (B, P), generator=torch.Generator().manual_seed(0))
            rows = compare_samplers(model, prompt.to(device), gargs.gen_length, gargs.block_length,
                                    gargs.diffusion_steps, args.repeats)
            setup = (f"B {B}, prompt {P}, gen {gargs.gen_length}, block {gargs.block_length}, steps "
                     f"{gargs.diffusion_steps}, median of {args.repeats}")
            print(format_sampler_table(rows, device_label(device), setup))
            res = {"samplers": rows, "setup": setup, "device": device_label(device)}
        else:
            if gargs.load_in_4bit:  # QLoRA, d1's recipe: NF4 blocks here, bench() adds the adapters on top
                quantize_blocks(model)
            res = bench(model, gargs, P, repeats=args.repeats, peak_tflops=args.peak_tflops)
            print(format_table(res))
    if args.json:  # the same numbers as printed, for gpu_check.py and for comparing runs
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
