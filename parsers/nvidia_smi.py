"""``nvidia-smi`` default output: the GPU table (one or many snapshots, e.g. ``nvidia-smi -l`` or
``watch``) and nvidia-smi's failure texts.

Each GPU row of each snapshot gives one MetricSample (memory, utilisation, power, temperature);
the first sight of a GPU gives a ``gpu-info`` event (name, index, bus id, driver), the process
table one ``gpu-info`` per process; error texts (``GPU is lost``, ``No devices were found``,
``Failed to initialize NVML: …``) are ``nvidia-smi`` events of severity error, with the NVML
return code they stand for. Lines of another program pasted around the table (the error that sent the
user to nvidia-smi) are read as plain text would be, in place.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from forensics.parsers.common.base import ParseContext, Record, whole_text
from forensics.parsers.common.nvidia_smi_common import normalize_bus_id, number, parse_ctime, smi_event

from forensics.events import MetricSample, Severity, TsSource
from forensics.ingest.textdoc import Line, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["ERRORS", "PARSER", "match_error"]

_BUS = r"[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
_ROW1 = lazy_compile(
    rf"^\|\s*(\d+)\s+(.+?)\s+(On|Off|WDDM|TCC|N/A)\s*\|\s*({_BUS})\s+(On|Off|N/A)\s*\|\s*(.*?)\s*\|"
)
_ROW2 = lazy_compile(
    r"^\|\s*(\d+%|N/A)\s+(\d+C|N/A)\s+(P\d+|N/A)\s+(?:(\S+?)\s*/\s*(\S+?)\s*)?\|"
    r"\s*(\d+)\s*MiB\s*/\s*(\d+)\s*MiB\s*\|\s*(\d+%|N/A)\s*(.*?)\s*\|"
)
_PROC = lazy_compile(r"^\|\s*(\d+)\s+(?:(\S+)\s+(\S+)\s+)?(\d+)\s+(C\+G|C|G)\s+(.+?)\s+(\d+MiB|N/A)\s*\|")
_SMI = lazy_compile(r"NVIDIA-SMI\s+([\d.]+)\s+Driver Version:\s*([\d.]+)(?:\s+CUDA Version:\s*([\d.]+))?")
#: A line of the table itself: its borders, header and rows, the process table.
_TABLE_LINE = lazy_compile(r"^\s*[|+]|^\s*=+\s*$")
_BLANK = bytes(b if b == 0x0A else 0x20 for b in range(256))
_CTIME_LINE = lazy_compile(
    r"(?:^|\s)(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\s+[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+\d{4}\s*$"
)

#: (pattern, NVML return-code name) for nvidia-smi's failure texts (catalog-driver §3).
ERRORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(rf"Unable to determine the device handle for (?:GPU\s*(?:\d+:\s+)?)?({_BUS})?.*GPU is lost", re.I),
     "GPU_IS_LOST"),
    (re.compile(rf"Unable to determine the device handle for (?:GPU\s*(?:\d+:\s+)?)?({_BUS})?.*Unknown Error", re.I),
     "UNKNOWN"),
    (re.compile(rf"Unable to determine the device handle for (?:GPU\s*(?:\d+:\s+)?)?({_BUS})?", re.I), "UNKNOWN"),
    (re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"), "DRIVER_NOT_LOADED"),
    (re.compile(r"^\s*No devices were found\s*$"), "NOT_FOUND"),
    (re.compile(r"(?:Failed to initialize|Failed to properly shut down) NVML: Driver/library version mismatch"),
     "LIB_RM_VERSION_MISMATCH"),
    (re.compile(r"(?:Failed to initialize|Failed to properly shut down) NVML: "
                r"GPU access blocked by the operating system"),
     "OPERATING_SYSTEM"),
    (re.compile(r"(?:Failed to initialize|Failed to properly shut down) NVML: Unknown Error"), "UNKNOWN"),
    (re.compile(r"(?:Failed to initialize|Failed to properly shut down) NVML: .*"), "UNKNOWN"),
    (re.compile(r"GPU requires reset|GPU Recovery Action\s*:\s*(?:Reset|Reboot|Drain)", re.I), "RESET_REQUIRED"),
    (re.compile(rf"GPU ({_BUS}): In use by another client|The following GPUs could not be reset"), "IN_USE"),
    (re.compile(r"Mismatch in versions between nvidia-smi and NVML"), "LIB_RM_VERSION_MISMATCH"),
)


def match_error(text: str) -> tuple[str, str | None] | None:
    """(NVML code name, bus id or None) if ``text`` is one of nvidia-smi's failure texts."""
    for pattern, code in ERRORS:
        m = pattern.search(text)
        if m:
            bus = m.group(1) if m.groups() and m.group(1) else None
            return code, normalize_bus_id(bus) if bus else None
    return None


