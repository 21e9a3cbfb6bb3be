"""Everything the recorder needs from a real GPU, in one run (one device call).

    python3 bench/bench_record_gpu.py OUT_DIR

1. records a short healthy training run and a run that hits a device-side assert
   (embedding index out of range, ``CUDA_LAUNCH_BLOCKING=1``);
2. checks the assert bundle holds the kernel's ``NVRM: Xid ... 43`` line, the NVML Xid
   event, NVML samples and the traceback, and that no secret-named environment value of
   this machine landed in either bundle;
3. runs ``forensics analyze`` on both;
4. runs the step-time benchmark (bench_record_steps.py) and the chatty-output benchmark;
5. packs the two bundles as OUT_DIR/healthy.tgz and OUT_DIR/device-assert.tgz and writes
   OUT_DIR/results.json. Never touches the GPU's settings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
            "PYTHONPATH": str(ROOT)}


def sh(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    return res


def record(out: Path, train_args: list[str], extra_env: dict[str, str]) -> tuple[int, Path, str]:
    env = {**os.environ, **SAFE_ENV, **extra_env}
    cmd = [sys.executable, "-m", "forensics", "record", "--out", str(out), "--",
           sys.executable, str(HERE / "bench_record_train.py"), *train_args]
    res = sh(cmd, env=env)
    [bundle] = [p for p in out.iterdir() if p.is_dir()]
    return res.returncode, bundle, res.stdout[-1500:] + res.stderr[-3000:]


def check_assert_bundle(b: Path) -> dict[str, Any]:
    kmsg = (b / "kmsg.log").read_bytes() if (b / "kmsg.log").exists() else b""
    xid_lines = [ln.decode(errors="replace") for ln in kmsg.splitlines() if b"NVRM: Xid" in ln]
    events = [json.loads(ln) for ln in (b / "nvml-events.jsonl").read_text().splitlines()[1:] if ln.strip()]
    ticks = sum(1 for ln in (b / "nvml.jsonl").read_text().splitlines() if ln.startswith('{"t":'))
    stderr = (b / "stderr.log").read_text(errors="replace")
    return {
        "kernel_xid_lines": xid_lines,
        "kernel_xid_43": any(": 43," in ln for ln in xid_lines),
        "nvml_xid_events": [e for e in events if e.get("type") == "xid"],
        "nvml_ticks": ticks,
        "traceback": "Traceback (most recent call last)" in stderr,
        "device_side_assert": "device-side assert" in stderr,
    }


def secrets_check(bundles: list[Path]) -> dict[str, Any]:
    from forensics.record.redact import is_secret_name

    secret_values = {k: v for k, v in os.environ.items() if is_secret_name(k) and len(v) >= 6}
    long_values = {k: v for k, v in os.environ.items() if len(v) >= 16 and k not in ("PATH", "PYTHONPATH")}
    found = []
    for b in bundles:
        for path in b.rglob("*"):
            if not path.is_file():
                continue
            data = path.read_bytes()
            for k, v in secret_values.items():
                if v.encode() in data:
                    found.append(f"{k} in {path.relative_to(b)}")
    return {"env_names": sorted(os.environ), "secret_named": sorted(secret_values), "leaks": found,
            "long_value_names": sorted(long_values)}


def analyze(b: Path) -> dict[str, Any]:
    res = sh([sys.executable, "-m", "forensics", "analyze", "--format", "json", str(b)],
             env={**os.environ, **SAFE_ENV})
    try:
        data = json.loads(res.stdout)
    except ValueError:
        return {"error": res.stderr[-2000:]}
    return {"rc": res.returncode, "verdict": data["verdict"], "recordings": data["recordings"],
            "sources": [(s["path"].rsplit("/", 1)[-1], s["kind"], s["events"], s["metrics"]) for s in data["sources"]],
            "kinds": data["timeline"]["kinds"]}


def main() -> int:
    out = Path(sys.argv[1])
    quick = "--quick" in sys.argv  # a dry run on a CPU machine: tiny runs only
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gf-record-"))
    results: dict[str, Any] = {"started": time.time()}
    if shutil.which("nvidia-smi"):
        print(sh(["nvidia-smi", "-L"]).stdout, flush=True)

    kind = "python" if quick else "gpu"
    rc, healthy, tail = record(work / "healthy", ["--kind", kind, "--steps", "60" if quick else "300",
                                                  "--print-every", "25"], {})
    results["healthy"] = {"rc": rc, "bundle": healthy.name, "tail": tail[-800:]}
    print("healthy rc", rc, flush=True)
    rc, bad, tail = record(work / "assert", ["--kind", "small", "--steps", "200", "--device-assert-at", "60"],
                           {"CUDA_LAUNCH_BLOCKING": "1"})
    results["assert"] = {"rc": rc, "bundle": bad.name, "tail": tail[-1500:], "check": check_assert_bundle(bad)}
    print("assert rc", rc, json.dumps(results["assert"]["check"], indent=1), flush=True)
    results["secrets"] = secrets_check([healthy, bad])
    results["analyze"] = {"healthy": analyze(healthy), "assert": analyze(bad)}
    for name, b in (("healthy", healthy), ("device-assert", bad)):
        with tarfile.open(out / f"{name}.tgz", "w:gz") as tar:
            tar.add(b, arcname=b.name)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))

    from bench_record import chatty
    from bench_record_steps import bench

    if quick:
        import bench_record_steps

        bench_record_steps.STEPS.update(gpu=30, python=30)
    results["steps"] = bench(["python"] if quick else ["gpu", "python"], pairs=1 if quick else 3, interval=0.1)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    lines, pairs = (20_000, 1) if quick else (2_000_000, 3)
    results["chatty"] = [chatty(lines, pairs, unbuffered) for unbuffered in (False, True)]
    results["finished"] = time.time()
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    print("=== summary ===")
    print("analyze healthy:", json.dumps(results["analyze"]["healthy"].get("verdict")))
    print("analyze assert:", json.dumps(results["analyze"]["assert"].get("verdict")))
    print("secrets:", results["secrets"]["secret_named"], "leaks:", results["secrets"]["leaks"])
    for s in results["steps"]:
        print("steps", s["kind"], s["median_plain_ms"], s["median_recorded_ms"], s["overhead_pct"], "%",
              "spread", s["spread_plain_pct"], json.dumps(s["nvml_size"]))
    for c in results["chatty"]:
        print("chatty", json.dumps(c))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
