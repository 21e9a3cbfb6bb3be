"""The TUI's behaviour, driven headless with Textual's Pilot (``App.run_test``)."""

from __future__ import annotations

import asyncio
import functools
import html
import io
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from textual.widgets import Input, Static, TabbedContent

from forensics.analysis import analyze
from forensics.cli import main as cli_main
from forensics.errors import UsageError
from forensics.events import Severity
from forensics.tui import demo, run_app
from forensics.tui.app import ForensicsApp
from forensics.tui.chart_widgets import LineChart, RateChart
from forensics.tui.dialogs import HelpScreen, JumpScreen, RawContextScreen
from forensics.tui.evidence import EvidenceView, evidence_body
from forensics.tui.metrics_pane import MetricsPane
from forensics.tui.model import build_model
from forensics.tui.timeline_pane import TimelinePane

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "corpus" / "cases"
_TEXT = re.compile(r'<text [^>]*x="([\d.]+)"[^>]*clip-path="url\(#terminal-\d+-line-(\d+)\)">([^<]*)</text>')


def headless(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async Pilot test to completion (no async pytest plugin needed)."""

    @functools.wraps(test)
    def run(*args: object, **kwargs: object) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


def screen_lines(app: ForensicsApp) -> list[str]:
    """The screen as plain text lines, read back from Textual's own SVG export."""
    rows: dict[int, list[tuple[float, str]]] = {}
    for x, line, text in _TEXT.findall(app.export_screenshot()):
        rows.setdefault(int(line), []).append((float(x), html.unescape(text).replace("\xa0", " ")))
    return ["".join(t for _, t in sorted(parts)) for _, parts in sorted(rows.items())]


def screen(app: ForensicsApp) -> str:
    return "\n".join(screen_lines(app))


def plain(renderable: object, width: int = 400) -> str:
    """A rich renderable as plain text, wide enough that nothing wraps."""
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


async def opened(pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait until loading (and indexing) has finished and the screen settled."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def incident_app() -> ForensicsApp:
    app = ForensicsApp(analysis=demo.xid79_incident(), title="test")
    app.animation_level = "none"
    return app


async def type_text(pilot, text: str) -> None:  # type: ignore[no-untyped-def]
    await pilot.press(*[("space" if c == " " else c) for c in text])


async def filter_by(pilot, text: str) -> None:  # type: ignore[no-untyped-def]
    """Put ``text`` in the timeline's filter bar and press enter, as a paste would."""
    await pilot.press("slash")
    pilot.app.query_one("#filter", Input).value = text
    await pilot.press("enter")
    await opened(pilot)


# -- opening ------------------------------------------------------------------------------------
@headless
@pytest.mark.slow
async def test_overview_shows_the_verdict_findings_and_run_facts() -> None:
    app = incident_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(pilot)
        text = screen(app)
        assert "ROOT CAUSE" in text and "GPU fell off the PCIe bus (Xid 79)" in text and "high confidence" in text
        assert "What to do: Drain gpu-node-17" in text
        for title in ("7 GPUs spun at 100 %", "NCCL watchdog timed out", "torchrun worker ended by SIGABRT"):
            assert title in text
        assert "torchrun --nproc-per-node 8 train.py" in text
        assert "8 × NVIDIA H100 80GB HBM3, PCIe Gen5 x16" in text
        assert "driver 550.90.07" in text and "exit 1" in text
        lines = screen_lines(app)
        gpu6 = next(line for line in lines if "GPU 6 " in line)
        gpu0 = next(line for line in lines if "GPU 0 " in line)
        assert gpu6.count("█") < gpu0.count("█")  # GPU 6's charts stop at the Xid
        assert app.focused is not None and app.focused.id == "findings"


@pytest.mark.parametrize("case", ["pytorch51382-xid43-xid31-suspect-gpu", "stall-nvidia-smi-one-gpu-idle"])
@headless
@pytest.mark.slow
async def test_opening_a_real_case_shows_what_analyze_concludes(case: str) -> None:
    expected = analyze([str(CASES / case)])
    app = ForensicsApp([str(CASES / case)])
    async with app.run_test(size=(100, 30)) as pilot:
        await opened(pilot)
        assert app.model is not None and not app.load_error
        text = screen(app)
        root = expected.verdict.root_cause
        if root is None:
            assert "NO FAILURE FOUND" in text
        else:
            assert "ROOT CAUSE" in text and root.title[:40] in text
        assert f"{len(expected.sources)} file(s)" in text
        assert sorted(f.signature for f in app.model.findings) == sorted(f.signature for f in expected.findings)
        pane = app.query_one(TimelinePane)
        assert pane.view.row_count == len(expected.timeline.events)


@headless
@pytest.mark.slow
async def test_an_empty_analysis_opens_on_every_view() -> None:
    app = ForensicsApp(analysis=demo.empty_analysis())
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(pilot)
        assert "NO FAILURE FOUND" in screen(app)
        await pilot.press("2")
        assert "No findings" in screen(app) and "nothing readable" in screen(app)
        await pilot.press("3", "n", "g")
        assert "no notable events in these inputs" in screen(app)
        assert isinstance(app.screen, JumpScreen)
        await pilot.press("escape", "4")
        assert "No GPU metrics in these inputs" in screen(app)


@headless
@pytest.mark.slow
async def test_a_loader_failure_is_shown_not_raised_and_q_exits_2() -> None:
    def broken() -> object:
        raise RuntimeError("disk on fire")

    app = ForensicsApp(loader=broken)  # type: ignore[arg-type]
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(pilot)
        assert "Could not analyze the inputs: RuntimeError: disk on fire" in screen(app)
        await pilot.press("2", "q")
    assert app.return_value == 2


def test_run_app_and_cli_refuse_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        run_app([str(tmp_path / "nope")], None)  # type: ignore[arg-type]
    assert cli_main(["open", str(tmp_path / "nope")]) == 2


# -- keys ---------------------------------------------------------------------------------------
@headless
@pytest.mark.slow
async def test_keys_switch_views_help_and_quit() -> None:
    app = incident_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(pilot)
        for key, tab, focus in (("2", "evidence", "evidence-findings"), ("3", "timeline", "events"),
                                ("4", "metrics", "metric-tabs"), ("1", "overview", "findings")):
            await pilot.press(key)
            assert app.query_one("#tabs", TabbedContent).active == tab
            assert app.focused is not None and app.focused.id == focus
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "next / previous error" in screen(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")
    assert app.return_value == 0


# -- evidence -----------------------------------------------------------------------------------
@headless
@pytest.mark.slow
async def test_selecting_a_finding_shows_its_evidence() -> None:
    app = incident_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(pilot)
        await pilot.press("down", "down", "enter")  # the third finding: the NCCL watchdog timeouts
        assert app.query_one("#tabs", TabbedContent).active == "evidence"
        view = app.query_one(EvidenceView)
        assert view.position == 2 and view.finding is not None
        assert view.finding.signature == "nccl-watchdog-timeout"
        assert "NCCL watchdog timed out in ALLREDUCE on 7 ranks" in screen(app)
        text = plain(app.query_one("#evidence-body", Static).content)
        assert "why this role: follows xid-79-fallen-off-bus by 600 s" in text
        first = min(view.finding.evidence, key=lambda e: e.ts or 0)
        assert first.origin.line == 1 and "stderr.log:1" in text  # file:line of the first evidence event
        assert "▶ " in text and "[Rank 0] Watchdog caught collective operation timeout" in text
        assert "+2 ms" in text  # the gap between two ranks' timeouts
        assert "What to do" in text and "Ruled out" in text and "nccl-desync" in text
        # Browsing the list updates the proof without pressing enter.
        await pilot.press("up", "up")
        assert view.position == 0
        assert "GPU has fallen off the bus." in plain(app.query_one("#evidence-body", Static).content)
        # The mouse works too: a click on the overview's fourth finding.
        await pilot.press("1")
        await pilot.click("#findings", offset=(20, 3))
        await pilot.pause()
        assert app.query_one("#tabs", TabbedContent).active == "evidence" and view.position == 3
        # t shows the finding's first event in the timeline, clearing a filter that hides it.
        await pilot.press("3")
        await filter_by(pilot, "stdout")
        await pilot.press("2", "up", "up", "up", "t")
        pane = app.query_one(TimelinePane)
        assert app.query_one("#tabs", TabbedContent).active == "timeline"
        assert pane.query_text == ""
        event = pane.view.current_event
        assert event is not None and event.kind == "xid" and event.attrs["xid"] == 79


# -- timeline -----------------------------------------------------------------------------------
@headless
@pytest.mark.slow
async def test_filters_narrow_the_timeline() -> None:
    app = incident_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await opened(pilot)
        events = app.query_one(TimelinePane).model.analysis.timeline.events
        await pilot.press("3", "slash")
        await type_text(pilot, "sev:error")
        await pilot.press("enter")
        await opened(pilot)
        pane = app.query_one(TimelinePane)
        expected = [i for i, e in enumerate(events) if e.severity >= Severity.ERROR]
        assert pane.view.view.tolist() == expected
        assert f"{len(expected)} of {len(events)} events match" in screen(app)
        assert app.focused is pane.view  # enter hands the keyboard back to the list
        # Narrow further: a field, a word and a regex together.
        await filter_by(pilot, "sev:error rank:3-5 /SeqNum=96120/")
        assert sorted(events[i].rank for i in pane.view.view) == [3, 4, 5]  # type: ignore[type-var]
        # A bad filter says why and keeps the last good result.
        await filter_by(pilot, "sev:loud")
        assert "unknown severity" in screen(app)
        assert pane.view.row_count == 3
        # Clearing the filter shows everything again.
        await filter_by(pilot, "")
        assert pane.view.row_count == len(events)
        # Typing applies the filter after a short pause, without enter.
        await pilot.press("slash")
        await type_text(pilot, "kind:c10d")
        await pilot.pause(0.5)
        await opened(pilot)
        assert pane.view.row_count == 7
        assert app.focused is not None and app.focused.id == "filter"
        await pilot.press("escape")
        assert app.focused is pane.view


@headless
@pytest.mark.slow
async def test_jump_to_errors_and_times_and_open_raw_lines() -> None:
    app = incident_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await opened(pilot)
        await pilot.press("3")
        pane = app.query_one(TimelinePane)
        events = pane.view.events
        errors = np.flatnonzero(np.array([e.severity for e in events]) >= Severity.ERROR).tolist()
        assert pane.view.cursor == 0 and errors[0] > 0
        await pilot.press("n")
        assert pane.view.cursor == errors[0]
        await pilot.press("n")
        assert pane.view.cursor == errors[1]
        await pilot.press("N")
        assert pane.view.cursor == errors[0]
        # enter opens the raw lines around the event, read from its file.
        event = pane.view.current_event
        assert event is not None
        await pilot.press("enter")
        assert isinstance(app.screen, RawContextScreen)
        text = screen(app)
        assert str(event.origin) in text and "▶" in text
        document = app.model.analysis.document(event.origin.path)  # type: ignore[union-attr]
        assert document is not None
        for line in document.context(event.origin.line, 3, 3):
            assert line.text[:60] in text
        await pilot.press("escape")
        assert not isinstance(app.screen, RawContextScreen)
        # Past the last error the cursor stays and the status line says so.
        await pilot.press("end", "n")
        assert pane.view.cursor == len(events) - 1
        assert "no later error" in screen(app)
        # Jump to a clock time, then to an offset from the start; a bad time is explained.
        await pilot.press("g")
        assert isinstance(app.screen, JumpScreen)
        app.screen.query_one(Input).value = "nonsense"
        await pilot.press("enter")
        assert isinstance(app.screen, JumpScreen) and "cannot read" in screen(app)
        app.screen.query_one(Input).value = "09:15"
        await pilot.press("enter")
        assert not isinstance(app.screen, JumpScreen)
        row = pane.view.cursor
        assert events[row].ts >= demo.T0 + 900 * 10**9 > events[row - 1].ts  # type: ignore[operator]
        top = int(pane.view.scroll_offset.y)
        assert top <= row < top + pane.view.scrollable_content_region.height  # on screen
        await pilot.press("g")
        await type_text(pilot, "+5m")
        await pilot.press("enter")
        row = pane.view.cursor
        assert events[row].ts >= demo.T0 + 300 * 10**9 > events[row - 1].ts  # type: ignore[operator]
        # The mouse: a click selects a row, a double click opens it.
        await pilot.press("home")
        await pilot.click("#events", offset=(20, 4))
        assert pane.view.cursor == 4
        await pilot.click("#events", offset=(20, 4), times=2)
        assert isinstance(app.screen, RawContextScreen)


@headless
@pytest.mark.slow
async def test_a_large_timeline_pages_to_the_end_and_back() -> None:
    app = ForensicsApp(analysis=demo.synthetic(20_000))
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(pilot)
        await pilot.press("3")
        view = app.query_one(TimelinePane).view
        await pilot.press("pagedown", "pagedown")
        height = view.scrollable_content_region.height
        assert view.cursor == 2 * (height - 1)
        await pilot.press("end")
        assert view.cursor == 19_999 and int(view.scroll_offset.y) == 20_000 - height
        await pilot.press("home")
        assert view.cursor == 0 and view.scroll_offset.y == 0


# -- metrics and sizes ----------------------------------------------------------------------------
@headless
@pytest.mark.slow
async def test_metrics_pick_the_metric_and_show_detector_spans() -> None:
    app = incident_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(pilot)
        await pilot.press("4")
        pane = app.query_one(MetricsPane)
        assert pane.metric == "mem_used_mib"
        await pilot.press("right")
        assert pane.metric == "util_gpu_pct"
        gpu_charts = [c for c in app.query(LineChart) if not isinstance(c, RateChart)]
        assert gpu_charts and all(chart.metric == "util_gpu_pct" for chart in gpu_charts)
        assert app.query_one(RateChart).metric == "tokens_s"  # the training rate from the progress lines stays
        text = screen(app)
        assert "shaded:" in text and "stall" in text and "margin" in text
        assert "utilization: min 0%" in text
        six = app.query_one("#chart-6", LineChart)
        assert "no readings after 09:05:12" in "\n".join(line.plain for line in six.lines(100, 10))
        zero = app.query_one("#chart-0", LineChart)
        assert "no readings" not in "\n".join(line.plain for line in zero.lines(100, 10))


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
@headless
@pytest.mark.slow
async def test_every_view_renders_at_small_and_large_sizes(size: tuple[int, int]) -> None:
    app = incident_app()
    async with app.run_test(size=size) as pilot:
        await opened(pilot)
        for key in ("1", "2", "3", "4", "question_mark", "escape", "3", "enter", "escape"):
            await pilot.press(key)
            assert screen_lines(app)  # renders without an exception
        assert app.has_class("wide") == (size[0] >= 140)
        await pilot.resize_terminal(90, 30)
        await pilot.pause()
        assert not app.has_class("wide")
        assert screen_lines(app)


@pytest.mark.slow
def test_evidence_body_says_how_many_matched_and_the_extracted_facts() -> None:
    analysis = demo.xid79_incident()
    root = analysis.verdict.root_cause
    assert root is not None
    root.matched = 1234
    root.facts = {"xid": 79, "pci": "0000:ba:00", "empty": ""}  # the matcher's extracted facts
    model = build_model(analysis)
    text = plain(evidence_body(model, 0, analysis.document))
    assert "Evidence (4 of 1,234 matching events" in text
    assert "xid 79 · pci 0000:ba:00" in text and "empty" not in text
    # The raw excerpt of neighbouring evidence lines is shown once, with every event's line marked.
    assert text.count("▶ ") == 4 and text.count("NVRM: GPU 0000:ba:00.0: GPU has fallen off the bus.") == 1


@headless
@pytest.mark.slow
async def test_overview_names_the_chipset_attached_gpu_of_the_first_report() -> None:
    data = ROOT / "tests" / "data"
    paths = [str(data / "windows" / "report1-p2p-sram.xml"), str(data / "report1-machine" / "nvidia-smi-topo.txt"),
             str(data / "report1-machine" / "nvidia-smi-q.txt"),
             str(CASES / "windows-unknown-error-optimizer-step" / "train.log")]
    app = ForensicsApp(paths)
    async with app.run_test(size=(140, 45)) as pilot:
        await opened(pilot)
        text = " ".join(" ".join(screen(app).split()).split("│"))
        assert "Cause: the cross-GPU PCIe path over the chipset" in text
        assert "PCIe" in text and "GPU 1 (0000:0c:00.0) behind the chipset" in " ".join(text.split())
        assert "GPU 0 ↔ GPU 1:" in text


@headless
@pytest.mark.slow
async def test_overview_names_a_gpu_the_lspci_tree_puts_behind_the_chipset() -> None:
    data = ROOT / "tests" / "data" / "lspci_tree"
    app = ForensicsApp([str(data / "lpic-laptop-mx150-tree.txt"), str(data / "lpic-laptop-mx150-lspci.txt")])
    async with app.run_test(size=(140, 45)) as pilot:
        await opened(pilot)
        text = " ".join(" ".join(screen(app).split()).split("│"))
        joined = " ".join(text.split())
        assert "PCIe" in text and "GPU 0000:01:00.0 behind the chipset (lspci tree: root port 0000:00:1c.0" in joined


@headless
@pytest.mark.slow
async def test_overview_says_which_gpus_share_a_switch(tmp_path: Path) -> None:
    from test_lspci_tree import smi_q_text

    smi = tmp_path / "nvidia-smi-q.txt"
    smi.write_text(smi_q_text(["0000:06:00.0", "0000:07:00.0"]))
    app = ForensicsApp([str(ROOT / "tests" / "data" / "lspci_tree" / "k1-m60-plx-quoted.txt"), str(smi)])
    async with app.run_test(size=(160, 45)) as pilot:
        await opened(pilot)
        joined = " ".join(" ".join(screen(app).split()).split("│"))
        assert "GPU 0000:06:00.0 and GPU 0000:07:00.0 share the PCIe switch at 0000:04:00.0" in " ".join(joined.split())
