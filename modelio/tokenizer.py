"""
The tokenizer side: the special tokens, the chat template, prompt ids, and a tiny byte-level stand-in.

LLaDA-8B-Instruct ships a plain Hugging Face fast tokenizer (docs/llada.md §4). The algorithm needs a
handful of its special tokens: the mask token, EOS (also the pad token and d1's "end of completion"), the
end-of-turn token, and BOS, which only the chat template inserts. Their ids are read from the tokenizer
and config.json once (special_ids), never typed in; another family names its own (Family.tokens).

The tiny byte-level tokenizer (make_tiny_tokenizer) has LLaDA's special tokens in LLaDA's order and its
chat template (or a family's own: Family.tiny_tokenizer), so the tests render prompts as for the 8B.

    from modelio.tokenizer import load_tokenizer, special_ids, prompt_ids
    tok = load_tokenizer("/path/to/LLaDA-8B-Instruct")
    ids = special_ids(tok, model.config)          # mask / eos / eot / bos / pad
    prompt = prompt_ids(tok, "What is 2+3?")      # one user turn + the assistant header
"""

import json
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from modelio.families import CONFIG_FILE, family_of, family_of_config

# LLaDA's special tokens as strings; their ids are looked up in the tokenizer / config, never typed in.
BOS_TOKEN = "<|startoftext|>"
EOS_TOKEN = "<|endoftext|>"                # also the pad token, and d1's "end of completion"
MASK_TOKEN = "<|mdm_mask|>"
START_HEADER_TOKEN = "<|start_header_id|>"
END_HEADER_TOKEN = "<|end_header_id|>"
EOT_TOKEN = "<|eot_id|>"                   # end of turn
# Llama-3 style chat template with trimmed content, as LLaDA-8B-Instruct renders it (docs/d1.md §1).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
# the tiny tokenizer's special tokens after the 256 bytes, in LLaDA's order -> ids 256..261 (262 tokens)
LLADA_SPECIALS = (BOS_TOKEN, EOS_TOKEN, MASK_TOKEN, START_HEADER_TOKEN, END_HEADER_TOKEN, EOT_TOKEN)
BYTE_VOCAB = 256  # the tiny tokenizer: one id per byte value, the special tokens after them
# d1's format tags, one token each in the testbed's tokenizer (make_tiny_tokenizer(tags=True)): a real BPE
# vocabulary writes each in a few tokens, the byte tokenizer in 8 to 12, which would make the tags most of a
# short completion
D1_TAGS = ("<reasoning>", "</reasoning>", "<answer>", "</answer>")

# -----------------------------------------------------------------------------
# The real tokenizer and the ids the algorithm needs


@dataclass
class SpecialIds:
    mask: int   # <|mdm_mask|>, from config.json (mask_token_id)
    eos: int    # <|endoftext|>, from config.json (eos_token_id); also the pad token
    eot: int    # <|eot_id|>, from the tokenizer
    bos: int    # <|startoftext|>, from the tokenizer
    pad: int


# the vocabulary in one of the forms transformers reads: a fast tokenizer's tokenizer.json (LLaDA's, the tiny
# models'), a byte-level BPE pair (vocab.json + merges.txt), a sentencepiece model
VOCAB_FORMS = (("tokenizer.json",), ("vocab.json", "merges.txt"), ("tokenizer.model",))
# a tokenizer's JSON files, each a JSON object where present. Not special_tokens_map.json: LLaDA-8B-Base's is
# broken, and read around (_without_broken_special_tokens_map)
TOKENIZER_JSON = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "added_tokens.json")


def check_tokenizer_files(path):
    """The tokenizer files of model directory `path` are there and parse -> None, else one ValueError
    (FileNotFoundError: no vocabulary) naming the file. transformers' own failure is a traceback that names
    neither ("Couldn't instantiate the backend tokenizer", a bare JSONDecodeError) and came after the model
    had loaded: the entry scripts run this up front (ops/checks.check_model_dir), load_tokenizer when
    transformers fails. An 8B's tokenizer.json (10 MB) takes ~1 s on a 2-core VM, 3/4 of it the parser's."""
    path = Path(path)
    if not any(all((path / f).is_file() for f in form) for form in VOCAB_FORMS):
        raise FileNotFoundError(f"no tokenizer in {path}: tokenizer.json is missing (nor vocab.json + merges.txt, "
                                f"nor tokenizer.model); copy the model's tokenizer files beside its weights")
    for f in (path / name for name in TOKENIZER_JSON):
        try:
            if f.is_file() and not isinstance(json.loads(f.read_text()), dict):
                raise ValueError(f"{f} is not a JSON object")
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{f} is not valid JSON ({e}); copy it again") from None
    if (path / "tokenizer.json").is_file():
        from tokenizers import Tokenizer  # the Rust parser transformers uses: JSON of another schema fails here
        try:
            Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as e:  # tokenizers raises a bare Exception, its message one line (where the schema breaks)
            raise ValueError(f"{path / 'tokenizer.json'} is JSON but not a tokenizer ({e})") from None


