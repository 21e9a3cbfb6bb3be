"""Live watcher bench (one GPU): an illegal memory access in one of several processes.

Four worker processes (``[rank N]`` labels, as torchrun prints them) train a small MLP each on the
same GPU and print a step line every ``STEP_S``. At step ``FAULT_AT`` rank ``FAULT_RANK`` reads far
outside its tensor through ``aten._unsafe_index`` (an index no bounds check stops): the kernel faults
with ``CUDA error: an illegal memory access was encountered``, raised at the next synchronisation;
that process dies with the traceback, the others go on to the end. User-level only: no driver or
hardware fault is provoked (the driver may log an MMU-fault Xid for the faulting context, as it does
for any such bug). ``LIVE_FAULT_FILE``: when the bad kernel was launched (``<UTC ns> <what>``).
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.multiprocessing as mp
from torch import nn

RANKS = int(os.environ.get("IMA_RANKS", "4"))
FAULT_RANK = int(os.environ.get("IMA_FAULT_RANK", "2"))
STEPS = int(os.environ.get("IMA_STEPS", "120"))
FAULT_AT = int(os.environ.get("IMA_FAULT_AT", "40"))
STEP_S = float(os.environ.get("IMA_STEP_S", "0.25"))


def worker(rank: int) -> None:
    torch.cuda.set_device(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(512, 1024, device="cuda")
    for step in range(STEPS):
        t0 = time.perf_counter()
        loss = (model(x) - x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if rank == FAULT_RANK and step == FAULT_AT:
            table = torch.randn(1024, device="cuda")
            bad = torch.tensor([1 << 40], device="cuda", dtype=torch.long)
            path = os.environ.get("LIVE_FAULT_FILE")
            if path:
                with open(path, "a") as fh:
                    fh.write(f"{time.time_ns()} rank {rank} illegal memory access\n")
            torch.ops.aten._unsafe_index(table, [bad])  # reads 8 TiB past the tensor
        torch.cuda.synchronize()
        time.sleep(max(0.0, STEP_S - (time.perf_counter() - t0)))
        print(f"[rank {rank}] step {step} | loss {loss.item():.4f} | {512 / (time.perf_counter() - t0):,.0f} "
              f"samples/s", flush=True)


def main() -> int:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=worker, args=(r,)) for r in range(RANKS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    codes = [p.exitcode or 0 for p in procs]
    print(f"workers ended: {codes}", flush=True)
    return 1 if any(codes) else 0


if __name__ == "__main__":
    sys.exit(main())
