"""
The toys' defaults on N ranks (docs/reliability.md): `torchrun --nproc_per_node=N sft.py` and `grpo.py` on
the toy, no flag but the run's length, start and finish on 2 and 4 ranks: their one micro-batch a step
becomes one per rank (ops/trainers.per_rank, ranks), as the 8b presets' values already divide. On one
process the values are the toy's own (make run's weights).

Run: python -m pytest tests/test_world_defaults.py -q
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, run, torchrun


def help_defaults(script, world):
    env = {**os.environ, "WORLD_SIZE": str(world)}
    out = subprocess.run([sys.executable, str(REPO / script), "--help"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=120).stdout
    return " ".join(out.split())


@pytest.mark.parametrize("world,batch,accum,groups", [(1, 32, 1, 16), (2, 16, 2, 8), (4, 8, 4, 4)])
def test_the_toys_defaults_follow_the_world_size(world, batch, accum, groups):
    sft = help_defaults("sft.py", world)
    assert f"--batch-size BATCH_SIZE sequences per micro-batch per rank (default: {batch} from --preset tiny" in sft
    assert f"--grad-accum GRAD_ACCUM micro-batches per optimizer step (global) (default: {accum} from --preset " \
           "tiny" in sft
    grpo = help_defaults("grpo.py", world)
    assert f"(default: {groups} from --preset tiny; " in grpo.split("--groups-per-micro GROUPS_PER_MICRO")[-1][:400]


@pytest.mark.parametrize("n", [2, 4])
def test_the_toys_run_on_n_ranks_with_their_defaults(tmp_path, n):
    # the tiny default model, then SFT and GRPO on it with the presets' batch flags untouched
    sft_out, grpo_out = tmp_path / "sft", tmp_path / "grpo"
    run([sys.executable, "-m", "modelio.checkpoint", "--out-dir", str(tmp_path / "tiny"), "--seed", "0"], REPO)
    run(torchrun(n) + [str(REPO / "sft.py"), "--model-dir", str(tmp_path / "tiny"), "--out-dir", str(sft_out),
                       "--max-steps", "2"], REPO)
    args = json.loads((sft_out / "train_args.json").read_text())
    assert (args["batch_size"], args["grad_accum"], args["world_size"]) == (32 // n, n, n)
    run(torchrun(n) + [str(REPO / "grpo.py"), "--model-dir", str(sft_out), "--out-dir", str(grpo_out),
                       "--rounds", "1"], REPO)
    args = json.loads((grpo_out / "train_args.json").read_text())
    assert (args["groups_per_micro"], args["prompts_per_step"], args["world_size"]) == (16 // n, 16, n)
    assert [json.loads(line)["step"] for line in (grpo_out / "metrics.jsonl").read_text().splitlines()] == [1]
