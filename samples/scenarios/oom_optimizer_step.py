"""Scenario 3: OOM at the first optimizer step (AdamW state does not fit).

Weights + gradients + activations fit; AdamW's two moment buffers (2x the weights) do not, so the
first ``optimizer.step()`` fails — where the drafters of report 2 died. Expected: torch-cuda-oom
(phase: optimizer step).
"""

from __future__ import annotations

import torch
from _common import ballast_leaving, log_step, mlp, now

width, depth, batch = 8192, 16, 256
model = mlp(width, depth)  # 16 x 256 MiB = 4 GiB of fp32 weights
param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
# weights (already allocated) + grads (1x) + a little for activations; AdamW needs 2x more.
_ballast = ballast_leaving(param_bytes + (1 << 30))
x = torch.randn(batch, width, device="cuda")
for step in range(3):
    t0 = now()
    loss = model(x).square().mean()
    loss.backward()
    print(f"step {step}: backward done, optimizer step", flush=True)
    opt.step()  # raises torch.OutOfMemoryError at step 0
    opt.zero_grad(set_to_none=True)
    log_step(step, loss.item(), batch * 128, now() - t0)
