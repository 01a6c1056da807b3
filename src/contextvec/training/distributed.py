"""Where this training process stands in a ``torchrun`` launch (or alone)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Placement:
    """``rank`` of ``world`` processes, and the device this one computes on."""

    distributed: bool
    rank: int
    world: int
    device: torch.device


def join_process_group() -> Placement:
    """Join torchrun's process group (nccl on GPU, gloo on CPU) when ``WORLD_SIZE`` > 1."""
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    device = torch.device(
        f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if torch.cuda.is_available() else "cpu"
    )
    if device.type == "cuda":
        torch.cuda.set_device(device)  # nccl's object collectives use the current device
    return Placement(
        distributed=distributed,
        rank=dist.get_rank() if distributed else 0,
        world=dist.get_world_size() if distributed else 1,
        device=device,
    )
