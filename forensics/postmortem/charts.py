"""What the report charts draw: the time window, one GPU's bucketed series with its axis range,
and where the findings fall on the same columns (shared by the Markdown sparklines and the HTML SVG)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from forensics.postmortem.metrics import bucketed

if TYPE_CHECKING:
    from forensics.analysis import Analysis
    from forensics.findings import Finding

__all__ = ["chart_window", "marks", "p2p_cells", "series"]

LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"
#: fixed or limit-column top of each charted column's axis
_TOPS = {"mem_used_mib": "mem_total_mib", "power_w": "power_limit_w"}


def chart_window(frame: pd.DataFrame) -> tuple[int, int] | None:
    if frame.empty:
        return None
    t0, t1 = int(frame["ts"].min()), int(frame["ts"].max())
    return (t0, t1) if t1 > t0 else None


def series(frame: pd.DataFrame, host: str, gpu: str, column: str, t0: int, t1: int,
           width: int) -> tuple[list[float], float, float]:
    """Bucketed values of one GPU's column and the axis (0 to its limit, 100 for percentages)."""
    values = bucketed(frame, host, gpu, column, t0, t1, width)
    n = int(((frame["host"] == host) & (frame["gpu"] == gpu)).sum()) if column in frame else 0
    if 0 < n < width:  # samples sparser than columns: join neighbours instead of drawing a comb
        values = [float(x) for x in pd.Series(values).ffill(limit=math.ceil(2 * width / n))]
    hi = 100.0 if column.endswith("_pct") else math.nan
    top = _TOPS.get(column)
    if top and top in frame:
        sel = frame[(frame["host"] == host) & (frame["gpu"] == gpu)][top].dropna()
        if not sel.empty:
            hi = float(sel.max())
    finite = [v for v in values if v == v]
    if hi != hi:
        hi = max(finite, default=1.0) or 1.0
    return values, 0.0, max(hi, max(finite, default=0.0), 1e-9)


def marks(analysis: Analysis, t0: int, t1: int, width: int) -> list[tuple[int, str, Finding]]:
    """(column, letter, finding) for each finding of the verdict first seen inside the window."""
    v = analysis.verdict
    ordered = sorted(([v.root_cause] if v.root_cause else []) + v.consequences + v.contributing,
                     key=lambda f: (f.first_seen is None, f.first_seen or 0))  # letters in time order
    out: list[tuple[int, str, Finding]] = []
    for f in ordered:
        ts = f.first_seen
        if ts is None or len(out) >= len(LETTERS):
            continue
        ts = min(max(ts, t0), t1)
        col = int(min(max((ts - t0) * width // (t1 - t0 + 1), 0), width - 1))
        out.append((col, LETTERS[len(out)], f))
    return out


_P2P_SHORT = {"OK": "OK", "N/A": "–", "NOT_SUPPORTED": "no", "CHIPSET_NOT_SUPPORTED": "no (chipset)",
              "GPU_NOT_SUPPORTED": "no (GPU)", "TOPOLOGY_NOT_SUPPORTED": "no (topology)",
              "DISABLED_BY_REGKEY": "disabled", "UNKNOWN": "?", "X": "X"}


def p2p_cells(p2p: dict[str, list[list[str]]]) -> tuple[list[str], list[list[str]]]:
    """The NVML P2P matrices folded into one: each cell lists every kind's status in ``kinds`` order
    (``read / write / nvlink / atomics / prop``), shortened."""
    kinds = [k for k, m in p2p.items() if m]
    if not kinds:
        return [], []
    n = len(p2p[kinds[0]])
    cells = []
    for i in range(n):
        row = []
        for j in range(n):
            vals = [p2p[k][i][j] if i < len(p2p[k]) and j < len(p2p[k][i]) else "?" for k in kinds]
            row.append("X" if i == j else " / ".join(_P2P_SHORT.get(v, v) for v in vals))
        cells.append(row)
    return kinds, cells


def attachment_facts(analysis: Analysis) -> list[str]:
    """The PCIe topology facts (forensics/timeline/topology.py) when a GPU sits behind the chipset or a switch:
    the line of the hardware table a user wrote by hand in report 1 ("the second GPU is in a chipset x4
    slot"). Empty when every GPU is on CPU lanes or nothing is known."""
    topo = analysis.topology
    if not any(g.attachment in ("chipset", "switch") for g in topo.gpus):
        return []
    return topo.facts()


def pace_parts(progress: dict[str, object] | None) -> list[str]:
    """The training pace a report states (median rate, median step time, last step), as plain text
    parts; empty when the progress lines gave neither a rate nor a step time."""
    if not progress or not (progress.get("rate") or progress.get("step_s")):
        return []
    parts = []
    rate, step_s, last = progress.get("rate"), progress.get("step_s"), progress.get("last_step")
    if isinstance(rate, int | float) and rate:
        parts.append(f"median {rate:,.1f} {progress.get('rate_unit')}")
    if isinstance(step_s, int | float) and step_s:
        parts.append(f"median step {step_s * 1000:,.1f} ms")
    if last is not None:
        parts.append(f"last step {last}")
    return parts
