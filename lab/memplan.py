"""
memplan.py: the peak GPU memory of one diffu-GRPO policy step at an 8B-class shape, planned on a laptop
(docs/performance.md). The activations are MEASURED (saved_tensors_hooks) in one policy forward of models
with the real layer widths and 1 or 2 blocks (identical blocks: n save depth1 + (n - 1) * per_block,
exactly); weights, adapters, gradients and AdamW states are COUNTED from the config (shape_params).

Run (through bench.py; on CPU ~1 min with fast bf16 matmuls, ~10 GB RAM for the 8B widths):
    python -m lab.bench --preset 8b --memory-plan                 # QLoRA (the 8b preset is 4-bit)
    python -m lab.bench --preset 8b --shape dream-7b --memory-plan                     # the same for Dream-7B
    python -m lab.bench --preset 8b --memory-plan --lora-r 0 --no-load-in-4bit        # full fine-tuning, FSDP2 over 8
"""
import dataclasses

import torch

from modelio.adapters import D1_RL_LORA_TARGETS, add_lora, quantize_blocks
from logprob import mask_generator, one_step_logprobs
from model import LLaDA


def linear_shapes(config):
    """Each block linear's (in, out) features, from the config's fields: q and the attention output are C wide,
    k and v n_kv_heads * head_dim (grouped-query attention: Dream-7B's 4 x 128 = 512; LLaDA-8B is MHA, 4096)."""
    C, F, kv = config.d_model, config.hidden_size, config.kv_heads * config.head_dim
    return {"q_proj": (C, C), "k_proj": (C, kv), "v_proj": (C, kv), "attn_out": (C, C),
            "ff_proj": (C, F), "up_proj": (C, F), "ff_out": (F, C)}


def shape_params(config):
    """Parameter counts from the config's fields, no model built: "linears" = one block's linear weights
    (what NF4 quantizes), "block_rest" = its two RMSNorm weights and q/k/v biases (Dream's; LLaDA has none),
    "root" = embedding + untied LM head + final norm, "dense" = what stays bf16 under NF4 (root + every
    block_rest), "total": LLaDA-8B 8,015,581,184, Dream-7B 7,615,616,512 (tests/test_bench.py)."""
    C, V, n, shapes = config.d_model, config.padded_vocab, config.n_layers, linear_shapes(config)
    bias = sum(shapes[k][1] for k in ("q_proj", "k_proj", "v_proj")) if config.include_qkv_bias else 0
    # the LM head is never tied to the embedding
    counts = {"linears": sum(i * o for i, o in shapes.values()), "block_rest": 2 * C + bias, "root": 2 * V * C + C}
    counts["dense"] = counts["root"] + n * counts["block_rest"]
    return {**counts, "total": n * counts["linears"] + counts["dense"]}


def saved_bytes(model, prompt, completion, p_mask=0.15):
    """Bytes autograd keeps for backward after ONE policy forward (one_step_logprobs with grad),
    counted with saved_tensors_hooks, each storage once. Parameters (and 4-bit weights) are not
    counted: they live anyway. Returns the activation bytes."""
    # autograd also saves weights; memory_plan counts those once as parameters
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    # keyed by storage: views of one tensor (slices, reshapes, transposes) share a storage, so it counts once
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


def probe_activations(config, batch, prompt_len, gen_length, dtype, lora_r=128, load_in_4bit=True,
                      device="cpu", targets=D1_RL_LORA_TARGETS):
    """Measure the saved activation bytes of the policy forward for the real layer widths without
    the real depth, from models of 1 and 2 blocks (random weights), with and without gradient
    checkpointing. Blocks 2..n are identical, so n blocks save depth1 + (n - 1) * per_block."""
    out = {}
    for ckpt in (False, True):
        for n in (1, 2):
            # the real widths with n blocks: even n = 2 is ~1.5B parameters at 8B (~3 GB in bf16), laptop-sized;
            # replace keeps every field (a family's logit_shift too, which config.json never carries)
            cfg = dataclasses.replace(config, n_layers=n)
            torch.manual_seed(0)
            with torch.device(device):
                m = LLaDA(cfg).to(dtype)
            # the plan's own setting: what a block saves depends on its linears being NF4 and carrying adapters
            if load_in_4bit:
                quantize_blocks(m)
            if lora_r:
                # d1's RL adapters (docs/d1.md §4.3); each saves its dropped-out fp32 input
                add_lora(m, r=lora_r, alpha=64.0, dropout=0.05, targets=targets)
            m.gradient_checkpointing = ckpt
            m.train()
            g = torch.Generator().manual_seed(0)
            prompt = torch.randint(0, cfg.mask_token_id, (batch, prompt_len), generator=g).to(device)
            completion = torch.randint(0, cfg.mask_token_id, (batch, gen_length), generator=g).to(device)
            out[n, ckpt] = saved_bytes(m, prompt, completion)
            del m
    # block 1 can differ from the others: under LoRA the frozen embedding's output needs no gradient
    return {"depth1": out[1, False], "per_block": out[2, False] - out[1, False],
            "depth1_ckpt": out[1, True], "per_block_ckpt": out[2, True] - out[1, True]}


