"""Shared pytest setup (the flat repo root importable, torch kept to the 2 CPU cores) and the helpers
that several test files use: the repo and data paths, running a script, torchrun, a tiny model,
and a small checkpoint in the official layout written independently of checkpoint.py; d1's RL prompt
re-typed from the spec, independent puzzle checkers, and random tag texts (tasks / puzzles / rewards /
answers tests)."""
import ast
import json
import operator
import os
import random
import shlex
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
torch.set_num_threads(min(2, torch.get_num_threads()))

# The real data files live beside the repo (never copied in); tests that need them skip without them.
# A worktree elsewhere names them with NANO_D1_SHARED_DATA.
SHARED_DATA = Path(os.environ.get("NANO_D1_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")

REPO = Path(__file__).resolve().parents[1]


def write_digit_model(path):
    """A tiny model whose LM head favours the digits 1-4, so toy rollouts get varied rewards and
    the update is not trivially zero. (Built with the code under test, imported here so that
    collecting conftest imports no project module.)"""
    from modelio.checkpoint import from_pretrained, make_tiny, save_pretrained
    make_tiny(path, d_model=32, n_heads=4, n_kv_heads=4, n_layers=1, mlp_hidden_size=64)
    model = from_pretrained(path)
    with torch.no_grad():
        model.transformer.ff_out.weight[ord("1"):ord("5")] += torch.randn(4, 32)
    save_pretrained(model, path)


def run(cmd, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout


def run_recipe(block, out, tmp_path, small):
    """A README recipe's `python ...` lines as printed, `out` (their output folder) moved into tmp_path,
    each with small[script or module] appended and eval.py with --json tmp_path/eval.json ->
    {script: its stdout}. README "Adding a task"'s two worked examples (tests/test_digitsum.py, test_mcq.py)."""
    outputs = {}
    for line in block.strip().splitlines():
        argv = shlex.split(line.split("#")[0].replace(out, str(tmp_path)))
        assert argv[0] == "python", line
        script = argv[2] if argv[1] == "-m" else argv[1]
        extra = ["--json", str(tmp_path / "eval.json")] if script == "eval.py" else []
        outputs[script] = run([sys.executable, *argv[1:], *small[script], *extra], REPO)
    return outputs


def write_hub_cache(cache, repo_id, src, commit):
    """Lay the model directory `src` out as `huggingface-cli download` leaves it in a hub cache (written
    here from the cache's documented layout, not by huggingface_hub): models--owner--name/blobs/<sha256>
    holds each file's bytes, snapshots/<commit>/<file> links to its blob, refs/main names the commit.
    Another commit of the same repo adds its snapshot and moves refs/main. -> the snapshot folder."""
    import hashlib
    repo = Path(cache) / f"models--{repo_id.replace('/', '--')}"
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for f in sorted(Path(src).iterdir()):
        data = f.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return snap


def torchrun(n):
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}"]


def tiny_model(seed=0):
    """A 2-layer random LLaDA with a 50-token vocabulary (EOS 48, mask 49): passes cost milliseconds."""
    from model import LLaDA, LLaDAConfig
    cfg = LLaDAConfig(d_model=32, n_heads=4, n_kv_heads=4, n_layers=2, mlp_hidden_size=64, vocab_size=50,
                      embedding_size=50, mask_token_id=49, eos_token_id=48, pad_token_id=48,
                      max_sequence_length=64, init_std=0.3)
    torch.manual_seed(seed)
    return LLaDA(cfg)


# -----------------------------------------------------------------------------
# An official-layout checkpoint for test_model, test_checkpoint and test_adapters

# A small config with GQA off, like LLaDA-8B (n_kv_heads == n_heads); tests turn GQA on from it.
SMALL = dict(d_model=32, n_heads=4, n_kv_heads=4, n_layers=2, mlp_hidden_size=48, vocab_size=40,
             embedding_size=40, mask_token_id=39, eos_token_id=38, pad_token_id=38,
             max_sequence_length=64, rope_theta=10000.0)


def official_keys(cfg):
    """The official key names and shapes, written out from docs/llada.md §2 (not from model.py)."""
    C, H, V = cfg["d_model"], cfg["mlp_hidden_size"], cfg["embedding_size"]
    kv = cfg["n_kv_heads"] * C // cfg["n_heads"]
    keys = {"model.transformer.wte.weight": (V, C), "model.transformer.ln_f.weight": (C,),
            "model.transformer.ff_out.weight": (V, C)}
    for i in range(cfg["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        keys.update({p + "attn_norm.weight": (C,), p + "q_proj.weight": (C, C), p + "k_proj.weight": (kv, C),
                     p + "v_proj.weight": (kv, C), p + "attn_out.weight": (C, C), p + "ff_norm.weight": (C,),
                     p + "ff_proj.weight": (H, C), p + "up_proj.weight": (H, C), p + "ff_out.weight": (C, H)})
    return keys


def write_checkpoint(path, cfg, n_shards=3, seed=0, dtype=torch.float32, drop=None, add=None, reshape=None):
    """Write random weights in the official sharded layout with safetensors directly (independent
    of checkpoint.save_pretrained). Optional corruptions for the strictness tests."""
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for k, shape in official_keys(cfg).items():
        # norms around 1, matrices with std 0.3 so the forward is far from uniform
        sd[k] = (1 + 0.1 * torch.randn(shape, generator=g)) if len(shape) == 1 else 0.3 * torch.randn(shape, generator=g)
        sd[k] = sd[k].to(dtype)
    if drop:
        del sd[drop]
    if add:
        sd[add] = torch.zeros(3)
    if reshape:
        sd[reshape] = torch.zeros(2, 2, dtype=dtype)
    keys = sorted(sd)
    weight_map = {}
    for i in range(n_shards):
        fname = f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors"
        part = {k: sd[k] for k in keys[i::n_shards]}
        save_file(part, str(path / fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in part})
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (path / "config.json").write_text(json.dumps({**cfg, "model_type": "llada", "init_fn": "mitchell"}))
    return {k: v.double() for k, v in sd.items()}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("official")
    sd = write_checkpoint(path, SMALL)
    return path, sd


# -----------------------------------------------------------------------------
# Tasks and puzzles (tests/test_tasks.py, tests/test_puzzles.py): d1's RL prompt re-typed from
# docs/d1.md §7.1 (never imported from tasks.py, so a typo there cannot be copied into its tests), and
# checkers written independently of puzzles.py.

RL_SYSTEM = """
Respond in the following format:
<reasoning>
...
</reasoning>
<answer>
...
</answer>
"""


def countdown_rl(nums, target):
    return RL_SYSTEM + (
        f"\nUsing only the numbers {nums}, create an arithmetic expression that evaluates to exactly {target}. "
        "You must use all numbers from the list, and each number must be used exactly once. You may use the "
        "operations +, -, *, and / as needed. After reasoning, provide only your final expression inside "
        "<answer></answer> tags without including an equals sign or the target number. For example, if the "
        "numbers are [2, 3, 4] and the target is 5, a valid answer is: <answer>\n2*4-3\n</answer>")


def valid_by_rules(s):
    rows = [s[4 * r:4 * r + 4] for r in range(4)]
    cols = ["".join(row[c] for row in rows) for c in range(4)]
    boxes = [rows[r][c:c + 2] + rows[r + 1][c:c + 2] for r in (0, 2) for c in (0, 2)]
    return len(s) == 16 and all(sorted(u) == list("1234") for u in rows + cols + boxes)


OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def exact_eval(expr):
    """Evaluate + - * / over integer literals with Fractions; anything else is rejected."""
    def ev(node):
        if isinstance(node, ast.BinOp) and type(node.op) in OPS:
            return OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return Fraction(node.value)
        raise ValueError(f"unexpected node {ast.dump(node)}")
    return ev(ast.parse(expr, mode="eval").body)


def literals(expr):
    return sorted(n.value for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Constant))


