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

What differs on Windows (``page="path"``, chosen by the platform): the page is a named file the
sampler maps by path (no ``pass_fds`` there; :class:`forensics.record.deadline.PageFile`), the
sampler's status lines are read on a thread (a pipe cannot be made non-blocking there before
Python 3.12), and it is asked to stop by closing its stdin lifeline (``terminate`` there is
``TerminateProcess``). The lifeline is given on every platform: a sampler whose recorder died sees
end of file and ends (:func:`forensics.record.lifeline.hold_lifeline`).
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from forensics.record import deadline
from forensics.record.lifeline import LIFELINE_ARG, helper_flags
from forensics.record.nvml_worker import events_file, write_event
from forensics.record.writer import AppendFile

__all__ = ["DEADLINE_ENV", "NvmlSupervisor", "StatusLines"]

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

    def __init__(self, bundle: Path, interval: float, on_status: Callable[[str, dict[str, Any]], None],
                 page: str = "fd", threaded_reads: bool | None = None) -> None:
        super().__init__(name="forensics-nvml-supervisor", daemon=True)
        self.bundle = bundle
        self.interval = interval
        self.on_status = on_status
        self.deadline_ns = int(float(os.environ.get(DEADLINE_ENV, DEFAULT_DEADLINE_S)) * 1e9)
        if page not in deadline.HANDOVERS:
            raise ValueError(f"unknown deadline page handover {page!r}")
        self.page = page  # how the deadline page reaches the sampler: "fd" (POSIX) or "path" (Windows)
        #: read the sampler's status lines on a thread (Windows) rather than by non-blocking reads
        self.threaded_reads = sys.platform == "win32" if threaded_reads is None else threaded_reads
        self._halt = threading.Event()
        self._stop_wait = 2.0  # how long a stopping sampler may take before it is killed
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

    def request_stop(self, timeout: float = 3.0) -> None:
        """Begin stopping (the sampler is told at once, and killed if not gone after ``timeout``);
        :meth:`stop` waits."""
        self._stop_wait = timeout
        self._halt.set()

    def stop(self, timeout: float = 3.0) -> None:
        """Stop the sampler, waiting at most ``timeout``: one still finishing a call is left to end itself
        (its lifeline is closed; the death signal ends it with the recorder) — the run's end is not held."""
        self._stop_wait = timeout
        self._halt.set()
        self.join(timeout + 0.1)

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
        page_file = deadline.PageFile(self.page)
        argv = [sys.executable, "-m", "forensics.record.nvml_worker", str(self.bundle), repr(self.interval),
                page_file.arg, "static" if static else "-", LIFELINE_ARG]
        try:
            with open(self.bundle / RECORDER_LOG, "ab") as log:
                proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                        pass_fds=page_file.pass_fds, close_fds=True, creationflags=helper_flags(),
                                        env={**os.environ, "FORENSICS_RECORDER_PID": str(os.getpid())})
        except BaseException:
            page_file.close()
            raise
        self.proc = proc
        assert proc.stdout is not None
        status = StatusLines(proc.stdout, threaded=self.threaded_reads)
        try:
            return self._watch(proc, page_file.page, status, recovering_since)
        finally:
            status.close()
            # A stuck sampler keeps its own mapping; a page file given by path goes with its last handle.
            page_file.close()

    def _watch(self, proc: subprocess.Popen[bytes], page: mmap.mmap, status: StatusLines,
               recovering_since: int | None) -> str | int:
        sampled = False
        while True:
            if self._halt.is_set():
                self._terminate(proc)
                return "stopped"
            rc = proc.poll()
            for msg in status.take():
                if self._handle(msg, recovering=recovering_since is not None and not sampled) == "unavailable":
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
                _close_stdin(proc)  # its lifeline: should the kill not take, the sampler ends itself
                self._stuck.append(proc)
                return s.since_ns
            if rc is not None:
                _close_stdin(proc)
                if self._halt.is_set():
                    return "stopped"
                self._event(type="sampler-exited", rc=rc, sampled=sampled)
                return "recovered-then-ended" if sampled else "ended"
            time.sleep(POLL_S)

    def _handle(self, msg: dict[str, Any], recovering: bool = False) -> str | None:
        """Turn one status line of the sampler into manifest updates. While a replacement has not sampled
        yet (``recovering``) the source stays as the stuck one left it: only sampling says it recovered."""
        if msg.get("status") == "unavailable":
            reason = str(msg.get("reason", ""))
            self.on_status("nvml", {"status": "unavailable", "reason": reason})
            self.on_status("nvml_events", {"status": "unavailable", "reason": "NVML unavailable"})
            return "unavailable"
        if msg.get("status") == "ok" and not recovering:
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
            _close_stdin(proc)  # end of file on its lifeline: it stops (on Windows the only polite way)
            if sys.platform != "win32":
                proc.terminate()  # SIGTERM (on Windows terminate() would be TerminateProcess)
            try:
                proc.wait(timeout=self._stop_wait)
            except subprocess.TimeoutExpired:
                proc.kill()
                self._stuck.append(proc)
        _close_stdin(proc)

    def _event(self, **event: Any) -> None:
        if self.events is not None:
            write_event(self.events, **event)
            self.events.fsync()

    def close(self) -> None:
        self._reap_stuck()
        if self.events is not None:
            self.events.close()


class StatusLines:
    """The sampler's JSON status lines from its stdout, without ever blocking the supervisor:
    non-blocking reads, or (``threaded``, Windows) a reader thread that owns the pipe and closes it
    at end of file — a thread blocked in a read must not have its pipe closed under it, so that of
    a stuck sampler stays until the sampler goes."""

    def __init__(self, pipe: IO[bytes], threaded: bool) -> None:
        self._pipe = pipe
        self._fd = pipe.fileno()
        self._buf = b""
        self._chunks: list[bytes] = []
        self._lock = threading.Lock()
        self.threaded = True
        if sys.platform != "win32" and not threaded:
            os.set_blocking(self._fd, False)
            self.threaded = False
        if self.threaded:
            threading.Thread(target=self._pump, name="forensics-nvml-status", daemon=True).start()

    def _pump(self) -> None:
        try:
            while chunk := os.read(self._fd, 65536):
                with self._lock:
                    self._chunks.append(chunk)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                self._pipe.close()

    def take(self) -> list[dict[str, Any]]:
        """The complete lines that came since the last call, as dicts (anything else is skipped)."""
        if self.threaded:
            with self._lock:
                self._buf += b"".join(self._chunks)
                self._chunks.clear()
        else:
            try:
                while chunk := os.read(self._fd, 65536):
                    self._buf += chunk
            except (BlockingIOError, OSError):
                pass
        *complete, self._buf = self._buf.split(b"\n")
        out = []
        for raw in complete:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if isinstance(msg, dict):
                out.append(msg)
        return out

    def close(self) -> None:
        if not self.threaded:
            with contextlib.suppress(OSError):
                self._pipe.close()


def _close_stdin(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
