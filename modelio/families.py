"""
The model families: how a published checkpoint maps onto model.py's one transformer.

model.py has one transformer with LLaDA's field and module names. A family is how one published
checkpoint maps onto it: which config.json keys mean which field, which values it fixes, how the
checkpoint's tensor keys are named, and which token strings are its mask, EOS, end of turn and BOS.
Everything else (the sampler, the estimator, SFT, GRPO) never asks which family it runs, but for
two questions its callers put to it: are the left pads hidden (Family.hide_pads: left_pad_mask) and
is the pad row of the embedding frozen (Family.pad_row_frozen: ops/trainers.freeze_pad_row).

    LLaDA   GSAI-ML/LLaDA-8B-Instruct, LLaDA-8B-Base, LLaDA-1.5: config.json is LLaDAConfig's own fields
            (model_type "llada"), keys "model." + ours; docs/llada.md. d1's family, the only one here.

FAMILIES is the table by config.json's model_type; a family defined outside the core adds itself with
register(family) when its module is imported (docs/model.md, "The families"). Adding a family: one
Family record (its config translation, key names and tokens), registered; a tiny model for the tests
(modelio/checkpoint.make_tiny(family=its name)); and a check of its forward against an independent
implementation.

    from modelio.families import family_of, read_config
    raw, fam, config = read_config("/path/to/model")    # config.json -> its dict, Family and LLaDAConfig, checked:
                                                        # a missing or mistyped field, a model_type not registered
    official = fam.key_out("transformer.blocks.0.q_proj.weight")   # LLaDA: model.transformer.blocks.0.q_proj.weight
"""
import json
import math
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
# 32 turned one absent key into 252 "missing keys". Every real config.json writes them all
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
        raise FileNotFoundError(f"no {CONFIG_FILE} in {path} (expected a model directory in the official layout)")
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


@dataclass(frozen=True)
class Family:
    name: str                 # ours: make_tiny(family=...)
    model_type: str           # config.json's
    config_from_json: object  # dict -> LLaDAConfig (validated)
    config_to_json: object    # LLaDAConfig -> dict
    key_out: object           # our state-dict key -> the checkpoint's
    key_in: object            # the checkpoint's key -> ours
    tokens: dict              # role (mask, eos, eot, bos) -> the token string; ids come from the tokenizer
    tiny: dict                # the tiny model's architecture fields beyond model.TINY_CONFIG (checkpoint.make_tiny)
    tiny_extras: dict         # its config.json keys beyond the fields (a bos_token_id is set from its tokenizer)
    # the tiny byte tokenizer's special tokens in vocabulary order, BOS and chat template, as keywords of
    # tokenizer.make_tiny_tokenizer; None: its defaults (LLaDA's)
    tiny_tokenizer: dict = None
    # path -> tokenizer, for a directory whose tokenizer_config.json sends AutoTokenizer to remote code: the
    # family reads those files with transformers' own classes (tokenizer.load_tokenizer never runs that code)
    read_tokenizer: object = None
    # its own code hides left pads from attention in generation and eval (a key-padding mask); False: pads are
    # attended as any token (LLaDA, as d1: no attention mask anywhere). See left_pad_mask
    hide_pads: bool = False
    # its own code never trains the input embedding's pad row (nn.Embedding's padding_idx); False: every row
    # trains (LLaDA, as d1). See ops/trainers.freeze_pad_row
    pad_row_frozen: bool = False
    # one line a save prints where it copied the base's remote code: which transformers versions run it
    remote_code_note: str = ""


# The tiny LLaDA's config.json looks like LLaDA-8B's own, without its auto_map: the tiny model has no remote
# code to ship (nano-d1 has none, and a stand-in would be a second model to keep right), and an auto_map naming
# absent modules sends transformers to a missing file instead of saying "unknown model type"
LLADA = Family("llada", "llada", _llada_config_in, LLaDAConfig.to_dict, _llada_key_out, _llada_key_in,
               tokens=dict(mask="<|mdm_mask|>", eos="<|endoftext|>", eot="<|eot_id|>", bos="<|startoftext|>"),
               tiny={}, tiny_extras={"model_type": "llada", "architectures": ["LLaDAModelLM"], "use_cache": False})
FAMILIES = {}  # config.json's model_type -> Family: LLaDA here, the others as their modules register them
# where the families outside the core come from: a script of the core reads only the registered ones
OUTSIDE = ("families outside the core register from methods/ (python -m methods.sft / methods.grpo / "
           "methods.eval / methods.sampling)")


def register(family):
    """Add `family` to FAMILIES (by its model_type), so every reader of a model directory reads its layout
    -> the family. A family outside the core calls this when its module is imported."""
    FAMILIES[family.model_type] = family
    return family


register(LLADA)


def family_named(name):
    """The registered family called `name` (Family.name, e.g. make_tiny's family="llada")."""
    for family in FAMILIES.values():
        if family.name == name:
            return family
    raise ValueError(f"no model family named {name!r} is registered (registered: "
                     f"{', '.join(repr(f.name) for f in FAMILIES.values())}); {OUTSIDE}")


def family_of(raw):
    """The family of a parsed config.json, by its model_type (absent: LLaDA, as our own older saves
    wrote it); a model_type not registered is refused in one line."""
    model_type = raw.get("model_type", LLADA.model_type)
    if not isinstance(model_type, str) or model_type not in FAMILIES:  # a list would be unhashable: a traceback
        raise ValueError(f"model_type {model_type!r} is not a family nano-d1 runs here (registered: "
                         f"{', '.join(map(repr, FAMILIES))}); {OUTSIDE}")
    return FAMILIES[model_type]


def family_of_config(config):
    """The family of a loaded LLaDAConfig (its carried model_type)."""
    return family_of(config.extra)


def family_of_model(model):
    """The family of a model (a DDP wrapper is looked through)."""
    return family_of_config(getattr(model, "module", model).config)


def hides_pads(model):
    """Whether `model`'s family hides its left pads from attention (Family.hide_pads); LLaDA does not."""
    return family_of_model(model).hide_pads


def left_pad_mask(model, real):
    """The (b, P) 1/0 key mask that hides a batch's left pads, for a family that hides them
    (Family.hide_pads): `real`, 1 on a row's tokens and 0 on its left pads (taskdata/data.real_tokens),
    on the model's device. None for a family that attends them, as LLaDA in d1 (docs/d1.md §1): the
    forward is then exactly the unmasked one."""
    if not hides_pads(model):
        return None
    return real.to(next(model.parameters()).device)  # (b, P)


