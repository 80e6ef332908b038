"""
The LLaDA transformer in plain PyTorch: the model, its official checkpoint layout, LoRA, 4-bit.

LLaDA (Nie et al., arXiv 2502.09992) is a masked diffusion language model. Architecturally it is a
Llama-3-style transformer with the causal mask removed: every position attends to every other one,
the input is a sequence in which some tokens are replaced by a special mask token, and the logit
at position i predicts the clean token at position i (no shift, unlike an autoregressive model).
The model takes no timestep input: the number of mask tokens alone tells it how noisy the input is.

One block (pre-norm, ../shared/docs/llada.md §1 and §3):

    a = attn_norm(h)                          RMSNorm, statistics in fp32
    q, k, v = q_proj(a), k_proj(a), v_proj(a) no biases anywhere
    q, k = rope(q), rope(k)                   rotate-half RoPE, computed in fp32
    h = h + attn_out(SDPA(q, k, v))           bidirectional: no causal mask
    m = ff_norm(h)
    h = h + ff_out(silu(ff_proj(m)) * up_proj(m))   ff_proj is the GATED branch

and logits = ff_out_head(ln_f(h)) with an untied LM head. LLaDA-8B: d_model 4096, 32 layers,
32 heads (no GQA), SwiGLU width 12288, vocab 126464, RoPE theta 5e5; 8.0B parameters.

What lives here:
- LLaDAConfig: the official config.json field names; unsupported configs are refused.
- LLaDA: forward(input_ids, attention_mask=None) -> logits (B, T, V).
- LLaDA.from_pretrained / save_pretrained: the official sharded safetensors layout, keys
  `model.transformer.…`, streamed shard by shard; optional NF4 4-bit base through bitsandbytes.
- LoRA written by hand: add_lora, lora_disabled (the diffu-GRPO reference policy), merge_lora.
- Tokenizer helpers and make_tiny(), which writes a tiny random LLaDA + byte-level tokenizer in
  exactly the official layout, so the CPU pipeline and the tests exercise the same code as the 8B.

Run `python model.py` to write the tiny model to out/tiny-llada and print a forward pass.
"""

import argparse
import json
import math
import os
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

# -----------------------------------------------------------------------------
# Names fixed by the official checkpoint and tokenizer.

KEY_PREFIX = "model.transformer."          # every official state-dict key starts with this
INDEX_FILE = "model.safetensors.index.json"
CONFIG_FILE = "config.json"
BLOCK_LINEARS = ("q_proj", "k_proj", "v_proj", "attn_out", "ff_proj", "up_proj", "ff_out")
# LLaDA's special tokens as strings; their ids are looked up in the tokenizer / config, never typed in.
BOS_TOKEN = "<|startoftext|>"
EOS_TOKEN = "<|endoftext|>"                # also the pad token, and d1's "end of completion"
MASK_TOKEN = "<|mdm_mask|>"
START_HEADER_TOKEN = "<|start_header_id|>"
END_HEADER_TOKEN = "<|end_header_id|>"
EOT_TOKEN = "<|eot_id|>"                   # end of turn
# Llama-3 style chat template with trimmed content, as LLaDA-8B-Instruct renders it (d1-spec §1).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

# -----------------------------------------------------------------------------
# Config


