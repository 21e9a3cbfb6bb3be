"""The live watcher, measured without a GPU (bench/README.md, "Live watcher", has the figures).

    python bench/bench_live.py replays   [--speed 1]   # the shipped recordings at their own pace
    python bench/bench_live.py children  [--pairs 2]   # scripted CPU children under forensics record
    python bench/bench_live.py realcases [--limit N]   # tests/realcases*/ replayed line by line
    python bench/bench_live.py cost      [--seconds 300] [--rate 1000]
    python bench/bench_live.py long      [--minutes 14] [--loops2h 9] [--loops24h 104]

Latency is always from the moment of the fault to the moment the alert was raised (``time_ns`` in
live.jsonl): for a replay, the write of the line that is the root cause's first evidence; for a
scripted child, the ``FAULT <ns>`` line it prints on stderr when it injects the fault. A replay with
``--speed`` > 1 (and ``long``'s 2-hour and 24-hour runs) writes faster than real time while the times
in the files keep their spacing; the watcher is told (``--time-scale``) and the figures say so.
Each result goes to bench/results/live-<what>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
RESULTS = HERE / "results"
CHILD = ROOT / "samples" / "scenarios" / "cpu_live.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def _save(what: str, data: Any) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"live-{what}.json").write_text(json.dumps(data, indent=1) + "\n")


def _watch(paths: list[str], *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "forensics", "watch", "--format", "json", *extra, *paths],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def _rss_sampler(pid: int, every: float, out: list[tuple[float, float]], stop: threading.Event) -> None:
    t0 = time.monotonic()
    while not stop.wait(every):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        kb = next((int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmRSS:")), 0)
        out.append((round(time.monotonic() - t0, 1), round(kb / 1024, 1)))


# -- the shipped recordings ------------------------------------------------------------------------------
def replays(args: argparse.Namespace) -> None:
    from forensics.analysis import analyze
    from forensics.live.replay import BundleReplay

    rows = []
    for sample in sorted((ROOT / "samples" / "recorded").iterdir()):
        src = sample / "bundle"
        if not src.is_dir():
            continue
        want = tomllib.loads((sample / "expected.toml").read_text()).get("root_cause", "none")
        ref = analyze([str(src)]).verdict
        streamed = ("stdout.log", "stderr.log", "kmsg.log", "nvml.jsonl", "nvml-events.jsonl")
        marks = [] if ref.root_cause is None else [
            (Path(e.origin.path).name, e.origin.line) for e in ref.root_cause.evidence
            if Path(e.origin.path).name in streamed]  # the fault: the first of these the replay writes
        with tempfile.TemporaryDirectory() as tmp:
            replay = BundleReplay(src, Path(tmp), speed=args.speed, marks=marks)
            writer = threading.Thread(target=replay.run)
            writer.start()
            time.sleep(0.3)
            stats = Path(tmp) / "stats.json"
            proc = _watch([str(replay.dst)], "--exit-when-done", "--time-scale", str(args.speed), "--stats",
                          str(stats))
            out, err = proc.communicate(timeout=3600)
            writer.join()
            alerts = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
            fault = min(replay.written.values(), default=None)
            new = [a for a in alerts if a["kind"] == "new"]
            hit = next((a for a in new if a["signature"] == want), None)
            row = {"sample": sample.name, "expected": want, "analyze": ref.root_cause_id,
                   "duration_s": round((replay.end - replay.start) / 1e9, 1), "speed": args.speed,
                   "alerts": [(a["kind"], a["signature"], a["culprit"][:100],
                               round((a["time_ns"] - fault) / 1e9, 2) if fault else None) for a in alerts],
                   "false_alerts": len(new) if want == "none" else None,
                   "first_told": new[0]["signature"] if new else None,
                   "first_alert_latency_s": round((new[0]["time_ns"] - fault) / 1e9, 2) if new and fault else None,
                   "latency_s": round((hit["time_ns"] - fault) / 1e9, 2) if hit and fault else None,
                   "fault_lines": marks[:3],
                   "watcher": json.loads(stats.read_text()) if stats.exists() else {"error": err[-500:]}}
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("sample", "expected", "alerts", "first_alert_latency_s", "latency_s",
                                                  "false_alerts")}), flush=True)
    _save(f"replays-x{args.speed:g}", rows)


# -- scripted CPU children ---------------------------------------------------------------------------------
CHILDREN = {  # name: (cpu_live.py arguments, the signature expected, record flags)
    "rank-raises-oom": (["--mode", "raise", "--exc", "oom", "--steps", "60", "--fault-at", "25"], "torch-cuda-oom", []),
    "rank-raises-value": (["--mode", "raise", "--exc", "value", "--steps", "60", "--fault-at", "25"],
                          "unrecognized-failure", []),
    "rank-nccl-error": (["--mode", "raise", "--exc", "nccl", "--steps", "60", "--fault-at", "25"], "nccl-error", []),
    "rank-stops": (["--mode", "stop", "--steps", "200", "--fault-at", "25"], "silent-worker-stall", []),
    "all-hang": (["--mode", "hang", "--steps", "400", "--fault-at", "25", "--hang-for", "80"],
                 "silent-worker-stall", []),
    "throughput-halves": (["--mode", "halve", "--ranks", "2", "--steps", "60", "--fault-at", "30"],
                          "throughput-collapse", []),
}


def _one_child(name: str, argv: list[str], flags: list[str], watch: bool, tmp: Path) -> dict[str, Any]:
    out = tmp / f"{name}-{'w' if watch else 'n'}-{time.monotonic_ns()}"
    cmd = [sys.executable, "-m", "forensics", "record", "--out", str(out), *(flags if watch else ["--no-watch"]),
           "--", sys.executable, str(CHILD), "--step", "0.5", *argv]
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, env={**ENV, "FORENSICS_LIVE_FINAL_S": "8"}, timeout=900)
    wall = time.monotonic() - t0
    [b] = [p for p in out.iterdir() if p.is_dir()]
    m = json.loads((b / "manifest.json").read_text())
    fault = next((int(ln.split()[1]) for ln in (b / "stderr.log").read_text(errors="replace").splitlines()
                  if ln.startswith("FAULT ")), None)
    alerts = [json.loads(ln) for ln in (b / "live.jsonl").read_text().splitlines()] if (b / "live.jsonl").exists() \
        else []
    return {"rc": res.returncode, "wall_s": round(wall, 2), "child_s": round((m["end_ns"] - m["start_ns"]) / 1e9, 2),
            "fault_ns": fault, "alerts": alerts}


def children(args: argparse.Namespace) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (argv, want, flags) in CHILDREN.items():
            runs: dict[str, list[dict[str, Any]]] = {"watched": [], "unwatched": []}
            for pair in range(args.pairs):
                for mode in (("watched", "unwatched") if pair % 2 == 0 else ("unwatched", "watched")):
                    runs[mode].append(_one_child(name, argv, flags, mode == "watched", Path(tmp)))
            lat, culprits, told = [], [], []
            for r in runs["watched"]:
                new = [a for a in r["alerts"] if a["kind"] == "new"]
                told.append([a["signature"] for a in new])
                hit = next((a for a in new if a["signature"] == want), None)
                if hit and r["fault_ns"]:
                    lat.append(round((hit["time_ns"] - r["fault_ns"]) / 1e9, 2))
                    culprits.append(hit["culprit"][:120])
            row = {"child": name, "expected": want, "latency_s": lat, "told": told, "culprit": culprits[:1],
                   "child_s_watched": [r["child_s"] for r in runs["watched"]],
                   "child_s_unwatched": [r["child_s"] for r in runs["unwatched"]],
                   "rc": sorted({r["rc"] for rs in runs.values() for r in rs})}
            rows.append(row)
            print(json.dumps(row), flush=True)
    _save("children", rows)


# -- real cases ---------------------------------------------------------------------------------------------
def realcases(args: argparse.Namespace) -> None:
    from forensics.analysis import analyze
    from forensics.live.replay import LogReplay

    cases = sorted(p for p in (ROOT / "tests").glob("realcases*/*/cases/*") if (p / "case.toml").exists())
    if args.limit:
        cases = cases[: args.limit]
    rows = []
    for case in cases:
        meta = tomllib.loads((case / "case.toml").read_text())
        files = sorted(p for p in case.iterdir() if p.is_file() and p.name != "case.toml")
        if not files:
            continue
        ref = analyze([str(f) for f in files]).verdict
        marks = [] if ref.root_cause is None else [(Path(e.origin.path).name, e.origin.line)
                                                    for e in ref.root_cause.evidence]
        with tempfile.TemporaryDirectory() as tmp:
            replay = LogReplay(files, Path(tmp) / "logs", max_gap_s=args.max_gap, lines_per_s=args.lines_per_s,
                               marks=marks)
            (Path(tmp) / "logs").mkdir()
            proc = _watch([str(Path(tmp) / "logs")])
            time.sleep(2.5)  # the watcher's start
            took = replay.run()
            time.sleep(args.settle)  # what the watcher may still say about the end
            proc.terminate()
            out, _ = proc.communicate(timeout=120)
        alerts = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
        new = [a for a in alerts if a["kind"] == "new"]
        want = meta.get("primary", "none")
        fault = min(replay.written.values(), default=None)
        hit = next((a for a in new if a["signature"] == ref.root_cause_id), None)
        row = {"case": case.name, "set": case.parts[-4], "primary": want, "analyze": ref.root_cause_id,
               "replay_s": round(took, 1), "told": [a["signature"] for a in new],
               "false_alerts": len(new) if want == "none" else None,
               "same_as_analyze": (new[0]["signature"] if new else None) == ref.root_cause_id,
               "latency_s": round((hit["time_ns"] - fault) / 1e9, 2) if hit and fault else None}
        rows.append(row)
        print(json.dumps(row), flush=True)
    _save("realcases", rows)


# -- cost ---------------------------------------------------------------------------------------------------
WRITER = r'''
import random, sys, time
path, rate, secs = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
f = open(path, "a", buffering=1)
t0 = time.monotonic(); n = 0; step = 0
while time.monotonic() - t0 < secs:
    d = t0 + n / rate - time.monotonic()
    if d > 0:
        time.sleep(d)
    r = n % 8
    step += r == 0
    if n % 500 == 499:
        f.write(f"[rank{r}]:2026-12-04 10:00:00,123 - INFO - dataloader worker {n % 4} prefetched shard {n // 500}\n")
    else:
        f.write(f"[rank{r}]: step {step} | loss {2 / (step + 1) ** 0.5:.4f} | lr 3.0e-04 | grad_norm "
                f"{random.random():.3f} | {21500 + random.randint(-300, 300):,} tokens/s | "
                f"{250 + random.random() * 5:.1f} ms/step\n")
    n += 1
'''


def cost(args: argparse.Namespace) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("poll", "watchfiles"):
            log = Path(tmp) / f"train-{mode}.log"
            writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(args.rate), str(args.seconds + 10)])
            time.sleep(1)
            stats = Path(tmp) / f"stats-{mode}.json"
            env = {**ENV, **({"FORENSICS_LIVE_POLL": "1"} if mode == "poll" else {})}
            proc = subprocess.Popen([sys.executable, "-m", "forensics", "watch", str(log), "--duration",
                                     str(args.seconds), "--stats", str(stats)], stdout=subprocess.PIPE, text=True,
                                    env=env)
            rss: list[tuple[float, float]] = []
            stop = threading.Event()
            threading.Thread(target=_rss_sampler, args=(proc.pid, 10.0, rss, stop), daemon=True).start()
            out, _ = proc.communicate(timeout=args.seconds + 120)
            stop.set()
            writer.wait()
            s = json.loads(stats.read_text())
            row = {"mode": mode, "rate_lines_s": args.rate, "seconds": args.seconds, **s,
                   "cpu_share_of_one_core_pct": round(s["cpu_s"] / s["wall_s"] * 100, 2), "rss_mib_over_time": rss,
                   "alerts_text": out.splitlines()[:5]}
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("mode", "cpu_s", "wall_s", "cpu_share_of_one_core_pct", "rss_mib",
                                                  "lines", "alerts")}), flush=True)
    _save("cost", rows)


# -- the long healthy run ---------------------------------------------------------------------------------------
def long(args: argparse.Namespace) -> None:
    from forensics.live.replay import BundleReplay

    out = RESULTS / "live-long"
    out.mkdir(parents=True, exist_ok=True)
    steps = int(args.minutes * 60 / 0.5 * 0.7)
    rec = Path(tempfile.mkdtemp(prefix="gf-long-"))
    cmd = [sys.executable, "-m", "forensics", "record", "--out", str(rec), "--", sys.executable, str(CHILD),
           "--mode", "healthy", "--ranks", "4", "--steps", str(steps), "--step", "0.5", "--pause", "90",
           "--pause-every", str(max(1, steps // 3)), "--eval-s", "75", "--eval-every", str(max(1, steps // 2))]
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, env=ENV, timeout=args.minutes * 60 * 3)
    [bundle] = [p for p in rec.iterdir() if p.is_dir()]
    live = bundle / "live.jsonl"
    real = {"minutes": round((time.monotonic() - t0) / 60, 1), "rc": res.returncode, "bundle": str(bundle),
            "alerts": [json.loads(ln) for ln in live.read_text().splitlines()] if live.exists() else [],
            "pauses": "checkpoint saves of 90 s and evaluations of 75 s (above the 60 s stall threshold)"}
    print("real time:", json.dumps({k: v for k, v in real.items() if k != "alerts"}), "alerts", len(real["alerts"]),
          flush=True)
    rows: dict[str, Any] = {"real_time": real}
    for label, loops, speed in (("2h", args.loops2h, args.speed2h), ("24h", args.loops24h, args.speed24h)):
        with tempfile.TemporaryDirectory() as tmp:
            replay = BundleReplay(bundle, Path(tmp), speed=speed, loops=loops)
            writer = threading.Thread(target=replay.run)
            writer.start()
            time.sleep(0.3)
            stats = Path(tmp) / "stats.json"
            proc = _watch([str(replay.dst)], "--exit-when-done", "--time-scale", str(speed), "--stats", str(stats))
            rss: list[tuple[float, float]] = []
            stop = threading.Event()
            threading.Thread(target=_rss_sampler, args=(proc.pid, 15.0, rss, stop), daemon=True).start()
            o, _ = proc.communicate(timeout=6 * 3600)
            stop.set()
            writer.join()
            alerts = [json.loads(ln) for ln in o.splitlines() if ln.startswith("{")]
            virtual_h = loops * replay.duration / 3.6e12
            row = {"loops": loops, "speed": speed, "virtual_hours": round(virtual_h, 2),
                   "alerts": [(a["kind"], a["signature"], a["culprit"][:80]) for a in alerts],
                   "watcher": json.loads(stats.read_text()) if stats.exists() else None, "rss_mib_over_time": rss}
            rows[label] = row
            print(label, json.dumps({k: v for k, v in row.items() if k != "rss_mib_over_time"}), flush=True)
    _save("long", rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("replays")
    r.add_argument("--speed", type=float, default=1.0)
    c = sub.add_parser("children")
    c.add_argument("--pairs", type=int, default=2)
    rc = sub.add_parser("realcases")
    rc.add_argument("--limit", type=int, default=0)
    rc.add_argument("--max-gap", type=float, default=0.5)
    rc.add_argument("--lines-per-s", type=float, default=200.0)
    rc.add_argument("--settle", type=float, default=6.0, help="seconds the watcher follows a case after its end")
    co = sub.add_parser("cost")
    co.add_argument("--seconds", type=float, default=300.0)
    co.add_argument("--rate", type=float, default=1000.0)
    lo = sub.add_parser("long")
    lo.add_argument("--minutes", type=float, default=14.0)
    lo.add_argument("--loops2h", type=int, default=9)
    lo.add_argument("--speed2h", type=float, default=9.0)
    lo.add_argument("--loops24h", type=int, default=104)
    lo.add_argument("--speed24h", type=float, default=100.0)
    args = p.parse_args()
    {"replays": replays, "children": children, "realcases": realcases, "cost": cost, "long": long}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
