"""Scenario 12 (one GPU): the drafter pipeline, another variant — drafters that freeze at their memory cap mid-run.

Eight processes share one GPU as in ``drafter_pipeline.py``: ranks 0-4 are *targets* (a frozen model turns
prompts into "hidden states" and puts them into a ``torch.multiprocessing`` queue), ranks 5-7 *drafters*
(they take hidden states and train a small model with AdamW). Every drafter runs under its own memory cap
(``torch.cuda.set_per_process_memory_fraction``: ``FREEZE_CAP_MIB`` each), as a job gives each worker its
budget.

Mid-run (``FREEZE_AFTER_S``) drafters 6 and 7 (``FREEZE_RANKS``) start a phase that needs more memory (a
growing cache of activations, as a drafter keeping longer contexts would): they allocate until their cap
refuses, and their worker thread swallows the ``torch.OutOfMemoryError`` the way pipelines do
(``log.debug``, which nobody sees). Unlike the shipped run B, where the drafters died at their first step,
these trained for a while: they printed steps, then stop; their processes stay alive holding their memory,
frozen at the cap, and idle (no kernel runs), while drafter 5 keeps training below them. The throughput
falls and the queues fill. No error line anywhere.

What a recording shows: per-process memory (6 and 7 at their cap, 5 lower and steady) and per-process
utilization (6 and 7 at 0 % SM, 5 busy: NVML's ``nvmlDeviceGetProcessUtilization``), the ranks that stop
printing (their ``[rank N]`` lines, each with its pid), the monitor's throughput and queue lines. Expected:
``silent-worker-stall``, culprits ranks 6, 7 and their two processes (``expected.toml`` of the recording).

Environment: ``PIPELINE_DURATION_S`` (default 120), ``FREEZE_AFTER_S`` (40), ``FREEZE_RANKS`` ("6,7"),
``FREEZE_CAP_MIB`` (6144), ``PIPELINE_DRAFTER_MIB`` / ``PIPELINE_TARGET_MIB`` (1024 each).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time

import torch
import torch.multiprocessing as mp
from torch import nn

N_TARGETS, N_DRAFTERS = 5, 3
HIDDEN, TOKENS = 1024, 256
DURATION_S = float(os.environ.get("PIPELINE_DURATION_S", "120"))
FREEZE_AFTER_S = float(os.environ.get("FREEZE_AFTER_S", "40"))
FREEZE_RANKS = {int(r) for r in os.environ.get("FREEZE_RANKS", "6,7").split(",") if r.strip()}
CAP_MIB = int(os.environ.get("FREEZE_CAP_MIB", "6144"))
DRAFTER_MIB = int(os.environ.get("PIPELINE_DRAFTER_MIB", "1024"))
TARGET_MIB = int(os.environ.get("PIPELINE_TARGET_MIB", "1024"))
WIDTH = 4096

log = logging.getLogger("pipeline")


def stack(mib: int, dtype: torch.dtype) -> nn.Module:
    """Linear layers of WIDTH×WIDTH, as many as make ``mib`` of weights (at least one)."""
    per_layer = WIDTH * WIDTH * torch.finfo(dtype).bits // 8
    depth = max(1, round(mib * 2**20 / per_layer))
    layers: list[nn.Module] = [nn.Linear(HIDDEN, WIDTH)]
    for _ in range(depth - 1):
        layers += [nn.GELU(), nn.Linear(WIDTH, WIDTH)]
    layers += [nn.GELU(), nn.Linear(WIDTH, HIDDEN)]
    return nn.Sequential(*layers).to(device="cuda", dtype=dtype)


def target(rank: int, prompts: mp.Queue, hidden: mp.Queue, ready: mp.Barrier, stop: mp.Event) -> None:
    torch.cuda.set_device(0)
    model = stack(TARGET_MIB, torch.float16).eval()
    with torch.no_grad():
        model(torch.randn(TOKENS, HIDDEN, device="cuda", dtype=torch.float16))
    torch.cuda.synchronize()
    print(f"[rank {rank}] target ready (pid {os.getpid()}): {torch.cuda.memory_allocated() / 2**20:.0f} MiB",
          flush=True)
    ready.wait()
    while not stop.is_set():
        try:
            seed = prompts.get(timeout=0.5)
        except queue.Empty:
            continue
        with torch.no_grad():
            h = model(torch.randn(TOKENS, HIDDEN, device="cuda", dtype=torch.float16) * (seed % 7 + 1)).cpu()
        time.sleep(0.03)
        while not stop.is_set():
            try:
                hidden.put(h, timeout=0.5)
                break
            except queue.Full:
                continue


def drafter(rank: int, hidden: mp.Queue, tokens: mp.Value, ready: mp.Barrier, start: mp.Value,
            stop: mp.Event) -> None:
    torch.cuda.set_device(0)
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, CAP_MIB * 2**20 / total), 0)  # this worker's budget
    model = stack(DRAFTER_MIB, torch.float32)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-4)
    warm = torch.randn(TOKENS, HIDDEN, device="cuda")
    (model(warm) - warm).square().mean().backward()
    optim.step()  # the optimizer state from the start: the footprint every drafter reaches
    optim.zero_grad(set_to_none=False)
    del warm
    torch.cuda.synchronize()
    print(f"[rank {rank}] drafter ready (pid {os.getpid()}): {torch.cuda.memory_allocated() / 2**20:.0f} MiB "
          f"of a {CAP_MIB} MiB cap", flush=True)
    ready.wait()

    def train() -> None:
        step = 0
        cache: list[torch.Tensor] = []  # the longer-context phase keeps activations around
        try:
            while not stop.is_set():
                try:
                    h = hidden.get(timeout=0.5)
                except queue.Empty:
                    continue
                x = h.to("cuda", torch.float32)
                if rank in FREEZE_RANKS and time.time() - start.value >= FREEZE_AFTER_S:
                    cache.append(torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda"))  # grows to the cap
                loss = (model(x) - x).square().mean()
                loss.backward()
                optim.step()
                optim.zero_grad(set_to_none=False)
                time.sleep(0.03)
                step += 1
                with tokens.get_lock():
                    tokens.value += TOKENS
                if step % 100 == 0:
                    print(f"[rank {rank}] drafter step {step} loss {loss.item():.4f}", flush=True)
        except Exception:  # the pipeline's habit: the worker stops, a debug line nobody reads
            log.debug("drafter %d: worker stopped", rank, exc_info=True)
        while not stop.is_set():  # what it allocated stays referenced: the memory stays at the cap
            stop.wait(1.0)
        del cache

    worker = threading.Thread(target=train, name=f"drafter-{rank}", daemon=True)
    worker.start()
    while not stop.is_set():
        stop.wait(1.0)
    worker.join(timeout=10)


def main() -> None:
    ctx = mp.get_context("spawn")
    print(f"pipeline: {N_TARGETS} targets + {N_DRAFTERS} drafters on one GPU, drafters capped at {CAP_MIB} MiB "
          f"each; ranks {sorted(FREEZE_RANKS)} need more after {FREEZE_AFTER_S:.0f} s", flush=True)
    prompts = [ctx.Queue(maxsize=50) for _ in range(N_TARGETS)]
    hidden = ctx.Queue(maxsize=60)
    tokens = ctx.Value("q", 0)
    start = ctx.Value("d", 0.0)
    ready = ctx.Barrier(N_TARGETS + N_DRAFTERS + 1)
    stop = ctx.Event()
    procs = [ctx.Process(target=target, args=(r, prompts[r], hidden, ready, stop), name=f"target-{r}")
             for r in range(N_TARGETS)]
    procs += [ctx.Process(target=drafter, args=(N_TARGETS + i, hidden, tokens, ready, start, stop),
                          name=f"drafter-{N_TARGETS + i}") for i in range(N_DRAFTERS)]
    for p in procs:
        p.start()
    try:
        ready.wait(timeout=180)
    except threading.BrokenBarrierError:
        stop.set()
        print("pipeline: a worker did not start; stopping", flush=True)
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
        raise SystemExit(1) from None
    t0 = last_t = time.monotonic()
    start.value = time.time()
    last_tokens, seed = 0, 0
    while time.monotonic() - t0 < DURATION_S:
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            for q in prompts:
                try:
                    q.put_nowait(seed)
                    seed += 1
                except queue.Full:
                    pass
            time.sleep(0.01)
        now, done = time.monotonic(), tokens.value
        rate = (done - last_tokens) / (now - last_t)
        print(f"t={now - t0:.0f}s | {rate / 1000:.1f}K tok/s | tokens={done} | "
              f"q_pre=[{','.join(str(q.qsize()) for q in prompts)}] q_hs=[{hidden.qsize()}]", flush=True)
        last_t, last_tokens = now, done
    stop.set()
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.terminate()
    print(f"pipeline: done, {tokens.value} tokens", flush=True)


if __name__ == "__main__":
    main()
