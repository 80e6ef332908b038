"""
The LLaDA transformer in plain PyTorch: config, RMSNorm, RoPE, block, model. Dream runs on it too.

LLaDA (Nie et al., arXiv 2502.09992) is a masked diffusion language model. Architecturally it is a
Llama-3-style transformer with the causal mask removed: every position attends to every other one,
the input is a sequence in which some tokens are replaced by a special mask token, and the logit
at position i predicts the clean token at position i (no shift, unlike an autoregressive model).
The model takes no timestep input: the number of mask tokens alone tells it how noisy the input is.

One block (pre-norm, docs/llada.md §1 and §3):

    a = attn_norm(h)                          RMSNorm, statistics in fp32
    q, k, v = q_proj(a), k_proj(a), v_proj(a) no biases anywhere
    q, k = rope(q), rope(k)                   rotate-half RoPE, computed in fp32
    h = h + attn_out(SDPA(q, k, v))           bidirectional: no causal mask
    m = ff_norm(h)
    h = h + ff_out(silu(ff_proj(m)) * up_proj(m))   ff_proj is the GATED branch

and logits = ff_out_head(ln_f(h)) with an untied LM head. LLaDA-8B: d_model 4096, 32 layers,
32 heads (no GQA), SwiGLU width 12288, vocab 126464, RoPE theta 5e5; 8.0B parameters.

Dream-7B (Dream-org/Dream-v0-Instruct-7B, arXiv 2508.15487) is the same transformer configured as
a Qwen2.5-7B layout run bidirectionally: q/k/v biases (include_qkv_bias), grouped-query attention
(28 query heads, 4 key/value heads), RoPE in the activations' dtype (rope_full_precision false),
and shifted logits (logit_shift): Dream reads token i from position i - 1. The shift is applied
once, in forward, so every caller (sampler, estimators, SFT, every objective) reads logits[:, i]
as the prediction for token i whatever the family. modelio/families.py translates Dream's
config.json and checkpoint keys to and from these fields and names (docs/model.md, "The families").

What lives here: LLaDAConfig (the official config.json field names; unsupported configs are
refused), LLaDA.forward(input_ids, attention_mask=None) -> logits (B, T, V) with an optional KV
cache, and compile_blocks. Module and parameter names are the checkpoint's own, so the state dict
IS the official layout minus its "model." prefix. The rest is one file per concept:
  checkpoint.py  official directory: from_pretrained / save_pretrained, save_merged, make_tiny, load
  adapters.py    LoRA by hand and the NF4 4-bit block linears
  tokenizer.py   special tokens, chat template, load_tokenizer, special_ids, the tiny byte tokenizer

    from modelio.checkpoint import from_pretrained
    model = from_pretrained("/path/to/LLaDA-8B-Instruct", device="cuda")   # bf16, as stored
    logits = model(input_ids)                                              # (B, T, V)

Run `python model.py` for one forward pass of a random tiny LLaDA (`python -m modelio.checkpoint`
writes the tiny model to disk in the official layout).
"""

import argparse
from dataclasses import asdict, dataclass, field, fields

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint  # activation checkpointing (not our checkpoint.py)

# The seven linear layers of a block, by their official names. LoRA targets, the 4-bit swap and
# merging all walk these; the LM head is also called ff_out but lives outside the blocks.
BLOCK_LINEARS = ("q_proj", "k_proj", "v_proj", "attn_out", "ff_proj", "up_proj", "ff_out")

# The tiny LLaDA of the CPU runs and tests: the 8B's architecture at toy width (vocabulary and
# special ids come from the byte tokenizer, modelio/checkpoint.make_tiny)
TINY_CONFIG = dict(d_model=128, n_heads=4, n_kv_heads=4, n_layers=4, mlp_hidden_size=384,
                   max_sequence_length=1024, rope_theta=500000.0, rms_norm_eps=1e-5, init_std=0.02)
# the tiny byte tokenizer's ids (modelio/tokenizer.py): 256 bytes, then BOS 256, EOS 257, mask 258,
# 3 chat tokens; pad = EOS, as in LLaDA. A random tiny model with no tokenizer on disk uses these
TINY_IDS = dict(vocab_size=262, embedding_size=262, eos_token_id=257, pad_token_id=257,
                mask_token_id=258)


