"""A small gallery of SVG snapshots of the main views, on fixed data (pytest-textual-snapshot).

Regenerate on purpose only, after looking at the report: ``pytest tests/test_tui_snapshots.py
--snapshot-update``. The data is the demo Xid 79 incident; animations are off and TZ=UTC.
"""

from __future__ import annotations

import time

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from forensics.tui import demo
from forensics.tui.app import ForensicsApp


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


def incident_app() -> ForensicsApp:
    app = ForensicsApp(analysis=demo.xid79_incident(), title="run-20240514-0900")
    app.animation_level = "none"
    return app


async def settle(pilot: Pilot[int]) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.slow
def test_overview(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(incident_app(), terminal_size=(120, 40), run_before=settle)


@pytest.mark.slow
def test_overview_80x24(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(incident_app(), terminal_size=(80, 24), run_before=settle)


@pytest.mark.slow
def test_evidence(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(incident_app(), terminal_size=(120, 40), run_before=settle, press=["down", "down", "enter"])


@pytest.mark.slow
def test_timeline_filtered(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def filtered(pilot: Pilot[int]) -> None:
        await settle(pilot)
        await pilot.press("3", "slash")
        pilot.app.query_one("#filter", Input).value = "sev:warning"
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("n")

    assert snap_compare(incident_app(), terminal_size=(120, 30), run_before=filtered)


@pytest.mark.slow
def test_metrics_utilization(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(incident_app(), terminal_size=(120, 40), run_before=settle, press=["4", "right"])


@pytest.mark.slow
def test_help(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(incident_app(), terminal_size=(100, 36), run_before=settle, press=["question_mark"])


@pytest.mark.slow
def test_evidence_80x24(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """Narrow: the findings list above the detail, whole titles wrapped (not cut at 28 columns)."""
    assert snap_compare(incident_app(), terminal_size=(80, 24), run_before=settle, press=["2"])


@pytest.mark.slow
def test_help_80x24(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """The key list scrolls on a short terminal: scrolled to its end, the last section shows."""
    assert snap_compare(incident_app(), terminal_size=(80, 24), run_before=settle, press=["question_mark", "end"])
