"""``nvidia-smi -q`` (``--query``): indent-structured ``Key : Value`` text, one block per GPU
(``GPU 00000000:10:1C.0``), maybe repeated with ``-l``.

Each GPU block becomes :class:`GpuFacts` → a ``gpu-info`` event, events for notable states
(row remap pending, uncorrectable ECC or SRAM-unit counts, link below max, HW slowdown, recovery
action, Reset Required / Drain and Reset Recommended) and a MetricSample when the block has readings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.nvidia_smi_common import GpuFacts, facts_records, normalize_bus_id, number, parse_ctime

from forensics.events import TsSource
from forensics.ingest.textdoc import TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER", "facts_from_leaves"]

_GPU = lazy_compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
# Linear on any line (a key of words and single blanks, never a lazy run followed by blanks: 40 lines of
# ``x`` and 65,000 tabs took 143 s here, on every input's head).
_KV = lazy_compile(r"^(\s*)([^:\s](?:\s*[^:\s])*)\s+:\s?(.*)$")
_SECTION = lazy_compile(r"^(\s*)(\S(?:.*\S)?)\s*$")

Leaves = list[tuple[tuple[str, ...], str]]
_UNSCOPED_UNC = lazy_compile(r"^(?:sram|dram) uncorrectable(?: parity| sec-ded)?$")
#: Section titles and keys that only `nvidia-smi -q` prints: an excerpt holding them (pasted without
#: the `GPU <bus id>` line, or grepped) is still this format.
_Q_MARKS = lazy_compile(
    r"^\s*(?:ECC Errors|Remapped Rows|Retired Pages|Clocks (?:Event|Throttle) Reasons|GPU Link Info|"
    r"Bank Remap Availability Histogram|Aggregate Uncorrectable SRAM Sources|(?:SRAM|DRAM) (?:Unc|C)orrectable"
    r"(?: Parity| SEC-DED)?\s+:|Remapping Failure Occurred\s+:|Pending Page Blacklist\s+:|"
    r"HW (?:Thermal |Power Brake )?Slowdown\s+:|Replays Since Reset\s+:)\s*(?:$|\S)"
)


def _yes(v: str) -> bool | None:
    t = v.strip().lower()
    return True if t == "yes" else False if t == "no" else None


def facts_from_leaves(f: GpuFacts, leaves: Leaves) -> GpuFacts:
    """Fill ``f`` from (lower-cased section path, value) pairs of one GPU block."""
    unc_v = unc_a = corr_v = 0.0
    seen_unc_v = seen_unc_a = seen_corr_v = False
    for path, value in leaves:
        key = path[-1]
        sect = path[:-1]
        n = number(value)
        if key == "product name":
            f.name = value.strip()
        elif key in ("gpu uuid", "uuid"):
            f.uuid = value.strip()
        elif key == "serial number":
            f.serial = value.strip()
        elif key == "vbios version":
            f.vbios = value.strip()
        elif sect and sect[-1].endswith("uncorrectable sram sources") and n is not None:
            f.sram_unc_sources[key.replace("sram ", "")] = n
        elif "ecc errors" in sect and n is not None:
            volatile = "volatile" in sect
            aggregate = "aggregate" in sect
            # R450+: "SRAM/DRAM Uncorrectable[ Parity| SEC-DED]"; older: "Double Bit" > unit rows + "Total"
            double = "double bit" in sect
            is_unc = "uncorrectable" in key or (double and key == "total")
            is_corr = not is_unc and ("correctable" in key or ("single bit" in sect and key == "total"))
            if is_unc and (volatile or aggregate):
                scope = "volatile" if volatile else "aggregate"
                part = "double-bit" if double else key.replace(" uncorrectable", "").split()[0].upper()
                f.ecc_unc_parts[f"{scope} {part}"] = f.ecc_unc_parts.get(f"{scope} {part}", 0.0) + n
            if is_unc and volatile:
                unc_v += n
                seen_unc_v = True
            elif is_unc and aggregate:
                unc_a += n
                seen_unc_a = True
            elif is_corr and volatile:
                corr_v += n
                seen_corr_v = True
        elif not sect and _UNSCOPED_UNC.match(key) and n is not None:
            f.ecc_unc_unscoped.append((key.replace("sram", "SRAM").replace("dram", "DRAM"), n))  # grep output
        elif "retired pages" in sect and key.startswith("pending"):
            f.retired_pending = _yes(value)
        elif "retired pages" in sect and n is not None and (
                key.startswith(("double bit", "single bit"))  # -q: "Double Bit ECC : 3"
                or (key == "retired count" and sect[-1].startswith(("double bit", "multiple single bit")))):  # -q -x
            if key.startswith("double") or sect[-1].startswith("double"):
                f.retired_dbe = n
            else:
                f.retired_sbe = n
        elif "remapped rows" in sect:
            if key == "pending":
                f.remap_pending = _yes(value)
            elif key.startswith("remapping failure"):
                f.remap_failure = _yes(value)
            elif key.startswith("uncorrectable"):
                f.remap_unc_rows = n
            elif sect[-1].startswith(("bank remap availability", "remapped row histogram")) \
                    and key in ("none", "row remap histogram none") and n is not None:
                f.remap_banks_exhausted = n
        elif key == "gpu recovery action":
            f.recovery_action = value.strip()
        elif key == "reset required":  # GPU Reset Status (XML <gpu_reset_status><reset_required>)
            f.reset_required = _yes(value)
        elif key == "drain and reset recommended":
            f.drain_reset_recommended = _yes(value)
        elif "pcie generation" in sect and n is not None:
            if key in ("current", "device current"):
                f.link_gen = n if f.link_gen is None or key == "current" else f.link_gen
            elif key in ("max", "device max"):
                f.link_gen_max = n if f.link_gen_max is None or key == "max" else f.link_gen_max
        elif "link width" in sect and n is not None:
            if key in ("current", "device current"):
                f.link_width = n
            elif key in ("max", "device max"):
                f.link_width_max = n
        elif key == "replays since reset" and n is not None:
            f.replays = n
        elif sect and sect[-1].startswith(("clocks event reasons", "clocks throttle reasons")):
            if value.strip().lower() == "active":
                f.clock_reasons_active.append(path[-1])
        elif key == "gpu current temp" and n is not None:
            f.values["temp_c"] = n
        elif sect and "power readings" in sect[-1] and n is not None:
            if key in ("power draw", "average power draw", "instantaneous power draw") \
                    and "power_w" not in f.values:
                f.values["power_w"] = n
            elif key in ("power limit", "current power limit") and "power_limit_w" not in f.values:
                f.values["power_limit_w"] = n
        elif sect and sect[-1] == "fb memory usage" and n is not None:
            if key == "total":
                f.values["mem_total_mib"] = n
            elif key == "used":
                f.values["mem_used_mib"] = n
        elif sect and sect[-1] == "utilization" and n is not None:
            if key == "gpu":
                f.values["util_gpu_pct"] = n
            elif key == "memory":
                f.values["util_mem_pct"] = n
        elif sect and sect[-1] == "clocks" and n is not None:
            if key == "sm":
                f.values["sm_clock_mhz"] = n
            elif key == "memory":
                f.values["mem_clock_mhz"] = n
    if seen_unc_v:
        f.ecc_unc_volatile = unc_v
    if seen_unc_a:
        f.ecc_unc_aggregate = unc_a
    if seen_corr_v:
        f.ecc_corr_volatile = corr_v
    return f


class NvidiaSmiQueryParser:
    name = "nvidia-smi-q"
    samples = (
        # Real: `nvidia-smi -q` excerpt of an A100 with a pending row remap (corpus stas00-xid63).
        """Timestamp                                 : Wed Jun  7 19:32:16 2023