@dataclass
class LLaDAConfig:
    # The shape. Field names are exactly those of the official config.json.
    d_model: int = 4096
    n_heads: int = 32
    n_kv_heads: int | None = None          # None means n_heads (LLaDA-8B: 32, plain MHA)
    n_layers: int = 32
    mlp_hidden_size: int | None = 12288    # takes precedence over mlp_ratio
    mlp_ratio: int = 4
    vocab_size: int = 126464
    embedding_size: int | None = 126464    # rows of wte / LM head; None means vocab_size
    rope_theta: float = 500000.0
    rms_norm_eps: float = 1e-5
    max_sequence_length: int = 4096
    mask_token_id: int = 126336
    eos_token_id: int = 126081
    pad_token_id: int = 126081
    init_std: float = 0.02                 # only used for random init (tiny models, tests)
    # Features of the OLMo-derived code. We implement exactly one combination, LLaDA-8B's;
    # validate() refuses any other value instead of silently computing something else.
    block_type: str = "llama"
    activation_type: str = "silu"
    layer_norm_type: str = "rms"
    layer_norm_with_affine: bool = True
    bias_for_layer_norm: bool | None = False
    include_bias: bool = False
    include_qkv_bias: bool | None = False
    attention_layer_norm: bool = False
    weight_tying: bool = False
    rope: bool = True
    rope_full_precision: bool = True
    alibi: bool = False
    input_emb_norm: bool = False
    scale_logits: bool = False
    multi_query_attention: bool | None = None
    block_group_size: int = 1
    clip_qkv: float | None = None
    attention_dropout: float = 0.0
    residual_dropout: float = 0.0
    embedding_dropout: float = 0.0
    # Keys we carry through unchanged (architectures, auto_map, init_fn, ...), so a config we save
    # still loads in the official remote-code loader.
    extra: dict = field(default_factory=dict, repr=False)

    # what validate() accepts for each feature field (None is accepted where OLMo treats it as "off")
    _SUPPORTED = {
        "block_type": ("llama",), "activation_type": ("silu",), "layer_norm_type": ("rms",),
        "layer_norm_with_affine": (True,), "bias_for_layer_norm": (False, None),
        "include_bias": (False,), "include_qkv_bias": (False, None), "attention_layer_norm": (False,),
        "weight_tying": (False,), "rope": (True,), "rope_full_precision": (True,), "alibi": (False,),
        "input_emb_norm": (False,), "scale_logits": (False,), "multi_query_attention": (False, None),
        "block_group_size": (1,), "clip_qkv": (None,), "attention_dropout": (0.0,),
        "residual_dropout": (0.0,), "embedding_dropout": (0.0,),
    }

    # Derived sizes, resolved the way the OLMo-derived official code resolves them.
    @property
    def head_dim(self):
        return self.d_model // self.n_heads  # 128 for LLaDA-8B

    @property
    def kv_heads(self):
        return self.n_kv_heads or self.n_heads

    @property
    def hidden_size(self):
        return self.mlp_hidden_size or self.mlp_ratio * self.d_model

    @property
    def padded_vocab(self):
        # OLMo pads wte and the LM head to embedding_size; logits have this many columns
        return self.embedding_size or self.vocab_size

    def validate(self):
        """Raise one ValueError listing every unsupported or inconsistent setting."""
        problems = [f"{k}={getattr(self, k)!r} (supported: {' or '.join(map(repr, ok))})"
                    for k, ok in self._SUPPORTED.items() if getattr(self, k) not in ok]
        if self.d_model % self.n_heads:
            problems.append(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        elif self.head_dim % 2:
            problems.append(f"head_dim={self.head_dim} must be even for rotate-half RoPE")
        if self.n_heads % self.kv_heads:
            problems.append(f"n_heads={self.n_heads} is not divisible by n_kv_heads={self.kv_heads}")
        if self.padded_vocab < self.vocab_size:
            problems.append(f"embedding_size={self.embedding_size} < vocab_size={self.vocab_size}")
        for name in ("mask_token_id", "eos_token_id"):
            if not 0 <= getattr(self, name) < self.padded_vocab:
                problems.append(f"{name}={getattr(self, name)} is outside the vocabulary")
        if problems:
            raise ValueError("LLaDA config not supported by this implementation: " + "; ".join(problems))
        return self

    @classmethod
    def from_dict(cls, d):
        """From a parsed config.json: known keys become fields, the rest is kept in `extra`."""
        known = {f.name for f in fields(cls)} - {"extra"}
        cfg = cls(**{k: v for k, v in d.items() if k in known})
        cfg.extra = {k: v for k, v in d.items() if k not in known}
        return cfg.validate()

    def to_dict(self):
        """The config.json contents: the carried-through keys first, then every field."""
        d = asdict(self)
        d.pop("extra")
        return {**self.extra, **d}


# -----------------------------------------------------------------------------
# The model


class RMSNorm(nn.Module):
    """x / rms(x) * w. As in LLaDA: statistics in fp32, cast back to the input dtype BEFORE the
    weight multiply (so with bf16 weights the multiply itself is bf16); no bias, no (1 + w)."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return x32.to(x.dtype) * self.weight


def rope_tables(seq_len, head_dim, theta, device):
    """cos/sin tables (T, head_dim) in fp32 for positions 0..T-1 (non-interleaved 'rotate-half').
    inv_freq[j] = theta^(-2j/head_dim); the table is cat(freqs, freqs), llada.md §3."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    freqs = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), inv_freq)  # (T, hd/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, hd)
    return emb.cos(), emb.sin()


def apply_rope(x, cos, sin):
    """Rotate (B, nh, T, hd) by the tables, in fp32 (rope_full_precision), and cast back."""
    x32 = x.float()
    x1, x2 = x32.chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)  # rotate_half
    return (x32 * cos + rotated * sin).to(x.dtype)


