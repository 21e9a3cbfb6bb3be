"""Recorder benchmarks that need no GPU (see bench/README.md, "Recorder").

    python bench/bench_record.py chatty [--lines 2000000] [--pairs 3]
        a chatty child (2 M short lines) with and without the recorder, interleaved; the
        child's own duration (what training would feel) and the whole wall time.
    python bench/bench_record.py size BUNDLE...
        NVML bytes per sample per GPU in recorded bundles, extrapolated to MB per 8-GPU
        node-hour at the bundle's interval (raw JSONL and as stored after gzip-on-rotate).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHILD = """
import os, sys, time
t0 = time.perf_counter()
write = sys.stdout.write
for i in range({lines}):
    write(f"step {{i}} loss 0.{{i % 9973:04d}} lr 3e-4\\n")
sys.stdout.flush()
os.write(2, f"CHILD_SECONDS {{time.perf_counter() - t0:.6f}}\\n".encode())
"""


def _run_once(cmd: list[str], env: dict[str, str], out_dir: Path) -> tuple[float, float]:
    with open(out_dir / "terminal.txt", "wb") as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=out, stderr=err, env=env, check=True)
        wall = time.perf_counter() - t0
        err.seek(0)
        text = err.read().decode()
    child = float(text.split("CHILD_SECONDS")[-1].split()[0])
    return child, wall


def chatty(lines: int, pairs: int, unbuffered: bool) -> dict[str, Any]:
    env = {**os.environ, "FORENSICS_KERNEL_LOG": "none"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    child = [sys.executable, "-c", CHILD.format(lines=lines)]
    results: dict[str, list[tuple[float, float]]] = {"plain": [], "recorded": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        recorded = [sys.executable, "-m", "forensics", "record", "--out", str(tmpdir / "runs"), "--", *child]
        for pair in range(pairs):
            order = ("plain", "recorded") if pair % 2 == 0 else ("recorded", "plain")
            for mode in order:
                results[mode].append(_run_once(child if mode == "plain" else recorded, env, tmpdir))
        log_bytes = sum(p.stat().st_size for p in (tmpdir / "runs").rglob("stdout.log"))
        idx_bytes = sum(p.stat().st_size for p in (tmpdir / "runs").rglob("stdout.idx"))
    med = {m: (statistics.median(c for c, _ in r), statistics.median(w for _, w in r)) for m, r in results.items()}
    return {
        "lines": lines, "pairs": pairs, "unbuffered": unbuffered,
        "child_s": {m: round(v[0], 3) for m, v in med.items()},
        "wall_s": {m: round(v[1], 3) for m, v in med.items()},
        "child_ratio": round(med["recorded"][0] / med["plain"][0], 4),
        "wall_ratio": round(med["recorded"][1] / med["plain"][1], 4),
        "stdout_log_bytes_per_run": log_bytes // pairs,
        "stdout_idx_bytes_per_run": idx_bytes // pairs,
    }


def _segments(bundle: Path) -> list[bytes]:
    out = []
    for path in sorted(bundle.glob("nvml*.jsonl*")):
        if path.name.startswith("nvml-events") or path.name.endswith(".tmp"):
            continue
        raw = path.read_bytes()
        out.append(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return out


def nvml_size(bundle: Path) -> dict[str, Any]:
    """Bytes per tick per GPU in one bundle, extrapolated to an 8-GPU node-hour."""
    key_bytes = delta_bytes = keys = deltas = 0
    gpus = 0
    interval = 0.1
    raw_all = b""
    for seg in _segments(bundle):
        raw_all += seg
        for line in seg.splitlines():
            obj = json.loads(line) if line.strip() else None
            if not isinstance(obj, dict):
                continue
            if "format" in obj:
                gpus = len(obj.get("gpus", [])) or gpus
                interval = float(obj.get("interval_s", interval))
            elif obj.get("k"):
                keys += 1
                key_bytes += len(line) + 1
            else:
                deltas += 1
                delta_bytes += len(line) + 1
    if not gpus or not deltas:
        return {"bundle": str(bundle), "error": "no NVML samples"}
    ticks_per_hour = 3600 / interval
    keys_per_hour = 60  # one keyframe a minute
    per_gpu_hour = ((ticks_per_hour - keys_per_hour) * delta_bytes / deltas
                    + keys_per_hour * key_bytes / max(keys, 1)) / gpus
    gz_ratio = len(gzip.compress(raw_all, 6)) / len(raw_all)
    return {
        "bundle": bundle.name, "gpus": gpus, "interval_s": interval, "ticks": keys + deltas,
        "delta_bytes_per_tick_per_gpu": round(delta_bytes / deltas / gpus, 1),
        "keyframe_bytes_per_gpu": round(key_bytes / max(keys, 1) / gpus, 1),
        "raw_mb_per_gpu_hour": round(per_gpu_hour / 1e6, 2),
        "gzip_ratio": round(gz_ratio, 3),
        "stored_mb_per_8gpu_node_hour": round(8 * per_gpu_hour * gz_ratio / 1e6, 2),
        "raw_mb_per_8gpu_node_hour": round(8 * per_gpu_hour / 1e6, 2),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("chatty")
    c.add_argument("--lines", type=int, default=2_000_000)
    c.add_argument("--pairs", type=int, default=3)
    s = sub.add_parser("size")
    s.add_argument("bundles", nargs="+")
    args = p.parse_args()
    if args.cmd == "chatty":
        for unbuffered in (False, True):
            print(json.dumps(chatty(args.lines, args.pairs, unbuffered)), flush=True)
    else:
        for b in args.bundles:
            print(json.dumps(nvml_size(Path(b))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
