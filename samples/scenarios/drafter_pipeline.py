"""Scenario 11 (one GPU): the second report's pipeline, small — targets feed drafters through queues.

Eight processes share one GPU the way the report's eight processes shared eight: ranks 0-4 are
*targets* (a frozen model turns prompts into "hidden states" and puts them into a
``torch.multiprocessing`` queue), ranks 5-7 are *drafters* (they take hidden states and train a
small model with AdamW). The launcher prints a throughput line every few seconds in the report's
shape (``… tok/s | q_pre=[…] q_hs=[…]``).

The GPU is given a fixed capacity (``PIPELINE_CAPACITY_MIB``: the launcher holds the rest of the
device in one ballast tensor), so all eight processes compete for one budget as the report's did for
96 GB. Each drafter's first optimizer step (where AdamW allocates its two moment buffers) runs in turn,
5 → 6 → 7. The drafters' worker thread swallows any exception the way pipelines do (``log.debug``,
which nobody sees), so a drafter that dies leaves its weights on the GPU, prints nothing more, and the
run goes on with fewer consumers: throughput falls, the queues stay full.

``PIPELINE_FREEZE=1`` (the live watcher's bench): a drafter whose optimizer step runs out of memory
does not die but *freezes at its memory cap*: its worker catches the error, empties the cache and tries
again every second, for ever, printing nothing (a retry loop pipelines also have). ``LIVE_FAULT_FILE``:
the moment a drafter dies or first fails is appended there (``<UTC ns> <what>``), never to the run's
output, so a measurement knows when the fault happened.

Run A: ``CUDA_MODULE_LOADING=LAZY`` — everything fits. Run B: the same program with
``CUDA_MODULE_LOADING=EAGER``, which loads every kernel of every CUDA library into each process's
context at start: each of the nine contexts grows, the budget shrinks, and drafters 6 and 7 die at their
first optimizer step with ``torch.OutOfMemoryError`` that no line reports. The capacity is chosen from
measured context sizes (``drafter_calibrate.py``), the same number for both runs.
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
HIDDEN, TOKENS = 1024, 256  # one hidden-state batch: TOKENS rows of HIDDEN (fp16), 512 KiB on the host
DURATION_S = float(os.environ.get("PIPELINE_DURATION_S", "60"))
DRAFTER_MIB = int(os.environ.get("PIPELINE_DRAFTER_MIB", "1024"))  # weights of one drafter model (fp32)
TARGET_MIB = int(os.environ.get("PIPELINE_TARGET_MIB", "1024"))  # weights of one target model (fp16)
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
        model(torch.randn(TOKENS, HIDDEN, device="cuda", dtype=torch.float16))  # warm-up: activations cached
    torch.cuda.synchronize()
    print(f"[rank {rank}] target ready: {torch.cuda.memory_allocated() / 2**20:.0f} MiB allocated", flush=True)
    ready.wait()
    while not stop.is_set():
        try:
            seed = prompts.get(timeout=0.5)
        except queue.Empty:
            continue
        with torch.no_grad():
            x = torch.randn(TOKENS, HIDDEN, device="cuda", dtype=torch.float16, generator=None) * (seed % 7 + 1)
            h = model(x).cpu()
        time.sleep(0.03)  # the rest of a target's step (sampling, tokenizer) on the host
        while not stop.is_set():
            try:
                hidden.put(h, timeout=0.5)
                break
            except queue.Full:
                continue


def note_fault(what: str) -> None:
    """For the live watcher's bench: when the fault happened, outside the run's own output."""
    path = os.environ.get("LIVE_FAULT_FILE")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{time.time_ns()} {what}\n")


def drafter(rank: int, hidden: mp.Queue, tokens: mp.Value, ready: mp.Barrier, turn: list, stop: mp.Event) -> None:
    torch.cuda.set_device(0)
    index = rank - N_TARGETS
    model = stack(DRAFTER_MIB, torch.float32)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-4)
    warm = torch.randn(TOKENS, HIDDEN, device="cuda")
    (model(warm) - warm).square().mean().backward()  # warm-up: the gradients live from here on
    optim.zero_grad(set_to_none=False)
    del warm
    torch.cuda.synchronize()
    print(f"[rank {rank}] drafter ready: weights+grads {torch.cuda.memory_allocated() / 2**20:.0f} MiB", flush=True)
    ready.wait()

    frozen: list[bool] = []

    def train() -> None:
        step = 0
        try:
            while not stop.is_set():
                try:
                    h = hidden.get(timeout=0.5)
                except queue.Empty:
                    continue
                if step == 0:
                    turn[index].wait()  # the first optimizer steps run in turn: 5, then 6, then 7
                x = h.to("cuda", torch.float32)
                loss = (model(x) - x).square().mean()
                loss.backward()
                try:
                    while True:
                        try:
                            optim.step()
                            break
                        except torch.OutOfMemoryError:
                            if os.environ.get("PIPELINE_FREEZE") != "1":
                                raise
                            if not frozen:  # frozen at its cap: retried for ever, nothing printed
                                note_fault(f"drafter {rank} frozen at its memory cap")
                                frozen.append(True)
                                if step == 0 and index + 1 < N_DRAFTERS:
                                    turn[index + 1].set()  # the next drafter tries its first step
                            torch.cuda.empty_cache()
                            if stop.wait(1.0):
                                return
                    optim.zero_grad(set_to_none=False)
                finally:
                    if step == 0 and index + 1 < N_DRAFTERS:
                        torch.cuda.synchronize()
                        turn[index + 1].set()
                time.sleep(0.03)  # the rest of a drafter's step (the target's lm_head, logging) on the host
                step += 1
                with tokens.get_lock():
                    tokens.value += TOKENS
                if step % 100 == 0:
                    print(f"[rank {rank}] drafter step {step} loss {loss.item():.4f}", flush=True)
        except Exception:  # the pipeline's habit: the worker dies, a debug line nobody reads
            note_fault(f"drafter {rank} died")
            log.debug("drafter %d: worker stopped", rank, exc_info=True)

    worker = threading.Thread(target=train, name=f"drafter-{rank}", daemon=True)
    worker.start()
    while not stop.is_set():
        stop.wait(1.0)  # the process stays: its weights stay on the GPU, its worker may be gone
    worker.join(timeout=10)


def main() -> None:
    capacity_mib = int(os.environ["PIPELINE_CAPACITY_MIB"])
    ctx = mp.get_context("spawn")
    free, total = torch.cuda.mem_get_info(0)
    used_by_others = total - free
    ballast_bytes = max(total - capacity_mib * 2**20 - used_by_others, 0)
    ballast = torch.empty(ballast_bytes, dtype=torch.uint8, device="cuda")
    print(f"pipeline: {N_TARGETS} targets + {N_DRAFTERS} drafters on one GPU, capacity {capacity_mib} MiB "
          f"(ballast {ballast_bytes / 2**20:.0f} MiB), CUDA_MODULE_LOADING={os.environ.get('CUDA_MODULE_LOADING', '')}",
          flush=True)
    prompts = [ctx.Queue(maxsize=50) for _ in range(N_TARGETS)]
    hidden = ctx.Queue(maxsize=60)
    tokens = ctx.Value("q", 0)
    ready = ctx.Barrier(N_TARGETS + N_DRAFTERS + 1)
    turn = [ctx.Event() for _ in range(N_DRAFTERS)]
    turn[0].set()
    stop = ctx.Event()
    procs = [ctx.Process(target=target, args=(r, prompts[r], hidden, ready, stop), name=f"target-{r}")
             for r in range(N_TARGETS)]
    procs += [ctx.Process(target=drafter, args=(N_TARGETS + i, hidden, tokens, ready, turn, stop),
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
    start = last_t = time.monotonic()
    last_tokens, seed = 0, 0
    while time.monotonic() - start < DURATION_S:
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
        print(f"t={now - start:.0f}s | {rate / 1000:.1f}K tok/s | tokens={done} | "
              f"q_pre=[{','.join(str(q.qsize()) for q in prompts)}] q_hs=[{hidden.qsize()}]", flush=True)
        last_t, last_tokens = now, done
    stop.set()
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.terminate()
    del ballast
    print(f"pipeline: done, {tokens.value} tokens", flush=True)


if __name__ == "__main__":
    main()
