"""The terminal UI at 80x24 (issue 13): every screen usable — nothing cut that matters, the rest scrolls."""

from __future__ import annotations

import pytest
from test_tui_app import headless
from textual.containers import VerticalScroll
from textual.widgets import OptionList

from forensics.tui import demo
from forensics.tui.app import ForensicsApp
from forensics.tui.dialogs import KEYS, keys_rows


def _app() -> ForensicsApp:
    app = ForensicsApp(analysis=demo.xid79_incident(), title="demo")
    app.animation_level = "none"
    return app


async def _loaded(pilot) -> None:  # type: ignore[no-untyped-def]
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


@headless
@pytest.mark.slow
async def test_overview_at_80x24_shows_findings_and_the_run_panel() -> None:
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _loaded(pilot)
        assert app.has_class("narrow") and app.has_class("short")
        verdict = app.query_one("#verdict")
        facts = app.query_one("#facts")
        assert verdict.region.height <= 8  # compacted: one line per part
        assert facts.region.y <= 18  # the run panel: its border and at least three rows on the first screen
        findings = app.query_one("#findings", OptionList)
        assert app.model is not None and findings.option_count == len(app.model.findings)
        prompt = str(findings.get_option_at_index(1).prompt)
        assert app.model is not None and app.model.findings[1].title in prompt  # whole, not cut


@headless
@pytest.mark.slow
async def test_evidence_at_80x24_keeps_whole_titles() -> None:
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _loaded(pilot)
        await pilot.press("2")
        await pilot.pause()
        listing = app.query_one("#evidence-findings", OptionList)
        assert listing.region.width >= 78  # above the detail, the full width
        assert app.model is not None
        for i, f in enumerate(app.model.findings):
            assert f.title in str(listing.get_option_at_index(i).prompt)
        body = app.query_one("#evidence-scroll")
        assert body.region.y > listing.region.y and body.region.height >= 8


@headless
@pytest.mark.slow
async def test_help_at_80x24_scrolls_to_its_last_section() -> None:
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _loaded(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        box = app.screen.query_one("#help-box", VerticalScroll)
        assert box.max_scroll_y > 0 and "scroll" in str(box.border_subtitle)
        await pilot.press("end")
        await pilot.pause()
        assert box.scroll_y == box.max_scroll_y


def test_every_key_line_becomes_a_row() -> None:
    rows = keys_rows(KEYS)
    keys = {k for _, k, _ in rows}
    assert {"1 2 3 4", "?", "q", "escape", "tab", "shift+tab", "t", "n / N", "g", "/", "← →"} <= keys
    assert [v for v, _, _ in rows if v] == ["Everywhere", "Overview", "Evidence", "Timeline", "Metrics"]
    slash = next(what for _, k, what in rows if k == "/")
    assert slash.endswith("enter applies, escape returns")  # the continuation line joined