def load_tokenizer(path):
    """The tokenizer stored beside the weights (LLaDA's is a plain fast tokenizer: no remote code).
    Padding is on the left, as every batched LLaDA/d1 generation uses."""
    try:
        tok = _read_tokenizer(path)
    except Exception:
        # transformers' failure names neither file nor directory: a missing or broken file is said in one line
        # (checked only now, so a good tokenizer is parsed once: an 8B's tokenizer.json takes ~1 s here)
        try:
            check_tokenizer_files(path)
        except (ValueError, FileNotFoundError) as e:
            raise e from None
        raise
    # The canvas of masks is appended on the right, so every row's prompt must end in the same
    # column. RoPE positions then start later for short prompts, as in LLaDA's batched sampler (docs/llada.md §1).
    tok.padding_side = "left"
    return tok


def _read_tokenizer(path):
    """transformers' tokenizer classes on the directory's files, quietly, never running remote code."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging
    # config.json's model_type "llada" is unknown to transformers, which only matters for models:
    # silence its warning while the tokenizer loads; never run remote code for a tokenizer.
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    # local_files_only: a mistyped directory must fail, not fetch a Hub repo of the same name
    try:
        with warnings.catch_warnings(), tempfile.TemporaryDirectory() as clean:
            warnings.simplefilter("ignore", FutureWarning)  # transformers' notes on a config.json it has no class for
            path = _without_broken_special_tokens_map(path, clean)
            reader = _remote_code_reader(path)
            if reader is not None:
                return reader(path)
            return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
    finally:
        hf_logging.set_verbosity(verbosity)


def _without_broken_special_tokens_map(path, clean):
    """LLaDA-8B-Base's special_tokens_map.json is not valid JSON (a comma is missing after "<|mdm_mask|>"), and
    transformers refuses the whole tokenizer for it. tokenizer_config.json names the same special tokens, so
    the tokenizer is read from a copy of its files without that one (said once on stderr) -> the path to read."""
    stm = Path(path) / "special_tokens_map.json"
    try:
        if stm.is_file():
            json.loads(stm.read_text())
        return path
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        print(f"note: {stm} is not valid JSON ({e}); the special tokens are read from tokenizer_config.json",
              file=sys.stderr)
    for f in Path(path).iterdir():
        if f.is_file() and f.name != stm.name and not f.name.endswith((".safetensors", ".bin")):
            shutil.copyfile(f, Path(clean) / f.name)
    return clean


def _remote_code_reader(path):
    """None, unless tokenizer_config.json sends AutoTokenizer to remote code (its auto_map), which we never
    run: then the model family's own reader of those files (Family.read_tokenizer), found by config.json."""
    cfg = Path(path) / "tokenizer_config.json"
    if not (cfg.is_file() and "AutoTokenizer" in json.loads(cfg.read_text()).get("auto_map", {})):
        return None
    config = Path(path) / CONFIG_FILE
    family = family_of(json.loads(config.read_text())) if config.is_file() else None
    if family is None or family.read_tokenizer is None:
        raise ValueError(f"{cfg} sends AutoTokenizer to remote code, which nano-d1 never runs, and no model "
                         f"family here reads it (config.json names the family)")
    return family.read_tokenizer


