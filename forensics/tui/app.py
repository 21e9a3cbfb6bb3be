"""The ``forensics open`` application: load in a worker, then four views over one model."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Footer, Header, LoadingIndicator, Static, TabbedContent, TabPane

from forensics.errors import ForensicsError
from forensics.timeline.query import EventIndex
from forensics.tui.dialogs import HelpScreen, RawContextScreen
from forensics.tui.evidence import EvidenceView, ShowInTimeline
from forensics.tui.follow import Follower
from forensics.tui.metrics_pane import MetricsPane
from forensics.tui.model import Model, build_model
from forensics.tui.overview import FindingChosen, OverviewView
from forensics.tui.sizes import NARROW, SHORT, WIDE
from forensics.tui.timeline_pane import TimelinePane
from forensics.tui.timeline_view import TimelineView

if TYPE_CHECKING:
    from forensics.analysis import Analysis, Options

__all__ = ["ForensicsApp"]

TABS = ("overview", "evidence", "timeline", "metrics")
EXIT_OK, EXIT_LOAD_FAILED = 0, 2


@dataclass
class Progressed(Message):
    """The loader moved on (posted from the worker thread)."""

    text: str


@dataclass
class Loaded(Message):
    """The analysis and its view model are ready (posted from the worker thread)."""

    model: Model


@dataclass
class Reloaded(Message):
    """``--follow``: the inputs changed and were analyzed again (posted from the worker thread)."""

    model: Model


class ForensicsApp(App[int]):
    """Post-mortem of a GPU training run: verdict, evidence, timeline, metrics."""

    CSS_PATH = str(Path(__file__).with_name("forensics.tcss"))  # absolute: subclasses elsewhere find it too
    TITLE = "gpu-forensics"
    BINDINGS = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "keys"),
        Binding("1", "show_tab('overview')", "overview"),
        Binding("2", "show_tab('evidence')", "evidence"),
        Binding("3", "show_tab('timeline')", "timeline"),
        Binding("4", "show_tab('metrics')", "metrics"),
        Binding("r", "write_report", "report", show=False),
    ]

    def __init__(self, paths: Sequence[str] = (), options: Options | None = None, *,
                 analysis: Analysis | None = None, loader: Callable[[], Analysis] | None = None,
                 title: str | None = None, follow: float | None = None) -> None:
        super().__init__()
        #: ``--follow``: look at the inputs every so many seconds and show a run still being recorded as
        #: it goes (forensics/tui/follow.py)
        self.follow = follow
        self._follower: Follower | None = None
        self.paths = list(paths)
        self.options = options
        self._given = analysis
        self._loader = loader
        self.model: Model | None = None
        self.load_error = ""
        #: Said on stderr once the UI is gone (``run_app``): why it closed by itself.
        self.exit_line = ""
        self._index: EventIndex | None = None
        self._index_lock = threading.Lock()
        self.sub_title = title or " ".join(self.paths)[:80]
        self.report_dir = Path.cwd()  # where ``r`` writes the report of what is shown
        self.report_path: Path | None = None

    # -- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="loading"):
            yield LoadingIndicator()
            yield Static("reading the inputs…", id="loading-text")
        with TabbedContent(id="tabs", initial="overview"):
            yield TabPane("Overview", id="overview")
            yield TabPane("Evidence", id="evidence")
            yield TabPane("Timeline", id="timeline")
            yield TabPane("Metrics", id="metrics")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#tabs").display = False
        self._size_classes(self.size.width, self.size.height)
        self._started = time.monotonic()
        self._loading_text = "reading the inputs…"
        self._ticker = self.set_interval(1.0, self._tick)
        self.call_after_refresh(self._load)  # paint the loading screen before the work takes the CPU

    def on_resize(self, event: events.Resize) -> None:
        self._size_classes(event.size.width, event.size.height)

    def _size_classes(self, width: int, height: int) -> None:
        """The stylesheet's layouts by terminal size: ``wide`` two columns, ``narrow`` stacked, ``short``."""
        self.set_class(width >= WIDE, "wide")
        self.set_class(width < NARROW, "narrow")
        self.set_class(height < SHORT, "short")

    # -- loading ----------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        try:
            if self._given is not None:
                analysis = self._given
            elif self._loader is not None:
                analysis = self._loader()
            else:
                from forensics.analysis import analyze
                from forensics.ingest.meter import Progress, describe

                def progress(p: Progress) -> None:
                    self.post_message(Progressed(describe(p)))

                analysis = analyze(self.paths, self.options, on_progress=progress)
                from forensics.text_report import nothing_readable, readable

                if not readable(analysis):  # the one line and exit status 2, as analyze (no UI of nothing)
                    self.call_from_thread(self._nothing_readable, nothing_readable(analysis))
                    return
            events, samples = len(analysis.timeline.events), len(analysis.timeline.metrics)
            self.post_message(Progressed(f"arranging {events:,} events and {samples:,} samples…"))
            model = build_model(analysis)
        except ForensicsError as exc:
            self.call_from_thread(self._failed, str(exc))
            return
        except Exception as exc:  # the UI must say what went wrong, never dump a traceback
            self.call_from_thread(self._failed, f"{type(exc).__name__}: {exc}")
            return
        self.post_message(Loaded(model))

    @on(Progressed)
    def _progressed(self, message: Progressed) -> None:
        self._loading_text = message.text
        self._tick()

    def _tick(self) -> None:
        """Show what the loader does and for how long, so a slow input never looks like a hang."""
        if self.model is None and not self.load_error:
            elapsed = time.monotonic() - self._started
            self.query_one("#loading-text", Static).update(Text(f"{self._loading_text}  ({elapsed:.0f} s)"))

    def _nothing_readable(self, line: str) -> None:
        self.exit_line = line
        self.exit(EXIT_LOAD_FAILED)

    def _failed(self, reason: str) -> None:
        self.load_error = reason
        self._ticker.stop()
        self.query_one(LoadingIndicator).remove()
        self.query_one("#loading-text", Static).update(
            Text(f"Could not analyze the inputs: {reason}\n\nq quits.", style="#ff5370"))

    @on(Loaded)
    async def _loaded(self, message: Loaded) -> None:
        if self.follow is not None and self.paths:
            self._follower = Follower(self.paths, message.model.analysis)
            self.sub_title = self._follower.status(message.model.analysis)
        model = self.model = message.model
        self._ticker.stop()
        # A million events are a million long-lived objects: move them out of the cyclic GC's
        # reach, or every full collection would freeze the screen for half a second.
        gc.freeze()
        await self.query_one("#overview", TabPane).mount(OverviewView(model))
        await self.query_one("#evidence", TabPane).mount(EvidenceView(model))
        await self.query_one("#timeline", TabPane).mount(TimelinePane(model, self.event_index))
        await self.query_one("#metrics", TabPane).mount(MetricsPane(model))
        await self.query_one("#loading").remove()  # its animation would keep the CPU busy for nothing
        self.query_one("#tabs").display = True
        if model.findings:
            self.query_one("#findings").focus(scroll_visible=False)  # the verdict stays on top
        self._build_index()
        if self._follower is not None and self.follow is not None:
            self.set_interval(self.follow, self._look)

    # -- following a run still being recorded ----------------------------------------------------------
    def _look(self) -> None:
        if self._follower is not None and self._follower.due():
            self._reload()

    @work(thread=True, exclusive=True, group="follow")
    def _reload(self) -> None:
        from forensics.analysis import analyze

        assert self._follower is not None
        try:
            with self._follower.timing():
                analysis = analyze(self.paths, self.options)
            model = build_model(analysis)
        except Exception as exc:  # a file caught half-written: the next look tries again
            self.call_from_thread(self.notify, f"could not read the run again: {exc}", severity="warning")
            return
        self.post_message(Reloaded(model))

    @on(Reloaded)
    async def _reloaded(self, message: Reloaded) -> None:
        if self._follower is None or not self.is_running or not self.query("#tabs"):
            return  # (closing)
        model = self.model = message.model
        for text, severity in self._follower.news(model.analysis):
            self.notify(text, title="live", severity=severity, timeout=10)
        self.sub_title = self._follower.status(model.analysis)
        tab = self.query_one("#tabs", TabbedContent).active
        with self._index_lock:
            self._index = None
        panes = {p.id: p for p in self.query(TabPane)}
        for pane_id, make in (("overview", lambda: OverviewView(model)), ("evidence", lambda: EvidenceView(model)),
                              ("timeline", lambda: TimelinePane(model, self.event_index)),
                              ("metrics", lambda: MetricsPane(model))):
            pane = panes.get(pane_id)
            if pane is None:
                continue
            await pane.remove_children()
            await pane.mount(make())
        self._focus_main(tab)
        self._build_index()

    @work(thread=True, exclusive=True, group="index")
    def _build_index(self) -> None:
        self.event_index()

    def event_index(self) -> EventIndex:
        """The timeline's filter/jump index, built once (on a worker after loading, or on first need)."""
        with self._index_lock:
            if self._index is None:
                assert self.model is not None
                self._index = EventIndex(self.model.analysis.timeline.events)
            return self._index

    # -- actions ----------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.model is not None

    def action_show_tab(self, tab: str) -> None:
        if not self.ready:
            return
        tabs = self.query_one("#tabs", TabbedContent)
        if tabs.active != tab:
            tabs.active = tab  # focus follows in _tab_activated
        else:
            self._focus_main(tab)

    @on(TabbedContent.TabActivated, "#tabs")
    def _tab_activated(self, message: TabbedContent.TabActivated) -> None:
        if message.pane.id:
            self._focus_main(message.pane.id)

    def _focus_main(self, tab: str) -> None:
        """Give the keyboard to the view's main widget (a findings list, the timeline, the metric picker)."""
        focus = {"overview": "#findings", "evidence": "#evidence-findings", "timeline": "#events",
                 "metrics": "#metric-tabs"}.get(tab)
        widgets = self.query(focus) if focus else None
        if widgets and widgets.first().display:
            widgets.first().focus(scroll_visible=False)
        else:  # nothing to focus there: drop the focus, or the tabs follow it back to the old view
            self.screen.set_focus(None)

    def action_write_report(self) -> None:
        if self.ready:
            self._write_report()

    @work(thread=True, exclusive=True, group="report")
    def _write_report(self) -> None:
        from forensics.postmortem import write_report

        assert self.model is not None
        try:
            path = write_report(self.model.analysis, self.paths, self.report_dir)
        except (OSError, ForensicsError) as exc:
            self.call_from_thread(self.notify, f"The report was not written: {exc}", severity="error", markup=False)
            return
        self.report_path = path
        self.call_from_thread(self.notify, f"Report written to {path}", title="report", markup=False)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        self.exit(EXIT_LOAD_FAILED if self.load_error else EXIT_OK)

    @on(FindingChosen)
    def _finding_chosen(self, message: FindingChosen) -> None:
        self.action_show_tab("evidence")
        self.query_one(EvidenceView).show(message.position)

    @on(ShowInTimeline)
    def _show_in_timeline(self, message: ShowInTimeline) -> None:
        self.action_show_tab("timeline")
        if not self.query_one(TimelinePane).show_event(message.event):
            self.notify("That event is not in the timeline.", severity="warning")

    @on(TimelineView.Opened)
    def _open_raw(self, message: TimelineView.Opened) -> None:
        assert self.model is not None
        event = message.event
        self.push_screen(RawContextScreen(event, self.model.analysis.document(event.origin.path)))
