"""Follow the kernel log into the bundle: ``/dev/kmsg``, else ``journalctl -k``, else ``dmesg``.

``/dev/kmsg`` (``kmsg.log``): every record is kept exactly as read (``pri,seq,usec,flags;
message`` plus its `` KEY=value`` continuation lines). The device is read from its
start, and records stamped within ``BEFORE_S`` (5 minutes) before the recorder
started are kept as context; older ones are skipped. Then new records are appended as
they arrive. A gap in ``seq`` (the ring overwrote records before we read them) is kept
visible: the sequence numbers stay in the raw records.

``journalctl -k -f -o json`` (``journal.jsonl``): one JSON object per line as journalctl
prints it, from ``BEFORE_S`` before start. ``dmesg`` (``dmesg.txt``): run every
``DMESG_PERIOD_S``; lines newer than the last one kept are appended.

Which source was used, or why none could be, goes to the manifest. Every external
command has a timeout; nothing here can stop the run.
"""

from __future__ import annotations

import errno
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forensics.lazy_re import lazy_compile
from forensics.record.bounded import run_bounded
from forensics.record.lifeline import die_with_recorder
from forensics.record.writer import AppendFile

__all__ = ["KMSG_ENV", "SOURCES_ENV", "KernelLogFollower"]

KMSG_ENV = "FORENSICS_KMSG_PATH"  # another kmsg device/file (tests)
SOURCES_ENV = "FORENSICS_KERNEL_LOG"  # e.g. "kmsg,journal,dmesg" (default) or "none"
BEFORE_S = 300.0
DMESG_PERIOD_S = 2.0
_DMESG_STAMP = lazy_compile(rb"^\[\s*(\d+)\.(\d+)\]")


