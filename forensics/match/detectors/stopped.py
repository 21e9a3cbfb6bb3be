"""Who stopped and who went on: workers whose own lines stop while their peers keep printing or wait.

Read from ``rank-activity`` events (one per worker of a process-output file: how many labelled lines
it wrote, where its last one is among all labelled lines before the job was being shut down, and how
many labelled lines pass between two of its own: parsers/producers/rank_activity.py). A worker has
*stopped* when, after its last line, the others wrote at least :data:`SILENT_ROUNDS` times as many
labelled lines as usually pass between two of its own (it missed ten of its turns), it had a turn
at all (:data:`MIN_LINES` lines), and, where the lines have times, the silence lasted
:data:`MIN_SILENT_NS` at least. The workers that went on are those whose lines come after every
stopped worker's last one, and those that report waiting (a watchdog timeout, a gloo timeout).

Something must show the job suffering from it: a throughput that fell and stayed down, a pipeline's
queues that filled up or drained (:mod:`.queues`), ranks that report waiting, or workers whose memory
stopped growing or that sit idle (:mod:`.stunted`); and the stopped workers must be fewer than those
that went on — unless their processes are the idle ones, or a peer that started alike (the same first
line, numbers masked) went on while the job lost its pace. A worker that simply finished early, or a
program that logs on some ranks only, shows none of these. The event is a ``rank-silent`` one, as for
silent progress (:mod:`.odd_one_out`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence

from forensics.events import Event
from forensics.findings import number_ranges
from forensics.match.detectors.common import derived, fmt_duration, fmt_num
from forensics.match.detectors.progress import throughput_drop
from forensics.match.detectors.queues import queue_backpressure
from forensics.match.detectors.ranks import counted_ranks, cross_rank
from forensics.match.detectors.runs import Boundary

__all__ = ["missing_waiters", "stopped_workers"]

SILENT_ROUNDS = 10
MIN_LINES = 3
MIN_SILENT_NS = 60 * 10**9


def _waiting(events: Sequence[Event]) -> set[int]:
    """Ranks that report waiting for a collective (watchdog records, gloo timeouts)."""
    out: set[int] = set()
    for e in events:
        if e.kind == "c10d" and (e.attrs.get("timeout") or e.attrs.get("op_type")):
            out.update(counted_ranks(e))
    for e in cross_rank(events):
        if e.attrs.get("detector") == "rank-behind":
            out.update(int(r) for r in e.attrs.get("waiting") or [])
    return out


def _why_suffering(events: Sequence[Event], boundaries: Sequence[Boundary], stunted: Sequence[Event]) -> list[Event]:
    """The evidence that the job suffered while the workers were silent (see the module docstring)."""
    return [*queue_backpressure(events), *throughput_drop(events, boundaries), *stunted]


def _lines_after(e: Event, point: int) -> int:
    """How many of ``e``'s labelled lines come after position ``point`` (within its ``seq_step``)."""
    marks = e.attrs.get("seq_marks") or []
    step = int(e.attrs.get("seq_step") or 1)
    if int(e.attrs.get("seq_last") or -1) <= point:
        return 0
    return max(1, (len(marks) - bisect_right(marks, point)) * step)


def _stopped(e: Event, acts: dict[str, Event]) -> bool:
    """Whether ``e``'s worker missed :data:`SILENT_ROUNDS` of its own turns before the others stopped.

    With times: the silence after its last line (to the last line of anyone) is ten of its own
    intervals. Without: the peers that kept their pace wrote, after its last line, lines in a
    proportion to their earlier lines that would have given it ten more of its own."""
    lines, last = e.attrs.get("lines"), e.attrs.get("seq_last")
    if not isinstance(lines, int) or not isinstance(last, int) or lines < MIN_LINES:
        return False
    first_ts = e.attrs.get("first_ts")
    latest = max((o.ts for o in acts.values() if o.ts is not None), default=None)
    if isinstance(first_ts, int) and e.ts is not None and latest is not None and e.ts > first_ts:
        interval = (e.ts - first_ts) / (lines - 1)
        silence = latest - e.ts
        return silence >= max(MIN_SILENT_NS, SILENT_ROUNDS * interval)
    ratios = sorted(after / (int(o.attrs.get("lines") or 0) - after) for o in acts.values()
                    if o is not e and 0 < (after := _lines_after(o, last)) < int(o.attrs.get("lines") or 0))
    if not ratios:
        return False
    kept_pace = ratios[-2] if len(ratios) >= 3 else ratios[-1]  # two peers that kept their pace
    return lines * kept_pace >= SILENT_ROUNDS


