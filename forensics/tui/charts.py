"""Text charts drawn with Unicode blocks and braille, as plain strings.

Every chart maps the same time range ``[t0, t1]`` onto its columns, so charts drawn
one under the other line up and a finding's marker sits over the same instant in all
of them. Columns with no sample stay blank: a gap is information (the sampler or the
GPU stopped answering). Pure functions; the widgets in ``widgets.py`` add colour.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from forensics import units
from forensics.tui.model import fmt_clock

__all__ = ["braille", "bucket", "column_of", "fill_short_gaps", "fmt_range", "fmt_value", "join_width",
           "marker_row", "span_mask", "sparkline", "time_axis", "value_range"]

_BRAILLE_BASE = 0x2800
# Bit of each dot in a braille cell, by (column 0..1, row 0..3 from the top).
_DOT = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))


def column_of(ts: int, t0: int, t1: int, width: int) -> int:
    """The column (0..width-1) that time ``ts`` falls in; clamped to the chart."""
    if width <= 0:
        return 0
    if t1 <= t0:
        return 0
    col = (ts - t0) * width // (t1 - t0 + 1)
    return int(min(max(col, 0), width - 1))


def bucket(ts: np.ndarray, values: np.ndarray, t0: int, t1: int,
           width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, min and max of the samples in each of ``width`` time columns (NaN where none)."""
    nan = np.full(width, np.nan)
    if width <= 0 or not len(ts):
        return nan, nan.copy(), nan.copy()
    keep = np.isfinite(values) & (ts >= t0) & (ts <= t1)
    if not keep.any():
        return nan, nan.copy(), nan.copy()
    t, v = ts[keep], values[keep]
    cols = ((t - t0) * width // max(t1 - t0 + 1, 1)).astype(np.int64)
    np.clip(cols, 0, width - 1, out=cols)
    counts = np.bincount(cols, minlength=width)
    sums = np.bincount(cols, weights=v, minlength=width)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    lo = np.full(width, np.inf)
    hi = np.full(width, -np.inf)
    np.minimum.at(lo, cols, v)
    np.maximum.at(hi, cols, v)
    lo[counts == 0] = np.nan
    hi[counts == 0] = np.nan
    return mean, lo, hi


#: A run of empty columns shorter than this many sampling intervals is drawn through, not left as a gap.
JOIN_INTERVALS = 3


def join_width(ts: np.ndarray, t0: int, t1: int, width: int) -> int:
    """How many empty columns in a row still count as "between two samples" (not a gap) when a
    column is narrower than the sampling interval: ``JOIN_INTERVALS`` median intervals, in columns."""
    if len(ts) < 3 or t1 <= t0 or width <= 0:  # two samples give no interval to judge a gap by
        return 0
    step = float(np.median(np.diff(np.sort(ts))))
    return int(np.ceil(JOIN_INTERVALS * step * width / (t1 - t0 + 1)))


def fill_short_gaps(values: np.ndarray, max_gap: int) -> np.ndarray:
    """``values`` with each run of at most ``max_gap`` NaNs between two numbers filled by a straight
    line; longer runs and the ends stay NaN (a real gap: the sampler or the GPU stopped answering)."""
    out = values.astype(np.float64, copy=True)
    if max_gap <= 0:
        return out
    known = np.flatnonzero(np.isfinite(out))
    for a, b in zip(known[:-1], known[1:], strict=True):
        if 1 < b - a <= max_gap + 1:
            out[a + 1:b] = np.interp(np.arange(a + 1, b), [a, b], [out[a], out[b]])
    return out


def value_range(values: Iterable[np.ndarray], lo: float | None, hi: float | None) -> tuple[float, float]:
    """The axis range: fixed ends where given, else the data's, never empty."""
    finite = [v[np.isfinite(v)] for v in values]
    data = np.concatenate(finite) if finite else np.zeros(0)
    low = lo if lo is not None else (float(data.min()) if len(data) else 0.0)
    high = hi if hi is not None else (float(data.max()) if len(data) else 1.0)
    if len(data):
        high = max(high, float(data.max()))
        low = min(low, float(data.min()))
    if high <= low:
        high = low + 1.0
    return low, high


def sparkline(ts: np.ndarray, values: np.ndarray, t0: int, t1: int, width: int, lo: float, hi: float) -> str:
    """One row of block characters, one per time column; blank where there is no sample."""
    mean, _, _ = bucket(ts, values, t0, t1, width)
    mean = fill_short_gaps(mean, join_width(ts, t0, t1, width))
    return units.sparkline(np.where(np.isfinite(mean), mean, np.nan).tolist(), lo, hi)


def braille(ts: np.ndarray, values: np.ndarray, t0: int, t1: int, width: int, height: int,
            lo: float, hi: float) -> list[str]:
    """A line chart ``height`` rows by ``width`` columns, two by four dots per character.

    Each dot column shows the range of its samples (so a one-sample spike stays visible)
    and is joined to the previous dot column so the line is continuous.
    """
    if width <= 0 or height <= 0:
        return []
    dots_x, dots_y = width * 2, height * 4
    _, vmin, vmax = bucket(ts, values, t0, t1, dots_x)
    join = join_width(ts, t0, t1, dots_x)
    vmin, vmax = fill_short_gaps(vmin, join), fill_short_gaps(vmax, join)
    cells = np.zeros((height, width), dtype=np.int64)
    scale = (dots_y - 1) / (hi - lo) if hi > lo else 0.0

    def to_dot(v: float) -> int:
        return int(min(max(round((v - lo) * scale), 0), dots_y - 1))

    prev: tuple[int, int] | None = None
    for x in range(dots_x):
        if not np.isfinite(vmin[x]):
            prev = None  # a gap: do not join across it
            continue
        a, b = to_dot(vmin[x]), to_dot(vmax[x])
        if prev is not None:
            a, b = min(a, prev[1]), max(b, prev[0])
        prev = (to_dot(vmin[x]), to_dot(vmax[x]))
        for y in range(a, b + 1):
            row = dots_y - 1 - y
            cells[row // 4, x // 2] |= _DOT[x % 2][row % 4]
    return ["".join(chr(_BRAILLE_BASE + int(c)) if c else " " for c in line) for line in cells]


def span_mask(spans: Iterable[tuple[int, int]], t0: int, t1: int, width: int) -> np.ndarray:
    """Columns covered by any ``(start, end)`` span (each span covers at least one column)."""
    mask = np.zeros(max(width, 0), dtype=bool)
    for start, end in spans:
        if end < t0 or start > t1 or width <= 0:
            continue
        mask[column_of(start, t0, t1, width): column_of(end, t0, t1, width) + 1] = True
    return mask


def marker_row(points: Iterable[tuple[int, str]], t0: int, t1: int, width: int, fill: str = " ") -> str:
    """A row with a one-character mark at each point's column; later points win ties."""
    row = [fill] * max(width, 0)
    for ts, mark in points:
        if width > 0 and t0 <= ts <= t1:
            row[column_of(ts, t0, t1, width)] = mark[:1]
    return "".join(row)


def time_axis(t0: int, t1: int, width: int) -> str:
    """Clock labels at the start, the middle and the end of a chart ``width`` columns wide."""
    left, right = fmt_clock(t0)[:8], fmt_clock(t1)[:8]
    if width < len(left) + len(right) + 2:
        return left[:width].ljust(width)
    row = [" "] * width
    row[: len(left)] = left
    row[width - len(right):] = right
    mid = fmt_clock(t0 + (t1 - t0) // 2)[:8]
    start = (width - len(mid)) // 2
    if start > len(left) + 1 and start + len(mid) < width - len(right) - 1:
        row[start: start + len(mid)] = mid
    return "".join(row)


def _number(v: float) -> str:
    """Short: ``512``, ``72.5``, ``0.25``; from ten thousand on with k/M/G (``19.3k``, ``1.94M``)."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{suffix}"
    return f"{v:.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:.1f}" if abs(v) >= 1 else f"{v:.2f}"


def _with_unit(text: str, unit: str) -> str:
    return f"{text}{unit}" if unit in ("%", "x", "", "°C") else f"{text} {unit}"


def fmt_value(v: float, unit: str = "") -> str:
    """A compact axis label: ``512 MiB``, ``79.6 GiB``, ``72.5 W``, ``0.25``."""
    if not np.isfinite(v):
        return "n/a"
    if unit == "MiB":
        return units.mib(float(v))
    return _with_unit(_number(v), unit)


def fmt_range(lo: float, hi: float, unit: str = "") -> str:
    """``0–79.6 GiB``: both ends in one unit, the unit once."""
    if unit == "MiB" and max(abs(lo), abs(hi)) >= 1024:
        lo, hi, unit = lo / 1024, hi / 1024, "GiB"
    return _with_unit(f"{_number(lo)}–{_number(hi)}", unit)
