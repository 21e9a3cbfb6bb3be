"""Small helpers shared by the scenario programs: a toy model and a trainer-style log line."""

from __future__ import annotations

import time

import torch
from torch import nn


def mlp(width: int, depth: int, device: str = "cuda", dtype: torch.dtype = torch.float32) -> nn.Module:
    """A stack of Linear+GELU layers: parameter count ~ depth * width**2."""
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers).to(device=device, dtype=dtype)


def log_step(step: int, loss: float, tokens: int, seconds: float) -> None:
    """One progress line in the shape many training scripts print."""
    print(f"step {step} | loss {loss:.4f} | {tokens / seconds:,.0f} tokens/s | {seconds * 1000:.1f} ms/step",
          flush=True)


def gib(n_bytes: int) -> str:
    return f"{n_bytes / 2**30:.2f} GiB"


def ballast_leaving(free_bytes_wanted: int, device: str = "cuda") -> torch.Tensor:
    """Allocate one tensor so that only ``free_bytes_wanted`` of GPU memory stays free."""
    free, _total = torch.cuda.mem_get_info(device)
    size = max(free - free_bytes_wanted, 0)
    print(f"ballast: taking {gib(size)} of {gib(free)} free, leaving {gib(free_bytes_wanted)}", flush=True)
    return torch.empty(size, dtype=torch.uint8, device=device)


def now() -> float:
    torch.cuda.synchronize()
    return time.perf_counter()
