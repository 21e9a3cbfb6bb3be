"""The metrics view: one full-width chart per GPU for the chosen metric."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static, Tab, Tabs

from forensics.tui.chart_widgets import SPAN_COLOURS, LineChart, RateChart
from forensics.tui.model import Model, finding_mark

__all__ = ["MetricsPane"]


def legend(model: Model) -> Text:
    """What the shading and the numbers under the charts mean, for this run."""
    text = Text(no_wrap=False)
    detectors = sorted({s.detector for s in model.spans})
    if detectors:
        text.append("shaded: ", Style(color="#8a8fa8"))
        for d in detectors:
            text.append(f" {d} ", Style(bgcolor=SPAN_COLOURS.get(d, "#33304f")))
            text.append(" ")
    marks = [f"{finding_mark(i)} {f.signature}" for i, f in enumerate(model.findings) if f.first_seen is not None]
    if marks:
        text.append("  marks: " if detectors else "marks: ", Style(color="#8a8fa8"))
        text.append(" · ".join(marks), Style(color="#a6accd"))
    return text


class MetricsPane(Vertical):
    """Pick a metric (← →); every GPU's series is drawn on the run's time axis, under the training
    rate when progress lines gave one."""

    def __init__(self, model: Model) -> None:
        super().__init__(id="metrics-pane")
        self.model = model
        self.metric = model.metrics[0].column if model.metrics else ""

    def compose(self) -> ComposeResult:
        gpus = bool(self.model.series and self.model.metrics)
        if not gpus:
            yield Static(Text("No GPU metrics in these inputs. A bundle from `forensics record` has them, and so "
                              "does nvidia-smi --query-gpu or dmon output.", Style(color="#8a8fa8")),
                         id="no-metrics")
            if self.model.rate is None:
                return
        else:
            yield Tabs(*[Tab(m.label, id=f"metric-{m.column}") for m in self.model.metrics], id="metric-tabs")
        yield Static(legend(self.model), id="metrics-legend")
        with VerticalScroll(id="charts"):
            if self.model.rate is not None:
                yield RateChart(self.model, id="chart-rate")
            for i, s in enumerate(self.model.series if gpus else []):
                yield LineChart(self.model, s, self.metric, id=f"chart-{i}")

    @on(Tabs.TabActivated, "#metric-tabs")
    def _metric_chosen(self, message: Tabs.TabActivated) -> None:
        if message.tab is None or message.tab.id is None:
            return
        self.show_metric(message.tab.id.removeprefix("metric-"))

    def show_metric(self, column: str) -> None:
        self.metric = column
        tabs = self.query_one("#metric-tabs", Tabs)
        if tabs.active != f"metric-{column}":
            tabs.active = f"metric-{column}"
        for chart in self.query(LineChart):
            if not isinstance(chart, RateChart):  # the training rate stays what it is
                chart.metric = column