Driver Version                            : 510.73.08
CUDA Version                              : 11.6

Attached GPUs                             : 8
GPU 00000000:10:1C.0
    Product Name                          : NVIDIA A100-SXM4-80GB
    [...]
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 0
            DRAM Correctable              : 177
            DRAM Uncorrectable            : 0
    Remapped Rows
        Correctable Error                 : 1
        Uncorrectable Error               : 0
        Pending                           : Yes
        Remapping Failure Occurred        : No
""",
        # Shape: `nvidia-smi -q` sections of a recent driver (field names from the nvidia-smi
        # documentation); values describe a GPU on a degraded x4 link.
        """
==============NVSMI LOG==============

Timestamp                                 : Thu Nov 14 10:11:12 2024
Driver Version                            : 566.14
CUDA Version                              : 12.7

Attached GPUs                             : 1
GPU 00000000:0C:00.0
    Product Name                          : NVIDIA GeForce RTX 5070 Ti
    GPU UUID                              : GPU-5b2f6c1e-0d7a-4b55-9a3e-0c4d2f8e9a11
    PCI
        GPU Link Info
            PCIe Generation
                Max                       : 4
                Current                   : 4
            Link Width
                Max                       : 16x
                Current                   : 4x
        Replays Since Reset               : 0
    Clocks Event Reasons
        Idle                              : Not Active
        HW Slowdown                       : Not Active
    FB Memory Usage
        Total                             : 16303 MiB
        Used                              : 9120 MiB
    Utilization
        Gpu                               : 97 %
        Memory                            : 41 %
    Temperature
        GPU Current Temp                  : 61 C
    GPU Power Readings
        Power Draw                        : 231.52 W
        Current Power Limit               : 300.00 W
