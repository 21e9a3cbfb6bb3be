"""Made-up but realistic analyses for trying, testing and benchmarking the TUI.

:func:`xid79_incident` is an 8-GPU run on one node where GPU 6 falls off the bus
(Xid 79), the other seven ranks spin in an ALLREDUCE at 100 % utilization and low
power until the NCCL watchdog fires 600 s later, and torchrun tears the job down. Its
log lines follow the real formats (NVRM, ProcessGroupNCCL, torchrun's ChildFailedError
report); every event points at a line of an in-memory document, so raw context works.

:func:`synthetic` builds a large timeline (a million events) over several hosts for
the benchmark and for trying the UI at scale.

``python -m forensics.tui.demo [--events N]`` opens the app on one of them, or on real inputs
given as paths; ``--screenshot SVG`` saves the overview instead. The README's picture is the
overview of a real recorded 2×H200 run::

    python -m forensics.tui.demo --screenshot docs/tui-overview.svg samples/recorded/silent-stall-2gpu/bundle
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics.analysis import Analysis, SourceReport
from forensics.events import Event, MetricSample, Origin, Severity, TsSource
from forensics.findings import Confidence, Finding, Role, Verdict
from forensics.ingest.textdoc import TextDocument
from forensics.timeline.merge import Timeline, build_timeline

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from forensics.tui.app import ForensicsApp

__all__ = ["T0", "empty_analysis", "main", "synthetic", "xid79_incident"]

#: 2024-05-14 09:00:00 UTC, the start of the demo run.
T0 = 1_715_677_200 * 10**9
S = 10**9
HOST = "gpu-node-17"
BUS_IDS = ("0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
           "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0")
FAILED_GPU = 6


@dataclass
class _Doc:
    """A log file being written: lines appended in order, each returning its Origin."""

    path: str
    kind: str
    host: str | None = None
    lines: list[str] = field(default_factory=list)
    size: int = 0
    events: list[Event] = field(default_factory=list)
    metrics: list[MetricSample] = field(default_factory=list)

    def add(self, text: str) -> Origin:
        origin = Origin(self.path, len(self.lines) + 1, self.size, text.count("\n") + 1)
        for part in text.split("\n"):
            self.lines.append(part)
            self.size += len(part.encode()) + 1
        return origin

    def event(self, ts: int | None, source: str, kind: str, line: str, message: str | None = None,
              severity: Severity = Severity.INFO, ts_source: TsSource = TsSource.EXACT, **kw: Any) -> Event:
        e = Event(ts, ts_source, source, kind, message or line.split("\n")[0], self.add(line), severity,
                  host=kw.pop("host", self.host), detail=line if "\n" in line else "", **kw)
        self.events.append(e)
        return e

    def report(self) -> SourceReport:
        doc = TextDocument(("\n".join(self.lines) + "\n").encode(), self.path)
        kinds = sorted({e.kind for e in self.events})
        return SourceReport(self.path, self.kind, self.host, len(self.events), len(self.metrics),
                            record_kinds=kinds, confidence=0.9, document=doc)


def _analysis(docs: Sequence[_Doc], findings: list[Finding], verdict: Verdict) -> Analysis:
    timeline = build_timeline([(d.events, d.metrics) for d in docs])
    return Analysis([d.report() for d in docs], timeline, findings, verdict)


def empty_analysis() -> Analysis:
    """No sources, no events: what an empty directory gives."""
    return Analysis([], Timeline([]), [], Verdict(None, Confidence.LOW, "nothing readable in the inputs"))


def _dmesg(ts: int, text: str) -> str:
    up = (ts - T0) / S + 86_391.0  # the node had been up a day
    return f"[{up:12.6f}] {text}"


def xid79_incident() -> Analysis:
    """The 8-GPU Xid 79 → NCCL watchdog story, with metrics, derived spans and findings."""
    base = "run-20240514-0900"
    rec = _Doc(f"{base}/manifest.json", "bundle-manifest", HOST)
    kmsg = _Doc(f"{base}/kmsg.log", "dmesg", HOST)
    out = _Doc(f"{base}/stdout.log", "torchrun", HOST)
    err = _Doc(f"{base}/stderr.log", "torchrun", HOST)
    nvml = _Doc(f"{base}/nvml.csv", "nvml-csv", HOST)

    cmd = "torchrun --nproc-per-node 8 train.py --config configs/llama-8b.yaml"
    rec.event(T0, "recorder", "recording", '{"format": "gpu-forensics-bundle", "version": 1}',
              f"recording of: {cmd}", attrs={
                  "status": "finished", "exit_code": 1, "signal": None, "command": cmd, "path": base,
                  "driver_version": "550.90.07", "cuda_version": "12.4", "torch_version": "2.3.1",
                  "nccl_version": "2.20.5"})
    for i, bus in enumerate(BUS_IDS):
        rec.event(T0, "recorder", "gpu-info", f'{{"index": {i}, "pci": "{bus}", "name": "NVIDIA H100 80GB HBM3"}}',
                  f"GPU {i}: NVIDIA H100 80GB HBM3, {bus}, PCIe Gen5 x16", gpu=str(i),
                  attrs={"index": i, "pci": bus, "model": "NVIDIA H100 80GB HBM3", "pcie_gen": 5,
                         "pcie_width": 16, "pcie_gen_max": 5, "pcie_width_max": 16, "driver": "550.90.07"})

    kmsg.event(T0 + 2 * S, "kmsg", "kernel", _dmesg(T0 + 2 * S, "nvidia-nvswitch0: open (major=509)"),
               ts_source=TsSource.BOOT_RELATIVE)
    kmsg.event(T0 + 61 * S, "kmsg", "aer",
               _dmesg(T0 + 61 * S, "pcieport 0000:b7:01.0: AER: Corrected error received: 0000:b7:01.0"),
               severity=Severity.WARNING, ts_source=TsSource.BOOT_RELATIVE,
               attrs={"severity": "corrected", "pci": "0000:b7:01.0"})

    t_xid = T0 + 312 * S + 402_011_000
    xid_events = [
        kmsg.event(t_xid, "kmsg", "xid", _dmesg(t_xid, "NVRM: Xid (PCI:0000:ba:00): 79, pid=48213, name=python, "
                                                       "GPU has fallen off the bus."),
                   severity=Severity.CRITICAL, ts_source=TsSource.BOOT_RELATIVE, gpu=BUS_IDS[FAILED_GPU],
                   pid=48213, attrs={"xid": 79, "pci": "0000:ba:00", "pid": 48213, "process": "python"}),
        kmsg.event(t_xid + 31_000, "kmsg", "nvrm",
                   _dmesg(t_xid + 31_000, "NVRM: GPU 0000:ba:00.0: GPU has fallen off the bus."),
                   severity=Severity.ERROR, ts_source=TsSource.BOOT_RELATIVE, gpu=BUS_IDS[FAILED_GPU]),
        kmsg.event(t_xid + 52_000, "kmsg", "nvrm",
                   _dmesg(t_xid + 52_000, "NVRM: A GPU crash dump has been created. If possible, please run\n"
                          "NVRM: nvidia-bug-report.sh as root to collect this data before\n"
                          "NVRM: the NVIDIA kernel module is unloaded."),
                   severity=Severity.WARNING, ts_source=TsSource.BOOT_RELATIVE, gpu=BUS_IDS[FAILED_GPU]),
    ]

    # Metrics every 2 s; GPU 6 stops answering at the Xid; the others spin at low power.
    for k in range(0, 460):
        t = T0 + k * 2 * S
        after = t >= t_xid
        for g, bus in enumerate(BUS_IDS):
            if g == FAILED_GPU and after:
                nvml.add(f"{t // S},{g},{bus},ERR!,ERR!,ERR!,ERR!")
                continue
            warm = min(k / 20, 1.0)
            util = 0.0 if k < 3 else (100.0 if after else 96.0 + (k * 7 + g * 3) % 5)
            power = 85.0 + warm * ((500.0 + (k * 13 + g * 29) % 90) if not after else 35.0)
            temp = 34.0 + warm * (33.0 + g % 3 + (k % 7) / 3) - (14.0 if after else 0.0)
            mem = 2_100.0 + warm * (72_400.0 + g * 180.0 + (1_150.0 if g == 3 else 0.0))
            values = {"util_gpu_pct": util, "power_w": round(power, 1), "power_limit_w": 700.0, "temp_c": round(temp),
                      "mem_used_mib": mem, "mem_total_mib": 81_559.0, "sm_clock_mhz": 1980.0 if k >= 3 else 345.0,
                      "pcie_gen": 5.0, "pcie_gen_max": 5.0, "pcie_width": 16.0, "pcie_width_max": 16.0}
            line = f"{t // S},{g},{bus},{util:.0f},{power:.1f},{temp:.0f},{mem:.0f}"
            nvml.metrics.append(MetricSample(t, TsSource.EXACT, str(g), values, nvml.add(line), HOST))
    nvml.event(t_xid + 180_000_000, "nvml", "xid", f"{t_xid // S},6,{BUS_IDS[6]},xid-event,79",
               "NVML Xid event 79 on GPU 6 (0000:ba:00.0)", Severity.CRITICAL, gpu="6", attrs={"xid": 79})
    xid_events.append(nvml.events[-1])

    # Training output: progress every 10 s until the hang.
    step = 1180
    for k in range(0, 32):
        t = T0 + (10 * k + 4) * S
        if t > t_xid:
            break
        step += 12
        loss = 2.41 - 0.0031 * k
        out.event(t, "stdout", "progress", f"[rank0] step {step} | loss {loss:.4f} | grad_norm 0.{87 + k % 9} | "
                                           f"{146 + k % 5}.{k % 10}k tokens/s", rank=0,
                  attrs={"step": step, "loss": round(loss, 4), "tokens_s": 146_000 + 1000 * (k % 5)})

    t_to = t_xid + 600 * S + 16_000_000
    timeouts = []
    for r in (0, 1, 2, 3, 4, 5, 7):
        t = t_to + r * 1_700_000
        stamp = f"E0514 09:15:{12 + (t - t_to) // S:02d}.{(t // 1000) % 1_000_000:06d}"
        line = (f"[rank{r}]:[{stamp} ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation "
                f"timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
                f"Timeout(ms)=600000) ran for 600018 milliseconds before timing out.")
        timeouts.append(err.event(t, "stderr", "c10d", line, severity=Severity.ERROR, rank=r, gpu=str(r),
                                  attrs={"op_type": "ALLREDUCE", "seq": 96120, "numel_in": 262144,
                                         "timeout_ms": 600000}))
    t_kill = t_to + 3 * S
    err.event(t_kill, "stderr", "torchrun",
              "W0514 09:15:15.611000 139870 torch/distributed/elastic/multiprocessing/api.py:858] Sending process "
              "48213 closing signal SIGTERM", severity=Severity.WARNING)
    report = "\n".join([
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-05-14_09:15:17",
        f"  host      : {HOST}",
        "  rank      : 0 (local_rank: 0)",
        "  exitcode  : -6 (pid: 48207)",
        "  error_file: <N/A>",
        "  traceback : Signal 6 (SIGABRT) received by PID 48207",
        "============================================================",
    ])
    killed = err.event(t_kill + 2 * S, "stderr", "torchrun", report,
                       "ChildFailedError: train.py FAILED, rank 0 exitcode -6 (Signal 6 (SIGABRT))",
                       Severity.ERROR, rank=0, pid=48207, attrs={"exitcode": -6, "signal": "SIGABRT", "local_rank": 0})
    exit_ev = rec.event(t_kill + 3 * S, "recorder", "exit", '{"exit_code": 1}', "child exited with status 1",
                        Severity.ERROR, attrs={"exit_code": 1, "signal": None})

    def detector(gpu: int, first: int, last: int, name: str, message: str, severity: Severity) -> Event:
        """A metric detector's event, pointing at the first sample it read."""
        sample = next(m for m in nvml.metrics if m.gpu == str(gpu) and m.ts is not None and m.ts >= first)
        e = Event(first, TsSource.EXACT, "derived", "derived", message, sample.origin, severity, HOST, str(gpu),
                  attrs={"detector": name, "first_ts": first, "last_ts": last})
        nvml.events.append(e)
        return e

    stall = [detector(g, t_xid + 8 * S, t_to, "stall",
                      f"GPU {g}: 100 % utilization at ~120 W of 700 W for 600 s, no progress", Severity.WARNING)
             for g in (0, 1, 2, 3, 4, 5, 7)]
    margin = detector(3, T0 + 40 * S, t_xid, "margin", "GPU 3: peak memory 76 801 MiB of 81 559 MiB (4.6 GiB free)",
                      Severity.INFO)

    xid79 = Finding(
        "xid-79-fallen-off-bus", "GPU fell off the PCIe bus (Xid 79)", "hardware", 0.96, xid_events,
        Role.ROOT_CAUSE,
        explain="The driver lost contact with GPU 6 over PCIe: it stopped answering register reads, so the "
                "kernel module marked it lost. Every CUDA context on it is gone; its rank hangs or dies and the "
                "other ranks wait for it in their next collective. Usual causes are the GPU's power delivery, a "
                "bad riser or slot, overheating, or a failing GPU.",
        remedy=["Drain gpu-node-17; do not reschedule jobs on it until the GPU is checked.",
                "Collect nvidia-bug-report.sh (the driver asked for it) and the BMC/SEL log for power events.",
                "Reset or power-cycle the node; if Xid 79 returns on the same slot, reseat or replace the GPU.",
                "Check PCIe AER lines for the GPU's root port before the Xid (none were seen here)."],
        references=["https://docs.nvidia.com/deploy/xid-errors/index.html",
                    "https://docs.nvidia.com/deploy/gpu-debug-guidelines/index.html"],
        hosts=[HOST], gpus=[BUS_IDS[FAILED_GPU]], ranks=[6])
    watchdog = Finding(
        "nccl-watchdog-timeout", "NCCL watchdog timed out in ALLREDUCE on 7 ranks", "framework", 0.9, timeouts,
        Role.CONSEQUENCE,
        explain="Seven ranks waited 600 s (the process group timeout) in the same ALLREDUCE for rank 6, whose "
                "GPU had vanished, then the watchdog aborted them.",
        remedy=["Fix the root cause; a longer NCCL timeout would only have hung longer."],
        references=["https://pytorch.org/docs/stable/distributed.html"],
        hosts=[HOST], gpus=[str(r) for r in (0, 1, 2, 3, 4, 5, 7)], ranks=[0, 1, 2, 3, 4, 5, 7],
        note="follows xid-79-fallen-off-bus by 600 s, the watchdog timeout")
    killed_f = Finding(
        "worker-killed-signal", "torchrun worker ended by SIGABRT", "framework", 0.8, [killed, exit_ev],
        Role.CONSEQUENCE, explain="The watchdog abort raised SIGABRT in rank 0; torchrun reported it and stopped "
                                  "the job (exit status 1).",
        hosts=[HOST], ranks=[0], note="the watchdog's abort, 5 s after the timeouts")
    stall_f = Finding(
        "silent-worker-stall", "7 GPUs spun at 100 % utilization and low power for 10 minutes", "application", 0.7,
        stall, Role.CONSEQUENCE,
        explain="After GPU 6 vanished the other GPUs showed 100 % utilization at a sixth of their power: NCCL "
                "kernels spinning while they wait for a peer that never arrives.",
        hosts=[HOST], gpus=[str(g) for g in (0, 1, 2, 3, 4, 5, 7)], note="begins 8 s after the Xid")
    margin_f = Finding(
        "memory-margin", "GPU 3 ran within 5 GiB of its memory capacity", "application", 0.35, [margin],
        Role.CONTRIBUTING,
        explain="GPU 3 peaked at 76 801 MiB of 81 559 MiB. Not why this run died, but a larger batch or a "
                "framework upgrade could tip it into an out-of-memory error.",
        remedy=["Keep an eye on the peak; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lowers fragmentation."],
        hosts=[HOST], gpus=["3"], note="unrelated to this crash")
    findings = [xid79, watchdog, killed_f, stall_f, margin_f]
    verdict = Verdict(
        xid79, Confidence.HIGH,
        "GPU 6 (0000:ba:00.0) fell off the bus at 09:05:12; the other 7 ranks waited in ALLREDUCE until the "
        "NCCL watchdog aborted them 600 s later.",
        consequences=[watchdog, killed_f, stall_f], contributing=[margin_f],
        ruled_out=[("nccl-desync", "every timed-out rank waits in the same ALLREDUCE, SeqNum 96120"),
                   ("host-oom-killer", "no OOM-killer line in the kernel log"),
                   ("pcie-aer", "one corrected AER error on another root port 4 minutes earlier; none on the GPU's")])
    return _analysis([rec, kmsg, out, err, nvml], findings, verdict)