def _name(keys: Sequence[str], acts: dict[str, Event]) -> str:
    """``ranks 6, 7 (drafters)``, ``ranks 1–5 and node00``, ``node06, node07``."""
    ranks = [r for k in keys if (r := acts[k].rank) is not None]
    labels = [k for k in keys if acts[k].rank is None]
    text = ""
    if ranks:
        text = f"rank{'s' if len(ranks) > 1 else ''} {number_ranges(ranks, min_run=3, max_parts=12)}"
        roles = {str(acts[k].attrs.get("role")) for k in keys if acts[k].attrs.get("role")}
        if not labels and len(roles) == 1 and len([k for k in keys if acts[k].attrs.get("role")]) == len(keys):
            role = next(iter(roles))
            text += f" ({role}s)" if len(keys) > 1 else f" ({role})"
    shown = ", ".join(labels[:12]) + (f", … ({len(labels) - 12} more)" if len(labels) > 12 else "")
    return " and ".join(t for t in (text, shown) if t)


def stopped_workers(events: Sequence[Event], boundaries: Sequence[Boundary] = (),
                    stunted: Sequence[Event] = (), already: Sequence[Event] = ()) -> list[Event]:
    """``rank-silent`` events for workers that stopped while their peers went on (module docstring);
    none for a file whose silent ranks ``already`` named."""
    per_file: dict[str, dict[str, Event]] = defaultdict(dict)
    for e in events:
        if e.kind == "rank-activity" and isinstance(e.attrs.get("worker"), str):
            per_file[e.origin.path][str(e.attrs["worker"])] = e
    if not per_file:
        return []
    named = {r for e in already for r in e.attrs.get("silent") or []}
    waiting = _waiting(events)
    out: list[Event] = []
    for acts in per_file.values():
        if len(acts) < 3:
            continue
        silent = [k for k, e in acts.items() if e.rank not in waiting and _stopped(e, acts)]
        if not silent or {acts[k].rank for k in silent} <= named:
            continue
        stop = max(int(acts[k].attrs["seq_last"]) for k in silent)
        going = [k for k, e in acts.items() if k not in silent
                 and (int(e.attrs.get("seq_last") or 0) > stop or e.rank in waiting)]
        quiet_from = max((t for k in silent if (t := acts[k].ts) is not None), default=None)
        latest = max((t for k in going if (t := acts[k].ts) is not None), default=None)
        if not going or (quiet_from is not None and latest is not None and latest - quiet_from < MIN_SILENT_NS):
            continue
        suffering = _why_suffering(events, boundaries, stunted)
        if not suffering and not waiting & {acts[k].rank for k in going}:
            continue
        idle = {pid for e in stunted for pid in e.attrs.get("stunted_pids") or []}
        alike = {str(acts[k].attrs.get("first_template")) for k in going}
        confirmed = all(acts[k].pid is not None and acts[k].pid in idle for k in silent) or (
            bool(suffering) and all(str(acts[k].attrs.get("first_template")) in alike for k in silent))
        if len(silent) >= len(going) and not confirmed:  # a minority; or their processes sit idle, or their
            continue  # peers that started alike went on while the job lost its pace
        out.append(_event(silent, going, acts, suffering, quiet_from, latest))
    return out


