"""A small, real PyTorch training loop: the program behind the recorded GPU samples and the
recorder's step-time benchmark.

    python bench/bench_record_train.py --steps 300                      # healthy run
    CUDA_LAUNCH_BLOCKING=1 python bench/bench_record_train.py --device-assert-at 40
                                                                        # an embedding index out of range
    python bench/bench_record_train.py --kind gpu --json                # step-time figures as one JSON line

``--kind gpu``: a wide bf16 MLP, a step of a few tens of milliseconds (GPU-bound);
``--kind python``: a tiny model, about a millisecond a step (launch/Python-bound).
Step time = wall time between two synchronisations after the warm-up, over the timed steps.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn

SHAPES = {"gpu": (8192, 4096, 4), "python": (256, 64, 2), "small": (1024, 512, 3)}  # width, batch, layers


def build(kind: str, vocab: int, device: str) -> tuple[nn.Module, int]:
    width, batch, layers = SHAPES[kind]
    blocks: list[nn.Module] = [nn.Embedding(vocab, width)]
    for _ in range(layers):
        blocks += [nn.Linear(width, width), nn.GELU()]
    blocks.append(nn.Linear(width, vocab))
    dtype = torch.bfloat16 if device == "cuda" and kind == "gpu" else torch.float32
    return nn.Sequential(*blocks).to(device=device, dtype=dtype), batch


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kind", choices=sorted(SHAPES), default="small")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--print-every", type=int, default=25)
    p.add_argument("--device-assert-at", type=int, default=-1, help="feed an out-of-range token id at this step")
    p.add_argument("--json", action="store_true", help="print the step-time figures as one JSON line at the end")
    args = p.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    vocab = 1000
    model, batch = build(args.kind, vocab, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    print(f"training {args.kind} model on {device} ({torch.cuda.get_device_name() if device == 'cuda' else 'cpu'})"
          f", {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M parameters", flush=True)
    t0 = None
    for step in range(args.steps):
        if step == args.warmup:
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        tokens = torch.randint(0, vocab, (batch,), device=device)
        if step == args.device_assert_at:
            tokens[batch // 2] = vocab + 7  # an index out of range: a device-side assert on CUDA
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits.float(), tokens)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % args.print_every == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    if device == "cuda":
        torch.cuda.synchronize()
    timed = args.steps - args.warmup
    mean_ms = (time.perf_counter() - t0) * 1000 / timed if t0 is not None and timed > 0 else float("nan")
    print(f"done: {args.steps} steps, {mean_ms:.3f} ms/step after warm-up", flush=True)
    if args.json:
        print(json.dumps({"kind": args.kind, "steps": timed, "mean_step_ms": mean_ms, "device": device}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
