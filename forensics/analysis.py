"""The headless façade: inputs in, :class:`Analysis` out.

The CLI (``analyze``), the JSON/text reports and the TUI all reach data through
:func:`analyze` only, so what the screen shows and what ``--format json`` prints
can never disagree.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics.events import Event, MetricSample
from forensics.findings import Finding, Verdict
from forensics.ingest.sources import InputFile, Limits, expand_inputs, input_size
from forensics.ingest.textdoc import TextDocument
from forensics.timeline.clocksync import kinds_json
from forensics.timeline.merge import Timeline, build_timeline, place_boot_relative, plausible_metrics

if TYPE_CHECKING:
    import pandas as pd

    from forensics.ingest.environment import BundleFacts
    from forensics.ingest.meter import Progress
    from forensics.timeline.filters import TimelineFilter
    from forensics.timeline.topology import Topology

__all__ = ["Analysis", "Options", "SourceReport", "analyze", "bundle_facts", "parse_input"]


@dataclass
class Options:
    """How to read the inputs; every field has a default (``forensics.analyze(paths, **fields)``)."""

    signature_dirs: Sequence[Path] = ()
    tz: tzinfo | None = None
    offsets: dict[str, float] = field(default_factory=dict)  # host -> seconds to add
    limits: Limits = field(default_factory=Limits)
    #: ``--since/--until/--host/--rank``: applied to the timeline before the signatures read it
    timeline_filter: TimelineFilter | None = None
    #: evidence events kept on each finding, the first and the last ones (``matcher.MAX_EVIDENCE``);
    #: None keeps every one (``analyze --all``)
    max_evidence: int | None = 16


@dataclass
class SourceReport:
    """One input file: what it was detected as and what came out of it."""

    path: str
    kind: str
    host: str | None
    events: int
    metrics: int = 0
    warnings: list[str] = field(default_factory=list)
    record_kinds: list[str] = field(default_factory=list)
    confidence: float = 0.0
    document: TextDocument | None = field(default=None, repr=False)
    presentation: list[str] = field(default_factory=list)  # what was peeled before parsing (prefixes, wrapping)


@dataclass
class Analysis:
    sources: list[SourceReport]
    timeline: Timeline
    findings: list[Finding]
    verdict: Verdict
    warnings: list[str] = field(default_factory=list)

    @cached_property
    def topology(self) -> Topology:
        """Each GPU's PCIe link, the paths between GPUs and chipset/switch attachment (timeline/topology.py)."""
        from forensics.timeline.topology import read_topology

        return read_topology(self.timeline.events, self.timeline.metrics)

    @property
    def recordings(self) -> list[dict[str, Any]]:
        """One entry per recorded bundle, from the manifest events the bundle parser emits."""
        return [dict(e.attrs) for e in self.timeline.events if e.kind == "recording"]

    def document(self, path: str) -> TextDocument | None:
        """The raw text of an input, to show evidence lines in context."""
        for s in self.sources:
            if s.path == path:
                return s.document
        return None

    @property
    def failed(self) -> bool:
        return self.verdict.root_cause is not None

    def events_frame(self) -> pd.DataFrame:
        """The timeline's events as a pandas DataFrame, one row each in timeline order (columns:
        ``forensics/timeline/tables.py``; ``ts`` is ``datetime64[ns, UTC]``)."""
        from forensics.timeline.tables import events_frame

        return events_frame(self.timeline.events)

    def metrics_frame(self) -> pd.DataFrame:
        """The GPU samples (NVML, nvidia-smi) as a pandas DataFrame: ``ts``, ``host``, ``gpu``, one float
        column per reading."""
        from forensics.timeline.tables import metrics_frame

        return metrics_frame(self.timeline.metrics)

    def to_json_dict(self) -> dict[str, Any]:
        """The versioned JSON verdict, as ``forensics analyze --format json`` prints it (secrets redacted)."""
        return to_json_dict(self)

    def __repr__(self) -> str:
        v = self.verdict
        said = (f"root cause {v.root_cause.signature}" if v.root_cause is not None else "no failure found")
        return (f"<Analysis {said} ({v.confidence} confidence), {len(self.findings)} finding(s), "
                f"{len(self.sources)} source(s), {len(self.timeline.events):,} event(s), "
                f"{len(self.timeline.metrics):,} GPU sample(s)>")


