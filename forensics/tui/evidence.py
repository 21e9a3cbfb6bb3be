"""The evidence view: one finding's proof, event by event, with the raw lines around each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from forensics.events import Event, Severity
from forensics.findings import Finding, number_ranges
from forensics.ingest.textdoc import TextDocument
from forensics.tui.dialogs import context_lines, excerpt, render_context
from forensics.tui.model import (
    Model,
    facts_sentence,
    finding_mark,
    fmt_clock,
    fmt_delta,
    fmt_stamp,
    fmt_when,
    gap_ns,
    is_local,
    other_facts,
    reflow,
)
from forensics.tui.overview import FACTS_STYLE, MUTED, RISK_STYLE, finding_badge, is_risk
from forensics.tui.timeline_view import SEVERITY_TAGS, severity_style, source_style
from forensics.units import fmt_dt

__all__ = ["EvidenceView", "ShowInTimeline", "evidence_body"]

#: Evidence events drawn with their raw lines; the rest are listed one line each.
WITH_CONTEXT = 25
AROUND = 2  # raw lines shown either side of an evidence event
LISTED = 200
HEADING = Style(bold=True, color="#82aaff")


@dataclass
class ShowInTimeline(Message):
    """Put the timeline's cursor on this event."""

    event: Event


def _time_order(events: list[Event]) -> list[Event]:
    """By time; unplaced events by uptime, then by file position."""
    return sorted(events, key=lambda e: (e.ts is None, e.ts or 0, e.uptime_ns or 0, e.origin.path, e.origin.line))


def _event_head(model: Model, e: Event, previous: Event | None) -> Text:
    head = Text(no_wrap=True, overflow="ellipsis")
    delta = gap_ns(previous, e) if previous else None
    head.append(f"{fmt_delta(delta) if previous else 'first':>11}  ", Style(color="#c3e88d"))
    head.append(f"{fmt_when(e)}  ", MUTED)
    dt = model.analysis.verdict.dt_s(e)
    if dt is not None:
        head.append(f"Δt {fmt_dt(dt)}  ", Style(color="#ffcb6b"))
    sev = Severity(e.severity) if e.severity in Severity._value2member_map_ else Severity.INFO
    tag = SEVERITY_TAGS.get(sev, "").strip()
    if tag:
        head.append(f"{tag}  ", severity_style(sev) + Style(bold=True))
    head.append(model.where(e.origin), Style(color="#89ddff", underline=True))
    if not e.source.startswith("file:"):  # a loose file's source is its name, shown already
        head.append(f"  {e.source}", source_style(e.source))
    return head


def evidence_body(model: Model, position: int, document: Callable[[str], TextDocument | None]) -> RenderableType:
    """Everything that proves (or explains) finding number ``position``."""
    if not model.findings:
        return _no_findings(model)
    f = model.findings[position]
    parts: list[RenderableType] = []
    title = Text()
    title.append(f"{finding_mark(position)} ", Style(color="#ff5370", bold=True))
    title.append_text(finding_badge(f))
    title.append(f" {f.title}", Style(bold=True))
    parts.append(title)
    facts = [f.signature, f.category, f"score {f.score:.2f}"]
    if f.first_seen is not None:
        facts.append(f"first {fmt_stamp(f.first_seen, is_local(f.evidence))}")
    if f.last_seen is not None and f.last_seen != f.first_seen:
        facts.append(f"last {fmt_clock(f.last_seen)}")
    if f.hosts:
        facts.append("hosts " + ", ".join(f.hosts))
    if f.gpus:
        facts.append("GPUs " + ", ".join(f.gpus))
    if f.ranks:
        facts.append("ranks " + number_ranges(f.ranks))
    parts.append(Text(" · ".join(facts), MUTED))
    if f.note:
        parts.append(Text(f"why this role: {f.note}", Style(italic=True, color="#a6accd")))
    # What the matcher read out of the evidence (phase, OOM sizes …): the sentence first, then the rest.
    extracted = getattr(f, "facts", None) or {}
    sentence, rest = facts_sentence(extracted), other_facts(extracted)
    if sentence:
        parts.append(Text(sentence, FACTS_STYLE))
    if rest:
        parts.append(Text(rest, Style(color="#89ddff")))
    if f.explain:
        parts += [Text(""), Text(reflow(f.explain))]
    parts += [Text(""), _evidence(model, f, document)]
    if f.remedy:
        fit = model.analysis.verdict.remedy_heading(f)
        parts += [Text(""), Text(f"What to do ({fit})" if fit else "What to do", HEADING)]
        parts += [Text(f"{i:>3}. {reflow(step)}") for i, step in enumerate(f.remedy, 1)]
    if f.references:
        parts += [Text(""), Text("References", HEADING)]
        parts += [Text(f"     {ref}", Style(color="#89ddff")) for ref in f.references]
    ruled = model.analysis.verdict.ruled_out
    if ruled:
        parts += [Text(""), Text("Ruled out (for the whole verdict)", HEADING)]
        for sig, why in ruled:
            line = Text("     ")
            line.append(sig, Style(bold=True))
            line.append(f" — {why}")
            parts.append(line)
    return Group(*parts)


