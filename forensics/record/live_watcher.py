"""The recorder's side of the live watcher: start it, show its lines, end it with the run.

The watcher is a separate process, started by module name (``python -m forensics.live``) — the
recorder never imports the analysis — at idle priority, after the child, with its stdin as a
lifeline (``end`` when the child ended, end of file if this process dies: it leaves too; on Linux it
also dies with this process, ``PR_SET_PDEATHSIG``) and its stderr in ``live.log``.

With ``tell`` (stderr is a terminal, or ``--announce``) its stdout is a pipe whose lines this module
writes on the recorder's stderr between the child's lines: when every output stream of the child
stands at the start of a line and has been quiet for ``QUIET_S``; a stream that stays in the middle
of a line (a progress bar redrawn with ``\\r``) for ``WAIT_S`` gets a newline first, so the alert
never lands inside a line. Writing never blocks the child: this is a thread of the recorder, and the
child's output is echoed by the tee threads whatever it does.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from forensics.record.lifeline import die_with_recorder, helper_flags

__all__ = ["LiveWatcher"]

QUIET_S = 0.05
WAIT_S = 3.0
FINAL_S = 3.0  # after the child ended: how long the watcher may still take (its last evaluation, deliveries)
LOG = "live.log"


class _Tee(Protocol):
    tail: bytes
    last_data: float


class LiveWatcher:
    def __init__(self, bundle: Path, argv: Sequence[str], tell: bool, tees: Sequence[_Tee],
                 colour: bool = False) -> None:
        self.bundle = bundle
        self.tees = tees
        self.colour = colour
        self.lines = 0
        env = dict(os.environ)
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(name, "1")
        cmd = [sys.executable, "-m", "forensics.live", str(bundle), *argv, "--lifeline"] + (["--tell"] if tell else [])
        with open(bundle / LOG, "ab") as log:
            self.proc = subprocess.Popen(die_with_recorder(cmd), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE if tell else subprocess.DEVNULL, stderr=log,
                                         env=env, close_fds=True, creationflags=helper_flags(idle=True))
        self._relay: threading.Thread | None = None
        if tell and self.proc.stdout is not None:
            self._relay = threading.Thread(target=self._show, args=(self.proc.stdout,), daemon=True,
                                           name="forensics-live-relay")
            self._relay.start()

    # -- the terminal line --------------------------------------------------------------------------
    def _show(self, stream: Any) -> None:
        with contextlib.suppress(OSError, ValueError):
            for raw in stream:
                self._write(raw.rstrip(b"\r\n"))

    def _write(self, line: bytes) -> None:
        waited = time.monotonic()
        while True:
            now = time.monotonic()
            at_start = all(t.tail in (b"", b"\n") for t in self.tees)
            quiet = all(now - t.last_data >= QUIET_S for t in self.tees)
            if (at_start and quiet) or now - waited >= WAIT_S:
                break
            time.sleep(QUIET_S)
        text = (b"\x1b[1;33m" + line + b"\x1b[0m") if self.colour else line
        prefix = b"" if all(t.tail in (b"", b"\n") for t in self.tees) else b"\n"
        with contextlib.suppress(OSError):
            os.write(2, prefix + text + b"\n")
        self.lines += 1

    # -- the end ------------------------------------------------------------------------------------
    def child_ended(self) -> None:
        """Tell the watcher the run is over: it reads the rest, evaluates once more and leaves."""
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.write(b"end\n")
                self.proc.stdin.flush()

    def stop(self, deadline: float) -> dict[str, Any]:
        """Wait for it until ``deadline`` (monotonic), then kill it; what the manifest says of it."""
        status = "ok"
        try:
            self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = "killed"
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=1.0)
        finally:
            with contextlib.suppress(OSError, ValueError):
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
        if self._relay is not None:
            self._relay.join(timeout=1.0)
        if status == "ok" and self.proc.returncode not in (0, None):
            status = "failed"
        note = {"killed": "still at work when the run ended (alerts already raised are in live.jsonl)"}.get(status)
        if status == "killed":
            status = "ok"
        alerts = 0
        with contextlib.suppress(OSError), open(self.bundle / "live.jsonl", "rb") as fh:
            alerts = sum(1 for _ in fh)
        return {"status": status, "rc": self.proc.returncode, "file": "live.jsonl", "log": LOG, "alerts": alerts,
                **({"note": note} if note else {})}
