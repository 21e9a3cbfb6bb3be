"""Per-GPU metric tables over a run, with pandas: one frame of every NVML / nvidia-smi sample, a
summary row per GPU (peak memory, headroom, utilization, power) and evenly bucketed series for
sparklines (``forensics.units.sparkline``) and SVG charts; plus the training rate and step time from
``progress`` events."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from forensics.analysis import Analysis

__all__ = ["GPU_COLUMNS", "bucketed", "gpu_frame", "gpu_summary", "progress_summary", "rank_steps"]

#: the columns the report charts: (column, label, unit)
GPU_COLUMNS = (("mem_used_mib", "memory", "MiB"), ("util_gpu_pct", "utilization", "%"), ("power_w", "power", "W"))


def gpu_frame(analysis: Analysis) -> pd.DataFrame:
    """Every timed GPU sample: columns ``host``, ``gpu``, ``ts`` and one per metric (NaN where unread)."""
    rows = [{"host": m.host or "", "gpu": m.gpu, "ts": m.ts, **m.values}
            for m in analysis.timeline.metrics if m.ts is not None]
    if not rows:
        return pd.DataFrame(columns=["host", "gpu", "ts"])
    frame = pd.DataFrame.from_records(rows)
    return frame.sort_values(["host", "gpu", "ts"], kind="stable").reset_index(drop=True)


def _col(frame: pd.DataFrame, name: str) -> pd.Series:
    return frame[name] if name in frame else pd.Series([math.nan] * len(frame), index=frame.index, dtype=float)


def gpu_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (host, GPU): samples, first/last time, peak and total memory, headroom (total − peak),
    mean/peak utilization and power, peak temperature."""
    cols = ["host", "gpu", "samples", "first_ts", "last_ts", "peak_mem_mib", "total_mib", "headroom_mib",
            "mean_util_pct", "peak_util_pct", "mean_power_w", "peak_power_w", "power_limit_w", "peak_temp_c"]
    if frame.empty:
        return pd.DataFrame(columns=cols)
    work = pd.DataFrame({
        "host": frame["host"], "gpu": frame["gpu"], "ts": frame["ts"],
        "mem": _col(frame, "mem_used_mib"), "total": _col(frame, "mem_total_mib"),
        "util": _col(frame, "util_gpu_pct"), "power": _col(frame, "power_w"),
        "limit": _col(frame, "power_limit_w"), "temp": _col(frame, "temp_c"),
    })
    g = work.groupby(["host", "gpu"], sort=True)
    out = pd.DataFrame({
        "samples": g["ts"].size(), "first_ts": g["ts"].min(), "last_ts": g["ts"].max(),
        "peak_mem_mib": g["mem"].max(), "total_mib": g["total"].max(),
        "mean_util_pct": g["util"].mean(), "peak_util_pct": g["util"].max(),
        "mean_power_w": g["power"].mean(), "peak_power_w": g["power"].max(),
        "power_limit_w": g["limit"].max(), "peak_temp_c": g["temp"].max(),
    }).reset_index()
    out["headroom_mib"] = out["total_mib"] - out["peak_mem_mib"]
    return out[cols]


def bucketed(frame: pd.DataFrame, host: str, gpu: str, column: str, t0: int, t1: int, width: int) -> list[float]:
    """The mean of ``column`` for one GPU in each of ``width`` equal time buckets over ``[t0, t1]``
    (NaN where no sample fell)."""
    if frame.empty or column not in frame or width <= 0:
        return [math.nan] * max(width, 0)
    sel = frame[(frame["host"] == host) & (frame["gpu"] == gpu)][["ts", column]].dropna()
    if sel.empty:
        return [math.nan] * width
    span = max(t1 - t0, 1)
    idx = ((sel["ts"] - t0) * width // (span + 1)).clip(0, width - 1).astype(int)
    means = sel[column].groupby(idx).mean()
    return [float(means.get(i, math.nan)) for i in range(width)]


@dataclass
class Progress:
    """What the training's own progress lines say about its pace."""

    lines: int
    last_step: int | None
    rate: float | None  # median of the rate column
    rate_unit: str  # tokens/s, samples/s, it/s
    step_s: float | None  # median seconds per step

    def as_dict(self) -> dict[str, Any]:
        return {"lines": self.lines, "last_step": self.last_step, "rate": self.rate, "rate_unit": self.rate_unit,
                "step_s": self.step_s}


_RATES = (("tokens_s", "tokens/s"), ("samples_s", "samples/s"), ("it_s", "it/s"))


def progress_summary(analysis: Analysis) -> Progress | None:
    """Median throughput and step time from ``progress`` events (the first step, warm-up, left out when
    there are more than three); ``None`` when the run printed none."""
    rows = [dict(e.attrs) for e in analysis.timeline.events if e.kind == "progress"]
    if not rows:
        return None
    frame = pd.DataFrame.from_records(rows)
    steps = pd.to_numeric(frame["step"], errors="coerce") if "step" in frame else pd.Series(dtype=float)
    steady = frame.iloc[1:] if len(frame) > 3 else frame
    rate, unit = None, ""
    for col, label in _RATES:
        if col in steady and steady[col].notna().any():
            rate, unit = float(pd.to_numeric(steady[col], errors="coerce").median()), label
            break
    step_s = None
    if "s_it" in steady and steady["s_it"].notna().any():
        step_s = float(pd.to_numeric(steady["s_it"], errors="coerce").median())
    elif "it_s" in steady and steady["it_s"].notna().any():
        it = float(pd.to_numeric(steady["it_s"], errors="coerce").median())
        step_s = 1.0 / it if it > 0 else None
    last = int(steps.max()) if steps.notna().any() else None
    return Progress(len(frame), last, rate, unit, step_s)


def rank_steps(analysis: Analysis) -> dict[int, int | None]:
    """Rank -> the highest step its own progress lines reached (``None``: lines without a step)."""
    out: dict[int, int | None] = {}
    for e in analysis.timeline.events:
        if e.kind != "progress" or e.rank is None:
            continue
        step = e.attrs.get("step")
        best = out.get(e.rank)
        if isinstance(step, int) and not isinstance(step, bool):
            out[e.rank] = step if best is None else max(best, step)
        else:
            out.setdefault(e.rank, best)
    return out
