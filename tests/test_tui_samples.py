"""The TUI on real recorded bundles (``samples/recorded``): facts, risks, the training rate, long
records, and what filtering does to the cursor."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from forensics.tui import demo
from forensics.tui.app import ForensicsApp
from forensics.tui.chart_widgets import RateChart
from forensics.tui.timeline_pane import TimelinePane
from tests.test_tui_app import filter_by, headless, incident_app, opened, plain, screen

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "recorded"
OOM_SENTENCE = "CUDA out of memory at the first optimizer step — tried 256 MiB, 201 MiB free of 139.8 GiB"


async def loaded(pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait until a real analysis (slower than the demo's) has been read and shown."""
    for _ in range(600):
        if pilot.app.model is not None or pilot.app.load_error:
            break
        await pilot.pause(0.05)
    await opened(pilot)
    assert pilot.app.model is not None, pilot.app.load_error


def bundle_app(name: str) -> ForensicsApp:
    app = ForensicsApp([str(SAMPLES / name / "bundle")])
    app.animation_level = "none"
    return app


@headless
@pytest.mark.slow
async def test_the_oom_facts_are_in_the_verdict_and_the_evidence_and_the_risk_is_marked() -> None:
    app = bundle_app("oom-optimizer-step")
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        text = screen(app)
        assert OOM_SENTENCE in text
        assert text.count("first optimizer step") == 1  # the summary does not say it a second time
        lines = text.splitlines()
        risk_row = next(line for line in lines if "Little or no GPU memory headroom" in line)
        assert " risk " in risk_row and "contributing" not in risk_row
        root_row = next(line for line in lines if "A GPU ran out of memory" in line and "0.8" in line)
        assert "root cause" in root_row
        await pilot.press("enter")
        body = plain(app.query_one("#evidence-body", Static).content)
        assert OOM_SENTENCE in body
        assert "phase optimizer-step" not in body  # the sentence, not the raw keys
        await pilot.press("down")
        body = plain(app.query_one("#evidence-body", Static).content)
        assert " risk " in body.splitlines()[0] and "why this role: a risk" in body


@headless
@pytest.mark.slow
async def test_a_run_that_survived_shows_its_risk_in_the_verdict() -> None:
    app = bundle_app("memory-margin")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        text = screen(app)
        assert "NO FAILURE FOUND" in text
        assert " RISK  Little or no GPU memory headroom" in text
        assert "250 MiB free" in text  # the detector's own numbers, read at 80x24 without scrolling
        assert "1  risk" in text


@headless
@pytest.mark.slow
async def test_the_training_rate_and_its_drop_are_charted() -> None:
    app = bundle_app("throughput-collapse")
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("4")
        chart = app.query_one(RateChart)
        drawn = [line.plain for line in chart.lines(110, 10)]
        assert drawn[0].startswith("Training rate (progress lines)") and "max 1.94M tokens/s" in drawn[0]
        plot = drawn[1:-2]
        top, bottom = plot[0], plot[-2]
        # High before the drop, low after it: the top row is drawn only left of the bottom row's line.
        assert top.strip() and bottom.strip()
        assert top.rstrip().__len__() < len(bottom.rstrip())
        span = next(s for s in app.model.spans if s.detector == "throughput-drop")  # type: ignore[union-attr]
        assert span.end - span.start > 60 * 10**9  # the whole slow stretch is shaded, not one column


@headless
@pytest.mark.slow
async def test_a_record_hundreds_of_lines_long_is_shortened_in_the_evidence() -> None:
    app = bundle_app("device-assert-h200")
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("enter")
        body = plain(app.query_one("#evidence-body", Static).content, width=200)
        assert "Failed in the forward pass" in body
        assert body.count("vectorized_gather_kernel") <= 12
        assert "lines not shown" in body
        assert "torch.AcceleratorError: CUDA error: device-side assert triggered" in body


@headless
@pytest.mark.slow
async def test_filtering_moves_the_cursor_to_the_first_match_and_says_no_match() -> None:
    app = incident_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await opened(pilot)
        await pilot.press("3")
        pane = app.query_one(TimelinePane)
        events = pane.view.events
        for _ in range(12):
            await pilot.press("down")
        assert pane.view.current_event is not None and pane.view.current_event.kind != "c10d"
        await filter_by(pilot, "kind:c10d")
        first = min(i for i, e in enumerate(events) if e.kind == "c10d")
        assert pane.view.cursor == 0 and pane.view.current_index == first
        assert int(pane.view.scroll_offset.y) == 0
        # An event that still matches keeps the cursor.
        await pilot.press("down", "down")
        kept = pane.view.current_event
        await filter_by(pilot, "kind:c10d ALLREDUCE")
        assert pane.view.current_event is kept and pane.view.cursor == 2
        # Nothing matches: said plainly, in the status line and in the list.
        await filter_by(pilot, "kind:c10d no-such-words")
        text = screen(app)
        assert pane.view.row_count == 0
        assert "no match" in text and "none of" in text and "no event matches 'kind:c10d no-such-words'" in text
        await filter_by(pilot, "")
        assert pane.view.row_count == len(events)


def test_the_demo_incident_still_has_progress_lines() -> None:
    """The metrics snapshot's training-rate chart needs them."""
    assert any(e.kind == "progress" and "tokens_s" in e.attrs for e in demo.xid79_incident().timeline.events)


@headless
@pytest.mark.slow
async def test_the_culprit_is_the_first_line_of_the_overview_and_evidence_shows_dt() -> None:
    """The recorded 2-GPU stall: rank 1 is named the culprit before the root cause, at 80x24 too;
    the Evidence view shows each line's Δt from the root cause's first event."""
    app = bundle_app("silent-stall-2gpu")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        lines = [line.strip(" │┃") for line in screen(app).splitlines() if line.strip(" │┃─━╭╮╰╯")]
        first = next(i for i, line in enumerate(lines) if "CULPRIT" in line)
        assert "rank 1 (GPU 1)" in lines[first] and "victims: rank 0" in " ".join(lines[first:first + 2])
        assert first < next(i for i, line in enumerate(lines) if "ROOT CAUSE" in line)
        await pilot.press("enter")
        body = plain(app.query_one("#evidence-body", Static).content)
        assert "Δt +0 s" in body
        await pilot.press("3")
        await pilot.pause(0.2)
        status = plain(app.query_one("#timeline-status", Static).content)
        assert "from root cause" in status and "Δt " in status
