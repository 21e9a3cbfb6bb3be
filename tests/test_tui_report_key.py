"""``r`` in ``forensics open`` writes the report of what it shows (Pilot, a real recorded bundle)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from forensics.tui.app import ForensicsApp

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "samples" / "recorded" / "meta-offload-lora" / "bundle"


@pytest.mark.slow
def test_r_writes_the_markdown_report_and_says_where(tmp_path: Path) -> None:
    async def run() -> None:
        app = ForensicsApp([str(BUNDLE)])
        app.animation_level = "none"
        app.report_dir = tmp_path
        notes: list[str] = []
        original = app.notify

        def notify(message: str, *args: object, **kwargs: object) -> None:
            notes.append(message)
            original(message, *args, **kwargs)  # type: ignore[arg-type]

        app.notify = notify  # type: ignore[method-assign]
        async def until(done: Callable[[], object]) -> None:
            # Workers start after the first refresh (loading) or after the key's message is handled
            # (the report): "no worker running" can come before them, so wait for what they make.
            for _ in range(1200):
                await pilot.app.workers.wait_for_complete()
                await pilot.pause(0.05)
                if done():
                    return

        async with app.run_test(size=(100, 30)) as pilot:
            await until(lambda: app.ready or app.load_error)
            assert app.ready, app.load_error
            await pilot.press("r")
            await until(lambda: app.report_path is not None)
            assert app.report_path is not None
            text = app.report_path.read_text(encoding="utf-8")
            assert app.report_path.parent == tmp_path and app.report_path.suffix == ".md"
            assert "## ROOT CAUSE: Offloaded (meta) weights" in text
            assert "| GPU 0 |" in text and "NVIDIA H200" in text  # hardware from the bundle's host/ files
            assert any(str(app.report_path) in n for n in notes)
            first = app.report_path
            await pilot.press("r")  # a second report never overwrites the first
            await until(lambda: app.report_path != first)
            assert len(list(tmp_path.glob("forensics-report-*.md"))) == 2

    asyncio.run(run())
