"""
lab/preflight.py: before renting GPUs for a day or two, measure one round of the run you are about to
launch and project its wall-clock (the cost model: lab/cost.py; docs/performance.md).

The flags are the trainer's own (`python -m methods.grpo`'s), so presets and defaults are exactly the
trainer's. One micro-batch round runs through grpo.py's phase functions (bench.bench) on this machine's
first device, with the model in --model-dir or random weights of the preset's shape (--preset 8b:
--shape llada-8b or dream-7b). Reported: seconds per phase, rollout tokens/s, peak memory against the
device's total (a warning above 90 %), and hours for --rounds and for d1's step count:

    hours = ceil(steps / μ) rounds x ceil(micro-batches per round / GPUs) x seconds per round

Rewards, logging and checkpoints are left out (seconds per round against minutes). The prompt is
--max-prompt-length tokens, the longest d1's left cut lets through: an upper bound.

Run:
    python -m lab.preflight --preset 8b --task gsm8k            # d1's QLoRA recipe on this GPU
    python -m lab.preflight --preset 8b --task gsm8k --num-iterations 8 --gpus 8
    python -m lab.preflight --preset 8b --task gsm8k --shape dream-7b     # Dream-7B's shape (exact sampler)
    python -m lab.preflight --preset 8b --task gsm8k --gpus 8 --max-hours 24   # jobs and requeues of 24 h
    python -m lab.preflight --preset 8b --model-dir none --no-load-in-4bit --lora-r 0 --layers 8   # full FT, 8 blocks
"""
import argparse
import json
import math

import torch

import methods.grpo
from modelio.adapters import quantize_blocks
from ops.ddp import default_dtype
from ops.stop import BUDGET_STEPS
from lab.bench import add_shape_flag, bench, format_table, preset_model

MEMORY_WARNING = 0.9  # warn when the peak reserved memory exceeds this share of the device

# d1's trained optimizer steps per task (docs/d1.md §4.3 and §9); a round is μ steps
D1_STEPS = {"gsm8k": 7700, "math": 6600, "countdown": 5000, "sudoku": 3800}


def project_hours(round_seconds, steps, num_iterations, prompts_per_step=16, groups_per_micro=1, n_gpus=1):
    """Wall-clock hours of a diffu-GRPO run of `steps` optimizer steps on n_gpus GPUs, from one
    measured micro-batch round (rollout + old/ref + μ updates of groups_per_micro groups) that took
    `round_seconds`: rounds x ceil(micro-batches / n_gpus) x round_seconds."""
    rounds = math.ceil(steps / num_iterations)
    # ceil: a GPU left with one extra micro-batch makes the others wait for it
    micro = math.ceil(prompts_per_step / groups_per_micro / n_gpus)
    return rounds * micro * round_seconds / 3600


def jobs_needed(run_hours, max_hours, round_hours):
    """Jobs a run of `run_hours` takes when each job stops at --max-hours, or None if a job cannot
    finish one round. A job stops once fewer than BUDGET_STEPS of its rounds fit (ops/stop.py), so
    it trains for about max_hours - BUDGET_STEPS rounds; loading the model is not counted."""
    usable = max_hours - BUDGET_STEPS * round_hours
    return math.ceil(run_hours / usable) if usable > 0 else None


