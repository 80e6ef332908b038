"""
The base model's other files: what every save carries over beside the weights and config.json we write.

A model directory holds more than weights: remote code that transformers runs (configuration_llada.py,
modeling_llada.py, named by config.json's auto_map), the tokenizer, the generation config. A model trained
from it must keep them, or a tool that reads the base cannot read the fine-tune. modelio/checkpoint.py's
save_merged copies them (copy_model_files) and save_pretrained cuts config.json's auto_map to the code that
is there (local_auto_map).

    from modelio.model_files import copy_model_files
    copy_model_files("/path/to/LLaDA-8B-Instruct", "out/run")   # -> the names copied
"""
import fnmatch
import os
import shutil
from pathlib import Path

# What every save carries over from its base byte for byte, beside the weights and config.json we
# write: the remote code (configuration_llada.py, modeling_llada.py), generation_config.json, the
# tokenizer (tokenizer.json / tokenizer_config.json with the chat template, special_tokens_map.json,
# tokenizer.model, added_tokens.json, vocab.json, merges.txt) and chat_template.jinja. Top-level files,
# matched by name. A list of what to take, so everything else stays out: config.json (ours, from
# model.config, which keeps the base's own keys), the weights, a nano-d1 run's own files when the base
# is one (save_info.json, train_args.json, metrics.jsonl, STOPPED, saves/, trainer_state.pt), and the
# model card README.md and .gitattributes: a card that says "LLaDA-8B-Instruct" is false for a fine-tune.
MODEL_FILES = ("*.py", "generation_config.json", "*token*", "chat_template*", "vocab.*", "merges.txt")
# never, even where a name above matches: weights, their index, a copy or publish cut short
NOT_MODEL_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.index.json", "*.tmp")


def model_files(base_dir):
    """The files of base_dir that every save carries (MODEL_FILES less NOT_MODEL_FILES), sorted."""
    match = lambda name, patterns: any(fnmatch.fnmatchcase(name, p) for p in patterns)
    return sorted(f for f in Path(base_dir).iterdir()
                  if f.is_file() and match(f.name, MODEL_FILES) and not match(f.name, NOT_MODEL_FILES))


def copy_model_files(base_dir, out_dir):
    """Copy model_files(base_dir) into out_dir byte for byte -> their names. A hub snapshot's files
    are symlinks into its blobs/ folder: the content is copied, never the link (which would tie the
    save to a cache that may be cleaned). Each goes through a temporary name, so a crash never
    leaves half a file under its real name."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for src in (files := model_files(base_dir)):
        tmp = out_dir / (src.name + ".tmp")
        shutil.copyfile(src, tmp)  # follows a symlink: the bytes, not the link
        os.replace(tmp, out_dir / src.name)
    return [f.name for f in files]


def local_auto_map(config, path):
    """config.json's dict with its auto_map cut to the entries whose remote code is in `path`: an
    entry naming an absent module sends transformers (trust_remote_code) to a missing file; with
    none left the key goes, and the directory reads as what it is, a model without remote code."""
    def here(ref):  # "modeling_llada.LLaDAModelLM" needs modeling_llada.py; "repo--mod.Cls" is another repo's
        return ref is None or "--" in ref or (Path(path) / (ref.rsplit(".", 1)[0] + ".py")).is_file()
    kept = {k: v for k, v in config.get("auto_map", {}).items()
            if all(here(r) for r in (v if isinstance(v, list) else [v]))}
    return {k: (kept if k == "auto_map" else v) for k, v in config.items() if k != "auto_map" or kept}
