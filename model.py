"""
The LLaDA transformer in plain PyTorch: config, RMSNorm, RoPE, block, model.

LLaDA (Nie et al., arXiv 2502.09992) is a masked diffusion language model. Architecturally it
is a Llama-3-style transformer with the causal mask removed: every position attends to every
other one, the input is a sequence in which some tokens are replaced by a mask token, and the
logit at position i predicts the clean token at position i (no shift, unlike an autoregressive
model). There is no timestep input: the number of mask tokens alone says how noisy it is.

One block (pre-norm, docs/llada.md §1 and §3):

    a = attn_norm(h)                          RMSNorm, statistics in fp32
    q, k, v = q_proj(a), k_proj(a), v_proj(a) no biases anywhere
    q, k = rope(q), rope(k)                   rotate-half RoPE, computed in fp32
    h = h + attn_out(SDPA(q, k, v))           bidirectional: no causal mask
    m = ff_norm(h)
    h = h + ff_out(silu(ff_proj(m)) * up_proj(m))   ff_proj is the GATED branch

and logits = ff_out_head(ln_f(h)) with an untied LM head. LLaDA-8B: d_model 4096, 32 layers,
32 heads (no GQA), SwiGLU width 12288, vocab 126464, RoPE theta 5e5; 8.0B parameters.

Generic options, all off in LLaDA, run other checkpoints of this shape (docs/model.md, "The
families"): grouped-query attention (n_kv_heads), q/k/v biases (include_qkv_bias), RoPE in the
activations' dtype (rope_full_precision), logits shifted by one position (logit_shift), and
a key/value cache. Module and parameter names are the checkpoint's: the state dict IS the
official layout minus its "model." prefix (modelio/checkpoint.py).

    from modelio.checkpoint import from_pretrained
    model = from_pretrained("/path/to/LLaDA-8B-Instruct", device="cuda")   # bf16, as stored
    logits = model(input_ids)                                              # (B, T, V)

`python model.py`: one forward pass of a random tiny LLaDA.
"""

from dataclasses import asdict, dataclass, field, fields

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint  # activation checkpointing, not modelio's

# The seven linear layers of a block, by their official names. LoRA targets, the 4-bit swap
# and merging walk these; the LM head is also called ff_out but lives outside the blocks.
BLOCK_LINEARS = ("q_proj", "k_proj", "v_proj", "attn_out", "ff_proj", "up_proj", "ff_out")

# The tiny LLaDA of the CPU runs and tests: the 8B's architecture at toy width, and the ids of
# the byte tokenizer (modelio/tokenizer.py: 256 bytes, BOS 256, EOS 257 = pad, mask 258, ...)
TINY_CONFIG = dict(d_model=128, n_heads=4, n_kv_heads=4, n_layers=4, mlp_hidden_size=384,
                   max_sequence_length=1024, rope_theta=5e5, rms_norm_eps=1e-5, init_std=0.02)
TINY_IDS = dict(vocab_size=262, embedding_size=262, eos_token_id=257, pad_token_id=257,
                mask_token_id=258)

