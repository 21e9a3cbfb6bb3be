"""Hostile inputs for the hardening tests (issue 24): real bundles copied from ``samples/recorded`` with
one file made hostile — a link to ``/dev/zero``, a FIFO, 8 MB of ``[``, a field of the wrong type or
of 100 MB — and the CLI run as its own process under a wall-clock limit and an address-space cap, so
that a hang or a memory blow-up is a failed test, never a hung or killed suite."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "samples" / "recorded"
#: The CLI's own process: no command here needs more (a blow-up was 3-8 GiB).
MEMORY_CAP = 3 << 30
#: A hang guard, not a speed claim: every command here ends in seconds.
TIME_CAP = 240


def bundle(tmp: Path, name: str = "b", sample: str = "healthy") -> Path:
    """A copy of a recorded sample's bundle at ``tmp/name``."""
    dst = tmp / name
    shutil.copytree(RECORDED / sample / "bundle", dst)
    return dst


def edit_manifest(b: Path, **fields: Any) -> Path:
    data = json.loads((b / "manifest.json").read_text())
    data.update(fields)
    (b / "manifest.json").write_text(json.dumps(data))
    return b


def replace_with_link(path: Path, target: str) -> None:
    path.unlink()
    path.symlink_to(target)


def replace_with_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@dataclass
class Ran:
    code: int
    out: str
    err: str
    timed_out: bool = False

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.err  # (a report may quote the run's own traceback)


def _limits() -> None:  # in the child, before exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def cli(*args: str, timeout: float = TIME_CAP, cwd: Path | None = None, memory_cap: bool = True,
        env: dict[str, str] | None = None) -> Ran:
    """``forensics ARGS`` in its own interpreter; a timeout is ``timed_out`` (the process group killed)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "forensics", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd or ROOT, env=full_env,
                            preexec_fn=_limits if memory_cap else None, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        return Ran(-9, out, err, timed_out=True)
    return Ran(proc.returncode, out, err)


def fine(ran: Ran, codes: tuple[int, ...] = (0, 1, 2, 3)) -> bool:
    """Ended on its own with one of ``codes``, no traceback, not killed."""
    return not ran.timed_out and ran.code in codes and not ran.traceback
