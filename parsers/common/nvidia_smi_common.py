"""Shared pieces of the nvidia-smi parsers (not a parser itself): PCI bus-id normalisation,
number reading, local-time stamps, and :class:`GpuFacts` — what ``nvidia-smi -q`` and
``nvidia-smi -q -x`` say about one GPU — turned into ``gpu-info`` events and a MetricSample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.windows_events import stamp

from forensics.events import Event, MetricSample, Origin, Severity, TsSource
from forensics.lazy_re import lazy_compile
from forensics.pci import normalize_pci

__all__ = ["MONTHS", "GpuFacts", "facts_records", "normalize_bus_id", "number", "parse_ctime", "smi_event"]

_BUS = lazy_compile(r"[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{1,2}:[0-9A-Fa-f]{1,2}(?:\.[0-7])?")


def normalize_bus_id(text: str) -> str | None:
    """``00000000:3B:00.0`` / ``GPU0000:03:00.0`` / ``PCI:0000:3b:00`` / ``0:53:00.0`` → ``dddd:bb:dd.f``
    (through :func:`forensics.pci.normalize_pci`, after cutting the address out of ``text``)."""
    direct = normalize_pci(text)
    if direct is not None:
        return direct
    m = _BUS.search(text)
    return normalize_pci(m.group()) if m else None


_NUM = lazy_compile(r"[-+]?\d+(?:\.\d+)?")


def number(text: str | None) -> float | None:
    """The first number in ``text`` (``116W`` → 116.0, ``55217 MiB`` → 55217.0); ``N/A`` → None."""
    if not text:
        return None
    m = _NUM.search(text)
    return float(m.group()) if m else None


_CTIME = lazy_compile(
    r"(?:[A-Z][a-z]{2}\s+)?([A-Z][a-z]{2})\s+(\d{1,2})\s+(\d\d):(\d\d):(\d\d)(?:\s+[A-Z]{2,5})?\s+(\d{4})"
)
#: English month abbreviations → month number (nvidia-smi, WinDbg and PowerShell print these).
MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}  # noqa: SIM905


def parse_ctime(text: str, ctx: ParseContext) -> tuple[int | None, TsSource]:
    """``Thu Sep 12 23:12:25 2024`` (nvidia-smi's local time) in UTC ns via ``ctx.tz``, else ``local``."""
    m = _CTIME.search(text)
    if not m or m.group(1) not in MONTHS:
        return None, TsSource.NONE
    try:
        naive = datetime(int(m.group(6)), MONTHS[m.group(1)], int(m.group(2)),
                         int(m.group(3)), int(m.group(4)), int(m.group(5)))
    except ValueError:
        return None, TsSource.NONE
    return stamp(naive, ctx)


def smi_event(ctx: ParseContext, origin: Origin, kind: str, message: str, *, ts: int | None = None,
              ts_source: TsSource = TsSource.NONE, severity: Severity = Severity.INFO, gpu: str | None = None,
              attrs: dict[str, Any] | None = None, detail: str = "") -> Event:
    return Event(ts=ts, ts_source=ts_source, source=ctx.source, kind=kind, message=message, origin=origin,
                 severity=severity, host=ctx.host, gpu=gpu, attrs=attrs or {}, detail=detail)


@dataclass
class GpuFacts:
    """One GPU's facts from ``nvidia-smi -q`` or its XML form (``None`` = not reported)."""

    gpu: str
    origin: Origin
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    vbios: str | None = None
    driver: str | None = None
    ecc_unc_volatile: float | None = None
    ecc_unc_aggregate: float | None = None
    ecc_corr_volatile: float | None = None
    sram_unc_sources: dict[str, float] = field(default_factory=dict)
    #: uncorrectable counts by ``"<volatile|aggregate> <SRAM|DRAM|device memory|…>"``, for the message
    ecc_unc_parts: dict[str, float] = field(default_factory=dict)
    #: uncorrectable counters printed outside an ECC Errors / Volatile / Aggregate section (a ``grep``)
    ecc_unc_unscoped: list[tuple[str, float]] = field(default_factory=list)
    retired_dbe: float | None = None
    retired_sbe: float | None = None
    #: Bank Remap Availability Histogram ``None``: banks with no spare row left
    remap_banks_exhausted: float | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    remap_unc_rows: float | None = None
    retired_pending: bool | None = None
    recovery_action: str | None = None
    #: ``GPU Reset Status`` (``<gpu_reset_status>``): ``Reset Required`` / ``Drain and Reset Recommended``
    reset_required: bool | None = None
    drain_reset_recommended: bool | None = None
    link_gen: float | None = None
    link_gen_max: float | None = None
    link_width: float | None = None
    link_width_max: float | None = None
    replays: float | None = None
    clock_reasons_active: list[str] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)


