"""How quantities read for people, in one place for every output (terminal text, TUI, Markdown, HTML).

Times are UTC nanoseconds in; strings out.
"""

from __future__ import annotations

from datetime import UTC, datetime

from forensics.events import Event, TsSource

__all__ = ["fmt_dt", "iso", "when"]


def iso(ts: int | None) -> str | None:
    """UTC nanoseconds as ISO 8601 with microseconds, or None."""
    if ts is None:
        return None
    try:
        return datetime.fromtimestamp(ts / 1e9, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    except (ValueError, OverflowError, OSError):  # the clock layer refuses such stamps; never crash here
        return None


def when(e: Event) -> str:
    """A time for people: seconds precision, ``≈`` when it was inferred or is a receipt time."""
    if e.ts is None:
        return "(no time)"
    try:
        text = datetime.fromtimestamp(e.ts / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S") + "Z"
    except (ValueError, OverflowError, OSError):
        return "(no time)"
    if e.ts_source in (TsSource.INFERRED, TsSource.RECEIPT):
        return "≈" + text
    if e.ts_source == TsSource.LOCAL:
        return text[:-1] + " (local)"
    return text


def fmt_dt(seconds: float | None) -> str:
    """Δt from the root cause's first event as people read it: ``+0 s``, ``+45 s``, ``-3 min``, ``+2.6 h``."""
    if seconds is None:
        return ""
    sign = "-" if seconds <= -0.5 else "+"  # under half a second either way is +0 s
    a = abs(seconds)
    if a < 120:
        return f"{sign}{a:.0f} s"
    if a < 7200:
        return f"{sign}{a / 60:.0f} min"
    return f"{sign}{a / 3600:.1f} h"