# -- a big synthetic timeline -----------------------------------------------------------------
_TEMPLATES: Mapping[str, Sequence[tuple[int, str, str]]] = {
    # source: (weight, kind, message template)
    "kmsg": ((60, "kernel", "nvidia-nvlink: Nvlink Core is being initialized, major device number {n}"),
             (25, "aer", "pcieport 0000:{b:02x}:01.0: AER: Corrected error received: 0000:{b:02x}:00.0"),
             (1, "xid", "NVRM: Xid (PCI:0000:{b:02x}:00): 13, pid={pid}, name=python, Graphics SM Warp Exception "
                        "on (GPC 1, TPC 2, SM 0): Out Of Range Address")),
    "stderr": ((50, "nccl", "{host}:{pid}:{pid} [{g}] NCCL INFO Channel {n:02d}/32 : {g} -> {h} via P2P/CUMEM"),
               (8, "warning", "UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed "
                              "explicitly."),
               (1, "c10d", "[rank{g}]:[E ProcessGroupNCCL.cpp:607] [Rank {g}] Watchdog caught collective operation "
                           "timeout: WorkNCCL(SeqNum={n}, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600018 "
                           "milliseconds before timing out.")),
    "stdout": ((100, "progress", "[rank{g}] step {n} | loss {loss:.4f} | {tok}k tokens/s"),),
}
_SEVERITY = {"kernel": Severity.INFO, "aer": Severity.WARNING, "xid": Severity.CRITICAL, "nccl": Severity.INFO,
             "warning": Severity.WARNING, "c10d": Severity.ERROR, "progress": Severity.INFO}