def _zone(name: str | None) -> tzinfo | None:
    """The zone a bundle recorded its host in, when the user gave none."""
    if not name or len(name) > 64:  # the longest IANA name is 32 characters
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name the file system refuses
        return None


def _year_from_mtime(mtime: float | None) -> int | None:
    return datetime.fromtimestamp(mtime, UTC).year if mtime else None


def parse_input(item: InputFile, options: Options, notable: tuple[bytes, ...] = (),
                progress: Callable[[float], None] | None = None) -> tuple[
    SourceReport, list[Event], list[MetricSample]
]:
    """Detect one file's format and parse it. Never raises on bad content. ``progress`` hears the
    fraction of the parse done (see ``TextDocument.progress``)."""
    from forensics.ingest.bundle import receipt_lookup
    from forensics.ingest.safe_pickle import is_pickle
    from forensics.parsers.common.base import ParseContext
    from forensics.parsers.common.presentation import learn as learn_presentation
    from forensics.parsers.flight_recorder import pickle_to_json
    from forensics.parsers.registry import detect

    warnings = list(item.warnings)
    if not item.raw:
        if not warnings:
            warnings.append(f"{item.display}: empty file")
        return SourceReport(item.display, "unreadable" if item.warnings else "empty", item.host, 0,
                            warnings=warnings), [], []
    raw = item.raw
    if is_pickle(raw[:2]):  # a flight-recorder dump: its plain data as JSON text, never unpickled
        raw, notes = pickle_to_json(raw[:])  # (sources.py reads a pickle into memory, never maps it)
        if not raw:
            warnings += [f"{item.display}: {n}" for n in notes]
            return SourceReport(item.display, "pickle", item.host, 0, warnings=warnings), [], []
    from forensics.ingest.binary import binary_kind

    what = binary_kind(raw)
    if what is not None:
        warnings.append(f"{item.display}: binary file ({what}), not a log; skipped")
        return SourceReport(item.display, "binary", item.host, 0, warnings=warnings), [], []
    doc = TextDocument.from_bytes(raw, item.display)
    shown = learn_presentation(doc)  # launcher prefixes, line numbers, quoting, wrapping: peeled
    work = shown.doc if shown is not None else doc
    parser, confidence = detect(work.head())
    ctx = ParseContext(
        path=item.display,
        source=item.source or f"file:{os.path.basename(item.display.split('!')[-1])}",
        host=item.host,
        year=_year_from_mtime(item.mtime),
        mtime_ns=int(item.mtime * 1e9) if item.mtime else None,
        tz=options.tz or _zone(item.tz_name),
        boot_time_ns=item.boot_time_ns,
        receipt_ts=receipt_lookup(item.receipt_index) if shown is None else shown.receipts(
            receipt_lookup(item.receipt_index)),  # a peeled collector stamp is a receipt time
        notable=notable,
        detect=detect,
    )
    from forensics.parsers.common.paste import parse_paste

    work.progress = progress
    try:
        parsed = parse_paste(parser, work, ctx)  # each source of a paste by its reader; a bad record costs one
    finally:
        work.progress = None  # the document outlives the parse (evidence context, the TUI)
    events, metrics = parsed.events, parsed.metrics
    if work.truncated_lines:
        ctx.warn(f"{work.truncated_lines} line(s) longer than 1 MiB were cut")
    if shown is not None:  # evidence points at the raw lines, a label's rank/host is kept
        events, metrics = shown.restore(events), shown.restore(metrics)
    events = place_boot_relative(events, item.boot_time_ns)
    metrics = plausible_metrics(metrics)
    kinds = sorted(Counter(e.kind for e in events))
    report = SourceReport(item.display, parser.name, item.host or next((e.host for e in events if e.host), None),
                          len(events), len(metrics), warnings + ctx.warnings, kinds, confidence, doc,
                          (shown.steps if shown is not None else []) + parsed.parts)
    return report, events, metrics


