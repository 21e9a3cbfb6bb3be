"""``--since / --until / --host / --rank``: narrow the timeline before the signatures read it.

Times are absolute (``2026-11-30 14:00``, ``2026-11-30T14:00:00Z``, ``Nov 30 14:00``: any form
``dateutil`` reads; without a zone in ``--tz``, else UTC, the zone the reports print; a time without
a date, ``14:00``, on the day of the last event) or relative (``2h``, ``30m ago``, ``1h30m``, ``90s``,
``2d``): relative to the *last* event of the inputs, the post-mortem's "now" (an old log filtered
against the wall clock would come out empty).

A host or rank filter keeps the events of those hosts/ranks *and* the events that name none (a
kernel line names no rank, a single-host log may name no host): they may be the cause of the
chosen rank's death. Events without a time are left out by a time filter (they cannot be placed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, tzinfo

from forensics.errors import UsageError
from forensics.events import Event, MetricSample
from forensics.lazy_re import lazy_compile
from forensics.timeline.merge import Timeline

__all__ = ["Bound", "FilterMatchedNothing", "TimelineFilter", "parse_bound", "parse_ranks"]


class FilterMatchedNothing(UsageError):
    """``--host``/``--rank``/``--since``/``--until`` selected nothing: the message says what exists."""

_UNITS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "mins": 60,
          "minute": 60, "minutes": 60, "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
          "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}
_PART = lazy_compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*([a-z]+)")
_RELATIVE = lazy_compile(r"^(?:(?:\d+(?:\.\d+)?)\s*[a-z]+\s*)+(?:ago)?$")
NS = 1_000_000_000


@dataclass(frozen=True)
class Bound:
    """A time bound: an absolute UTC ns; ``relative_s`` seconds before the last event; or a time of
    day without a date (``14:00``), ``day_time`` on the day of the last event (in ``tz``)."""

    text: str
    ts: int | None = None
    relative_s: float | None = None
    day_time: datetime | None = None  # naive or aware; only its time of day and zone count

    def resolve(self, last_ts: int | None) -> int | None:
        if self.ts is not None:
            return self.ts
        if last_ts is None:
            return None
        if self.relative_s is not None:
            return last_ts - round(self.relative_s * NS)
        if self.day_time is not None:
            zone = self.day_time.tzinfo or UTC
            day = datetime.fromtimestamp(last_ts / NS, zone).date()
            return _ns(datetime.combine(day, self.day_time.timetz().replace(tzinfo=zone)))
        return None


def _ns(dt: datetime) -> int:
    return (dt.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000


def _relative_seconds(text: str) -> float | None:
    t = text.strip().lower()
    if not _RELATIVE.match(t):
        return None
    total = 0.0
    for number, unit in _PART.findall(t.removesuffix("ago")):
        if unit not in _UNITS:
            return None
        total += float(number) * _UNITS[unit]
    return total


def parse_bound(text: str, flag: str, tz: tzinfo | None = None) -> Bound:
    """``--since``/``--until`` text as a :class:`Bound`; a :class:`UsageError` names the flag."""
    relative = _relative_seconds(text)
    if relative is not None:
        return Bound(text, relative_s=relative)
    from dateutil import parser as du_parser

    try:  # parsed against two default dates: where they differ, the text gave no date
        first = du_parser.parse(text, default=datetime(2000, 1, 1))
        second = du_parser.parse(text, default=datetime(2001, 2, 2))
    except (ValueError, OverflowError) as exc:
        raise UsageError(f"{flag}: cannot read {text!r} as a time ({exc}); use e.g. '2026-11-30 14:00', "
                         "'2026-11-30T14:00:00Z', '14:00' (the last event's day), '2h' or '30m ago'") from None
    if first.tzinfo is None:
        first = first.replace(tzinfo=tz or UTC)
    if first.date() != second.date():
        return Bound(text, day_time=first)
    return Bound(text, ts=_ns(first))


def parse_ranks(items: Sequence[str]) -> frozenset[int]:
    """``--rank 3``, ``--rank 0-3,7`` (repeatable) as a set of ranks."""
    ranks: set[int] = set()
    for item in items:
        for part in item.split(","):
            part = part.strip()
            lo, sep, hi = part.partition("-")
            try:
                if sep:
                    a, b = int(lo), int(hi)
                    if b < a or b - a > 100_000:
                        raise ValueError
                    ranks.update(range(a, b + 1))
                elif part:
                    ranks.add(int(part))
            except ValueError:
                raise UsageError(f"--rank wants numbers or ranges (e.g. 3 or 0-3,7), got {item!r}") from None
    return frozenset(ranks)


def _rank(e: Event) -> int | None:
    r = e.rank if e.rank is not None else e.attrs.get("rank")
    try:
        return int(r) if r is not None else None
    except (TypeError, ValueError):
        return None


@dataclass
class TimelineFilter:
    """What the user asked to keep; :meth:`apply` gives the narrowed timeline and says what it did."""

    since: Bound | None = None
    until: Bound | None = None
    hosts: frozenset[str] = frozenset()
    ranks: frozenset[int] = frozenset()

    @property
    def active(self) -> bool:
        return bool(self.since or self.until or self.hosts or self.ranks)

    def _in_window(self, e: Event | MetricSample, w: _Window) -> bool:
        if e.ts is not None:
            return (w.lo is None or e.ts >= w.lo) and (w.hi is None or e.ts <= w.hi)
        up = getattr(e, "uptime_ns", None)
        if up is None:
            return False
        # boot-relative, never placed in UTC (raw dmesg): a relative bound applies to its uptime,
        # an absolute one cannot
        if any(b is not None and b.relative_s is None for b in (self.since, self.until)):
            return False
        return (w.up_lo is None or up >= w.up_lo) and (w.up_hi is None or up <= w.up_hi)

    def _keep(self, e: Event | MetricSample, window: _Window) -> bool:
        if isinstance(e, Event) and e.kind == "recording":
            return True  # a bundle's manifest: a fact about the whole run, not a line in time
        if (self.since or self.until) and not self._in_window(e, window):
            return False
        if self.hosts and e.host is not None and e.host not in self.hosts:
            return False
        if self.ranks and isinstance(e, Event):
            r = _rank(e)
            if r is not None and r not in self.ranks:
                return False
        return True

    def _selects_something(self, timeline: Timeline, events: list[Event], metrics: list[MetricSample],
                           window: _Window) -> None:
        """A filter that matches nothing is bad usage, not a clean bill of health: :class:`UsageError`
        naming the filter and what the inputs hold (a ``--host`` typo used to print NO FAILURE FOUND)."""
        if self.hosts:
            seen = sorted({e.host for e in timeline.events if e.host} | {m.host for m in timeline.metrics if m.host})
            if not self.hosts & set(seen):
                names = ", ".join(seen[:12]) + (" …" if len(seen) > 12 else "")
                raise FilterMatchedNothing(f"--host {','.join(sorted(self.hosts))} matched no host; "
                                           + (f"the inputs name {names}" if seen else "the inputs name no host"))
        if self.ranks:
            ranks = {r for e in timeline.events if (r := _rank(e)) is not None}
            if not self.ranks & ranks:
                from forensics.findings import number_ranges

                given = number_ranges(sorted(self.ranks))
                raise FilterMatchedNothing(f"--rank {given} matched no rank; " + (
                    f"the inputs name rank{'s' if len(ranks) > 1 else ''} {number_ranges(sorted(ranks))}"
                    if ranks else "the inputs name no rank"))
        if self.since or self.until:
            timed = [e for e in (*events, *metrics) if not (isinstance(e, Event) and e.kind == "recording")]
            if not timed:
                stamps = [e.ts for e in timeline.events if e.ts is not None and e.kind != "recording"]
                stamps += [m.ts for m in timeline.metrics if m.ts is not None]
                flags = " and ".join(f"{name} {b.text!r}" for name, b in (("--since", self.since),
                                                                           ("--until", self.until)) if b)
                raise FilterMatchedNothing(f"{flags} left no event; the inputs' events span "
                                           f"{_span_text(min(stamps, default=None), max(stamps, default=None))}"
                                           + (" (UTC)" if stamps else ""))

    def apply(self, timeline: Timeline) -> Timeline:
        if not self.active:
            return timeline
        from forensics.units import iso

        stamps = [e.ts for e in timeline.events if e.ts is not None]
        ups = [e.uptime_ns for e in timeline.events if e.ts is None and e.uptime_ns is not None]
        last = max(stamps) if stamps else None
        last_up = max(ups) if ups else None
        window = _Window(self.since.resolve(last) if self.since else None,
                         self.until.resolve(last) if self.until else None,
                         self.since.resolve(last_up) if self.since and self.since.relative_s is not None else None,
                         self.until.resolve(last_up) if self.until and self.until.relative_s is not None else None)
        for lo, hi in ((window.lo, window.hi), (window.up_lo, window.up_hi)):
            if lo is not None and hi is not None and hi < lo:
                raise UsageError(f"--until ({self.until.text if self.until else ''}) is before --since "
                                 f"({self.since.text if self.since else ''})")
        events = [e for e in timeline.events if self._keep(e, window)]
        metrics = [m for m in timeline.metrics if self._keep(m, window)]
        self._selects_something(timeline, events, metrics, window)
        said = []
        if window.lo is not None:
            said.append(f"since {iso(window.lo)}")
        if window.hi is not None:
            said.append(f"until {iso(window.hi)}")
        relative = [b.text for b in (self.since, self.until) if b is not None and b.relative_s is not None]
        if relative and last is not None:
            said.append(f"relative to the last event, {iso(last)}")
        if relative and last_up is not None:
            said.append(f"{' and '.join(relative)} before the last boot-relative line ({last_up / 1e9:.3f} s)")
        if self.hosts:
            said.append("host " + ", ".join(sorted(self.hosts)))
        if self.ranks:
            said.append("rank " + ", ".join(str(r) for r in sorted(self.ranks)))
        if (self.since or self.until) and last is None and last_up is None:
            said.insert(0, "no event carries a time: a time bound leaves every event out")
        untimed = sum(1 for e in timeline.events if e.ts is None and not self._keep(e, window))
        note = (f"filtered ({'; '.join(said)}): kept {len(events):,} of {len(timeline.events):,} events and "
                f"{len(metrics):,} of {len(timeline.metrics):,} samples")
        if untimed and (self.since or self.until):
            note += f" ({untimed:,} left out had no time)"
        return replace(timeline, events=events, metrics=metrics, notes=[*timeline.notes, note])


def _span_text(lo: int | None, hi: int | None) -> str:
    from forensics.units import iso

    return f"{iso(lo)} to {iso(hi)}" if lo is not None and hi is not None else "no time"


@dataclass(frozen=True)
class _Window:
    """The bounds in UTC ns, and in ns since boot for boot-relative lines never placed in UTC."""

    lo: int | None
    hi: int | None
    up_lo: int | None
    up_hi: int | None
