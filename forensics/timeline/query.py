"""Columns over the timeline's events for filtering and jumping through a million rows.

An :class:`EventIndex` keeps one numpy array per filterable field (time, severity, and
integer codes for source, host, GPU, kind, rank) plus, built on first use, the
messages joined into one buffer: a text or regex filter scans that buffer once and
maps hits back to events by offset, instead of testing a million strings one by one.

The filter language of the TUI's timeline filter bar and the MCP server's ``timeline`` tool
(:func:`parse_query`)::

    host:node-a  gpu:6,7  rank:0-3  source:kmsg  kind:xid  sev:error   words  /regex/  re:regex

Fields are ANDed, comma-separated values ORed; a value matches a name exactly or, when
nothing matches exactly, as a substring (``gpu:bb`` finds ``0000:bb:00.0``). ``sev:``
means "at least". Words and patterns are smart-case: all lowercase ignores case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import regex

from forensics.events import Event, Severity
from forensics.lazy_re import lazy_compile

__all__ = ["EventIndex", "Query", "QueryError", "parse_query", "parse_time"]

NO_TIME = np.iinfo(np.int64).max
REGEX_TIMEOUT_S = 2.0

_SEVERITY_NAMES = {
    "debug": Severity.DEBUG, "info": Severity.INFO, "warn": Severity.WARNING, "warning": Severity.WARNING,
    "error": Severity.ERROR, "err": Severity.ERROR, "critical": Severity.CRITICAL, "crit": Severity.CRITICAL,
}
_FIELD_ALIASES = {"host": "host", "gpu": "gpu", "rank": "rank", "source": "source", "src": "source",
                  "kind": "kind", "sev": "severity", "severity": "severity", "level": "severity"}


class QueryError(ValueError):
    """A filter or time the user typed that cannot be understood; the message says why."""


@dataclass
class Query:
    """A parsed filter: field values (ORed within a field, ANDed across), words and patterns."""

    fields: dict[str, list[str]] = field(default_factory=dict)
    ranks: list[tuple[int, int]] = field(default_factory=list)
    min_severity: int | None = None
    words: list[str] = field(default_factory=list)
    patterns: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.fields or self.ranks or self.min_severity is not None or self.words or self.patterns)


# A "quoted phrase", a /regex/ (which may hold spaces and escaped slashes), or a bare token.
_TOKEN = lazy_compile(r'"([^"]*)"|(/(?:\\.|[^/\\])+/)(?=\s|$)|(\S+)')


def parse_query(text: str) -> Query:
    """Parse the filter bar's text. Raises :class:`QueryError` with a readable reason."""
    q = Query()
    for m in _TOKEN.finditer(text):
        phrase, slashed, tok = m.groups()
        if phrase is not None:
            q.words.append(phrase)
            continue
        if slashed is not None:
            q.patterns.append(slashed[1:-1])
            continue
        key, sep, value = tok.partition(":")
        name = _FIELD_ALIASES.get(key.lower()) if sep else None
        if name is None:
            if tok.startswith("re:") and len(tok) > 3:
                q.patterns.append(tok[3:])
            else:
                q.words.append(tok)
            continue
        values = [v for v in value.split(",") if v]
        if not values:
            raise QueryError(f"{key}: needs a value, e.g. {key}:…")
        if name == "severity":
            levels = [_SEVERITY_NAMES.get(v.lower()) for v in values]
            if None in levels:
                raise QueryError(f"unknown severity {value!r} (debug, info, warning, error, critical)")
            q.min_severity = min(int(lv) for lv in levels if lv is not None)
        elif name == "rank":
            for v in values:
                lo, dash, hi = v.partition("-")
                try:
                    q.ranks.append((int(lo), int(hi) if dash else int(lo)))
                except ValueError:
                    raise QueryError(f"rank wants numbers or ranges (rank:0-3,7), got {v!r}") from None
        else:
            q.fields.setdefault(name, []).extend(values)
    for p in q.patterns:
        try:
            regex.compile(p)
        except regex.error as exc:
            raise QueryError(f"bad regex /{p}/: {exc}") from None
    return q


def _smart_flags(text: str) -> int:
    return 0 if any(c.isupper() for c in text) else regex.IGNORECASE


