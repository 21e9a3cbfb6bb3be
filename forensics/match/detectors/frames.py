"""GPU metric samples arranged as frames (one reading of every GPU of a host) and the
search for sustained conditions over them.

A frame closes when a GPU repeats or 2 s have passed since it opened, which fits both
a 10 Hz NVML sweep and an ``nvidia-smi`` table pasted five times. A condition is
*sustained* when it holds on consecutive frames for ``min_ns`` (for stalls: and the
GPU never recovered afterwards, or it lasted 10 min); on sparse captures
(a few snapshots, no dense series) it also counts when it holds on the last
snapshots of the GPU, since that is the state the user could show us. Very long
series are thinned to every k-th frame first (the states sought last a minute).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from forensics.events import MetricSample
from forensics.match.detectors.context import memo

__all__ = ["SPARSE_FRAMES", "Frame", "Run", "frames_by_host", "sustained_runs"]

FRAME_SPAN_NS = 2 * 10**9
#: A capture with at most this many frames is a set of snapshots, not a series.
SPARSE_FRAMES = 20
#: A stall that lasted this long counts even if the GPU recovered afterwards.
LONG_NS = 10 * 60 * 10**9
#: Longer series are thinned to about this many frames per host (10 Hz for 30 min).
MAX_FRAMES = 18000


@dataclass
class Frame:
    ts: int | None
    gpus: dict[str, MetricSample] = field(default_factory=dict)
    readings: dict[str, dict[str, float]] = field(default_factory=dict)  # gpu -> numeric values

    def value(self, gpu: str, key: str) -> float | None:
        r = self.readings.get(gpu)
        if r is None:
            s = self.gpus.get(gpu)
            if s is None:
                return None
            r = self.readings[gpu] = {k: float(v) for k, v in s.values.items()
                                      if isinstance(v, int | float) and not isinstance(v, bool) and v == v}
        return r.get(key)


@dataclass
class Run:
    """Consecutive frames (indices ``start..end`` inclusive) where a GPU met a condition."""

    gpu: str
    start: int
    end: int
    frames: Sequence[Frame]

    @property
    def first(self) -> MetricSample:
        return self.frames[self.start].gpus[self.gpu]

    @property
    def ts(self) -> int | None:
        return self.frames[self.start].ts

    @property
    def end_ts(self) -> int | None:
        return self.frames[self.end].ts

    @property
    def duration_ns(self) -> int:
        a, b = self.ts, self.end_ts
        return b - a if a is not None and b is not None else 0

    @property
    def count(self) -> int:
        return self.end - self.start + 1

    def values(self, key: str) -> list[float]:
        out = []
        for f in self.frames[self.start:self.end + 1]:
            v = f.value(self.gpu, key)
            if v is not None:
                out.append(v)
        return out


def frames_by_host(samples: Sequence[MetricSample]) -> dict[str, list[Frame]]:
    """Frames per host (or per input file when the host is unknown), in time order.
    Kept for the analysis (:mod:`.context`), since every metric detector asks for the same frames."""
    return memo("frames", samples, _build_frames)


def _build_frames(samples: Sequence[MetricSample]) -> dict[str, list[Frame]]:
    streams: dict[str, list[MetricSample]] = defaultdict(list)
    for s in samples:
        streams[s.host or s.origin.path].append(s)
    out: dict[str, list[Frame]] = {}
    for key, stream in streams.items():
        frames: list[Frame] = []
        cur: Frame | None = None
        for s in stream:
            gpu = str(s.gpu)
            if cur is None or gpu in cur.gpus or (
                    s.ts is not None and cur.ts is not None and s.ts - cur.ts > FRAME_SPAN_NS):
                cur = Frame(s.ts)
                frames.append(cur)
            cur.gpus[gpu] = s
        if len(frames) > MAX_FRAMES:  # a long dense series: every k-th frame is plenty for minute-long states
            frames = frames[:: len(frames) // MAX_FRAMES + 1]
        out[key] = frames
    return out


def sustained_runs(frames: Sequence[Frame], condition: Callable[[int, str], bool], min_ns: int,
                   recovered: Callable[[int, str], bool] | None = None,
                   long_ns: int = LONG_NS) -> Iterator[Run]:
    """Runs of frames where ``condition(frame_index, gpu)`` held long enough (see module doc).

    With ``recovered``, a run only counts when the GPU never recovered afterwards (no later
    frame where ``recovered(frame_index, gpu)``) or when it lasted ``long_ns``: a stall that
    ends by itself within minutes (a checkpoint save on one rank) is normal life.
    """
    sparse = len(frames) <= SPARSE_FRAMES
    gpus = sorted({g for f in frames for g in f.gpus})
    for gpu in gpus:
        present = [i for i, f in enumerate(frames) if gpu in f.gpus]
        start: int | None = None
        prev = -1
        for n, i in enumerate([*present, -1]):
            ok = i >= 0 and condition(i, gpu)
            if ok and start is None:
                start = i
            if not ok and start is not None:
                run = Run(gpu, start, prev, frames)
                held = run.duration_ns >= min_ns or (sparse and prev == present[-1])
                lasting = recovered is None or run.duration_ns >= long_ns \
                    or not any(recovered(j, gpu) for j in present[n:])
                if held and lasting:
                    yield run
                start = None
            prev = i
