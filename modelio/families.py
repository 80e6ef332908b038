"""
The model families nano-d1 runs, each as the files on disk say it: LLaDA and Dream.

model.py has one transformer with LLaDA's field and module names. A family is how one published
checkpoint maps onto it: which config.json keys mean which field, which values it fixes, how the
checkpoint's tensor keys are named, and which token strings are its mask, EOS, end of turn and BOS.
Everything else (the sampler, the estimators, SFT, every objective) never asks which family it runs, but for
one question its callers put to it: are the pads hidden (Family.hide_pads: pad_mask, ops/trainers.freeze_pad_row).

    LLaDA   GSAI-ML/LLaDA-8B-Instruct, LLaDA-8B-Base, LLaDA-1.5: config.json is LLaDAConfig's own fields
            (model_type "llada"), keys "model." + ours; docs/llada.md.
    Dream   Dream-org/Dream-v0-Instruct-7B (arXiv 2508.15487), and models built on it (DiffuCoder):
            Qwen2 names (model_type "Dream"), keys model.layers.N.self_attn.q_proj... and lm_head;
            q/k/v biases, grouped-query attention, RoPE in the activations' dtype and shifted logits
            (model.py). Read from Dream's configuration_dream.py and modeling_dream.py (the hub's
            remote code); docs/model.md, "The families".

Adding a family: one more Family here (its config translation, key names and tokens), a tiny model
for the tests (modelio/checkpoint.make_tiny(family=...)), and a check of its forward against an independent
implementation (tests/test_dream.py is the pattern).

    from modelio.families import family_of, read_config
    raw, fam, config = read_config("/path/to/model")    # config.json -> its dict, Family and LLaDAConfig, checked:
                                                        # a missing or mistyped field, a model_type we do not run
    official = fam.key_out("transformer.blocks.0.q_proj.weight")   # Dream: model.layers.0.self_attn.q_proj.weight
"""
import json
import math
import re
import typing
from dataclasses import dataclass
from pathlib import Path

from model import NOT_IN_JSON, LLaDAConfig

CONFIG_FILE = "config.json"

# -----------------------------------------------------------------------------
# config.json's fields: present where the architecture needs them, and of the right JSON type

# LLaDAConfig's fields with no default that fits every checkpoint: the shape, the RoPE base (a wrong one
# computes garbage and no tensor shape shows it) and the mask and EOS ids. LLaDAConfig's defaults are
# LLaDA-8B's values, not the official code's (OLMo's 12 layers, RoPE base 1e4): filling a missing n_layers with
# 32 turned one absent key into 252 "missing keys". Every real config.json (LLaDA's, Dream's) writes them all
LLADA_REQUIRED = ("d_model", "n_heads", "n_layers", "vocab_size", "rope_theta", "mask_token_id", "eos_token_id")
# fields that count something, so 0 or less is never a model (n_heads 0 was a ZeroDivisionError)
POSITIVE = ("d_model", "n_heads", "n_kv_heads", "n_layers", "mlp_hidden_size", "mlp_ratio", "vocab_size",
            "embedding_size", "max_sequence_length", "rope_theta")
FIELD_TYPES = typing.get_type_hints(LLaDAConfig)  # field -> int, float | None, bool, str, ...
# no pad token is a pad token of None: the tokenizer's pad, else EOS, pads (modelio/tokenizer.special_ids)
NULLABLE = ("pad_token_id",)
TYPE_NAMES = {int: "an integer", float: "a finite number", bool: "true or false", str: "a string"}
POSITIVE_NAMES = {int: "a positive integer", float: "a positive finite number"}


def _fits(value, kind):
    """Whether a parsed JSON value is of an int / float / bool / str field's kind."""
    if kind is int:  # JSON's true parses as Python's True, an int too, but is no count
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:  # 10000 is a fine RoPE base; NaN and Infinity parse (json's extension) but are no value
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, kind)


