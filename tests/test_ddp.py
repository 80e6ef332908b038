"""ddp.py: the precision rules shared by sft.py and grpo.py, the one-process set-up, and finish's
teardown under gloo.

(The multi-process behaviour, DDP and FSDP2 against one process, is tested end to end in
test_grpo.py, test_sft.py and test_fsdp.py.)
"""
import argparse
import re
import textwrap

import pytest
import torch

from conftest import REPO, run, tiny_model, torchrun
from ops.ddp import default_dtype, init_training, set_grad_sync, train_precision, wrap_for_training


def flags(**kw):
    base = dict(fsdp=False, lora_r=0, load_in_4bit=False, autocast=False, dtype="", device="cpu", backend="", seed=0,
                dist_timeout=60)
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.parametrize("kw,cuda_dtype,cpu_dtype", [
    (dict(), torch.bfloat16, torch.float32),                                  # LLaDA's bf16 on GPU; fp32 on CPU
    (dict(dtype="float32"), torch.float32, torch.float32),                    # --dtype wins
    (dict(fsdp=True), torch.float32, torch.float32),                          # FSDP trains fp32 masters
    (dict(fsdp=True, dtype="bfloat16"), torch.bfloat16, torch.bfloat16),      # unless --dtype says otherwise
])
def test_train_precision_dtypes(kw, cuda_dtype, cpu_dtype):
    for device_type, want in (("cuda", cuda_dtype), ("cpu", cpu_dtype)):
        dtype, save_dtype = train_precision(flags(**kw), device_type)
        assert dtype == want
        # the checkpoint: --dtype, else LLaDA's bf16 on GPU and fp32 on CPU, masters or not
        assert save_dtype == default_dtype(kw.get("dtype", ""), device_type)


@pytest.mark.parametrize("kw,device_type,message", [
    (dict(fsdp=True, lora_r=8), "cpu", "full fine-tuning"),           # LoRA stays on DDP
    (dict(fsdp=True, load_in_4bit=True), "cpu", "full fine-tuning"),  # a 4-bit base cannot be sharded masters
    (dict(fsdp=True, autocast=True), "cuda", "redundant"),            # one bf16 mechanism per run
])
def test_train_precision_refuses_contradictions(kw, device_type, message):
    with pytest.raises(ValueError, match=message):
        train_precision(flags(**kw), device_type)
    if device_type == "cuda":  # --fsdp --autocast is allowed on CPU, where FSDP does no casting
        train_precision(flags(**kw), "cpu")


def test_one_process_run_needs_no_group_and_wraps_nothing():
    run = init_training(flags(seed=3))
    assert (run.distributed, run.rank, run.world_size, run.master, run.device) == (False, 0, 1, True, "cpu")
    assert torch.initial_seed() == 3  # the global seed, the same on every rank
    model = tiny_model()
    assert wrap_for_training(model, run, fsdp=False) is model
    set_grad_sync(model, False)  # a plain model has no switch: a no-op, not an error
    with run.amp():  # --autocast off: forwards stay in the weights' dtype
        assert model(torch.zeros(1, 4, dtype=torch.long)).dtype == torch.float32


def test_finish_leaves_gloo_workers_nothing_to_free(tmp_path):
    """A collective a gloo worker still holds when finish starts must never be freed by that worker:
    freeing a tensor Python knows takes the GIL, and a thread that asks for it while the interpreter
    shuts down is killed through a noexcept destructor (SIGABRT after "done"; ops/ddp.py finish).
    Rank 1's all-reduce is still waiting for rank 0 when rank 1 reaches finish, so finish's barrier
    holds it: afterwards, and for good, its tensor keeps the collective's references."""
    script = tmp_path / "last_lines.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time, types
        sys.path.insert(0, {str(REPO)!r})
        import torch
        import torch.distributed as dist
        from ops.ddp import compute_init, finish
        _, rank, *_ = compute_init("cpu")
        t = torch.ones(1)
        if rank == 0:
            time.sleep(0.5)  # rank 1 reaches finish with its all-reduce still in a worker's hands
        dist.all_reduce(t, async_op=True)  # not waited for here: finish's barrier waits for it
        finish(types.SimpleNamespace(distributed=True))
        time.sleep(0.5)  # a worker that were to free the collective would have done it by now
        print(f"rank {{rank}}: {{t._use_count()}} references to the tensor")
    """))
    out = run(torchrun(2) + [str(script)], REPO)
    refs = int(re.search(r"rank 1: (\d+) references", out).group(1))
    assert refs > 1, out  # 1: only Python's own: the collective was freed, maybe by a worker