class Block(nn.Module):
    """One LLaDA 'llama' block. Module names are the checkpoint's names."""

    def __init__(self, config: LLaDAConfig):
        super().__init__()
        C, hd = config.d_model, config.head_dim
        self.n_heads, self.n_kv_heads = config.n_heads, config.kv_heads
        self.attn_norm = RMSNorm(C, config.rms_norm_eps)
        self.q_proj = nn.Linear(C, config.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(C, self.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(C, self.n_kv_heads * hd, bias=False)
        self.attn_out = nn.Linear(config.n_heads * hd, C, bias=False)
        self.ff_norm = RMSNorm(C, config.rms_norm_eps)
        self.ff_proj = nn.Linear(C, config.hidden_size, bias=False)  # gate: goes through SiLU
        self.up_proj = nn.Linear(C, config.hidden_size, bias=False)  # multiplied in
        self.ff_out = nn.Linear(config.hidden_size, C, bias=False)   # down projection

    def forward(self, x, cos, sin, attn_mask, past=None, start=0, return_kv=False):
        """x (B, T, C) -> x (B, T, C), or with return_kv (x, (k, v)), k/v (B, nkv, T, hd) post-RoPE
        for a KV cache. past: cached (k, v) of a whole canvas (B, nkv, L, hd); x is then canvas
        columns [start, start + T), whose fresh keys/values replace the cached ones there."""
        B, T, C = x.shape
        a = self.attn_norm(x)
        q = self.q_proj(a).view(B, T, self.n_heads, -1).transpose(1, 2)     # (B, nh, T, hd)
        k = self.k_proj(a).view(B, T, self.n_kv_heads, -1).transpose(1, 2)  # (B, nkv, T, hd)
        v = self.v_proj(a).view(B, T, self.n_kv_heads, -1).transpose(1, 2)  # (B, nkv, T, hd)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        fresh = (k, v)
        if past is not None:  # all L keys: cached columns left and right of the window, fresh inside
            pk, pv = past
            k = torch.cat([pk[:, :, :start], k, pk[:, :, start + T:]], dim=2)  # (B, nkv, L, hd)
            v = torch.cat([pv[:, :, :start], v, pv[:, :, start + T:]], dim=2)  # (B, nkv, L, hd)
        if self.n_kv_heads != self.n_heads:  # grouped-query attention: share each kv head
            k = k.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1)
            v = v.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1)
        # bidirectional attention: no causal mask, only the optional key-padding mask; scale 1/sqrt(hd)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=False)
        x = x + self.attn_out(y.transpose(1, 2).reshape(B, T, -1))
        m = self.ff_norm(x)
        x = x + self.ff_out(F.silu(self.ff_proj(m)) * self.up_proj(m))
        return (x, fresh) if return_kv else x


