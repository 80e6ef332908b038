"""
lab/bench.py: what one diffu-GRPO round costs, measured, next to what it should cost (docs/performance.md).
The round is the one `python -m methods.grpo`'s flags describe (every flag not listed below is the
trainer's), run through grpo.py's own phase functions as methods/grpo.py plugs them in. bench() counts
the real model calls with hooks and reports them beside lab/cost.py's analytic_passes(); FLOPs (TFLOP/s,
MFU against --peak-tflops, default 989 = H100/H200 SXM dense bf16) are forward_flops'. Weights are random
unless --model-dir names a checkpoint: the numbers are about speed, never about quality.

More modes: --samplers (exact vs Fast-dLLM samplers, lab/samplers.py), --policy-mfu (the policy forward +
backward alone, eager and compiled), --memory-plan (lab/memplan.py), --shape (--preset 8b's random-weight
shape: llada-8b or dream-7b), --sandbox (the code reward's cost, lab/sandbox_cost.py).

Run (one micro-batch of one group of G unless --groups-per-micro says otherwise):
    python -m lab.bench                                   # the toy round, CPU, seconds
    python -m lab.bench --objective wd1                   # the same round under wd1: no old / ref passes
    python -m lab.bench --samplers --gen-length 256 --block-length 32 --diffusion-steps 128
    python -m lab.bench --preset 8b --memory-plan    # CPU: ~1 min with fast bf16 matmuls, >15 min on 1 AVX2 core
    python -m lab.bench --preset 8b --json out/bench-8b.json                     # one GPU: d1's QLoRA round
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

import methods.grpo
from grpo import MicroBatch, completion_mask, group_advantages, policy_step
from modelio.adapters import add_lora, lora_disabled, quantize_blocks
from modelio.checkpoint import load
from methods.dream import model_shapes
from modelio.hub import resolve_model
from logprob import mask_generator, one_step_logprobs
from model import TINY_CONFIG, TINY_IDS, LLaDA, LLaDAConfig, compile_blocks
from ops.ddp import autocast_bf16, default_dtype
from lab.cost import analytic_passes, round_flags, scoring_cost
from lab.memplan import run_memory_plan
from lab.sandbox_cost import format_sandbox_cost, sandbox_cost
from lab.samplers import analytic_columns, compare_samplers, format_sampler_table, sync

# the toy's prompts: "Sudoku: " + 16 digits in the chat template, byte tokenizer (the 8B's: d1's longest, 200)
TOY_PROMPT_LEN = 47


def default_prompt_len(gargs):
    """The benchmark's prompt length: the toy's (47 tokens), or d1's longest that the left cut lets
    through (--max-prompt-length, 200): an upper bound on the cost."""
    return gargs.max_prompt_length if gargs.preset == "8b" else TOY_PROMPT_LEN


def matmul_params(model):
    """Parameters that take part in matmuls: all but the embedding table (a lookup; the LM head counts)."""
    return sum(p.numel() for n, p in model.named_parameters() if "wte" not in n)


def forward_flops(model, batch, seq_len):
    """≈ 2·N·L + 4·L²·d·n_layers per sequence (N matmul parameters, L tokens; QKᵀ and AV with no causal
    halving: LLaDA attends both ways), times the batch."""
    c = model.config
    return batch * (2 * matmul_params(model) * seq_len + 4 * seq_len**2 * c.d_model * c.n_layers)


def param_count(model):
    """Parameters as the unquantized model has them: a packed NF4 weight stores 2 per byte, so its
    tensor's numel is not the layer's size; its quant_state keeps the original shape."""
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
    """Run `repeats` diffu-GRPO micro-batch rounds through grpo.py's phase functions as methods/grpo.py plugs
    them in, configured by the parsed flags `gargs` (methods.grpo.parse_args) -> the measured numbers (pass
    counts, median seconds per phase, tokens/s, peak memory, FLOP/s on GPU). One micro-batch: groups_per_micro
    groups of G completions of `prompt` (B, P), or of random prompts of `prompt_len` tokens; random rewards
    stand in for step 2. gargs.lora_r > 0 adds adapters to `model` in place (the reference: LoRA off).
    `completions`, a list, receives each round's (B, N) samples."""
    device = next(model.parameters()).device
    obj = methods.grpo.objective_of(gargs)  # the round's objective and phases, as python -m methods.grpo's
    hp = methods.grpo.hyper(gargs, obj)
    do_rollout = methods.grpo.rollout_of(gargs, obj)  # grpo.rollout, with the field's sampler if asked
    do_old_ref = methods.grpo.old_ref_of(obj)  # grpo.score_old_ref with the objective's likelihood
    micro = methods.grpo.micro_of(obj)  # grpo.micro_step with the objective's likelihood and loss
    cfg, G = model.config, gargs.num_generations
    batch_size = gargs.groups_per_micro * G
    prompt_len = prompt.shape[1] if prompt is not None else prompt_len or default_prompt_len(gargs)
    model.gradient_checkpointing = gargs.gradient_checkpointing
    amp = lambda: autocast_bf16(device.type, gargs.autocast)
    if gargs.lora_r > 0:
        params = add_lora(model, r=gargs.lora_r, alpha=gargs.lora_alpha, dropout=gargs.lora_dropout,
                          targets=tuple(gargs.lora_targets.split(",")))
        ref_model, ref_ctx = None, lambda: lora_disabled(model)
    else:
        params = list(model.parameters())
        ref_model = copy.deepcopy(model).eval().requires_grad_(False) if gargs.beta > 0 else None
        ref_ctx = nullcontext
    if gargs.compile:  # after add_lora / the 4-bit swap, so the compiled blocks run; no warm-up round: the
        compile_blocks(model)  # first round's times include the compilation
    # a real AdamW, as grpo.py: its two moments per trainable parameter are part of the measured peak
    opt = torch.optim.AdamW(params, lr=gargs.lr, betas=(0.9, 0.99), weight_decay=gargs.weight_decay)
    counter = PassCounter(model, ref_model)
    g = torch.Generator().manual_seed(seed)
    rollout_g = torch.Generator(device=device).manual_seed(seed)  # as grpo.py: noise drawn on the device
    if prompt is None:  # random prompt ids below mask_id (the sampler refuses a mask in a prompt), each G times
        prompt = torch.randint(0, cfg.mask_token_id, (batch_size // G, prompt_len), generator=g)
        prompt = prompt.repeat_interleave(G, dim=0)  # (B, P): groups of G rows, as group_prompts
    prompt = prompt.to(device)
    if str(device).startswith("cuda"):
        # the peak from here: weights and adapters resident; AdamW's state appears inside the window
        torch.cuda.reset_peak_memory_stats(device)
    times, per_round = {"rollout": [], "old_ref": [], "update": []}, []
    for r in range(repeats):
        # counts are per round; every round must count the same (checked after the loop)
        counter.counts = {}
        sync(device); t0 = time.perf_counter()
        counter.phase = "rollout"
        completion, record = do_rollout(model, prompt, rollout_g, amp, hp)  # (B, N)
        sync(device); times["rollout"].append(time.perf_counter() - t0)
        if completions is not None:
            completions.append(completion)
        # random rewards stand in for step 2; their group advantages for step 3
        adv = group_advantages(torch.randn(batch_size, generator=g), G, gargs.scale_std).to(device)  # (B,)
        mask = completion_mask(completion, cfg.eos_token_id)  # (B, N)
        batch = MicroBatch(0, [], prompt, completion, mask, None, record, adv=adv)
        seeds = list(range(r * gargs.num_iterations, (r + 1) * gargs.num_iterations))
        t0 = time.perf_counter()
        counter.phase = "old_ref"
        do_old_ref(model, ref_model, ref_ctx, [batch], seeds, hp, amp)
        sync(device); times["old_ref"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        counter.phase = "policy"
        for j, s in enumerate(seeds):
            policy_step(model, [batch], j, s, opt, params, hp, amp, cfg.mask_token_id, accum=1, micro=micro)
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
        res["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        res["memory_kind"] = "torch.cuda.max_memory_allocated"
        # what the caching allocator holds (allocated + cached free blocks): what nvidia-smi sees
        res["peak_reserved_gib"] = torch.cuda.max_memory_reserved(device) / 2**30
        res["device_memory_gib"] = torch.cuda.get_device_properties(device).total_memory / 2**30
        L = prompt_len + gargs.gen_length
        # μ forwards + backwards of the objective's rows (coupled and ELBO score 2 per sequence, JustGRPO N):
        # 3x the forward for full fine-tuning, 2x with LoRA (no weight grads); the time holds clipping and AdamW
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
    flags = "".join(f", {k}" for k in ("load_in_4bit", "autocast", "gradient_checkpointing") if res.get(k))
    rows = [("model", f"{res['params']:,} params, {res['dtype']}, lora_r {res['lora_r']}{flags}", dev),
            ("setup", f"B {res['batch_size']}, prompt {res['prompt_len']}, gen {res['gen_length']}, "
                      f"steps {res['steps']}, μ {res['num_iterations']}, β {res['beta']}, rollout cache "
                      f"{res['rollout_cache']}, threshold {res['rollout_threshold'] or 'off'}", "")]
    for k, v in res["passes"].items():
        # a MISMATCH means the trainer's passes changed; a threshold rollout may stop a block early
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
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{a:<{w[0]}}  {b:<{w[1]}}  {c}" for a, b, c in rows)


def policy_mfu(model, batch_size=6, prompt_len=200, gen_length=256, repeats=5, peak_tflops=989.0):
    """The policy pass alone: one_step_logprobs forward + backward of a random (B, P + N) batch with gradients
    for every weight (no optimizer step: it fits one GPU at 8B). Median of `repeats` after two warm-ups (the
    first also compiles, if the blocks are compiled). FLOPs: 3 x forward_flops."""
    device = next(model.parameters()).device
    cfg = model.config
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, cfg.mask_token_id, (batch_size, prompt_len), generator=g).to(device)
    completion = torch.randint(0, cfg.mask_token_id, (batch_size, gen_length), generator=g).to(device)
    model.train()

    def step():
        logp = one_step_logprobs(model, prompt, completion, generator=mask_generator(0, 0))  # (B, N)
        # any scalar will do: the backward's FLOPs do not depend on the loss
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


def add_shape_flag(parser):
    """--shape, lab.bench's and lab.preflight's: the 8b preset's random-weight shape, by its name in
    methods.dream.model_shapes() (the one place a name maps to a config)."""
    parser.add_argument("--shape", choices=list(model_shapes()), default="llada-8b", help="--preset 8b's "
                        "random-weight shape (default: %(default)s); a checkpoint in --model-dir brings its own")


def preset_config(preset, shape="llada-8b"):
    """The shape of a preset's random weights: for 8b, `shape`'s (methods.dream.model_shapes: LLaDA-8B's
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
    """`python -m lab.bench [round flags] [bench flags]`: every flag not the benchmark's own is methods.grpo's;
    one micro-batch of ONE group (--groups-per-micro 1, as on each of d1's GPUs) unless given."""
    p = argparse.ArgumentParser(description="benchmark one diffu-GRPO round; every other flag is methods.grpo's")
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
    gargs = methods.grpo.parse_args(round_flags(rest))  # later flags win: an explicit one overrides
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
