"""Scenario 4: a run that lives within a few hundred MiB of the GPU's capacity and survives.

After one warm-up step (the caching allocator keeps the step's peak reserved), a ballast tensor
takes all but ~250 MiB of the remaining free memory; training then continues for a few seconds
inside the cached blocks. Expected verdict: no failure, with memory-margin reported as a risk.
"""

from __future__ import annotations

import time

import torch
from _common import ballast_leaving, log_step, mlp, now

width, depth, batch = 4096, 8, 2048
model = mlp(width, depth)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(batch, width, device="cuda")
ballast = None
t_end = time.time() + 8
step = 0
while time.time() < t_end:
    t0 = now()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
    log_step(step, loss.item(), batch * 128, now() - t0)
    if ballast is None:
        ballast = ballast_leaving(250 << 20)
    time.sleep(0.05)
    step += 1
free, total = torch.cuda.mem_get_info()
print(f"done: {step} steps, {free / 2**20:.0f} MiB free of {total / 2**20:.0f} MiB", flush=True)
