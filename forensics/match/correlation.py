"""Sigma-style correlation over selected events: counts within a timespan and ordered
sequences, grouped by event fields (host, GPU, rank …).

Events without a time cannot be placed in a timespan; they count in every window
(the same rule as evidence windows: a check that needs a time is skipped without one).
Order without times falls back to file order within one file, then timeline order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from forensics.events import Event
from forensics.match.schema import Correlation

__all__ = ["before", "event_count", "group_key", "temporal_ordered"]


def group_key(e: Event, fields: Sequence[str]) -> tuple[Any, ...]:
    """The values of ``fields`` for one event (``attrs.<key>`` reads an attribute)."""
    out: list[Any] = []
    for f in fields:
        v = e.attrs.get(f[6:]) if f.startswith("attrs.") else getattr(e, f, None)
        out.append(str(v) if isinstance(v, list | dict) else v)
    return tuple(out)


def before(events: Sequence[Event], i: int, j: int) -> bool:
    """True when event ``i`` happened before event ``j`` as far as we can tell."""
    a, b = events[i], events[j]
    if a.ts is not None and b.ts is not None and a.ts != b.ts:
        return a.ts < b.ts
    if a.origin.path == b.origin.path and a.origin.line != b.origin.line:
        return a.origin.line < b.origin.line
    return i < j


def _groups(positions: Sequence[int], events: Sequence[Event], fields: Sequence[str]) -> dict[Any, list[int]]:
    groups: dict[Any, list[int]] = defaultdict(list)
    for p in positions:
        groups[group_key(events[p], fields)].append(p)
    return groups


def _best_window(positions: list[int], events: Sequence[Event], span: int | None) -> list[int]:
    """The largest set of ``positions`` that fits in one ``span`` (untimed ones always fit)."""
    untimed = [p for p in positions if events[p].ts is None]
    timed = sorted((p for p in positions if events[p].ts is not None), key=lambda p: events[p].ts or 0)
    if span is None or not timed:
        return sorted(positions)
    best: tuple[int, int] = (0, 0)
    lo = 0
    for hi in range(len(timed)):
        while (events[timed[hi]].ts or 0) - (events[timed[lo]].ts or 0) > span:
            lo += 1
        if hi - lo + 1 > best[1] - best[0]:
            best = (lo, hi + 1)
    return sorted(timed[best[0]:best[1]] + untimed)


def event_count(positions: Sequence[int], events: Sequence[Event], corr: Correlation) -> list[int]:
    """Positions of every group that has ``corr.count`` events within ``corr.timespan``
    (in its best window); empty when no group qualifies."""
    out: list[int] = []
    for members in _groups(positions, events, corr.group_by).values():
        window = _best_window(members, events, corr.timespan_ns)
        if len(window) >= corr.count:
            out.extend(window)
    return sorted(out)


def _chain(order: Sequence[list[int]], events: Sequence[Event], span: int | None) -> list[int] | None:
    """The earliest chain e1 < e2 < … picking one event per step, within ``span`` of e1."""
    for first in order[0]:
        chain = [first]
        t0 = events[first].ts
        for step in order[1:]:
            nxt = next((p for p in step if before(events, chain[-1], p)
                        and (span is None or t0 is None or events[p].ts is None
                             or (events[p].ts or 0) - t0 <= span)), None)
            if nxt is None:
                break
            chain.append(nxt)
        else:
            return chain
    return None


def temporal_ordered(selected: Mapping[str, Sequence[int]], events: Sequence[Event],
                     corr: Correlation) -> list[int]:
    """Positions of the ordered chains found (one per group); empty when none."""
    all_pos = sorted({p for name in corr.order for p in selected.get(name, ())})
    out: list[int] = []
    for members in _groups(all_pos, events, corr.group_by).values():
        member_set = set(members)
        steps = [[p for p in selected.get(name, ()) if p in member_set] for name in corr.order]
        if any(not s for s in steps):
            continue
        chain = _chain(steps, events, corr.timespan_ns)
        if chain:
            out.extend(chain)
    return sorted(set(out))
