"""
What d1 puts on top of the LLaDA weights for RL: an NF4 4-bit base and LoRA adapters, by hand.

NF4 (QLoRA, Dettmers et al., arXiv 2305.14314): each block linear's weight is stored in 4 bits
(the "normal float" code, double quantization of the scales) and dequantized to bf16 on the fly.
d1 loads its RL policy this way (bitsandbytes `load_in_4bit=True`, nf4, double quant, bf16 compute;
docs/d1.md §10.7); embeddings, norms and the LM head stay bf16, as transformers' 4-bit loading leaves
the output layer unquantized. We use bitsandbytes' Linear4bit for the kernel and nothing else.

LoRA (Hu et al., arXiv 2106.09685): a frozen linear W gets a trainable low-rank update,

    y = W x + (alpha / r) * B A dropout(x),     A (r, in), B (out, r), B = 0 at init

so training starts exactly at the base model. d1's RL setting is r 128, alpha 64, dropout 0.05 on
q, k, v and up_proj. With adapters switched off the model is its base: that is diffu-GRPO's
reference policy (docs/d1.md §3.2), so no second copy of 8B weights is needed.

    from modelio.adapters import add_lora, lora_disabled, merge_lora
    params = add_lora(model)                  # freezes the base; returns the adapter parameters
    with lora_disabled(model):
        ref_logits = model(ids)               # the reference policy
    merge_lora(model)                         # plain nn.Linear layers again, official names

Loading a 4-bit base from disk is checkpoint.from_pretrained(path, load_in_4bit=True); saving
adapters onto the original bf16 weights is checkpoint.save_merged.
"""

import math
from contextlib import contextmanager

import torch
import torch.nn as nn

from model import BLOCK_LINEARS

# -----------------------------------------------------------------------------
# NF4 4-bit block linears (bitsandbytes)

NF4 = "nf4"                         # bitsandbytes' quant_type: QLoRA's 4-bit NormalFloat
NF4_COMPUTE_DTYPE = torch.bfloat16  # d1's bnb_4bit_compute_dtype; also the dtype we quantize from


def is_4bit(layer):
    """True for a bitsandbytes Linear4bit, recognised by name so bitsandbytes is imported only
    by runs that actually use 4-bit."""
    return type(layer).__name__ == "Linear4bit"


def linear_4bit(weight, bias=None):
    """A bitsandbytes NF4 Linear4bit (double quant, bf16 compute) holding `weight` (out, in), and `bias`
    (out,) unquantized and frozen when the layer has one (include_qkv_bias; LLaDA's layers have none).
    Quantization happens on the weight's own device (CUDA on GPU; bitsandbytes' CPU backend on CPU)."""
    import bitsandbytes as bnb
    # nn.Linear convention: the weight is (out, in), the constructor takes (in, out)
    out_f, in_f = weight.shape
    # compress_statistics=True is QLoRA's double quantization (d1's bnb_4bit_use_double_quant):
    # the per-block absmax scales are themselves quantized, ~0.37 bits per weight saved (QLoRA)
    with torch.device("meta"):  # no throwaway fp32 allocation for the placeholder weight
        layer = bnb.nn.Linear4bit(in_f, out_f, bias=bias is not None, compute_dtype=NF4_COMPUTE_DTYPE,
                                  compress_statistics=True, quant_type=NF4)
    # the 4-bit base never trains: gradients only reach the LoRA adapters wrapped around it
    w = bnb.nn.Params4bit(weight.to(NF4_COMPUTE_DTYPE), requires_grad=False,
                          compress_statistics=True, quant_type=NF4)
    layer.weight = w.to(weight.device)  # .to() on a non-meta device performs the quantization
    if bias is not None:
        layer.bias = nn.Parameter(bias.detach().to(weight.device), requires_grad=False)
    # bitsandbytes 0.50 repacks the weight in place at the first no-grad eval forward on a CPU with
    # AVX512-BF16 (an inference-only kernel): that path crashes for in_features < 64 (tiny models)
    # and stores the scales in bf16, so results would depend on the CPU model. We keep the plain
    # dequantize path everywhere; it does not touch CUDA.
    layer.support_avx512bf16_for_cpu = False
    return layer


def dense_weight(layer):
    """The (out, in) weight of an nn.Linear or a dequantized bitsandbytes Linear4bit."""
    if is_4bit(layer):
        import bitsandbytes.functional as bnbF
        # quant_state holds the scales, block size, shape and original dtype: bf16 (out, in) back
        return bnbF.dequantize_4bit(layer.weight.data, layer.weight.quant_state)
    return layer.weight.data


def quantize_blocks(model):
    """Swap every block linear of an in-memory model for bitsandbytes NF4 (as
    checkpoint.from_pretrained(load_in_4bit=True) does while reading), for a model that never passes
    through a checkpoint directory (random weights of a given shape)."""
    # block linears only: wte, the norms and the LM head stay dense, as in d1
    for block in model.transformer.blocks:
        for name in BLOCK_LINEARS:
            dense = getattr(block, name)
            block.register_module(name, linear_4bit(dense.weight.data, None if dense.bias is None else dense.bias.data))
    return model


# -----------------------------------------------------------------------------
# LoRA, by hand (Hu et al., arXiv 2106.09685): W x + (alpha / r) * B A dropout(x), with B = 0 at init


