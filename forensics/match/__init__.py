"""Signature matching and the verdict.

``load_signatures`` reads the shipped TOML signatures plus any user directories;
``notable_literals`` gives the parsers the anchor literals that make a line of a
chatty log worth an event; ``diagnose`` runs the detectors (derived events), the
signatures and the verdict over one timeline.

Modules: :mod:`.schema` (data), :mod:`.loader` (TOML → Signature, file:line errors),
:mod:`.selectors` (evidence → events), :mod:`.correlation` (counts, order, groups),
:mod:`.matcher` (signature → finding, score), :mod:`.detectors` (metrics, progress,
recorder health, cross-rank), :mod:`.verdict` (root cause, consequences, confidence),
:mod:`.evaluate` and :mod:`.lint` (the ``eval`` and ``lint-signatures`` commands).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from pathlib import Path

from forensics.catalogs.matching import notable_literals as catalog_literals
from forensics.errors import SignatureError
from forensics.events import Event
from forensics.findings import Confidence, Finding, Verdict
from forensics.match.crossgpu import refine_cross_gpu
from forensics.match.detectors import run_detectors
from forensics.match.detectors.runs import BOUNDARY_LITERALS
from forensics.match.loader import load_signatures as _load
from forensics.match.machine import read_machine
from forensics.match.matcher import MAX_EVIDENCE, match_signature
from forensics.match.oom_check import rule_out_oom_killer
from forensics.match.schema import Signature
from forensics.match.selectors import EventIndex
from forensics.match.unrecognized import unrecognized, verdict_for
from forensics.match.verdict import decide
from forensics.match.xid_catalog import catalog_version, describe
from forensics.match.xid_incidents import xid_code, xid_incidents
from forensics.timeline.merge import Timeline

__all__ = ["Signature", "SignatureError", "add_derived_events", "diagnose", "load_signatures", "notable_literals"]


def load_signatures(extra_dirs: Iterable[Path] = ()) -> list[Signature]:
    """Shipped signatures plus those in ``extra_dirs`` (a user file with a shipped id
    replaces it). Raises :class:`SignatureError` naming file:line for an invalid file."""
    return _load(extra_dirs)


def notable_literals(signatures: Sequence[Signature]) -> tuple[bytes, ...]:
    """Every evidence literal (anchors, and supporting/excludes lines, which must become
    events too to be seen), UTF-8 encoded, each once; derived-event tags are left out
    since no raw line carries them."""
    seen: dict[bytes, None] = {}
    for sig in signatures:
        for ev in sig.evidence:
            if ev.kinds == ("derived",):
                continue
            for lit in ev.literals:
                seen.setdefault(lit.encode("utf-8"), None)
    for lit in BOUNDARY_LITERALS:  # run boundaries (a restart is not a stall)
        seen.setdefault(lit.encode("utf-8"), None)
    for lit in catalog_literals():  # the producers' catalogued errors (forensics/catalogs)
        seen.setdefault(lit.encode("utf-8"), None)
    return tuple(seen)


def _ts_key(e: Event) -> int:
    return e.ts if e.ts is not None else 1 << 62


def add_derived_events(timeline: Timeline) -> list[str]:
    """Run the detectors once and merge their derived events into ``timeline.events``
    (by time), so every view of the timeline shows them. Returns detector warnings."""
    if any(e.kind == "derived" for e in timeline.events):
        return []
    derived, warnings = run_detectors(timeline)
    if derived:
        timeline.events = list(heapq.merge(timeline.events, sorted(derived, key=_ts_key), key=_ts_key))
    return warnings


def _healthy(timeline: Timeline) -> tuple[str, Confidence]:
    events = timeline.events
    codes = [e.attrs.get("exit_code") for e in events if e.kind in ("exit", "recording")]
    codes = [c for c in codes if isinstance(c, int)]
    if codes and any(c != 0 for c in codes):
        bad = next(c for c in codes if c != 0)
        return (f"The run exited with status {bad}, but no known failure signature matched; "
                "read the last lines of its output."), Confidence.LOW
    if codes:
        return "The recorded run finished with exit status 0 and no failure signature matched.", Confidence.HIGH
    if not events and not timeline.metrics:
        return "Nothing notable was found in the inputs.", Confidence.LOW
    counted = f"{len(events)} notable event(s)" + (f" and {len(timeline.metrics)} GPU metric sample(s)"
                                                     if timeline.metrics else "")
    return f"No failure signature matched {counted}.", Confidence.MEDIUM


def diagnose(timeline: Timeline, signatures: Sequence[Signature],
             max_evidence: int | None = MAX_EVIDENCE) -> tuple[list[Finding], Verdict]:
    """Detectors, signatures and verdict over one timeline (``max_evidence``: evidence events kept on
    each finding, None for all)."""
    warnings = add_derived_events(timeline)
    index = EventIndex(timeline.events, signatures)
    matches = [m for sig in signatures if (m := match_signature(sig, index, max_evidence)) is not None]
    note, confidence = _healthy(timeline)
    findings, verdict = decide(matches, index.events, note, confidence, timeline.metrics, timeline.identity)
    if verdict.root_cause is None and (unknown := unrecognized(index.events, index.catalog_hits)) is not None:
        findings, verdict = verdict_for(unknown, findings, verdict)  # a failure no signature knows
    verdict.warnings = warnings + index.warnings
    verdict.machine = read_machine(index.events)  # remedies fit the machine: datacenter board or desktop card
    for f in findings:
        f.fit_remedy(verdict.machine)
    _add_xid_context(verdict, index.events)
    refine_cross_gpu(verdict, index.events, timeline.metrics)  # a P2P fault on a chipset-attached GPU
    rule_out_oom_killer(verdict, index.events, findings)  # a SIGKILL: what the kernel log says of the OOM killer
    return findings, verdict


def _add_xid_context(verdict: Verdict, events: Sequence[Event]) -> None:
    """Xid incidents, the pinned catalogue version, and the root Xid's catalogue entry in the summary."""
    if not any(e.kind == "xid" for e in events):
        return
    verdict.xid_incidents = xid_incidents(events)
    verdict.xid_catalog = catalog_version()
    root = verdict.root_cause
    if root is None or not root.signature.startswith("xid"):
        return
    codes = [c for e in root.evidence if e.kind == "xid" and (c := xid_code(e)) is not None]
    if codes:
        primary = next((i.primary for i in verdict.xid_incidents if any(e in i.evidence for e in root.evidence)),
                       codes[0])
        verdict.summary += f" {describe(primary)}."
