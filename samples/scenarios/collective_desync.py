"""Scenario 9 (2 GPUs): rank 0 calls all_reduce while rank 1 calls broadcast at the same step.

Run as ``torchrun --nproc-per-node 2 collective_desync.py`` with a 60 s process-group timeout.
The mismatched collectives never complete; the watchdog reports the two ranks' different OpTypes.
Expected: nccl-desync as root cause, nccl-watchdog-timeout as consequence.
"""

from __future__ import annotations

import datetime
import os
import time

import torch
import torch.distributed as dist
from _common import log_step, mlp, now

rank = int(os.environ["RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60), device_id=torch.device("cuda", rank))
model = mlp(2048, 2)
x = torch.randn(512, 2048, device="cuda")
for step in range(50):
    t0 = now()
    loss = model(x).square().mean()
    loss.backward()
    grad = next(model.parameters()).grad
    if step == 10 and rank == 1:
        print(f"[rank {rank}] step {step}: calling broadcast instead of all_reduce (the bug)", flush=True)
        dist.broadcast(torch.ones(7, device="cuda"), src=0)
    else:
        dist.all_reduce(grad)
    torch.cuda.synchronize()
    log_step(step, loss.item(), 512 * 128, now() - t0)
    time.sleep(0.05)
dist.destroy_process_group()
