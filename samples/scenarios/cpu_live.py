"""Scripted CPU children for the live watcher's tests and bench (no GPU, no torch).

Several "ranks" (processes) print training steps the way torchrun's workers do
(``[rank3]: step 12 | loss 0.4 | 21,500 tokens/s | 200.0 ms/step``), and one fault is injected at
step ``--fault-at``. At that moment the program prints ``FAULT <UTC ns> <mode>`` on stderr, so a
measurement knows when the fault happened.

modes:
  healthy   every rank runs to the end (checkpoint saves: --pause S; evaluations: --eval-s S)
  raise     rank --rank raises an uncaught exception (--exc: oom | value | nccl); the others go on
  stop      rank --rank stops printing (stuck), its process alive; the others go on
  halve     every rank's step time doubles: throughput halves and stays down
  hang      every rank stops printing (a collective hang)
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import signal
import sys
import time

EXCEPTIONS = {
    "oom": ("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of "
            "79.19 GiB of which 1.06 GiB is free. Of the allocated memory 75.12 GiB is allocated by PyTorch"),
    "value": ("ValueError", "expected a batch of 8 sequences, got 7"),
    "nccl": ("torch.distributed.DistBackendError", "NCCL error in: ../torch/csrc/distributed/c10d/"
             "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), "
             "NCCL version 2.21.5"),
}


def _fault(mode: str) -> None:
    print(f"FAULT {time.time_ns()} {mode}", file=sys.stderr, flush=True)


def _raise(rank: int, exc: str) -> None:
    name, message = EXCEPTIONS[exc]
    lines = ["Traceback (most recent call last):",
             '  File "/workspace/train.py", line 212, in <module>',
             "    main()",
             '  File "/workspace/train.py", line 188, in main',
             "    loss.backward()" if exc == "oom" else "    batch = next(loader)",
             f"{name}: {message}"]
    _fault("raise")
    sys.stderr.write("".join(f"[rank{rank}]: {ln}\n" for ln in lines))
    sys.stderr.flush()
    sys.exit(1)


def rank_main(rank: int, args: argparse.Namespace) -> None:
    step_s = args.step
    for step in range(args.steps):
        t0 = time.monotonic()
        if step == args.fault_at:
            if args.mode == "raise" and rank == args.rank:
                _raise(rank, args.exc)
            if args.mode == "stop" and rank == args.rank:
                _fault("stop")
                time.sleep(10**6)
            if args.mode == "hang":
                if rank == 0:
                    _fault("hang")
                time.sleep(10**6)
            if args.mode == "halve":
                if rank == 0:
                    _fault("halve")
                step_s = args.step * 2
        if args.pause and step and step % args.pause_every == 0:
            if rank == 0:
                print(f"[rank{rank}]: Saving model checkpoint to /ckpt/step_{step}", flush=True)
            time.sleep(args.pause)
        if args.eval_s and step and step % args.eval_every == 0:
            if rank == 0:
                print(f"[rank{rank}]: ***** Running evaluation at step {step} *****", flush=True)
            time.sleep(args.eval_s)
            if rank == 0:
                print(f"[rank{rank}]: eval_loss = {1.0 / (step + 1) ** 0.5:.4f}", flush=True)
        time.sleep(max(0.0, step_s - (time.monotonic() - t0)))
        ms = (time.monotonic() - t0) * 1000
        tokens = int(args.tokens / (ms / 1000))
        print(f"[rank{rank}]: step {step} | loss {2.0 / (step + 1) ** 0.5:.4f} | {tokens:,} tokens/s | "
              f"{ms:.1f} ms/step", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("healthy", "raise", "stop", "halve", "hang"), default="healthy")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--rank", type=int, default=1, help="the rank the fault hits")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--step", type=float, default=0.2, help="seconds per step")
    p.add_argument("--fault-at", type=int, default=20)
    p.add_argument("--exc", choices=tuple(EXCEPTIONS), default="oom")
    p.add_argument("--tokens", type=int, default=4096, help="tokens per step")
    p.add_argument("--pause", type=float, default=0.0, help="seconds of a checkpoint save every --pause-every steps")
    p.add_argument("--pause-every", type=int, default=50)
    p.add_argument("--eval-s", type=float, default=0.0, help="seconds of an evaluation every --eval-every steps")
    p.add_argument("--eval-every", type=int, default=80)
    p.add_argument("--hang-for", type=float, default=30.0, help="hang: seconds the job stays hung before it ends")
    args = p.parse_args()
    procs = [mp.Process(target=rank_main, args=(r, args), daemon=True) for r in range(args.ranks)]
    for proc in procs:
        proc.start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the ranks go with the job
    try:
        return _wait(procs, args)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()


def _wait(procs: list[mp.Process], args: argparse.Namespace) -> int:
    if args.mode == "stop":  # the job ends when the ranks that were not stuck are done
        for r, proc in enumerate(procs):
            if r != args.rank:
                proc.join()
    elif args.mode == "hang":  # nobody ends: the user kills it after a while
        time.sleep(args.step * args.fault_at + args.hang_for)
    else:
        for proc in procs:
            proc.join()
    return max((proc.exitcode or 0 for proc in procs if not proc.is_alive()), default=0)


if __name__ == "__main__":
    sys.exit(main())