# fields no config.json holds: a family's config translation sets them (modelio/families.py)
NOT_IN_JSON = ("logit_shift",)
# why a key/value-cache window has no meaning on shifted logits; forward refuses it with this
SHIFT_NO_CACHE = ("a cached window's first column is read from the column left of it, "
                  "which the window does not hold")


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
    # RoPE base 5e5 as in Llama 3, no scaling (docs/llada.md §3). max_sequence_length is only
    # the pretraining length: RoPE tables are built per call, so longer canvases work too.
    rope_theta: float = 500000.0
    rms_norm_eps: float = 1e-5
    max_sequence_length: int = 4096
    # special ids (docs/llada.md §1, §4): <|mdm_mask|>, and <|endoftext|>, also the pad
    mask_token_id: int = 126336
    eos_token_id: int = 126081
    pad_token_id: int = 126081
    init_std: float = 0.02                 # only used for random init (tiny models, tests)
    # logits shifted by one position: column i reads token i from position i - 1 (not LLaDA)
    logit_shift: bool = False
    # Features of the OLMo-derived code: LLaDA-8B's combination and the generic options;
    # validate() refuses any other value instead of silently computing something else.
    block_type: str = "llama"
    activation_type: str = "silu"
    layer_norm_type: str = "rms"
    layer_norm_with_affine: bool = True
    bias_for_layer_norm: bool | None = False
    include_bias: bool = False
    include_qkv_bias: bool | None = False  # True: biases on q/k/v only
    attention_layer_norm: bool = False
    weight_tying: bool = False
    rope: bool = True
    rope_full_precision: bool = True       # False: RoPE in the activations' dtype
    alibi: bool = False
    input_emb_norm: bool = False
    scale_logits: bool = False
    multi_query_attention: bool | None = None
    block_group_size: int = 1
    clip_qkv: float | None = None
    attention_dropout: float = 0.0
    residual_dropout: float = 0.0
    embedding_dropout: float = 0.0
    # keys carried through (architectures, auto_map, ...): a saved config loads as the base's
    extra: dict = field(default_factory=dict, repr=False)

    # what validate() accepts per feature field (None where OLMo treats it as "off")
    _SUPPORTED = {
        "block_type": ("llama",), "activation_type": ("silu",), "layer_norm_type": ("rms",),
        "layer_norm_with_affine": (True,), "bias_for_layer_norm": (False, None),
        "include_bias": (False,), "include_qkv_bias": (False, None, True),
        "attention_layer_norm": (False,), "weight_tying": (False,), "rope": (True,),
        "rope_full_precision": (True, False), "alibi": (False,), "input_emb_norm": (False,),
        "scale_logits": (False,), "multi_query_attention": (False, None),
        "block_group_size": (1,), "clip_qkv": (None,), "attention_dropout": (0.0,),
        "residual_dropout": (0.0,), "embedding_dropout": (0.0,),
    }

    @property
    def head_dim(self):  # derived sizes, resolved as the OLMo-derived official code does
        return self.d_model // self.n_heads  # 128 for LLaDA-8B

    @property
    def kv_heads(self):  # fewer than n_heads: grouped-query attention (LLaDA-8B: 32 = 32)
        return self.n_kv_heads or self.n_heads

    @property
    def hidden_size(self):  # mlp_hidden_size wins: LLaDA-8B's MLP is 12288, not 4 * 4096
        return self.mlp_hidden_size or self.mlp_ratio * self.d_model

    @property
    def padded_vocab(self):  # OLMo pads wte and the LM head to embedding_size: the logits' V
        return self.embedding_size or self.vocab_size

    def validate(self):
        """Raise one ValueError listing every unsupported or inconsistent setting."""
        problems = [f"{k}={getattr(self, k)!r} (supported: {' or '.join(map(repr, ok))})"
                    for k, ok in self._SUPPORTED.items() if getattr(self, k) not in ok]
        # heads must tile d_model exactly, and rotate-half RoPE pairs dim j with j + head_dim/2
        if self.d_model % self.n_heads:
            problems.append(f"d_model={self.d_model} is not divisible by "
                            f"n_heads={self.n_heads}")
        elif self.head_dim % 2:
            problems.append(f"head_dim={self.head_dim} must be even for rotate-half RoPE")
        if self.n_heads % self.kv_heads:
            problems.append(f"n_heads={self.n_heads} is not divisible by "
                            f"n_kv_heads={self.kv_heads}")
        if self.padded_vocab < self.vocab_size:
            problems.append(f"embedding_size={self.embedding_size} < "
                            f"vocab_size={self.vocab_size}")
        # every canvas holds the mask id and EOS ends every completion: both are rows of wte
        for name in ("mask_token_id", "eos_token_id"):
            if not 0 <= getattr(self, name) < self.padded_vocab:
                problems.append(f"{name}={getattr(self, name)} is outside the vocabulary")
        if problems:
            raise ValueError("LLaDA config not supported by this implementation: "
                             + "; ".join(problems))
        return self

    @classmethod
    def from_dict(cls, d):
        """From a parsed config.json: known keys become fields, the rest is kept in `extra`."""
        known = {f.name for f in fields(cls)} - {"extra", *NOT_IN_JSON}
        cfg = cls(**{k: v for k, v in d.items() if k in known})
        cfg.extra = {k: v for k, v in d.items() if k not in known}
        return cfg.validate()

    def to_dict(self):
        """The config.json contents: the carried-through keys first, then every field."""
        d = asdict(self)
        for k in ("extra", *NOT_IN_JSON):
            d.pop(k)
        # fields last: our values win over any same-named key in extra
        return {**self.extra, **d}


