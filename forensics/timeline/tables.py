"""A timeline as pandas DataFrames, for a notebook: one row per event, one row per GPU sample.

Columns have fixed types, also when a frame is empty, and times are ``datetime64[ns, UTC]`` (``NaT`` where
an event has no time). Row ``i`` of :func:`events_frame` is ``events[i]``, so a selection maps back to
the :class:`~forensics.events.Event` and its raw lines (``Analysis.document(row.file)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from forensics.events import Event, MetricSample, Severity, TsSource

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["EVENT_COLUMNS", "METRIC_COLUMNS", "events_frame", "metrics_frame"]

#: The events frame's columns and their dtypes.
EVENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ts", "datetime64[ns, UTC]"), ("host", "category"), ("gpu", "category"), ("rank", "Int64"),
    ("pid", "Int64"), ("source", "category"), ("kind", "category"), ("severity", "category"),
    ("message", "string"), ("file", "string"), ("line", "int64"), ("ts_source", "category"),
    ("attrs", "object"), ("detail", "string"),
)
#: The NVML / nvidia-smi readings (ARCHITECTURE.md, *MetricSample columns*), each a float64 column of the
#: metrics frame, in this order; a reading of another name gets a column after them.
METRIC_COLUMNS: tuple[str, ...] = (
    "mem_used_mib", "mem_total_mib", "util_gpu_pct", "util_mem_pct", "power_w", "power_limit_w", "temp_c",
    "sm_clock_mhz", "mem_clock_mhz", "clock_reasons", "pcie_gen", "pcie_gen_max", "pcie_width",
    "pcie_width_max", "pcie_replay", "ecc_sbe_volatile", "ecc_dbe_volatile", "remapped_pending",
    "remapped_failure",
)
_SEVERITIES = [s.name.lower() for s in sorted(Severity)]
_SEVERITY_NAME = {int(s): s.name.lower() for s in Severity}
_NO_TIME = -(1 << 63)  # numpy's NaT as int64


def _times(stamps: Sequence[int | None]) -> pd.Series:
    import numpy as np
    import pandas as pd

    ns = np.fromiter((_NO_TIME if t is None else t for t in stamps), dtype=np.int64, count=len(stamps))
    return pd.Series(ns.view("datetime64[ns]")).dt.tz_localize("UTC")


def _category(values: list[Any], categories: list[str] | None = None, ordered: bool = False) -> pd.Series:
    import pandas as pd

    return pd.Series(pd.Categorical(values, categories=categories, ordered=ordered))


def events_frame(events: Sequence[Event]) -> pd.DataFrame:
    """One row per event, in timeline order: the columns of :data:`EVENT_COLUMNS` (``severity`` an ordered
    category, ``debug`` < … < ``critical``; ``file``/``line`` the origin of its raw text)."""
    import pandas as pd

    frame = pd.DataFrame({
        "ts": _times([e.ts for e in events]),
        "host": _category([e.host for e in events]),
        "gpu": _category([e.gpu for e in events]),
        "rank": pd.array([e.rank for e in events], dtype="Int64"),
        "pid": pd.array([e.pid for e in events], dtype="Int64"),
        "source": _category([e.source for e in events]),
        "kind": _category([e.kind for e in events]),
        "severity": _category([_SEVERITY_NAME.get(int(e.severity)) for e in events], _SEVERITIES, ordered=True),
        "message": pd.array([e.message for e in events], dtype="string"),
        "file": pd.array([e.origin.path for e in events], dtype="string"),
        "line": pd.array([e.origin.line for e in events], dtype="int64"),
        "ts_source": _category([str(e.ts_source) for e in events], [str(t) for t in TsSource]),
        "attrs": pd.Series([dict(e.attrs) for e in events], dtype="object"),
        "detail": pd.array([e.detail for e in events], dtype="string"),
    })
    return frame


def metrics_frame(samples: Sequence[MetricSample]) -> pd.DataFrame:
    """One row per GPU sample, in timeline order: ``ts``, ``host``, ``gpu``, ``source``, a float64 column per
    reading (:data:`METRIC_COLUMNS` first, NaN where a sample did not read it), ``file`` and ``line``."""
    import numpy as np
    import pandas as pd

    extra = sorted({k for s in samples for k in s.values} - set(METRIC_COLUMNS))
    columns: dict[str, object] = {
        "ts": _times([s.ts for s in samples]),
        "host": _category([s.host for s in samples]),
        "gpu": _category([s.gpu for s in samples]),
        "source": _category([s.source for s in samples]),
    }
    for name in (*METRIC_COLUMNS, *extra):
        columns[name] = np.fromiter((_number(s.values.get(name)) for s in samples), dtype=np.float64,
                                    count=len(samples))
    columns["file"] = pd.array([s.origin.path for s in samples], dtype="string")
    columns["line"] = pd.array([s.origin.line for s in samples], dtype="int64")
    return pd.DataFrame(columns)


def _number(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return float("nan")