def synthetic(n_events: int = 1_000_000, hosts: int = 4, gpus: int = 8, seed: int = 7) -> Analysis:
    """About ``n_events`` events over ``hosts`` nodes, one every few ms, ~1 % errors; no findings."""
    rng = random.Random(seed)
    docs = {(h, src): _Doc(f"node-{h:02d}/{src}.log", "text", f"node-{h:02d}") for h in range(hosts)
            for src in _TEMPLATES}
    choices = [(src, w, kind, tpl) for src, items in _TEMPLATES.items() for w, kind, tpl in items]
    weights = [c[1] for c in choices]
    picks = rng.choices(range(len(choices)), weights=weights, k=n_events)
    t = T0
    for i, pick in enumerate(picks):
        src, _, kind, tpl = choices[pick]
        h = i % hosts
        g = rng.randrange(gpus)
        t += rng.randrange(1, 6_000_000)
        doc = docs[(h, src)]
        message = tpl.format(n=i % 997, b=0x18 + g * 16, pid=40_000 + g, host=doc.host, g=g, h=(g + 1) % gpus,
                             loss=2.5 - i / n_events, tok=140 + g)
        origin = Origin(doc.path, len(doc.lines) + 1, doc.size)
        doc.lines.append(message)
        doc.size += len(message) + 1
        doc.events.append(Event(t, TsSource.EXACT, src, kind, message, origin, _SEVERITY[kind], doc.host,
                                str(g), g + 8 * h if src != "kmsg" else None))
    ordered = list(docs.values())
    verdict = Verdict(None, Confidence.LOW, "synthetic timeline; no signatures were run")
    return _analysis(ordered, [], verdict)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m forensics.tui.demo",
                                     description="Open the TUI on made-up data (no logs needed), or on PATHs.")
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="real inputs (a bundle, logs) to open instead of the made-up incident")
    parser.add_argument("--events", type=int, default=0,
                        help="a synthetic timeline of this many events instead of the Xid 79 incident")
    parser.add_argument("--screenshot", metavar="SVG", help="save the overview as an SVG and exit (headless)")
    parser.add_argument("--size", default="120x40", metavar="WxH", help="the screenshot's size (default 120x40)")
    args = parser.parse_args(argv)
    from forensics.tui.app import ForensicsApp

    if args.paths:
        missing = [p for p in args.paths if not Path(p).exists()]
        if missing:
            parser.error(f"no such file or directory: {missing[0]}")
        app = ForensicsApp(args.paths)
    else:
        make = (lambda: synthetic(args.events)) if args.events else xid79_incident
        app = ForensicsApp(loader=make, title="demo: an 8-GPU run where GPU 6 falls off the bus")
    if args.screenshot:
        try:
            width, height = (int(n) for n in args.size.lower().split("x"))
        except ValueError:
            parser.error(f"--size wants WIDTHxHEIGHT, e.g. 120x40, not {args.size!r}")
        return _screenshot(app, Path(args.screenshot), (width, height))
    app.run()
    return app.return_code or 0


def _screenshot(app: ForensicsApp, target: Path, size: tuple[int, int]) -> int:
    """Run ``app`` headless until its inputs are read, save the screen as ``target`` (SVG), quit."""

    async def shoot(pilot: Pilot[object]) -> None:
        for _ in range(1200):  # the loader starts after the first paint; a real input takes a moment
            if app.model is not None or app.load_error:
                break
            await pilot.pause(0.05)
        for _ in range(2):
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()
        pilot.app.save_screenshot(target.name, str(target.parent))
        pilot.app.exit(0)

    app.animation_level = "none"
    app.run(headless=True, size=size, auto_pilot=shoot)
    if app.load_error:
        print(f"could not analyze the inputs: {app.load_error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