class RMSNorm(nn.Module):
    """x / rms(x) * w. As in LLaDA: statistics in fp32, cast back to the input dtype BEFORE the
    weight multiply (so with bf16 weights the multiply itself is bf16); no bias, no (1 + w)."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # the mean of squares over C = 4096 channels in fp32: bf16 keeps 8 bits of mantissa
        x32 = x.float()  # (..., C)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., C)
        # cast back first, then scale: multiplying in fp32 would round differently from LLaDA
        return x32.to(x.dtype) * self.weight  # (..., C): the multiply runs in the input dtype


def rope_tables(seq_len, head_dim, theta, device):
    """cos/sin tables (T, head_dim) in fp32 for positions 0..T-1 (non-interleaved rotate-half).
    inv_freq[j] = theta^(-2j/head_dim); the table is cat(freqs, freqs), docs/llada.md §3."""
    # one frequency per pair of dims, from 1 (j = 0) down to ~1/theta: hd/2 = 64 for LLaDA
    inv_freq = 1.0 / theta ** (
        torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    # positions in fp32: bf16 cannot hold every integer above 256, let alone pos * inv_freq
    freqs = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32),
                        inv_freq)  # (T, hd/2)
    # duplicated, not interleaved: dims j and j + hd/2 share a frequency (NeoX/HF-Llama order)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, hd)
    return emb.cos(), emb.sin()


def apply_rope(x, cos, sin, full_precision=True):
    """Rotate (B, nh, T, hd) by the (T, hd) tables: in fp32 and cast back (LLaDA's
    rope_full_precision), or in x's dtype with the tables cast to it (full_precision False)."""
    x32 = x.float() if full_precision else x  # (B, nh, T, hd)
    if not full_precision:
        cos = cos.to(x.dtype)
        sin = sin.to(x.dtype)
    # half-split: checkpoint q/k rows are already in this order, no permutation (llada.md §2)
    x1, x2 = x32.chunk(2, dim=-1)  # (B, nh, T, hd/2) each: pair j with j + hd/2
    rotated = torch.cat((-x2, x1), dim=-1)  # (B, nh, T, hd): rotate_half
    # the tables broadcast over batch and heads: pair (j, j + hd/2) turns by pos * inv_freq[j]
    return (x32 * cos + rotated * sin).to(x.dtype)  # (B, nh, T, hd)


