"""Scenario 1: a short real training loop that finishes. Expected verdict: none."""

from __future__ import annotations

import time

import torch
from _common import log_step, mlp, now

model = mlp(4096, 4)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(1024, 4096, device="cuda")
target = torch.randn(1024, 4096, device="cuda")
for step in range(100):
    t0 = now()
    loss = (model(x) - target).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    time.sleep(0.05)
    log_step(step, loss.item(), 1024 * 512, now() - t0)
print("training finished", flush=True)
