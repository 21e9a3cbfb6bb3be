"""Modal screens: the key list, an event's raw lines, and jump-to-time."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from rich.console import RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from forensics.events import Event, TsSource
from forensics.ingest.textdoc import Line, TextDocument
from forensics.lazy_re import lazy_compile
from forensics.timeline.query import QueryError
from forensics.tui.model import fmt_stamp

__all__ = ["HelpScreen", "JumpScreen", "RawContextScreen", "context_lines", "excerpt", "keys_rows", "keys_table",
           "render_context"]

_MUTED = Style(color="#8a8fa8")

KEYS = """\
[b]Everywhere[/b]
  1 2 3 4      Overview · Evidence · Timeline · Metrics (or click the tabs)
  ?            this list          q   quit          escape   close a dialog
  r            write the report of this analysis (Markdown, path shown)
  tab          next pane          shift+tab   previous pane

[b]Overview[/b]
  ↑ ↓ enter    pick a finding and open its evidence

[b]Evidence[/b]
  ↑ ↓          browse findings; the detail shows each one's proof
  t            show the finding's first event in the timeline
  tab          move to the detail to scroll it

[b]Timeline[/b]
  ↑ ↓ pgup pgdn home end   move (j / k too); the mouse wheel scrolls, a click selects
  enter        the raw lines around the event (double-click too)
  n / N        next / previous error
  g            jump to a time: 12:05:30, 2024-05-14T12:05, +5m
  /            filter: host:node-a gpu:6 rank:0-3 source:kmsg kind:xid sev:error
               words (smart-case), "a phrase", /regex/ — enter applies, escape returns

[b]Metrics[/b]
  ← →          pick the metric (memory, utilization, power, temperature …)
  shaded columns are detector spans (stall, memory margin, throttle);
  the numbers under each chart are the findings, at their first event
"""


def keys_rows(text: str = KEYS) -> list[tuple[str, str, str]]:
    """:data:`KEYS` as (view, key, what) rows: a line's ``key   what`` pairs (two or more spaces apart)
    become rows of their own, a deeper-indented line continues the one above, a line with no key is a
    note of its view."""
    rows: list[tuple[str, str, str]] = []
    view = ""
    for line in text.splitlines():
        if not line.strip():
            continue
        header = re.fullmatch(r"\[b\](.*)\[/b\]", line.strip())
        if header:
            view = header.group(1)
            continue
        if line.startswith(" " * 6) and rows:  # continues the description above
            v, k, what = rows[-1]
            rows[-1] = (v, k, f"{what} {line.strip()}")
            continue
        pieces = re.split(r"\s{2,}", line.strip())
        if len(pieces) == 1:
            rows.append((view, "", pieces[0]))
            continue
        for key, what in zip(pieces[::2], pieces[1::2], strict=False):
            rows.append((view, key, what))
    shown = ""
    out = []
    for v, k, what in rows:  # the view's name on its first row only
        out.append((v if v != shown else "", k, what))
        shown = v
    return out


def keys_table(text: str = KEYS) -> Table:
    """The key list as a grid: descriptions wrap in their own column (any width, 80 columns too)."""
    table = Table.grid(padding=(0, 1))
    table.add_column(style=Style(bold=True, color="#82aaff"), no_wrap=True)
    table.add_column(style=Style(bold=True), max_width=14)
    table.add_column(ratio=1)
    for view, key, what in keys_rows(text):
        table.add_row(view, key, what)
    return table


class HelpScreen(ModalScreen[None]):
    """Every key, by view; the list scrolls (arrows, page keys, wheel) when the terminal is short."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box", classes="dialog"):
            yield Static(keys_table(), id="help-text")

    def on_mount(self) -> None:
        box = self.query_one("#help-box", VerticalScroll)
        box.border_title = "keys"
        box.focus()
        self.call_after_refresh(self._hint)

    def on_resize(self) -> None:
        self.call_after_refresh(self._hint)

    def _hint(self) -> None:
        box = self.query_one("#help-box", VerticalScroll)
        box.border_subtitle = "↑↓ scroll · esc closes" if box.max_scroll_y > 0 else "esc closes"


def _span(event: Event) -> tuple[int, int]:
    return event.origin.line, event.origin.line + max(event.origin.nlines, 1) - 1


def context_lines(doc: TextDocument | None, events: Event | Sequence[Event], around: int) -> list[Line]:
    """The raw lines of ``events`` (in one file) with ``around`` lines either side; empty when unreadable."""
    group = [events] if isinstance(events, Event) else list(events)
    if doc is None or not group or min(e.origin.line for e in group) < 1:
        return []
    first = min(_span(e)[0] for e in group)
    last = max(_span(e)[1] for e in group)
    try:
        return doc.context(first, before=around, after=last - first + around)
    except (IndexError, ValueError):
        return []


#: A raw line that states an exception (``torch.OutOfMemoryError: CUDA out of memory …``); kept in an excerpt.
_EXCEPTION_LINE = lazy_compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Failure|Interrupt)\b")


