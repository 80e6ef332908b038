"""ddp.py: the precision rules shared by sft.py and grpo.py, and the one-process set-up.

(The multi-process behaviour, DDP and FSDP2 against one process, is tested end to end in
test_grpo.py, test_sft.py and test_fsdp.py.)
"""
import argparse

import pytest
import torch

from conftest import tiny_model
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
