"""torch.distributed set-up for ``torchrun --nproc_per_node N -m scanmt train ...``.

gloo on CPU, NCCL on GPU.  Without torchrun's environment this is a no-op and
everything runs in one process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def setup(device: str = "auto") -> DistInfo:
    """Initialise the process group if launched by torchrun; pick the device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() if device == "auto" else device.startswith("cuda")
    dev = torch.device(f"cuda:{local}") if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return DistInfo(rank, world, local, dev)


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    """Sum a few floats over all ranks (identity without distribution)."""
    if not info.enabled:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=info.device)
    dist.all_reduce(t)
    return t.tolist()


def replica_divergence(model: torch.nn.Module, info: DistInfo) -> float:
    """Largest absolute difference between this rank's parameters and rank 0's (0.0 = in sync)."""
    if not info.enabled:
        return 0.0
    flat = torch.cat([p.detach().reshape(-1).float() for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    diff = torch.tensor([(flat - ref).abs().max().item()], device=flat.device)
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    return float(diff)
