"""``forensics fleet`` over a replayed fleet: bundles per second per worker on a local Dask cluster.

Replays the recorded samples (``samples/recorded``) into N bundles with other hosts, GPUs and times
(:mod:`forensics.fleet.replay`), then runs the real command in a fresh interpreter::

    forensics fleet DIR --workers W -o fleet.duckdb --parquet pq/ --quiet

and reads the DuckDB file back: inputs, errors, verdicts, the analysis time the workers spent
(``inputs.seconds``), and the wall and CPU time of the whole run (children included: the Dask scheduler,
nannies and worker processes are reaped by the command before it exits).

Usage::

    python bench/bench_fleet.py                    # 1200 bundles, 2 workers
    python bench/bench_fleet.py --bundles 2000 --workers 4 --keep /tmp/fleet

``bench/README.md`` (Fleet) records the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from forensics.fleet.replay import replay_fleet  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundles", type=int, default=1200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", metavar="DIR", help="write the fleet here (and keep it) instead of a temp dir")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        work = Path(args.keep or tmp)
        fleet = work / "fleet"
        t0 = time.perf_counter()
        placed = replay_fleet(ROOT / "samples" / "recorded", fleet, args.bundles)
        gen_s = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in fleet.rglob("*") if f.is_file())
        db = work / "fleet.duckdb"
        cmd = [sys.executable, "-m", "forensics", "fleet", str(fleet), "--workers", str(args.workers),
               "-o", str(db), "--parquet", str(work / "pq"), "--quiet"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode not in (0, 3):
            sys.stderr.write(proc.stderr)
            return 1
        import duckdb

        con = duckdb.connect(str(db), read_only=True)
        inputs, errors, busy, findings = con.execute(
            "SELECT count(*), count(error), sum(seconds), (SELECT count(*) FROM findings) FROM inputs").fetchone()
        workers = con.execute("SELECT count(DISTINCT worker) FROM inputs").fetchone()[0]
        loadavg = os.getloadavg()
        result = {
            "bundles": len(placed), "bytes": size, "generate_s": round(gen_s, 2), "workers": args.workers,
            "workers_seen": workers, "inputs": inputs, "errors": errors, "finding_rows": findings,
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "analysis_s": round(busy, 2),
            "bundles_per_s": round(inputs / wall, 2),
            "bundles_per_s_per_worker": round(inputs / wall / args.workers, 2),
            "cpu_s_per_bundle": round(cpu / inputs, 4),  # the whole run's CPU (scheduler, workers, DuckDB)
            "analysis_s_per_bundle": round(busy / inputs, 4), "loadavg_1m": round(loadavg[0], 2),
            "cores": os.cpu_count(),
        }
        print(json.dumps(result, indent=2))
        print(proc.stdout.split("\n\n", 1)[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
