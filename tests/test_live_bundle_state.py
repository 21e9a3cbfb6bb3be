"""``analyze`` / ``open`` on a bundle whose run is still being recorded: it says so and analyzes what is
there; "interrupted" only once the heartbeat is stale or the recorder is gone. ``open --follow`` shows
new findings as they come (a real Textual app under Pilot)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from forensics.analysis import analyze
from forensics.ingest.live_state import recording_state
from forensics.tui.app import ForensicsApp
from tests.live_fixture import OOM, STEPS, LiveBundle


def _analyze_json(path: Path) -> tuple[int, dict[str, object]]:
    out = subprocess.run([sys.executable, "-m", "forensics", "analyze", "--format", "json", str(path)],
                         capture_output=True, timeout=120)
    return out.returncode, json.loads(out.stdout)


def test_a_live_bundle_is_still_running_not_interrupted(tmp_path: Path) -> None:
    with LiveBundle(tmp_path / "run") as run:
        run.append("stdout", STEPS)
        time.sleep(0.6)
        rc, data = _analyze_json(run.path)
        assert rc == 0, data["verdict"]
        [rec] = data["recordings"]  # type: ignore[misc]
        assert rec["status"] == "running" and rec["live"] is True and rec["heartbeat_age_s"] < 5
        text = subprocess.run([sys.executable, "-m", "forensics", "analyze", str(run.path)], capture_output=True,
                              text=True, timeout=120).stdout
        assert "STILL RECORDING" in text and "interrupted" not in text.lower()
        run.append("stderr", OOM)
        rc, data = _analyze_json(run.path)
        assert rc == 1 and data["verdict"]["root_cause"] == "torch-cuda-oom"  # type: ignore[index]


def test_stale_heartbeat_or_a_dead_recorder_is_interrupted(tmp_path: Path) -> None:
    with LiveBundle(tmp_path / "run") as run:
        run.append("stdout", STEPS)
        run.die()
        manifest = json.loads((run.path / "manifest.json").read_text())
        state = recording_state(manifest, now_ns=manifest["heartbeat_ns"] + 60 * 10**9)
        assert state is not None and not state.live and "1 min ago" in state.why
        gone = recording_state({**manifest, "recorder_pid": _dead_pid()})
        assert gone is not None and not gone.live and "is gone" in gone.why
        a = analyze([str(run.path)])
        assert [r["status"] for r in a.recordings] == ["running"]  # still fresh: the test's own pid
        time.sleep(0)
    data = json.loads((tmp_path / "run" / "manifest.json").read_text())
    data["heartbeat_ns"] -= 3600 * 10**9
    (tmp_path / "run" / "manifest.json").write_text(json.dumps(data))
    a = analyze([str(tmp_path / "run")])
    assert [r["status"] for r in a.recordings] == ["interrupted"]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_open_follow_shows_new_findings_as_they_come(tmp_path: Path) -> None:
    async def scenario() -> None:
        with LiveBundle(tmp_path / "run") as run:
            run.append("stdout", STEPS)
            app = ForensicsApp([str(run.path)], follow=0.2)
            async with app.run_test(size=(160, 50)) as pilot:
                for _ in range(300):
                    await pilot.pause(0.1)
                    if app.model is not None:
                        break
                assert app.model is not None and app.model.analysis.verdict.root_cause is None
                assert "still recording" in app.sub_title
                run.append("stderr", OOM)
                for _ in range(300):
                    await pilot.pause(0.1)
                    if app.model.analysis.verdict.root_cause_id == "torch-cuda-oom":
                        break
                assert app.model.analysis.verdict.root_cause_id == "torch-cuda-oom"
                for _ in range(50):  # the notification is a message of its own
                    await pilot.pause(0.1)
                    if list(app._notifications):
                        break
                notes = [n.message for n in app._notifications]
                assert any("ROOT CAUSE" in m and "torch-cuda-oom" in m for m in notes), notes
                run.finish(1)
                for _ in range(300):
                    await pilot.pause(0.1)
                    if "still recording" not in app.sub_title:
                        break
                assert "still recording" not in app.sub_title
                await pilot.press("q")

    os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    asyncio.run(scenario())