def analyze(paths: Sequence[str], options: Options | None = None,
            progress: Callable[[str], None] | None = None,
            on_progress: Callable[[Progress], None] | None = None) -> Analysis:
    """Read every input, build one timeline, and run the signatures over it.

    ``progress(name)`` is called as each input file begins; ``on_progress`` gets a
    :class:`~forensics.ingest.meter.Progress` (input bytes done of the total, the file) a few times a
    second, also within one big file, and once more, full, when all files are read."""
    from forensics import match
    from forensics.match.unrecognized import attach_output_tail

    options = options or Options()
    signatures = match.load_signatures(options.signature_dirs)
    notable = match.notable_literals(signatures)
    meter = None
    parse_share = 1.0
    if on_progress is not None:
        from forensics.ingest.meter import READ_SHARE, Meter

        meter = Meter(input_size(paths, options.limits), on_progress)
        parse_share = 1.0 - READ_SHARE
    sources: list[SourceReport] = []
    per_source: list[tuple[list[Event], list[MetricSample]]] = []
    notes: list[str] = []
    not_logs: Counter[str] = Counter()
    for item in expand_inputs(paths, options.limits, meter):
        if item.notice or (item.walked and _not_a_log(item, not_logs)):
            notes += item.warnings if item.notice else []
            continue
        if progress:
            progress(item.display)
        if meter is not None:
            meter.step(item.display, item.disk_share * parse_share)
        report, events, metrics = parse_input(item, options, notable, meter.advance if meter else None)
        sources.append(report)
        per_source.append((events, metrics))
    if meter is not None:
        meter.finish()
    timeline = build_timeline(per_source, offsets=options.offsets, names=[s.path for s in sources])
    if options.timeline_filter is not None:
        timeline = options.timeline_filter.apply(timeline)
    findings, verdict = match.diagnose(timeline, signatures, options.max_evidence)
    attach_output_tail(verdict.root_cause, lambda bundle: output_tail(sources, bundle))
    if not_logs:
        notes.append(skipped_note(not_logs))
    warnings = notes + [w for s in sources for w in s.warnings] + verdict.warnings
    return Analysis(sources, timeline, findings, verdict, warnings)


def _not_a_log(item: InputFile, counts: Counter[str]) -> bool:
    """A file found in a folder that is not a log (forensics/parsers/common/log_files.py), counted."""
    from forensics.parsers.common.log_files import not_a_log

    label = not_a_log(item.display, item.raw[:65536])
    if label is not None:
        counts[label] += 1
    return label is not None


def skipped_note(counts: Counter[str]) -> str:
    """``skipped 14 files that are not logs: 9 .py, 3 .md, …; name them to read them``."""
    n = sum(counts.values())
    kinds = ", ".join(f"{c} {label}" for label, c in counts.most_common(6)) + (", …" if len(counts) > 6 else "")
    return f"skipped {n} file{'s' if n != 1 else ''} that {'are' if n != 1 else 'is'} not logs: {kinds}; " \
           "name them to read them"


def output_tail(sources: Sequence[SourceReport], bundle: str, n: int = 20) -> dict[str, list[str]]:
    """The last ``n`` non-empty lines of a bundle's ``stderr.log`` and ``stdout.log`` (bar redraws
    reduced to their last state, escape codes removed)."""
    from forensics.parsers.common.stream_text import clean

    out: dict[str, list[str]] = {}
    for s in sources:
        folder, _, name = s.path.rpartition("/")
        if s.document is None or name not in ("stderr.log", "stdout.log") or (folder or ".") != bundle:
            continue
        raw = s.document.data[-65536:].decode("utf-8", "replace")
        lines = [clean(x.rsplit("\r", 1)[-1]).rstrip() for x in raw.split("\n")]
        lines = [x[:300] for x in lines if x.strip()][-n:]
        if lines:
            out[name] = lines
    return out


#: The JSON contract's version (docs/analyze.schema.json): fields may be added within a version;
#: removing, renaming or retyping one bumps it.
JSON_VERSION = 1


def bundle_facts(paths: Sequence[str]) -> list[BundleFacts]:
    """The machine, software and run facts of every bundle behind ``paths`` (manifest and ``host/``
    snapshots, which :func:`analyze` leaves out as evidence), for reports, ``diff`` and ``pack``."""
    from forensics.ingest.environment import read_bundle_facts

    return read_bundle_facts(list(paths))


