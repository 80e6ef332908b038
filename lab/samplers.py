"""
The samplers side by side: the exact sampler (LLaDA's and d1's) against methods/sampling.py's
Fast-dLLM options (prefix / dual KV cache, confidence threshold), greedy, on the same prompts:
seconds, tokens/s, speed-up, model calls, canvas columns forwarded, and the share of tokens on
which each agrees with the exact sampler. Run through lab/bench.py:

    python -m lab.bench --samplers --gen-length 256 --block-length 32 --diffusion-steps 128
    python -m lab.bench --preset 8b --no-load-in-4bit --samplers --compile      # one GPU
"""
import statistics
import time

import torch

from methods.sampling import generate


def sync(device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()  # CUDA runs kernels asynchronously: time the kernels, not their launches


SAMPLERS = {  # name -> generate() options; "exact" is the reference every other row is compared with
    "exact": {},
    # Fast-dLLM's options (methods/sampling.py)
    "prefix cache": dict(cache="prefix"),
    "dual cache": dict(cache="dual"),
    "exact + threshold 0.9": dict(threshold=0.9),
    "dual cache + threshold 0.9": dict(cache="dual", threshold=0.9),
}


def analytic_columns(prompt_len, gen_length, block_length, steps, cache=None):
    """Canvas columns one sample sends through the model in a rollout: exact, steps x (P + N); cached, the
    whole canvas at each block's first step, then its window. With a threshold: an upper bound."""
    L, num_blocks = prompt_len + gen_length, gen_length // block_length
    spb = steps // num_blocks  # steps per block
    if cache is None:
        return steps * L
    # window of block b: from its start to the end of the canvas (prefix), or the block alone (dual)
    window = lambda b: gen_length - b * block_length if cache == "prefix" else block_length
    return sum(L + (spb - 1) * window(b) for b in range(num_blocks))


def compare_samplers(model, prompt, gen_length=256, block_length=32, steps=128, repeats=3, samplers=SAMPLERS):
    """Greedy generation of the same prompts (B, P) with every sampler. Per sampler: median seconds
    (after one warm-up call), generated tokens/s, model calls, canvas columns forwarded per sample
    (the compute proxy: exact = steps x L), speed-up over exact, and greedy-token agreement with
    exact (share of generated positions holding the same token; and of whole rows identical)."""
    device = next(model.parameters()).device
    calls = []  # input widths of every model call
    # the cached samplers forward fewer columns than the canvas, so the width of each call is the cost
    handle = model.register_forward_hook(lambda m, args, out: calls.append(args[0].shape[1]))
    rows, ref = {}, None
    try:
        for name, kw in samplers.items():
            run = lambda: generate(model, prompt, gen_length=gen_length, block_length=block_length,
                                   steps=steps, **kw)
            run()  # warm-up (allocator, kernels); also the tokens (greedy: every call is the same)
            secs = []
            for _ in range(repeats):
                # greedy: every repeat makes the same calls, so the last repeat's list stands for all
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
        # the hook goes even when a sampler fails: the model is used again after this
        handle.remove()
    for r in rows.values():
        r["speedup"] = rows["exact"]["seconds"] / r["seconds"]
    return rows


def format_sampler_table(rows, device, setup):
    head = ("sampler", "s/batch", "tok/s", "speed-up", "calls", "columns/sample", "agree", "rows same")
    lines = [(name, f"{r['seconds']:.3f}", f"{r['tokens_per_s']:.1f}", f"{r['speedup']:.2f}x",
              str(r["model_calls"]), str(r["columns_per_sample"]), f"{100 * r['agreement']:.1f}%",
              f"{100 * r['rows_identical']:.0f}%") for name, r in rows.items()]
    return aligned(f"greedy sampling, {setup}, on {device}", head, lines)


def aligned(title, head, lines):
    """A table under `title`: the name column left-aligned, the numbers right-aligned."""
    w = [max(len(x[i]) for x in [head] + lines) for i in range(len(head))]
    rows = ["  ".join(f"{c:<{w[i]}}" if i == 0 else f"{c:>{w[i]}}" for i, c in enumerate(x)) for x in [head] + lines]
    return "\n".join([title] + rows)
