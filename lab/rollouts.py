"""
lab/rollouts.py: one diffu-GRPO round per rollout mode, side by side (docs/fast-rollouts.md gives the
figures). For each mode of lab/samplers.SAMPLERS (exact, prefix / dual cache, threshold 0.9 with and
without the dual cache) the same round (lab/bench.bench, every other flag the trainer's, python -m
methods.grpo's) runs from a fresh copy of the model with the same prompts and noise keys; the table gives
rollout and round seconds and their ratio against exact, the rollout's model calls and canvas columns per
sample beside the analytic counts (a threshold's is a bound), and the share of the first round's tokens
equal to the exact sampler's. --task-prompts rolls out the trainer's own first prompts (its --task /
--data, the tokenizer in --model-dir) instead of random ids: a trained model's confidence needs them.

Run:
    python -m lab.rollouts --gen-length 256 --block-length 32 --diffusion-steps 128   # d1's shape, tiny model
    python -m lab.rollouts --model-dir out/toy/seed0/sft --task-prompts --repeats 5    # the toy, trained
    python -m lab.rollouts --preset testbed --model-dir SFT_DIR --task-prompts          # the testbed's shape
    python -m lab.rollouts --preset 8b --compile --no-load-in-4bit                      # one GPU, random 8B
"""
import argparse
import copy
import json
import os
import sys

import torch

import methods.grpo
import tasks
from modelio.adapters import quantize_blocks
from modelio.tokenizer import load_tokenizer
from ops.ddp import default_dtype
from lab.bench import bench, default_prompt_len, device_label, preset_model
from lab.cost import round_flags
from taskdata.data import group_prompts, load_rl_data
from lab.samplers import SAMPLERS, aligned


def task_prompt(gargs, model_dir, eos_id):
    """The prompt rows grpo.py's first micro-batch would roll out, (B, P): its data (load_rl_data: the
    toys generate theirs, other tasks read --data), the tokenizer in model_dir, d1's left cut."""
    exs = load_rl_data(gargs, tasks.TASKS)[:gargs.groups_per_micro]
    return group_prompts(load_tokenizer(model_dir), exs, gargs.num_generations, gargs.max_prompt_length, eos_id)[0]


def bench_rollouts(model, gargs, prompt_len, repeats=3, modes=SAMPLERS, prompt=None):
    """The round that the trainer's flags `gargs` describe (methods.grpo.parse_args), once per rollout
    mode (name -> methods/sampling.py's cache / threshold options; "exact" first), each from a fresh copy
    of `model` with the same prompts (random ones of prompt_len tokens, or `prompt` (B, P)) and noise
    keys. -> {mode: figures}."""
    rows, ref = {}, None
    bench(copy.deepcopy(model), gargs, prompt_len, prompt=prompt)  # a warm-up round (allocator, threads), not timed
    for name, opts in modes.items():
        g = copy.copy(gargs)
        g.rollout_cache, g.rollout_threshold = opts.get("cache") or "none", opts.get("threshold") or 0.0
        samples = []
        # a fresh copy per mode: bench() takes optimizer steps on the model it is given
        res = bench(copy.deepcopy(model), g, prompt_len, repeats, completions=samples, prompt=prompt)
        ref = samples[0] if ref is None else ref  # (B, N): the exact sampler's first round
        rows[name] = {"rollout_s": res["seconds"]["rollout"], "round_s": sum(res["seconds"].values()),
                      "calls": res["passes"]["rollout_fwd"], "analytic_calls": res["analytic"]["rollout_fwd"],
                      "columns": res["rollout_columns"], "analytic_columns": res["analytic_columns"],
                      # the same prompts and the same noise key as exact's first round: what the mode changed
                      "agreement": (samples[0] == ref).float().mean().item()}
    for r in rows.values():
        r["rollout_speedup"] = rows["exact"]["rollout_s"] / r["rollout_s"]
        r["round_speedup"] = rows["exact"]["round_s"] / r["round_s"]
    return rows


def format_rollout_table(rows, device, setup):
    head = ("rollout", "rollout s", "x exact", "round s", "x exact", "calls (analytic)", "columns/sample (analytic)",
            "tokens = exact")
    lines = [(name, f"{r['rollout_s']:.3f}", f"{r['rollout_speedup']:.2f}x", f"{r['round_s']:.3f}",
              f"{r['round_speedup']:.2f}x", f"{r['calls']:g} ({r['analytic_calls']})",
              f"{r['columns']:g} ({r['analytic_columns']})", f"{100 * r['agreement']:.1f}%")
             for name, r in rows.items()]
    return aligned(f"one diffu-GRPO round per rollout mode, {setup}, on {device}", head, lines)


def main(argv=None):
    """`python -m lab.rollouts [trainer flags] [--model-dir D --task-prompts --repeats R --json F]`."""
    p = argparse.ArgumentParser(description="a diffu-GRPO round per rollout mode; every other flag is the "
                                "trainer's (python -m methods.grpo's)")
    p.add_argument("--model-dir", type=str, default="", help="official-layout checkpoint, hub cache or hub id "
                   "(default: random weights of --preset)")
    p.add_argument("--task-prompts", action="store_true", help="the trainer's own first prompts (--task, --data) with "
                   "the tokenizer in --model-dir, instead of random ids")
    p.add_argument("--repeats", type=int, default=3, help="rounds per mode; times are medians")
    p.add_argument("--json", type=str, default="", help="also write the numbers here")
    args, rest = p.parse_known_args(argv)
    gargs = methods.grpo.parse_args(round_flags(rest))  # as bench.py: one group unless given, d1's GSM8K
    device = gargs.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, source = preset_model(gargs, device, default_dtype(gargs.dtype, device.split(":")[0]), args.model_dir)
    if model is None:
        sys.exit(f"lab.rollouts --preset 8b: {source}")
    if args.task_prompts and not os.path.isdir(source):  # source: the checkpoint's directory, when there is one
        sys.exit("lab.rollouts --task-prompts reads the tokenizer beside the weights: give --model-dir a checkpoint")
    prompt = task_prompt(gargs, source, model.config.eos_token_id) if args.task_prompts else None
    if gargs.load_in_4bit:  # QLoRA, as a bench.py round: NF4 blocks here, bench() adds the adapters
        quantize_blocks(model)
    P = prompt.shape[1] if prompt is not None else default_prompt_len(gargs)
    rows = bench_rollouts(model, gargs, P, max(1, args.repeats), prompt=prompt)
    setup = (f"{source}, B {gargs.groups_per_micro * gargs.num_generations}, "
             f"{'task' if prompt is not None else 'random'} prompts of {P} tokens, gen {gargs.gen_length}, "
             f"block {gargs.block_length}, steps {gargs.diffusion_steps}, μ {gargs.num_iterations}, "
             f"T {gargs.temperature}, median of {max(1, args.repeats)} rounds")
    print(format_rollout_table(rows, device_label(device), setup))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rollouts": rows, "setup": setup, "device": device_label(device)}, f, indent=2)


if __name__ == "__main__":
    main()
