"""Scenario 7: throughput collapses by 4x halfway through, with no error.

A loop prints tokens/s; halfway it starts sleeping three step-times per step (as a starved data
loader would). Expected verdict: throughput-collapse.
"""

from __future__ import annotations

import time

import torch
from _common import log_step, mlp, now

model = mlp(4096, 4)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(1024, 4096, device="cuda")
tokens = 1024 * 512
base = None
for step in range(120):
    t0 = now()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    base = base or max(dt, 0.02)
    time.sleep(base if step < 60 else base * 5)  # about 2x base per step, then 6x: a ~4x drop
    log_step(step, loss.item(), tokens, now() - t0)
