"""
Dream (Dream-org/Dream-v0-Instruct-7B, arXiv 2508.15487) as a model family of nano-d1: its config.json,
tensor names, tokens, tiny model and 7B shape. Importing this module registers the family
(modelio.families.register): the field's entry points (methods.sft / grpo / eval / sampling) import it.

Dream-7B is model.py's transformer as a Qwen2.5-7B layout run bidirectionally: q/k/v biases, GQA, RoPE
in the activations' dtype and shifted logits (token i read from position i - 1, applied once in
model.forward); its left pads are hidden as keys (hide_pads) and its pad row never trains
(pad_row_frozen). Read from Dream's configuration_dream.py and modeling_dream.py (never run here);
docs/model.md, "The families: LLaDA and Dream", gives the table and what is checked.

    import methods.dream                                   # registers the family
    from modelio.checkpoint import load
    model, tok = load("/path/to/Dream-v0-Instruct-7B")     # Qwen2 names, translated

    python -m methods.dream --out-dir out/tiny-dream       # a tiny Dream in Dream's layout (CPU runs, tests)
"""
import re
from pathlib import Path

from model import LLaDAConfig
from modelio.checkpoint import make_tiny, tiny_main
from modelio.families import LLADA, Family, check_fields, register
from modelio.tokenizer import EOS_TOKEN

TINY_DIR = "out/tiny-dream"  # where `python -m methods.dream` writes the tiny Dream

# Dream config.json key -> LLaDAConfig field, with configuration_dream.py's default for an absent key
DREAM_FIELDS = {
    "hidden_size": ("d_model", 4096), "num_attention_heads": ("n_heads", 32),
    "num_key_value_heads": ("n_kv_heads", 32), "num_hidden_layers": ("n_layers", 32),
    "intermediate_size": ("mlp_hidden_size", 22016), "vocab_size": ("vocab_size", 151936),
    "rope_theta": ("rope_theta", 10000.0), "rms_norm_eps": ("rms_norm_eps", 1e-6),
    "max_position_embeddings": ("max_sequence_length", 32768), "initializer_range": ("init_std", 0.02),
    "mask_token_id": ("mask_token_id", 151666), "pad_token_id": ("pad_token_id", 151643),
    "eos_token_id": ("eos_token_id", None),  # PretrainedConfig's; Dream-7B's config.json says 151643
}
# the keys a Dream config.json must have (modelio/families.LLADA_REQUIRED's reasons)
DREAM_REQUIRED = ("hidden_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers",
                  "intermediate_size", "vocab_size", "rope_theta", "mask_token_id")
# keys whose value is the only one this transformer computes (modeling_dream.py); any other is refused
DREAM_FIXED = {"hidden_act": "silu", "tie_word_embeddings": False, "rope_scaling": None, "use_sliding_window": False,
               "attention_dropout": 0.0}
# what Dream's modeling file computes that LLaDA's does not, as model.py's generic options
DREAM_ARCH = dict(include_qkv_bias=True, rope_full_precision=False, logit_shift=True)
DREAM_MODEL_TYPE = "Dream"
# the tiny Dream: Dream-7B's fixed and carried config keys, its architecture, GQA, its RoPE base and eps
DREAM_EXTRAS = {"architectures": ["DreamModel"], "model_type": DREAM_MODEL_TYPE, "bos_token_id": None, **DREAM_FIXED,
                "sliding_window": None, "use_cache": False}
TINY_DREAM = dict(n_kv_heads=1, rope_theta=1e6, rms_norm_eps=1e-6, **DREAM_ARCH)
# our module name inside a block -> Dream's (DreamDecoderLayer: self_attn, mlp, two RMSNorms)
DREAM_BLOCK = {"q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj", "v_proj": "self_attn.v_proj",
               "attn_out": "self_attn.o_proj", "ff_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj",
               "ff_out": "mlp.down_proj", "attn_norm": "input_layernorm", "ff_norm": "post_attention_layernorm"}
DREAM_BLOCK_IN = {theirs: ours for ours, theirs in DREAM_BLOCK.items()}  # Dream's module name -> ours
DREAM_TOP = {"transformer.wte.": "model.embed_tokens.", "transformer.ln_f.": "model.norm.",
             "transformer.ff_out.": "lm_head."}  # the LM head is untied (tie_word_embeddings false)
_OURS_BLOCK = re.compile(r"transformer\.blocks\.(\d+)\.(\w+)\.(weight|bias)$")
_DREAM_BLOCK = re.compile(r"model\.layers\.(\d+)\.(\w+\.\w+|\w+)\.(weight|bias)$")


def _dream_key_out(key):
    """'transformer.blocks.3.attn_out.weight' -> 'model.layers.3.self_attn.o_proj.weight'."""
    if m := _OURS_BLOCK.match(key):
        return f"model.layers.{m[1]}.{DREAM_BLOCK[m[2]]}.{m[3]}"
    for ours, theirs in DREAM_TOP.items():
        if key.startswith(ours):
            return theirs + key[len(ours):]
    raise KeyError(f"no Dream name for {key}")


def _dream_key_in(key):
    """Dream's key -> ours; one Dream's layout does not have comes back unchanged (the strict loader names it)."""
    if (m := _DREAM_BLOCK.match(key)) and m[2] in DREAM_BLOCK_IN:
        return f"transformer.blocks.{m[1]}.{DREAM_BLOCK_IN[m[2]]}.{m[3]}"
    for ours, theirs in DREAM_TOP.items():
        if key.startswith(theirs):
            return ours + key[len(theirs):]
    return key


