"""Scenario 2: CUDA OOM at the first backward.

One forward pass measures what the forward needs; then a ballast tensor fills the GPU so that the
weights and the forward still fit, but the gradients of the backward pass do not.
Expected verdict: torch-cuda-oom (phase: backward).
"""

from __future__ import annotations

import torch
from _common import ballast_leaving, gib, log_step, mlp, now

width, depth, batch = 8192, 8, 4096
model = mlp(width, depth)  # 8 x 256 MiB of fp32 weights = 2 GiB; their gradients need 2 GiB more
x = torch.randn(batch, width, device="cuda")

before = torch.cuda.memory_allocated()
torch.cuda.reset_peak_memory_stats()
model(x).square().mean()  # the graph is dropped at once: this only measures the forward's peak
forward_peak = torch.cuda.max_memory_allocated() - before
torch.cuda.empty_cache()
print(f"forward needs {gib(forward_peak)}", flush=True)

_ballast = ballast_leaving(forward_peak + (256 << 20))
print("forward", flush=True)
t0 = now()
loss = model(x).square().mean()
print(f"forward done, loss {loss.item():.4f}; backward", flush=True)
loss.backward()  # raises torch.OutOfMemoryError: the weight gradients do not fit
log_step(0, loss.item(), batch, now() - t0)