def preflight(gargs, n_gpus=0, n_layers=0, peak_tflops=989.0, repeats=1, shape="llada-8b"):
    """One micro-batch round of the run the trainer's flags `gargs` describe, measured on this machine's first
    device (the module's docstring says what is reported), on gargs.model_dir's model or random weights of
    the preset's shape (8b: `shape`, a methods.dream.model_shapes() name; n_layers > 0: that many blocks)."""
    # the first GPU unless --device says cpu (or there is none)
    device = "cuda" if torch.cuda.is_available() and gargs.device in ("", "cuda") else "cpu"
    dtype = default_dtype(gargs.dtype, device)
    model, source = preset_model(gargs, device, dtype, gargs.model_dir, n_layers, shape)
    if model is None:
        return {"model": f"{shape} shape", "error": source}
    # QLoRA: the blocks become NF4 in place here, and bench() then adds the adapters on top
    if gargs.load_in_4bit:
        quantize_blocks(model)
    res = {"config": {k: getattr(gargs, k) for k in ("preset", "task", "num_generations", "groups_per_micro",
                                                      "max_prompt_length", "gen_length", "block_length",
                                                      "diffusion_steps", "num_iterations", "beta", "lora_r",
                                                      "load_in_4bit", "gradient_checkpointing", "compile",
                                                      "objective", "estimator", "rollout_cache",
                                                      "rollout_threshold", "max_hours")},
           "model": source}
    res["config"]["shape"] = shape
    try:
        res.update(bench(model, gargs, gargs.max_prompt_length, repeats=repeats, peak_tflops=peak_tflops))
    except torch.cuda.OutOfMemoryError as e:
        # out of memory is an answer, not a crash: the report says this configuration does not fit
        res["error"] = f"out of GPU memory: {str(e).splitlines()[0]}"
        return res
    round_s = sum(res["seconds"].values())
    n_gpus = n_gpus or max(1, torch.cuda.device_count())
    steps = {"this run": gargs.rounds * gargs.num_iterations}
    if gargs.task in D1_STEPS:
        steps[f"d1's {gargs.task}"] = D1_STEPS[gargs.task]
    res["round_seconds"] = round_s
    unit = "GPU" if device == "cuda" else "CPU process"
    # one line per (step count, GPU count): on 1 GPU and on n_gpus (a set, so once when n_gpus is 1)
    cases = {f"{name} ({n} steps), {g} {unit}{'s' * (g > 1)}": (n, g) for name, n in steps.items()
             for g in sorted({1, n_gpus})}

    def hours(n, g):  # a run of n optimizer steps on g GPUs
        return project_hours(round_s, n, gargs.num_iterations, gargs.prompts_per_step, gargs.groups_per_micro, g)
    res["projection_hours"] = {k: hours(n, g) for k, (n, g) in cases.items()}
    if gargs.max_hours:  # jobs of --max-hours each; one round is μ optimizer steps
        res["jobs"] = {k: jobs_needed(hours(n, g), gargs.max_hours, hours(gargs.num_iterations, g))
                       for k, (n, g) in cases.items()}
    if "device_memory_gib" in res:
        # reserved, not allocated: what the caching allocator holds is what runs out
        res["memory_share"] = res["peak_reserved_gib"] / res["device_memory_gib"]
    return res


def format_preflight(res):
    """The preflight report: the round's table, then memory and projection lines."""
    if "error" in res:
        return f"preflight ({res['model']}): {res['error']}"
    lines = [f"model: {res['model']}", format_table(res), f"micro-batch round: {res['round_seconds']:.1f} s"]
    if res.get("memory_share", 0) > MEMORY_WARNING:
        lines.append(f"WARNING: peak reserved memory is {100 * res['memory_share']:.0f} % of the device: "
                     f"a longer prompt or a fragmentation spike will run out; use --gradient-checkpointing "
                     f"or a smaller --groups-per-micro")
    elif "memory_share" in res:
        lines.append(f"memory: peak reserved {100 * res['memory_share']:.0f} % of the device (warning above 90 %)")
    lines += [f"projected wall-clock, {k}: {v:.1f} h" for k, v in res["projection_hours"].items()]
    lines += [f"--max-hours {res['config']['max_hours']:g}, {k}: " + (f"{n} jobs ({n - 1} requeues)" if n else
              "a job cannot finish one round: raise --max-hours") for k, n in res.get("jobs", {}).items()]
    return "\n".join(lines)


def main(argv=None):
    """`python -m lab.preflight [trainer flags] [--gpus N --layers N --peak-tflops F --json FILE]`;
    returns the exit status (1 when the round could not run, e.g. out of memory)."""
    extra = argparse.ArgumentParser(description="measure one round of the run these flags describe and "
                                    "project its wall-clock; every other flag is the trainer's (python -m "
                                    "methods.grpo's: grpo.py's and the field's)")
    extra.add_argument("--gpus", type=int, default=0, help="GPUs of the run (default: all visible)")
    extra.add_argument("--layers", type=int, default=0, help="random weights with this many blocks")
    extra.add_argument("--peak-tflops", type=float, default=989.0, help="for MFU (989 = H100/H200 dense bf16)")
    extra.add_argument("--json", type=str, default="", help="also write the numbers here")
    add_shape_flag(extra)
    # everything but preflight's own flags goes to methods.grpo.parse_args untouched
    ex, rest = extra.parse_known_args(argv)
    res = preflight(methods.grpo.parse_args(rest), ex.gpus, ex.layers, ex.peak_tflops, shape=ex.shape)
    print(format_preflight(res))
    if ex.json:
        with open(ex.json, "w") as f:
            json.dump(res, f, indent=2)
    return 1 if "error" in res else 0


if __name__ == "__main__":
    raise SystemExit(main())
