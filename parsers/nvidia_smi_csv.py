"""``nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits]`` with or without ``-l`` repeats.

The header names the columns (``utilization.gpu [%]``); they are mapped onto the MetricSample
columns of ARCHITECTURE.md, units stripped. One MetricSample per row; identity columns (name,
uuid, driver, vbios) give one ``gpu-info`` event per GPU. Without a header the numeric columns
cannot be named, so only identity is read (and a warning says so).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from datetime import datetime

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.nvidia_smi_common import normalize_bus_id, number, smi_event
from forensics.parsers.common.windows_events import stamp

from forensics.events import MetricSample, TsSource
from forensics.ingest.textdoc import TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER", "QUERY_COLUMNS"]

#: nvidia-smi query field (as printed in the csv header, unit dropped) → MetricSample column.
QUERY_COLUMNS = {
    "memory.used": "mem_used_mib", "memory.total": "mem_total_mib",
    "utilization.gpu": "util_gpu_pct", "utilization.memory": "util_mem_pct",
    "power.draw": "power_w", "power.draw.average": "power_w", "power.draw.instant": "power_w",
    "power.limit": "power_limit_w", "enforced.power.limit": "power_limit_w",
    "temperature.gpu": "temp_c",
    "clocks.sm": "sm_clock_mhz", "clocks.current.sm": "sm_clock_mhz",
    "clocks.mem": "mem_clock_mhz", "clocks.current.memory": "mem_clock_mhz",
    "clocks_event_reasons.active": "clock_reasons", "clocks_throttle_reasons.active": "clock_reasons",
    "pcie.link.gen.current": "pcie_gen", "pcie.link.gen.gpucurrent": "pcie_gen",
    "pcie.link.gen.max": "pcie_gen_max", "pcie.link.gen.gpumax": "pcie_gen_max",
    "pcie.link.width.current": "pcie_width", "pcie.link.width.max": "pcie_width_max",
    "ecc.errors.corrected.volatile.total": "ecc_sbe_volatile",
    "ecc.errors.uncorrected.volatile.total": "ecc_dbe_volatile",
    "remapped_rows.pending": "remapped_pending", "retired_pages.pending": "remapped_pending",
    "remapped_rows.failure": "remapped_failure",
}
_IDENTITY = ("name", "uuid", "driver_version", "vbios_version", "serial", "pstate", "index")
_KNOWN = set(QUERY_COLUMNS) | set(_IDENTITY) | {"timestamp", "pci.bus_id", "gpu_bus_id"}
_TS = lazy_compile(r"(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?")
_BUS = lazy_compile(r"\b[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\b")


def _header_name(cell: str) -> str:
    # "[^][]": a cell of 100,000 "[" made "[^]]*" rescan to the end from each one (quadratic)
    return re.sub(r"\s*\[[^\]\[]*\]\s*$", "", cell.strip()[:256]).lower()


def _is_header(cells: list[str]) -> bool:
    return sum(1 for c in cells if _header_name(c) in _KNOWN) >= max(1, len(cells) // 2)


def _value(text: str) -> float | None:
    t = text.strip().strip("[]")
    low = t.lower()
    if low in ("yes", "active", "enabled"):
        return 1.0
    if low in ("no", "not active", "disabled"):
        return 0.0
    if low.startswith("0x"):
        try:
            return float(int(low.split()[0], 16))
        except ValueError:
            return None
    return number(t) if t and not low.startswith(("n/a", "not supported", "unknown")) else None


def _stamp(text: str, ctx: ParseContext) -> tuple[int | None, TsSource]:
    m = _TS.search(text)
    if not m:
        return None, TsSource.NONE
    try:
        y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
        naive = datetime(y, mo, d, h, mi, s, int((m.group(7) or "0")[:6].ljust(6, "0")))
    except ValueError:
        return None, TsSource.NONE
    return stamp(naive, ctx)


class NvidiaSmiCsvParser:
    name = "nvidia-smi-csv"
    #: producer versions its real samples hold (slurmonaws5's case note)
    tested_with = {"NVIDIA driver": ("570.172.08",)}
    samples = (
        # Shape: `nvidia-smi --query-gpu=timestamp,index,pci.bus_id,name,utilization.gpu,memory.used,
        # memory.total,power.draw,temperature.gpu,pcie.link.gen.current,pcie.link.gen.max --format=csv -l 1`
        # (header and value formats as nvidia-smi prints them); report-1 GPUs.
        """timestamp, index, pci.bus_id, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], temperature.gpu, pcie.link.gen.current, pcie.link.gen.max
