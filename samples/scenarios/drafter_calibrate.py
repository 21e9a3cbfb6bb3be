"""Choose ``drafter_pipeline.py``'s capacity from measured sizes, so run A fits and run B does not.

Measured on the GPU it runs on, each in a fresh process:
- E: how much more device memory a process's CUDA context takes with ``CUDA_MODULE_LOADING=EAGER``
  than with ``LAZY`` (after the same small matmul and AdamW step);
- D: what one drafter's first optimizer step adds (AdamW's moment buffers and its scratch);
- U: what the whole pipeline holds in steady state under ``LAZY`` (capacity minus free memory).

Before the first optimizer steps the pipeline holds U0 = U - 3·D. Run B's eight contexts add 8·E.
The capacity C = U0 + 8·E + 1.4·D leaves run A 8·E - 1.6·D of headroom, and leaves run B room for one
drafter's first step (D) but not a second one's. Prints ``PIPELINE_CAPACITY_MIB=… PIPELINE_DRAFTER_MIB=…``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pynvml

HERE = os.path.dirname(os.path.abspath(__file__))

CONTEXT_PROBE = """
import json, torch, pynvml
pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
before = pynvml.nvmlDeviceGetMemoryInfo(h).used
x = torch.randn(256, 1024, device="cuda"); w = torch.nn.Linear(1024, 1024).cuda()
opt = torch.optim.AdamW(w.parameters()); w(x).sum().backward(); opt.step(); torch.cuda.synchronize()
print(json.dumps({"delta": pynvml.nvmlDeviceGetMemoryInfo(h).used - before}))
"""

STEP_PROBE = """
import json, sys, torch
sys.path.insert(0, {here!r})
import drafter_pipeline as p
torch.cuda.set_device(0)
m = p.stack({mib}, torch.float32); opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
x = torch.randn(p.TOKENS, p.HIDDEN, device="cuda"); (m(x) - x).square().mean().backward()
torch.cuda.synchronize(); before = torch.cuda.memory_reserved()
opt.step(); torch.cuda.synchronize()
print(json.dumps({{"delta": torch.cuda.memory_reserved() - before}}))
"""

MIB = 2**20


def probe(code: str, **env: str) -> int:
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, check=True,
                         capture_output=True, text=True).stdout
    return int(json.loads(out.strip().splitlines()[-1])["delta"])


def steady_usage(capacity_mib: int) -> int:
    """Run the pipeline under LAZY with room to spare; the most it held at once, in bytes."""
    env = {**os.environ, "CUDA_MODULE_LOADING": "LAZY", "PIPELINE_CAPACITY_MIB": str(capacity_mib),
           "PIPELINE_DURATION_S": "15", "PIPELINE_DRAFTER_MIB": os.environ["PIPELINE_DRAFTER_MIB"]}
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "drafter_pipeline.py")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    least_free = capacity_mib * MIB
    while proc.poll() is None:  # the peak: after start-up, once every drafter has taken its first step
        least_free = min(least_free, pynvml.nvmlDeviceGetMemoryInfo(h).free)
        time.sleep(0.2)
    sys.stderr.write(proc.stdout.read() if proc.stdout else "")
    return capacity_mib * MIB - least_free


def main() -> None:
    pynvml.nvmlInit()
    lazy = probe(CONTEXT_PROBE, CUDA_MODULE_LOADING="LAZY")
    eager = probe(CONTEXT_PROBE, CUDA_MODULE_LOADING="EAGER")
    e = eager - lazy
    drafter_mib = max(64, round(0.8 * e / MIB))
    os.environ["PIPELINE_DRAFTER_MIB"] = str(drafter_mib)
    d = probe(STEP_PROBE.format(here=HERE, mib=drafter_mib), CUDA_MODULE_LOADING="LAZY")
    u = steady_usage(60_000)
    u0 = u - 3 * d
    capacity = u0 + 8 * e + int(1.4 * d)
    facts = {"context_lazy_mib": lazy / MIB, "context_eager_mib": eager / MIB, "E_mib": e / MIB,
             "D_mib": d / MIB, "U_mib": u / MIB, "capacity_mib": capacity // MIB,
             "headroom_A_mib": (capacity - u) / MIB, "drafter_mib": drafter_mib}
    sys.stderr.write(json.dumps(facts, indent=1) + "\n")
    print(f"PIPELINE_CAPACITY_MIB={capacity // MIB} PIPELINE_DRAFTER_MIB={drafter_mib}")


if __name__ == "__main__":
    main()