def to_json_dict(analysis: Analysis) -> dict[str, Any]:
    """The stable, versioned JSON contract (docs/design.md, docs/analyze.schema.json), credentials
    redacted (forensics/secrets.py)."""
    from forensics.secrets import redact_tree
    from forensics.units import iso

    v = analysis.verdict
    return redact_tree({  # evidence quotes what the child printed, which may hold a credential
        "version": JSON_VERSION,
        "verdict": {
            "root_cause": v.root_cause_id,
            "confidence": str(v.confidence),
            "summary": v.summary,
            "consequences": [f.signature for f in v.consequences],
            "contributing": [f.signature for f in v.contributing],
            "ruled_out": [{"signature": s, "why": why} for s, why in v.ruled_out],
            "blame": _blame_json(v),
            "root_first_event": iso(v.t0),
            "xid_catalog": v.xid_catalog or None,
            "machine": _machine_json(v),
            "xid_incidents": [
                {"gpu": i.gpu, "host": i.host, "first_seen": iso(i.first_ts), "last_seen": iso(i.last_ts),
                 "primary": i.primary, "meaning": i.primary_meaning, "bucket": i.bucket,
                 "investigatory": i.investigatory, "consequences": {str(c): n for c, n in i.consequences.items()},
                 "count": i.count, "disrupts_job": i.disrupts_job, "why_disruptive": i.why_disruptive,
                 "evidence": [str(e.origin) for e in i.evidence[:20]]}
                for i in v.xid_incidents
            ],
        },
        "findings": [
            {
                "signature": f.signature,
                "title": f.title,
                "category": f.category,
                "score": round(f.score, 3),
                "role": str(f.role),
                "first_seen": iso(f.first_seen),
                "last_seen": iso(f.last_seen),
                "matched": f.matched,
                "hosts": f.hosts,
                "gpus": f.gpus,
                "ranks": f.ranks,
                "note": f.note,
                "facts": f.facts,
                "explain": f.explain,
                "remedy": f.remedy,
                "references": f.references,
                "evidence": [
                    {"ts": iso(e.ts), "ts_source": str(e.ts_source), "source": e.source, "kind": e.kind,
                     "message": e.message, "origin": str(e.origin), "dt_s": v.dt_s(e)}
                    for e in f.evidence
                ],
            }
            for f in analysis.findings
        ],
        "sources": [
            {"path": s.path, "kind": s.kind, "host": s.host, "events": s.events, "metrics": s.metrics,
             "record_kinds": s.record_kinds, "warnings": s.warnings,
             **({"presentation": s.presentation} if s.presentation else {})}  # what was peeled before parsing
            for s in analysis.sources
        ],
        "recordings": analysis.recordings,
        **({"topology": analysis.topology.to_json()}  # PCIe facts, when the inputs give any
           if analysis.topology.gpus or analysis.topology.paths else {}),
        "timeline": _timeline_summary(analysis.timeline),
        "warnings": analysis.warnings,
    })


def _blame_json(v: Verdict) -> dict[str, Any] | None:
    """Culprit + victims + why (additive to version 1; None when the evidence names nobody)."""
    return v.blame.to_json() if v.blame is not None else None


def _machine_json(v: Verdict) -> dict[str, Any] | None:
    """The GPUs' models and classes the remedies were chosen for (additive to version 1; null when the
    inputs name no GPU model)."""
    m = v.machine
    if m is None or not m.gpus:
        return None
    return {"gpus": [{"gpu": g, "model": model, "class": cls} for g, (model, cls) in m.gpus.items()],
            "classes": sorted(m.classes()), "basis": m.basis}


def _timeline_summary(timeline: Timeline) -> dict[str, Any]:
    from forensics.units import iso

    span = timeline.span
    return {
        "events": len(timeline.events),
        "metrics": len(timeline.metrics),
        "kinds": dict(sorted(Counter(e.kind for e in timeline.events).items())),
        "hosts": timeline.hosts,
        "start": iso(span[0]) if span else None,
        "end": iso(span[1]) if span else None,
        "clock_reference": timeline.clock_reference,
        "clock_offsets": {
            host: {"offset_s": off.offset_s, "uncertainty_s": off.uncertainty_s, "pairs": off.n_pairs,
                   "applied_s": timeline.offsets_applied.get(host, 0.0), "given": host in timeline.clock_given,
                   "by_kind": kinds_json(timeline.clock_evidence.get(host, ()))}
            for host, off in sorted(timeline.clock_offsets.items())
        },
        "notes": list(timeline.notes),
    }


def dumps(analysis: Analysis) -> str:
    """Strict JSON (``forensics.escape.json_dumps``): a non-finite number (a manifest's 1e999) is
    ``null``, and a warning names where."""
    from forensics.escape import finite, json_dumps

    notes: list[str] = []
    data = finite(to_json_dict(analysis), notes)
    data["warnings"] += [f"not a finite number, written as null: {n}" for n in notes[:20]]
    return json_dumps(data, indent=2)
