"""Scenario 2: CUDA OOM at the first backward.

The GPU is filled with a ballast tensor so that the weights and the forward pass fit, but the
gradients of the backward pass do not. Expected verdict: torch-cuda-oom (phase: backward).
"""

from __future__ import annotations

import torch

from _common import ballast_leaving, log_step, mlp, now

width, depth, batch = 8192, 8, 4096
model = mlp(width, depth)  # 8 x 256 MiB of fp32 weights = 2 GiB
param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
# Forward activations: depth * 2 * batch * width * 4 B = 2 GiB; gradients need another 2 GiB.
_ballast = ballast_leaving(int(param_bytes * 0.5) + depth * 2 * batch * width * 4 + (512 << 20))
x = torch.randn(batch, width, device="cuda")
print("forward", flush=True)
t0 = now()
loss = model(x).square().mean()
print(f"forward done, loss {loss.item():.4f}; backward", flush=True)
loss.backward()  # raises torch.OutOfMemoryError
log_step(0, loss.item(), batch, now() - t0)