def memory_plan(config, batch, gen_length, probe, lora_r=128, load_in_4bit=True,
                gradient_checkpointing=False, world_size=8, beta=0.04, targets=D1_RL_LORA_TARGETS):
    """Peak-memory estimate (GiB per GPU) of one diffu-GRPO policy step, from the measured
    activation probe (same lora_r / 4-bit setting / targets) and parameter bytes counted from the
    config (shape_params). lora_r > 0: LoRA (QLoRA with load_in_4bit); lora_r = 0: full fine-tuning
    under FSDP2 over world_size GPUs. Returns {term: GiB} and their "total"; each term is explained
    where it is computed."""
    counts, shapes, V, n = shape_params(config), linear_shapes(config), config.padded_vocab, config.n_layers
    block_params = counts["linears"] + counts["block_rest"]  # everything one block holds
    ck = "_ckpt" if gradient_checkpointing else ""
    # backward adds one block's activations at a time (per_block, recomputed under checkpointing too) and the
    # fp32 gradient of the completion log-softmax, (B, N, V) x 4 bytes: 0.72 GiB at B 6, N 256, LLaDA's V
    transient = probe["per_block"] + batch * gen_length * V * 4
    if lora_r:
        # LoRA / QLoRA. NF4 bytes per frozen block weight: 4 bits, + one 8-bit absmax per 64 weights,
        # + one fp32 scale per 256 absmaxes (double quantization) = 0.516; a bf16 base is 2 bytes
        per_weight = 0.5 + 1 / 64 + 4 / (64 * 256) if load_in_4bit else 2.0
        # an adapter on an in -> out linear has r * (in + out) fp32 parameters
        lora = n * lora_r * sum(sum(shapes[t]) for t in targets) * 4
        # embedding, LM head, norms and biases stay bf16; the adapters' grads and AdamW's moments: 3 fp32 copies
        plan = {("NF4 blocks" if load_in_4bit else "bf16 blocks") + " + bf16 embedding/head":
                n * counts["linears"] * per_weight + 2 * counts["dense"],
                "LoRA adapters (fp32)": lora, "LoRA grads + AdamW states (fp32)": 3 * lora}
    else:
        # full fine-tuning under FSDP2: 16 bytes per parameter (fp32 weight, grad, AdamW's two moments) and the
        # bf16 reference (β > 0), sharded; gathered at a time: the root unit and two blocks (current, prefetched)
        total = counts["total"]
        plan = {f"fp32 weights + grads + AdamW, sharded /{world_size}": 16 * total / world_size,
                f"bf16 reference copy, sharded /{world_size}": 2 * total / world_size if beta else 0.0,
                "gathered bf16 params: root + 2 blocks": 2 * (counts["root"] + 2 * block_params)}
        # full FT: one block's fp32 gradients exist in full before they are reduce-scattered
        transient += 4 * block_params
    plan["saved activations (probe x depth)"] = probe["depth1" + ck] + (n - 1) * probe["per_block" + ck]
    plan["backward transient"] = transient
    # bytes -> GiB; the peak is the plain sum of the terms
    plan = {k: v / 2**30 for k, v in plan.items()}
    plan["total"] = sum(plan.values())
    return plan


def run_memory_plan(config, gargs, batch, prompt_len, world_size, device, device_label, shape):
    """lab.bench --memory-plan: the probe at `config`'s widths (on `device`), then the plan without and with
    gradient checkpointing for grpo.py's flags `gargs`, printed. -> the numbers, for --json."""
    targets = tuple(gargs.lora_targets.split(","))
    # the probe is bf16 whatever --dtype says: the plan is for d1's bf16 run
    probe = probe_activations(config, batch, prompt_len, gargs.gen_length, torch.bfloat16, gargs.lora_r,
                              gargs.load_in_4bit, device=device, targets=targets)
    res = {"shape": shape, "params": shape_params(config)["total"], "probe": probe, "device": device_label}
    print(f"{shape} shape, {res['params']:,} parameters. Saved activations of one policy forward, B {batch}, "
          f"L {prompt_len + gargs.gen_length} (measured on {device_label}, bf16): {probe['per_block'] / 2**30:.3f} "
          f"GiB per block ({probe['per_block_ckpt'] / 2**30:.3f} checkpointed), {probe['depth1'] / 2**30:.3f} GiB "
          f"for a 1-block model")
    for ckpt in (False, True):  # two plans: without and with gradient checkpointing
        plan = memory_plan(config, batch, gargs.gen_length, probe, gargs.lora_r, gargs.load_in_4bit, ckpt,
                           world_size, gargs.beta, targets)
        res[f"plan_checkpointing_{ckpt}"] = plan
        what = f"LoRA r {gargs.lora_r}{' on NF4' * gargs.load_in_4bit}" if gargs.lora_r else \
            f"full fine-tuning, FSDP2 over {world_size} GPUs"
        print(f"\npeak memory per GPU, {what}, {config.n_layers} layers, gradient checkpointing "
              f"{'on' if ckpt else 'off'} (GiB):")
        print("\n".join(f"  {k:<48} {v:6.2f}" for k, v in plan.items()))
    return res