class LLaDA(nn.Module):

    def __init__(self, config: LLaDAConfig):
        super().__init__()
        self.config = config.validate()
        self.gradient_checkpointing = False  # set True to recompute each block in backward
        V = config.padded_vocab
        # The ModuleDict named `transformer` makes our state-dict keys the official ones minus "model."
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(V, config.d_model),
            blocks=nn.ModuleList([Block(config) for _ in range(config.n_layers)]),
            ln_f=RMSNorm(config.d_model, config.rms_norm_eps),
            ff_out=nn.Linear(config.d_model, V, bias=False),  # the LM head, NOT tied to wte
        ))
        if not any(p.is_meta for p in self.parameters()):  # from_pretrained builds on meta: skip
            for name, p in self.named_parameters():
                if p.dim() == 2:  # plain normal init: only used for tiny random models
                    nn.init.normal_(p, mean=0.0, std=config.init_std)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def forward(self, input_ids, attention_mask=None, past_kv=None, start=0, return_kv=False):
        """input_ids (B, T) long; attention_mask (B, L) of 1 = real token, 0 = padding, or None.
        Returns logits (B, T, V) in the weights' dtype. With a mask, padded KEYS are hidden from
        every query (pad queries still produce logits), as in LLaDA's Oct-2025 modelling file;
        None attends everything, which is what LLaDA's training and d1 do.

        KV cache (only sample.py's cached sampler uses it; Fast-dLLM, arXiv 2505.22618):
        return_kv=True also returns, per layer, the (k, v) this call computed, each
        (B, n_kv_heads, T, head_dim) after RoPE. past_kv = that list from an earlier call on a
        whole canvas of L columns; then input_ids are canvas columns [start, start + T) only, they
        attend to all L keys (cached outside the window, fresh inside), and attention_mask still
        covers all L columns. If the canvas has not changed since past_kv was made, the result
        equals columns [start, start + T) of a full forward (tested); if it has, the cached
        columns are stale, which is the cache's approximation."""
        B, T = input_ids.shape
        x = self.transformer.wte(input_ids)  # (B, T, C); no sqrt(d) scaling, no position table
        # RoPE tables for absolute positions start..start+T-1 of the (possibly left-padded) canvas,
        # as LLaDA does; computed per call (cheap), so sequences beyond max_sequence_length work.
        cos, sin = rope_tables(start + T, self.config.head_dim, self.config.rope_theta, input_ids.device)
        cos, sin = cos[start:], sin[start:]  # (T, hd)
        attn_mask = None
        if attention_mask is not None and not bool(attention_mask.all()):
            attn_mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, L): True = may attend
        kv = []  # with return_kv: each block's fresh (k, v)
        for i, block in enumerate(self.transformer.blocks):
            args = (x, cos, sin, attn_mask, None if past_kv is None else past_kv[i], start, return_kv)
            if self.gradient_checkpointing and torch.is_grad_enabled():
                out = checkpoint(block, *args, use_reentrant=False)
            else:
                out = block(*args)
            if return_kv:
                out, fresh = out
                kv.append(fresh)
            x = out
        logits = self.transformer.ff_out(self.transformer.ln_f(x))  # (B, T, V)
        return (logits, kv) if return_kv else logits

    # -------------------------------------------------------------------------
    # Checkpoints in the official layout

    def save_pretrained(self, path, max_shard_bytes=5 * 2**30):
        """Write config.json + model-0000i-of-0000N.safetensors + model.safetensors.index.json with
        the official key names, so the directory loads here and in LLaDA's own loader.
        LoRA adapters are merged on the fly, tensor by tensor (W + (alpha/r) B A), without touching
        the model, so a training run can checkpoint and keep training its adapters. Shards are
        written to a temporary name and renamed, and the index is written last, so a crash never
        leaves a directory whose index points at half-written files."""
        from safetensors.torch import save_file
        for name, m in self.named_modules():
            if type(m).__name__ == "Linear4bit":
                raise ValueError(f"{name} is 4-bit quantized; the official layout stores bf16 weights. "
                                 "Save lora_state_dict(model) instead, or load the base without "
                                 "load_in_4bit, add the adapters and save that.")
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        # (official key, size in bytes, how to get the tensor): merged weights are computed only
        # when their shard is written, so at most one shard of extra memory is ever used.
        entries = []
        for key, t in self.state_dict().items():  # 'transformer.…' -> official 'model.transformer.…'
            if ".lora_A" in key or ".lora_B" in key:
                continue
            if key.endswith(".base.weight"):  # a LoRA-wrapped linear: save the merged weight
                layer = self.get_submodule(key[:-len(".base.weight")])
                entries.append(("model." + key.replace(".base.weight", ".weight"),
                                t.numel() * t.element_size(), layer.merged_weight))
            else:
                entries.append(("model." + key, t.numel() * t.element_size(), lambda t=t: t))
        # greedy sharding in key order
        shards, current, size = [], [], 0
        for entry in entries:
            if current and size + entry[1] > max_shard_bytes:
                shards.append(current)
                current, size = [], 0
            current.append(entry)
            size += entry[1]
        shards.append(current)
        n, weight_map, total = len(shards), {}, 0
        for i, shard in enumerate(shards):
            fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
            tensors = {k: get().detach().to("cpu").contiguous() for k, _, get in shard}
            save_file(tensors, path / (fname + ".tmp"), metadata={"format": "pt"})  # HF wants format=pt
            os.replace(path / (fname + ".tmp"), path / fname)
            for k, t in tensors.items():
                weight_map[k] = fname
                total += t.numel() * t.element_size()
            del tensors
        dtype = str(next(self.parameters()).dtype).removeprefix("torch.")
        _write_json(path / CONFIG_FILE, {**self.config.to_dict(), "torch_dtype": dtype})
        _write_json(path / INDEX_FILE, {"metadata": {"total_size": total},
                                        "weight_map": dict(sorted(weight_map.items()))})
        # remove shards of an earlier save with a different shard count (never anything else)
        for f in path.glob("model*.safetensors"):
            if f.name not in weight_map.values():
                f.unlink()

    @classmethod
    def from_pretrained(cls, path, dtype=None, device=None, load_in_4bit=False):
        """Load a local directory in the official layout (config.json + safetensors shards).

        dtype: None keeps the stored dtype (bf16 for LLaDA-8B); device: None means CPU.
        Strict: any missing or unexpected key, or a shape mismatch, is one ValueError naming them.
        Streaming: the model is built on the meta device (no memory), then each tensor is read
        from its shard straight onto `device` and put in place, so peak memory is one copy of the
        weights (8B in bf16: 16 GB) plus one tensor.
        load_in_4bit: the seven linear layers of every block become bitsandbytes NF4 with double
        quantization and bf16 compute (d1's QLoRA RL setup), quantized tensor by tensor as they
        are read; embeddings, norms and the LM head stay in `dtype` (bf16 by default), as
        transformers' 4-bit loading leaves the output layer unquantized."""
        from safetensors import safe_open
        path = Path(path)
        cfg_file = path / CONFIG_FILE
        if not cfg_file.is_file():
            raise FileNotFoundError(f"no {CONFIG_FILE} in {path} (expected an official LLaDA directory)")
        config = LLaDAConfig.from_dict(json.loads(cfg_file.read_text()))
        device = torch.device(device or "cpu")
        if load_in_4bit:
            dtype = dtype or torch.bfloat16
        with torch.device("meta"):
            model = cls(config)
        expected = {"model." + k: tuple(v.shape) for k, v in model.state_dict().items()}
        files = _shard_files(path)
        # Check every key and shape from the file headers before reading a single tensor.
        found = {}
        for f in files:
            with safe_open(f, framework="pt") as sf:
                for k in sf.keys():
                    found[k] = tuple(sf.get_slice(k).get_shape())
        missing = sorted(set(expected) - set(found))
        unexpected = sorted(set(found) - set(expected))
        wrong = [f"{k}: checkpoint {found[k]} vs model {expected[k]}"
                 for k in sorted(set(found) & set(expected)) if found[k] != expected[k]]
        if missing or unexpected or wrong:
            msg = [f"checkpoint in {path} does not match the config:"]
            for label, items in (("missing keys", missing), ("unexpected keys", unexpected),
                                 ("shape mismatches", wrong)):
                if items:
                    more = f" … and {len(items) - 8} more" if len(items) > 8 else ""
                    msg.append(f"{label} ({len(items)}): {', '.join(items[:8])}{more}")
            raise ValueError("\n  ".join(msg))
        # Now read for real: safetensors memory-maps the file and copies each tensor straight to
        # `device`; the dtype cast (if any) makes a second copy of that one tensor only.
        for f in files:
            with safe_open(f, framework="pt", device=str(device)) as sf:
                for k in sf.keys():
                    t = sf.get_tensor(k)
                    _put_tensor(model, k[len("model."):], t.to(dtype) if dtype else t, load_in_4bit)
        return model