def special_ids(tokenizer, config):
    """The token ids the algorithm needs, read once from config and tokenizer and cross-checked; the
    token strings are the model family's (modelio/families.py)."""
    family = family_of_config(config)
    ids = {role: tokenizer.convert_tokens_to_ids(t) for role, t in family.tokens.items()}
    # a tokenizer from another model family would map these strings to unk (or None)
    unknown = [family.tokens[r] for r, i in ids.items() if i is None or i == tokenizer.unk_token_id]
    if unknown:
        raise ValueError(f"tokenizer lacks {family.name}'s special tokens {unknown}")
    # config.json is the authority for mask/eos (the sampler and estimators read them from there);
    # a mismatch means tokenizer and weights come from different places
    if ids["mask"] != config.mask_token_id or ids["eos"] != config.eos_token_id:
        raise ValueError(f"tokenizer ids {ids} disagree with config mask_token_id="
                         f"{config.mask_token_id}, eos_token_id={config.eos_token_id}")
    # the tokenizer's own pad token if it declares one; LLaDA's is EOS either way
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else config.eos_token_id
    return SpecialIds(mask=config.mask_token_id, eos=config.eos_token_id, eot=ids["eot"], bos=ids["bos"], pad=pad)


def prompt_ids(tokenizer, user_text, prefill="", max_length=None):
    """Token ids (list[int]) of one user turn through the model's chat template, with the assistant
    header, plus `prefill` (d1's eval: eval_prefill(task)). Every caller builds its prompt here:
    grpo.py (RL, max_length=--max-prompt-length), eval.py, sft.py and the sample.py / logprob.py demos.
    With max_length, only the last max_length ids are kept (d1's RL left cut)."""
    # one user turn. LLaDA's template adds BOS itself and trims the message (docs/d1.md §1), exactly like TRL's
    # maybe_apply_chat_template in d1's RL and eval.py's create_prompt
    messages = [{"role": "user", "content": user_text}]
    # tokenize=False: the text is what d1 tokenizes; add_generation_prompt opens the assistant turn
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    text += prefill  # the prefill is appended AFTER the template, so it is never trimmed
    # add_special_tokens=False: the rendered text already holds BOS (a tokenizer that adds its own
    # would double it)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    # keep the LAST max_length ids, as d1's RL trainer does (its `prompt_ids[:, -max_prompt_length:]`,
    # 200 in d1, §2.4): this can cut BOS and the instructions of a long prompt
    return ids[-max_length:] if max_length else ids


# -----------------------------------------------------------------------------
# The tiny byte-level tokenizer


def _bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map used by byte-level BPE (byte b -> chr)."""
    # 188 printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ'); space and control bytes are not among them,
    # so no vocabulary string ever has to hold a space or a control character
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    # bytes that are printable map to themselves; the rest are shifted past BYTE_VOCAB, in order
    chars, extra = {}, 0
    for b in range(BYTE_VOCAB):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(BYTE_VOCAB + extra)
            extra += 1
    return chars


def make_tiny_tokenizer(tags=False, specials=LLADA_SPECIALS, bos=BOS_TOKEN, eos=EOS_TOKEN,
                        chat_template=CHAT_TEMPLATE):
    """A byte-level tokenizer: id b is byte b (so '7' is 55), then the special tokens in the order of
    `specials` (LLaDA's: BOS, EOS, mask, header start/end, end of turn -> ids 256..261), the BOS and EOS of
    `specials` first, and the chat template (LLaDA's); another family's are Family.tiny_tokenizer (bos None:
    no BOS token). tags=True adds d1's four format tags as ordinary tokens (LLaDA's: ids 262..265; decoding
    keeps them). Every string round-trips. Built with the `tokenizers` package that transformers installs."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {ch: b for b, ch in _bytes_to_unicode().items()}  # 256 entries, id == byte value
    # BPE with no merges over a byte-level alphabet: exactly one token per UTF-8 byte
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    # no GPT-2 regex pre-split and no added leading space: "A B" is exactly the three bytes A, space, B
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    # decoding maps the characters back to bytes and the bytes to UTF-8 text
    core.decoder = decoders.ByteLevel()
    rest = [t for t in specials if t not in (bos, eos)]
    # BOS and EOS are the tokenizer's own bos/eos (EOS pads, left side, as LLaDA/d1 batch prompts)
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token=bos, eos_token=eos, pad_token=eos,
                                  additional_special_tokens=rest, padding_side="left")
    tok.add_special_tokens({"additional_special_tokens": rest})  # ids 256.. in list order
    if tags:
        # not special: batch_decode(skip_special_tokens=True) must keep them, the rewards read them
        tok.add_tokens(list(D1_TAGS))
    # saved with the tokenizer (transformers 5 writes chat_template.jinja), so loads render the same
    tok.chat_template = chat_template
    return tok
