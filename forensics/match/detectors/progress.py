"""Detectors over training-progress events (kind ``progress``: attrs ``step``,
``loss``, ``it_s``, ``s_it``, ``tokens_s``, ``samples_s`` …).

``no_progress``: the last progress line of a stream is followed by silence for many
step-times (10 ×, at least 3 min) until the end of what was observed.
``throughput_drop``: a rate falls to 60 % of its earlier level or less and stays down.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import median

from forensics.events import Event
from forensics.match.detectors.common import derived, fmt_duration, fmt_num
from forensics.match.detectors.runs import Boundary, run_index

__all__ = ["no_progress", "throughput_drop"]

STALL_STEPS = 10
MIN_STALL_NS = 180 * 10**9
MIN_POINTS = 5
DROP_RATIO = 0.6  # the rate at and after the drop, as a fraction of before
STAY_RATIO = 0.75  # no reading after the drop may climb back above this fraction
MIN_AFTER = 3
MAX_SERIES = 2000
RATE_KEYS = (("tokens_s", "tokens/s"), ("samples_s", "samples/s"), ("it_s", "it/s"), ("s_it", "it/s"))


def _streams(events: Sequence[Event], boundaries: Sequence[Boundary] = ()) -> dict[tuple[object, ...], list[Event]]:
    """Progress events per (host, rank, file, run): a restart starts a new stream."""
    streams: dict[tuple[object, ...], list[Event]] = defaultdict(list)
    for e in events:
        if e.kind == "progress":
            rank = e.rank if e.rank is not None else e.attrs.get("rank")
            key_rank = rank if isinstance(rank, int | str) else None  # a parser's odd attr must not break grouping
            streams[(e.host, key_rank, e.origin.path, run_index(e.ts, boundaries))].append(e)
    return streams


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v == v else None


def no_progress(events: Sequence[Event], end_ts: int | None, boundaries: Sequence[Boundary] = ()) -> list[Event]:
    """Streams whose progress lines stopped long before the end of the observation. A stream that
    ended before a restart (``boundaries``) is observed only until that restart: a log that simply
    ended at a restart is not a stall."""
    if end_ts is None:
        return []
    out: list[Event] = []
    for stream in _streams(events, boundaries).values():
        timed = [e for e in stream if e.ts is not None]
        if len(timed) < MIN_POINTS:
            continue
        stamps = [e.ts for e in timed if e.ts is not None]
        deltas = [b - a for a, b in zip(stamps, stamps[1:], strict=False) if b > a]
        if not deltas:
            continue
        step_ns = int(median(deltas))
        last = timed[-1]
        assert last.ts is not None
        restart = next((b for b in boundaries if b.ts > last.ts), None)
        until = min(end_ts, restart.ts) if restart is not None else end_ts
        silence = until - last.ts
        if silence < max(MIN_STALL_NS, STALL_STEPS * step_ns):
            continue
        step = last.attrs.get("step")
        after = f" after step {step}" if step is not None else ""
        sentence = (f"no progress line for {fmt_duration(silence)}{after} "
                    f"(≈ {silence / step_ns:.0f} step-times of {fmt_duration(step_ns)})"
                    + (f", until the restart ('{restart.why}')" if restart is not None and until < end_ts else ""))
        out.append(derived("no-progress", sentence, origin=last.origin, ts=last.ts, end_ts=until,
                           ts_source=last.ts_source, source=last.source, host=last.host, rank=last.rank,
                           attrs={"silence_s": silence / 1e9, "step_s": step_ns / 1e9, "last_step": step}))
    return out


def _series(stream: Sequence[Event]) -> tuple[str, list[tuple[float, Event]]] | None:
    for key, unit in RATE_KEYS:
        pts = [(v, e) for e in stream if (v := _num(e.attrs.get(key))) is not None and v > 0]
        if len(pts) >= MIN_POINTS + MIN_AFTER:
            if key == "s_it":
                pts = [(1.0 / v, e) for v, e in pts]
            return unit, pts
    return None


def throughput_drop(events: Sequence[Event], boundaries: Sequence[Boundary] = ()) -> list[Event]:
    """Streams whose rate fell to ``DROP_RATIO`` of its earlier median and never recovered (within
    one run; across a restart see :func:`.runs.throughput_across_runs`)."""
    out: list[Event] = []
    for stream in _streams(events, boundaries).values():
        found = _series(stream)
        if found is None:
            continue
        unit, pts = found
        if len(pts) > MAX_SERIES:
            stride = len(pts) // MAX_SERIES + 1
            pts = pts[::stride]
        values = [v for v, _ in pts]
        suffix_max = values[:]
        for j in range(len(values) - 2, -1, -1):
            suffix_max[j] = max(values[j], suffix_max[j + 1])
        prefix_max = max(values[1:MIN_POINTS])
        for i in range(MIN_POINTS, len(values) - MIN_AFTER + 1):
            prefix_max = max(prefix_max, values[i - 1])
            if values[i] > DROP_RATIO * prefix_max or suffix_max[i] > STAY_RATIO * prefix_max:
                continue  # cheap reject: the median before is at most the maximum before
            before = median(values[1:i])  # the first reading is warm-up
            after = values[i:]
            low = median(after)
            if values[i] <= DROP_RATIO * before and low <= DROP_RATIO * before \
                    and suffix_max[i] <= STAY_RATIO * before:
                at = pts[i][1]
                step = at.attrs.get("step")
                where = f" at step {step}" if step is not None else ""
                sentence = (f"{unit} fell from {fmt_num(before)} to {fmt_num(low)} ({(low / before - 1) * 100:+.0f} %)"
                            f"{where} and stayed down for {len(after)} readings")
                out.append(derived("throughput-drop", sentence, origin=at.origin, ts=at.ts,
                                   end_ts=pts[-1][1].ts, ts_source=at.ts_source, source=at.source,
                                   host=at.host, rank=at.rank,
                                   attrs={"before": before, "after": low, "ratio": low / before, "unit": unit,
                                          "readings_after": len(after)}))
                break
    return out