def _write_json(file, obj):
    tmp = Path(str(file) + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, file)


def _shard_files(path):
    """The safetensors files of a checkpoint directory: those named by the index if there is one."""
    if (path / INDEX_FILE).is_file():
        weight_map = json.loads((path / INDEX_FILE).read_text())["weight_map"]
        files = [path / f for f in sorted(set(weight_map.values()))]
        absent = [f.name for f in files if not f.is_file()]
        if absent:
            raise FileNotFoundError(f"{INDEX_FILE} in {path} names shards that are absent: {absent}")
        return files
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {path}")
    return files


def _put_tensor(model, key, t, load_in_4bit):
    """Install tensor t as parameter `key` (e.g. 'transformer.blocks.3.q_proj.weight')."""
    module_name, _, attr = key.rpartition(".")      # 'transformer.blocks.3.q_proj', 'weight'
    module = model.get_submodule(module_name)
    parent_name, _, child = module_name.rpartition(".")  # 'transformer.blocks.3', 'q_proj'
    # block linears are swapped for a quantized layer; the LM head (also named ff_out) is not
    if load_in_4bit and child in BLOCK_LINEARS and ".blocks." in key:
        model.get_submodule(parent_name).register_module(child, _linear_4bit(t))
    else:
        setattr(module, attr, nn.Parameter(t))  # replaces the meta placeholder, no copy