def excerpt(lines: Sequence[Line], events: Event | Sequence[Event], head: int = 6, tail: int = 3) -> list[Line]:
    """``lines`` with the middle of each long record left out: of an event's own lines the first ``head``,
    the last ``tail`` that are not blank and any line that states an exception (a traceback's error)
    stay, and so do the lines around the events."""
    group = [events] if isinstance(events, Event) else list(events)
    drop: set[int] = set()
    text = {line.no: line.text for line in lines}
    for e in group:
        first, last = _span(e)
        while last > first and not text.get(last, "x").strip():
            last -= 1
        if last - first + 1 > head + tail + 1:
            drop.update(n for n in range(first + head, last - tail + 1)
                        if not _EXCEPTION_LINE.match(text.get(n, "")))
    return [line for line in lines if line.no not in drop]


def render_context(lines: Sequence[Line], events: Event | Sequence[Event]) -> Table:
    """Numbered raw lines; the events' own lines marked (▶ on each event's first line) and bright.
    A long line wraps under its own text; a jump in the line numbers (see :func:`excerpt`) is shown
    as ``⋮ N lines``."""
    group = [events] if isinstance(events, Event) else list(events)
    heads = {e.origin.line for e in group}
    mine = {n for e in group for n in range(_span(e)[0], _span(e)[1] + 1)}
    gutter = len(str(lines[-1].no)) if lines else 1
    table = Table.grid()
    table.add_column(no_wrap=True)
    table.add_column(ratio=1, overflow="fold")
    previous: int | None = None
    for line in lines:
        if previous is not None and line.no > previous + 1:
            skipped = line.no - previous - 1
            table.add_row(Text(f"  {'⋮':>{gutter}}   ", _MUTED),
                          Text(f"{skipped:,} line{'s' if skipped > 1 else ''} not shown", _MUTED))
        previous = line.no
        left = Text()
        left.append("▶ " if line.no in heads else "  ", Style(color="#ff5370", bold=True))
        left.append(f"{line.no:>{gutter}} │ ", _MUTED)
        table.add_row(left, Text(line.text.expandtabs(4),
                                 Style(bold=True) if line.no in mine else Style(color="#a6accd")))
    return table


class RawContextScreen(ModalScreen[None]):
    """An event's facts and the raw lines around it, read lazily from its file."""

    BINDINGS = [Binding("escape,enter,q", "dismiss", "close")]

    def __init__(self, event: Event, document: TextDocument | None, around: int = 12) -> None:
        super().__init__()
        self.event = event
        self.document = document
        self.around = around

    def compose(self) -> ComposeResult:
        e = self.event
        facts = Text()
        facts.append(f"{fmt_stamp(e.ts, e.ts_source == TsSource.LOCAL)}", Style(bold=True))
        facts.append(f"  (time: {e.ts_source})\n", Style(color="#8a8fa8"))
        parts = [f"source {e.source}", f"kind {e.kind}", f"severity {e.severity.name.lower()}"]
        parts += [f"{name} {value}" for name, value in
                  (("host", e.host), ("gpu", e.gpu), ("rank", e.rank), ("pid", e.pid)) if value is not None]
        facts.append(" · ".join(parts) + "\n")
        if e.attrs:
            facts.append(" ".join(f"{k}={v}" for k, v in e.attrs.items()) + "\n", Style(color="#89ddff"))
        lines = context_lines(self.document, e, self.around)
        body: RenderableType = render_context(lines, e) if lines else Text(
            f"The raw file is not available here; the event's own text:\n\n{e.text}", style="#a6accd")
        with Vertical(id="raw-box", classes="dialog"):
            yield Static(facts, id="raw-facts")
            with VerticalScroll(id="raw-scroll"):
                yield Static(body, id="raw-lines")

    def on_mount(self) -> None:
        box = self.query_one("#raw-box")
        box.border_title = str(self.event.origin)
        box.border_subtitle = "escape closes"
        self.query_one("#raw-scroll").focus()


class JumpScreen(ModalScreen[int | None]):
    """Ask for a time; dismisses with UTC ns, or None when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, parse: Callable[[str], int], day: str = "") -> None:
        super().__init__()
        self.parse = parse
        self.day = day

    def compose(self) -> ComposeResult:
        with Vertical(id="jump-box", classes="dialog"):
            yield Input(placeholder="12:05:30 · 2024-05-14T12:05:00 · +5m", id="jump-input")
            yield Static("", id="jump-error")

    def on_mount(self) -> None:
        box = self.query_one("#jump-box")
        box.border_title = "jump to time (UTC)"
        if self.day:
            box.border_subtitle = f"a clock time means on {self.day}"

    @on(Input.Submitted, "#jump-input")
    def _submitted(self, message: Input.Submitted) -> None:
        try:
            self.dismiss(self.parse(message.value))
        except QueryError as exc:
            self.query_one("#jump-error", Static).update(Text(str(exc), style="#ff5370"))

    def action_cancel(self) -> None:
        self.dismiss(None)