_BAD_REASONS = ("hw slowdown", "hw thermal", "hw power brake", "sw thermal")


#: The ``gpu-info`` event's attrs: attr name -> GpuFacts field (None values left out).
_INFO_ATTRS = (("name", "name"), ("uuid", "uuid"), ("serial", "serial"), ("vbios", "vbios"), ("driver", "driver"),
               ("ecc_uncorrectable_volatile", "ecc_unc_volatile"),
               ("ecc_uncorrectable_aggregate", "ecc_unc_aggregate"), ("remapped_pending", "remap_pending"),
               ("remapped_failure", "remap_failure"), ("retired_pending", "retired_pending"),
               ("recovery_action", "recovery_action"), ("reset_required", "reset_required"),
               ("drain_and_reset_recommended", "drain_reset_recommended"), ("gen", "link_gen"),
               ("gen_max", "link_gen_max"), ("width", "link_width"), ("width_max", "link_width_max"),
               ("replays", "replays"))
#: MetricSample columns read from GpuFacts fields (beside ``GpuFacts.values``); booleans become 0/1.
_SAMPLE_COLUMNS = (("pcie_gen", "link_gen"), ("pcie_gen_max", "link_gen_max"), ("pcie_width", "link_width"),
                   ("pcie_width_max", "link_width_max"), ("pcie_replay", "replays"),
                   ("remapped_pending", "remap_pending"), ("remapped_failure", "remap_failure"),
                   ("ecc_dbe_volatile", "ecc_unc_volatile"), ("ecc_sbe_volatile", "ecc_corr_volatile"))

Notable = tuple[str, Severity, dict[str, Any]]  # (message after "GPU <id>: ", severity, attrs)


def _flag(f: GpuFacts, message: str, severity: Severity, attr: str) -> list[Notable]:
    return [(message, severity, {attr: True})]


def _ecc_notables(f: GpuFacts) -> list[Notable]:
    """Uncorrectable ECC: the volatile/aggregate totals, else per-unit SRAM counts, else grepped counters."""
    unc = max(f.ecc_unc_volatile or 0, f.ecc_unc_aggregate or 0)
    sources = {k: v for k, v in f.sram_unc_sources.items() if v}
    extra = f" (SRAM sources: {', '.join(f'{k}={v:g}' for k, v in sources.items())})" if sources else ""
    parts = {k: v for k, v in f.ecc_unc_parts.items() if v}
    where = f" [{'; '.join(f'{k} {v:g}' for k, v in parts.items())}]" if parts else ""
    out: list[Notable] = []
    if unc > 0:
        # volatile > 0: an uncorrectable error since the driver loaded (it killed work on this GPU);
        # aggregate only: the GPU's lifetime record (a risk, not this run's failure)
        out.append((f"uncorrectable ECC errors: volatile {f.ecc_unc_volatile or 0:g}, "
                    f"aggregate {f.ecc_unc_aggregate or 0:g}{where}{extra}",
                    Severity.ERROR if (f.ecc_unc_volatile or 0) > 0 else Severity.WARNING,
                    {"ecc_uncorrectable_volatile": f.ecc_unc_volatile,
                     "ecc_uncorrectable_aggregate": f.ecc_unc_aggregate,
                     "ecc_uncorrectable_parts": parts, "sram_sources": sources}))
    elif sources:  # the per-unit lifetime counts can be set while the totals read 0 or N/A
        out.append((f"uncorrectable SRAM errors recorded by unit{extra}", Severity.ERROR, {"sram_sources": sources}))
    unscoped = [(k, v) for k, v in f.ecc_unc_unscoped if v]
    if unscoped and unc <= 0:
        out.append(("uncorrectable ECC error counters above zero (volatile/aggregate not shown): "
                    + ", ".join(f"{k} {v:g}" for k, v in unscoped), Severity.ERROR,
                    {"ecc_uncorrectable_unscoped": [v for _k, v in unscoped]}))
    return out


def _retired_notables(f: GpuFacts) -> list[Notable]:
    if not f.retired_dbe:
        return []
    return [(f"retired pages: {f.retired_dbe:g} for double-bit (uncorrectable) ECC errors"
             + (f", {f.retired_sbe:g} for single-bit" if f.retired_sbe else ""), Severity.WARNING,
             {"retired_dbe": f.retired_dbe, "retired_sbe": f.retired_sbe})]


def _recovery_notables(f: GpuFacts) -> list[Notable]:
    if not f.recovery_action or f.recovery_action.strip().lower() in ("none", "n/a", ""):
        return []
    return [(f"GPU Recovery Action: {f.recovery_action}", Severity.ERROR, {"recovery_action": f.recovery_action})]


def _clock_notables(f: GpuFacts) -> list[Notable]:
    bad = [r for r in f.clock_reasons_active if any(b in r.lower() for b in _BAD_REASONS)]
    return [(f"clocks held back: {', '.join(bad)}", Severity.WARNING, {"clock_reasons": bad})] if bad else []