# -----------------------------------------------------------------------------
# Config

NOT_IN_JSON = ("logit_shift",)  # Dream's field, set by modelio/families.py, never in config.json
# why a Fast-dLLM KV cache has no meaning on shifted logits; model.forward, sample.generate and the
# scripts' up-front checks refuse it with this reason
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
    # RoPE base 5e5 as in Llama 3, no rope scaling (docs/llada.md §3). max_sequence_length is only
    # the pretraining length (4096): RoPE tables are built per call, so longer canvases work too.
    rope_theta: float = 500000.0
    rms_norm_eps: float = 1e-5
    max_sequence_length: int = 4096
    # Special ids (docs/llada.md §1, §4): <|mdm_mask|>, and <|endoftext|>, also the pad token.
    # The sampler and the estimators read the mask id from here; tokenizer.special_ids cross-checks.
    mask_token_id: int = 126336
    eos_token_id: int = 126081
    pad_token_id: int = 126081
    init_std: float = 0.02                 # only used for random init (tiny models, tests)
    # Dream's departure, which no LLaDA config.json field names (set by modelio/families.py, left
    # out by to_dict): its logit at position i predicts token i + 1, so token i is read from column
    # i - 1 (Dream's generation_utils: cat([logits[:, :1], logits[:, :-1]])). Dream's padded batches
    # also count RoPE positions from a row's first real token (cumsum(mask) - 1); RoPE is relative
    # and pads are hidden as keys, so our column index gives the same logits (tests/test_dream.py)
    logit_shift: bool = False
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
    # Keys we carry through (architectures, auto_map, init_fn, ...), so a config we save still loads
    # in the official remote-code loader (modelio/model_files.local_auto_map keeps the auto_map
    # entries whose code is there)
    extra: dict = field(default_factory=dict, repr=False)

    # what validate() accepts per feature field (None is accepted where OLMo treats it as "off")
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

    # Derived sizes, resolved the way the OLMo-derived official code resolves them.
    @property
    def head_dim(self):
        return self.d_model // self.n_heads  # 128 for LLaDA-8B

    # n_kv_heads < n_heads would be grouped-query attention; LLaDA-8B is plain MHA (32 = 32)
    @property
    def kv_heads(self):
        return self.n_kv_heads or self.n_heads

    # OLMo lets mlp_hidden_size win: LLaDA-8B's MLP is 12288 wide, not mlp_ratio * d_model = 16384
    @property
    def hidden_size(self):
        return self.mlp_hidden_size or self.mlp_ratio * self.d_model

    @property
    def padded_vocab(self):
        # OLMo pads wte and the LM head to embedding_size; logits have this many columns
        return self.embedding_size or self.vocab_size

    def validate(self):
        """Raise one ValueError listing every unsupported or inconsistent setting."""
        # e.g. block_type="sequential" (fused att_proj) or alibi=True: code paths we do not have
        problems = [f"{k}={getattr(self, k)!r} (supported: {' or '.join(map(repr, ok))})"
                    for k, ok in self._SUPPORTED.items() if getattr(self, k) not in ok]
        # heads must tile d_model exactly, and rotate-half RoPE pairs dim j with j + head_dim/2
        if self.d_model % self.n_heads:
            problems.append(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        elif self.head_dim % 2:
            problems.append(f"head_dim={self.head_dim} must be even for rotate-half RoPE")
        # GQA: every kv head must serve a whole number of query heads
        if self.n_heads % self.kv_heads:
            problems.append(f"n_heads={self.n_heads} is not divisible by "
                            f"n_kv_heads={self.kv_heads}")
        if self.padded_vocab < self.vocab_size:
            problems.append(f"embedding_size={self.embedding_size} < vocab_size={self.vocab_size}")
        # the mask id is written into every canvas and EOS ends every completion: both must be rows
        # of wte and columns of the logits
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
        # unknown keys (model_type, architectures, auto_map, torch_dtype, ...) are not ours to read,
        # but save_pretrained writes them back so the official remote-code loader still works
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
        # the mean of squares over C = 4096 channels in fp32: bf16 keeps only 8 bits of mantissa
        x32 = x.float()  # (..., C)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., C)
        # cast back first, then scale: multiplying in fp32 would round differently from LLaDA
        return x32.to(x.dtype) * self.weight  # (..., C): the multiply runs in the input dtype


def rope_tables(seq_len, head_dim, theta, device):
    """cos/sin tables (T, head_dim) in fp32 for positions 0..T-1 (non-interleaved 'rotate-half').
    inv_freq[j] = theta^(-2j/head_dim); the table is cat(freqs, freqs), docs/llada.md §3."""
    # one frequency per pair of dims, from 1 (j = 0) down to ~1/theta: hd/2 = 64 of them for LLaDA
    inv_freq = 1.0 / theta ** (
        torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    # positions in fp32: bf16 cannot represent every integer above 256, let alone pos * inv_freq
    freqs = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32),
                        inv_freq)  # (T, hd/2)
    # duplicated, not interleaved: dims j and j + hd/2 share a frequency (NeoX/HF-Llama convention)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, hd)
    return emb.cos(), emb.sin()