def _linear_4bit(weight):
    """A bitsandbytes NF4 Linear4bit (double quant, bf16 compute) holding `weight` (out, in).
    Quantization happens on the weight's own device (CUDA on GPU; bitsandbytes' CPU backend on CPU)."""
    import bitsandbytes as bnb
    out_f, in_f = weight.shape
    with torch.device("meta"):  # no throwaway fp32 allocation for the placeholder weight
        layer = bnb.nn.Linear4bit(in_f, out_f, bias=False, compute_dtype=torch.bfloat16,
                                  compress_statistics=True, quant_type="nf4")
    w = bnb.nn.Params4bit(weight.to(torch.bfloat16), requires_grad=False,
                          compress_statistics=True, quant_type="nf4")
    layer.weight = w.to(weight.device)  # .to() on a non-meta device performs the quantization
    # bitsandbytes 0.50 repacks the weight in place at the first no-grad eval forward on a CPU with
    # AVX512-BF16 (an inference-only kernel): that path crashes for in_features < 64 (tiny models)
    # and stores the scales in bf16, so results would depend on the CPU model. We keep the plain
    # dequantize path everywhere; it does not touch CUDA.
    layer.support_avx512bf16_for_cpu = False
    return layer


def _dense_weight(layer):
    """The (out, in) weight of an nn.Linear or a dequantized bitsandbytes Linear4bit."""
    if type(layer).__name__ == "Linear4bit":
        import bitsandbytes.functional as bnbF
        return bnbF.dequantize_4bit(layer.weight.data, layer.weight.quant_state)
    return layer.weight.data


def compile_blocks(model):
    """torch.compile every transformer block in place (nn.Module.compile: the module tree and the
    state-dict keys stay as they are). Fuses each block's elementwise work (fp32 RMSNorm and RoPE
    casts, SiLU·up, residual adds), which in eager mode is ~35 % of the CUDA time of an 8B
    forward + backward on an H100 (torch.profiler): 43 % -> 57 % MFU (README, Performance).
    The first passes compile. Call it after add_lora / 4-bit swaps."""
    for block in model.transformer.blocks:
        block.compile()
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
        self.lora_A = nn.Parameter(torch.empty(r, in_f, device=device))
        self.lora_B = nn.Parameter(torch.zeros(out_f, r, device=device))  # zero: starts as the base
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # nn.Linear's default init, as in peft
        self.scaling = alpha / r
        self.dropout = nn.Dropout(dropout)
        self.enabled = True

    def forward(self, x):
        y = self.base(x)
        if not self.enabled:
            return y
        update = self.dropout(x).to(self.lora_A.dtype) @ self.lora_A.t() @ self.lora_B.t()
        return y + (self.scaling * update).to(y.dtype)

    def merged_weight(self):
        """W + (alpha / r) B A in the base's dtype (bf16 for a 4-bit base)."""
        W = _dense_weight(self.base)
        return (W.float() + self.scaling * (self.lora_B @ self.lora_A)).to(W.dtype)


def _block_linears(model, targets):
    for i, block in enumerate(model.transformer.blocks):
        for name in targets:
            yield block, name, f"transformer.blocks.{i}.{name}"


def add_lora(model, r=128, alpha=64, dropout=0.05, targets=("q_proj", "k_proj", "v_proj", "up_proj")):
    """Freeze every base parameter and wrap the named linear layers of every block in LoRALinear.
    targets: any of BLOCK_LINEARS (block layers only; the LM head, also called ff_out, is never
    wrapped). Defaults are d1's RL setting: r 128, alpha 64, dropout 0.05 on q, k, v, up_proj (its
    config also lists gate/down/o names that do not exist in LLaDA, so only these four were adapted,
    d1-spec §10.7). Returns the list of trainable parameters."""
    bad = [t for t in targets if t not in BLOCK_LINEARS]
    if bad or not targets:
        raise ValueError(f"LoRA targets {bad or targets} invalid; choose from {BLOCK_LINEARS}")
    for p in model.parameters():
        p.requires_grad_(False)
    for block, name, _ in _block_linears(model, targets):
        layer = getattr(block, name)
        if isinstance(layer, LoRALinear):
            raise ValueError(f"{name} already has a LoRA adapter")
        setattr(block, name, LoRALinear(layer, r, alpha, dropout))
    return [p for p in model.parameters() if p.requires_grad]


@contextmanager
def lora_disabled(model):
    """Inside this context the model is its frozen base: diffu-GRPO's reference policy is the
    adapter-disabled base model (d1-spec §3.2), so no second copy of 8B weights is needed."""
    layers = [m for m in model.modules() if isinstance(m, LoRALinear)]
    previous = [m.enabled for m in layers]
    for m in layers:
        m.enabled = False
    try:
        yield model
    finally:
        for m, was in zip(layers, previous):
            m.enabled = was


