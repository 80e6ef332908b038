"""
torchrun set-up shared by sft.py, grpo.py and eval.py (nanochat's compute_init, in small).

torchrun sets RANK / LOCAL_RANK / WORLD_SIZE; without them the script runs as one process.
nccl on GPU, gloo on CPU (so the 2-process tests run in CI). The scripts themselves keep the
parts that differ: sft.py and grpo.py wrap the model in DDP, eval.py only shards items by rank.
"""
import os

import torch


def compute_init(device="", backend=""):
    """-> (ddp, rank, local_rank, world_size, device, device_type). device: "" = cuda if available."""
    device_type = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if int(os.environ.get("RANK", -1)) == -1:
        return False, 0, 0, 1, device_type, device_type
    import torch.distributed as dist
    dist.init_process_group(backend=backend or ("nccl" if device_type == "cuda" else "gloo"))
    rank, local_rank, world_size = dist.get_rank(), int(os.environ["LOCAL_RANK"]), dist.get_world_size()
    if device_type == "cuda":  # one GPU per process
        device = f"cuda:{local_rank}"
        torch.cuda.set_device(device)
    else:
        device = "cpu"
    return True, rank, local_rank, world_size, device, device_type


def default_dtype(dtype, device_type):
    """--dtype, or bf16 on GPU (LLaDA's stored dtype) and fp32 on CPU (bf16 matmuls are slow there)."""
    return getattr(torch, dtype) if dtype else (torch.bfloat16 if device_type == "cuda" else torch.float32)
