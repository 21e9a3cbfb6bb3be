"""Run ``forensics record`` as a real subprocess for the recorder tests."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FAST_ENV = {
    "FORENSICS_FAKE_NVML": "ok",
    "FORENSICS_KERNEL_LOG": "none",
    "FORENSICS_HOST_EVENTS": "none",  # a CI runner inside WSL2 must not ask its host
    "FORENSICS_SNAPSHOT_WAIT_S": "0",
    "FORENSICS_SNAPSHOT_END": "cut",  # no snapshot finishing in the background after a test
    "FORENSICS_HELPER_REPORT_S": "10",  # a loaded test machine: wait for the helpers' first word
    "FORENSICS_TAIL_S": "0.2",
    "PYTHONUNBUFFERED": "1",
}


def recorder_argv(out: Path, *cmd: str, interval: float = 0.05, extra: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "forensics", "record", "--out", str(out), "--interval", str(interval), *extra,
            "--", *cmd]


def env(**overrides: str) -> dict[str, str]:
    e = {**os.environ, **FAST_ENV}
    e.pop("TORCHELASTIC_ERROR_FILE", None)
    e.update(overrides)
    return e


def run(out: Path, *cmd: str, timeout: float = 60, extra: tuple[str, ...] = (), **overrides: str
        ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(recorder_argv(out, *cmd, extra=extra), capture_output=True, timeout=timeout,
                          env=env(**overrides), stdin=subprocess.DEVNULL)


def bundle(out: Path) -> Path:
    [b] = [p for p in out.iterdir() if p.is_dir()]
    return b


def manifest(out: Path) -> dict[str, Any]:
    return json.loads((bundle(out) / "manifest.json").read_text())


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_until(fd: int, needle: bytes, timeout: float = 30) -> bytes:
    """Read a pseudo-terminal's master side until ``needle`` shows, it closes, or ``timeout`` passes."""
    buf = b""
    end = time.monotonic() + timeout
    while needle not in buf and time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: every slave side is closed
                break
            if not chunk:
                break
            buf += chunk
    return buf


def wait_in_bundle(file: str, text: str, then: str = "", limit_s: float = 60, count: int = 1) -> str:
    """Python for a recorded child: wait until ``<bundle>/<file>`` holds ``text`` ``count`` times (the bundle
    found through the armed ``TORCHELASTIC_ERROR_FILE``), at most ``limit_s``, then run ``then``. A child
    that lives until a helper has done its part makes a test independent of how loaded the machine is."""
    return ("import os, pathlib, sys, time\n"
            "b = pathlib.Path(os.environ['TORCHELASTIC_ERROR_FILE']).parent.parent\n"
            f"end = time.monotonic() + {limit_s}\n"
            f"while time.monotonic() < end and "
            f"((b / {file!r}).read_text(errors='replace') if (b / {file!r}).exists() else '').count({text!r})"
            f" < {count}:\n"
            "    time.sleep(0.05)\n" + then)
