"""The live watcher on a real GPU, in one device call (under 10 minutes on one H200).

    PYTHONPATH=$PWD python3 bench/bench_live_gpu.py OUT_DIR [--quick]

Every scenario runs under ``forensics record`` (the watcher on, its defaults: stall after max(60 s,
5 x the median step)); the scenario programs note when they inject their fault in a side file
(``LIVE_FAULT_FILE``), never in the run's output. Latency = the first ``new`` alert's raise time
(``live.jsonl``) minus that moment.

1. ``drafters-die``: report 2's pipeline on one GPU (samples/scenarios/drafter_pipeline.py, the
   shipped calibration, ``CUDA_MODULE_LOADING=EAGER``): drafters 6 and 7 die at their first optimizer
   step, swallowed; expected silent-worker-stall naming ranks 6, 7;
2. ``drafters-freeze``: the same with ``PIPELINE_FREEZE=1``: they retry for ever at their memory cap;
3. ``drafters-fit``: the same with ``CUDA_MODULE_LOADING=LAZY``: healthy, no alert expected;
4. ``illegal-access``: four processes train, rank 2 reads 8 TiB past a tensor (user level);
   expected cuda-illegal-memory-access naming rank 2;
5. step time with the watcher and without (``--no-watch``), interleaved pairs, GPU-bound and
   launch-bound (bench/bench_record_train.py).

Writes OUT_DIR/live-gpu.json (everything), OUT_DIR/<scenario>.tgz (the bundles) and prints a summary.
Never touches the GPU's settings.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCEN = ROOT / "samples" / "scenarios"
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
            "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
PIPELINE = {"PIPELINE_CAPACITY_MIB": "28207", "PIPELINE_DRAFTER_MIB": "843"}  # samples/scenarios/drafter_h200.env


def record(out: Path, cmd: list[str], env: dict[str, str], extra: list[str] = (), timeout: float = 240  # type: ignore[assignment]
           ) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    fault = out / "fault.txt"
    full_env = {**os.environ, **SAFE_ENV, **env, "LIVE_FAULT_FILE": str(fault)}
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "forensics", "record", "--out", str(out / "runs"), *extra, "--", *cmd],
                         capture_output=True, text=True, env=full_env, timeout=timeout, cwd=SCEN)
    took = time.monotonic() - t0
    bundles = sorted(p for p in (out / "runs").iterdir() if p.is_dir())
    b = bundles[-1]
    live = b / "live.jsonl"
    alerts = [json.loads(ln) for ln in live.read_text().splitlines()] if live.exists() else []
    faults = [ln.split(" ", 1) for ln in fault.read_text().splitlines()] if fault.exists() else []
    manifest = json.loads((b / "manifest.json").read_text())
    first_fault = min((int(t) for t, _ in faults), default=None)
    new = [a for a in alerts if a["kind"] == "new"]
    return {
        "rc": res.returncode, "wall_s": round(took, 1), "bundle": str(b),
        "child_s": round((manifest["end_ns"] - manifest["start_ns"]) / 1e9, 2) if manifest.get("end_ns") else None,
        "faults": faults, "live_source": manifest["sources"].get("live"),
        "alerts": [{k: a.get(k) for k in ("kind", "signature", "culprit", "confidence", "time", "detected_after_s",
                                            "remedy", "suppressed")} | {"evidence": a["evidence"][:2]} for a in alerts],
        "first_alert_latency_s": round((new[0]["time_ns"] - first_fault) / 1e9, 2) if new and first_fault else None,
        "stdout_tail": res.stdout[-1200:], "stderr_tail": res.stderr[-1500:],
        "live_log": (b / "live.log").read_text()[-1500:] if (b / "live.log").exists() else "",
    }


def analyze(bundle: str) -> dict[str, Any]:
    res = subprocess.run([sys.executable, "-m", "forensics", "analyze", "--format", "json", bundle],
                         capture_output=True, text=True, env={**os.environ, **SAFE_ENV}, timeout=300)
    try:
        v = json.loads(res.stdout)["verdict"]
    except (ValueError, KeyError):
        return {"rc": res.returncode, "error": res.stderr[-800:]}
    return {"rc": res.returncode, "root_cause": v["root_cause"], "blame": (v.get("blame") or {}).get("line")}


def step_times(kind: str, steps: int, pairs: int, work: Path) -> dict[str, Any]:
    train = [sys.executable, str(HERE / "bench_record_train.py"), "--kind", kind, "--steps", str(steps),
             "--print-every", "100", "--json"]
    times: dict[str, list[float]] = {"watched": [], "unwatched": []}
    for pair in range(pairs):
        for mode in (("watched", "unwatched") if pair % 2 == 0 else ("unwatched", "watched")):
            extra = [] if mode == "watched" else ["--no-watch"]
            res = subprocess.run([sys.executable, "-m", "forensics", "record", "--out", str(work / f"{kind}-{mode}"),
                                  *extra, "--", *train], capture_output=True, text=True,
                                 env={**os.environ, **SAFE_ENV}, timeout=300)
            lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
            if res.returncode != 0 or not lines:
                return {"kind": kind, "error": res.stderr[-1500:]}
            times[mode].append(float(json.loads(lines[-1])["mean_step_ms"]))
    w, u = statistics.median(times["watched"]), statistics.median(times["unwatched"])
    spread = (max(times["unwatched"]) / min(times["unwatched"]) - 1) * 100
    return {"kind": kind, "steps": steps, "pairs": pairs, "watched_ms": times["watched"],
            "unwatched_ms": times["unwatched"], "median_watched_ms": round(w, 4),
            "median_unwatched_ms": round(u, 4), "watched_vs_unwatched_pct": round((w / u - 1) * 100, 3),
            "spread_unwatched_pct": round(spread, 3)}


def main() -> int:
    out = Path(sys.argv[1])
    quick = "--quick" in sys.argv
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gf-live-"))
    results: dict[str, Any] = {"started": time.time(), "quick": quick}
    if shutil.which("nvidia-smi"):
        results["gpus"] = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    try:
        import apprise  # noqa: F401
        results["apprise"] = True
    except ImportError:
        results["apprise"] = False
    duration = "20" if quick else "80"
    scenarios = {
        "drafters-die": (["python3", "drafter_pipeline.py"],
                         {**PIPELINE, "CUDA_MODULE_LOADING": "EAGER", "PIPELINE_DURATION_S": duration}),
        "drafters-freeze": (["python3", "drafter_pipeline.py"],
                            {**PIPELINE, "CUDA_MODULE_LOADING": "EAGER", "PIPELINE_FREEZE": "1",
                             "PIPELINE_DURATION_S": duration}),
        "drafters-fit": (["python3", "drafter_pipeline.py"],
                         {**PIPELINE, "CUDA_MODULE_LOADING": "LAZY", "PIPELINE_DURATION_S": "30" if quick else "60"}),
        "illegal-access": (["python3", "illegal_access.py"], {"IMA_STEPS": "60" if quick else "100"}),
    }
    for name, (cmd, env) in scenarios.items():
        t = time.monotonic()
        try:
            r = record(work / name, cmd, env)
            r["analyze"] = analyze(r["bundle"])
            with tarfile.open(out / f"{name}.tgz", "w:gz") as tar:
                tar.add(r["bundle"], arcname=Path(r["bundle"]).name)
        except Exception as exc:  # noqa: BLE001 - one scenario's failure is reported, the others run
            r = {"error": f"{type(exc).__name__}: {exc}"}
        results[name] = r
        first = next((a for a in r.get("alerts", []) if a["kind"] == "new"), None)
        print(f"{name}: rc {r.get('rc')} in {time.monotonic() - t:.0f} s; first alert "
              f"{first['signature'] if first else None} ({first['culprit'][:80] if first else ''}); latency "
              f"{r.get('first_alert_latency_s')} s; alerts {len(r.get('alerts', []))}; "
              f"analyze {r.get('analyze', {}).get('root_cause')}", flush=True)
        (out / "live-gpu.json").write_text(json.dumps(results, indent=1))
    steps = [("gpu", 150 if quick else 400, 1 if quick else 2), ("python", 500 if quick else 2000, 1 if quick else 2)]
    results["step_time"] = [step_times(kind, n, pairs, work) for kind, n, pairs in steps]
    for s in results["step_time"]:
        print("step time", json.dumps(s), flush=True)
    results["finished"] = time.time()
    (out / "live-gpu.json").write_text(json.dumps(results, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
