"""
memplan.py: the peak GPU memory of one diffu-GRPO policy step at LLaDA-8B's shape, planned on a
laptop. The activations are MEASURED: saved_tensors_hooks count the bytes autograd keeps in one
policy forward of models with the real layer widths and 1 or 2 blocks (blocks are identical, so
n blocks save depth1 + (n - 1) * per_block, exactly); weights, adapters, gradients and AdamW
states are COUNTED. On an H100 the plan was 6 % above the measured peak of d1's QLoRA step
(29.3 vs 27.6 GiB; README, Performance).

Run (through bench.py, on CPU is fine: ~1 min, ~8 GB RAM for the 8B widths):
    python -m tools.bench --preset 8b --memory-plan                 # QLoRA (the 8b preset is 4-bit)
    python -m tools.bench --preset 8b --memory-plan --lora-r 0 --no-load-in-4bit        # full fine-tuning, FSDP2 over 8
"""
import torch

from lib.adapters import add_lora, quantize_blocks
from logprob import mask_generator, one_step_logprobs
from model import LLaDA, LLaDAConfig


def saved_bytes(model, prompt, completion, p_mask=0.15):
    """Bytes autograd keeps for backward after ONE policy forward (one_step_logprobs with grad),
    counted with saved_tensors_hooks, each storage once. Parameters (and 4-bit weights) are not
    counted: they live anyway. Returns the activation bytes."""
    # autograd also saves weights (a matmul keeps W for the input gradient); those storages are
    # skipped here, since memory_plan counts every weight once as a parameter term
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    # keyed by storage: views of one tensor (slices, reshapes, transposes) share a storage, so it counts once
    seen = {}

    # pack runs for every tensor autograd saves; it returns t itself (no copy or offload), we only look
    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            seen[st.data_ptr()] = st.nbytes()
        return t

    # one policy forward with grad, as in grpo.policy_step; backward never runs here
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logp = one_step_logprobs(model, prompt, completion, p_mask_prompt=p_mask,
                                 generator=mask_generator(0, 0))
    # dropping the output frees the graph and with it every saved tensor counted above
    del logp
    return sum(seen.values())


def probe_activations(config, batch, prompt_len, gen_length, dtype, lora_r=128, load_in_4bit=True,
                      device="cpu"):
    """Measure the saved activation bytes of the policy forward for the real layer widths without
    the real depth, from models of 1 and 2 blocks (random weights), with and without gradient
    checkpointing. Blocks 2..n are identical, so n blocks save depth1 + (n - 1) * per_block."""
    out = {}
    for ckpt in (False, True):
        for n in (1, 2):
            # the real widths with n blocks: at LLaDA-8B's a block is 218M parameters and the embedding + head
            # 1.04B, so even n = 2 is ~1.5B (~3 GB in bf16): this is why the probe fits on a laptop
            cfg = LLaDAConfig(**{**config.to_dict(), "n_layers": n})
            torch.manual_seed(0)
            with torch.device(device):
                m = LLaDA(cfg).to(dtype)
            if load_in_4bit:
                # the probe uses the plan's own setting: what a block saves depends on its linears being NF4
                # and/or carrying adapters
                quantize_blocks(m)
            if lora_r:
                # d1's RL adapters (alpha 64, dropout 0.05, docs/d1.md §4.3); each saves its dropped-out fp32 input
                add_lora(m, r=lora_r, alpha=64.0, dropout=0.05)
            m.gradient_checkpointing = ckpt
            # train mode, as grpo.policy_step: LoRA dropout is active in the policy pass
            m.train()
            g = torch.Generator().manual_seed(0)
            # the token values do not change the bytes, only the shapes (batch, prompt_len) and (batch, gen_length) do
            prompt = torch.randint(0, cfg.mask_token_id, (batch, prompt_len), generator=g).to(device)
            completion = torch.randint(0, cfg.mask_token_id, (batch, gen_length), generator=g).to(device)
            out[n, ckpt] = saved_bytes(m, prompt, completion)
            del m
    # block 1 is kept apart because it can differ from the others: under LoRA the frozen embedding's
    # output needs no gradient. Under checkpointing a block keeps only its input, which is what
    # the _ckpt per_block measures
    return {"depth1": out[1, False], "per_block": out[2, False] - out[1, False],
            "depth1_ckpt": out[1, True], "per_block_ckpt": out[2, True] - out[1, True]}


