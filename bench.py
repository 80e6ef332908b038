"""
bench.py: what one diffu-GRPO round costs, measured, next to what it should cost.

The analytic cost model (counted in model calls; each call is ONE batched forward over all B
completions, so "passes" are per batch, not per sample):
  rollout      steps forwards          sample.generate: one forward per denoising step
                                       (with CFG it would be 2 rows batched into one call: same count)
  old log-probs  μ forwards            one per mask seed, no grad (grpo.py step 4)
  ref log-probs  μ forwards if β > 0   reference = LoRA off, or a frozen copy; skipped when β = 0
  policy       μ forward + μ backward  one per inner step, one micro-batch (grpo.py step 5)
bench() counts the real calls with hooks on the model(s) and reports them beside analytic_passes().

FLOPs (for TFLOP/s and MFU on a GPU), with N = parameters of the matmuls (everything but the
embedding lookup) and L = prompt + gen_length tokens per sequence:
  forward  ≈ 2·N·L + 4·L²·d·n_layers  per sequence (QKᵀ and AV; small below ~2k tokens)
  fwd+bwd  ≈ 3 × forward for full fine-tuning (backward = 2× forward: grads of activations and of
           weights); ≈ 2 × forward with LoRA (frozen base: no weight grads; adapters are negligible).
MFU is against --peak-tflops, default 989 = H100/H200 SXM dense bf16 (no sparsity).
Weights are random: the numbers are about speed, never about quality.

Two more modes:
  --samplers     the exact sampler against sample.generate's Fast-dLLM options (prefix / dual KV
                 cache, threshold 0.9), greedy, same prompts: seconds, tokens/s, speed-up, model
                 calls, canvas columns forwarded, and token agreement with the exact sampler.
  --memory-plan  for the preset's real layer widths: one policy forward's saved activations,
                 MEASURED (saved_tensors_hooks) on 1- and 2-block models, which runs on a laptop
                 even for the 8B shape, extrapolated to the full depth (exact: blocks are identical),
                 plus counted weight / LoRA / AdamW bytes -> the QLoRA RL step's peak-memory plan.

Run:
    python bench.py --preset tiny                 # CPU, seconds
    python bench.py --preset tiny --samplers --gen-length 256 --block-length 32 --steps 128
    python bench.py --preset 8b --memory-plan --load-in-4bit    # CPU is fine: ~1 min, ~8 GB RAM
    python bench.py --preset 8b --load-in-4bit --json out/bench-8b.json   # one GPU: QLoRA round
    python bench.py --preset 8b --lora-r 128 --gradient-checkpointing     # one GPU: bf16 LoRA round
    python bench.py --model-dir LLaDA-8B-Instruct --preset 8b --samplers  # real weights: agreement means something
"""
import argparse
import copy
import json
import math
import os
import resource
import statistics
import sys
import time

import torch

from ddp import autocast_bf16
from grpo import completion_mask, group_advantages, grpo_loss, mask_generator
from logprob import one_step_logprobs
from model import (BLOCK_LINEARS, TINY_CONFIG, LLaDA, LLaDAConfig, _linear_4bit, add_lora, compile_blocks, load,
                   lora_disabled)
from sample import generate

# preset defaults; any flag given overrides. tiny: the byte tokenizer's ids (256 bytes, then BOS,
# EOS, mask), as make_tiny writes them. 8b: d1's recipe (prompt ≤ 200, gen 256, 128 steps, μ = 12).
PRESETS = {
    "tiny": dict(prompt_len=47, gen_length=16, block_length=16, steps=8, num_iterations=2, lora_r=0, beta=0.04),
    "8b": dict(prompt_len=200, gen_length=256, block_length=32, steps=128, num_iterations=12, lora_r=128, beta=0.04),
}
TINY_IDS = dict(vocab_size=262, embedding_size=262, eos_token_id=257, pad_token_id=257, mask_token_id=258)


def analytic_passes(steps, num_iterations, beta):
    """Model calls of one round (one rollout + μ inner steps, one micro-batch)."""
    mu = num_iterations
    return {"rollout_fwd": steps, "old_fwd": mu, "ref_fwd": mu if beta > 0 else 0,
            "policy_fwd": mu, "policy_bwd": mu}


def matmul_params(model):
    """Parameters that take part in matmuls: all but the embedding table (a lookup)."""
    return sum(p.numel() for n, p in model.named_parameters() if "wte" not in n)


def forward_flops(model, batch, seq_len):
    """≈ 2·N·L + 4·L²·d·n_layers per sequence, times the batch."""
    c = model.config
    return batch * (2 * matmul_params(model) * seq_len + 4 * seq_len**2 * c.d_model * c.n_layers)