#: The notable states of one GPU, in the order their events are emitted (the link event, a ``pcie-link``
#: event of its own, comes between the recovery/reset states and the clock reasons).
_NOTABLE_BEFORE_LINK: tuple[Callable[[GpuFacts], list[Notable]], ...] = (
    lambda f: _flag(f, "Remapped Rows Pending: Yes (row remap waits for a GPU reset)", Severity.WARNING,
                    "remapped_pending") if f.remap_pending else [],
    lambda f: _flag(f, "Remapping Failure Occurred: Yes", Severity.ERROR, "remapped_failure")
    if f.remap_failure else [],
    lambda f: _flag(f, "Pending Page Blacklist/Retirement: Yes", Severity.WARNING, "retired_pending")
    if f.retired_pending else [],
    _ecc_notables,
    _retired_notables,
    lambda f: [(f"rows remapped after uncorrectable errors: {f.remap_unc_rows:g}", Severity.WARNING,
                {"remapped_uncorrectable": f.remap_unc_rows})] if f.remap_unc_rows else [],
    lambda f: [(f"row remapper: {f.remap_banks_exhausted:g} memory bank(s) have no spare row left "
                "(Bank Remap Availability Histogram: None)", Severity.WARNING,
                {"remap_banks_exhausted": f.remap_banks_exhausted})] if f.remap_banks_exhausted else [],
    _recovery_notables,
    lambda f: _flag(f, "Reset Required: Yes (the driver says the GPU needs a reset)", Severity.ERROR,
                    "reset_required") if f.reset_required else [],
    lambda f: _flag(f, "Drain and Reset Recommended: Yes (the driver asks to drain the GPU's work and reset it)",
                    Severity.ERROR, "drain_and_reset_recommended") if f.drain_reset_recommended else [],
)


def _link_event(f: GpuFacts) -> tuple[str, Severity] | None:
    """A link below its maximum: width (a problem) before generation (normal at idle)."""
    if f.link_width is not None and f.link_width_max is not None and f.link_width < f.link_width_max:
        return f"PCIe link width x{f.link_width:g} below its maximum x{f.link_width_max:g}", Severity.WARNING
    if f.link_gen is not None and f.link_gen_max is not None and f.link_gen < f.link_gen_max:
        return (f"PCIe Gen{f.link_gen:g} below its maximum Gen{f.link_gen_max:g} "
                "(normal at idle; a problem under load)", Severity.INFO)
    return None


def _sample_values(f: GpuFacts) -> dict[str, float]:
    values = dict(f.values)
    for column, name in _SAMPLE_COLUMNS:
        v = getattr(f, name)
        if v is not None:
            values[column] = float(v)
    return values


def facts_records(f: GpuFacts, ctx: ParseContext, ts: int | None, ts_source: TsSource,
                  tool: str) -> Iterator[Record]:
    """A ``gpu-info`` event with the facts, notable states as their own events (:data:`_NOTABLE_BEFORE_LINK`,
    the link, the clock reasons), one MetricSample."""
    gpu = f.gpu or None  # "" = a `-q` excerpt pasted without its `GPU <bus id>` line
    base = {"tool": tool, "pci": gpu}
    info = {attr: v for attr, name in _INFO_ATTRS if (v := getattr(f, name)) is not None}
    if f.clock_reasons_active:
        info["clock_reasons"] = f.clock_reasons_active
    label = f.name or "GPU"
    yield smi_event(ctx, f.origin, "gpu-info", f"{label} at {f.gpu or '?'}" + (f" ({f.uuid})" if f.uuid else ""),
                    ts=ts, ts_source=ts_source, gpu=gpu, attrs={**base, **info})

    def notable(message: str, severity: Severity, attrs: dict[str, Any], kind: str = "gpu-info") -> Event:
        return smi_event(ctx, f.origin, kind, f"GPU {f.gpu or '?'}: {message}", ts=ts, ts_source=ts_source,
                         severity=severity, gpu=gpu, attrs={**base, **attrs})

    for states in _NOTABLE_BEFORE_LINK:
        for message, severity, attrs in states(f):
            yield notable(message, severity, attrs)
    if link := _link_event(f):
        yield notable(*link, {"gen": f.link_gen, "gen_max": f.link_gen_max, "width": f.link_width,
                              "width_max": f.link_width_max}, kind="pcie-link")
    for message, severity, attrs in _clock_notables(f):
        yield notable(message, severity, attrs)
    values = _sample_values(f)
    if values and f.gpu:  # an excerpt without its GPU line names no GPU to chart
        yield MetricSample(ts=ts, ts_source=ts_source, gpu=f.gpu, values=values, origin=f.origin,
                           host=ctx.host, source=ctx.source)
