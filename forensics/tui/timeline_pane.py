"""The timeline view: filter bar, status line and the scrolling event list."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Input, Static
from textual.worker import get_current_worker

from forensics.events import Event
from forensics.timeline.query import EventIndex, QueryError, parse_query, parse_time
from forensics.tui.dialogs import JumpScreen
from forensics.tui.model import Model, fmt_stamp, fmt_when
from forensics.tui.timeline_view import TimelineView
from forensics.units import fmt_dt

__all__ = ["TimelinePane"]

FILTER_DELAY_S = 0.3
PLACEHOLDER = "/ filter: host:node-a gpu:6 rank:0-3 source:kmsg kind:xid sev:error words /regex/"


class TimelinePane(Vertical):
    """Every notable event from every source and host, merged; filter, jump, open."""

    BINDINGS = [
        Binding("slash", "focus_filter", "filter"),
        Binding("g", "jump", "jump to time"),
        Binding("n", "next_error(0)", "next error"),
        Binding("N", "next_error(1)", "prev error", show=False),
        Binding("escape", "focus_list", "to the list", show=False),
    ]

    def __init__(self, model: Model, index: Callable[[], EventIndex]) -> None:
        super().__init__(id="timeline-pane")
        self.model = model
        self.get_index = index
        self.query_text = ""
        self._timer: Timer | None = None
        self._generation = 0
        self.filter_error = ""

    def compose(self) -> ComposeResult:
        yield Input(placeholder=PLACEHOLDER, id="filter")
        yield Static(id="timeline-status")
        yield TimelineView(id="events", empty_text="no notable events in these inputs")

    def on_mount(self) -> None:
        events = self.model.analysis.timeline.events
        view = self.query_one(TimelineView)
        view.set_rows(events, np.arange(len(events), dtype=np.int64), multi_host=len(self.model.facts.hosts) > 1)
        if self.app.animation_level == "none":
            self.query_one("#filter", Input).cursor_blink = False
        self._status()

    @property
    def view(self) -> TimelineView:
        return self.query_one(TimelineView)

    # -- status -----------------------------------------------------------------------------
    def _status(self, note: str = "") -> None:
        total = len(self.model.analysis.timeline.events)
        shown = self.view.row_count
        text = Text(no_wrap=True, overflow="ellipsis")
        if self.filter_error:
            text.append(self.filter_error, Style(color="#ff5370"))
        elif self.query_text and not shown:
            text.append(" no match ", Style(color="#1b1b1b", bgcolor="#ffcb6b", bold=True))
            text.append(f"  none of {total:,} events matches {self.query_text!r}", Style(bold=True))
        elif self.query_text:
            text.append(f"{shown:,} of {total:,} events match", Style(bold=True))
        else:
            text.append(f"{total:,} events", Style(bold=True))
        if note:
            text.append(f"  {note}", Style(color="#ffcb6b"))
        e = self.view.current_event
        if e is not None and shown:
            where = self.model.where(e.origin)
            dt = self.model.analysis.verdict.dt_s(e)
            since = f"  Δt {fmt_dt(dt)} from root cause" if dt is not None else ""
            text.append(f"  ·  row {self.view.cursor + 1:,}  {fmt_when(e).strip()}{since}  {where}",
                        Style(color="#8a8fa8"))
        self.query_one("#timeline-status", Static).update(text)

    @on(TimelineView.Moved)
    def _moved(self, message: TimelineView.Moved) -> None:
        self._status()

    # -- filtering --------------------------------------------------------------------------
    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    @on(Input.Changed, "#filter")
    def _changed(self, message: Input.Changed) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(FILTER_DELAY_S, lambda: self.apply_filter(message.value))

    @on(Input.Submitted, "#filter")
    def _submitted(self, message: Input.Submitted) -> None:
        if self._timer is not None:
            self._timer.stop()
        self.apply_filter(message.value)
        self.view.focus()

    def action_focus_list(self) -> None:
        self.view.focus()

    def apply_filter(self, text: str) -> None:
        """Filter the timeline by ``text`` (the filter-bar language), off the UI thread."""
        text = text.strip()
        if text == self.query_text and not self.filter_error:
            return
        self._generation += 1
        self._status("filtering…")
        self._filter(text, self._generation)

    @work(thread=True, exclusive=True, group="timeline-filter")
    def _filter(self, text: str, generation: int) -> None:
        worker = get_current_worker()
        try:
            rows = self.get_index().select(parse_query(text))
        except QueryError as exc:
            if not worker.is_cancelled:
                self.app.call_from_thread(self._filtered, text, generation, None, str(exc))
            return
        if not worker.is_cancelled:
            self.app.call_from_thread(self._filtered, text, generation, rows, "")

    def _filtered(self, text: str, generation: int, rows: np.ndarray | None, error: str) -> None:
        if generation != self._generation:
            return  # a newer filter is on its way
        self.filter_error = error
        if rows is not None:
            self.query_text = text
            self.view.empty_text = (f"no event matches {text!r}; / edits the filter, an empty one shows all"
                                    if text else "no notable events in these inputs")
            self.view.set_rows(self.model.analysis.timeline.events, rows)
        self._status()

    # -- navigation -------------------------------------------------------------------------
    def action_next_error(self, backwards: int = 0) -> None:
        view = self.view
        row = self.get_index().next_error(view.view, view.cursor, backwards=bool(backwards))
        if row is None:
            self._status("no earlier error" if backwards else "no later error")
            self.app.bell()
            return
        view.move_to(row, center=True)
        self._status()

    def action_jump(self) -> None:
        current = self.view.current_event
        day_of = current.ts if current is not None else None

        def parse(text: str) -> int:
            return parse_time(text, self.model.span, day_of)

        def done(ts: int | None) -> None:
            if ts is not None:
                self.jump_to_time(ts)

        self.app.push_screen(JumpScreen(parse, fmt_stamp(day_of)[:10] if day_of is not None else ""), done)

    def jump_to_time(self, ts: int) -> None:
        view = self.view
        view.move_to(self.get_index().row_at_time(view.view, ts), center=True)
        view.focus()
        self._status()

    def show_event(self, event: Event) -> bool:
        """Put the cursor on ``event``; clears a filter that hides it. False when it is not in the timeline."""
        index = self.get_index()
        position = _position_of(index, event)
        if position is None:
            return False
        view = self.view
        rows = view.view
        found = int(np.searchsorted(rows, position))
        if found >= len(rows) or rows[found] != position:
            self.query_one("#filter", Input).value = ""
            self.query_text = ""
            self.filter_error = ""
            if self._timer is not None:
                self._timer.stop()
            events = self.model.analysis.timeline.events
            view.set_rows(events, np.arange(len(events), dtype=np.int64))
            found = position
        view.move_to(int(found), center=True)
        self._status()
        return True


def _position_of(index: EventIndex, event: Event) -> int | None:
    """Where ``event`` (by identity) sits in the timeline: a binary search by time, then a short scan."""
    events = index.events
    if index.sorted_by_time and event.ts is not None:
        i = int(np.searchsorted(index.ts, event.ts, side="left"))
        while i < len(events) and index.ts[i] == event.ts:
            if events[i] is event:
                return i
            i += 1
    for i, e in enumerate(events):
        if e is event:
            return i
    return None
