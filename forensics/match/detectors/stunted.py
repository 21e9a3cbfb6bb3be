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
from forensics.match.detectors.common import derived, fmt_num

__all__ = ["stunted_workers"]

MIN_GROUP = 3
STUNTED_RATIO = 0.8


def stunted_workers(events: Sequence[Event]) -> list[Event]:
    per_gpu: dict[tuple[str | None, str | None], list[Event]] = defaultdict(list)
    for e in events:
        if e.kind == "gpu-process" and isinstance(e.attrs.get("plateaus"), list | tuple):
            per_gpu[(e.host, e.gpu)].append(e)
    out: list[Event] = []
    for (host, gpu), procs in per_gpu.items():
        members: dict[float, frozenset[int]] = defaultdict(frozenset)
        by_pid = {int(p.attrs["pid"]): p for p in procs}
        for p in procs:
            for value in p.attrs["plateaus"]:
                members[float(value)] |= {int(p.attrs["pid"])}
        groups = {g for g in members.values() if len(g) >= MIN_GROUP}
        finest = [g for g in groups if not any(other < g for other in groups)]
        for group in sorted(finest, key=sorted):
            peaks = {pid: float(by_pid[pid].attrs["peak_mib"]) for pid in group}
            top = max(peaks.values())
            stunted = sorted(pid for pid, peak in peaks.items() if peak < STUNTED_RATIO * top)
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
