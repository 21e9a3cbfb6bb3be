"""What the screens show, computed once from an :class:`~forensics.analysis.Analysis`.

Nothing here imports textual: the view model is plain data, tested on its own and
built in a worker thread so the UI never waits on it. It reads events by ``kind`` and
``attrs`` loosely (``.get`` with fallbacks) because the parsers that produce them
evolve independently of the screens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.events import Event, MetricSample, Origin, TsSource
from forensics.findings import Finding, Role
from forensics.lazy_re import lazy_compile
from forensics.units import clock_ms as fmt_clock
from forensics.units import duration_ns as fmt_duration
from forensics.units import mib
from forensics.units import stamp as fmt_stamp

if TYPE_CHECKING:
    from forensics.analysis import Analysis

__all__ = [
    "METRICS",
    "GpuKey",
    "GpuSeries",
    "Metric",
    "Model",
    "RATE_METRICS",
    "RunFacts",
    "Span",
    "build_model",
    "facts_sentence",
    "fmt_clock",
    "fmt_delta",
    "fmt_duration",
    "fmt_stamp",
    "fmt_when",
    "gap_ns",
    "is_local",
    "ordered_findings",
    "rate_series",
    "other_facts",
    "reflow",
    "short_names",
]

GpuKey = tuple[str, str]  # (host or "", gpu id)


@dataclass(frozen=True)
class Metric:
    """One plottable MetricSample column."""

    column: str
    label: str
    unit: str
    lo: float | None = 0.0  # fixed bottom of the axis, None = from data
    hi: float | None = None  # fixed top of the axis, None = from data (or a limit column)
    limit_column: str | None = None  # a column that gives the top of the axis (capacity, power cap)
    short: str = ""  # a label for narrow headers

    @property
    def brief(self) -> str:
        return self.short or self.label


#: The metrics the charts know, in display order. Columns absent from the data are not shown.
METRICS: tuple[Metric, ...] = (
    Metric("mem_used_mib", "memory", "MiB", 0.0, None, "mem_total_mib", "mem"),
    Metric("util_gpu_pct", "utilization", "%", 0.0, 100.0, None, "util"),
    Metric("power_w", "power", "W", 0.0, None, "power_limit_w"),
    Metric("temp_c", "temperature", "°C", None, None, None, "temp"),
    Metric("sm_clock_mhz", "SM clock", "MHz", 0.0, None),
    Metric("util_mem_pct", "memory utilization", "%", 0.0, 100.0),
    Metric("pcie_gen", "PCIe gen", "", 0.0, None, "pcie_gen_max"),
    Metric("pcie_width", "PCIe width", "x", 0.0, None, "pcie_width_max"),
    Metric("pcie_replay", "PCIe replays", "", 0.0, None),
)
OVERVIEW_METRICS = ("mem_used_mib", "util_gpu_pct", "power_w", "temp_c")
#: Training rates read from progress lines (attrs of ``progress`` events), best first.
RATE_METRICS: tuple[Metric, ...] = (
    Metric("tokens_s", "throughput", "tokens/s", 0.0, None, None, "tokens/s"),
    Metric("samples_s", "throughput", "samples/s", 0.0, None, None, "samples/s"),
    Metric("it_s", "throughput", "it/s", 0.0, None, None, "it/s"),
)


# -- formatting -------------------------------------------------------------------------------
def fmt_when(e: Event) -> str:
    """An event's clock (``HH:MM:SS.mmm``), or its uptime (``up 1000.784``) when only that is known."""
    if e.ts is None and e.uptime_ns is not None:
        return f"up {e.uptime_ns / 1e9:.3f}"[:12].ljust(12)
    return fmt_clock(e.ts)


def gap_ns(a: Event, b: Event) -> int | None:
    """Time from ``a`` to ``b`` on a clock both have (wall time, else uptime), or None."""
    if a.ts is not None and b.ts is not None:
        return b.ts - a.ts
    if a.ts is None and b.ts is None and a.uptime_ns is not None and b.uptime_ns is not None:
        return b.uptime_ns - a.uptime_ns
    return None


