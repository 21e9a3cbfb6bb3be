"""Chart widgets: the overview's per-GPU sparkline table and the metrics tab's line charts.

Both share the run's time range, so a finding's marker (its list number) stands over
the same instant in every chart, and a metric detector's span is shaded on the
columns it covers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from forensics.findings import Role
from forensics.tui.charts import braille, fmt_range, fmt_value, marker_row, span_mask, sparkline, time_axis, value_range
from forensics.tui.model import (
    METRICS,
    OVERVIEW_METRICS,
    RATE_METRICS,
    GpuSeries,
    Metric,
    Model,
    finding_mark,
    fmt_clock,
    names_gpu,
    series_fact,
    spans_for,
)

__all__ = ["GpuSparkTable", "LineChart", "METRIC_COLOURS", "RateChart", "SPAN_COLOURS"]

METRIC_COLOURS = {"mem_used_mib": "#82aaff", "util_gpu_pct": "#c3e88d", "power_w": "#ffcb6b", "temp_c": "#f78c6c",
                  "tokens_s": "#c792ea", "samples_s": "#c792ea", "it_s": "#c792ea"}
SPAN_COLOURS = {"stall": "#3d1c25", "margin": "#3a3318", "throttle": "#15303f"}
_DEFAULT_SPAN = "#33304f"
_MUTED = Style(color="#8a8fa8")
_ROLE_STYLES = {Role.ROOT_CAUSE: Style(color="#ff5370", bold=True), Role.CONSEQUENCE: Style(color="#ffcb6b"),
                Role.CONTRIBUTING: Style(color="#89ddff")}


def _metric(column: str) -> Metric:
    return next(m for m in (*METRICS, *RATE_METRICS) if m.column == column)


def _span_background(detector: str) -> Style:
    return Style(bgcolor=SPAN_COLOURS.get(detector, _DEFAULT_SPAN))


def _cells(text: str, fg: Style, backgrounds: Sequence[Style | None]) -> Text:
    """``text`` in ``fg``, with a per-column background where one is given (runs merged)."""
    out = Text()
    start = 0
    for col in range(1, len(text) + 1):
        if col == len(text) or backgrounds[col] != backgrounds[start]:
            bg = backgrounds[start] if start < len(backgrounds) else None
            out.append(text[start:col], fg + bg if bg else fg)
            start = col
    return out


def _span_columns(model: Model, series: GpuSeries, t0: int, t1: int, width: int) -> list[Style | None]:
    backgrounds: list[Style | None] = [None] * width
    for span in spans_for(model, series):
        mask = span_mask([(span.start, span.end)], t0, t1, width)
        for col in np.flatnonzero(mask):
            backgrounds[int(col)] = _span_background(span.detector)
    return backgrounds


def _marks(model: Model, t0: int, t1: int, width: int) -> str:
    """Finding numbers at their first-seen time; on a shared column the earlier-listed finding wins."""
    points = [(f.first_seen, finding_mark(i)) for i, f in enumerate(model.findings) if f.first_seen is not None]
    return marker_row(reversed(points), t0, t1, width, fill="─")


def _time_range(model: Model) -> tuple[int, int] | None:
    return model.chart_span


class _TextLines(Widget):
    """A widget drawn as lines of rich Text through the Line API (no wrapping, no whitespace folding)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._lines_cache: tuple[tuple[object, ...], list[Strip]] | None = None

    def lines(self, width: int, height: int) -> list[Text]:
        return list(self.draw(width, height).split("\n", allow_blank=True))

    def draw(self, width: int, height: int) -> Text:
        """The whole widget as one Text, rows separated by newlines."""
        raise NotImplementedError

    def cache_key(self) -> tuple[object, ...]:
        return (self.size.width, self.size.height)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        key = self.cache_key()
        if self._lines_cache is None or self._lines_cache[0] != key:
            console = self.app.console
            strips = []
            for line in self.lines(width, self.size.height):
                line.no_wrap = True
                line.overflow = "crop"
                line.end = ""
                segments = [seg for seg in line.render(console) if seg.text != "\n"]
                strips.append(Strip(segments).crop_extend(0, width, self.rich_style))
            self._lines_cache = (key, strips)
        strips = self._lines_cache[1]
        return strips[y].apply_style(self.rich_style) if y < len(strips) else Strip.blank(width, self.rich_style)

    def clear_lines(self) -> None:
        self._lines_cache = None
        self.refresh()