class LoRALinear(nn.Module):
    """Wraps a frozen linear layer (nn.Linear or bitsandbytes Linear4bit) with a low-rank update.
    The adapter weights are kept in fp32 (like QLoRA's trainable parameters) whatever the base
    dtype; the update is computed in fp32 and cast to the base output's dtype."""

    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        self.base = base
        in_f, out_f = base.in_features, base.out_features
        device = base.weight.device
        # on the base's device, in the default dtype (fp32) whatever the base dtype is
        self.lora_A = nn.Parameter(torch.empty(r, in_f, device=device))
        self.lora_B = nn.Parameter(torch.zeros(out_f, r, device=device))  # zero: starts as the base
        # random A, zero B: B A = 0 at step 0, but the gradient w.r.t. B is not zero, so B moves first
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # nn.Linear's default init, as in peft
        # alpha / r keeps the update's size roughly independent of the rank (Hu et al., Sec. 4.1)
        self.scaling = alpha / r
        self.dropout = nn.Dropout(dropout)
        self.enabled = True  # lora_disabled switches this off: the reference policy

    def forward(self, x):
        y = self.base(x)  # (B, T, out)
        if not self.enabled:
            return y
        # dropout acts on the adapter's input only, as in peft: the frozen base path never sees it
        # x A^T B^T goes (B, T, in) -> (B, T, r) -> (B, T, out), never forming the (out, in) B A
        update = self.dropout(x).to(self.lora_A.dtype) @ self.lora_A.t() @ self.lora_B.t()  # (B, T, out)
        return y + (self.scaling * update).to(y.dtype)  # (B, T, out)

    def merged_weight(self):
        """W + (alpha / r) B A in the base's dtype (bf16 for a 4-bit base)."""
        W = dense_weight(self.base)  # (out, in)
        # add in fp32 and cast once: an update this small added in bf16 would mostly round away
        return (W.float() + self.scaling * (self.lora_B @ self.lora_A)).to(W.dtype)  # (out, in)


def block_linears(model, targets):
    """(block, layer name, module path) for each named linear of every block, in block order."""
    for i, block in enumerate(model.transformer.blocks):
        for name in targets:
            yield block, name, f"transformer.blocks.{i}.{name}"


D1_RL_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "up_proj")  # the four d1's RL config adapts (docs/d1.md §10.7)


def add_lora(model, r=128, alpha=64, dropout=0.05, targets=D1_RL_LORA_TARGETS):
    """Freeze every base parameter and wrap the named linear layers of every block in LoRALinear.
    targets: any of BLOCK_LINEARS (block layers only; the LM head, also called ff_out, is never
    wrapped). Defaults are d1's RL setting: r 128, alpha 64, dropout 0.05 on q, k, v, up_proj (its
    config also lists gate/down/o names that do not exist in LLaDA, so only these four were adapted,
    docs/d1.md §10.7). Returns the list of trainable parameters."""
    bad = [t for t in targets if t not in BLOCK_LINEARS]
    if bad or not targets:
        raise ValueError(f"LoRA targets {bad or targets} invalid; choose from {BLOCK_LINEARS}")
    # only the adapters train; a 4-bit base could not train anyway
    for p in model.parameters():
        p.requires_grad_(False)
    for block, name, _ in block_linears(model, targets):
        layer = getattr(block, name)
        if isinstance(layer, LoRALinear):
            raise ValueError(f"{name} already has a LoRA adapter")
        # the wrapper keeps the layer as .base: keys become ….q_proj.base.weight plus ….lora_A /
        # ….lora_B, which checkpoint.save_pretrained maps back to the official ….q_proj.weight
        setattr(block, name, LoRALinear(layer, r, alpha, dropout))
    # the adapters are the only parameters still requiring grad
    return [p for p in model.parameters() if p.requires_grad]


@contextmanager
def lora_disabled(model):
    """Inside this context the model is its frozen base: diffu-GRPO's reference policy is the
    adapter-disabled base model (docs/d1.md §3.2), so no second copy of 8B weights is needed."""
    layers = [m for m in model.modules() if isinstance(m, LoRALinear)]
    previous = [m.enabled for m in layers]
    # a flag only: no weight moves or is copied, so switching to the reference policy is free
    for m in layers:
        m.enabled = False
    try:
        yield model
    finally:
        # restore what each layer was, so nested or partial disabling composes
        for m, was in zip(layers, previous):
            m.enabled = was


def merge_lora(model):
    """Fold every adapter into its base weight and restore plain nn.Linear layers with the
    official names, ready for checkpoint.save_pretrained (d1 ships no script that merges its adapters).
    A 4-bit base is dequantized first, so the merged layer is a bf16 nn.Linear."""
    for block in model.transformer.blocks:
        for name in BLOCK_LINEARS:
            layer = getattr(block, name)
            if isinstance(layer, LoRALinear):
                W = layer.merged_weight()  # (out, in)
                # built on meta, then given W: no throwaway allocation of a random init
                merged = nn.Linear(W.shape[1], W.shape[0], bias=layer.base.bias is not None, device="meta")
                # frozen like the base it replaces; the adapter tensors are dropped with the wrapper
                merged.weight = nn.Parameter(W, requires_grad=False)
                if layer.base.bias is not None:  # a q/k/v bias: LoRA leaves it as it was
                    merged.bias = nn.Parameter(layer.base.bias.data, requires_grad=False)
                setattr(block, name, merged)
    return model


def lora_state_dict(model):
    """Only the adapter tensors (small): what a LoRA training run needs to checkpoint."""
    return {k: v for k, v in model.state_dict().items() if ".lora_A" in k or ".lora_B" in k}
