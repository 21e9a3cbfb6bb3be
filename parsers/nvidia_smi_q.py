"""``nvidia-smi -q`` (``--query``): indent-structured ``Key : Value`` text, one block per GPU
(``GPU 00000000:10:1C.0``), maybe repeated with ``-l``.

Each GPU block becomes :class:`GpuFacts` → a ``gpu-info`` event, events for notable states
(row remap pending, uncorrectable ECC or SRAM-unit counts, link below max, HW slowdown, recovery
action, Reset Required / Drain and Reset Recommended) and a MetricSample when the block has readings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class _Leaf:
    """One ``Key : Value`` of a GPU block: its key and enclosing sections (lower-cased), the value, its number."""

    key: str
    sect: tuple[str, ...]
    value: str
    n: float | None

    def last(self, *prefixes: str) -> bool:
        """Whether the innermost section starts with one of ``prefixes``."""
        return bool(self.sect) and self.sect[-1].startswith(prefixes)


@dataclass
class _EccSums:
    """Uncorrectable (volatile, aggregate) and correctable (volatile) counts summed over an ECC section."""

    unc_v: float = 0.0
    unc_a: float = 0.0
    corr_v: float = 0.0
    seen: set[str] = field(default_factory=set)

    def add(self, name: str, n: float) -> None:
        setattr(self, name, getattr(self, name) + n)
        self.seen.add(name)


#: Keys whose text is kept as it is, and the GpuFacts field it goes to.
_TEXT = {"product name": "name", "gpu uuid": "uuid", "uuid": "uuid", "serial number": "serial",
         "vbios version": "vbios"}
#: Yes/No keys outside the remapped-rows section (GPU Reset Status), and their field.
_YES = {"reset required": "reset_required", "drain and reset recommended": "drain_reset_recommended"}
#: Readings by innermost section: key -> MetricSample column.
_READINGS = {"fb memory usage": {"total": "mem_total_mib", "used": "mem_used_mib"},
             "utilization": {"gpu": "util_gpu_pct", "memory": "util_mem_pct"},
             "clocks": {"sm": "sm_clock_mhz", "memory": "mem_clock_mhz"}}
_POWER_DRAW = ("power draw", "average power draw", "instantaneous power draw")
_POWER_LIMIT = ("power limit", "current power limit")


def _sram_source(f: GpuFacts, leaf: _Leaf, _sums: _EccSums) -> None:
    f.sram_unc_sources[leaf.key.replace("sram ", "")] = leaf.n or 0.0


def _ecc(f: GpuFacts, leaf: _Leaf, sums: _EccSums) -> None:
    """An ECC Errors counter. R450+: "SRAM/DRAM Uncorrectable[ Parity| SEC-DED]"; older: "Double Bit" >
    unit rows + "Total"."""
    key, sect, n = leaf.key, leaf.sect, leaf.n or 0.0
    volatile, aggregate, double = "volatile" in sect, "aggregate" in sect, "double bit" in sect
    is_unc = "uncorrectable" in key or (double and key == "total")
    is_corr = not is_unc and ("correctable" in key or ("single bit" in sect and key == "total"))
    if is_unc and (volatile or aggregate):
        part = "double-bit" if double else key.replace(" uncorrectable", "").split()[0].upper()
        name = f"{'volatile' if volatile else 'aggregate'} {part}"
        f.ecc_unc_parts[name] = f.ecc_unc_parts.get(name, 0.0) + n
    if is_unc and volatile:
        sums.add("unc_v", n)
    elif is_unc and aggregate:
        sums.add("unc_a", n)
    elif is_corr and volatile:
        sums.add("corr_v", n)


def _retired(f: GpuFacts, leaf: _Leaf, _sums: _EccSums) -> None:
    double = leaf.key.startswith("double") or leaf.last("double")
    setattr(f, "retired_dbe" if double else "retired_sbe", leaf.n)


def _remapped(f: GpuFacts, leaf: _Leaf, _sums: _EccSums) -> None:
    """The Remapped Rows section: every key in it stops here, read or not."""
    key = leaf.key
    if key == "pending":
        f.remap_pending = _yes(leaf.value)
    elif key.startswith("remapping failure"):
        f.remap_failure = _yes(leaf.value)
    elif key.startswith("uncorrectable"):
        f.remap_unc_rows = leaf.n
    elif leaf.last("bank remap availability", "remapped row histogram") \
            and key in ("none", "row remap histogram none") and leaf.n is not None:
        f.remap_banks_exhausted = leaf.n


def _link(f: GpuFacts, leaf: _Leaf, _sums: _EccSums) -> None:
    """PCIe generation and link width: ``Current``/``Max``, and ``Device Current``/``Device Max`` where the
    host side is not printed (a generation's plain key wins over its device one; a width's last read wins)."""
    gen = "pcie generation" in leaf.sect
    now, most = ("link_gen", "link_gen_max") if gen else ("link_width", "link_width_max")
    for field_name, plain in ((now, "current"), (most, "max")):
        if leaf.key in (plain, f"device {plain}"):
            keep = gen and getattr(f, field_name) is not None and leaf.key != plain
            if not keep:
                setattr(f, field_name, leaf.n)


def _power(f: GpuFacts, leaf: _Leaf, _sums: _EccSums) -> None:
    if leaf.key in _POWER_DRAW:
        f.values.setdefault("power_w", leaf.n or 0.0)
    elif leaf.key in _POWER_LIMIT:
        f.values.setdefault("power_limit_w", leaf.n or 0.0)


def _reading(f: GpuFacts, leaf: _Leaf, _sums: _EccSums) -> None:
    column = _READINGS[leaf.sect[-1]].get(leaf.key)
    if column:
        f.values[column] = leaf.n or 0.0


_Rule = tuple[Callable[[_Leaf], bool], Callable[[GpuFacts, _Leaf, _EccSums], None]]

#: What each leaf of a GPU block says, as (which leaves, what they set). The first rule whose test holds
#: takes the leaf; order matters where sections nest (an SRAM source row is inside ECC Errors).
_RULES: tuple[_Rule, ...] = (
    (lambda x: x.key in _TEXT, lambda f, x, _s: setattr(f, _TEXT[x.key], x.value.strip())),
    (lambda x: bool(x.sect) and x.sect[-1].endswith("uncorrectable sram sources") and x.n is not None, _sram_source),
    (lambda x: "ecc errors" in x.sect and x.n is not None, _ecc),
    (lambda x: not x.sect and x.n is not None and bool(_UNSCOPED_UNC.match(x.key)),  # grep output
     lambda f, x, _s: f.ecc_unc_unscoped.append((x.key.replace("sram", "SRAM").replace("dram", "DRAM"), x.n or 0.0))),
    (lambda x: "retired pages" in x.sect and x.key.startswith("pending"),
     lambda f, x, _s: setattr(f, "retired_pending", _yes(x.value))),
    (lambda x: "retired pages" in x.sect and x.n is not None and (
        x.key.startswith(("double bit", "single bit"))  # -q: "Double Bit ECC : 3"
        or (x.key == "retired count" and x.last("double bit", "multiple single bit"))), _retired),  # -q -x
    (lambda x: "remapped rows" in x.sect, _remapped),
    (lambda x: x.key == "gpu recovery action", lambda f, x, _s: setattr(f, "recovery_action", x.value.strip())),
    (lambda x: x.key in _YES, lambda f, x, _s: setattr(f, _YES[x.key], _yes(x.value))),  # <gpu_reset_status>
    (lambda x: ("pcie generation" in x.sect or "link width" in x.sect) and x.n is not None, _link),
    (lambda x: x.key == "replays since reset" and x.n is not None, lambda f, x, _s: setattr(f, "replays", x.n)),
    (lambda x: x.last("clocks event reasons", "clocks throttle reasons"),
     lambda f, x, _s: f.clock_reasons_active.append(x.key) if x.value.strip().lower() == "active" else None),
    (lambda x: x.key == "gpu current temp" and x.n is not None,
     lambda f, x, _s: f.values.__setitem__("temp_c", x.n or 0.0)),
    (lambda x: bool(x.sect) and "power readings" in x.sect[-1] and x.n is not None, _power),
    (lambda x: bool(x.sect) and x.sect[-1] in _READINGS and x.n is not None, _reading),
)


def facts_from_leaves(f: GpuFacts, leaves: Leaves) -> GpuFacts:
    """Fill ``f`` from (lower-cased section path, value) pairs of one GPU block, through :data:`_RULES`."""
    sums = _EccSums()
    for path, value in leaves:
        leaf = _Leaf(path[-1], path[:-1], value, number(value))
        for applies, apply in _RULES:
            if applies(leaf):
                apply(f, leaf, sums)
                break
    if "unc_v" in sums.seen:
        f.ecc_unc_volatile = sums.unc_v
    if "unc_a" in sums.seen:
        f.ecc_unc_aggregate = sums.unc_a
    if "corr_v" in sums.seen:
        f.ecc_corr_volatile = sums.corr_v
    return f


class NvidiaSmiQueryParser:
    name = "nvidia-smi-q"
    #: producer versions its real samples hold (the outputs' own headers)
    tested_with = {"NVIDIA driver": ("510.73.08", "535.154.05", "535.161.08"), "CUDA": ("11.6", "12.2")}
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