# -----------------------------------------------------------------------------
# Random texts made of the tag pieces d1's format rewards and answer readers look for
# (tests/test_rewards.py, tests/test_answers.py)

TAG_PIECES = ["<reasoning>", "</reasoning>", "<answer>", "</answer>", "<reasoning>\n", "\n</reasoning>\n",
              "\n<answer>\n", "\n</answer>\n", "\n", " ", "\t", "x", "42"]


def random_texts(n, seed=0):
    """Half free-form, half a well-formed skeleton with random junk between (and instead of) its
    parts, so that both matching and near-miss texts are common."""
    rng = random.Random(seed)
    junk = lambda k: "".join(rng.choice(TAG_PIECES) for _ in range(rng.randint(0, k)))
    strict = ["<reasoning>\n", "x", "\n</reasoning>\n", "<answer>\n", "42", "\n</answer>\n", ""]
    for i in range(n):
        if i % 3 == 0:
            yield junk(9)
            continue
        sep = lambda: rng.choice(["", "\n", "\n", " "])
        soft = ["<reasoning>", sep(), "</reasoning>", sep(), "<answer>", sep(), "</answer>", sep()]
        yield "".join((p if rng.random() < 0.9 else junk(1)) + (junk(2) if rng.random() < 0.2 else "")
                      for p in (soft if i % 3 == 1 else strict))
