"""Back-pressure: the fill levels of a pipeline's queues, as its monitor line prints them.

A pipeline of producers and consumers shows who stopped in its queues: queues that fill up and stay
full mean the consumers stopped taking (the producers are blocked behind them); queues that drain and
stay empty mean the producers stopped. Read from progress lines (the monitor line that prints the
throughput usually prints the queues too): ``q_hs=64/64``, ``queue: 12/64``, ``q_pre=[50,50,50]``
(one queue per entry), ``qsize=60``.

``queue-backpressure`` fires when at least one queue *changed* into that state and stayed there for the
last :data:`MIN_READINGS` readings: full at its capacity (when printed) or at the highest level it ever
read, after reading lower; empty after reading more. A queue that reads the same from the first line
says nothing (a steady state looks the same as a stuck one).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from forensics.events import Event, Severity
from forensics.lazy_re import lazy_compile
from forensics.match.detectors.common import derived

__all__ = ["queue_backpressure"]

MIN_READINGS = 3
_QUEUE = lazy_compile(r"(?<![\w.])(?P<name>q(?:_\w{1,20})?|\w{1,20}_q|queues?(?:_\w{1,20})?|\w{1,20}_queue|qsize)"
                      r"\s*[=:]\s*(?:(?P<lvl>\d{1,9})\s*/\s*(?P<cap>\d{1,9})(?![\d./])"
                      r"|\[(?P<list>\d{1,9}(?:\s*,\s*\d{1,9}){0,63})\]|(?P<one>\d{1,9})(?![\d./]))")

Reading = tuple[Event, int, int | None]  # (line, level, capacity)


def _readings(events: Sequence[Event]) -> dict[tuple[str, str], list[Reading]]:
    series: dict[tuple[str, str], list[Reading]] = defaultdict(list)
    for e in events:
        if e.kind != "progress" or ("q" not in e.message and "Q" not in e.message):
            continue
        for m in _QUEUE.finditer(e.message):
            name = m.group("name")
            if m.group("list") is not None:
                levels = [int(x) for x in m.group("list").split(",")]
                for i, lvl in enumerate(levels):
                    series[(e.origin.path, f"{name}[{i}]" if len(levels) > 1 else name)].append((e, lvl, None))
            elif m.group("lvl") is not None:
                series[(e.origin.path, name)].append((e, int(m.group("lvl")), int(m.group("cap"))))
            else:
                series[(e.origin.path, name)].append((e, int(m.group("one")), None))
    return series


def _state(readings: Sequence[Reading]) -> tuple[str, int] | None:
    """("full" | "empty", index of the first reading of the final state) or None."""
    if len(readings) < MIN_READINGS + 1:
        return None
    levels = [lvl for _, lvl, _ in readings]
    caps = {cap for _, _, cap in readings if cap}
    top = max(caps) if caps else max(levels)
    tail = levels[-MIN_READINGS:]
    for state, value in (("full", top), ("empty", 0)):
        if value == 0 and state == "full":
            continue
        if all(lvl == value for lvl in tail):
            start = len(levels)
            while start > 0 and levels[start - 1] == value:
                start -= 1
            if start > 0:  # it read otherwise before: the state is new
                return state, start
    return None


def queue_backpressure(events: Sequence[Event]) -> list[Event]:
    per_file: dict[str, dict[str, tuple[str, Reading]]] = defaultdict(dict)
    for (path, name), readings in _readings(events).items():
        found = _state(readings)
        if found is not None:
            per_file[path][name] = (found[0], readings[found[1]])
    out: list[Event] = []
    for states in per_file.values():
        full = sorted(n for n, (s, _) in states.items() if s == "full")
        empty = sorted(n for n, (s, _) in states.items() if s == "empty")
        first = min((r for _, r in states.values()), key=lambda r: (r[0].ts or 0, r[0].origin.line))
        e, lvl, cap = first
        parts = []
        if full:
            level = f" ({lvl}/{cap})" if cap and states[full[0]][1][2] else ""
            parts.append(f"queue{'s' if len(full) > 1 else ''} {', '.join(_short(full))} full{level} and staying "
                         "full: the consumers stopped taking, the producers are blocked behind them")
        if empty:
            parts.append(f"queue{'s' if len(empty) > 1 else ''} {', '.join(_short(empty))} empty and staying "
                         "empty: the producers stopped")
        out.append(derived("queue-backpressure", "; ".join(parts), origin=e.origin, ts=e.ts, ts_source=e.ts_source,
                           source=e.source, host=e.host, severity=Severity.INFO,
                           attrs={"full": full, "empty": empty, "stopped_side": "consumers" if full and not empty
                                  else "producers" if empty and not full else "both"}))
    return out


def _short(names: Sequence[str]) -> list[str]:
    """``q_pre[0] … q_pre[4]`` as ``q_pre[0–4]``."""
    groups: dict[str, list[str]] = defaultdict(list)
    for n in names:
        base, _, index = n.partition("[")
        groups[base].append(index.rstrip("]"))
    out: list[str] = []
    for base, idx in groups.items():
        if idx == [""]:
            out.append(base)
        elif len(idx) > 2 and all(i.isdigit() for i in idx):
            nums = sorted(int(i) for i in idx)
            out.append(f"{base}[{nums[0]}–{nums[-1]}]" if nums == list(range(nums[0], nums[-1] + 1))
                       else f"{base}[{','.join(map(str, nums))}]")
        else:
            out += [f"{base}[{i}]" if i else base for i in idx]
    return out
