"""What the watcher keeps of a run, bounded however long it goes.

Per source (one followed file):

* events other than progress: the newest ``MAX_EVENTS`` (when over, the oldest below warning
  level go first, then the oldest of any level);
* progress lines, per stream (rank, bar description): the newest ``RECENT_PROGRESS`` as read, the
  older ones thinned to ``OLD_PROGRESS`` evenly spaced (the detectors compare a rate with its
  earlier median and measure a silence from the last line: both survive the thinning);
* GPU samples, per GPU: the last ``RECENT_S`` at the rate they came (about 1 Hz), older ones one per
  ``OLD_EVERY_S`` (keeping any sample whose discrete fields changed) and at most ``OLD_SAMPLES``.

The analysis reads the store as one source per file, in file order, exactly as it reads files.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from forensics.events import Event, MetricSample, Severity

__all__ = ["SourceStore", "Store"]

MAX_EVENTS = 5_000
RECENT_PROGRESS = 2_000
OLD_PROGRESS = 1_000
RECENT_S = 30 * 60
OLD_EVERY_S = 30
OLD_SAMPLES = 3_000
_DISCRETE = ("clock_reasons", "pcie_gen", "pcie_width", "ecc_dbe_volatile", "remapped_pending", "remapped_failure")


@dataclass
class SourceStore:
    name: str
    events: list[tuple[int, Event]] = field(default_factory=list)
    progress: dict[tuple[object, ...], list[tuple[int, Event]]] = field(default_factory=lambda: defaultdict(list))
    old_progress: dict[tuple[object, ...], list[tuple[int, Event]]] = field(default_factory=lambda: defaultdict(list))
    metrics: dict[str, list[MetricSample]] = field(default_factory=lambda: defaultdict(list))
    old_metrics: dict[str, list[MetricSample]] = field(default_factory=lambda: defaultdict(list))
    fixed: list[Event] = field(default_factory=list)  # replaced whole on each update (gpu-process footprints)
    dropped: int = 0

    def add(self, seq: int, events: Iterable[Event], metrics: Iterable[MetricSample]) -> None:
        for e in events:
            if e.kind == "progress":
                rank = e.rank if e.rank is not None else e.attrs.get("rank")
                key = (e.host, rank if isinstance(rank, int | str) else None, str(e.attrs.get("desc") or ""))
                self.progress[key].append((seq, e))
                if len(self.progress[key]) > RECENT_PROGRESS:
                    self._age_progress(key)
            else:
                self.events.append((seq, e))
            seq += 1
        if len(self.events) > MAX_EVENTS:
            self._trim_events()
        for m in metrics:
            recent = self.metrics[str(m.gpu)]
            recent.append(m)
            if m.ts is not None and recent[0].ts is not None and m.ts - recent[0].ts > RECENT_S * 10**9:
                self._age_metrics(str(m.gpu), m.ts)

    def _age_progress(self, key: tuple[object, ...]) -> None:
        recent = self.progress[key]
        cut = len(recent) - RECENT_PROGRESS // 2
        old = self.old_progress[key]
        old.extend(recent[:cut])
        del recent[:cut]
        if len(old) > OLD_PROGRESS:
            stride = len(old) / (OLD_PROGRESS // 2)
            keep = {int(i * stride) for i in range(OLD_PROGRESS // 2)}
            self.old_progress[key] = [x for i, x in enumerate(old) if i in keep or _anomaly(x[1])]
            self.dropped += len(old) - len(self.old_progress[key])

    def _trim_events(self) -> None:
        over = len(self.events) - MAX_EVENTS + MAX_EVENTS // 10
        quiet = [i for i, (_, e) in enumerate(self.events) if e.severity < Severity.WARNING][:over]
        drop = set(quiet)
        if len(drop) < over:
            drop |= set(range(over - len(drop)))
        self.events = [x for i, x in enumerate(self.events) if i not in drop]
        self.dropped += len(drop)

    def _age_metrics(self, gpu: str, now_ts: int) -> None:
        recent = self.metrics[gpu]
        limit = now_ts - RECENT_S * 10**9
        cut = next((i for i, m in enumerate(recent) if m.ts is None or m.ts >= limit), len(recent))
        old = self.old_metrics[gpu]
        last_ts = old[-1].ts if old else None
        for m in recent[:cut]:
            changed = old and any(m.values.get(k) != old[-1].values.get(k) for k in _DISCRETE)
            if last_ts is None or m.ts is None or m.ts - last_ts >= OLD_EVERY_S * 10**9 or changed:
                old.append(m)
                last_ts = m.ts
            else:
                self.dropped += 1
        del recent[:cut]
        if len(old) > OLD_SAMPLES:
            self.dropped += len(old) - OLD_SAMPLES
            del old[: len(old) - OLD_SAMPLES]

    def timeline_input(self) -> tuple[list[Event], list[MetricSample]]:
        streams = [self.events, *self.old_progress.values(), *self.progress.values()]
        events = [e for _, e in heapq.merge(*streams, key=lambda x: x[0])] + self.fixed
        metrics = [m for gpu in sorted(set(self.old_metrics) | set(self.metrics))
                   for m in (*self.old_metrics.get(gpu, ()), *self.metrics.get(gpu, ()))]
        metrics.sort(key=lambda m: m.ts or 0)
        return events, metrics

    @property
    def size(self) -> int:
        return (len(self.events) + sum(map(len, self.progress.values())) + sum(map(len, self.old_progress.values()))
                + sum(map(len, self.metrics.values())) + sum(map(len, self.old_metrics.values())) + len(self.fixed))


def _anomaly(e: Event) -> bool:
    loss = e.attrs.get("loss")
    return bool(e.attrs.get("overflow")) or (isinstance(loss, float) and (loss != loss or loss in (0.0,)))


class Store:
    """One :class:`SourceStore` per followed file, in the order they were first seen."""

    def __init__(self) -> None:
        self.sources: dict[str, SourceStore] = {}
        self.seq = 0

    def source(self, name: str) -> SourceStore:
        s = self.sources.get(name)
        if s is None:
            s = self.sources[name] = SourceStore(name)
        return s

    def add(self, name: str, events: list[Event], metrics: list[MetricSample]) -> None:
        if not events and not metrics:
            return
        self.source(name).add(self.seq, events, metrics)
        self.seq += len(events)

    def replace(self, name: str, events: list[Event]) -> None:
        """The whole of a source whose file is read whole each time (a manifest, a snapshot)."""
        s = self.source(name)
        s.events = [(i, e) for i, e in enumerate(events)]
        s.progress.clear()
        s.old_progress.clear()

    def timeline_input(self) -> tuple[list[tuple[list[Event], list[MetricSample]]], list[str]]:
        names = [n for n, s in self.sources.items() if s.size]
        return [self.sources[n].timeline_input() for n in names], names

    @property
    def size(self) -> int:
        return sum(s.size for s in self.sources.values())

    @property
    def dropped(self) -> int:
        return sum(s.dropped for s in self.sources.values())
