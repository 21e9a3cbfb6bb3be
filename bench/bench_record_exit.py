"""What ``forensics record`` adds before and after the child: a plain run and a recorded run, side by side.

    python bench/bench_record_exit.py [--pairs 5] [--child-s 2] [--out DIR]

Each pair runs ``python -c <sleep CHILD_S>`` plainly and under ``forensics record`` (every source on, as a
user would run it: real NVML, kernel log, host snapshot; order flipped every pair). The child prints
``time.monotonic()`` when it starts and when it ends (one clock for every process on Linux), so the
recorder's cost splits into **start** (the command launched → the child's first line) and **exit** (the
child's last line → the command returned), against the same two figures of the plain run. The
manifest's ``host_snapshot`` status says whether the snapshot had to finish in the background.
Prints one JSON object (medians and every run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHILD = "import sys, time\nprint('start', time.monotonic(), flush=True)\ntime.sleep(float(sys.argv[1]))\n" \
        "print('end', time.monotonic(), flush=True)\n"


def one(argv: list[str], out_dir: Path | None) -> dict[str, Any]:
    t0 = time.monotonic()
    res = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=600)
    t1 = time.monotonic()
    marks = dict(line.split() for line in res.stdout.decode().splitlines() if line.startswith(("start", "end")))
    row: dict[str, Any] = {"rc": res.returncode, "wall_s": round(t1 - t0, 3),
                           "start_s": round(float(marks["start"]) - t0, 3),
                           "exit_s": round(t1 - float(marks["end"]), 3)}
    if out_dir is not None:
        [bundle] = [p for p in out_dir.iterdir() if p.is_dir()]
        m = json.loads((bundle / "manifest.json").read_text())
        row["host_snapshot"] = m["sources"].get("host_snapshot", {}).get("status")
        row["nvml"] = m["sources"].get("nvml", {}).get("status")
        shutil.rmtree(out_dir)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--child-s", type=float, default=2.0)
    ap.add_argument("--out", type=Path, default=None, help="where bundles go while measured (default: a temp dir)")
    args = ap.parse_args()
    base = args.out or Path(tempfile.mkdtemp(prefix="bench-exit-"))
    child = [sys.executable, "-c", CHILD, str(args.child_s)]
    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "recorded": []}
    for i in range(args.pairs):
        order = ("plain", "recorded") if i % 2 == 0 else ("recorded", "plain")
        for mode in order:
            if mode == "plain":
                runs[mode].append(one(child, None))
            else:
                out = base / f"runs-{i}"
                argv = [sys.executable, "-m", "forensics", "record", "--out", str(out), "--", *child]
                runs[mode].append(one(argv, out))
    summary: dict[str, Any] = {"pairs": args.pairs, "child_s": args.child_s, "cpus": os.cpu_count(),
                               "host": os.uname().nodename, "gpu": shutil.which("nvidia-smi") is not None}
    for mode, rows in runs.items():
        summary[mode] = {k: round(statistics.median(r[k] for r in rows), 3) for k in ("wall_s", "start_s", "exit_s")}
    summary["added_s"] = {k: round(summary["recorded"][k] - summary["plain"][k], 3)
                          for k in ("wall_s", "start_s", "exit_s")}
    summary["runs"] = runs
    if args.out is None:
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
