"""``forensics open`` on what an input controls (issue 24): text that looks like Rich markup (a syslog
host ``[/x]``, a recorded argument ``[/tmp]``, a Hydra list ``paths=[/data/a]``, a file named
``[bold].log``) is shown as it is — it died with a traceback and exit status 0 — and inputs of which
nothing is readable are the one line and exit status 2, as for ``analyze``. The real app under Pilot,
and the real command under a pseudo-terminal (``script``)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import ROOT, bundle, edit_manifest
from test_tui_app import opened, screen

from forensics.tui.app import ForensicsApp


def _markup_bundle(tmp: Path) -> Path:
    b = bundle(tmp, "[/b]", "oom-first-backward")  # the header shows the path
    edit_manifest(b, host="[/x]", command=["python3", "train.py", "[/tmp]", "paths=[/data/a]", "[bold]x"],
                  cwd="[/home]")
    with (b / "kmsg.log").open("a") as fh:
        fh.write("Nov 29 17:55:20 [/x] kernel: [bold red]loud[/] [link=https://evil.example]x[/link]\n")
    (b / "[bold].log").write_text("[@click=quit] [/x] RuntimeError: CUDA out of memory. [/]\n")
    return b


def test_markup_shaped_text_from_an_input_is_shown_as_text(tmp_path: Path) -> None:
    b = _markup_bundle(tmp_path)

    async def run() -> str:
        app = ForensicsApp([str(b)])
        app.animation_level = "none"
        async with app.run_test(size=(140, 45)) as pilot:
            await opened(pilot)
            assert app.model is not None and not app.load_error
            text = screen(app)
            for key in ("2", "3", "4", "1"):
                await pilot.press(key)
                await pilot.pause()
            return text

    text = asyncio.run(run())
    assert "[/tmp]" in text and "paths=[/data/a]" in text


def _open(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``forensics open`` under a pseudo-terminal (``script``), ``q`` sent after a few seconds."""
    command = " ".join([sys.executable, "-m", "forensics", "open", *args])
    env = {"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run(["script", "-qec", command, "/dev/null"], input="", capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("script") is None, reason="needs script(1) for a pseudo-terminal")
def test_open_on_nothing_readable_is_the_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_bytes(b"")
    ran = _open("empty.log", cwd=tmp_path)
    assert ran.returncode == 2, (ran.returncode, ran.stdout[-2000:], ran.stderr[-2000:])
    assert "nothing readable in the inputs: empty.log: empty file" in ran.stdout + ran.stderr
    assert "Traceback" not in ran.stdout + ran.stderr