class Block(nn.Module):
    """One LLaDA 'llama' block. Module names are the checkpoint's names (BLOCK_LINEARS)."""

    def __init__(self, config: LLaDAConfig):
        super().__init__()
        C = config.d_model
        hd = config.head_dim
        self.n_heads = config.n_heads
        self.n_kv_heads = config.kv_heads
        self.rope_full_precision = config.rope_full_precision
        # attention: separate q/k/v/o, no QK-norm, biases only with include_qkv_bias. Weights
        # are [out, in] as nn.Linear stores them: the official tensors drop straight in
        self.attn_norm = RMSNorm(C, config.rms_norm_eps)
        qkv_bias = bool(config.include_qkv_bias)
        self.q_proj = nn.Linear(C, config.n_heads * hd, bias=qkv_bias)
        self.k_proj = nn.Linear(C, self.n_kv_heads * hd, bias=qkv_bias)
        self.v_proj = nn.Linear(C, self.n_kv_heads * hd, bias=qkv_bias)
        self.attn_out = nn.Linear(config.n_heads * hd, C, bias=False)
        # the gated MLP, C -> hidden_size (12288) -> C. Not OLMo's "swiglu" activation (one
        # fused matrix split in two): gate and up are separate matrices, the gate is ff_proj
        self.ff_norm = RMSNorm(C, config.rms_norm_eps)
        self.ff_proj = nn.Linear(C, config.hidden_size, bias=False)  # gate: goes through SiLU
        self.up_proj = nn.Linear(C, config.hidden_size, bias=False)  # multiplied in
        self.ff_out = nn.Linear(config.hidden_size, C, bias=False)   # down projection

    def forward(self, x, cos, sin, attn_mask, past=None, start=0, return_kv=False):
        """x (B, T, C) -> x, or with return_kv (x, (k, v)): this call's k/v (B, nkv, T, hd),
        after RoPE. past: a canvas's cached (k, v), (B, nkv, L, hd); x is then its columns
        [start, start + T), whose fresh keys and values replace the cached ones there."""
        B, T, C = x.shape
        # pre-norm: only the branch input is normalised, the residual stream x itself never is
        a = self.attn_norm(x)  # (B, T, C)
        # project, split C into heads, and make heads a batch dim for SDPA
        q = self.q_proj(a).view(B, T, self.n_heads, -1).transpose(1, 2)     # (B, nh, T, hd)
        k = self.k_proj(a).view(B, T, self.n_kv_heads, -1).transpose(1, 2)  # (B, nkv, T, hd)
        v = self.v_proj(a).view(B, T, self.n_kv_heads, -1).transpose(1, 2)  # (B, nkv, T, hd)
        q = apply_rope(q, cos, sin, self.rope_full_precision)  # (B, nh, T, hd)
        k = apply_rope(k, cos, sin, self.rope_full_precision)  # (B, nkv, T, hd)
        # the cache stores keys after RoPE: positions are absolute, so cached keys stay valid
        fresh = (k, v)
        # with a cache, the T queries attend all L canvas keys: cached ones outside the window
        if past is not None:
            pk, pv = past
            k = torch.cat([pk[:, :, :start], k, pk[:, :, start + T:]], dim=2)  # (B,nkv,L,hd)
            v = torch.cat([pv[:, :, :start], v, pv[:, :, start + T:]], dim=2)  # (B,nkv,L,hd)
        if self.n_kv_heads != self.n_heads:  # grouped-query attention: share each kv head
            k = k.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1)  # (B, nh, L, hd)
            v = v.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1)  # (B, nh, L, hd)
        # bidirectional: no causal mask, only the optional key-padding mask; scale 1/sqrt(hd)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                           is_causal=False)  # (B, nh, T, hd)
        # heads -> channels, output projection, residual add (stream stays bf16, llada.md §3)
        x = x + self.attn_out(y.transpose(1, 2).reshape(B, T, -1))  # (B, T, C)
        m = self.ff_norm(x)  # (B, T, C)
        x = x + self.ff_out(F.silu(self.ff_proj(m)) * self.up_proj(m))  # (B, T, C)
        return (x, fresh) if return_kv else x


