"""``nvidia-smi dmon``: one row per GPU per interval under ``#``-headers (names, then units),
with or without ``-o DT`` date/time columns, headers repeated every screenful.

Each row is one MetricSample; the GPU is its index (dmon prints no bus id).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.nvidia_smi_common import number
from forensics.parsers.common.windows_events import stamp

from forensics.events import MetricSample, TsSource
from forensics.ingest.textdoc import Line, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["DMON_HEADER", "PARSER", "columns_of", "row_stamp", "table_rows"]

#: dmon column → MetricSample column (``pclk`` is the graphics/SM clock; ``pci`` the replay count).
DMON_COLUMNS = {
    "pwr": "power_w", "gtemp": "temp_c", "sm": "util_gpu_pct", "mem": "util_mem_pct",
    "mclk": "mem_clock_mhz", "pclk": "sm_clock_mhz", "fb": "mem_used_mib",
    "sbecc": "ecc_sbe_volatile", "dbecc": "ecc_dbe_volatile", "pci": "pcie_replay",
}
DMON_HEADER = lazy_compile(r"^#\s*(?:Date\s+Time\s+)?gpu\b", re.I)
_DATE = lazy_compile(r"^(\d{8})$")
_TIME = lazy_compile(r"^(\d\d):(\d\d):(\d\d)$")


def columns_of(line: str) -> list[str]:
    """Column names of a ``#`` header line, lower-cased (``#Date Time gpu pwr …``)."""
    return line.lstrip("#").lower().split()


def row_stamp(cells: dict[str, str], ctx: ParseContext) -> tuple[int | None, TsSource]:
    d, t = cells.get("date", ""), cells.get("time", "")
    dm, tm = _DATE.match(d), _TIME.match(t)
    if not (dm and tm):
        return None, TsSource.NONE
    try:
        naive = datetime(int(d[:4]), int(d[4:6]), int(d[6:8]), int(tm.group(1)), int(tm.group(2)), int(tm.group(3)))
    except ValueError:
        return None, TsSource.NONE
    return stamp(naive, ctx)


def table_rows(doc: TextDocument, first_column: str) -> Iterator[tuple[Line, dict[str, str]]]:
    """Rows of a dmon/pmon table as {column: cell}, following repeated headers."""
    cols: list[str] | None = None
    for line in doc.lines():
        text = line.text.strip()
        if not text:
            continue
        if text.startswith("#"):
            names = columns_of(text)
            if first_column in names:
                cols = names
            continue
        if cols is None:
            continue
        cells = text.split()
        if len(cells) < len(cols):
            continue
        if len(cells) > len(cols):  # the last column (pmon command) may hold spaces
            cells = cells[: len(cols) - 1] + [" ".join(cells[len(cols) - 1:])]
        yield line, dict(zip(cols, cells, strict=True))


class NvidiaSmiDmonParser:
    name = "nvidia-smi-dmon"
    samples = (
        # Shape: `nvidia-smi dmon` (header/unit lines as the nvidia-smi documentation shows them).
        """# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk
# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz
    0    512     66      -     98     41      0      0      0      0  14001   2790
    1    231     61      -     97     38      0      0      0      0  14001   2760
    0    118     60      -      0      0      0      0      0      0  14001   2790
""",
        # Shape: `nvidia-smi dmon -o DT -s pu` (date and time columns first).
        """#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec
#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %
 20241114   10:11:10      0    512     66      -     98     41      0      0
 20241114   10:11:10      1    231     61      -     97     38      0      0
""",
    )

    def detect(self, head: list[str]) -> float:
        for h in head[:5]:
            if DMON_HEADER.match(h.strip()):
                cols = columns_of(h)
                if "pid" in cols:
                    return 0.0
                if any(c in cols for c in ("pwr", "sm", "gtemp", "mclk", "fb")):
                    return 0.95
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        for line, cells in table_rows(doc, "gpu"):
            gpu = cells.get("gpu", "")
            if not gpu.isdigit():
                continue
            values: dict[str, float] = {}
            for name, col in DMON_COLUMNS.items():
                raw = cells.get(name)
                v = number(raw) if raw and raw != "-" else None
                if v is not None:
                    values[col] = v
            if not values:
                continue
            ts, ts_source = row_stamp(cells, ctx)
            yield MetricSample(ts=ts, ts_source=ts_source, gpu=gpu, values=values, origin=ctx.origin(line),
                               host=ctx.host, source=ctx.source)


PARSER = NvidiaSmiDmonParser()