def _blocks(events: list[Event], around: int) -> list[list[Event]]:
    """Runs of events, in time order, close enough in one file to share one raw excerpt."""
    blocks: list[list[Event]] = []
    for e in events:
        if blocks:
            prev = blocks[-1][-1]
            gap = e.origin.line - (prev.origin.line + max(prev.origin.nlines, 1) - 1)
            if prev.origin.path == e.origin.path and 0 < gap <= 2 * around + 1:
                blocks[-1].append(e)
                continue
        blocks.append([e])
    return blocks


def _evidence(model: Model, f: Finding, document: Callable[[str], TextDocument | None]) -> RenderableType:
    events = _time_order(f.evidence)
    count = f"{len(events)} event{'s' if len(events) != 1 else ''}"
    if f.matched > len(events):
        count = f"{len(events)} of {f.matched:,} matching events"
    parts: list[RenderableType] = [Text(f"Evidence ({count}, in time order; t shows the first in the timeline)",
                                        HEADING)]
    previous: Event | None = None
    shown = 0
    for block in _blocks(events[:LISTED], AROUND):
        for e in block:
            parts.append(_event_head(model, e, previous))
            previous = e
        if shown < WITH_CONTEXT:
            lines = context_lines(document(block[0].origin.path), block, AROUND)
            if lines:
                parts.append(Padding(render_context(excerpt(lines, block), block), (0, 0, 0, 2)))
            else:
                parts += [Text(f"  {e.text}", severity_style(e.severity)) for e in block]
        else:
            parts += [Text(f"  {e.message}", severity_style(e.severity), no_wrap=True, overflow="ellipsis")
                      for e in block]
        shown += len(block)
    if len(events) > LISTED:
        parts.append(Text(f"  … {len(events) - LISTED} more; the timeline shows them all", MUTED))
    return Group(*parts)


def _no_findings(model: Model) -> RenderableType:
    analysis = model.analysis
    parts: list[RenderableType] = [
        Text("No findings", HEADING),
        Text(analysis.verdict.summary or "No signature matched these inputs."),
        Text(""),
        Text("What was read", HEADING),
    ]
    for s in analysis.sources:
        line = Text(f"  {s.path}", Style(color="#89ddff"))
        line.append(f"  {s.kind}, {s.events} event(s)" + (f", {s.metrics} sample(s)" if s.metrics else ""), MUTED)
        parts.append(line)
        for w in s.warnings[:3]:
            parts.append(Text(f"      {w}", Style(color="#ffcb6b")))
    if not analysis.sources:
        parts.append(Text("  nothing readable", MUTED))
    ruled = analysis.verdict.ruled_out
    if ruled:
        parts += [Text(""), Text("Ruled out", HEADING)]
        parts += [Text(f"  {sig} — {why}") for sig, why in ruled]
    return Group(*parts)


class EvidenceView(Horizontal):
    """Findings on the left (above, on a narrow terminal), the selected one's proof beside (below) them."""

    BINDINGS = [Binding("t", "show_in_timeline", "in timeline")]

    def __init__(self, model: Model) -> None:
        super().__init__(id="evidence-view")
        self.model = model
        self.position = 0

    def compose(self) -> ComposeResult:
        yield OptionList(*[Option(self._option(i, f), id=f"evidence-{i}") for i, f in enumerate(self.model.findings)],
                         id="evidence-findings")
        with VerticalScroll(id="evidence-scroll"):
            yield Static(id="evidence-body")

    @staticmethod
    def _option(i: int, f: Finding) -> Text:
        """Mark and whole title: a long title wraps under itself rather than losing its end."""
        text = Text(overflow="fold")
        text.append(f"{finding_mark(i)} ", Style(color="#ff5370", bold=True))
        if is_risk(f):
            text.append("risk", RISK_STYLE)
            text.append(" ")
        text.append(f.title)
        return text

    def on_mount(self) -> None:
        findings = self.query_one("#evidence-findings", OptionList)
        findings.border_title = "findings"
        if not self.model.findings:
            findings.display = False
        self.show(0)

    def show(self, position: int) -> None:
        """Show finding ``position`` (as numbered in the lists)."""
        if self.model.findings:
            position = max(0, min(position, len(self.model.findings) - 1))
            findings = self.query_one("#evidence-findings", OptionList)
            if findings.highlighted != position:
                findings.highlighted = position
        self.position = position
        body = evidence_body(self.model, position, self.model.analysis.document)
        self.query_one("#evidence-body", Static).update(body)
        self.query_one("#evidence-scroll", VerticalScroll).scroll_home(animate=False)

    @property
    def finding(self) -> Finding | None:
        return self.model.findings[self.position] if self.model.findings else None

    @on(OptionList.OptionHighlighted, "#evidence-findings")
    def _highlighted(self, message: OptionList.OptionHighlighted) -> None:
        if message.option_index != self.position:
            self.show(message.option_index)

    @on(OptionList.OptionSelected, "#evidence-findings")
    def _selected(self, message: OptionList.OptionSelected) -> None:
        self.query_one("#evidence-scroll").focus()

    def action_show_in_timeline(self) -> None:
        f = self.finding
        if f and f.evidence:
            self.post_message(ShowInTimeline(_time_order(f.evidence)[0]))