class LLaDA(nn.Module):

    def __init__(self, config: LLaDAConfig):
        super().__init__()
        self.config = config.validate()
        self.gradient_checkpointing = False  # set True to recompute each block in backward
        V = config.padded_vocab
        # the ModuleDict `transformer` makes our state-dict keys the official ones - "model."
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(V, config.d_model),
            blocks=nn.ModuleList([Block(config) for _ in range(config.n_layers)]),
            ln_f=RMSNorm(config.d_model, config.rms_norm_eps),
            ff_out=nn.Linear(config.d_model, V, bias=False),  # the LM head, NOT tied to wte
        ))
        # built on meta by checkpoint.from_pretrained: nothing to fill, the shards bring it
        if not any(p.is_meta for p in self.parameters()):
            for name, p in self.named_parameters():
                # plain normal init of matrices (norm weights stay ones): tiny random models
                if p.dim() == 2:
                    nn.init.normal_(p, mean=0.0, std=config.init_std)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def forward(self, input_ids, attention_mask=None, past_kv=None, start=0, return_kv=False,
                logits_at=None):
        """input_ids (B, T) long; attention_mask (B, L) of 1 = real token, 0 = pad, or None.
        -> logits (B, T, V) in the weights' dtype. A mask hides padded KEYS from every query,
        as LLaDA's Oct-2025 modelling file does; None attends everything, as LLaDA and d1 do.

        A key/value cache, for a sampler that reuses a canvas's keys across its steps:
        return_kv=True also returns each layer's (k, v) of this call, (B, n_kv_heads, T,
        head_dim) after RoPE. past_kv = that list from a call on a whole canvas of L columns:
        input_ids are then columns [start, start + T) only, attending all L keys (cached
        outside the window, fresh inside; attention_mask covers all L). On an unchanged canvas
        this equals columns [start, start + T) of a full forward (tests/test_sample.py).

        logits_at (B, K) long: only these columns of each row go through the final norm and
        the head -> (B, K, V) (HF's logits_to_keep, per row)."""
        B, T = input_ids.shape
        # no sqrt(d) scaling (input_emb_norm false), no position table: RoPE adds positions
        x = self.transformer.wte(input_ids)  # (B, T, C)
        # RoPE of absolute positions 0..start+T-1 (left pads count, as in LLaDA), per call
        cos, sin = rope_tables(start + T, self.config.head_dim, self.config.rope_theta,
                               input_ids.device)
        cos, sin = cos[start:], sin[start:]  # (T, hd) each: the window's rows
        # padded keys hidden (docs/llada.md §1); an all-ones mask is dropped, so SDPA takes
        # its fast unmasked path (.all(): one GPU -> CPU sync when a mask is passed)
        attn_mask = None
        if attention_mask is not None and not bool(attention_mask.all()):
            attn_mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, L): True = attend
        if self.config.logit_shift and past_kv is not None:
            raise ValueError(f"a KV-cache window cannot be read with shifted logits: "
                             f"{SHIFT_NO_CACHE}")
        kv = []  # with return_kv: each block's fresh (k, v)
        for i, block in enumerate(self.transformer.blocks):
            # a canvas changed since its cache was made: stale keys, the cache's approximation
            past = None if past_kv is None else past_kv[i]
            args = (x, cos, sin, attn_mask, past, start, return_kv)
            # recompute in backward only when building a graph. use_reentrant=False: the other
            # returns no gradients when no input requires grad (block 0 under LoRA: frozen wte)
            if self.gradient_checkpointing and torch.is_grad_enabled():
                out = checkpoint(block, *args, use_reentrant=False)
            else:
                out = block(*args)
            if return_kv:
                out, fresh = out
                kv.append(fresh)
            x = out  # (B, T, C)
        if self.config.logit_shift:
            # once, before the head: column i holds position i - 1's, column 0 its own
            x = torch.cat([x[:, :1], x[:, :-1]], dim=1)  # (B, T, C)
        if logits_at is not None:  # the requested columns only, (B, K, C)
            x = x.gather(1, logits_at[..., None].expand(-1, -1, x.shape[-1]))
        # final RMSNorm and the untied head; raw logits in the weights' dtype (callers cast)
        logits = self.transformer.ff_out(self.transformer.ln_f(x))  # (B, T, V), or (B, K, V)
        return (logits, kv) if return_kv else logits


def compile_blocks(model):
    """torch.compile every block in place (nn.Module.compile: module tree and state-dict keys
    stay). Fuses each block's elementwise work (fp32 norm and RoPE casts, SiLU·up, residuals),
    ~35 % of an 8B forward + backward's CUDA time: 43 % -> 57 % MFU on an H100
    (docs/performance.md, "Measured on an H100"). Compiles on the first passes; call it after
    add_lora / 4-bit swaps."""
    # per block, not the whole model: LLaDA.forward's loop (cache, checkpointing) stays eager
    for block in model.transformer.blocks:
        block.compile()
    return model


if __name__ == "__main__":
    # a random tiny LLaDA, one forward: the shapes (on disk: `python -m modelio.checkpoint`)
    torch.manual_seed(0)
    model = LLaDA(LLaDAConfig(**TINY_CONFIG, **TINY_IDS)).eval()
    ids = torch.randint(0, model.config.vocab_size, (2, 10))  # (B, T): 2 rows of 10 tokens
    ids[:, 5:] = model.config.mask_token_id  # second half masked: all predicted at once
    with torch.no_grad():
        logits = model(ids)  # (B, T, V)
    print(f"tiny LLaDA: {model.num_params():,} parameters, logits {tuple(logits.shape)}")
