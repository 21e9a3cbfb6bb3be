"""The odd ones out of a multi-GPU / multi-rank job: the GPUs and ranks that differ from their peers
in the job's last state, as evidence that names them (the verdict's culprit line reads these).

``gpu-odd-one-out`` (GPU metrics): in the last minute of samples of a host, the GPUs of the job
that sit idle (≤ 5 %) *and* hold much less memory than their peers (under 75 % of the others'
median) — a worker that died or never got past its start while the process kept its context —
or, when memory does not set any GPU apart, the idle GPUs while at most as many peers are busy
(≥ 80 %). The sentence gives memory, utilization and power of both sides: "GPUs 6, 7 hold 58 GiB at
0 % (38 W) while GPUs 0–5 hold 89–95 GiB (2, 3, 5 at 100 %; 0, 1, 4 at 0 %)". It is supporting
evidence only (a healthy job ending, or a pipeline stage with less memory, is no failure by itself).

``rank-silent`` (progress lines): within one run, the ranks whose last progress line lies far
behind their peers' (10 of the peers' step-times and at least 3 min) while the peers kept going:
"ranks 6, 7 printed nothing after step 1 (05:37) while ranks 0–5 went on to step 30".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import median

from forensics.events import Event, MetricSample, Severity
from forensics.findings import number_ranges
from forensics.match.detectors.common import derived, fmt_duration, fmt_num
from forensics.match.detectors.frames import Frame, frames_by_host
from forensics.match.detectors.runs import Boundary, run_index

__all__ = ["gpu_indices", "gpu_odd_one_out", "rank_silent"]

IDLE_PCT = 5.0
BUSY_PCT = 80.0
LOAD_PCT = 50.0
IN_JOB_MIB = 1024.0
LOW_MEM_FRACTION = 0.75
LAST_NS = 60 * 10**9
SILENT_STEPS = 10
MIN_SILENT_NS = 180 * 10**9
MIN_PEER_LINES = 3


def gpu_indices(events: Sequence[Event], samples: Sequence[MetricSample]) -> dict[tuple[str | None, str], int]:
    """(host, bus id) → GPU index: from ``gpu-info`` events that print both (nvidia-smi csv/table),
    else the position in bus-id order on that host (the order nvidia-smi and NVML number GPUs)."""
    known: dict[tuple[str | None, str], int] = {}
    for e in events:
        if e.kind != "gpu-info" or e.gpu is None:
            continue
        idx = e.attrs.get("index")
        try:
            if idx is not None:
                known[(e.host, e.gpu)] = int(str(idx))
        except ValueError:
            continue
    per_host: dict[str | None, set[str]] = defaultdict(set)
    for s in samples:
        per_host[s.host].add(str(s.gpu))
    for host, gpus in per_host.items():
        if all((host, g) in known for g in gpus):
            continue
        if all(g.isdigit() for g in gpus):
            for g in gpus:
                known.setdefault((host, g), int(g))
            continue
        for i, g in enumerate(sorted(gpus)):
            known.setdefault((host, g), i)
    return known


def _label(kind: str, items: Sequence[int]) -> str:
    return f"{kind}{'s' if len(items) > 1 else ''} {number_ranges(items, min_run=3)}"


def _gib(mib: float) -> str:
    return fmt_num(round(mib / 1024))


def _span_gib(values: Sequence[float]) -> str:
    lo, hi = _gib(min(values)), _gib(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def _last_state(frames: Sequence[Frame]) -> dict[str, dict[str, float]]:
    """Median memory, utilization and power of each GPU over the last minute of frames."""
    end = frames[-1].ts
    window = [f for f in frames if end is None or f.ts is None or end - f.ts <= LAST_NS] or list(frames[-3:])
    out: dict[str, dict[str, float]] = {}
    gpus = {g for f in window for g in f.gpus}
    for g in gpus:
        state = {}
        for key in ("mem_used_mib", "util_gpu_pct", "power_w"):
            vals = [v for f in window if (v := f.value(g, key)) is not None]
            if vals:
                state[key] = median(vals)
        out[g] = state
    return out


def gpu_odd_one_out(samples: Sequence[MetricSample], events: Sequence[Event] = ()) -> list[Event]:
    out: list[Event] = []
    index = gpu_indices(events, samples)
    for frames in frames_by_host(samples).values():
        if not frames:
            continue
        in_job = {g for f in frames for g in f.gpus
                  if (f.value(g, "mem_used_mib") or 0) >= IN_JOB_MIB or (f.value(g, "util_gpu_pct") or 0) >= LOAD_PCT}
        state = {g: s for g, s in _last_state(frames).items() if g in in_job and "util_gpu_pct" in s}
        if len(state) < 2:
            continue
        idle = {g for g, s in state.items() if s["util_gpu_pct"] <= IDLE_PCT}
        busy = {g for g, s in state.items() if s["util_gpu_pct"] >= BUSY_PCT}
        low_mem = set()
        for g, s in state.items():
            others = [o["mem_used_mib"] for h, o in state.items() if h != g and "mem_used_mib" in o]
            if "mem_used_mib" in s and others and s["mem_used_mib"] < LOW_MEM_FRACTION * median(others):
                low_mem.add(g)
        odd = low_mem & idle
        reason = "memory"
        if not odd or len(odd) > len(state) - len(odd) or low_mem - idle:
            odd, reason = (idle, "idle") if idle and busy and len(idle) <= len(busy) else (set(), "")
        if not odd:
            continue
        host = next(iter(frames[-1].gpus.values())).host
        peers = sorted(set(state) - odd, key=lambda g: index.get((host, g), 0))
        odd_sorted = sorted(odd, key=lambda g: index.get((host, g), 0))
        idx = {g: index.get((host, g)) for g in state}
        numbered = all(v is not None for v in idx.values())

        def names(gs: Sequence[str], idx: dict[str, int | None] = idx, numbered: bool = numbered) -> str:
            if numbered:
                return _label("GPU", [idx[g] or 0 for g in gs])
            return ("GPUs " if len(gs) > 1 else "GPU ") + ", ".join(gs)

        def side(gs: Sequence[str], state: dict[str, dict[str, float]] = state) -> str:
            mems = [state[g]["mem_used_mib"] for g in gs if "mem_used_mib" in state[g]]
            utils = sorted({fmt_num(state[g]["util_gpu_pct"]) for g in gs})
            power = [state[g]["power_w"] for g in gs if "power_w" in state[g]]
            text = f"{'hold' if len(gs) > 1 else 'holds'} {_span_gib(mems)} GiB" if mems else ""
            util_text = f"at {'/'.join(utils)} %"
            text = f"{text} {util_text}".strip() if len(utils) == 1 else text or util_text
            if power and len(utils) == 1:
                lo, hi = fmt_num(min(power)), fmt_num(max(power))
                text += f" ({lo if lo == hi else lo + '–' + hi} W)"
            return text

        peer_text = side(peers)
        peer_busy = [g for g in peers if g in busy]
        peer_idle = [g for g in peers if g in idle]
        if peer_busy and peer_idle:
            groups = [(peer_busy, fmt_num(max(state[g]["util_gpu_pct"] for g in peer_busy))),
                      (peer_idle, fmt_num(max(state[g]["util_gpu_pct"] for g in peer_idle)))]
            parts = [f"{names(gs).split(' ', 1)[1]} at {u} %" for gs, u in groups]  # "2, 3, 5 at 100 %"
            peer_text += f" ({'; '.join(parts)})"
        sentence = f"{names(odd_sorted)} {side(odd_sorted)} while {names(peers)} {peer_text}"
        last = frames[-1]
        first_sample = last.gpus[odd_sorted[0]] if odd_sorted[0] in last.gpus else next(iter(last.gpus.values()))
        out.append(derived(
            "gpu-odd-one-out", sentence, origin=first_sample.origin, ts=last.ts, end_ts=last.ts,
            ts_source=first_sample.ts_source, source=first_sample.source, host=host,
            gpu=odd_sorted[0] if len(odd_sorted) == 1 else None, severity=Severity.INFO,
            attrs={"culprit_gpus": odd_sorted, "peer_gpus": peers, "reason": reason,
                   "culprit_index": [idx[g] for g in odd_sorted] if numbered else [],
                   "peer_index": [idx[g] for g in peers] if numbered else [],
                   "state": {g: state[g] for g in state}}))
    return out


def rank_silent(events: Sequence[Event], boundaries: Sequence[Boundary] = ()) -> list[Event]:
    """Ranks whose progress stopped long before their peers' did, within one run."""
    per_run: dict[int, dict[int, list[Event]]] = defaultdict(lambda: defaultdict(list))
    for e in events:
        if e.kind != "progress" or e.ts is None or e.attrs.get("desc"):
            continue
        rank = e.rank if e.rank is not None else e.attrs.get("rank")
        if isinstance(rank, int) and not isinstance(rank, bool):
            per_run[run_index(e.ts, boundaries)][rank].append(e)
    out: list[Event] = []
    for ranks in per_run.values():
        if len(ranks) < 2:
            continue
        last = {r: max(evs, key=lambda e: e.ts or 0) for r, evs in ranks.items()}
        latest = max(e.ts or 0 for e in last.values())
        deltas = []
        for evs in ranks.values():
            stamps = sorted(e.ts for e in evs if e.ts is not None)
            deltas += [b - a for a, b in zip(stamps, stamps[1:], strict=False) if b > a]
        if not deltas:
            continue
        step_ns = int(median(deltas))
        gap = max(MIN_SILENT_NS, SILENT_STEPS * step_ns)
        silent = sorted(r for r, e in last.items() if latest - (e.ts or 0) >= gap)
        going = sorted(r for r in ranks if r not in silent)
        if not silent or len(silent) >= len(going) or \
                any(len([e for e in ranks[r] if (e.ts or 0) > max(last[s].ts or 0 for s in silent)]) < MIN_PEER_LINES
                    for r in going):
            continue
        first = min((last[r] for r in silent), key=lambda e: e.ts or 0)
        steps = sorted({str(last[r].attrs.get("step")) for r in silent if last[r].attrs.get("step") is not None})
        after = f" after step {'/'.join(steps)}" if steps else ""
        peer_steps = [s for r in going if isinstance(s := last[r].attrs.get("step"), int | float)]
        onto = f" went on to step {fmt_num(max(peer_steps))}" if peer_steps else " kept printing"
        sentence = (f"{_label('rank', silent)} printed nothing{after} while {_label('rank', going)}{onto} "
                    f"({fmt_duration(latest - (first.ts or 0))} more)")
        out.append(derived("rank-silent", sentence, origin=first.origin, ts=first.ts, end_ts=latest,
                           ts_source=first.ts_source, source=first.source, host=first.host,
                           rank=silent[0] if len(silent) == 1 else None,
                           attrs={"silent": silent, "going": going, "silence_s": (latest - (first.ts or 0)) / 1e9,
                                  "last_step": {str(r): last[r].attrs.get("step") for r in silent}}))
    return out
