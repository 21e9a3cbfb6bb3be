"""Render an :class:`~forensics.analysis.Analysis` for a person (terminal text).

The first screen answers: what killed the run, how sure we are, the lines that prove
it (file:line and time), what to do, then what followed, the risks, and what else was
considered and why it lost. Plain text, no colour, so it pastes into a ticket.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from forensics.lazy_re import lazy_compile
from forensics.timeline.clocksync import describe_offset
from forensics.units import fmt_dt, when

if TYPE_CHECKING:
    from forensics.analysis import Analysis
    from forensics.findings import Finding
    from forensics.timeline.merge import Timeline

__all__ = ["headline", "render_text", "wrap_commands"]

WIDTH = 100
MAX_EVIDENCE_LINES = 6
MAX_MESSAGE = 150


def _short(text: str, limit: int = MAX_MESSAGE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _wrap(text: str, indent: str) -> list[str]:
    out: list[str] = []
    for para in text.strip().split("\n\n"):
        out.extend(textwrap.wrap(" ".join(para.split()), WIDTH, initial_indent=indent, subsequent_indent=indent,
                                 break_on_hyphens=False))
    return out


_OPTION = lazy_compile(r"--?[A-Za-z]")
_SHORT_OPTION = lazy_compile(r"-[A-Za-z]{1,2}")


def wrap_commands(text: str, width: int) -> list[str]:
    """``text`` wrapped at spaces only, never inside a word (a long flag or path overflows the line
    instead: it must copy-paste), and never before an option (``--format=csv``, ``-l``) nor between a
    short option and its value (``-d COMPUTE``), so a command stays on one line with its flags."""
    units: list[str] = []
    previous = ""
    for token in text.split():
        glued = bool(units) and (_OPTION.match(token) is not None or _SHORT_OPTION.fullmatch(previous) is not None)
        if glued:
            units[-1] += " " + token
        else:
            units.append(token)
        previous = token
    lines: list[str] = []
    for unit in units:
        if lines and len(lines[-1]) + 1 + len(unit) <= width:
            lines[-1] += " " + unit
        else:
            lines.append(unit)
    return lines


def _evidence_lines(f: Finding, limit: int | None = MAX_EVIDENCE_LINES, t0: int | None = None) -> list[str]:
    shown = f.evidence[:limit]
    width = max((len(str(e.origin)) for e in shown), default=0)
    lines = []
    for e in shown:
        dt = fmt_dt((e.ts - t0) / 1e9) if t0 is not None and e.ts is not None else ""
        head = f"    {when(e):<22} {dt:>8} {str(e.origin):<{width}}" if t0 is not None else \
            f"    {when(e):<22} {str(e.origin):<{width}}"
        if len(head) + 2 + min(len(e.message), 60) > WIDTH + 20:
            lines += [head.rstrip(), f"        {_short(e.message, WIDTH + 12)}"]
        else:
            lines.append(f"{head}  {_short(e.message, max(60, WIDTH + 40 - len(head)))}")
    total = max(f.matched, len(f.evidence))
    if total > len(shown):
        more = "" if limit is None else " (--all shows them)"
        lines.append(f"    … {total - len(shown)} more matching line(s){more}")
    return lines


def _finding_line(f: Finding, t0: int | None = None) -> str:
    first = f.evidence[0] if f.evidence else None
    dt = fmt_dt((f.first_seen - t0) / 1e9) if t0 is not None and f.first_seen is not None else ""
    where = f"  [{first.origin}{', Δt ' + dt if dt else ''}]" if first is not None else ""
    note = f" — {f.note}" if f.note else ""
    return f"    - {f.signature}: {f.title}{note}{where}"


def headline(analysis: Analysis) -> list[str]:
    """The verdict's first lines, unwrapped: who broke it (multi-rank / multi-GPU runs), what killed the
    run (or that nothing did), how sure, the summary. The terminal report, ``forensics report``
    (md/html) and anything else that states the verdict render these same lines."""
    v = analysis.verdict
    f = v.root_cause
    blame = [v.blame.line().replace("Culprit:", "CULPRIT:", 1)] if v.blame is not None else []
    if f is None:
        return [*blame, f"NO FAILURE FOUND ({v.confidence} confidence)", v.summary]
    return [*blame, f"ROOT CAUSE: {f.title}", f"[{f.signature} · {v.confidence} confidence · score {f.score:.2f}]",
            v.summary]


def _headline_text(analysis: Analysis) -> list[str]:
    lines = headline(analysis)
    out: list[str] = []
    if analysis.verdict.blame is not None:  # who broke it and who only waited, first
        out += textwrap.wrap(lines.pop(0), WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    first, *rest = lines
    return [*out, first] + [w for line in rest for w in _wrap(line, "  ")]


def _root(analysis: Analysis, full: bool = False) -> list[str]:
    v = analysis.verdict
    f = v.root_cause
    assert f is not None
    out = _headline_text(analysis)
    head = "  Evidence (Δt from the root cause's first event):" if v.t0 is not None else "  Evidence:"
    out += ["", head, *_evidence_lines(f, None if full else MAX_EVIDENCE_LINES, t0=v.t0)]
    tail = f.facts.get("last_lines")
    if isinstance(tail, dict):
        for name, lines in tail.items():
            out += ["", f"  Last lines of {name}:", *(f"    | {_short(str(x), WIDTH + 12)}" for x in lines)]
    if v.consequences:
        out += ["", "  What followed (consequences, not causes):"]
        out += [_finding_line(c, v.t0) for c in v.consequences]
    if f.remedy:
        fit = v.remedy_heading(f)
        out += ["", f"  What to do ({fit}):" if fit else "  What to do:"]
        for i, step in enumerate(f.remedy, 1):
            wrapped = wrap_commands(step, WIDTH - 7)
            out.append(f"    {i}. {wrapped[0] if wrapped else ''}")
            out += [f"       {w}" for w in wrapped[1:]]
    if f.explain:
        out += ["", "  What it means:"]
        out += _wrap(f.explain, "    ")
    return out


MAX_INCIDENTS = 5


def _xid_lines(analysis: Analysis) -> list[str]:
    """Xid incidents (one burst of one GPU each) with the catalogue version they were read with."""
    v = analysis.verdict
    if not v.xid_incidents:
        return []
    out = ["", f"  Xid incidents ({v.xid_catalog}):"]
    for i in v.xid_incidents[:MAX_INCIDENTS]:
        rest = ", ".join(f"{c}" + (f"×{n}" if n > 1 else "") for c, n in i.consequences.items())
        span = ""
        if i.first_ts is not None and i.last_ts is not None and i.last_ts > i.first_ts:
            span = f" over {fmt_dt((i.last_ts - i.first_ts) / 1e9).lstrip('+')}"
        start = when(i.evidence[0]) if i.evidence else "(no time)"
        line = (f"    - GPU {i.gpu}{' on ' + i.host if i.host else ''}, {start}: primary Xid {i.primary} "
                f"({i.primary_meaning}; {i.bucket or 'no bucket'})"
                + (f", then {rest}" if rest else "") + f"{span}; "
                + (f"disrupted the job: {i.why_disruptive}" if i.disrupts_job else "no sign it disrupted the job"))
        out += textwrap.wrap(line, WIDTH, subsequent_indent="      ", break_on_hyphens=False)
    if len(v.xid_incidents) > MAX_INCIDENTS:
        out.append(f"    … {len(v.xid_incidents) - MAX_INCIDENTS} more incident(s)")
    return out


MAX_CLOCK_HOSTS = 8
MAX_TIME_NOTES = 8


def _time_lines(timeline: Timeline, full: bool = False) -> list[str]:
    """How the sources' times were lined up: one line for the hosts' clock offsets, one per note
    of what the timeline inferred (years of year-less stamps, boot anchors)."""
    out: list[str] = []
    ref = timeline.clock_reference
    hosts = [h for h in sorted(timeline.clock_offsets) if h != ref or h in timeline.clock_given]
    if hosts:
        parts = []
        for h in hosts[:MAX_CLOCK_HOSTS]:
            parts.append(f"{h} " + describe_offset(timeline.clock_offsets[h], timeline.clock_evidence.get(h, ()),
                                                   h in timeline.clock_given, h in timeline.offsets_applied))
        more = f"; … {len(hosts) - MAX_CLOCK_HOSTS} more" if len(hosts) > MAX_CLOCK_HOSTS else ""
        against = f" against {ref}" if ref and ref not in timeline.clock_given else ""
        out.append(f"Clocks{against}: " + "; ".join(parts) + more)
    out += [f"Time: {note}" for note in timeline.notes[:None if full else MAX_TIME_NOTES]]
    if not full and len(timeline.notes) > MAX_TIME_NOTES:
        out.append(f"Time: … {len(timeline.notes) - MAX_TIME_NOTES} more")
    return out


def _topology_lines(analysis: Analysis) -> list[str]:
    """PCIe facts: each GPU's link (now vs max, chipset/switch attachment, its lspci chain) and the paths
    between GPUs; shown when there are several GPUs, a link below its maximum or a GPU behind the
    chipset or a switch."""
    topo = analysis.topology
    below = any(g.width is not None and g.width_max is not None and g.width < g.width_max for g in topo.gpus)
    behind = any(g.attachment in ("chipset", "switch") for g in topo.gpus)
    if not topo.paths and not below and not behind and len(topo.gpus) < 2:
        return []
    out = ["", "  PCIe topology (facts):"]
    for fact in topo.facts():
        out += textwrap.wrap(f"    - {fact}", WIDTH, subsequent_indent="      ", break_on_hyphens=False)
    return out


def _live_lines(analysis: Analysis) -> list[str]:
    """A run still being recorded: said first, with what the verdict then is (what it holds so far)."""
    out = []
    for rec in analysis.recordings:
        if rec.get("live"):
            age = rec.get("heartbeat_age_s")
            beat = f"heartbeat {age:.1f} s ago" if isinstance(age, int | float) else "heartbeat fresh"
            out.append(f"STILL RECORDING: `{rec.get('command')}` on {rec.get('host')} since {rec.get('start')} "
                       f"({beat}); this is what the bundle holds so far.")
    return [w for line in out for w in textwrap.wrap(line, WIDTH, subsequent_indent="  ")] + ([""] if out else [])


def render_text(analysis: Analysis, full: bool = False) -> str:
    """The report; ``full`` (``--all``): every evidence line, file and warning, none elided."""
    v = analysis.verdict
    out: list[str] = _live_lines(analysis)
    if v.root_cause is None:
        out += _headline_text(analysis)
    else:
        out += _root(analysis, full)
    out += _xid_lines(analysis)
    if v.contributing:
        out += ["", "  Risks and contributing findings:"]
        for c in v.contributing:
            out.append(_finding_line(c, v.t0))
            if c.evidence:
                out.append(f"      {_short(c.evidence[0].message, WIDTH)}")
    if v.ruled_out:
        out += ["", "  Considered and ruled out:"]
        out += [f"    - {sig}: {why}" for sig, why in v.ruled_out]
    out += _topology_lines(analysis)
    if v.root_cause is not None and v.root_cause.references:
        out += ["", "  References: " + "  ".join(v.root_cause.references[:3])]
    out.append("")
    files, warns = (None, None) if full else (10, 20)
    out.append(f"Read {len(analysis.sources)} file(s): "
               + ", ".join(f"{s.path} ({s.kind}, {s.events} events"
                           + (f", {s.metrics} samples" if s.metrics else "") + ")"
                           for s in analysis.sources[:files])
               + (" …" if files is not None and len(analysis.sources) > files else ""))
    out += _time_lines(analysis.timeline, full)
    for w in analysis.warnings[:warns]:
        out.append(f"warning: {w}")
    if warns is not None and len(analysis.warnings) > warns:
        out.append(f"warning: … {len(analysis.warnings) - warns} more (--all shows them)")
    from forensics.secrets import redact_text

    return redact_text("\n".join(out) + "\n")[0]  # what the child printed may hold a credential


def nothing_readable(analysis: Analysis) -> str:
    """The one line for inputs of which nothing could be read (``analyze``, ``report``, ``open``), with
    the first reason."""
    from forensics.escape import terminal

    why = next(iter(analysis.warnings), "")
    more = f" (+{len(analysis.warnings) - 1} more)" if len(analysis.warnings) > 1 else ""
    return "nothing readable in the inputs" + (f": {terminal(why, one_line=True)[:300]}{more}" if why else "")


def readable(analysis: Analysis) -> bool:
    """Whether any input gave text to analyse (not all unreadable, binary or empty)."""
    return not all(s.kind in ("unreadable", "binary", "empty") for s in analysis.sources)
