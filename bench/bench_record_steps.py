"""Training step time with and without the recorder (NVML at 10 Hz), interleaved runs.

    python bench/bench_record_steps.py [--kinds gpu,python] [--pairs 3] [--json-out FILE]

Each run is a fresh process of bench/bench_record_train.py that reports its mean step
time after the warm-up; runs alternate plain / recorded (order flipped every pair) so
drift hits both. The recorded runs' bundles are kept in a temporary directory long
enough to measure their NVML bytes per sample (bench/bench_record.py ``size``).
Needs PyTorch and, to mean anything, a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_record import nvml_size  # noqa: E402

STEPS = {"gpu": 400, "python": 2000, "small": 600}


def _mean_step(cmd: list[str], env: dict[str, str]) -> float:
    res = subprocess.run(cmd, capture_output=True, env=env, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"{cmd} failed: {res.stderr.decode(errors='replace')[-2000:]}")
    last = [ln for ln in res.stdout.decode().splitlines() if ln.startswith("{")][-1]
    return float(json.loads(last)["mean_step_ms"])


def bench(kinds: list[str], pairs: int, interval: float) -> list[dict[str, Any]]:
    env = {**os.environ}
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            train = [sys.executable, str(HERE / "bench_record_train.py"), "--kind", kind, "--steps",
                     str(STEPS[kind]), "--print-every", "100", "--json"]
            runs = Path(tmp) / kind
            recorded = [sys.executable, "-m", "forensics", "record", "--out", str(runs), "--interval", str(interval),
                        "--", *train]
            times: dict[str, list[float]] = {"plain": [], "recorded": []}
            for pair in range(pairs):
                for mode in (("plain", "recorded") if pair % 2 == 0 else ("recorded", "plain")):
                    times[mode].append(_mean_step(train if mode == "plain" else recorded, env))
            plain, rec = statistics.median(times["plain"]), statistics.median(times["recorded"])
            sizes = [nvml_size(b) for b in sorted(runs.iterdir()) if b.is_dir()]
            out.append({"kind": kind, "pairs": pairs, "interval_s": interval,
                        "plain_ms": [round(t, 4) for t in times["plain"]],
                        "recorded_ms": [round(t, 4) for t in times["recorded"]],
                        "median_plain_ms": round(plain, 4), "median_recorded_ms": round(rec, 4),
                        "overhead_pct": round((rec / plain - 1) * 100, 3),
                        "spread_plain_pct": round((max(times["plain"]) / min(times["plain"]) - 1) * 100, 3),
                        "nvml_size": sizes[-1] if sizes else None})
            print(json.dumps(out[-1]), flush=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kinds", default="gpu,python")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--interval", type=float, default=0.1)
    p.add_argument("--steps", type=int, help="steps per run (default: per kind)")
    p.add_argument("--json-out")
    args = p.parse_args()
    if args.steps:
        STEPS.update(dict.fromkeys(STEPS, args.steps))
    results = bench(args.kinds.split(","), args.pairs, args.interval)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