class KernelLogFollower(threading.Thread):
    def __init__(self, bundle: Path, start_uptime_us: int, on_status: Callable[[str, dict[str, Any]], None],
                 files: Callable[[AppendFile], AppendFile]) -> None:
        super().__init__(name="forensics-kernel-log", daemon=True)
        self.bundle = bundle
        self.start_uptime_us = start_uptime_us
        self.on_status = on_status
        self.register = files  # hands each opened file to the flusher
        self._halt = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None

    def request_stop(self) -> None:
        """Begin stopping; :meth:`stop` waits."""
        self._halt.set()

    def stop(self, timeout: float = 2.0) -> None:
        self._halt.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
        self.join(timeout)
        if proc is not None and proc.poll() is None:
            proc.kill()

    def run(self) -> None:
        order = os.environ.get(SOURCES_ENV, "kmsg,journal,dmesg").split(",")
        reasons: list[str] = []
        try:
            for name in order:
                name = name.strip()
                if name == "kmsg":
                    reason = self._kmsg()
                elif name == "journal":
                    reason = self._journal()
                elif name == "dmesg":
                    reason = self._dmesg()
                else:
                    continue
                if reason is None:
                    return
                reasons.append(reason)
            self.on_status("kernel_log", {"status": "unavailable",
                                          "reason": "; ".join(reasons) or "disabled (" + SOURCES_ENV + "=none)"})
        except Exception as exc:  # never into the run
            self.on_status("kernel_log", {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"})

    # -- /dev/kmsg ------------------------------------------------------------------------------
    def _kmsg(self) -> str | None:
        path = os.environ.get(KMSG_ENV, "/dev/kmsg")
        if sys.platform == "win32":  # not started there (the platform says why); tells mypy so
            return f"{path}: no kernel ring buffer on Windows"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            return f"{path}: {exc.strerror}"
        out = self.register(AppendFile(self.bundle / "kmsg.log"))
        self.on_status("kernel_log", {"status": "ok", "source": "kmsg", "file": "kmsg.log", "device": path,
                                      "context_before_s": BEFORE_S})
        since_us = self.start_uptime_us - int(BEFORE_S * 1e6)
        carry = b""  # a regular file (tests, a saved kmsg) is read in chunks, not records
        try:
            while not self._halt.is_set():
                try:
                    data = os.read(fd, 16384)
                except BlockingIOError:
                    select.select([fd], [], [], 0.1)  # short: a stop must not wait (the run's exit cost)
                    continue
                except OSError as exc:
                    if exc.errno == errno.EPIPE:  # records overwritten before we read them: go on
                        continue
                    raise
                if not data:
                    if self._halt.wait(0.1):  # end of a regular file: poll for growth
                        break
                    continue
                carry, records = _records(carry + data)
                for rec in records:
                    if _kmsg_usec(rec) >= since_us:
                        out.write(rec)
        finally:
            os.close(fd)
        return None

    # -- journalctl -------------------------------------------------------------------------------
    def _journal(self) -> str | None:
        exe = shutil.which("journalctl")
        if exe is None:
            return "journalctl: not installed"
        probe = run_bounded(die_with_recorder([exe, "-k", "-n", "1", "-q", "--no-pager", "-o", "json"]), timeout=5)
        if probe.problem:
            return f"journalctl: {probe.problem}"
        if probe.rc != 0 or not probe.stdout.strip():
            lines = probe.stderr.decode(errors="replace").strip().splitlines() or ["no kernel entries"]
            return "journalctl: " + lines[0]
        since = datetime.fromtimestamp(time.time() - BEFORE_S, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        out = self.register(AppendFile(self.bundle / "journal.jsonl"))
        self._proc = subprocess.Popen(die_with_recorder([exe, "-k", "-f", "-q", "--no-pager", "-o", "json",
                                                         "--since", since]),
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.on_status("kernel_log", {"status": "ok", "source": "journal", "file": "journal.jsonl",
                                      "context_before_s": BEFORE_S})
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while not self._halt.is_set():
            ready, _, _ = select.select([fd], [], [], 0.1)
            if not ready:
                continue
            data = os.read(fd, 65536)
            if not data:
                break
            out.write(data)
        return None

    # -- dmesg ----------------------------------------------------------------------------------
    def _dmesg(self) -> str | None:
        exe = shutil.which("dmesg")
        if exe is None:
            return "dmesg: not installed"
        first = _run_dmesg(exe)
        if isinstance(first, str):
            return first
        out = self.register(AppendFile(self.bundle / "dmesg.txt"))
        self.on_status("kernel_log", {"status": "ok", "source": "dmesg", "file": "dmesg.txt",
                                      "period_s": DMESG_PERIOD_S, "context_before_s": BEFORE_S})
        last_us = self.start_uptime_us - int(BEFORE_S * 1e6)
        lines: list[bytes] | str = first
        while True:
            if not isinstance(lines, str):
                fresh = [ln for ln in lines if _dmesg_usec(ln) > last_us]
                if fresh:
                    out.write(b"".join(fresh))
                    last_us = max(_dmesg_usec(ln) for ln in fresh)
            if self._halt.wait(DMESG_PERIOD_S):
                break
            lines = _run_dmesg(exe)
        return None


def _records(data: bytes) -> tuple[bytes, list[bytes]]:
    """Split complete kmsg records (a header line plus its `` KEY=value`` lines); keep the rest.
    From /dev/kmsg every read is exactly one record, so nothing is ever kept back there."""
    end = data.rfind(b"\n") + 1
    records: list[bytes] = []
    for line in data[:end].splitlines(keepends=True):
        if line.startswith(b" ") and records:
            records[-1] += line
        else:
            records.append(line)
    return data[end:], records


def _kmsg_usec(rec: bytes) -> int:
    try:
        return int(rec.split(b";", 1)[0].split(b",")[2])
    except (IndexError, ValueError):
        return 1 << 62  # keep what cannot be read


def _dmesg_usec(line: bytes) -> int:
    m = _DMESG_STAMP.match(line)
    return int(m[1]) * 1_000_000 + int(m[2][:6].ljust(6, b"0")) if m else -1


def _run_dmesg(exe: str) -> list[bytes] | str:
    res = run_bounded([exe], timeout=10)
    if res.problem:
        return f"dmesg: {res.problem}"
    if res.rc != 0:
        return "dmesg: " + (res.stderr.decode(errors="replace").strip().splitlines() or ["failed"])[0]
    return res.stdout.splitlines(keepends=True)
