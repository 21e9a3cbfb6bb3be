"""Detectors over GPU metric samples (NVML series or nvidia-smi snapshots).

Each takes the timeline's :class:`MetricSample` list and returns derived events.
Thresholds are module constants so tests and docs can name them.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from forensics.events import Event, MetricSample, Severity
from forensics.match.detectors.common import derived, fmt_duration, fmt_num
from forensics.match.detectors.frames import Frame, Run, frames_by_host, sustained_runs

__all__ = ["clock_throttle", "gpu_idle_while_peers_busy", "memory_margin_nvml", "pcie_link_below_max",
           "spinning_collective"]

IDLE_PCT = 5.0
BUSY_PCT = 80.0
IN_JOB_MIB = 1024.0  # an idle GPU holding this much memory belongs to the job
SPIN_UTIL_PCT = 90.0
SPIN_POWER_FRACTION = 0.30
LOAD_PCT = 50.0
MIN_STALL_NS = 60 * 10**9
MIN_THROTTLE_NS = 10 * 10**9
MIN_LINK_NS = 30 * 10**9
MARGIN_MIB = 512.0
MARGIN_FRACTION = 0.005

#: NVML clock-event reasons that mean the GPU was slowed by heat or power trouble. SW Thermal
#: Slowdown (0x20) is left out: a consumer card holding its temperature target shows it all day.
BAD_CLOCK_REASONS = {0x8: "HW Slowdown", 0x40: "HW Thermal Slowdown", 0x80: "HW Power Brake Slowdown"}


def _span(run: Run) -> str:
    if run.duration_ns >= 10**9:
        return f"for {fmt_duration(run.duration_ns)}"
    return f"in {run.count} snapshot{'s' if run.count > 1 else ''}"


def _event(detector: str, sentence: str, run: Run, attrs: dict[str, object],
           severity: Severity = Severity.WARNING) -> Event:
    s = run.first
    return derived(detector, sentence, origin=s.origin, ts=run.ts, end_ts=run.end_ts, ts_source=s.ts_source,
                   source=s.source, host=s.host, gpu=run.gpu, severity=severity,
                   attrs={"duration_s": run.duration_ns / 1e9, "snapshots": run.count, **attrs})


def gpu_idle_while_peers_busy(samples: Sequence[MetricSample]) -> list[Event]:
    """A GPU of the job at ~0 % while at least one peer on the same host is busy."""
    out: list[Event] = []
    for frames in frames_by_host(samples).values():
        busy_before: dict[str, bool] = {}
        in_job: dict[int, set[str]] = {}
        for i, f in enumerate(frames):
            members = set()
            for g in f.gpus:
                util, mem = f.value(g, "util_gpu_pct"), f.value(g, "mem_used_mib")
                if busy_before.get(g) or (mem is not None and mem >= IN_JOB_MIB):
                    members.add(g)
                if util is not None and util >= LOAD_PCT:
                    busy_before[g] = True
            in_job[i] = members

        def idle(i: int, gpu: str, frames: list[Frame] = frames, in_job: dict[int, set[str]] = in_job) -> bool:
            frame = frames[i]
            util = frame.value(gpu, "util_gpu_pct")
            if util is None or util > IDLE_PCT or len(frame.gpus) < 2:
                return False
            if gpu not in in_job[i]:
                return False
            return any((frame.value(p, "util_gpu_pct") or 0) >= BUSY_PCT for p in frame.gpus if p != gpu)

        def busy_again(i: int, gpu: str, frames: list[Frame] = frames) -> bool:
            return (frames[i].value(gpu, "util_gpu_pct") or 0) >= LOAD_PCT

        for run in sustained_runs(frames, idle, MIN_STALL_NS, recovered=busy_again):
            last = frames[run.end]
            peers = [p for p in last.gpus if p != run.gpu and (last.value(p, "util_gpu_pct") or 0) >= BUSY_PCT]
            peer_util = [last.value(p, "util_gpu_pct") or 0 for p in peers]
            util = max(run.values("util_gpu_pct"), default=0)
            sentence = (f"GPU {run.gpu} at {fmt_num(util)} % {_span(run)} while {len(peers)} "
                        f"peer{'s were' if len(peers) != 1 else ' was'} at {fmt_num(min(peer_util))}"
                        f"{'' if min(peer_util) == max(peer_util) else '–' + fmt_num(max(peer_util))} %")
            out.append(_event("gpu-idle-while-peers-busy", sentence, run,
                              {"util_pct": util, "busy_peers": sorted(peers), "peers": len(last.gpus) - 1}))
    return out


def spinning_collective(samples: Sequence[MetricSample]) -> list[Event]:
    """GPUs at ~100 % utilization drawing near-idle power: kernels spinning in a wait."""
    out: list[Event] = []
    for frames in frames_by_host(samples).values():
        def spins(frame: Frame, gpu: str) -> bool:
            util, power, limit = (frame.value(gpu, k) for k in ("util_gpu_pct", "power_w", "power_limit_w"))
            return (util is not None and power is not None and limit is not None and limit > 0
                    and util >= SPIN_UTIL_PCT and power <= SPIN_POWER_FRACTION * limit)

        spinning_in = [sum(spins(f, g) for g in f.gpus) for f in frames]

        def spins_with_peer(i: int, gpu: str, frames: list[Frame] = frames,
                            spinning_in: list[int] = spinning_in) -> bool:
            return spinning_in[i] >= 2 and spins(frames[i], gpu)

        def working_again(i: int, gpu: str, frames: list[Frame] = frames) -> bool:
            util, power, limit = (frames[i].value(gpu, k) for k in ("util_gpu_pct", "power_w", "power_limit_w"))
            return bool(util and util >= LOAD_PCT and power and limit and power > SPIN_POWER_FRACTION * limit)

        for run in sustained_runs(frames, spins_with_peer, MIN_STALL_NS, recovered=working_again):
            power = median(run.values("power_w"))
            limit = max(run.values("power_limit_w"))
            util = median(run.values("util_gpu_pct"))
            sentence = (f"GPU {run.gpu} at {fmt_num(util)} % utilization drawing only {fmt_num(power)} W of "
                        f"{fmt_num(limit)} W ({power / limit * 100:.0f} %) {_span(run)}: kernels spinning in a wait, "
                        f"typically a collective waiting for a peer")
            out.append(_event("spinning-collective", sentence, run,
                              {"util_pct": util, "power_w": power, "power_limit_w": limit}))
    return out


def clock_throttle(samples: Sequence[MetricSample]) -> list[Event]:
    """Thermal or power-brake clock events while the GPU is under load."""
    out: list[Event] = []
    for frames in frames_by_host(samples).values():
        def throttled(i: int, gpu: str, frames: list[Frame] = frames) -> bool:
            frame = frames[i]
            reasons, util = frame.value(gpu, "clock_reasons"), frame.value(gpu, "util_gpu_pct")
            return (reasons is not None and int(reasons) & sum(BAD_CLOCK_REASONS) != 0
                    and (util is None or util >= LOAD_PCT))

        for run in sustained_runs(frames, throttled, MIN_THROTTLE_NS):
            bits = 0
            for r in run.values("clock_reasons"):
                bits |= int(r)
            names = [name for bit, name in BAD_CLOCK_REASONS.items() if bits & bit]
            extra = []
            for key, unit in (("sm_clock_mhz", "MHz"), ("temp_c", "°C"), ("power_w", "W")):
                vals = run.values(key)
                if vals:
                    extra.append(f"{fmt_num(median(vals))} {unit}")
            sentence = (f"GPU {run.gpu} clocks held down by {' + '.join(names)} {_span(run)} under load"
                        + (f" ({', '.join(extra)})" if extra else ""))
            out.append(_event("clock-throttle", sentence, run, {"reasons": names, "clock_reasons": bits}))
    return out


def pcie_link_below_max(samples: Sequence[MetricSample]) -> list[Event]:
    """PCIe link generation or width below the GPU's maximum while it is busy (at idle a
    low generation is normal power saving)."""
    out: list[Event] = []
    for frames in frames_by_host(samples).values():
        def below(i: int, gpu: str, frames: list[Frame] = frames) -> bool:
            frame = frames[i]
            util = frame.value(gpu, "util_gpu_pct")
            if util is None or util < LOAD_PCT:
                return False
            gen, gen_max = frame.value(gpu, "pcie_gen"), frame.value(gpu, "pcie_gen_max")
            width, width_max = frame.value(gpu, "pcie_width"), frame.value(gpu, "pcie_width_max")
            return bool((gen and gen_max and gen < gen_max) or (width and width_max and width < width_max))

        for run in sustained_runs(frames, below, MIN_LINK_NS):
            f = run.frames[run.start]
            gen, gen_max, width, width_max = (f.value(run.gpu, k) or 0 for k in
                                              ("pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max"))
            sentence = (f"GPU {run.gpu} PCIe link at Gen{gen:.0f} x{width:.0f} (max Gen{gen_max:.0f} "
                        f"x{width_max:.0f}) {_span(run)} under load")
            out.append(_event("pcie-link-below-max", sentence, run,
                              {"gen": gen, "gen_max": gen_max, "width": width, "width_max": width_max}))
    return out


def memory_margin_nvml(samples: Sequence[MetricSample]) -> list[Event]:
    """A GPU whose peak memory use came within a few hundred MiB of its capacity."""
    peaks: dict[tuple[str, str], MetricSample] = {}
    for s in samples:
        used, total = s.values.get("mem_used_mib"), s.values.get("mem_total_mib")
        if used is None or total is None or total <= 0:
            continue
        key = (s.host or s.origin.path, str(s.gpu))
        best = peaks.get(key)
        if best is None or used > best.values["mem_used_mib"]:
            peaks[key] = s
    out: list[Event] = []
    for s in peaks.values():
        used, total = float(s.values["mem_used_mib"]), float(s.values["mem_total_mib"])
        free = total - used
        if not 0 <= free <= MARGIN_MIB + MARGIN_FRACTION * total:
            continue
        sentence = (f"GPU {s.gpu} peaked at {fmt_num(used)} MiB of {fmt_num(total)} MiB "
                    f"({fmt_num(free)} MiB free): a small change in memory use tips it into out-of-memory")
        out.append(derived("memory-margin", sentence, origin=s.origin, ts=s.ts, end_ts=s.ts,
                           ts_source=s.ts_source, source=s.source, host=s.host, gpu=str(s.gpu),
                           severity=Severity.INFO,
                           attrs={"free_mib": free, "used_mib": used, "total_mib": total, "from": "nvml"}))
    return out