def is_local(events: Iterable[Event]) -> bool:
    """Whether the earliest timed event's clock is a wall clock of unknown zone."""
    timed = [e for e in events if e.ts is not None]
    return bool(timed) and min(timed, key=lambda e: e.ts or 0).ts_source == TsSource.LOCAL


def fmt_delta(ns: int | None) -> str:
    """A signed gap between two events (``+10 min``, ``-850 ms``); blank when unknown."""
    if ns is None:
        return ""
    if ns == 0:
        return "same time"
    return ("+" if ns >= 0 else "-") + fmt_duration(ns)


# -- findings ---------------------------------------------------------------------------------
_ROLE_ORDER = {Role.ROOT_CAUSE: 0, Role.CONSEQUENCE: 1, Role.CONTRIBUTING: 2}


def ordered_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Root cause first, then consequences in time order, then contributing by score."""
    def key(f: Finding) -> tuple[int, float, float]:
        first = f.first_seen if f.first_seen is not None else float("inf")
        rank = _ROLE_ORDER.get(f.role, 3)
        return (rank, -f.score if rank == 2 else first, first)

    return sorted(findings, key=key)


# -- a finding's extracted facts -------------------------------------------------------------
_PHASES = {"load": ("while loading the model", "while loading the model"),
           "forward": ("in the forward pass", "in the first forward pass"),
           "backward": ("in the backward pass", "in the first backward pass"),
           "optimizer-step": ("at the optimizer step", "at the first optimizer step"),
           "eval": ("during evaluation", "during evaluation")}
_FACT_KEYS = frozenset({"phase", "first", "oom", "tried_mib", "free_mib", "total_mib", "gpu"})


def facts_sentence(facts: Mapping[str, Any]) -> str:
    """A finding's extracted facts (``Finding.facts``) as a sentence for a person: ``CUDA out of
    memory at the first optimizer step — tried 256 MiB, 201 MiB free of 139.8 GiB``, ``Failed in the
    backward pass``; ``""`` when the facts say neither the phase nor an out-of-memory error."""
    if not isinstance(facts, Mapping):
        return ""
    words = _PHASES.get(str(facts.get("phase")))
    phase = words[1 if facts.get("first") is True else 0] if words else ""
    if not phase and facts.get("phase"):
        phase = f"in the {str(facts['phase'])[:40]} phase"
    sentence = ""
    if facts.get("oom"):
        sentence = f"{'HIP' if facts['oom'] == 'hip' else 'CUDA'} out of memory" + (f" {phase}" if phase else "")
        tried, free, total = (mib(facts.get(k), "") for k in ("tried_mib", "free_mib", "total_mib"))
        sizes = [f"tried {tried}"] if tried else []
        if free:
            sizes.append(f"{free} free" + (f" of {total}" if total else ""))
        elif total:
            sizes.append(f"on a {total} GPU")
        if sizes:
            sentence += " — " + ", ".join(sizes)
        gpu = facts.get("gpu")
        if isinstance(gpu, int | str) and not isinstance(gpu, bool) and str(gpu) != "":
            sentence += f" (GPU {gpu})"
    elif phase:
        sentence = "Failed " + phase
    return sentence


def other_facts(facts: Mapping[str, Any]) -> str:
    """The facts :func:`facts_sentence` does not say, as ``name value · name value``."""
    if not isinstance(facts, Mapping):
        return ""
    return " · ".join(f"{k} {str(v)[:60]}" for k, v in facts.items()
                      if k not in _FACT_KEYS and v not in (None, "", [], {}))


# -- run facts --------------------------------------------------------------------------------
_BUS_ID = lazy_compile(r"(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}):([0-9a-f]{2})(?:\.[0-7])?")


def gpu_alias(gpu: object) -> str:
    """A GPU id in one spelling: PCI bus ids as ``dddd:bb:dd`` (``PCI:0000:BA:00``, ``00000000:BA:00.0``
    and ``0000:ba:00.0`` agree); anything else (an index) as written, lowercased."""
    text = str(gpu).strip().lower().removeprefix("pci:")
    m = _BUS_ID.fullmatch(text)
    if m:
        return f"{(m.group(1) or '0000')[-4:]}:{m.group(2)}:{m.group(3)}"
    return text


@dataclass
class GpuFact:
    """One GPU as far as the inputs tell: index and/or bus id, model, PCIe link."""

    host: str = ""
    index: str = ""
    bus: str = ""
    model: str = ""
    link: str = ""  # "Gen4 x16" or "Gen1 x16 (max Gen4 x16)"
    aliases: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        return self.index or self.bus or "?"


@dataclass
class RunFacts:
    """What ran, where, and how it ended; every field may be empty."""

    command: str = ""
    status: str = ""  # "exit 1", "killed by signal 9", "finished", "no end record"
    start: int | None = None
    end: int | None = None
    hosts: list[str] = field(default_factory=list)
    gpus: list[GpuFact] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    ranks: list[int] = field(default_factory=list)
    run_start: int | None = None  # the recorded run itself (a bundle's manifest), when known
    run_end: int | None = None
    directory: GpuDirectory = field(default_factory=lambda: GpuDirectory())

    @property
    def run_span(self) -> tuple[int, int] | None:
        """The recorded run's start and end, else the span of everything the inputs hold."""
        if self.run_start is not None and self.run_end is not None and self.run_end >= self.run_start:
            return self.run_start, self.run_end
        if self.start is None or self.end is None:
            return None
        return self.start, self.end

    @property
    def duration_ns(self) -> int | None:
        span = self.run_span
        return None if span is None else span[1] - span[0]