def merge_lora(model):
    """Fold every adapter into its base weight and restore plain nn.Linear layers with the
    official names, ready for save_pretrained (d1 shipped no merge script: d1 issue #13).
    A 4-bit base is dequantized first, so the merged layer is a bf16 nn.Linear."""
    for block in model.transformer.blocks:
        for name in BLOCK_LINEARS:
            layer = getattr(block, name)
            if isinstance(layer, LoRALinear):
                W = layer.merged_weight()
                merged = nn.Linear(W.shape[1], W.shape[0], bias=False, device="meta")
                merged.weight = nn.Parameter(W, requires_grad=False)
                setattr(block, name, merged)
    return model


def lora_state_dict(model):
    """Only the adapter tensors (small): what a LoRA training run needs to checkpoint."""
    return {k: v for k, v in model.state_dict().items() if ".lora_A" in k or ".lora_B" in k}


def save_merged(model, base_dir, out_dir):
    """save_pretrained for a model that may have a 4-bit base: the official layout stores the
    full-precision weights, so adapters trained on an NF4 base are merged onto the ORIGINAL weights
    re-read from base_dir (on CPU, streamed), never onto dequantized ones (d1 likewise evaluates its
    QLoRA adapters on the bf16 base). Without 4-bit this is plain model.save_pretrained(out_dir)."""
    if not any(type(m).__name__ == "Linear4bit" for m in model.modules()):
        return model.save_pretrained(out_dir)
    adapters = lora_state_dict(model)
    full = LLaDA.from_pretrained(base_dir)  # stored dtype, CPU: 16 GB of RAM for LLaDA-8B
    for block, name, path in _block_linears(full, BLOCK_LINEARS):
        layer = model.get_submodule(path)
        if isinstance(layer, LoRALinear):  # same rank / alpha as the trained adapter
            setattr(block, name, LoRALinear(getattr(block, name), layer.lora_A.shape[0],
                                            layer.scaling * layer.lora_A.shape[0]))
    full.load_state_dict({k: v.cpu() for k, v in adapters.items()}, strict=False)
    full.save_pretrained(out_dir)


# -----------------------------------------------------------------------------
# Tokenizer


@dataclass
class SpecialIds:
    mask: int   # <|mdm_mask|>, from config.json (mask_token_id)
    eos: int    # <|endoftext|>, from config.json (eos_token_id); also the pad token
    eot: int    # <|eot_id|>, from the tokenizer
    bos: int    # <|startoftext|>, from the tokenizer
    pad: int


def load_tokenizer(path):
    """The tokenizer stored beside the weights (LLaDA's is a plain fast tokenizer: no remote code).
    Padding is on the left, as every batched LLaDA/d1 generation uses."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging
    # config.json's model_type "llada" is unknown to transformers, which only matters for models:
    # silence its warning while the tokenizer loads; never run remote code for a tokenizer.
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
    finally:
        hf_logging.set_verbosity(verbosity)
    tok.padding_side = "left"
    return tok


def special_ids(tokenizer, config):
    """The token ids the algorithm needs, read once from config and tokenizer and cross-checked."""
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in (MASK_TOKEN, EOS_TOKEN, EOT_TOKEN, BOS_TOKEN)}
    # a tokenizer from another model family would map these strings to unk (or None)
    unknown = [t for t, i in ids.items() if i is None or i == tokenizer.unk_token_id]
    if unknown:
        raise ValueError(f"tokenizer lacks LLaDA special tokens {unknown}")
    # config.json is the authority for mask/eos (the sampler and estimators read them from there);
    # a mismatch means tokenizer and weights come from different places
    if ids[MASK_TOKEN] != config.mask_token_id or ids[EOS_TOKEN] != config.eos_token_id:
        raise ValueError(f"tokenizer ids {ids} disagree with config mask_token_id="
                         f"{config.mask_token_id}, eos_token_id={config.eos_token_id}")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else config.eos_token_id
    return SpecialIds(mask=config.mask_token_id, eos=config.eos_token_id, eot=ids[EOT_TOKEN],
                      bos=ids[BOS_TOKEN], pad=pad)


def _bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map used by byte-level BPE (byte b -> chr)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def make_tiny_tokenizer():
    """A byte-level tokenizer: id b is byte b (so '7' is 55), then LLaDA's special tokens in
    LLaDA's order (BOS, EOS, mask, header start/end, end of turn), and LLaDA's chat template.
    Every string round-trips. Built with the `tokenizers` package that transformers installs."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {ch: b for b, ch in _bytes_to_unicode().items()}  # 256 entries, id == byte value
    # BPE with no merges over a byte-level alphabet: exactly one token per UTF-8 byte
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    specials = [BOS_TOKEN, EOS_TOKEN, MASK_TOKEN, START_HEADER_TOKEN, END_HEADER_TOKEN, EOT_TOKEN]
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS_TOKEN, eos_token=EOS_TOKEN,
                                  pad_token=EOS_TOKEN, additional_special_tokens=specials[2:],
                                  padding_side="left")
    tok.add_special_tokens({"additional_special_tokens": specials[2:]})  # ids 256.. in list order
    tok.chat_template = CHAT_TEMPLATE
    return tok