class GpuSparkTable(_TextLines):
    """One row per GPU: memory, utilization, power and temperature over the whole run."""

    DEFAULT_CSS = """
    GpuSparkTable { height: auto; }
    """

    def __init__(self, model: Model, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.model = model

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        return len(self.model.series) + 3 if self.model.series else 1

    def draw(self, width: int, height: int) -> Text:
        model = self.model
        rng = _time_range(model)
        if not model.series or rng is None:
            return Text("No GPU metrics in these inputs (a forensics record bundle or nvidia-smi --query-gpu / dmon "
                        "output has them).", style=_MUTED)
        t0, t1 = rng
        columns = [_metric(c) for c in OVERVIEW_METRICS if any(c in s.values for s in model.series)]
        multi_host = len({s.host for s in model.series}) > 1
        label_w = min(max(len(self._label(s, multi_host)) for s in model.series) + 1, 22)
        n = max(len(columns), 1)
        chart_w = max((width - label_w - 2 * n) // n, 4)
        ranges = {}
        for metric in columns:
            limits = [s.limit(metric) for s in model.series]
            known = [x for x in limits if x is not None]
            ranges[metric.column] = value_range([s.values.get(metric.column, np.zeros(0)) for s in model.series],
                                                metric.lo, max(known) if known else None)
        text = Text(no_wrap=True, overflow="crop")
        text.append(" " * label_w)
        for metric in columns:
            lo, hi = ranges[metric.column]
            label = metric.label if chart_w >= 24 else metric.brief
            head = f"{label} {fmt_range(lo, hi, metric.unit)}"
            text.append(head[:chart_w].ljust(chart_w) + "  ", Style(bold=True))
        text.append("\n")
        root_gpus = [g for f in model.findings if f.role == Role.ROOT_CAUSE for g in f.gpus]
        for s in model.series:
            failed = names_gpu(model, s, root_gpus)
            text.append(self._label(s, multi_host)[: label_w - 1].ljust(label_w),
                        Style(color="#ff5370", bold=True) if failed else _MUTED)
            backgrounds = _span_columns(model, s, t0, t1, chart_w)
            for metric in columns:
                lo, hi = ranges[metric.column]
                values = s.values.get(metric.column)
                line = sparkline(s.ts, values, t0, t1, chart_w, lo, hi) if values is not None else " " * chart_w
                text.append_text(_cells(line, Style(color=METRIC_COLOURS.get(metric.column, "#89ddff")), backgrounds))
                text.append("  ")
            text.append("\n")
        marks = _marks(model, t0, t1, chart_w)
        axis = time_axis(t0, t1, chart_w)
        text.append("findings".ljust(label_w), _MUTED)
        for _ in columns:
            text.append(marks + "  ", Style(color="#ff5370", bold=True))
        text.append("\n")
        text.append(" " * label_w)
        for _ in columns:
            text.append(axis + "  ", _MUTED)
        return text

    @staticmethod
    def _label(series: GpuSeries, multi_host: bool) -> str:
        return f"{series.host}/{series.gpu}" if multi_host and series.host else f"GPU {series.gpu}"


class LineChart(_TextLines):
    """One GPU's time series for the chosen metric, with detector spans and finding marks."""

    DEFAULT_CSS = """
    LineChart { height: 10; margin-bottom: 1; }
    """
    metric: reactive[str] = reactive("util_gpu_pct")

    def __init__(self, model: Model, series: GpuSeries, metric: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.model = model
        self.series = series
        self.set_reactive(LineChart.metric, metric)

    def cache_key(self) -> tuple[object, ...]:
        return (self.size.width, self.size.height, self.metric)

    def watch_metric(self) -> None:
        self.clear_lines()

    def draw(self, width: int, height: int) -> Text:
        model, s = self.model, self.series
        metric = _metric(self.metric)
        rng = _time_range(model)
        values = s.values.get(metric.column)
        text = Text(no_wrap=True, overflow="crop")
        fact = series_fact(model, s)
        title = f"GPU {s.gpu}" + (f" · {s.host}" if s.host else "")
        if fact and fact.bus and fact.bus != s.gpu:
            title += f" · {fact.bus}"
        if fact and fact.model:
            title += f" · {fact.model}"
        if values is None or rng is None or not np.isfinite(values).any():
            text.append(title, Style(bold=True))
            text.append(f"   no {metric.label} samples", _MUTED)
            return text
        finite = values[np.isfinite(values)]
        stats = (f"   {metric.label}: min {fmt_value(float(finite.min()), metric.unit)}  "
                 f"max {fmt_value(float(finite.max()), metric.unit)}  "
                 f"last {fmt_value(float(finite[-1]), metric.unit)}")
        # A narrow screen keeps the numbers and shortens the title (model, then host and bus go first).
        for candidate in (title, f"GPU {s.gpu}" + (f" · {s.host}" if s.host else ""), f"GPU {s.gpu}"):
            if len(self.title_text(candidate)) + len(stats) <= width:
                title = self.title_text(candidate)
                break
        else:  # the tab above names the metric already
            title = self.short_title(f"GPU {s.gpu}")
            stats = stats.replace(f"   {metric.label}:", " ", 1)
        text.append(title, Style(bold=True))
        text.append(stats, _MUTED)
        gaps = self._gap_note(values, rng[1])
        if gaps:
            text.append(f"  {gaps}", Style(color="#ff5370"))
        text.append("\n")
        t0, t1 = rng
        axis_w = 11
        plot_w, plot_h = max(width - axis_w, 4), max(height - 3, 1)
        lo, hi = value_range([values], metric.lo, s.limit(metric))
        rows = braille(s.ts, values, t0, t1, plot_w, plot_h, lo, hi)
        backgrounds = _span_columns(model, s, t0, t1, plot_w)
        colour = Style(color=METRIC_COLOURS.get(metric.column, "#89ddff"))
        def axis_label(v: float) -> str:  # with its unit when that fits the axis, else the number alone
            text = fmt_value(v, metric.unit)
            return text if len(text) <= axis_w - 2 else fmt_value(v)

        for i, row in enumerate(rows):
            label = axis_label(hi) if i == 0 else axis_label(lo) if i == plot_h - 1 else ""
            text.append(label[: axis_w - 2].rjust(axis_w - 2) + " ┤" if label else " " * (axis_w - 1) + "│", _MUTED)
            text.append_text(_cells(row, colour, backgrounds))
            text.append("\n")
        text.append(" " * (axis_w - 1) + "└", _MUTED)
        text.append(_marks(model, t0, t1, plot_w), Style(color="#ff5370", bold=True))
        text.append("\n")
        text.append(" " * axis_w + time_axis(t0, t1, plot_w), _MUTED)
        return text

    def title_text(self, title: str) -> str:
        return title

    def short_title(self, title: str) -> str:
        """The title where even the shortest one and the numbers do not fit the width (80 columns)."""
        return title

    def _gap_note(self, values: np.ndarray, end: int) -> str:
        """Say when the GPU stopped answering: its readings end long before the run does, or go unread."""
        s = self.series
        finite = np.flatnonzero(np.isfinite(values))
        if not len(finite):
            return ""
        last = int(s.ts[finite[-1]])
        step = float(np.median(np.diff(s.ts))) if len(s.ts) > 1 else 0.0
        if end - last > max(5 * step, 5e9):
            return f"no readings after {fmt_clock(last)}"
        unread = len(values) - len(finite)
        return f"{unread} unread samples" if unread else ""


class RateChart(LineChart):
    """The training rate read from the progress lines (tokens/s …), on the same time axis as the GPUs."""

    def __init__(self, model: Model, *, id: str | None = None) -> None:
        assert model.rate is not None
        metric, series = model.rate
        super().__init__(model, series, metric.column, id=id)

    def title_text(self, title: str) -> str:
        return "Training rate (progress lines)"

    def short_title(self, title: str) -> str:
        return "Training rate"