2024/11/14 10:11:10.125, 0, 00000000:01:00.0, NVIDIA GeForce RTX 5090, 98 %, 29010 MiB, 32607 MiB, 512.31 W, 66, 5, 5
2024/11/14 10:11:10.127, 1, 00000000:0C:00.0, NVIDIA GeForce RTX 5070 Ti, 97 %, 9120 MiB, 16303 MiB, 231.52 W, 61, 4, 4
2024/11/14 10:11:11.129, 0, 00000000:01:00.0, NVIDIA GeForce RTX 5090, 0 %, 29010 MiB, 32607 MiB, [N/A], 60, 5, 5
""",  # noqa: E501, W291
        # Shape: the same query with `--format=csv,nounits`.
        """index, pci.bus_id, utilization.gpu [%], memory.used [MiB], memory.total [MiB]
0, 00000000:3B:00.0, 100, 55217, 81559
1, 00000000:5E:00.0, 0, 56817, 81559
""",
    )

    def detect(self, head: list[str]) -> float:
        if not head:
            return 0.0
        cells = head[0].split(",")
        if len(cells) >= 2 and _is_header(cells):
            return 0.95
        rows = [h for h in head[:10] if "," in h]
        # Headerless rows: every line a row of the same width (kernel lines naming a bus id are not).
        same_width = len({r.count(",") for r in rows}) == 1 and len(rows) == len([h for h in head[:10] if h.strip()])
        if rows and same_width and all(_BUS.search(r) or _TS.match(r) for r in rows) \
                and not any("|" in r for r in rows):
            return 0.7
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        header: list[str] | None = None
        seen: set[str] = set()
        warned = False
        for line in doc.lines():
            if not line.text.strip():
                continue
            try:
                cells = next(csv.reader(io.StringIO(line.text), skipinitialspace=True))
            except (csv.Error, StopIteration):
                continue
            if _is_header(cells):
                header = [_header_name(c) for c in cells]
                continue
            row = dict(zip(header, cells, strict=False)) if header else {}
            if not header:
                if not warned:
                    ctx.warn("csv without a header (--format=csv,noheader): numeric columns cannot be "
                             "named; only GPU identity was read", line)
                    warned = True
                bus_m = next((_BUS.search(c) for c in cells if _BUS.search(c)), None)
                row = {"pci.bus_id": bus_m.group() if bus_m else ""}
                ts_cell = next((c for c in cells if _TS.match(c.strip())), "")
                row["timestamp"] = ts_cell
            bus_text = row.get("pci.bus_id") or row.get("gpu_bus_id") or ""
            gpu = normalize_bus_id(bus_text) if bus_text else None
            gpu = gpu or (row.get("index", "").strip() or None)
            if gpu is None:
                continue
            ts, ts_source = _stamp(row.get("timestamp", ""), ctx)
            values: dict[str, float] = {}
            for name, raw in row.items():
                col = QUERY_COLUMNS.get(name)
                if col is not None:
                    v = _value(raw)
                    if v is not None:
                        values[col] = v
            if gpu not in seen:
                seen.add(gpu)
                ident = {k: row[k].strip() for k in _IDENTITY if row.get(k, "").strip()}
                yield smi_event(ctx, ctx.origin(line), "gpu-info",
                                f"GPU {ident.get('index', '')} {ident.get('name', '')} at {gpu}".replace("  ", " "),
                                ts=ts, ts_source=ts_source, gpu=gpu, attrs={"tool": self.name, "pci": gpu, **ident})
            if values:
                yield MetricSample(ts=ts, ts_source=ts_source, gpu=gpu, values=values, origin=ctx.origin(line),
                                   host=ctx.host, source=ctx.source)


PARSER = NvidiaSmiCsvParser()