def memory_plan(config, batch, gen_length, probe, lora_r=128, load_in_4bit=True,
                gradient_checkpointing=False, world_size=8, beta=0.04):
    """Peak-memory estimate (GiB per GPU) of one diffu-GRPO policy step, from the measured
    activation probe (same lora_r / 4-bit setting) and counted parameter bytes. lora_r > 0: LoRA
    (QLoRA with load_in_4bit); lora_r = 0: full fine-tuning under FSDP2 over world_size GPUs.
    Returns {term: GiB} and their "total"; each term is explained where it is computed."""
    # LLaDA-8B: C 4096, F 12288, V 126464, n 32. Parameter bytes are counted from the shape, not measured
    C, F, V, n = config.d_model, config.hidden_size, config.padded_vocab, config.n_layers
    block_params = 4 * C * C + 3 * C * F     # q, k, v, out + gate, up, down (MHA: n_kv_heads = n_heads)
    # norms: two per block (attention, MLP) plus the final one, C weights each; LLaDA has no biases
    dense_params = 2 * V * C + (2 * n + 1) * C  # embedding, LM head, norms
    total = n * block_params + dense_params   # 8,015,581,184 for LLaDA-8B (tested)
    ck = "_ckpt" if gradient_checkpointing else ""
    # backward adds, on top of the saved activations: at most one block's activations at a time (freed
    # as backward moves down; recomputed under checkpointing, so per_block either way), and the fp32
    # gradient of the completion log-softmax, (B, N, V) x 4 bytes: 0.72 GiB at B 6, N 256
    transient = probe["per_block"] + batch * gen_length * V * 4
    if lora_r:
        # LoRA / QLoRA. NF4 bytes per frozen block weight: 4 bits, + one 8-bit absmax per 64 weights,
        # + one fp32 scale per 256 absmaxes (double quantization) = 0.516; a bf16 base is 2 bytes
        per_weight = 0.5 + 1 / 64 + 4 / (64 * 256) if load_in_4bit else 2.0
        # an adapter on an in -> out linear has r * (in + out) parameters (A: r x in, B: out x r)
        lora = n * lora_r * (3 * 2 * C + (C + F)) * 4  # fp32 A and B of q, k, v (C -> C), up (C -> F)
        # embedding and LM head stay bf16 (2 bytes each); the adapters' grads and AdamW's two moments
        # are three more fp32 copies of the adapters
        plan = {("NF4 blocks" if load_in_4bit else "bf16 blocks") + " + bf16 embedding/head": n * block_params * per_weight + 2 * dense_params,
                "LoRA adapters (fp32)": lora, "LoRA grads + AdamW states (fp32)": 3 * lora}
    else:
        # full fine-tuning under FSDP2: 16 bytes per parameter (fp32 master weight 4, grad 4, AdamW's
        # two moments 8), all sharded over world_size; the frozen bf16 reference only exists when β > 0,
        # also sharded; and the bf16 parameters FSDP gathers at a time: the root unit (embedding, head)
        # and two blocks (the current one and the prefetched next one)
        plan = {f"fp32 weights + grads + AdamW, sharded /{world_size}": 16 * total / world_size,
                f"bf16 reference copy, sharded /{world_size}": 2 * total / world_size if beta else 0.0,
                "gathered bf16 params: root + 2 blocks": 2 * (dense_params + 2 * block_params)}
        # full FT: one block's fp32 gradients exist in full before they are reduce-scattered
        transient += 4 * block_params
    # blocks 2..n save exactly what block 2 saved (identical blocks), so this is exact, not an estimate
    plan["saved activations (probe x depth)"] = probe["depth1" + ck] + (n - 1) * probe["per_block" + ck]
    plan["backward transient"] = transient
    # bytes -> GiB; the peak is taken as the plain sum of the terms
    plan = {k: v / 2**30 for k, v in plan.items()}
    plan["total"] = sum(plan.values())
    return plan
