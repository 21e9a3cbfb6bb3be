"""Workers that started alike on one GPU and then grew apart: ``stunted-workers``.

Processes running the same code allocate the same amounts, so NVML's per-process readings
(``gpu-process`` events, parsers/nvml_samples.py) of a group of workers pass through the same
plateau, in MiB exactly. When some members of such a group stop at a footprint well below the one
their peers reach (no optimizer state, no activations: they died or never got to their first step)
while the process stays alive, the group has *stunted* members. Report 2's drafters 6 and 7 held
59 GB where drafter 5 held its optimizer state as well; on one GPU shared by all workers this is
the only per-worker trace such a death leaves.

A plateau is a footprint read at least twice in a row. A group is the set of processes sharing a
plateau value, at least ``MIN_GROUP`` of them, and the finest such set (a plateau that every
process passes through early, such as the bare CUDA context, says nothing). A member is stunted
when its peak is below ``STUNTED_RATIO`` of the group's highest peak.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from forensics.events import Event
from forensics.match.detectors.common import derived, fmt_duration, fmt_num

__all__ = ["idle_workers", "stunted_workers"]

MIN_GROUP = 3
STUNTED_RATIO = 0.8
#: Per-process utilization: readings needed, an idle process's SM % (at most) and a busy one's (at least).
MIN_UTIL_READINGS = 5
IDLE_SM = 0.0
BUSY_SM = 5.0
#: How long a process must have sat idle, to the end of the recording.
MIN_IDLE_NS = 10 * 10**9


def _per_gpu(events: Sequence[Event]) -> dict[tuple[str | None, str | None], list[Event]]:
    per_gpu: dict[tuple[str | None, str | None], list[Event]] = defaultdict(list)
    for e in events:
        if e.kind == "gpu-process" and isinstance(e.attrs.get("plateaus"), list | tuple):
            per_gpu[(e.host, e.gpu)].append(e)
    return per_gpu


def _groups(procs: Sequence[Event], min_group: int = MIN_GROUP) -> list[frozenset[int]]:
    """The finest sets of processes that pass through one footprint (workers running the same code)."""
    members: dict[float, frozenset[int]] = defaultdict(frozenset)
    for p in procs:
        for value in p.attrs["plateaus"]:
            members[float(value)] |= {int(p.attrs["pid"])}
    groups = {g for g in members.values() if len(g) >= min_group}
    return sorted((g for g in groups if not any(other < g for other in groups)), key=sorted)


def _busy(e: Event) -> bool | None:
    """Whether a process works at the end (None: no utilization readings)."""
    if int(e.attrs.get("util_readings") or 0) < MIN_UTIL_READINGS:
        return None
    return float(e.attrs.get("sm_last") or 0.0) >= BUSY_SM


def _idle(e: Event) -> bool:
    """It worked, then sat idle to the end of the recording for at least :data:`MIN_IDLE_NS`."""
    since, last = e.attrs.get("idle_since"), e.attrs.get("util_last_ts", e.attrs.get("last_ts"))
    return (_busy(e) is False and float(e.attrs.get("sm_peak") or 0.0) > IDLE_SM and isinstance(since, int)
            and isinstance(last, int) and last - since >= MIN_IDLE_NS)


def idle_workers(events: Sequence[Event], corroborated: bool = False) -> list[Event]:
    """``idle-workers``: processes of one GPU that worked and then sat idle to the end while peers that
    started alike (or, without such a group, the GPU's other processes) kept working — the per-process
    utilization tells an idle process on a busy GPU. Memory frozen at its peak is named as such (a
    worker stuck after growing to its cap), apart from memory that never grew (``stunted-workers``).
    ``corroborated``: the job shows the loss (a throughput that fell, silent ranks), so it is evidence,
    not a risk (attr ``corroborated``)."""
    out: list[Event] = []
    for (host, gpu), procs in _per_gpu(events).items():
        by_pid = {int(p.attrs["pid"]): p for p in procs}
        members: dict[float, frozenset[int]] = defaultdict(frozenset)
        for p in procs:
            for value in p.attrs["plateaus"]:
                members[float(value)] |= {int(p.attrs["pid"])}
        working = {pid for pid, p in by_pid.items() if _busy(p)}
        chosen: set[frozenset[int]] = set()
        for pid in sorted(pid for pid, p in by_pid.items() if _idle(p)):
            # the smallest set of processes that started alike with it and holds one that still works
            alike = [g for g in members.values() if pid in g and g & working]
            chosen.add(min(alike, key=len) if alike else frozenset(by_pid))
        for group in sorted(chosen, key=sorted):
            idle = sorted(pid for pid in group if _idle(by_pid[pid]))
            busy = sorted(pid for pid in group if _busy(by_pid[pid]))
            if not idle or not busy:
                continue
            frozen = [pid for pid in idle
                      if float(by_pid[pid].attrs["last_mib"]) >= float(by_pid[pid].attrs["peak_mib"])
                      and int(by_pid[pid].attrs.get("frozen_since") or 0) <= int(by_pid[pid].attrs["idle_since"])]
            mibs = [float(by_pid[pid].attrs["last_mib"]) for pid in idle]
            span = fmt_num(min(mibs)) if min(mibs) == max(mibs) else f"{fmt_num(min(mibs))}–{fmt_num(max(mibs))}"
            quiet = min(int(by_pid[p].attrs.get("util_last_ts") or by_pid[p].attrs["last_ts"])
                        - int(by_pid[p].attrs["idle_since"]) for p in idle)
            work = max(float(by_pid[p].attrs.get("sm_last") or 0) for p in busy)
            memory = (f"their memory frozen at {'its' if len(idle) == 1 else 'their'} peak, {span} MiB"
                      if len(frozen) == len(idle) else f"holding {span} MiB")
            where = f"GPU {gpu}" if gpu else "the GPU"
            peers = "its peer works" if len(busy) == 1 else f"{len(busy)} peers work"
            sentence = (f"on {where}, {len(idle)} of {len(group)} worker processes sit idle (0 % SM for the last "
                        f"{fmt_duration(quiet)}) with {memory}, while {peers} at up to {fmt_num(work)} % "
                        f"(pids {', '.join(map(str, idle))})")
            first = by_pid[idle[0]]
            since = min(int(by_pid[p].attrs["idle_since"]) for p in idle)
            out.append(derived("idle-workers", sentence, origin=first.origin, ts=since,
                               end_ts=max(int(by_pid[p].attrs["last_ts"]) for p in group),
                               ts_source=first.ts_source, source=first.source, host=host, gpu=gpu,
                               attrs={"stunted_pids": idle, "busy_pids": busy, "frozen_pids": frozen,
                                      "group_size": len(group), "idle_mib": mibs, "corroborated": corroborated}))
    return out


def _still_printing(events: Sequence[Event]) -> set[int]:
    """Pids of workers whose own lines went on to the end (their last line among the last tenth of all labelled
    lines, ``rank-activity``): a worker that keeps printing has not died, whatever its memory."""
    return {e.pid for e in events if e.kind == "rank-activity" and e.pid is not None
            and int(e.attrs.get("seq_last") or 0) >= 0.9 * (int(e.attrs.get("seq_total") or 0) - 1)}


def stunted_workers(events: Sequence[Event]) -> list[Event]:
    out: list[Event] = []
    printing = _still_printing(events)
    for (host, gpu), procs in _per_gpu(events).items():
        by_pid = {int(p.attrs["pid"]): p for p in procs}
        for group in _groups(procs):
            peaks = {pid: float(by_pid[pid].attrs["peak_mib"]) for pid in group}
            top = max(peaks.values())
            stunted = sorted(pid for pid, peak in peaks.items() if peak < STUNTED_RATIO * top
                             and _busy(by_pid[pid]) is not True  # a worker that works is not stunted
                             and pid not in printing)
            if not stunted:
                continue
            grown = sorted(pid for pid in group if pid not in stunted)
            low = [peaks[pid] for pid in stunted]
            span = fmt_num(min(low)) if min(low) == max(low) else f"{fmt_num(min(low))}–{fmt_num(max(low))}"
            where = f"GPU {gpu}" if gpu else "the GPU"
            sentence = (f"on {where}, {len(stunted)} of {len(group)} worker processes that started alike stopped "
                        f"growing at {span} MiB while {'its peer' if len(grown) == 1 else 'their peers'} reached "
                        f"{fmt_num(top)} MiB (pids {', '.join(map(str, stunted))}): workers that died or never "
                        f"reached their first step, with their memory still held")
            first = by_pid[stunted[0]]
            out.append(derived("stunted-workers", sentence, origin=first.origin, ts=first.ts,
                               end_ts=max(int(by_pid[p].attrs.get("last_ts") or 0) for p in group) or None,
                               ts_source=first.ts_source, source=first.source, host=host, gpu=gpu,
                               attrs={"stunted_pids": stunted, "grown_pids": grown, "group_size": len(group),
                                      "stunted_peak_mib": low, "peer_peak_mib": top}))
    return out


def silent_stunted_ranks(events: Sequence[Event]) -> list[Event]:
    """``rank-silent`` for ranks that announced themselves like a peer (the same first labelled line,
    ``rank-activity`` events) and never printed a progress line while that peer did, when the GPU's
    per-process memory shows the same number of stunted workers in a group of the same size. Either
    alone is ambiguous (a program may log progress on one rank only; a worker may hold less memory);
    both together name the ranks."""
    stunted = stunted_workers(events) + idle_workers(events)
    if not stunted:
        return []
    progressed: dict[tuple[str, int], list[Event]] = defaultdict(list)  # per file: runs are compared apart
    for e in events:
        if e.kind == "progress" and e.rank is not None and not e.attrs.get("desc"):
            progressed[(e.origin.path, e.rank)].append(e)
    groups: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for e in events:
        if e.kind == "rank-activity" and e.rank is not None:
            groups[(e.origin.path, str(e.attrs.get("first_template", "")))].append(e)
    out: list[Event] = []
    for (path, template), members in groups.items():
        going = sorted(e.rank for e in members if e.rank is not None and len(progressed.get((path, e.rank), [])) >= 3)
        silent = [e for e in members if e.rank is not None and not progressed.get((path, e.rank))]
        if not going or not silent or not template:
            continue
        match = next((s for s in stunted if s.attrs["group_size"] == len(members)
                      and len(s.attrs["stunted_pids"]) == len(silent)), None)
        if match is None:
            continue
        ranks = sorted(e.rank for e in silent if e.rank is not None)
        last = max((e for r in going for e in progressed[(path, r)]), key=lambda e: e.ts or 0)
        first = min(silent, key=lambda e: e.ts or 0)
        steps = [s for r in going for e in progressed[(path, r)] if isinstance(s := e.attrs.get("step"), int | float)]
        onto = f" went on to step {fmt_num(max(steps))}" if steps else " kept printing progress"
        silence = ((last.ts or 0) - (first.ts or 0)) / 1e9 if last.ts and first.ts else None
        sentence = (f"{_ranks(ranks)} announced {'itself' if len(ranks) == 1 else 'themselves'} like "
                    f"{_ranks(going)} ('{template[:60]}') and never printed a progress line while {_ranks(going)}"
                    f"{onto}; {match.message.split('] ', 1)[-1].split(': workers', 1)[0]}")
        out.append(derived("rank-silent", sentence, origin=first.origin, ts=first.ts, end_ts=last.ts,
                           ts_source=first.ts_source, source=first.source, host=first.host,
                           rank=ranks[0] if len(ranks) == 1 else None,
                           attrs={"silent": ranks, "going": going, "silence_s": silence,
                                  "last_step": {str(r): None for r in ranks},
                                  "stunted_pids": match.attrs["stunted_pids"]}))
    return out


def _ranks(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))
