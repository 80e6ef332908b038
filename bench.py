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

Run:
    python bench.py --preset tiny                 # CPU, seconds
    python bench.py --preset 8b --json out/bench-8b.json   # LLaDA-8B shape, random weights, one GPU
    python bench.py --model-dir LLaDA-8B-Instruct --preset 8b
"""
import argparse
import copy
import json
import resource
import statistics
import sys
import time

import torch

from grpo import completion_mask, group_advantages, grpo_loss, mask_generator
from logprob import one_step_logprobs
from model import TINY_CONFIG, LLaDA, LLaDAConfig, add_lora, load, lora_disabled
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
          repeats=1, seed=0, peak_tflops=989.0, lr=1e-6):
    """Run `repeats` diffu-GRPO rounds on random prompts and return a dict of measured numbers
    (pass counts per round, median seconds per phase, tokens/s, peak memory, FLOP/s on GPU).
    lora_r > 0 adds adapters to `model` in place (the reference is then the base, LoRA off)."""
    device = next(model.parameters()).device
    cfg = model.config
    block_length = block_length or gen_length
    if lora_r > 0:
        params = add_lora(model, r=lora_r, alpha=64.0, dropout=0.05)
        ref_model, ref_ctx = None, lambda: lora_disabled(model)
    else:
        params = list(model.parameters())
        # full fine-tuning: a frozen copy is the reference (as grpo.py), only when β > 0
        ref_model = copy.deepcopy(model).eval().requires_grad_(False) if beta > 0 else None
        ref_ctx = lambda: torch.no_grad()  # a do-nothing-extra context
    opt = torch.optim.AdamW(params, lr=lr)
    counter = PassCounter(model, ref_model)
    g = torch.Generator().manual_seed(seed)
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
        out = generate(model, prompt, gen_length=gen_length, block_length=block_length, steps=steps,
                       temperature=temperature, generator=g)  # (B, P + N)
        completion = out[:, prompt_len:]  # (B, N)
        sync(device); times["rollout"].append(time.perf_counter() - t0)
        mask = completion_mask(completion, cfg.eos_token_id)  # (B, N)
        adv = group_advantages(torch.randn(batch_size, generator=g), batch_size).to(device)  # (B,) random rewards
        seeds = list(range(r * num_iterations, (r + 1) * num_iterations))
        # 2. old (and ref) log-probs for every mask seed, once, no grad
        t0 = time.perf_counter()
        old, ref = [], []
        with torch.no_grad():
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
           "params": model.num_params(), "batch_size": batch_size, "prompt_len": prompt_len,
           "gen_length": gen_length, "steps": steps, "num_iterations": num_iterations, "beta": beta,
           "lora_r": lora_r, "repeats": repeats,
           "passes": {k: per_round[0].get(k, 0) for k in keys},
           "analytic": analytic_passes(steps, num_iterations, beta),
           "seconds": {k: statistics.median(v) for k, v in times.items()}}
    res["sampler_tokens_per_s"] = batch_size * gen_length / res["seconds"]["rollout"]
    res["forward_passes_per_sample"] = res["passes"]["rollout_fwd"]  # batched: B samples share each
    if str(device).startswith("cuda"):
        res["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        res["memory_kind"] = "torch.cuda.max_memory_allocated"
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
    rows = [("model", f"{res['params']:,} params, {res['dtype']}, lora_r {res['lora_r']}", dev),
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
    if "mfu" in res:
        rows.append(("policy fwd+bwd TFLOP/s", f"{res['policy_tflops']:.1f}", dev))
        rows.append(("policy MFU", f"{100 * res['mfu']:.1f}% of {res['peak_tflops']:g} TFLOP/s peak", dev))
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{a:<{w[0]}}  {b:<{w[1]}}  {c}" for a, b, c in rows)


# -----------------------------------------------------------------------------

if __name__ == "__main__":
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
    p.add_argument("--json", type=str, default="", help="also write the numbers here")
    p.set_defaults(**preset)
    args = p.parse_args()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = getattr(torch, args.dtype) if args.dtype else (torch.bfloat16 if device.startswith("cuda") else torch.float32)
    if args.preset == "8b" and not device.startswith("cuda"):
        sys.exit("bench.py --preset 8b needs a GPU: LLaDA-8B's shape is ~16 GB of bf16 weights and a round "
                 "is ~PFLOPs; on CPU use --preset tiny")
    torch.manual_seed(0)
    if args.model_dir:
        model = load(args.model_dir, device=device, dtype=dtype)[0]
    else:
        config = LLaDAConfig(**TINY_CONFIG, **TINY_IDS) if args.preset == "tiny" else LLaDAConfig()
        with torch.device(device):  # build in place: no 32 GB fp32 CPU copy of the 8B shape
            model = LLaDA(config).to(dtype)
    res = bench(model, batch_size=args.batch_size, prompt_len=args.prompt_len, gen_length=args.gen_length,
                block_length=args.block_length, steps=args.steps, num_iterations=args.num_iterations,
                beta=args.beta, lora_r=args.lora_r, repeats=args.repeats, peak_tflops=args.peak_tflops)
    print(format_table(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