def _event(silent: list[str], going: list[str], acts: dict[str, Event], suffering: list[Event],
           quiet_from: int | None, latest: int | None) -> Event:
    silent.sort(key=lambda k: (acts[k].rank is None, acts[k].rank or 0, k))
    going.sort(key=lambda k: (acts[k].rank is None, acts[k].rank or 0, k))
    first = min((acts[k] for k in silent), key=lambda e: (e.ts or 0, e.origin.line))
    stop = max(int(acts[k].attrs["seq_last"]) for k in silent)
    after = int(first.attrs["seq_total"]) - 1 - stop
    last = acts[silent[0]].attrs.get("last_text", "")
    how_long = f" for {fmt_duration(latest - quiet_from)}" if quiet_from is not None and latest is not None else ""
    sentence = (f"{_name(silent, acts)} stopped printing (last line: '{str(last)[:80]}') while "
                f"{_name(going, acts)} went on{how_long} ({fmt_num(after)} more labelled lines)")
    ranks = [r for k in silent if (r := acts[k].rank) is not None]
    going_ranks = [r for k in going if (r := acts[k].rank) is not None]
    hosts = sorted({h for k in silent if acts[k].rank is None and (h := acts[k].host)})
    pids = sorted({p for k in silent if acts[k].rank is None and (p := acts[k].pid) is not None})
    return derived("rank-silent", sentence, origin=first.origin, ts=first.ts, end_ts=latest,
                   ts_source=first.ts_source, source=first.source, host=first.host,
                   rank=ranks[0] if len(ranks) == 1 else None,
                   attrs={"silent": ranks, "going": going_ranks, "workers": silent, "silent_hosts": hosts,
                          "silent_pids": pids,
                          "silence_s": (latest - quiet_from) / 1e9 if quiet_from and latest else None,
                          "last_step": {str(acts[k].rank): None for k in silent if acts[k].rank is not None},
                          "last_line": {k: acts[k].attrs.get("last_text") for k in silent},
                          "basis": "activity", "corroborated_by": sorted({str(e.attrs.get("detector"))
                                                                           for e in suffering})})


def _waits_by_worker(events: Sequence[Event]) -> list[Event]:
    """Events that show their writer waiting for someone else (watchdog records, gloo timeouts)."""
    from forensics.match.detectors.ranks import is_wait

    return [e for e in events if is_wait(e)]


def missing_waiters(events: Sequence[Event], already: Sequence[Event] = ()) -> list[Event]:
    """``rank-behind`` for workers a launcher names by node or process only (no rank): all but a few of a
    file's workers report waiting, and the few wrote lines but never a wait of their own. (With ranks,
    :mod:`.ranks` says the same.)"""
    if any(e.attrs.get("detector") == "rank-behind" for e in already):
        return []
    per_file: dict[str, dict[str, Event]] = defaultdict(dict)
    for e in events:
        if e.kind == "rank-activity" and e.rank is None and isinstance(e.attrs.get("worker"), str):
            per_file[e.origin.path][str(e.attrs["worker"])] = e
    if not per_file:
        return []
    waits = _waits_by_worker(events)
    out: list[Event] = []
    for acts in per_file.values():
        waiting = {k for k, a in acts.items() for w in waits if w.origin.path == a.origin.path
                   and ((a.host and w.host == a.host) or (a.pid is not None and w.pid == a.pid))}
        absent = sorted(set(acts) - waiting)
        if not waiting or not absent or len(absent) > max(1, len(acts) // 4):
            continue
        first = min((acts[k] for k in absent), key=lambda e: (e.ts or 0, e.origin.line))
        last = str(first.attrs.get("last_text", ""))[:100]
        sentence = (f"{_name(absent, acts)} fell behind: {_name(sorted(waiting), acts)} "
                    f"{'waits' if len(waiting) == 1 else 'wait'} and {'it' if len(absent) == 1 else 'they'} "
                    f"reported no wait of {'its' if len(absent) == 1 else 'their'} own (last line: '{last}')")
        out.append(derived("rank-behind", sentence, origin=first.origin, ts=first.ts, ts_source=first.ts_source,
                           source=first.source, host=first.host,
                           attrs={"behind": [], "waiting": [], "behind_workers": absent,
                                  "behind_hosts": sorted({h for k in absent if (h := acts[k].host)}),
                                  "behind_pids": sorted({p for k in absent if (p := acts[k].pid) is not None}),
                                  "waiting_workers": sorted(waiting)}))
    return out