def check_fields(raw, names, required, model, example):
    """Every config.json key of `names` (its key -> LLaDAConfig field) in `raw` fits the field's type, and
    every key in `required` is there -> None, else one ValueError naming each key that does not.
    `model`, `example`: a real model's name and config.json, whose value a missing key's message names."""
    problems = [f"{json.dumps(k)} is missing ({model} has {json.dumps(example[k])})" for k in required if k not in raw]
    for key, name in names.items():
        if key not in raw:
            continue
        value, kinds = raw[key], typing.get_args(FIELD_TYPES[name]) or (FIELD_TYPES[name],)
        kinds += (type(None),) if name in NULLABLE else ()
        if value is None and type(None) in kinds:
            continue  # "n_kv_heads": null is the official "as many as n_heads"
        kind = next(k for k in kinds if k is not type(None))
        if not _fits(value, kind) or (name in POSITIVE and value <= 0):
            what = POSITIVE_NAMES[kind] if name in POSITIVE else TYPE_NAMES[kind]
            null = " or null" if type(None) in kinds else ""
            problems.append(f"{json.dumps(key)} must be {what}{null}, got {json.dumps(value)}")
    if problems:
        raise ValueError("; ".join(problems))


def read_config(path):
    """config.json of the model directory `path` -> (the parsed dict, its Family, its LLaDAConfig). Every
    problem is one ValueError (FileNotFoundError when there is none) that names the file: not JSON, not an
    object, a model_type we do not run, a field missing or of the wrong type, a value we do not compute."""
    cfg_file = Path(path) / CONFIG_FILE
    if not cfg_file.is_file():
        raise FileNotFoundError(f"no {CONFIG_FILE} in {path} (expected a model directory in LLaDA's or Dream's layout)")
    try:
        raw = json.loads(cfg_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{cfg_file} is not valid JSON ({e})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{cfg_file} is not a JSON object")
    # carried, not a field, but checkpoint.verify looks it up: a list there was an "unhashable type" traceback
    if not isinstance(raw.get("torch_dtype"), (str, type(None))):
        raise ValueError(f'{cfg_file}: "torch_dtype" must be a string or null, got {json.dumps(raw["torch_dtype"])}')
    # the family by model_type; its translation checks every field before a single weight is read
    try:
        family = family_of(raw)
        return raw, family, family.config_from_json(raw)
    except (ValueError, TypeError) as e:  # TypeError: a value we did not foresee reaching the model's code
        raise ValueError(f"{cfg_file}: {e}") from None


# -----------------------------------------------------------------------------
# LLaDA: config.json holds LLaDAConfig's own fields; tensor keys are "model." + our state-dict keys

LLADA_NAMES = {name: name for name in FIELD_TYPES if name not in ("extra", *NOT_IN_JSON)}


def _llada_config_in(raw):
    """LLaDA's config.json (dict) -> LLaDAConfig: the fields checked (check_fields), then model.LLaDAConfig.from_dict.
    The MLP width is mlp_hidden_size, or mlp_ratio x d_model where only that is given (OLMo's rule), and an absent
    embedding_size is the vocabulary size; the shape check against the weights (checkpoint.verify) confirms both."""
    mlp = () if "mlp_ratio" in raw else ("mlp_hidden_size",)
    check_fields(raw, LLADA_NAMES, LLADA_REQUIRED + mlp, "LLaDA-8B", LLaDAConfig().to_dict())
    return LLaDAConfig.from_dict({**{k: None for k in ("mlp_hidden_size", "embedding_size") if k not in raw}, **raw})


def _llada_key_out(key):
    return "model." + key


def _llada_key_in(key):
    return key.removeprefix("model.")


# -----------------------------------------------------------------------------
# Dream: Qwen2's names

# Dream config.json key -> LLaDAConfig field, with configuration_dream.py's default for an absent key (those of
# DREAM_REQUIRED are never taken: see LLADA_REQUIRED)
DREAM_FIELDS = {
    "hidden_size": ("d_model", 4096), "num_attention_heads": ("n_heads", 32),
    "num_key_value_heads": ("n_kv_heads", 32), "num_hidden_layers": ("n_layers", 32),
    "intermediate_size": ("mlp_hidden_size", 22016), "vocab_size": ("vocab_size", 151936),
    "rope_theta": ("rope_theta", 10000.0), "rms_norm_eps": ("rms_norm_eps", 1e-6),
    "max_position_embeddings": ("max_sequence_length", 32768), "initializer_range": ("init_std", 0.02),
    "mask_token_id": ("mask_token_id", 151666), "pad_token_id": ("pad_token_id", 151643),
    "eos_token_id": ("eos_token_id", None),  # PretrainedConfig's; Dream-7B's config.json says 151643
}
# the keys a Dream config.json must have (LLADA_REQUIRED's reasons; a missing eos_token_id has its own message)
DREAM_REQUIRED = ("hidden_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers",
                  "intermediate_size", "vocab_size", "rope_theta", "mask_token_id")
# keys whose value is the only one this transformer computes (modeling_dream.py); any other is refused
DREAM_FIXED = {"hidden_act": "silu", "tie_word_embeddings": False, "rope_scaling": None, "use_sliding_window": False,
               "attention_dropout": 0.0}
# what Dream's modeling file computes that LLaDA's does not, as LLaDAConfig fields (model.py)
DREAM_ARCH = dict(include_qkv_bias=True, rope_full_precision=False, logit_shift=True)
DREAM_MODEL_TYPE = "Dream"
# the tiny Dream: Dream-7B's fixed and carried config keys (DreamModel, the model_type, no sliding window),
# its architecture (DREAM_ARCH), grouped-query attention (4 query heads share one key/value head; Dream-7B:
# 7 share each of 4), and its RoPE base and eps
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
    """Dream's key -> ours; a key Dream's layout does not have comes back unchanged (and is then
    reported as unexpected by the strict loader, under its own name)."""
    if (m := _DREAM_BLOCK.match(key)) and m[2] in DREAM_BLOCK_IN:
        return f"transformer.blocks.{m[1]}.{DREAM_BLOCK_IN[m[2]]}.{m[3]}"
    for ours, theirs in DREAM_TOP.items():
        if key.startswith(theirs):
            return ours + key[len(theirs):]
    return key


def _dream_config_in(raw):
    """Dream's config.json (dict) -> LLaDAConfig. Every fixed key must hold the value modeling_dream.py
    computes; the mapped keys become fields; everything else (architectures, auto_map, bos_token_id,
    sliding_window, torch_dtype, ...) is carried in `extra` and written back unchanged."""
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


# -----------------------------------------------------------------------------
# The families


@dataclass(frozen=True)
class Family:
    name: str
    model_type: str
    config_from_json: object  # dict -> LLaDAConfig (validated)
    config_to_json: object    # LLaDAConfig -> dict
    key_out: object           # our state-dict key -> the checkpoint's
    key_in: object            # the checkpoint's key -> ours
    tokens: dict              # role (mask, eos, eot, bos) -> the token string; ids come from the tokenizer
    tiny: dict                # the tiny model's architecture fields beyond model.TINY_CONFIG (checkpoint.make_tiny)
    tiny_extras: dict         # its config.json keys beyond the fields (a bos_token_id is set from its tokenizer)
    # its own code hides left pads from attention in generation and eval, and never trains the pad row
    # (Dream: a key-padding mask and nn.Embedding's padding_idx); False: pads are attended and trained
    # as any token (LLaDA, as d1: no attention mask anywhere). See pad_mask and ops/trainers.freeze_pad_row
    hide_pads: bool = False
    # one line a save prints where it copied the base's remote code: which transformers versions run it
    remote_code_note: str = ""


# The tiny LLaDA's config.json looks like LLaDA-8B's own, without its auto_map: the tiny model has no remote
# code to ship (nano-d1 has none, and a stand-in would be a second model to keep right), and an auto_map naming
# absent modules sends transformers to a missing file instead of saying "unknown model type"
LLADA = Family("llada", "llada", _llada_config_in, LLaDAConfig.to_dict, _llada_key_out, _llada_key_in,
               tokens=dict(mask="<|mdm_mask|>", eos="<|endoftext|>", eot="<|eot_id|>", bos="<|startoftext|>"),
               tiny={}, tiny_extras={"model_type": "llada", "architectures": ["LLaDAModelLM"], "use_cache": False})
# Dream's remote code (modeling_dream.py, generation_utils.py; its README pins transformers 4.46.2) imports on
# transformers 4.x. On 5.x it does not import unchanged, and once it does its rotary tables stay uninitialised
# until reset_rope_parameters() is called (the run, #50; not rerun here: the code is not in this repo).
# A save names this in one line rather than patching the copied code (docs/model.md, "A save and transformers")
DREAM_REMOTE_CODE = ("note: this Dream save carries Dream's remote code byte for byte; AutoModel with "
                     "trust_remote_code loads it on transformers 4.x (Dream pins 4.46.2), not on 5.x unpatched "
                     "(docs/model.md, 'A save and transformers'); nano-d1 and transformers' Qwen2 classes read it on both")
# Qwen2's tokens; Dream's template adds no BOS, and its config's bos_token_id is <|endoftext|>'s
DREAM = Family("dream", DREAM_MODEL_TYPE, _dream_config_in, _dream_config_out, _dream_key_out, _dream_key_in,
               tokens=dict(mask="<|mask|>", eos="<|endoftext|>", eot="<|im_end|>", bos="<|endoftext|>"),
               tiny=TINY_DREAM, tiny_extras=DREAM_EXTRAS, hide_pads=True, remote_code_note=DREAM_REMOTE_CODE)
FAMILIES = {f.model_type: f for f in (LLADA, DREAM)}  # by config.json's model_type
FAMILY_NAMES = {f.name: f for f in (LLADA, DREAM)}    # by our name (--family)


def family_of(raw):
    """The family of a parsed config.json, by its model_type (absent: LLaDA, as our own older saves
    wrote it); another model_type is refused in one line."""
    model_type = raw.get("model_type", LLADA.model_type)
    if not isinstance(model_type, str) or model_type not in FAMILIES:  # a list would be unhashable: a traceback
        raise ValueError(f"model_type {model_type!r} is not a family nano-d1 runs (supported: "
                         f"{', '.join(map(repr, FAMILIES))}; modelio/families.py says how to add one)")
    return FAMILIES[model_type]


def family_of_config(config):
    """The family of a loaded LLaDAConfig (its carried model_type)."""
    return family_of(config.extra)


def hides_pads(model):
    """Whether `model`'s family hides its pads (Family.hide_pads): Dream yes, LLaDA no. A DDP wrapper is
    looked through."""
    return family_of_config(getattr(model, "module", model).config).hide_pads


def pad_mask(model, real):
    """The attention mask a forward of `model` gets for left-padded prompts whose tokens are marked by
    `real` (B, P), 1 on a row's tokens and 0 on its left pads (taskdata/data.real_tokens): `real` itself,
    on the model's device, where the family hides pads (Dream's generate and eval pass a key-padding mask),
    else None, so the forward is exactly the unmasked one (LLaDA: d1 attends its EOS pads, docs/d1.md §1)."""
    if not hides_pads(model):
        return None
    return real.to(next(model.parameters()).device)  # (B, P)


# Dream-v0-Instruct-7B's config.json values (the shapes of arXiv 2508.15487, Qwen2.5-7B's): the random-weight
# shape of lab.bench / lab.preflight / the memory plan (--shape dream-7b); no weights are needed for those
DREAM_7B = {"architectures": ["DreamModel"], "model_type": DREAM_MODEL_TYPE, "hidden_size": 3584,
            "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
            "vocab_size": 152064, "rope_theta": 1e6, "rms_norm_eps": 1e-6, "max_position_embeddings": 131072,
            "mask_token_id": 151666, "pad_token_id": 151643, "eos_token_id": 151643, "bos_token_id": 151643,
            **DREAM_FIXED, "torch_dtype": "bfloat16"}


def model_shapes():
    """The 8B-class shapes by name, as LLaDAConfig: LLaDA-8B's (LLaDAConfig's defaults) and Dream-7B's."""
    return {"llada-8b": LLaDAConfig(extra={"model_type": LLADA.model_type}),
            "dream-7b": DREAM.config_from_json(DREAM_7B)}