def _first(attrs: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        value = attrs.get(name)
        if value not in (None, ""):
            return value
    return None


def _link_text(gen: Any, width: Any, gen_max: Any = None, width_max: Any = None) -> str:
    def part(g: Any, w: Any) -> str:
        pieces = []
        if g not in (None, ""):
            pieces.append(f"Gen{_int_text(g)}")
        if w not in (None, ""):
            pieces.append(f"x{_int_text(w)}")
        return " ".join(pieces)

    now, best = part(gen, width), part(gen_max, width_max)
    if now and best and now != best:
        return f"{now} (max {best})"
    return now or best


def _int_text(value: Any) -> str:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    return str(int(f)) if f.is_integer() else str(f)


def _exit_text(attrs: Mapping[str, Any]) -> str:
    signal = _first(attrs, "signal", "signum")
    code = _first(attrs, "exit_code", "exitcode", "returncode")
    if signal not in (None, 0, "0"):
        return f"killed by signal {signal}"
    if code is not None:
        return f"exit {code}"
    return ""


_VERSION_KEYS = frozenset({"driver", "cuda", "torch", "nccl", "python"})


class GpuDirectory:
    """GPU facts found by any of their names (index, bus id) on a host."""

    def __init__(self) -> None:
        self.facts: list[GpuFact] = []
        self._by_alias: dict[tuple[str, str], GpuFact] = {}

    def find(self, host: str | None, *names: object) -> GpuFact | None:
        for name in names:
            if name not in (None, ""):
                fact = self._by_alias.get((host or "", gpu_alias(name)))
                if fact is not None:
                    return fact
        return None

    def add(self, host: str | None, index: object = None, *names: object) -> GpuFact:
        """The fact for a GPU known by ``index`` and/or ``names``, created when new."""
        fact = self.find(host, index, *names)
        if fact is None:
            fact = GpuFact(host or "")
            self.facts.append(fact)
        for name in (index, *names):
            if name in (None, ""):
                continue
            alias = gpu_alias(name)
            fact.aliases.add(alias)
            self._by_alias[(host or "", alias)] = fact
            if ":" in alias:
                fact.bus = fact.bus or str(name)
        if index not in (None, "") and not fact.index:
            fact.index = str(index)
        return fact


def run_facts(analysis: Analysis, notable: Sequence[Event], metrics: Sequence[MetricSample]) -> RunFacts:
    """Facts from the ``recording``/``exit``/``gpu-info`` events, the metrics and the timeline span."""
    facts = RunFacts()
    gpus = GpuDirectory()
    for e in notable:
        a = e.attrs
        if e.kind == "recording":
            facts.command = facts.command or str(_first(a, "command", "cmd") or "")
            facts.run_start = facts.run_start or as_ns(_first(a, "start", "started", "start_ts"))
            facts.run_end = facts.run_end or as_ns(_first(a, "end", "finished", "end_ts"))
            facts.status = _exit_text(a) or facts.status or str(a.get("status") or "")
            for k, v in a.items():
                if isinstance(v, str | int | float) and (k.endswith("version") or k in _VERSION_KEYS):
                    facts.versions.setdefault(k.removesuffix("_version"), str(v))
            versions = a.get("versions")
            if isinstance(versions, Mapping):
                for k, v in versions.items():
                    facts.versions.setdefault(str(k), str(v))
        elif e.kind == "exit":
            facts.status = _exit_text(a) or facts.status
        elif e.kind == "gpu-info":
            index = _first(a, "index", "gpu_index", "minor")
            bus = _first(a, "pci", "bus_id", "pci_bus_id")
            identity = bus or _first(a, "model", "name", "product", "uuid")
            # A record that names no model, bus or uuid (a topology line) only adds to a GPU already known.
            found = gpus.add(e.host, index, bus, e.gpu) if identity else gpus.find(e.host, index, e.gpu)
            if found is None:
                continue
            fact = found
            fact.model = fact.model or str(_first(a, "model", "name", "product") or "")
            fact.link = fact.link or _link_text(_first(a, "gen", "pcie_gen"), _first(a, "width", "pcie_width"),
                                                _first(a, "gen_max", "pcie_gen_max"),
                                                _first(a, "width_max", "pcie_width_max"))
            driver = _first(a, "driver", "driver_version")
            if driver:
                facts.versions.setdefault("driver", str(driver))
    # GPUs known only from metrics; the link from the last sample that reports one.
    seen: dict[tuple[str, str], GpuFact] = {}
    for m in metrics:
        known = seen.get((m.host or "", m.gpu))
        fact = known or gpus.find(m.host, m.gpu) or gpus.add(m.host, m.gpu)
        seen[(m.host or "", m.gpu)] = fact
        v = m.values
        if "pcie_gen" in v or "pcie_width" in v:
            fact.link = _link_text(v.get("pcie_gen"), v.get("pcie_width"), v.get("pcie_gen_max"),
                                   v.get("pcie_width_max"))
    span = analysis.timeline.span
    if span:
        facts.start, facts.end = span
    facts.hosts = analysis.timeline.hosts
    facts.gpus = sorted(gpus.facts, key=lambda g: (g.host, _natural(g.label)))
    facts.directory = gpus
    return facts


def _natural(text: str) -> tuple[int, str]:
    return (int(text), "") if text.isdigit() else (1 << 30, text)


# -- metric series ----------------------------------------------------------------------------
@dataclass
class GpuSeries:
    """One GPU's samples: a time array and one value array per column (NaN where unread)."""

    host: str
    gpu: str
    ts: np.ndarray
    values: dict[str, np.ndarray]

    @property
    def label(self) -> str:
        return f"{self.host}/{self.gpu}" if self.host else self.gpu

    def limit(self, metric: Metric) -> float | None:
        """The top of the axis for ``metric``: its fixed top, the largest limit column value, or None."""
        if metric.hi is not None:
            return metric.hi
        if metric.limit_column and metric.limit_column in self.values:
            col = self.values[metric.limit_column]
            if np.isfinite(col).any():
                return float(np.nanmax(col))
        return None


def gpu_series(metrics: Sequence[MetricSample]) -> list[GpuSeries]:
    """Group samples by (host, GPU), keeping only timed samples, in time order."""
    groups: dict[GpuKey, list[MetricSample]] = {}
    for m in metrics:
        if m.ts is not None:
            groups.setdefault((m.host or "", m.gpu), []).append(m)
    out: list[GpuSeries] = []
    for (host, gpu), samples in sorted(groups.items(), key=lambda kv: (kv[0][0], _natural(kv[0][1]))):
        samples.sort(key=lambda m: m.ts or 0)
        ts = np.fromiter((m.ts or 0 for m in samples), dtype=np.int64, count=len(samples))
        columns = sorted({c for m in samples for c in m.values})
        values = {}
        for c in columns:
            values[c] = np.fromiter((_as_float(m.values.get(c)) for m in samples), dtype=np.float64,
                                    count=len(samples))
        out.append(GpuSeries(host, gpu, ts, values))
    return out


def rate_series(events: Iterable[Event]) -> tuple[Metric, GpuSeries] | None:
    """The training rate over the run (tokens/s, else samples/s, else it/s) from ``progress`` events, as
    one series named ``training``; None without at least two timed readings."""
    progress = [e for e in events if e.kind == "progress" and e.ts is not None]
    for metric in RATE_METRICS:
        points = sorted((e.ts or 0, v) for e in progress if (v := _as_float(e.attrs.get(metric.column))) == v)
        if len(points) >= 2:
            ts = np.fromiter((t for t, _ in points), dtype=np.int64, count=len(points))
            values = np.fromiter((v for _, v in points), dtype=np.float64, count=len(points))
            return metric, GpuSeries("", "training", ts, {metric.column: values})
    return None


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


# -- derived spans ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Span:
    """A metric detector's stretch of time (stall, memory margin, throttling) on one GPU."""

    detector: str
    start: int
    end: int
    gpu: str | None
    host: str | None
    message: str
    event: Event


#: (start, end) attribute names of a detector's span; the detectors write ``end_ts`` and start at ``ts``.
_SPAN_KEYS = (("first_ts", "last_ts"), ("start_ts", "end_ts"), ("first", "last"), ("start", "end"),
              ("start_ns", "end_ns"), ("first_seen", "last_seen"), ("t0", "t1"))


def as_ns(value: Any) -> int | None:
    """A time attribute as UTC ns: ints/floats are taken as ns (seconds when < 1e12), strings as ISO 8601."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value * 1e9) if abs(value) < 1e12 else int(value)
    if isinstance(value, datetime):
        return int(value.timestamp() * 1e9)
    if isinstance(value, str):
        try:
            d = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if d.tzinfo is None:
            d = d.replace(tzinfo=UTC)
        return int(d.timestamp() * 1e9)
    return None


def derived_spans(events: Iterable[Event]) -> list[Span]:
    """Spans of the metric detectors' ``derived`` events (a point span when only ``ts`` is known)."""
    spans: list[Span] = []
    for e in events:
        if e.kind != "derived":
            continue
        # Start and end are looked up on their own: a detector may give only its end (``end_ts``)
        # and let the event's own time be the start.
        start = next((t for a, _ in _SPAN_KEYS if (t := as_ns(e.attrs.get(a))) is not None), None)
        end = next((t for _, b in _SPAN_KEYS if (t := as_ns(e.attrs.get(b))) is not None), None)
        start = start if start is not None else e.ts
        if start is None:
            continue
        end = end if end is not None and end >= start else (e.ts if e.ts is not None and e.ts >= start else start)
        detector = str(e.attrs.get("detector") or "derived")
        spans.append(Span(detector, start, end, e.gpu, e.host, e.message, e))
    return spans


# -- names ------------------------------------------------------------------------------------
def short_names(paths: Iterable[str]) -> dict[str, str]:
    """Each path's shortest tail of components that no other path shares (``node-a/kmsg.log``).

    Archive members (``run.tar.gz!dir/file``) count their member path as components too.
    """
    unique = sorted(set(paths))
    parts = {p: [c for c in re.split(r"[/\\!]", p) if c] or [p] for p in unique}
    out: dict[str, str] = {}
    for p in unique:
        for k in range(1, len(parts[p]) + 1):
            tail = parts[p][-k:]
            if all(parts[q][-k:] != tail for q in unique if q != p):
                out[p] = "/".join(tail)
                break
        else:
            out[p] = p
    return out


def reflow(text: str) -> str:
    """Join hard-wrapped lines into paragraphs; keep blank lines, list items and indented lines."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.split("\n")
        joined = lines[0].rstrip()
        for line in lines[1:]:
            if re.match(r"\s*(?:[-*•]|\d+[.)])\s", line) or line.startswith(("  ", "\t")):
                joined += "\n" + line.rstrip()
            else:
                joined += " " + line.strip()
        paragraphs.append(joined)
    return "\n\n".join(paragraphs)


# -- the whole model --------------------------------------------------------------------------
_NOTABLE_KINDS = frozenset({"recording", "exit", "gpu-info", "derived"})


@dataclass
class Model:
    """Everything the screens need that is costly to compute, built off the UI thread."""

    analysis: Analysis
    findings: list[Finding]
    facts: RunFacts
    series: list[GpuSeries]
    spans: list[Span]
    metrics: list[Metric]  # the known metrics present in the data, in display order
    rate: tuple[Metric, GpuSeries] | None = None  # the training rate from progress lines, when known
    names: dict[str, str] = field(default_factory=dict)  # input path -> shortest unambiguous name

    def where(self, origin: Origin) -> str:
        """``file:line`` with the file's short name."""
        return f"{self.names.get(origin.path, origin.path)}:{origin.line}"

    @property
    def span(self) -> tuple[int, int] | None:
        """First to last event or sample of the whole timeline (what time jumps count from)."""
        if self.facts.start is None or self.facts.end is None:
            return None
        return self.facts.start, self.facts.end

    @property
    def chart_span(self) -> tuple[int, int] | None:
        """The time axis of the charts: the recorded run widened to its samples, else the samples' own
        range, else the timeline's (a kernel log reaching back before the run would squeeze the run)."""
        series = self.series + ([self.rate[1]] if self.rate else [])
        stamps = [int(s.ts[0]) for s in series if len(s.ts)] + [int(s.ts[-1]) for s in series if len(s.ts)]
        if self.facts.run_start is not None and self.facts.run_end is not None:
            stamps += [self.facts.run_start, self.facts.run_end]
        if stamps:
            return min(stamps), max(stamps)
        return self.span


def build_model(analysis: Analysis) -> Model:
    events = analysis.timeline.events
    notable = [e for e in events if e.kind in _NOTABLE_KINDS]
    facts = run_facts(analysis, notable, analysis.timeline.metrics)
    facts.ranks = sorted({e.rank for e in events if e.rank is not None})
    series = gpu_series(analysis.timeline.metrics)
    present = {c for s in series for c, v in s.values.items() if np.isfinite(v).any()}
    metrics = [m for m in METRICS if m.column in present]
    paths = [s.path for s in analysis.sources] + [e.origin.path for f in analysis.findings for e in f.evidence]
    return Model(analysis, ordered_findings(analysis.findings), facts, series, derived_spans(notable), metrics,
                 names=short_names(paths), rate=rate_series(events))


# -- lookups the charts need ------------------------------------------------------------------
MARKS = "123456789abcdefghijklmnopqrstuvwxyz"


def finding_mark(position: int) -> str:
    """The one-character label of the n-th finding (as listed), used on chart time axes."""
    return MARKS[position] if 0 <= position < len(MARKS) else "+"


def _gpu_aliases(model: Model, host: str | None, gpu: object) -> set[str]:
    fact = model.facts.directory.find(host, gpu)
    return set(fact.aliases) if fact else {gpu_alias(gpu)}


def names_gpu(model: Model, series: GpuSeries, gpus: Iterable[object], host: str | None = None) -> bool:
    """Whether any of ``gpus`` (ids as findings/events spell them) is the GPU of ``series``."""
    if host and series.host and host != series.host:
        return False
    mine = _gpu_aliases(model, series.host, series.gpu)
    return any(_gpu_aliases(model, series.host, g) & mine for g in gpus if g not in (None, ""))


def series_fact(model: Model, series: GpuSeries) -> GpuFact | None:
    return model.facts.directory.find(series.host, series.gpu)


def spans_for(model: Model, series: GpuSeries) -> list[Span]:
    """The detector spans on this GPU, plus those that name no GPU (they concern every GPU)."""
    return [s for s in model.spans if s.gpu in (None, "") or names_gpu(model, series, [s.gpu], s.host)]
