"""Shared pieces of the detectors: the derived-event builder and wording helpers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forensics.events import Event, Origin, Severity, TsSource
from forensics.units import duration_ns as fmt_duration  # one wording for durations (forensics/units.py)

__all__ = ["derived", "fmt_duration", "fmt_num", "gpu_label"]


def derived(detector: str, sentence: str, *, origin: Origin, ts: int | None, end_ts: int | None = None,
            ts_source: TsSource | None = None, source: str = "derived", host: str | None = None,
            gpu: str | None = None, rank: int | None = None, severity: Severity = Severity.WARNING,
            attrs: Mapping[str, Any] | None = None) -> Event:
    """One derived event: kind ``derived``, message ``[<detector>] <sentence>``, attrs
    ``detector`` and ``end_ts`` plus the detector's numbers."""
    return Event(
        ts=ts,
        ts_source=ts_source or (TsSource.INFERRED if ts is not None else TsSource.NONE),
        source=source,
        kind="derived",
        message=f"[{detector}] {sentence}",
        origin=origin,
        severity=severity,
        host=host,
        gpu=gpu,
        rank=rank,
        attrs={"detector": detector, "end_ts": end_ts, **(attrs or {})},
    )


def fmt_num(x: float) -> str:
    """A reading as people write it: ``116``, ``0.27``, ``21,500``."""
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10 or x == int(x):
        return f"{x:.0f}"
    return f"{x:.2g}" if abs(x) < 1 else f"{x:.1f}"


def gpu_label(gpu: str) -> str:
    return f"GPU {gpu}"
