"""The overview: the verdict on top, the findings ranked, run facts, per-GPU charts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from forensics.analysis import Analysis
from forensics.escape import terminal
from forensics.findings import Finding, Role, number_ranges
from forensics.match.facts import oom_sentence
from forensics.timeline.clocksync import describe_offset
from forensics.tui.chart_widgets import GpuSparkTable
from forensics.tui.model import (
    Model,
    facts_sentence,
    finding_mark,
    fmt_clock,
    fmt_duration,
    fmt_stamp,
    is_local,
    reflow,
)
from forensics.tui.sizes import NARROW, SHORT

if TYPE_CHECKING:
    from forensics.timeline.merge import Timeline

__all__ = ["FindingChosen", "OverviewView", "facts_text", "finding_option", "role_badge",
           "verdict_text"]

MUTED = Style(color="#8a8fa8")
ROLE_NAMES = {Role.ROOT_CAUSE: "root cause", Role.CONSEQUENCE: "consequence", Role.CONTRIBUTING: "contributing"}
ROLE_STYLES = {Role.ROOT_CAUSE: Style(color="#ffffff", bgcolor="#b00020", bold=True),
               Role.CONSEQUENCE: Style(color="#1b1b1b", bgcolor="#ffcb6b"),
               Role.CONTRIBUTING: Style(color="#1b1b1b", bgcolor="#89ddff")}
RISK_STYLE = Style(color="#1b1b1b", bgcolor="#f78c6c")
FACTS_STYLE = Style(color="#ffcb6b", bold=True)
CULPRIT_STYLE = Style(color="#ffffff", bgcolor="#7b1fa2", bold=True)


@dataclass
class FindingChosen(Message):
    """A finding was picked (enter or click) to see its evidence."""

    position: int


def is_risk(f: Finding) -> bool:
    """A risk finding: contributing only, never the root cause (``Finding.risk``)."""
    return bool(getattr(f, "risk", False))


#: The roles abbreviated for a narrow terminal (the Evidence view says them in full).
SHORT_ROLE_NAMES = {Role.ROOT_CAUSE: "root", Role.CONSEQUENCE: "then", Role.CONTRIBUTING: "contrib"}


def role_badge(role: Role, risk: bool = False, short: bool = False) -> Text:
    """The role as a coloured badge; a risk finding says ``risk`` instead of its role; ``short``: the
    abbreviated label of a narrow terminal."""
    width = 7 if short else 12
    if risk:
        return Text(f" {'risk':<{width}} ", RISK_STYLE)
    name = (SHORT_ROLE_NAMES if short else ROLE_NAMES).get(role, str(role))
    return Text(f" {name:<{width}} ", ROLE_STYLES.get(role, Style()))


def finding_badge(f: Finding, short: bool = False) -> Text:
    return role_badge(f.role, is_risk(f), short)


def _where(f: Finding) -> str:
    parts = []
    if f.hosts:
        parts.append(", ".join(f.hosts[:3]) + (" …" if len(f.hosts) > 3 else ""))
    if f.gpus:
        parts.append("GPU " + ", ".join(f.gpus[:4]) + (" …" if len(f.gpus) > 4 else ""))
    if f.ranks:
        parts.append("rank " + number_ranges(f.ranks))
    return " · ".join(parts)


#: The verdict box stays short enough for 80x24 to show the findings under it; the Evidence view has it all.
SUMMARY_CHARS = 300
WHY_CHARS = 160
REMEDY_CHARS = 170


def _clip(text: str, limit: int) -> str:
    """``text`` cut at a word boundary before ``limit`` characters, with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 1)
    return text[: cut if cut > limit // 2 else limit - 1].rstrip(" ,;:") + " …"


def _summary_rest(f: Finding, summary: str) -> str:
    """The verdict summary without what the lines above it already say: its opening sentence when
    that repeats the root cause's title (with where and when), and the out-of-memory sentence."""
    text = " ".join(summary.split())
    if f.title and text.startswith(f.title):
        cut = text.find(". ", len(f.title))
        text = text[cut + 2:] if cut >= 0 else ""
    oom = oom_sentence(f.facts) if isinstance(f.facts, dict) else ""
    if oom:
        text = text.replace(oom + ". ", "").replace(oom + ".", "")
    return text.strip()


def _risk_line(f: Finding) -> Text:
    """``Risk: <title> — <its first evidence, the detector's sentence>``."""
    line = Text()
    line.append(" RISK ", RISK_STYLE)
    line.append(f" {f.title}", Style(bold=True))
    first = next((e for e in f.evidence if e.message), None)
    if first is not None:
        detail = first.message.split("] ", 1)[-1] if first.message.startswith("[") else first.message
        line.append(" — " + _clip(detail, 140), MUTED)
    return line


def verdict_text(model: Model, width: int | None = None) -> Text:
    """The answer in a few lines: what, how sure, the facts, why, what to do. ``width`` (a small
    terminal): one line each for where/when, the summary and the first remedy step, cut at a word."""
    v = model.analysis.verdict
    out = Text()
    if v.root_cause is None:
        out.append(" NO FAILURE FOUND ", Style(color="#1b1b1b", bgcolor="#c3e88d", bold=True))
        out.append(f"  {v.confidence} confidence\n", MUTED)
        if v.summary:
            out.append(v.summary + "\n")
        for f in [f for f in model.findings if is_risk(f)][:3]:
            out.append_text(_risk_line(f))
            out.append("\n")
        n_events = len(model.analysis.timeline.events)
        out.append(f"{len(model.findings)} finding(s), {n_events:,} notable event(s) from "
                   f"{len(model.analysis.sources)} file(s). ", MUTED)
        out.append("3 opens the timeline." if n_events else "Nothing in the inputs looked notable.", MUTED)
        return out
    f = v.root_cause
    if v.blame is not None:  # multi-rank / multi-GPU: who broke the job and who only waited, first
        out.append(" CULPRIT ", CULPRIT_STYLE)
        out.append(f" {v.blame.culprits or 'not singled out'}", Style(bold=True, color="#ff5370"))
        if v.blame.victims:
            out.append(f"  victims: {v.blame.victims}", MUTED)
        out.append("\n")
        if v.blame.why:
            out.append(_clip(v.blame.why, WHY_CHARS) + "\n", FACTS_STYLE)
    out.append(" ROOT CAUSE ", ROLE_STYLES[Role.ROOT_CAUSE])
    out.append(f" {f.title}", Style(bold=True))
    out.append(f"  {v.confidence} confidence\n", Style(color="#ffcb6b"))
    line2 = [f.signature]
    where = v.blame.culprits if v.blame is not None and v.blame.culprits else _where(f)
    if where:
        line2.append(where)
    if f.first_seen is not None:
        line2.append(fmt_stamp(f.first_seen, is_local(f.evidence)))
    line2_text = " · ".join(line2)
    out.append((_clip(line2_text, width) if width else line2_text) + "\n", MUTED)
    fact = facts_sentence(f.facts)
    if fact:
        out.append((_clip(fact, width) if width else fact) + "\n", FACTS_STYLE)
    rest = _summary_rest(f, reflow(v.summary)) if v.summary else ""
    if rest:
        out.append(_clip(rest, width or SUMMARY_CHARS) + "\n")
    if f.remedy:
        more = len(f.remedy) - 1
        hint = f"  (+{more} more step{'s' if more > 1 else ''}: enter on the finding)" if more else ""
        if width:
            hint = f" (+{more}: enter)" if more else ""
        out.append("What to do: ", Style(bold=True, color="#c3e88d"))
        out.append(_clip(reflow(f.remedy[0]), width - 12 - len(hint) if width else REMEDY_CHARS))
        if hint:
            out.append(hint, MUTED)
    out.rstrip()
    return out


def finding_option(position: int, f: Finding, narrow: bool = False) -> Text:
    """One line of the findings list: mark, role, title, score and first time; ``narrow``: a short
    role label and the whole title, wrapped, instead of a line cut with an ellipsis."""
    text = Text(no_wrap=not narrow, overflow="fold" if narrow else "ellipsis")
    text.append(f"{finding_mark(position)} ", Style(color="#ff5370", bold=True))
    text.append_text(finding_badge(f, short=narrow))
    text.append(f" {f.title}", Style(bold=f.role == Role.ROOT_CAUSE))
    text.append(f"  {f.score:.2f}", MUTED)
    if f.first_seen is not None and not narrow:
        text.append(f"  {fmt_clock(f.first_seen)[:8]}", MUTED)
    if f.note and f.note != "root cause" and not narrow:  # the badge says that already; Evidence has it too
        text.append(f"  {f.note}", Style(color="#a6accd", italic=True))
    return text


def clock_text(timeline: Timeline) -> str:
    """The hosts' clock offsets against the reference host, with their uncertainty and basis."""
    ref = timeline.clock_reference
    hosts = [h for h in sorted(timeline.clock_offsets) if h != ref or h in timeline.clock_given]
    parts = [f"{h} " + describe_offset(timeline.clock_offsets[h], timeline.clock_evidence.get(h, ()),
                                       h in timeline.clock_given, h in timeline.offsets_applied) for h in hosts[:4]]
    if len(hosts) > 4:
        parts.append(f"+{len(hosts) - 4} more")
    return (f"against {ref}: " if ref and parts and ref not in timeline.clock_given else "") + "; ".join(parts)


def _pcie_text(analysis: Analysis) -> Text | None:
    """Chipset/switch-attached GPUs and the paths between GPUs (forensics/timeline/topology.py), when known."""
    topo = analysis.topology
    attached = [g for g in topo.gpus if g.attachment in ("chipset", "switch")]
    if not attached and not topo.paths and not topo.shared:
        return None
    text = Text()
    for g in attached:
        if text:
            text.append(" · ")
        where = "behind the chipset" if g.attachment == "chipset" else "behind a PCIe switch"
        text.append(f"{g.label} {where} ({g.why})", Style(color="#ff5370") if g.attachment == "chipset" else Style())
    for shared in topo.shared[:4]:  # GPUs below one switch (the lspci tree)
        if text:
            text.append(" · ")
        text.append(shared.text())
    for path in topo.paths[:6]:
        if text:
            text.append(" · ")
        text.append(path.text())
    return text


def facts_text(model: Model) -> RenderableType:
    """The run's facts as label/value rows; a long value wraps under its own column."""
    facts, analysis = model.facts, model.analysis
    rows: list[tuple[str, str | Text]] = []
    if facts.command:
        rows.append(("Run", facts.command))
    ended = []
    if facts.status:
        ended.append(facts.status)
    if facts.duration_ns is not None:
        ended.append(fmt_duration(facts.duration_ns))
    span = facts.run_span
    if span is not None:
        same_day = fmt_stamp(span[0])[:10] == fmt_stamp(span[1])[:10]
        end = fmt_clock(span[1])[:8] + " UTC" if same_day else fmt_stamp(span[1])
        ended.append(f"{fmt_stamp(span[0]).removesuffix(' UTC')} → {end}")
    if ended:
        rows.append(("Ended" if facts.status else "Span", " · ".join(ended)))
    if facts.hosts:
        rows.append(("Hosts", ", ".join(facts.hosts[:6]) + (f" (+{len(facts.hosts) - 6})" if len(facts.hosts) > 6
                                                             else "")))
    clocks = clock_text(analysis.timeline)
    if clocks:
        rows.append(("Clocks", clocks))
    if facts.gpus:
        groups = Counter((g.model or "GPU", g.link) for g in facts.gpus)
        gpu_text = Text()
        for i, ((gpu_model, link), count) in enumerate(groups.most_common()):
            if i:
                gpu_text.append(" · ")
            gpu_text.append(f"{count} × {gpu_model}" + (f", PCIe {link}" if link else ""),
                            Style(color="#ff5370") if "(max" in link else Style())
        rows.append(("GPUs", gpu_text))
    pcie = _pcie_text(analysis)
    if pcie is not None:
        rows.append(("PCIe", pcie))
    if facts.ranks:
        rows.append(("Ranks", number_ranges(facts.ranks)))
    if facts.versions:
        rows.append(("Versions", " · ".join(f"{k} {v}" for k, v in facts.versions.items())))
    kinds = Counter(s.kind for s in analysis.sources)
    rows.append(("Inputs", f"{len(analysis.sources)} file(s): "
                 + ", ".join(f"{n} {k}" for k, n in kinds.most_common(6))
                 + f" · {len(analysis.timeline.events):,} events · {len(analysis.timeline.metrics):,} samples"))
    if analysis.warnings:
        rows.append(("Warnings", Text(f"{len(analysis.warnings)}: {analysis.warnings[0]}"
                                      + (" …" if len(analysis.warnings) > 1 else ""), Style(color="#ffcb6b"))))
    table = Table.grid(padding=(0, 1))
    table.add_column(style=MUTED, no_wrap=True)
    table.add_column(ratio=1, overflow="fold")
    for label, value in rows:  # a str cell would be parsed as Rich markup (``paths=[/data/a]`` raised)
        table.add_row(Text(label), value if isinstance(value, Text) else Text(terminal(value)))
    return table


class OverviewView(VerticalScroll):
    """Everything on one page; a person reads the top and knows what happened."""

    def __init__(self, model: Model) -> None:
        super().__init__(id="overview-view")
        self.model = model

    def compose(self) -> ComposeResult:
        yield Static(verdict_text(self.model), id="verdict",
                     classes="failed" if self.model.analysis.verdict.root_cause else "healthy")
        with Vertical(id="overview-top"):
            with Vertical(id="findings-box"):
                yield OptionList(*[Option(finding_option(i, f), id=f"finding-{i}")
                                   for i, f in enumerate(self.model.findings)], id="findings")
                if not self.model.findings:
                    yield Static(Text("No signature matched these inputs.", MUTED), id="no-findings")
            yield Static(facts_text(self.model), id="facts")
        yield GpuSparkTable(self.model, id="sparks")

    def on_mount(self) -> None:
        self.query_one("#findings-box").border_title = f"findings ({len(self.model.findings)})"
        self.query_one("#facts").border_title = "run"
        self.query_one("#sparks").border_title = "GPUs over the run"
        if not self.model.findings:
            self.query_one("#findings", OptionList).display = False
        self._fit(self.app.size.width, self.app.size.height)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(self.app.size.width, self.app.size.height)

    def _fit(self, width: int, height: int) -> None:
        """On a small terminal (80x24) the verdict keeps one line per part and the findings list wraps
        its titles with short role labels, so the findings and the run panel stay on the first screen."""
        compact = width < NARROW or height < SHORT
        layout = (compact, width < NARROW, width if compact else 0)
        if getattr(self, "_layout", None) == layout:
            return
        self._layout = layout
        self.query_one("#verdict", Static).update(verdict_text(self.model, max(30, width - 8) if compact else None))
        findings = self.query_one("#findings", OptionList)
        highlighted = findings.highlighted
        findings.clear_options()
        findings.add_options([Option(finding_option(i, f, narrow=width < NARROW), id=f"finding-{i}")
                              for i, f in enumerate(self.model.findings)])
        if highlighted is not None and self.model.findings:
            findings.highlighted = min(highlighted, len(self.model.findings) - 1)

    @on(OptionList.OptionSelected, "#findings")
    def _chosen(self, message: OptionList.OptionSelected) -> None:
        message.stop()
        self.post_message(FindingChosen(message.option_index))
