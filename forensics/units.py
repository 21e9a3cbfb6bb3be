"""How quantities read for people, in one place for every output (terminal text, TUI, Markdown, HTML).

One wording each, whatever the face:

* **sizes** of GPU memory in MiB (what NVML and nvidia-smi count): ``512 MiB`` below one GiB, ``2.0 GiB``,
  ``79.6 GiB`` from there on — the way PyTorch's out-of-memory message words them, the line a GPU
  engineer compares a report with; file sizes and read rates in decimal units (``340 MB``, as
  ``ls -h --si`` and download rates do);
* **durations** in the largest unit that keeps them short: ``850 ms``, ``2.5 s``, ``90 s``, ``12 min``,
  ``2.6 h``, ``3.5 d`` (so 90 s reads ``90 s`` in the text report, the TUI, Markdown and HTML alike);
* **times** from UTC nanoseconds: ISO 8601 for machines, seconds for people, ``≈`` for inferred ones;
* **sparklines**: one block character per value, ``▁`` at the low end to ``█`` at the high end.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from forensics.events import Event, TsSource

__all__ = ["SPARK", "clock_ms", "duration", "duration_ns", "fmt_dt", "iso", "mib", "si_bytes", "sparkline",
           "stamp", "stamp_ms", "when"]


# -- sizes -------------------------------------------------------------------------------------------
def mib(value: Any, missing: str = "–") -> str:
    """Mebibytes as people read them: ``512 MiB``, ``2.0 GiB``, ``79.6 GiB``, ``-86 MiB``;
    ``missing`` for ``None``, NaN, a bool or anything that is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return missing
    return f"{value:,.0f} MiB" if abs(value) < 1023.5 else f"{value / 1024:,.1f} GiB"


def si_bytes(n: float) -> str:
    """``1.2 GB``, ``340 MB``, ``12 kB``, ``512 B``: decimal units, for file sizes and read rates."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            value = n / size
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{int(n)} B"


# -- durations ---------------------------------------------------------------------------------------
def duration(seconds: float) -> str:
    """A length of time at a glance (the magnitude; a sign is the caller's): ``31 µs``, ``850 ms``,
    ``2.5 s``, ``3 s``, ``90 s``, ``12 min``, ``2.6 h``, ``3.5 d``."""
    a = abs(seconds)
    if a < 0.0005:
        return f"{a * 1e6:.0f} µs"
    if a < 0.9995:
        return f"{a * 1e3:.0f} ms"
    if a < 9.95:
        return f"{a:.1f}".removesuffix(".0") + " s"
    if a < 119.5:
        return f"{a:.0f} s"
    if a < 7170:  # below 119.5 min
        return f"{a / 60:.0f} min"
    if a < 172_800:
        return f"{a / 3600:.1f} h"
    return f"{a / 86400:.1f} d"


def duration_ns(ns: float) -> str:
    """:func:`duration` of a span in nanoseconds."""
    return duration(ns / 1e9)


def fmt_dt(seconds: float | None) -> str:
    """Δt from the root cause's first event, to the second: ``+0 s``, ``+45 s``, ``-3 min``, ``+2.6 h``
    (the :func:`duration` wording in whole seconds; under half a second either way is ``+0 s``)."""
    if seconds is None:
        return ""
    sign = "-" if seconds <= -0.5 else "+"
    a = abs(seconds)
    return sign + (f"{a:.0f} s" if a < 10 else duration(a))


# -- times -------------------------------------------------------------------------------------------
def _utc(ts: int) -> datetime:
    return datetime.fromtimestamp(ts / 1e9, UTC)


def iso(ts: int | None) -> str | None:
    """UTC nanoseconds as ISO 8601 with microseconds, or None."""
    if ts is None:
        return None
    try:
        return _utc(ts).isoformat(timespec="microseconds").replace("+00:00", "Z")
    except (ValueError, OverflowError, OSError):  # the clock layer refuses such stamps; never crash here
        return None


def stamp_ms(ts: int | None) -> str:
    """``2024-05-01 12:05:00.123Z`` (the reports' evidence times), ``(no time)`` when unknown."""
    text = iso(ts)
    return text.replace("T", " ")[:23] + "Z" if text else "(no time)"


def when(e: Event) -> str:
    """A time for people: seconds precision, ``≈`` when it was inferred or is a receipt time."""
    if e.ts is None:
        return "(no time)"
    try:
        text = _utc(e.ts).strftime("%Y-%m-%d %H:%M:%S") + "Z"
    except (ValueError, OverflowError, OSError):
        return "(no time)"
    if e.ts_source in (TsSource.INFERRED, TsSource.RECEIPT):
        return "≈" + text
    if e.ts_source == TsSource.LOCAL:
        return text[:-1] + " (local)"
    return text


def clock_ms(ts: int | None) -> str:
    """``HH:MM:SS.mmm`` in UTC (a timeline column), or a dash for no time."""
    if ts is None:
        return "--:--:--.---"
    d = _utc(ts)
    return f"{d:%H:%M:%S}.{d.microsecond // 1000:03d}"


def stamp(ts: int | None, local: bool = False) -> str:
    """Date and time to the second: ``2024-05-01 12:05:00 UTC``, or ``(local)`` for a wall-clock time
    whose zone the inputs did not say."""
    if ts is None:
        return "no time"
    return f"{_utc(ts):%Y-%m-%d %H:%M:%S} " + ("(local)" if local else "UTC")


# -- sparklines --------------------------------------------------------------------------------------
SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: Iterable[float], lo: float, hi: float) -> str:
    """One block per value on eight equal levels from ``lo`` (``▁``) to ``hi`` (``█``); a space where
    there is no value (NaN); all ``█`` when the range is empty."""
    top = len(SPARK) - 1
    out = []
    for v in values:
        if v != v:
            out.append(" ")
            continue
        level = int(round((v - lo) / (hi - lo) * top)) if hi > lo else top
        out.append(SPARK[min(max(level, 0), top)])
    return "".join(out)
