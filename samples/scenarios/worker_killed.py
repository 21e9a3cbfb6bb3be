"""Scenario 6: one of two torchrun workers is SIGKILLed (as the kernel OOM killer would).

Run as ``torchrun --nproc-per-node 2 worker_killed.py``. Both workers use GPU 0 for a few steps
(no process group is needed); at step 5 local rank 1 kills itself with SIGKILL, and torchrun tears
the job down with ChildFailedError (exitcode -9). Expected verdict: worker-killed-signal.
"""

from __future__ import annotations

import os
import signal
import time

import torch
from _common import log_step, mlp, now

rank = int(os.environ.get("LOCAL_RANK", "0"))
model = mlp(2048, 4)
x = torch.randn(512, 2048, device="cuda")
for step in range(40):
    t0 = now()
    loss = model(x).square().mean()
    loss.backward()
    log_step(step, loss.item(), 512 * 128, now() - t0)
    if rank == 1 and step == 5:
        print(f"[rank {rank}] pid {os.getpid()} killing itself with SIGKILL", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.2)
