"""Render an :class:`~forensics.analysis.Analysis` for a person (terminal text).

The first screen answers: what killed the run, how sure we are, the lines that prove
it (file:line and time), what to do, then what followed, the risks, and what else was
considered and why it lost. Plain text, no colour, so it pastes into a ticket.
"""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from forensics.events import Event, TsSource

if TYPE_CHECKING:
    from forensics.analysis import Analysis
    from forensics.findings import Finding
    from forensics.timeline import Timeline

__all__ = ["iso", "render_text", "when"]

WIDTH = 100
MAX_EVIDENCE_LINES = 6
MAX_MESSAGE = 150


def iso(ts: int | None) -> str | None:
    """UTC nanoseconds as ISO 8601 with microseconds, or None."""
    if ts is None:
        return None
    try:
        return datetime.fromtimestamp(ts / 1e9, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    except (ValueError, OverflowError, OSError):  # the clock layer refuses such stamps; never crash here
        return None


def when(e: Event) -> str:
    """A time for people: seconds precision, ``≈`` when it was inferred or is a receipt time."""
    if e.ts is None:
        return "(no time)"
    try:
        text = datetime.fromtimestamp(e.ts / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S") + "Z"
    except (ValueError, OverflowError, OSError):
        return "(no time)"
    if e.ts_source in (TsSource.INFERRED, TsSource.RECEIPT):
        return "≈" + text
    if e.ts_source == TsSource.LOCAL:
        return text[:-1] + " (local)"
    return text


def _short(text: str, limit: int = MAX_MESSAGE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _wrap(text: str, indent: str) -> list[str]:
    out: list[str] = []
    for para in text.strip().split("\n\n"):
        out.extend(textwrap.wrap(" ".join(para.split()), WIDTH, initial_indent=indent, subsequent_indent=indent,
                                 break_on_hyphens=False))
    return out


def _evidence_lines(f: Finding, limit: int = MAX_EVIDENCE_LINES) -> list[str]:
    shown = f.evidence[:limit]
    width = max((len(str(e.origin)) for e in shown), default=0)
    lines = []
    for e in shown:
        head = f"    {when(e):<22} {str(e.origin):<{width}}"
        if len(head) + 2 + min(len(e.message), 60) > WIDTH + 20:
            lines += [head.rstrip(), f"        {_short(e.message, WIDTH + 12)}"]
        else:
            lines.append(f"{head}  {_short(e.message, max(60, WIDTH + 40 - len(head)))}")
    total = max(f.matched, len(f.evidence))
    if total > len(shown):
        lines.append(f"    … {total - len(shown)} more matching line(s)")
    return lines


def _finding_line(f: Finding) -> str:
    first = f.evidence[0] if f.evidence else None
    where = f"  [{first.origin}]" if first is not None else ""
    note = f" — {f.note}" if f.note else ""
    return f"    - {f.signature}: {f.title}{note}{where}"


def _root(analysis: Analysis) -> list[str]:
    v = analysis.verdict
    f = v.root_cause
    assert f is not None
    out = [f"ROOT CAUSE: {f.title}", f"  [{f.signature} · {v.confidence} confidence · score {f.score:.2f}]"]
    out += _wrap(v.summary, "  ")
    out += ["", "  Evidence:", *_evidence_lines(f)]
    if v.consequences:
        out += ["", "  What followed (consequences, not causes):"]
        out += [_finding_line(c) for c in v.consequences]
    if f.remedy:
        out += ["", "  What to do:"]
        for i, step in enumerate(f.remedy, 1):
            wrapped = textwrap.wrap(" ".join(step.split()), WIDTH - 7, break_on_hyphens=False)
            out.append(f"    {i}. {wrapped[0] if wrapped else ''}")
            out += [f"       {w}" for w in wrapped[1:]]
    if f.explain:
        out += ["", "  What it means:"]
        out += _wrap(f.explain, "    ")
    return out


MAX_CLOCK_HOSTS = 8
MAX_TIME_NOTES = 8


def _time_lines(timeline: Timeline) -> list[str]:
    """How the sources' times were lined up: one line for the hosts' clock offsets, one per note
    of what the timeline inferred (years of year-less stamps, boot anchors)."""
    out: list[str] = []
    ref = timeline.clock_reference
    hosts = [h for h in sorted(timeline.clock_offsets) if h != ref or h in timeline.clock_given]
    if hosts:
        parts = []
        for h in hosts[:MAX_CLOCK_HOSTS]:
            off = timeline.clock_offsets[h]
            if h in timeline.clock_given:
                parts.append(f"{h} {off.offset_s:+.3f} s (given)")
                continue
            state = "applied" if h in timeline.offsets_applied else "not applied"
            parts.append(f"{h} {off.offset_s:+.3f} s ±{off.uncertainty_s:.3f} s ({off.n_pairs} shared "
                         f"event{'s' if off.n_pairs != 1 else ''}, {state})")
        more = f"; … {len(hosts) - MAX_CLOCK_HOSTS} more" if len(hosts) > MAX_CLOCK_HOSTS else ""
        against = f" against {ref}" if ref and ref not in timeline.clock_given else ""
        out.append(f"Clocks{against}: " + "; ".join(parts) + more)
    out += [f"Time: {note}" for note in timeline.notes[:MAX_TIME_NOTES]]
    if len(timeline.notes) > MAX_TIME_NOTES:
        out.append(f"Time: … {len(timeline.notes) - MAX_TIME_NOTES} more")
    return out


def render_text(analysis: Analysis) -> str:
    v = analysis.verdict
    out: list[str] = []
    if v.root_cause is None:
        out.append(f"NO FAILURE FOUND ({v.confidence} confidence)")
        out += _wrap(v.summary, "  ")
    else:
        out += _root(analysis)
    if v.contributing:
        out += ["", "  Risks and contributing findings:"]
        for c in v.contributing:
            out.append(_finding_line(c))
            if c.evidence:
                out.append(f"      {_short(c.evidence[0].message, WIDTH)}")
    if v.ruled_out:
        out += ["", "  Considered and ruled out:"]
        out += [f"    - {sig}: {why}" for sig, why in v.ruled_out]
    if v.root_cause is not None and v.root_cause.references:
        out += ["", "  References: " + "  ".join(v.root_cause.references[:3])]
    out.append("")
    out.append(f"Read {len(analysis.sources)} file(s): "
               + ", ".join(f"{s.path} ({s.kind}, {s.events} events"
                           + (f", {s.metrics} samples" if s.metrics else "") + ")"
                           for s in analysis.sources[:10])
               + (" …" if len(analysis.sources) > 10 else ""))
    out += _time_lines(analysis.timeline)
    for w in analysis.warnings[:20]:
        out.append(f"warning: {w}")
    if len(analysis.warnings) > 20:
        out.append(f"warning: … {len(analysis.warnings) - 20} more")
    from forensics.secrets import redact_text

    return redact_text("\n".join(out) + "\n")[0]  # what the child printed may hold a credential
