"""Scenario 8 (2 GPUs): rank 1 stops calling collectives while rank 0 waits in all_reduce.

Run as ``torchrun --nproc-per-node 2 silent_stall.py``. A 60 s process-group timeout makes the
NCCL watchdog fire on rank 0; the flight recorder dump lands in the bundle because
``forensics record`` armed it. NVML shows GPU 1 idle while GPU 0 spins in the collective.
Expected: silent-worker-stall (rank 1) as root cause, nccl-watchdog-timeout as consequence.
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
model = mlp(4096, 4)
x = torch.randn(1024, 4096, device="cuda")
for step in range(1000):
    t0 = now()
    loss = model(x).square().mean()
    loss.backward()
    if rank == 1 and step == 20:
        print(f"[rank {rank}] step {step}: stops calling collectives (sleeps)", flush=True)
        time.sleep(150)  # longer than the 60 s timeout; the watchdog of rank 0 fires first
        break
    for p in model.parameters():
        dist.all_reduce(p.grad)
    log_step(step, loss.item(), 1024 * 128, now() - t0)
    time.sleep(0.05)
dist.destroy_process_group()
