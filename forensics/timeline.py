"""One timeline from many sources: place every event in UTC and merge them in order.

Events that carry no time keep their file order and are placed between their stamped
neighbours (``inferred``) when the same source has stamps; otherwise they stay
unplaced (``ts=None``) and sort after the placed ones of their own source.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from forensics.events import Event, MetricSample, TsSource

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Timeline", "build_timeline", "place_boot_relative"]


@dataclass
class Timeline:
    events: list[Event]
    metrics: list[MetricSample] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        return sorted({e.host for e in self.events if e.host} | {m.host for m in self.metrics if m.host})

    @property
    def span(self) -> tuple[int, int] | None:
        stamps = [e.ts for e in self.events if e.ts is not None]
        stamps += [m.ts for m in self.metrics if m.ts is not None]
        return (min(stamps), max(stamps)) if stamps else None

    def metrics_frame(self) -> pd.DataFrame:
        """The metric samples as one long table: ts, host, gpu, then one column per field."""
        import pandas as pd

        rows = [{"ts": m.ts, "host": m.host, "gpu": m.gpu, "source": m.source, **m.values} for m in self.metrics]
        return pd.DataFrame(rows)


def place_boot_relative(events: Sequence[Event], boot_time_ns: int | None) -> list[Event]:
    """Give boot-relative events a UTC time when the boot time is known."""
    if boot_time_ns is None:
        return list(events)
    out = []
    for e in events:
        if e.ts is None and e.uptime_ns is not None:
            e = replace(e, ts=boot_time_ns + e.uptime_ns, ts_source=TsSource.BOOT_RELATIVE)
        out.append(e)
    return out


def _infer_untimed(events: list[Event]) -> list[Event]:
    """Within one source (file order), give untimed events their previous neighbour's time."""
    if not any(e.ts is not None for e in events):
        return events
    out: list[Event] = []
    last: int | None = None
    pending: list[Event] = []
    for e in events:
        if e.ts is None:
            if last is None:
                pending.append(e)
            else:
                out.append(replace(e, ts=last, ts_source=TsSource.INFERRED))
            continue
        if pending:
            out.extend(replace(p, ts=e.ts, ts_source=TsSource.INFERRED) for p in pending)
            pending = []
        last = e.ts
        out.append(e)
    out.extend(pending)
    return out


def build_timeline(per_source: Iterable[tuple[list[Event], list[MetricSample]]]) -> Timeline:
    """Merge per-source event lists (each in file order) into one ordered timeline."""
    events: list[tuple[int, int, int, Event]] = []
    metrics: list[MetricSample] = []
    for source_no, (evs, ms) in enumerate(per_source):
        for i, e in enumerate(_infer_untimed(evs)):
            # Placed events by time; unplaced ones after all placed ones, in file order.
            key = e.ts if e.ts is not None else 1 << 62
            events.append((key, source_no, i, e))
        metrics.extend(ms)
    events.sort(key=lambda t: (t[0], t[1], t[2]))
    metrics.sort(key=lambda m: (m.ts if m.ts is not None else 1 << 62))
    return Timeline([t[3] for t in events], metrics)