def param_count(model):
    """Parameters as the unquantized model has them: a packed NF4 weight stores 2 per byte, so its
    tensor's numel is not the layer's size; its quant_state keeps the original shape."""
    qshape = lambda p: getattr(getattr(p, "quant_state", None), "shape", None)
    return sum(qshape(p).numel() if qshape(p) is not None else p.numel() for p in model.parameters())


def device_label(device):
    if str(device).startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"cpu ({torch.get_num_threads()} threads)"


class PassCounter:
    """Counts forward calls of each hooked model, per phase; a backward is counted when gradient
    flows back into a forward's logits (a tensor hook), i.e. once per loss.backward()."""

    def __init__(self, *models):
        self.phase, self.counts = None, {}
        self.handles = [m.register_forward_hook(self._hook) for m in models if m is not None]

    def _hook(self, module, args, output):
        self.counts[self.phase + "_fwd"] = self.counts.get(self.phase + "_fwd", 0) + 1
        if output.requires_grad:
            phase = self.phase  # the phase of the forward, not of whenever backward runs
            output.register_hook(lambda g: self.counts.__setitem__(phase + "_bwd", self.counts.get(phase + "_bwd", 0) + 1))

    def remove(self):
        for h in self.handles:
            h.remove()


def sync(device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def bench(model, batch_size=6, prompt_len=47, gen_length=16, block_length=None, steps=8,
          num_iterations=2, beta=0.04, lora_r=0, epsilon=0.5, p_mask=0.15, temperature=0.9,
          repeats=1, seed=0, peak_tflops=989.0, lr=1e-6, autocast=False, gradient_checkpointing=False,
          compile=False):
    """Run `repeats` diffu-GRPO rounds on random prompts and return a dict of measured numbers
    (pass counts per round, median seconds per phase, tokens/s, peak memory, FLOP/s on GPU).
    lora_r > 0 adds adapters to `model` in place (the reference is then the base, LoRA off).
    autocast: every forward under torch.autocast(bf16), as grpo.py --autocast;
    gradient_checkpointing: recompute each block in the policy backward."""
    device = next(model.parameters()).device
    cfg = model.config
    block_length = block_length or gen_length
    model.gradient_checkpointing = gradient_checkpointing
    amp = lambda: autocast_bf16(device.type, autocast)
    if lora_r > 0:
        params = add_lora(model, r=lora_r, alpha=64.0, dropout=0.05)
        ref_model, ref_ctx = None, lambda: lora_disabled(model)
    else:
        params = list(model.parameters())
        # full fine-tuning: a frozen copy is the reference (as grpo.py), only when β > 0
        ref_model = copy.deepcopy(model).eval().requires_grad_(False) if beta > 0 else None
        ref_ctx = lambda: torch.no_grad()  # a do-nothing-extra context
    if compile:
        compile_blocks(model)
    opt = torch.optim.AdamW(params, lr=lr)
    counter = PassCounter(model, ref_model)
    g = torch.Generator().manual_seed(seed)
    rollout_g = torch.Generator(device=device).manual_seed(seed)  # as grpo.py: noise drawn on the device
    # random prompt ids below mask_id (the sampler refuses mask tokens in a prompt); G = batch:
    # one group of completions of the same prompt, as in d1
    prompt = torch.randint(0, cfg.mask_token_id, (1, prompt_len), generator=g).repeat(batch_size, 1).to(device)
    if str(device).startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(device)
    times, per_round = {"rollout": [], "old_ref": [], "update": []}, []
    for r in range(repeats):
        counter.counts = {}
        # 1. rollout, eval mode, no grad (inside generate)
        sync(device); t0 = time.perf_counter()
        model.eval(); counter.phase = "rollout"
        with amp():
            out = generate(model, prompt, gen_length=gen_length, block_length=block_length, steps=steps,
                           temperature=temperature, generator=rollout_g)  # (B, P + N)
        completion = out[:, prompt_len:]  # (B, N)
        sync(device); times["rollout"].append(time.perf_counter() - t0)
        mask = completion_mask(completion, cfg.eos_token_id)  # (B, N)
        adv = group_advantages(torch.randn(batch_size, generator=g), batch_size).to(device)  # (B,) random rewards
        seeds = list(range(r * num_iterations, (r + 1) * num_iterations))
        # 2. old (and ref) log-probs for every mask seed, once, no grad
        t0 = time.perf_counter()
        old, ref = [], []
        with torch.no_grad(), amp():
            for s in seeds:
                kw = dict(p_mask_prompt=p_mask, generator=mask_generator(s, 0))
                counter.phase = "old"
                old.append(one_step_logprobs(model, prompt, completion, **kw))
                if beta > 0:
                    counter.phase = "ref"
                    with ref_ctx():
                        kw["generator"] = mask_generator(s, 0)  # the very same prompt mask
                        ref.append(one_step_logprobs(ref_model or model, prompt, completion, **kw))
        sync(device); times["old_ref"].append(time.perf_counter() - t0)
        # 3. μ policy steps: forward with grad, loss, backward, optimizer step
        t0 = time.perf_counter()
        model.train(); counter.phase = "policy"
        for j, s in enumerate(seeds):
            with amp():
                logp = one_step_logprobs(model, prompt, completion, p_mask_prompt=p_mask,
                                         generator=mask_generator(s, 0))  # (B, N) with grad
            loss, _ = grpo_loss(logp, old[j], ref[j] if beta > 0 else None, adv, mask, epsilon, beta)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        sync(device); times["update"].append(time.perf_counter() - t0)
        per_round.append(dict(counter.counts))
    counter.remove()
    if any(c != per_round[0] for c in per_round):
        raise RuntimeError(f"pass counts differ between rounds: {per_round}")
    keys = ("rollout_fwd", "old_fwd", "ref_fwd", "policy_fwd", "policy_bwd")
    res = {"device": device_label(device), "dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
           "params": param_count(model), "batch_size": batch_size, "prompt_len": prompt_len,
           "gen_length": gen_length, "steps": steps, "num_iterations": num_iterations, "beta": beta,
           "lora_r": lora_r, "repeats": repeats, "autocast": autocast, "compile": compile,
           "gradient_checkpointing": gradient_checkpointing,
           "load_in_4bit": any(type(m).__name__ == "Linear4bit" for m in model.modules()),
           "passes": {k: per_round[0].get(k, 0) for k in keys},
           "analytic": analytic_passes(steps, num_iterations, beta),
           "seconds": {k: statistics.median(v) for k, v in times.items()}}
    res["sampler_tokens_per_s"] = batch_size * gen_length / res["seconds"]["rollout"]
    res["forward_passes_per_sample"] = res["passes"]["rollout_fwd"]  # batched: B samples share each
    if str(device).startswith("cuda"):
        res["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        res["memory_kind"] = "torch.cuda.max_memory_allocated"
        # what the caching allocator holds (allocated + cached free blocks): what nvidia-smi sees
        res["peak_reserved_gib"] = torch.cuda.max_memory_reserved(device) / 2**30
        res["device_memory_gib"] = torch.cuda.get_device_properties(device).total_memory / 2**30
        L = prompt_len + gen_length
        fwdbwd = (2 if lora_r > 0 else 3) * forward_flops(model, batch_size, L) * num_iterations
        res["policy_tflops"] = fwdbwd / res["seconds"]["update"] / 1e12
        res["mfu"] = res["policy_tflops"] / peak_tflops
        res["peak_tflops"] = peak_tflops
    else:
        res["peak_memory_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
        res["memory_kind"] = "process RSS (ru_maxrss)"
    return res


def format_table(res):
    """One aligned table: figure | value | device."""
    dev = res["device"]
    flags = "".join(f", {k}" for k in ("load_in_4bit", "autocast", "gradient_checkpointing") if res.get(k))
    rows = [("model", f"{res['params']:,} params, {res['dtype']}, lora_r {res['lora_r']}{flags}", dev),
            ("setup", f"B {res['batch_size']}, prompt {res['prompt_len']}, gen {res['gen_length']}, "
                      f"steps {res['steps']}, μ {res['num_iterations']}, β {res['beta']}", "")]
    for k, v in res["passes"].items():
        ok = "ok" if v == res["analytic"][k] else "MISMATCH"
        rows.append((f"passes {k}", f"{v} (analytic {res['analytic'][k]}, {ok})", dev))
    rows.append(("sampler tokens/s", f"{res['sampler_tokens_per_s']:.1f}", dev))
    rows.append(("forward passes per sample", f"{res['forward_passes_per_sample']} (batched over B)", dev))
    for k, v in res["seconds"].items():
        rows.append((f"seconds {k}", f"{v:.3f} (median of {res['repeats']})", dev))
    rows.append(("peak memory GiB", f"{res['peak_memory_gib']:.2f} [{res['memory_kind']}]", dev))
    if "peak_reserved_gib" in res:
        rows.append(("peak reserved GiB", f"{res['peak_reserved_gib']:.2f} of {res['device_memory_gib']:.1f} "
                                          f"[torch.cuda.max_memory_reserved]", dev))
    if "mfu" in res:
        rows.append(("policy fwd+bwd TFLOP/s", f"{res['policy_tflops']:.1f}", dev))
        rows.append(("policy MFU", f"{100 * res['mfu']:.1f}% of {res['peak_tflops']:g} TFLOP/s peak", dev))
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
    prompt = torch.randint(0, cfg.mask_token_id, (batch_size, prompt_len), generator=g).to(device)
    completion = torch.randint(0, cfg.mask_token_id, (batch_size, gen_length), generator=g).to(device)
    model.train()

    def step():
        logp = one_step_logprobs(model, prompt, completion, generator=mask_generator(0, 0))  # (B, N)
        logp.mean().backward()
        model.zero_grad(set_to_none=False)  # keep the grad buffers: the steady state of training

    for _ in range(2):
        step()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    secs = []
    for _ in range(repeats):
        sync(device); t0 = time.perf_counter()
        step()
        sync(device); secs.append(time.perf_counter() - t0)
    s = statistics.median(secs)
    tflops = 3 * forward_flops(model, batch_size, prompt_len + gen_length) / s / 1e12
    res = {"seconds": s, "tflops": tflops, "mfu": tflops / peak_tflops}
    if device.type == "cuda":
        res["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return res


# d1's trained optimizer steps per task (d1-spec §4.3, its issue #25); a round is μ steps
D1_STEPS = {"gsm8k": 7700, "math": 6600, "countdown": 5000, "sudoku": 3800}


def project_hours(round_seconds, steps, num_iterations, prompts_per_step=16, groups_per_micro=1, n_gpus=1):
    """Wall-clock hours of a diffu-GRPO run from one measured micro-batch round (rollout + old/ref +
    μ updates of groups_per_micro groups, `round_seconds`): a round is μ optimizer steps, and each of
    its prompts_per_step / groups_per_micro micro-batches runs on one of n_gpus GPUs in parallel
    (grpo.py), so rounds x ceil(micro-batches / n_gpus) x round_seconds. Rewards, logging and
    checkpoints are left out (seconds per round against minutes)."""
    rounds = math.ceil(steps / num_iterations)
    micro = math.ceil(prompts_per_step / groups_per_micro / n_gpus)
    return rounds * micro * round_seconds / 3600


def preflight(gargs, n_gpus=0, n_layers=0, peak_tflops=989.0, repeats=1):
    """One diffu-GRPO micro-batch round for the configuration that grpo.py's flags `gargs` describe
    (grpo.parse_args), measured on this machine's first device: seconds per phase, peak memory
    against the device's total (a warning above 90 %), and the projected wall-clock of the run
    (gargs.rounds x μ optimizer steps; also d1's step count when --task is one of d1's). The model
    is gargs.model_dir if it holds one, else random weights of the preset's shape (n_layers > 0:
    that many blocks, for a full fine-tuning step that would not fit with all of them).
    The prompt is max_prompt_length tokens, the longest d1's left cut lets through: an upper bound."""
    device = "cuda" if torch.cuda.is_available() and gargs.device in ("", "cuda") else "cpu"
    dtype = getattr(torch, gargs.dtype) if gargs.dtype else (torch.bfloat16 if device == "cuda" else torch.float32)
    if os.path.exists(os.path.join(gargs.model_dir, "config.json")):
        model, source = load(gargs.model_dir, device=device, dtype=dtype)[0], gargs.model_dir
    elif gargs.preset == "8b" and device == "cpu":
        return {"model": "8B shape", "error": "the 8B shape needs a GPU (~16 GB of bf16 weights, a round is "
                                              "~PFLOPs); on CPU preflight the tiny preset"}
    else:
        config = LLaDAConfig(**TINY_CONFIG, **TINY_IDS) if gargs.preset == "tiny" else LLaDAConfig()
        if n_layers:
            config.n_layers = n_layers
        torch.manual_seed(0)
        with torch.device(device):  # built on the device: no fp32 CPU copy of the 8B shape
            model = LLaDA(config).to(dtype)
        source = f"random weights, {config.n_layers} blocks"
    if gargs.load_in_4bit:
        quantize_blocks(model)
    res = {"config": {k: getattr(gargs, k) for k in ("preset", "task", "num_generations", "groups_per_micro",
                                                      "max_prompt_length", "gen_length", "block_length",
                                                      "diffusion_steps", "num_iterations", "beta", "lora_r",
                                                      "load_in_4bit", "gradient_checkpointing", "compile")},
           "model": source}
    try:
        res.update(bench(model, batch_size=gargs.groups_per_micro * gargs.num_generations,
                         prompt_len=gargs.max_prompt_length, gen_length=gargs.gen_length,
                         block_length=gargs.block_length, steps=gargs.diffusion_steps,
                         num_iterations=gargs.num_iterations, beta=gargs.beta, lora_r=gargs.lora_r,
                         epsilon=gargs.epsilon, p_mask=gargs.p_mask, temperature=gargs.temperature,
                         repeats=repeats, peak_tflops=peak_tflops, lr=gargs.lr, autocast=gargs.autocast,
                         gradient_checkpointing=gargs.gradient_checkpointing, compile=gargs.compile))
    except torch.cuda.OutOfMemoryError as e:
        res["error"] = f"out of GPU memory: {str(e).splitlines()[0]}"
        return res
    round_s = sum(res["seconds"].values())
    n_gpus = n_gpus or max(1, torch.cuda.device_count())
    steps = {"this run": gargs.rounds * gargs.num_iterations}
    if gargs.task in D1_STEPS:
        steps[f"d1's {gargs.task}"] = D1_STEPS[gargs.task]
    res["round_seconds"] = round_s
    unit = "GPU" if device == "cuda" else "CPU process"
    res["projection_hours"] = {f"{name} ({n} steps), {g} {unit}{'s' * (g > 1)}": project_hours(
        round_s, n, gargs.num_iterations, gargs.prompts_per_step, gargs.groups_per_micro, g)
        for name, n in steps.items() for g in sorted({1, n_gpus})}
    if "device_memory_gib" in res:
        res["memory_share"] = res["peak_reserved_gib"] / res["device_memory_gib"]
    return res


def format_preflight(res):
    """The preflight report: the round's table, then memory and projection lines."""
    if "error" in res:
        return f"preflight ({res['model']}): {res['error']}"
    lines = [f"model: {res['model']}", format_table(res), f"micro-batch round: {res['round_seconds']:.1f} s"]
    if res.get("memory_share", 0) > 0.9:
        lines.append(f"WARNING: peak reserved memory is {100 * res['memory_share']:.0f} % of the device: "
                     f"a longer prompt or a fragmentation spike will run out; use --gradient-checkpointing "
                     f"or a smaller --groups-per-micro")
    elif "memory_share" in res:
        lines.append(f"memory: peak reserved {100 * res['memory_share']:.0f} % of the device (warning above 90 %)")
    lines += [f"projected wall-clock, {k}: {v:.1f} h" for k, v in res["projection_hours"].items()]
    return "\n".join(lines)


# -----------------------------------------------------------------------------
# the samplers side by side: exact (d1's) vs the Fast-dLLM options of sample.generate

SAMPLERS = {  # name -> generate() options; "exact" is the reference every other row is compared with
    "exact": {},
    "prefix cache": dict(cache="prefix"),
    "dual cache": dict(cache="dual"),
    "exact + threshold 0.9": dict(threshold=0.9),
    "dual cache + threshold 0.9": dict(cache="dual", threshold=0.9),
}


def compare_samplers(model, prompt, gen_length=256, block_length=32, steps=128, repeats=3, samplers=SAMPLERS):
    """Greedy generation of the same prompts (B, P) with every sampler. Per sampler: median seconds
    (after one warm-up call), generated tokens/s, model calls, canvas columns forwarded per sample
    (the compute proxy: exact = steps x L), speed-up over exact, and greedy-token agreement with
    exact (share of generated positions holding the same token; and of whole rows identical)."""
    device = next(model.parameters()).device
    calls = []  # input widths of every model call
    handle = model.register_forward_hook(lambda m, args, out: calls.append(args[0].shape[1]))
    rows, ref = {}, None
    try:
        for name, kw in samplers.items():
            run = lambda: generate(model, prompt, gen_length=gen_length, block_length=block_length,
                                   steps=steps, **kw)
            run()  # warm-up (allocator, kernels); also the tokens (greedy: every call is the same)
            secs = []
            for _ in range(repeats):
                calls.clear()
                sync(device); t0 = time.perf_counter()
                out = run()[:, prompt.shape[1]:]  # (B, N)
                sync(device); secs.append(time.perf_counter() - t0)
            ref = out if ref is None else ref
            s = statistics.median(secs)
            rows[name] = {"seconds": s, "tokens_per_s": out.numel() / s, "model_calls": len(calls),
                          "columns_per_sample": sum(calls),
                          "agreement": (out == ref).float().mean().item(),
                          "rows_identical": (out == ref).all(dim=1).float().mean().item()}
    finally:
        handle.remove()
    for r in rows.values():
        r["speedup"] = rows["exact"]["seconds"] / r["seconds"]
    return rows


def format_sampler_table(rows, device, setup):
    head = ("sampler", "s/batch", "tok/s", "speed-up", "calls", "columns/sample", "agree", "rows same")
    lines = [(name, f"{r['seconds']:.3f}", f"{r['tokens_per_s']:.1f}", f"{r['speedup']:.2f}x",
              str(r["model_calls"]), str(r["columns_per_sample"]), f"{100 * r['agreement']:.1f}%",
              f"{100 * r['rows_identical']:.0f}%") for name, r in rows.items()]
    w = [max(len(x[i]) for x in [head] + lines) for i in range(len(head))]
    fmt = lambda x: "  ".join(f"{c:<{w[i]}}" if i == 0 else f"{c:>{w[i]}}" for i, c in enumerate(x))
    return "\n".join([f"greedy sampling, {setup}, on {device}", fmt(head)] + [fmt(x) for x in lines])

# -----------------------------------------------------------------------------
# memory: measured saved activations of one policy forward, and the plan built on them


def saved_bytes(model, prompt, completion, p_mask=0.15):
    """Bytes autograd keeps for backward after ONE policy forward (one_step_logprobs with grad),
    counted with saved_tensors_hooks, each storage once. Parameters (and 4-bit weights) are not
    counted: they live anyway. Returns the activation bytes."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logp = one_step_logprobs(model, prompt, completion, p_mask_prompt=p_mask,
                                 generator=mask_generator(0, 0))
    del logp
    return sum(seen.values())


def quantize_blocks(model):
    """Swap every block linear for bitsandbytes NF4 (as from_pretrained(load_in_4bit=True) does)."""
    for block in model.transformer.blocks:
        for name in BLOCK_LINEARS:
            block.register_module(name, _linear_4bit(getattr(block, name).weight.data))
    return model


def probe_activations(config, batch, prompt_len, gen_length, dtype, lora_r=128, load_in_4bit=True,
                      device="cpu"):
    """Measure the saved activation bytes of the policy forward for the real layer widths without
    the real depth, from models of 1 and 2 blocks (random weights), with and without gradient
    checkpointing. Blocks 2..n are identical, so n blocks save depth1 + (n - 1) * per_block.
    (Block 1 can differ: under LoRA the frozen embedding's output needs no gradient.) Under
    checkpointing a block keeps only its input, which is what per_block measures then."""
    out = {}
    for ckpt in (False, True):
        for n in (1, 2):
            cfg = LLaDAConfig(**{**config.to_dict(), "n_layers": n})
            torch.manual_seed(0)
            with torch.device(device):
                m = LLaDA(cfg).to(dtype)
            if load_in_4bit:
                quantize_blocks(m)
            if lora_r:
                add_lora(m, r=lora_r, alpha=64.0, dropout=0.05)
            m.gradient_checkpointing = ckpt
            m.train()
            g = torch.Generator().manual_seed(0)
            prompt = torch.randint(0, cfg.mask_token_id, (batch, prompt_len), generator=g).to(device)
            completion = torch.randint(0, cfg.mask_token_id, (batch, gen_length), generator=g).to(device)
            out[n, ckpt] = saved_bytes(m, prompt, completion)
            del m
    return {"depth1": out[1, False], "per_block": out[2, False] - out[1, False],
            "depth1_ckpt": out[1, True], "per_block_ckpt": out[2, True] - out[1, True]}


def memory_plan(config, batch, gen_length, probe, lora_r=128, load_in_4bit=True,
                gradient_checkpointing=False, world_size=8, beta=0.04):
    """Peak-memory estimate (GiB per GPU) of one diffu-GRPO policy step, from the measured
    activation probe (same lora_r / 4-bit setting) and counted parameter bytes:
      LoRA (QLoRA with load_in_4bit): the frozen base (NF4 blocks: 4 bits + double-quantized scales;
        or bf16), bf16 embedding / head, fp32 adapters on q, k, v, up + their grads + AdamW states;
      full fine-tuning (lora_r = 0) under FSDP2 over world_size GPUs: fp32 master weights, fp32
        grads and AdamW states, all sharded (16 bytes / param / world_size); the frozen bf16
        reference sharded too (β > 0); and the bf16 parameters FSDP gathers at a time: the root
        unit (embedding, head) and two blocks (the current one and the prefetched next one).
    Activations: depth1 + (n - 1) * per_block (with checkpointing: block inputs only). Backward adds
    at most one block's activations (freed as it goes; recomputed under checkpointing), the fp32
    gradient of the completion log-softmax (B, N, V), and for full FT one block's fp32 gradients
    before they are reduce-scattered."""
    C, F, V, n = config.d_model, config.hidden_size, config.padded_vocab, config.n_layers
    block_params = 4 * C * C + 3 * C * F     # q, k, v, out + gate, up, down (MHA: n_kv_heads = n_heads)
    dense_params = 2 * V * C + (2 * n + 1) * C  # embedding, LM head, norms
    total = n * block_params + dense_params   # 8,015,581,184 for LLaDA-8B (tested)
    ck = "_ckpt" if gradient_checkpointing else ""
    transient = probe["per_block"] + batch * gen_length * V * 4
    if lora_r:
        per_weight = 0.5 + 1 / 64 + 4 / (64 * 256) if load_in_4bit else 2.0
        lora = n * lora_r * (3 * 2 * C + (C + F)) * 4  # fp32 A and B of q, k, v (C -> C), up (C -> F)
        plan = {("NF4 blocks" if load_in_4bit else "bf16 blocks") + " + bf16 embedding/head": n * block_params * per_weight + 2 * dense_params,
                "LoRA adapters (fp32)": lora, "LoRA grads + AdamW states (fp32)": 3 * lora}
    else:
        plan = {f"fp32 weights + grads + AdamW, sharded /{world_size}": 16 * total / world_size,
                f"bf16 reference copy, sharded /{world_size}": 2 * total / world_size if beta else 0.0,
                "gathered bf16 params: root + 2 blocks": 2 * (dense_params + 2 * block_params)}
        transient += 4 * block_params
    plan["saved activations (probe x depth)"] = probe["depth1" + ck] + (n - 1) * probe["per_block" + ck]
    plan["backward transient"] = transient
    plan = {k: v / 2**30 for k, v in plan.items()}
    plan["total"] = sum(plan.values())
    return plan


# -----------------------------------------------------------------------------

if __name__ == "__main__":
    if "--preflight" in sys.argv:  # every other flag is grpo.py's own, with grpo.py's defaults
        import grpo
        extra = argparse.ArgumentParser(description="bench.py --preflight [grpo.py flags]: measure one round "
                                        "of the run those flags describe and project its wall-clock")
        extra.add_argument("--preflight", action="store_true")
        extra.add_argument("--gpus", type=int, default=0, help="GPUs of the run (default: all visible)")
        extra.add_argument("--layers", type=int, default=0, help="random weights with this many blocks")
        extra.add_argument("--peak-tflops", type=float, default=989.0, help="for MFU (989 = H100/H200 dense bf16)")
        extra.add_argument("--json", type=str, default="", help="also write the numbers here")
        ex, rest = extra.parse_known_args()
        res = preflight(grpo.parse_args(rest), ex.gpus, ex.layers, ex.peak_tflops)
        print(format_preflight(res))
        if ex.json:
            with open(ex.json, "w") as f:
                json.dump(res, f, indent=2)
        sys.exit(1 if "error" in res else 0)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", type=str, default="tiny", choices=sorted(PRESETS))
    preset = PRESETS[pre.parse_known_args()[0].preset]
    p = argparse.ArgumentParser(description="benchmark one diffu-GRPO round", parents=[pre])
    p.add_argument("--model-dir", type=str, default="", help="official-layout checkpoint (default: random weights of --preset)")
    p.add_argument("--batch-size", type=int, default=6, help="completions per round (d1's G = 6)")
    p.add_argument("--prompt-len", type=int)
    p.add_argument("--gen-length", type=int)
    p.add_argument("--block-length", type=int)
    p.add_argument("--steps", type=int, help="sampler steps")
    p.add_argument("--num-iterations", type=int, help="μ")
    p.add_argument("--lora-r", type=int, help="0 = full fine-tuning with a frozen reference copy")
    p.add_argument("--beta", type=float, help="KL coefficient; 0 skips the reference passes")
    p.add_argument("--device", type=str, default="", help="default: cuda if available")
    p.add_argument("--dtype", type=str, default="", help="default: bfloat16 on GPU, float32 on CPU")
    p.add_argument("--repeats", type=int, default=1, help="rounds; times are medians")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="for MFU (989 = H100/H200 dense bf16)")
    p.add_argument("--load-in-4bit", action="store_true", help="NF4 block linears (QLoRA; needs --lora-r > 0)")
    p.add_argument("--autocast", action="store_true", help="every forward under bf16 autocast")
    p.add_argument("--gradient-checkpointing", action="store_true", help="recompute blocks in the policy backward")
    p.add_argument("--compile", action="store_true", help="torch.compile each block (fuses the elementwise work)")
    p.add_argument("--samplers", action="store_true", help="instead of a round: exact vs cached samplers, greedy")
    p.add_argument("--policy-mfu", action="store_true", help="instead of a round: the policy forward + backward "
                   "alone, all weights with grads (full fine-tuning's compute), eager and, with --compile, compiled")
    p.add_argument("--memory-plan", action="store_true",
                   help="instead of a round: measure one policy forward's saved activations for the preset's "
                        "layer shapes (1- and 2-layer models, runs on CPU) and print the peak-memory plan")
    p.add_argument("--world-size", type=int, default=8, help="--memory-plan with --lora-r 0: FSDP2 shards over this many GPUs")
    p.add_argument("--json", type=str, default="", help="also write the numbers here")
    p.set_defaults(**preset)
    args = p.parse_args()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = getattr(torch, args.dtype) if args.dtype else (torch.bfloat16 if device.startswith("cuda") else torch.float32)
    config = LLaDAConfig(**TINY_CONFIG, **TINY_IDS) if args.preset == "tiny" else LLaDAConfig()
    if args.memory_plan:  # the real widths, depth 1 and 2: fits a laptop even for the 8B shape
        probe = probe_activations(config, args.batch_size, args.prompt_len, args.gen_length,
                                  torch.bfloat16, args.lora_r, args.load_in_4bit, device=device)
        L = args.prompt_len + args.gen_length
        res = {"probe": probe, "device": device_label(device)}
        print(f"saved activations of one policy forward, B {args.batch_size}, L {L} (measured on "
              f"{res['device']}, bf16): {probe['per_block'] / 2**30:.3f} GiB per block "
              f"({probe['per_block_ckpt'] / 2**30:.3f} checkpointed), {probe['depth1'] / 2**30:.3f} GiB "
              f"for a 1-block model")
        for ckpt in (False, True):
            plan = memory_plan(config, args.batch_size, args.gen_length, probe, args.lora_r,
                               args.load_in_4bit, ckpt, args.world_size, args.beta)
            res[f"plan_checkpointing_{ckpt}"] = plan
            what = f"LoRA r {args.lora_r}" + (" on NF4" if args.load_in_4bit else "") if args.lora_r \
                else f"full fine-tuning, FSDP2 over {args.world_size} GPUs"
            print(f"\npeak memory per GPU, {what}, {config.n_layers} layers, gradient checkpointing "
                  f"{'on' if ckpt else 'off'} (GiB):")
            print("\n".join(f"  {k:<48} {v:6.2f}" for k, v in plan.items()))
    else:  # a round (or the sampler table) on a real model
        if args.preset == "8b" and not device.startswith("cuda"):
            sys.exit("bench.py --preset 8b needs a GPU: LLaDA-8B's shape is ~16 GB of bf16 weights and a round "
                     "is ~PFLOPs; on CPU use --preset tiny")
        torch.manual_seed(0)
        if args.model_dir:
            model = load(args.model_dir, device=device, dtype=dtype)[0]
        else:
            with torch.device(device):  # build in place: no 32 GB fp32 CPU copy of the 8B shape
                model = LLaDA(config).to(dtype)
        if args.load_in_4bit:
            if not args.lora_r:
                sys.exit("--load-in-4bit freezes the base weights: it needs --lora-r > 0")
            quantize_blocks(model)
        if args.policy_mfu:
            res = {"device": device_label(device), "batch_size": args.batch_size,
                   "seq_len": args.prompt_len + args.gen_length, "eager": policy_mfu(
                       model, args.batch_size, args.prompt_len, args.gen_length, peak_tflops=args.peak_tflops)}
            if args.compile:
                res["compiled"] = policy_mfu(compile_blocks(model), args.batch_size, args.prompt_len,
                                             args.gen_length, peak_tflops=args.peak_tflops)
            for k in [k for k in ("eager", "compiled") if k in res]:
                r = res[k]
                print(f"policy fwd+bwd {k}, B {args.batch_size}, L {res['seq_len']}: {r['seconds']:.3f} s, "
                      f"{r['tflops']:.1f} TFLOP/s, MFU {100 * r['mfu']:.1f} % of {args.peak_tflops:g}"
                      + (f", peak {r['peak_memory_gib']:.1f} GiB" if "peak_memory_gib" in r else ""))
        elif args.samplers:
            model.eval()
            if args.compile:
                compile_blocks(model)
            g = torch.Generator().manual_seed(0)
            prompt = torch.randint(0, model.config.mask_token_id, (args.batch_size, args.prompt_len), generator=g)
            rows = compare_samplers(model, prompt.to(device), args.gen_length, args.block_length or args.gen_length,
                                    args.steps, args.repeats)
            setup = (f"B {args.batch_size}, prompt {args.prompt_len}, gen {args.gen_length}, block "
                     f"{args.block_length or args.gen_length}, steps {args.steps}, median of {args.repeats}")
            print(format_sampler_table(rows, device_label(device), setup))
            res = {"samplers": rows, "setup": setup, "device": device_label(device)}
        else:
            res = bench(model, batch_size=args.batch_size, prompt_len=args.prompt_len, gen_length=args.gen_length,
                        block_length=args.block_length, steps=args.steps, num_iterations=args.num_iterations,
                        beta=args.beta, lora_r=args.lora_r, repeats=args.repeats, peak_tflops=args.peak_tflops,
                        autocast=args.autocast, gradient_checkpointing=args.gradient_checkpointing,
                        compile=args.compile)
            print(format_table(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