def _dream_config_in(raw):
    """Dream's config.json (dict) -> LLaDAConfig. Every fixed key must hold the value modeling_dream.py
    computes; the mapped keys become fields; everything else is carried in `extra`, written back unchanged."""
    wrong = [f"{k}={raw[k]!r} (supported: {v!r})" for k, v in DREAM_FIXED.items() if k in raw and raw[k] != v]
    if raw.get("eos_token_id", DREAM_FIELDS["eos_token_id"][1]) is None:
        wrong.append("eos_token_id is absent (every completion ends at EOS)")
    if wrong:
        raise ValueError("Dream config not supported by this implementation: " + "; ".join(wrong))
    check_fields(raw, {theirs: ours for theirs, (ours, _) in DREAM_FIELDS.items()}, DREAM_REQUIRED, "Dream-7B",
                 DREAM_7B)
    fields = {ours: raw.get(theirs, default) for theirs, (ours, default) in DREAM_FIELDS.items()}
    config = LLaDAConfig(**fields, embedding_size=fields["vocab_size"], **DREAM_ARCH)
    config.extra = {k: v for k, v in raw.items() if k not in DREAM_FIELDS}
    return config.validate()


def _dream_config_out(config):
    """LLaDAConfig -> Dream's config.json dict: the carried keys first, then the mapped fields."""
    return {**config.extra, **{theirs: getattr(config, ours) for theirs, (ours, _) in DREAM_FIELDS.items()}}


IM_START_TOKEN = "<|im_start|>"  # Qwen2 / Dream: a turn opens with it, <|im_end|> closes it
# Qwen2's ChatML template with its default system turn (the tiny Dream's; a real Dream directory brings its own)
QWEN2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# the tiny Dream's byte tokenizer (modelio/tokenizer.make_tiny_tokenizer), no BOS: its specials -> ids 256..259,
# in the order of 151643, 151644, 151645 and 151666 in Dream's vocabulary
TINY_TOKENIZER = dict(specials=(EOS_TOKEN, IM_START_TOKEN, "<|im_end|>", "<|mask|>"), bos=None,
                      chat_template=QWEN2_CHAT_TEMPLATE)


def read_tokenizer(path):
    """Dream's tokenizer (tokenization_dream.DreamTokenizer is Qwen2's byte-level BPE) read by transformers'
    own classes, never by running that code: tokenizer.json where there is one, else vocab.json + merges.txt."""
    from transformers import PreTrainedTokenizerFast, Qwen2Tokenizer
    cls = PreTrainedTokenizerFast if (Path(path) / "tokenizer.json").is_file() else Qwen2Tokenizer
    return cls.from_pretrained(str(path), local_files_only=True)


# a save names in one line what Dream's remote code needs of transformers (docs/model.md, "A save and transformers")
DREAM_REMOTE_CODE = ("note: this Dream save carries Dream's remote code byte for byte; AutoModel with "
                     "trust_remote_code loads it on transformers 4.x (Dream pins 4.46.2), not on 5.x unpatched "
                     "(docs/model.md, 'A save and transformers'); nano-d1 and transformers' Qwen2 classes read it on both")
# Qwen2's tokens (Dream's template adds no BOS; its config's bos_token_id is <|endoftext|>'s)
DREAM = register(Family("dream", DREAM_MODEL_TYPE, _dream_config_in, _dream_config_out, _dream_key_out,
                        _dream_key_in,
                        tokens=dict(mask="<|mask|>", eos="<|endoftext|>", eot="<|im_end|>", bos="<|endoftext|>"),
                        tiny=TINY_DREAM, tiny_extras=DREAM_EXTRAS, tiny_tokenizer=TINY_TOKENIZER,
                        read_tokenizer=read_tokenizer, hide_pads=True, pad_row_frozen=True,
                        remote_code_note=DREAM_REMOTE_CODE))

# Dream-v0-Instruct-7B's config.json values: the random-weight shape of lab/'s benchmarks (--shape dream-7b)
DREAM_7B = {"architectures": ["DreamModel"], "model_type": DREAM_MODEL_TYPE, "hidden_size": 3584,
            "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
            "vocab_size": 152064, "rope_theta": 1e6, "rms_norm_eps": 1e-6, "max_position_embeddings": 131072,
            "mask_token_id": 151666, "pad_token_id": 151643, "eos_token_id": 151643, "bos_token_id": 151643,
            **DREAM_FIXED, "torch_dtype": "bfloat16"}


def model_shapes():
    """The 8B-class shapes by name, as LLaDAConfig, for lab/'s benchmarks: LLaDA-8B's (LLaDAConfig's
    defaults) and Dream-7B's."""
    return {"llada-8b": LLaDAConfig(extra={"model_type": LLADA.model_type}),
            "dream-7b": DREAM.config_from_json(DREAM_7B)}


def make_tiny_dream(path, **kw):
    """A tiny random Dream + its byte tokenizer in Dream's layout (modelio/checkpoint.make_tiny's keywords)."""
    return make_tiny(path, family=DREAM.name, **kw)


if __name__ == "__main__":
    tiny_main(DREAM.name, TINY_DIR)