class _Codes:
    """Strings to small integers, in order of first appearance (None → "")."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def code(self, value: object) -> int:
        key = "" if value is None else str(value)
        got = self.ids.get(key)
        if got is None:
            got = self.ids[key] = len(self.ids)
        return got

    def matching(self, wanted: Sequence[str]) -> list[int]:
        """Codes of the names each wanted value matches: exactly, else as a substring (case-insensitive)."""
        out: list[int] = []
        lowered = {name.lower(): code for name, code in self.ids.items() if name}
        for w in wanted:
            w = w.lower()
            if w in lowered:
                out.append(lowered[w])
            else:
                out.extend(code for name, code in lowered.items() if w in name)
        return out

    @property
    def names(self) -> list[str]:
        return [n for n in self.ids if n]


class EventIndex:
    """Filter, search and time-jump over a timeline's events (kept in timeline order)."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = events
        n = len(events)
        self.ts = np.fromiter((NO_TIME if e.ts is None else e.ts for e in events), dtype=np.int64, count=n)
        self.severity = np.fromiter((int(e.severity) for e in events), dtype=np.int16, count=n)
        self.codes = {"source": _Codes(), "host": _Codes(), "gpu": _Codes(), "kind": _Codes()}
        for name, codes in self.codes.items():
            get = _attr_getter(name)
            setattr(self, f"_{name}", np.fromiter((codes.code(get(e)) for e in events), dtype=np.int32, count=n))
        self.rank = np.fromiter((-1 if e.rank is None else e.rank for e in events), dtype=np.int64, count=n)
        self.sorted_by_time = bool(n < 2 or (np.diff(self.ts) >= 0).all())
        self._buffers: dict[bool, tuple[str, np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self.events)

    def names(self, column: str) -> list[str]:
        """The distinct values of ``source``/``host``/``gpu``/``kind`` (for hints and tests)."""
        return self.codes[column].names

    def column(self, name: str) -> np.ndarray:
        column: np.ndarray = getattr(self, f"_{name}")
        return column

    # -- text -------------------------------------------------------------------------------
    def _buffer(self, lower: bool) -> tuple[str, np.ndarray]:
        """All messages joined by newlines (lowercased or not) and each message's start offset."""
        if lower not in self._buffers:
            msgs = [e.message.replace("\n", " ") for e in self.events]
            if lower:
                msgs = [m.lower() for m in msgs]  # one by one: lower() may change a length
            lengths = np.fromiter((len(m) + 1 for m in msgs), dtype=np.int64, count=len(msgs))
            starts = np.zeros(len(msgs), dtype=np.int64)
            if len(msgs) > 1:
                np.cumsum(lengths[:-1], out=starts[1:])
            self._buffers[lower] = ("\n".join(msgs), starts)
        return self._buffers[lower]

    def _word_hits(self, word: str) -> np.ndarray:
        lower = _smart_flags(word) != 0
        buf, starts = self._buffer(lower)
        needle = word.lower() if lower else word
        positions: list[int] = []
        find, step = buf.find, max(len(needle), 1)
        pos = find(needle)
        while pos >= 0:
            positions.append(pos)
            pos = find(needle, pos + step)
        if not positions:
            return np.zeros(0, dtype=np.int64)
        return np.unique(np.searchsorted(starts, np.asarray(positions, dtype=np.int64), side="right") - 1)

    def _pattern_hits(self, pattern: str) -> np.ndarray:
        rx = regex.compile(pattern, _smart_flags(pattern) | regex.MULTILINE)
        buf, starts = self._buffer(False)
        try:
            spans = [m.span() for m in rx.finditer(buf, timeout=REGEX_TIMEOUT_S)]
        except TimeoutError:
            raise QueryError(f"regex /{pattern}/ is too slow on this timeline; simplify it") from None
        if not spans:
            return np.zeros(0, dtype=np.int64)
        begin = np.fromiter((a for a, _ in spans), dtype=np.int64, count=len(spans))
        finish = np.fromiter((b for _, b in spans), dtype=np.int64, count=len(spans))
        rows = np.searchsorted(starts, begin, side="right") - 1
        row_end = np.append(starts[1:] - 1, len(buf))[rows]
        inside = finish <= row_end
        # A match that ran across a message boundary counts only if the message matches on its own.
        crossing = [int(r) for r in rows[~inside] if rx.search(self.events[int(r)].message)]
        return np.unique(np.concatenate([rows[inside], np.asarray(crossing, dtype=np.int64)]))

    # -- filtering --------------------------------------------------------------------------
    def select(self, query: Query) -> np.ndarray:
        """Timeline positions of the events that match ``query`` (all of them for an empty query)."""
        n = len(self.events)
        if query.empty:
            return np.arange(n, dtype=np.int64)
        mask = np.ones(n, dtype=bool)
        for name, values in query.fields.items():
            mask &= np.isin(self.column(name), self.codes[name].matching(values))
        if query.ranks:
            ranks = np.zeros(n, dtype=bool)
            for lo, hi in query.ranks:
                ranks |= (self.rank >= lo) & (self.rank <= hi)
            mask &= ranks
        if query.min_severity is not None:
            mask &= self.severity >= query.min_severity
        for word in query.words:
            hit = np.zeros(n, dtype=bool)
            hit[self._word_hits(word)] = True
            mask &= hit
        for pattern in query.patterns:
            hit = np.zeros(n, dtype=bool)
            hit[self._pattern_hits(pattern)] = True
            mask &= hit
        return np.flatnonzero(mask)

    # -- navigation -------------------------------------------------------------------------
    def next_error(self, view: np.ndarray, row: int, backwards: bool = False,
                   min_severity: int = Severity.ERROR) -> int | None:
        """The row of ``view`` of the next (or previous) event at ``min_severity`` or worse after ``row``."""
        if not len(view):
            return None
        if backwards:
            rows = np.flatnonzero(self.severity[view[: max(row, 0)]] >= min_severity)
            return int(rows[-1]) if len(rows) else None
        start = row + 1
        rows = np.flatnonzero(self.severity[view[start:]] >= min_severity)
        return start + int(rows[0]) if len(rows) else None

    def row_at_time(self, view: np.ndarray, ts: int) -> int:
        """The first row of ``view`` at or after ``ts`` (the last row when every event is earlier)."""
        if not len(view):
            return 0
        times = self.ts[view]
        if self.sorted_by_time:
            row = int(np.searchsorted(times, ts, side="left"))
        else:
            later = np.flatnonzero(times >= ts)
            row = int(later[np.argmin(times[later])]) if len(later) else len(view)
        return min(row, len(view) - 1)


def _attr_getter(name: str) -> Callable[[Event], object]:
    return lambda e: getattr(e, name)


_REL = lazy_compile(r"^\+?\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*(?:(\d+(?:\.\d+)?)\s*m(?:in)?)?\s*(?:(\d+(?:\.\d+)?)\s*s?)?$")
_CLOCK = lazy_compile(r"^(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$")


def parse_time(text: str, span: tuple[int, int] | None, day_of: int | None = None) -> int:
    """A time the user typed, as UTC ns.

    ``12:05`` / ``12:05:30.250``: a clock time (UTC) on the day of ``day_of`` (the event the
    user is looking at) or else the run's first day, or the next day when the run crosses
    midnight; ``2024-05-01T12:05:00`` (UTC unless it carries an offset); ``+90s`` / ``+5m`` /
    ``+1h30m`` from the start of the run.
    """
    text = text.strip()
    if not text:
        raise QueryError("type a time: 12:05:30, 2024-05-01T12:05:00 or +5m")
    if text.startswith("+"):
        m = _REL.match(text)
        if not m or not any(m.groups()):
            raise QueryError(f"cannot read {text!r} as an offset (+90s, +5m, +1h30m)")
        if span is None:
            raise QueryError("the timeline has no times to count from")
        h, mi, s = (float(g) if g else 0.0 for g in m.groups())
        return span[0] + int((h * 3600 + mi * 60 + s) * 1e9)
    m = _CLOCK.match(text)
    if m:
        if span is None:
            raise QueryError("the timeline has no times; give a full date and time")
        hh, mm, ss, frac = m.groups()
        if int(hh) > 23 or int(mm) > 59 or int(ss or 0) > 59:
            raise QueryError(f"{text!r} is not a time of day")
        base = day_of if day_of is not None else span[0]
        day = datetime.fromtimestamp(base / 1e9, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        at = day + timedelta(hours=int(hh), minutes=int(mm), seconds=int(ss or 0))
        ns = int(at.timestamp()) * 10**9 + (int((frac or "0").ljust(9, "0")[:9]))
        if day_of is None and ns < span[0] and ns + 86400 * 10**9 <= span[1]:
            ns += 86400 * 10**9
        return ns
    try:
        d = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise QueryError(f"cannot read {text!r} as a time (12:05:30, 2024-05-01T12:05:00, +5m)") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=UTC)
    return int(d.timestamp()) * 10**9 + d.microsecond * 1000