class NvidiaSmiParser:
    name = "nvidia-smi"
    #: producer versions its real samples hold (the tables' own headers; cs336data1's case note)
    tested_with = {"NVIDIA driver": ("375.26", "390.59", "535.183.01", "535.216.03"), "CUDA": ("12.2",)}
    samples = (
        # Real: two snapshots' worth of the GPU table of an 8×H100 hang (corpus
        # stall-nvidia-smi-one-gpu-idle; GitHub collapsed the dashed rulers to "+-+").
        """Thu Sep 12 23:12:25 2024
+-+
| NVIDIA-SMI 535.183.01             Driver Version: 535.183.01   CUDA Version: 12.2     |
|-+-+-+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=+=+=|
|   0  NVIDIA H100 80GB HBM3          On  | 0:53:00.0 Off |                           0 |
| N/A   37C    P0             116W / 700W |  55217MiB / 81559MiB |    100%      Default |
|                                         |                      |             Disabled |
+-+-+-+
|   1  NVIDIA H100 80GB HBM3          On  | 0:64:00.0 Off |                           0 |
| N/A   39C    P0             121W / 700W |  56817MiB / 81559MiB |    100%      Default |
""",  # noqa: E501, W291
        # Real: nvidia-smi inside WSL2 after the dxg channel broke (corpus wsl41062).
        """Failed to initialize NVML: GPU access blocked by the operating system
Failed to properly shut down NVML: GPU access blocked by the operating system
""",
        # Real texts quoted in catalog-driver §3 (GPU lost after Xid 79; driver not loaded).
        """Unable to determine the device handle for GPU0000:03:00.0: Unknown Error
Unable to determine the device handle for GPU 0000:05:00.0: GPU is lost.  Reboot the system to recover this GPU
""",
        """NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.
""",  # noqa: E501, W291
    )

    def detect(self, head: list[str]) -> float:
        text = "\n".join(head[:15])
        if _SMI.search(text):
            return 0.95
        if any(_ROW1.match(h) for h in head[:30]) and any(_ROW2.match(h) for h in head[:30]):
            return 0.9
        firsts = [h for h in head[:10] if h.strip()]
        hits = sum(1 for h in firsts if match_error(h) or h.startswith("NVML library version"))
        if firsts and hits == len(firsts):
            return 0.9
        if hits and match_error(firsts[0]):
            return 0.6
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        ts: int | None = None
        ts_source = TsSource.NONE
        driver: str | None = None
        seen_gpus: set[str] = set()
        seen_ecc: set[tuple[str, str]] = set()
        seen_procs: set[tuple[str, int]] = set()
        index_to_bus: dict[str, str] = {}
        pending: tuple[str, str, str, Line] | None = None  # index, name, bus id, line of the first row
        others: list[Line] = []  # lines that are neither the table nor nvidia-smi's own texts
        for line in doc.lines():
            text = line.text.rstrip()
            if not text.strip():
                continue
            if not _TABLE_LINE.match(text) and not _SMI.search(text) and not match_error(text) \
                    and not _CTIME_LINE.search(text):
                others.append(line)
                continue
            if _CTIME_LINE.search(text) and "|" not in text:
                ts, ts_source = parse_ctime(text, ctx)
                continue
            m = _SMI.search(text)
            if m:
                driver = m.group(2)
                continue
            m = _ROW1.match(text)
            if m:
                idx, name, bus_text = m.group(1), m.group(2).strip(), m.group(4)
                bus = normalize_bus_id(bus_text) or bus_text
                index_to_bus[idx] = bus
                pending = (idx, name, bus, line)
                ecc = m.group(6).strip()
                if ecc.isdigit() and int(ecc) > 0 and (bus, ecc) not in seen_ecc:
                    seen_ecc.add((bus, ecc))  # the table's "Volatile Uncorr. ECC" cell
                    yield smi_event(ctx, ctx.origin(line), "nvidia-smi",
                                    f"GPU {idx} ({bus}): Volatile Uncorr. ECC {ecc} (uncorrectable ECC errors since "
                                    "the driver loaded)", ts=ts, ts_source=ts_source, severity=Severity.ERROR, gpu=bus,
                                    attrs={"tool": self.name, "pci": bus, "ecc_uncorrectable_volatile": int(ecc)})
                if bus not in seen_gpus:
                    seen_gpus.add(bus)
                    yield smi_event(ctx, ctx.origin(line), "gpu-info", f"GPU {idx}: {name} at {bus}",
                                    ts=ts, ts_source=ts_source, gpu=bus,
                                    attrs={"tool": self.name, "index": int(idx), "name": name, "pci": bus,
                                           "driver": driver, "mode": m.group(3)})
                continue
            m = _ROW2.match(text)
            if m and pending is not None:
                idx, _name, bus, first = pending
                pending = None
                values = {"mem_used_mib": float(m.group(6)), "mem_total_mib": float(m.group(7))}
                for key, raw in (("util_gpu_pct", m.group(8)), ("temp_c", m.group(2)), ("power_w", m.group(4)),
                                 ("power_limit_w", m.group(5))):
                    v = number(raw) if raw and raw != "N/A" else None
                    if v is not None:
                        values[key] = v
                yield MetricSample(ts=ts, ts_source=ts_source, gpu=bus, values=values,
                                   origin=ctx.origin(first, line.no - first.no + 1), host=ctx.host,
                                   source=ctx.source)
                continue
            m = _PROC.match(text)
            if m:
                gpu = index_to_bus.get(m.group(1), m.group(1))
                pid = int(m.group(4))
                if (gpu, pid) not in seen_procs:
                    seen_procs.add((gpu, pid))
                    used = number(m.group(7))
                    yield smi_event(ctx, ctx.origin(line), "gpu-info",
                                    f"process {m.group(6).strip()} (pid {pid}) on GPU {m.group(1)}",
                                    ts=ts, ts_source=ts_source, gpu=gpu,
                                    attrs={"tool": self.name, "pid": pid, "process": m.group(6).strip(),
                                           "type": m.group(5), "used_mib": used})
                continue
            err = match_error(text)
            if err:
                code, bus = err
                yield smi_event(ctx, ctx.origin(line), "nvidia-smi", text.strip(), ts=ts, ts_source=ts_source,
                                severity=Severity.ERROR, gpu=bus,
                                attrs={"tool": self.name, "nvml_error": code, "pci": bus})
        if others:
            yield from _around_the_table(doc, ctx, others)


def _around_the_table(doc: TextDocument, ctx: ParseContext, others: list[Line]) -> Iterator[Record]:
    """The non-table lines read by the generic text scan, at their own lines and offsets (the table's
    bytes blanked out, newlines kept)."""
    from forensics.parsers.process_output import scan

    data = whole_text(doc, ctx)
    if data is None:
        return
    kept = bytearray(data.translate(_BLANK))
    for line in others:
        end = data.find(b"\n", line.offset)
        end = len(data) if end < 0 else end
        kept[line.offset:end] = data[line.offset:end]
    yield from scan(TextDocument(bytes(kept), doc.path), ctx, generic=True)


PARSER = NvidiaSmiParser()
