"""Keeps an NVML sampler process running, and replaces it when NVML stops answering.

A wedged driver blocks NVML calls forever (often in uninterruptible sleep, so not even
SIGKILL frees the process). The supervisor never waits on such a call: it reads the
sampler's shared deadline page (:mod:`forensics.record.deadline`) ten times a second;
a call past its deadline becomes an ``unresponsive`` event in ``nvml-events.jsonl``
("NVML unresponsive since T: nvmlDeviceGetPowerUsage on GPU 3"), the process is sent
SIGKILL and left behind, and a fresh sampler starts after a back-off (1 s, doubling
to 60 s). When a replacement samples again a ``recovered`` event follows. At most
``MAX_STUCK`` stuck processes are left behind; then sampling stops with a
``sampler-gave-up`` event rather than pile up more.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from forensics.record import deadline
from forensics.record.nvml_worker import events_file, write_event
from forensics.record.writer import AppendFile

__all__ = ["DEADLINE_ENV", "NvmlSupervisor"]

DEADLINE_ENV = "FORENSICS_NVML_DEADLINE_S"
DEFAULT_DEADLINE_S = 3.0
RECORDER_LOG = "recorder.log"  # the recorder's own helpers' stderr
MAX_STUCK = 4
POLL_S = 0.1


class NvmlSupervisor(threading.Thread):
    """Runs :mod:`forensics.record.nvml_worker` and watches its calls' deadlines.

    ``on_status(source, info)`` reports availability for the manifest
    (``source`` is ``nvml`` or ``nvml_events``).
    """

    def __init__(self, bundle: Path, interval: float, on_status: Callable[[str, dict[str, Any]], None]) -> None:
        super().__init__(name="forensics-nvml-supervisor", daemon=True)
        self.bundle = bundle
        self.interval = interval
        self.on_status = on_status
        self.deadline_ns = int(float(os.environ.get(DEADLINE_ENV, DEFAULT_DEADLINE_S)) * 1e9)
        self._halt = threading.Event()
        self._stuck: list[subprocess.Popen[bytes]] = []
        self.events: AppendFile | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    # -- lifecycle ----------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self.events = events_file(self.bundle)
            self._supervise()
        except Exception as exc:  # never into the run
            self.on_status("nvml", {"status": "failed", "reason": f"supervisor: {type(exc).__name__}: {exc}"})

    def stop(self, timeout: float = 3.0) -> None:
        self._halt.set()
        self.join(timeout)

    def _supervise(self) -> None:
        backoff = 1.0
        unresponsive_since: int | None = None
        first = True
        while not self._halt.is_set():
            outcome = self._run_one(static=first, recovering_since=unresponsive_since)
            first = False
            if outcome == "unavailable" or outcome == "stopped":
                return
            if outcome == "recovered-then-ended":
                unresponsive_since = None
                backoff = 1.0
            elif isinstance(outcome, int):  # stuck since
                unresponsive_since = unresponsive_since or outcome
            if len(self._reap_stuck()) >= MAX_STUCK:
                self._event(type="sampler-gave-up",
                            reason=f"{MAX_STUCK} sampler processes are stuck in NVML calls; no more are started")
                self.on_status("nvml", {"status": "gave-up", "reason": "NVML unresponsive"})
                return
            if self._halt.wait(backoff):
                return
            backoff = min(backoff * 2, 60.0)
            self.restarts += 1

    def _reap_stuck(self) -> list[subprocess.Popen[bytes]]:
        self._stuck = [p for p in self._stuck if p.poll() is None]
        return self._stuck

    # -- one sampler process ------------------------------------------------------------------
    def _run_one(self, static: bool, recovering_since: int | None) -> str | int:
        """Run one sampler until it ends. Returns ``unavailable``, ``stopped``,
        ``recovered-then-ended``, ``ended`` or the ns time since which a call is stuck."""
        with tempfile.TemporaryFile() as page_file:
            page_file.truncate(deadline.SLOTS * deadline.SLOT_BYTES)
            page = deadline.open_page(page_file.fileno())
            argv = [sys.executable, "-m", "forensics.record.nvml_worker", str(self.bundle), repr(self.interval),
                    str(page_file.fileno()), "static" if static else "-"]
            with open(self.bundle / RECORDER_LOG, "ab") as log:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                        pass_fds=(page_file.fileno(),), close_fds=True,
                                        env={**os.environ, "FORENSICS_RECORDER_PID": str(os.getpid())})
            self.proc = proc
            assert proc.stdout is not None
            os.set_blocking(proc.stdout.fileno(), False)
            buf = b""
            sampled = False
            while True:
                if self._halt.is_set():
                    self._terminate(proc)
                    return "stopped"
                rc = proc.poll()
                buf, lines = _read_lines(proc.stdout.fileno(), buf)
                for msg in lines:
                    if self._handle(msg) == "unavailable":
                        self._terminate(proc)
                        return "unavailable"
                    if msg.get("sampling") == "ok" and not sampled:
                        sampled = True
                        if recovering_since is not None:
                            self._event(type="recovered", since=recovering_since,
                                        unresponsive_s=round((time.time_ns() - recovering_since) / 1e9, 1))
                            self.on_status("nvml", {"status": "ok", "recovered": True})
                stuck = deadline.read_slots(page, time.time_ns(), self.deadline_ns)
                if stuck and rc is None:
                    s = stuck[0]
                    self._event(type="unresponsive", since=s.since_ns, call=s.call, gpu=None if s.gpu < 0 else s.gpu,
                                waited_s=round((time.time_ns() - s.since_ns) / 1e9, 1), worker_pid=proc.pid,
                                attempt=self.restarts + 1)
                    self.on_status("nvml", {"status": "unresponsive", "reason": f"{s.call} did not return"})
                    proc.kill()  # may not die (uninterruptible driver call): never wait for it
                    self._stuck.append(proc)
                    _close_pipes(proc)
                    return s.since_ns
                if rc is not None:
                    _close_pipes(proc)
                    if self._halt.is_set():
                        return "stopped"
                    self._event(type="sampler-exited", rc=rc, sampled=sampled)
                    return "recovered-then-ended" if sampled else "ended"
                time.sleep(POLL_S)

    def _handle(self, msg: dict[str, Any]) -> str | None:
        """Turn one status line of the sampler into manifest updates."""
        if msg.get("status") == "unavailable":
            reason = str(msg.get("reason", ""))
            self.on_status("nvml", {"status": "unavailable", "reason": reason})
            self.on_status("nvml_events", {"status": "unavailable", "reason": "NVML unavailable"})
            return "unavailable"
        if msg.get("status") == "ok":
            self.on_status("nvml", {"status": "ok", "gpus": msg.get("gpus"), "names": msg.get("names")})
        elif "listener" in msg:
            info = {"status": msg["listener"]}
            for key in ("reason", "types"):
                if key in msg:
                    info[key] = msg[key]
            self.on_status("nvml_events", info)
        elif "lost" in msg:  # a file the sampler could not write (disk full)
            self.on_status("lost", {"file": str(msg["lost"]), "error": str(msg.get("error")),
                                    "offset": msg.get("offset")})
        elif msg.get("static") == "failed":
            self.on_status("host_gpus", {"status": "failed", "reason": msg.get("reason", "")})
        return None

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                self._stuck.append(proc)
        _close_pipes(proc)

    def _event(self, **event: Any) -> None:
        if self.events is not None:
            write_event(self.events, **event)
            self.events.fsync()

    def close(self) -> None:
        self._reap_stuck()
        if self.events is not None:
            self.events.close()


def _read_lines(fd: int, buf: bytes) -> tuple[bytes, list[dict[str, Any]]]:
    try:
        while chunk := os.read(fd, 65536):
            buf += chunk
    except (BlockingIOError, OSError):
        pass
    *complete, buf = buf.split(b"\n")
    out = []
    for raw in complete:
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        if isinstance(msg, dict):
            out.append(msg)
    return buf, out


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for f in (proc.stdout,):
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()
