"""The merged timeline as a Line-API ``ScrollView``: a million rows, only the visible ones drawn.

Rows are positions in a *view* (a numpy array of event indices: all events, or a
filter's result). ``render_line`` draws the row under each screen line on demand and
keeps the strips in an LRU cache keyed by (event, cursor?, width), so scrolling a
million rows costs what the screen shows, not what the timeline holds.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from forensics.events import Event, Severity
from forensics.lazy_re import lazy_compile
from forensics.tui.model import fmt_when

__all__ = ["SEVERITY_TAGS", "TimelineView", "severity_style", "short_gpu", "source_style"]

_SOURCE_COLOURS = {"kmsg": "#c792ea", "journal": "#c792ea", "nvml": "#89ddff", "derived": "#ffcb6b",
                   "stdout": "#82aaff", "stderr": "#f78c6c", "recorder": "#a6accd", "winevent": "#c3e88d"}
_PALETTE = ("#82aaff", "#c3e88d", "#89ddff", "#c792ea", "#f78c6c", "#b2ccd6", "#ffcb6b", "#7fdbca", "#f07178")

SEVERITY_TAGS = {Severity.CRITICAL: "CRIT", Severity.ERROR: "ERR ", Severity.WARNING: "WARN",
                 Severity.INFO: "    ", Severity.DEBUG: "dbg "}
_TAG_STYLES = {Severity.CRITICAL: Style(color="#ffffff", bgcolor="#b00020", bold=True),
               Severity.ERROR: Style(color="#ff5370", bold=True), Severity.WARNING: Style(color="#ffcb6b"),
               Severity.INFO: Style(), Severity.DEBUG: Style(dim=True)}
_MESSAGE_STYLES = {Severity.CRITICAL: Style(color="#ff5370", bold=True), Severity.ERROR: Style(color="#ff5370"),
                   Severity.WARNING: Style(color="#ffe0a0"), Severity.INFO: Style(), Severity.DEBUG: Style(dim=True)}


def source_style(source: str) -> Style:
    """A stable colour per source (fixed for the usual ones, hashed for the rest)."""
    colour = _SOURCE_COLOURS.get(source) or _PALETTE[zlib.crc32(source.encode()) % len(_PALETTE)]
    return Style(color=colour)


def severity_style(severity: int) -> Style:
    return _MESSAGE_STYLES.get(Severity(severity) if severity in Severity._value2member_map_ else Severity.INFO,
                               Style())


def _short_source(source: str) -> str:
    return source.removeprefix("file:")


_BUS = lazy_compile(r"(?:pci:)?(?:[0-9a-f]{4,8}:)?([0-9a-f]{2}:[0-9a-f]{2})(?:\.[0-7])?", re.IGNORECASE)


def short_gpu(gpu: str) -> str:
    """A GPU id that fits a column: a PCI bus id as ``bus:device`` (``ba:00``), an index as is."""
    m = _BUS.fullmatch(gpu.strip())
    return m.group(1).lower() if m else gpu


def _fit(text: str, width: int) -> str:
    """``text`` cut or padded to exactly ``width`` cells (an ellipsis marks a cut)."""
    if width <= 0:
        return ""
    if len(text) > width:
        return text[: width - 1] + "…"
    return text.ljust(width)


@dataclass(frozen=True)
class _Columns:
    """Which optional columns fit at the current width."""

    host: int
    source: int
    gpu: int
    rank: int
    kind: int


class TimelineView(ScrollView, can_focus=True):
    """Scrollable, cursor-driven list of timeline events."""

    DEFAULT_CSS = """
    TimelineView {
        background: $surface;
        overflow-x: hidden;
        overflow-y: scroll;
        scrollbar-size-vertical: 1;
    }
    TimelineView > .timeline--cursor { background: $accent 40%; }
    TimelineView:focus > .timeline--cursor { background: $accent 70%; }
    TimelineView > .timeline--time { color: $text-muted; }
    TimelineView > .timeline--empty { color: $text-muted; text-style: italic; }
    """
    COMPONENT_CLASSES = {"timeline--cursor", "timeline--time", "timeline--empty"}
    BINDINGS = [
        Binding("up,k", "cursor(-1)", "up", show=False),
        Binding("down,j", "cursor(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown,space", "page(1)", "page down", show=False),
        Binding("home", "edge(0)", "first", show=False),
        Binding("end", "edge(1)", "last", show=False),
        Binding("enter", "open", "raw lines"),
    ]

    cursor: reactive[int] = reactive(0, always_update=True, init=False)

    @dataclass
    class Opened(Message):
        """The user asked to see the raw lines of an event."""

        event: Event

    @dataclass
    class Moved(Message):
        """The cursor moved to a row."""

        row: int

    def __init__(self, *, empty_text: str = "no events", id: str | None = None) -> None:
        super().__init__(id=id)
        self.events: Sequence[Event] = ()
        self.view: np.ndarray = np.zeros(0, dtype=np.int64)
        self.empty_text = empty_text
        self._cache: LRUCache[tuple[int, bool, int], Strip] = LRUCache(2048)
        self._multi_host = False

    # -- data -------------------------------------------------------------------------------
    def set_rows(self, events: Sequence[Event], view: np.ndarray, *, keep_event: bool = True,
                 multi_host: bool | None = None) -> None:
        """Show ``view`` (positions into ``events``). The cursor stays on the same event when ``view`` still
        holds it; otherwise it goes to the first row (a filter's first match)."""
        current = self.current_index if keep_event else None
        self.events = events
        self.view = view
        if multi_host is not None:
            self._multi_host = multi_host
        self._cache.clear()
        self.virtual_size = Size(self.size.width, len(view))
        row = 0
        if current is not None and len(view):
            found = int(np.searchsorted(view, current))
            if found < len(view) and int(view[found]) == current:
                row = found
        if row == 0:
            self.scroll_to(y=0, animate=False, immediate=True)
        self.move_to(row, center=True)
        self.refresh()

    @property
    def row_count(self) -> int:
        return len(self.view)

    @property
    def current_index(self) -> int | None:
        """The timeline position of the event under the cursor."""
        return int(self.view[self.cursor]) if 0 <= self.cursor < len(self.view) else None

    @property
    def current_event(self) -> Event | None:
        idx = self.current_index
        return None if idx is None else self.events[idx]

    # -- cursor -----------------------------------------------------------------------------
    def move_to(self, row: int, *, center: bool = False) -> None:
        """Put the cursor on ``row`` and scroll just enough to show it (or centre it)."""
        row = max(0, min(row, len(self.view) - 1))
        old = self.cursor
        self.cursor = row
        height = max(self.scrollable_content_region.height, 1)
        top = int(self.scroll_offset.y)
        if center and not top <= row < top + height:
            self.scroll_to(y=max(row - height // 2, 0), animate=False, immediate=True)
        elif row < top:
            self.scroll_to(y=row, animate=False, immediate=True)
        elif row >= top + height:
            self.scroll_to(y=row - height + 1, animate=False, immediate=True)
        self.refresh_line(old)
        self.refresh_line(row)
        if old != row:
            self.post_message(self.Moved(row))

    def action_cursor(self, delta: int) -> None:
        self.move_to(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        height = max(self.scrollable_content_region.height - 1, 1)
        target = self.cursor + direction * height
        self.scroll_to(y=self.scroll_offset.y + direction * height, animate=False, immediate=True)
        self.move_to(target)

    def action_edge(self, end: int) -> None:
        self.move_to(len(self.view) - 1 if end else 0)

    def action_open(self) -> None:
        event = self.current_event
        if event is not None:
            self.post_message(self.Opened(event))

    def on_click(self, event: events.Click) -> None:
        row = int(self.scroll_offset.y) + event.y
        if 0 <= row < len(self.view):
            self.move_to(row)
            if event.chain >= 2:
                self.action_open()

    # -- rendering --------------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(event.size.width, len(self.view))
        self._cache.clear()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def _on_focus(self, event: events.Focus) -> None:
        super()._on_focus(event)
        self._cache.clear()
        self.refresh()

    def _on_blur(self, event: events.Blur) -> None:
        super()._on_blur(event)
        self._cache.clear()
        self.refresh()

    def _columns(self, width: int) -> _Columns:
        wide = width >= 110
        return _Columns(host=(14 if wide else 10) if self._multi_host and width >= 90 else 0,
                        source=15 if wide else 12 if width >= 96 else 9, gpu=10 if wide else 0, rank=5 if wide else 0,
                        kind=10 if wide else 0)

    def render_line(self, y: int) -> Strip:
        row = int(self.scroll_offset.y) + y
        width = self.scrollable_content_region.width
        if not len(self.view):
            if y == 0:
                return Strip([Segment(_fit(f" {self.empty_text}", width),
                                      self.get_component_rich_style("timeline--empty"))], width)
            return Strip.blank(width, self.rich_style)
        if row >= len(self.view):
            return Strip.blank(width, self.rich_style)
        idx = int(self.view[row])
        key = (idx, row == self.cursor, width)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render_row(self.events[idx], row == self.cursor, width)
            self._cache[key] = strip
        return strip

    def _render_row(self, e: Event, selected: bool, width: int) -> Strip:
        cols = self._columns(width)
        base = self.rich_style
        if selected:
            base = base + self.get_component_rich_style("timeline--cursor")
        time_style = self.get_component_rich_style("timeline--time")
        sev = Severity(e.severity) if e.severity in Severity._value2member_map_ else Severity.INFO
        segments = [Segment(fmt_when(e) + " ", base + time_style)]
        if cols.host:
            segments.append(Segment(_fit(e.host or "", cols.host - 1) + " ", base + time_style))
        segments.append(Segment(_fit(_short_source(e.source), cols.source - 1) + " ", base + source_style(e.source)))
        segments.append(Segment(SEVERITY_TAGS.get(sev, "    "), base + _TAG_STYLES.get(sev, Style())))
        segments.append(Segment(" ", base))
        if cols.gpu:
            gpu = f"gpu {short_gpu(e.gpu)}" if e.gpu else ""
            segments.append(Segment(_fit(gpu, cols.gpu - 1) + " ", base + time_style))
        if cols.rank:
            segments.append(Segment(_fit(f"r{e.rank}" if e.rank is not None else "", cols.rank - 1) + " ",
                                    base + time_style))
        if cols.kind:
            segments.append(Segment(_fit(e.kind, cols.kind - 1) + " ", base + source_style(e.source)))
        used = sum(len(s.text) for s in segments)
        message = e.message.replace("\t", " ")
        # On the cursor row the message takes the cursor's colours, so red on orange never happens.
        message_style = Style(bold=sev >= Severity.ERROR) if selected else _MESSAGE_STYLES.get(sev, Style())
        segments.append(Segment(_fit(message, width - used), base + message_style))
        return Strip(segments).crop_extend(0, width, base)

    def region_of_cursor(self) -> Region:
        return Region(0, self.cursor, self.size.width, 1)