def apply_rope(x, cos, sin, full_precision=True):
    """Rotate (B, nh, T, hd) by the (T, hd) tables: in fp32, cast back
    (LLaDA: rope_full_precision), or in x's dtype, tables cast to it (Dream, as Qwen2 does)."""
    # fp32 as in LLaDA (rope_full_precision=true, docs/llada.md §3): same rounding, same logits
    x32 = x.float() if full_precision else x  # (B, nh, T, hd)
    cos, sin = (cos, sin) if full_precision else (cos.to(x.dtype), sin.to(x.dtype))
    # half-split: checkpoint q/k rows are already in this order, no permutation (docs/llada.md §2)
    x1, x2 = x32.chunk(2, dim=-1)  # (B, nh, T, hd/2) each: pair j with j + hd/2
    rotated = torch.cat((-x2, x1), dim=-1)  # (B, nh, T, hd): rotate_half
    # (T, hd) tables broadcast over batch and heads: pair (j, j + hd/2) turns by pos * inv_freq[j]
    return (x32 * cos + rotated * sin).to(x.dtype)  # (B, nh, T, hd)


class Block(nn.Module):
    """One LLaDA 'llama' block. Module names are the checkpoint's names (BLOCK_LINEARS)."""

    def __init__(self, config: LLaDAConfig):
        super().__init__()
        C, hd = config.d_model, config.head_dim
        self.n_heads, self.n_kv_heads = config.n_heads, config.kv_heads
        self.rope_full_precision = config.rope_full_precision
        # attention: separate q/k/v/o without QK-norm; LLaDA has no bias anywhere (include_bias
        # false), Dream (Qwen2) has one on q/k/v only (include_qkv_bias). Weights are stored
        # [out, in] as nn.Linear expects, so the official tensors drop straight in
        self.attn_norm = RMSNorm(C, config.rms_norm_eps)
        qkv_bias = bool(config.include_qkv_bias)
        self.q_proj = nn.Linear(C, config.n_heads * hd, bias=qkv_bias)
        self.k_proj = nn.Linear(C, self.n_kv_heads * hd, bias=qkv_bias)
        self.v_proj = nn.Linear(C, self.n_kv_heads * hd, bias=qkv_bias)
        self.attn_out = nn.Linear(config.n_heads * hd, C, bias=False)
        # the gated MLP, C -> hidden_size (12288) -> C. Not OLMo's "swiglu" activation (one fused
        # matrix split in two): here gate and up are separate matrices, and the gate is ff_proj
        self.ff_norm = RMSNorm(C, config.rms_norm_eps)
        self.ff_proj = nn.Linear(C, config.hidden_size, bias=False)  # gate: goes through SiLU
        self.up_proj = nn.Linear(C, config.hidden_size, bias=False)  # multiplied in
        self.ff_out = nn.Linear(config.hidden_size, C, bias=False)   # down projection

    def forward(self, x, cos, sin, attn_mask, past=None, start=0, return_kv=False):
        """x (B, T, C) -> x (B, T, C), or with return_kv (x, (k, v)), k/v (B, nkv, T, hd) post-RoPE
        for a KV cache. past: cached (k, v) of a whole canvas (B, nkv, L, hd); x is then canvas
        columns [start, start + T), whose fresh keys/values replace the cached ones there."""
        B, T, C = x.shape
        # pre-norm: only the branch input is normalised, the residual stream x itself never is
        a = self.attn_norm(x)  # (B, T, C)
        # project, split C into heads, and make heads a batch dim for SDPA
        q = self.q_proj(a).view(B, T, self.n_heads, -1).transpose(1, 2)     # (B, nh, T, hd)
        k = self.k_proj(a).view(B, T, self.n_kv_heads, -1).transpose(1, 2)  # (B, nkv, T, hd)
        v = self.v_proj(a).view(B, T, self.n_kv_heads, -1).transpose(1, 2)  # (B, nkv, T, hd)
        q, k = (apply_rope(t, cos, sin, self.rope_full_precision)
                for t in (q, k))  # (B, nh|nkv, T, hd)
        # the cache stores keys after RoPE: positions are absolute, so cached keys stay valid
        fresh = (k, v)
        # with a cache, this call's T queries attend all L canvas keys (L = T without past): cached
        # columns left and right of the window, fresh ones inside it
        if past is not None:
            pk, pv = past
            k = torch.cat([pk[:, :, :start], k, pk[:, :, start + T:]], dim=2)  # (B, nkv, L, hd)
            v = torch.cat([pv[:, :, :start], v, pv[:, :, start + T:]], dim=2)  # (B, nkv, L, hd)
        if self.n_kv_heads != self.n_heads:  # grouped-query attention: share each kv head
            k = k.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1)  # (B, nh, L, hd)
            v = v.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1)  # (B, nh, L, hd)
        # bidirectional: no causal mask, only the optional key-padding mask; scale 1/sqrt(hd)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                           is_causal=False)  # (B, nh, T, hd)
        # heads -> channels, output projection, residual add (stream stays bf16, docs/llada.md §3)
        x = x + self.attn_out(y.transpose(1, 2).reshape(B, T, -1))  # (B, T, C)
        m = self.ff_norm(x)  # (B, T, C)
        # SwiGLU, LLaDA's names: ff_proj is the gate, up_proj the value, ff_out the down projection
        x = x + self.ff_out(F.silu(self.ff_proj(m)) * self.up_proj(m))  # (B, T, C)
        # only the window's own k/v go back; sample.py builds its cache from a full-canvas pass
        return (x, fresh) if return_kv else x