# A small LLaDA for the CPU pipeline and the tests: same code path as the 8B, ~0.8M parameters.
TINY_CONFIG = dict(d_model=128, n_heads=4, n_kv_heads=4, n_layers=4, mlp_hidden_size=384,
                   max_sequence_length=1024, rope_theta=500000.0, rms_norm_eps=1e-5, init_std=0.02)
OFFICIAL_EXTRAS = {  # carried so the saved config.json looks like LLaDA-8B's own
    "model_type": "llada", "architectures": ["LLaDAModelLM"],
    "auto_map": {"AutoConfig": "configuration_llada.LLaDAConfig",
                 "AutoModel": "modeling_llada.LLaDAModelLM",
                 "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM"},
    "use_cache": False,
}


def make_tiny(path, seed=0, max_shard_bytes=5 * 2**30, **overrides):
    """Write a randomly initialised tiny LLaDA + its tokenizer to `path` in the official layout
    (config.json, safetensors shards + index, tokenizer files, generation_config.json).
    From then on the directory is loaded exactly like LLaDA-8B-Instruct. Returns the path."""
    tok = make_tiny_tokenizer()
    ids = {t: tok.convert_tokens_to_ids(t) for t in (BOS_TOKEN, EOS_TOKEN, MASK_TOKEN)}
    config = LLaDAConfig(**{**TINY_CONFIG, **overrides, "vocab_size": len(tok), "embedding_size": len(tok),
                            "mask_token_id": ids[MASK_TOKEN], "eos_token_id": ids[EOS_TOKEN],
                            "pad_token_id": ids[EOS_TOKEN]})
    config.extra = dict(OFFICIAL_EXTRAS)
    torch.manual_seed(seed)  # the random init is reproducible from the seed
    model = LLaDA(config)
    path = Path(path)
    model.save_pretrained(path, max_shard_bytes=max_shard_bytes)
    tok.save_pretrained(str(path))
    _write_json(path / "generation_config.json",
                {"bos_token_id": ids[BOS_TOKEN], "eos_token_id": ids[EOS_TOKEN]})
    return path


TINY_DIR = os.path.join("out", "tiny-llada")  # where the scripts' defaults expect the tiny model


def load(path=TINY_DIR, device=None, dtype=None, load_in_4bit=False):
    """(model, tokenizer) from a checkpoint directory. Only the default tiny directory is created
    when missing: a mistyped path to real weights must fail, not silently give a random model."""
    if str(path) == TINY_DIR and not Path(path).exists():
        make_tiny(path)
    model = LLaDA.from_pretrained(path, dtype=dtype, device=device, load_in_4bit=load_in_4bit)
    return model, load_tokenizer(path)


def chat_ids(tokenizer, user_text):
    """Token ids of one user turn rendered with the chat template, ready for generation (ends with
    the assistant header). add_special_tokens=False: the template already holds BOS."""
    text = tokenizer.apply_chat_template([{"role": "user", "content": user_text}],
                                         add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


# -----------------------------------------------------------------------------

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="write the tiny LLaDA and run one forward pass")
    parser.add_argument("--out-dir", type=str, default=TINY_DIR, help="where to write the tiny model")
    parser.add_argument("--seed", type=int, default=0, help="random init seed")
    args = parser.parse_args()
    make_tiny(args.out_dir, seed=args.seed)
    model, tok = load(args.out_dir)
    ids = torch.tensor([chat_ids(tok, "Hello")])  # (1, P)
    logits = model(ids)  # (1, P, V)
    print(f"wrote {args.out_dir}: {model.num_params():,} parameters, {len(tok)} tokens")
    print(f"prompt {tok.decode(ids[0])!r} -> {ids.shape[1]} tokens -> logits {tuple(logits.shape)}")