""",
    )

    def detect(self, head: list[str]) -> float:
        text = "\n".join(head[:40])
        if "NVSMI LOG" in text:
            return 0.95
        has_gpu = any(_GPU.match(h) for h in head[:40])
        if has_gpu and re.search(r"^\s+Product Name\s+:", text, re.M):
            return 0.93
        if re.search(r"^Timestamp\s+:", text, re.M) and re.search(r"^Driver Version\s+:", text, re.M) \
                and re.search(r"^Attached GPUs\s+:", text, re.M):
            return 0.93
        lines = [h for h in head[:40] if h.strip()]
        marks = sum(1 for h in lines if _Q_MARKS.match(h))
        shaped = sum(1 for h in lines if _KV.match(h) or _SECTION.match(h) and h.startswith(" "))
        if lines and marks >= 2 and shaped >= 0.6 * len(lines):
            return 0.8  # a `-q` excerpt: its sections or counters without the header
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        ts: int | None = None
        ts_source = TsSource.NONE
        driver: str | None = None
        facts: GpuFacts | None = None
        leaves: Leaves = []
        stack: list[tuple[int, str]] = []
        seen_gpu = False

        def flush() -> Iterator[Record]:
            if facts is not None:
                facts.driver = driver
                yield from facts_records(facts_from_leaves(facts, leaves), ctx, ts, ts_source, self.name)

        for line in doc.lines():
            text = line.text.rstrip()
            if not text.strip() or text.strip() in ("[...]", "...") or text.startswith("====="):
                continue
            gm = _GPU.match(text)
            if gm:
                seen_gpu = True
                yield from flush()
                bus = normalize_bus_id(gm.group(1)) or gm.group(1)
                facts = GpuFacts(gpu=bus, origin=ctx.origin(line))
                leaves, stack = [], []
                continue
            kv = _KV.match(text)
            indent = len(text) - len(text.lstrip())
            if kv:
                key, value = kv.group(2).strip().lower(), kv.group(3).strip()
                if indent == 0:
                    if key == "timestamp":
                        yield from flush()
                        facts = None
                        ts, ts_source = parse_ctime(value, ctx)
                    elif key == "driver version":
                        driver = value
                    continue
                while stack and stack[-1][0] >= indent:
                    stack.pop()
                if facts is None and not seen_gpu:  # an excerpt pasted without its `GPU <bus id>` line
                    facts = GpuFacts(gpu="", origin=ctx.origin(line))
                leaves.append((tuple(s for _, s in stack) + (key,), value))
                continue
            sm = _SECTION.match(text)
            if sm and facts is None and not seen_gpu and _Q_MARKS.match(text):
                facts = GpuFacts(gpu="", origin=ctx.origin(line))
                leaves, stack = [], []
            if sm and (indent > 0 or (not seen_gpu and facts is not None)):
                while stack and stack[-1][0] >= indent:
                    stack.pop()
                stack.append((indent, sm.group(2).strip().lower()))
        yield from flush()


PARSER = NvidiaSmiQueryParser()