class LLaDA(nn.Module):

    def __init__(self, config: LLaDAConfig):
        super().__init__()
        self.config = config.validate()
        self.gradient_checkpointing = False  # set True to recompute each block in backward
        # rows of wte and the LM head; LLaDA-8B has no padding beyond the vocabulary (126464)
        V = config.padded_vocab
        # The ModuleDict `transformer` makes our state-dict keys the official ones minus "model."
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(V, config.d_model),
            blocks=nn.ModuleList([Block(config) for _ in range(config.n_layers)]),
            ln_f=RMSNorm(config.d_model, config.rms_norm_eps),
            ff_out=nn.Linear(config.d_model, V, bias=False),  # the LM head, NOT tied to wte
        ))
        # checkpoint.from_pretrained builds on meta and puts the stored tensors in place: skip init
        # (meta tensors hold no data to initialise; the real values arrive from the shards)
        if not any(p.is_meta for p in self.parameters()):
            for name, p in self.named_parameters():
                # plain normal init of matrices (norm weights stay ones); tiny random models only
                if p.dim() == 2:
                    nn.init.normal_(p, mean=0.0, std=config.init_std)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def forward(self, input_ids, attention_mask=None, past_kv=None, start=0, return_kv=False,
                logits_at=None):
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
        equals columns [start, start + T) of a full forward (tested).

        logits_at (B, K) long: only these columns of each row go through the final norm and the
        head, -> (B, K, V) (HF's logits_to_keep, per row): a likelihood that reads one column per
        row (methods/justgrpo.py) skips the (B, T, V) logits of the others."""
        B, T = input_ids.shape
        # no sqrt(d) scaling (input_emb_norm false), no position table: RoPE alone adds positions
        x = self.transformer.wte(input_ids)  # (B, T, C)
        # RoPE tables for absolute positions start..start+T-1 of the (possibly left-padded) canvas,
        # as LLaDA does; computed per call (cheap), so sequences beyond max_sequence_length work.
        # Built as (start + T, hd) for positions 0..start+T-1, then the window's rows are kept.
        cos, sin = rope_tables(start + T, self.config.head_dim, self.config.rope_theta,
                               input_ids.device)
        cos, sin = cos[start:], sin[start:]  # (T, hd)
        # Key-padding mask as in LLaDA's Oct-2025 file (docs/llada.md §1): padded keys are hidden,
        # pad queries still attend every real key. An all-ones mask is dropped, so SDPA can take its
        # fast unmasked path (the .all() check costs one GPU -> CPU sync when a mask is passed).
        attn_mask = None
        if attention_mask is not None and not bool(attention_mask.all()):
            # broadcast over heads and queries; a bool mask means True = may attend
            attn_mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, L)
        # a cached window's column `start` is read from column start - 1, which the window lacks
        if self.config.logit_shift and past_kv is not None:
            raise ValueError("a KV-cache window cannot be read with shifted logits (Dream): "
                             f"{SHIFT_NO_CACHE}")
        kv = []  # with return_kv: each block's fresh (k, v)
        for i, block in enumerate(self.transformer.blocks):
            # layer i gets its own cached (k, v). If the canvas changed since the cache was made,
            # the cached columns are stale: the cache's approximation (sample.py decides when)
            args = (x, cos, sin, attn_mask, None if past_kv is None else past_kv[i], start,
                    return_kv)
            # Recompute in backward only when building a graph; the no-grad rollout, old and ref
            # passes gain nothing. use_reentrant=False: the reentrant variant returns no gradients
            # when no input requires grad, as for block 0 under LoRA (its input is the frozen wte's)
            if self.gradient_checkpointing and torch.is_grad_enabled():
                out = checkpoint(block, *args, use_reentrant=False)
            else:
                out = block(*args)
            if return_kv:
                out, fresh = out
                kv.append(fresh)
            x = out  # (B, T, C)
        if self.config.logit_shift:
            # Dream: token i is predicted at position i - 1; column 0 reads itself, as Dream's
            # generation does. Shifted here, once, on (B, T, C) before the head: every caller reads
            # column i for token i
            x = torch.cat([x[:, :1], x[:, :-1]], dim=1)  # (B, T, C)
        if logits_at is not None:  # the requested columns only, (B, K, C)
            x = x.gather(1, logits_at[..., None].expand(-1, -1, x.shape[-1]))
        # final RMSNorm and the untied head. Raw logits in the weights' dtype (bf16 for the 8B); the
        # sampler and logprob.py cast their slice to fp32 themselves. Position i predicts token i
        logits = self.transformer.ff_out(self.transformer.ln_f(x))  # (B, T, V), or (B, K, V)
        return (logits, kv) if return_kv else logits


def compile_blocks(model):
    """torch.compile every transformer block in place (nn.Module.compile: the module tree and the
    state-dict keys stay as they are). Fuses each block's elementwise work (fp32 RMSNorm and RoPE
    casts, SiLU·up, residual adds), which in eager mode is ~35 % of the CUDA time of an 8B
    forward + backward on an H100 (torch.profiler): 43 % -> 57 % MFU (README, Performance).
    The first passes compile. Call it after add_lora / 4-bit swaps."""
    # per block, not the whole model: LLaDA.forward's Python loop (cache, checkpointing) stays eager
    for block in model.transformer.blocks:
        block.compile()
    return model


# -----------------------------------------------------------------------------

if __name__ == "__main__":
    # a random tiny LLaDA and one forward pass: the shapes, nothing else (the tiny model on disk,
    # with its tokenizer and the official layout, is written by `python -m modelio.checkpoint`)
    parser = argparse.ArgumentParser(
        description="build a random tiny LLaDA and run one forward pass")
    parser.add_argument("--seed", type=int, default=0, help="random init seed")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    config = LLaDAConfig(**TINY_CONFIG, **TINY_IDS)
    model = LLaDA(config).eval()
    ids = torch.randint(0, config.vocab_size, (2, 10))  # (B, T): two sequences of 10 random tokens
    ids[:, 5:] = config.mask_token_id  # second half masked: every position is predicted at once
    with torch.no_grad():
        logits = model(ids)  # (B, T, V)
    print(f"tiny LLaDA: {model.num_params():,} parameters, input {tuple(ids.shape)} -> logits "
          f"{tuple(logits.shape)}")
