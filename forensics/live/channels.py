"""Where alerts go: ``live.jsonl``, a terminal line, Apprise URLs, a command.

Every delivery but the file's runs in a process of its own under a deadline (``DEADLINE_S``): a
channel that hangs (a webhook that never answers, a command that never ends) is killed and
counted, never waited for; at most ``MAX_IN_FLIGHT`` deliveries run at once (more are dropped and
counted). Apprise is imported only in the delivery process (``python -m forensics.live.deliver``),
so neither the watcher nor the recorder pays for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from forensics.live.alerts import Alert
from forensics.record.lifeline import die_with_recorder

__all__ = ["DEADLINE_S", "Channels", "Delivery"]

DEADLINE_S = 10.0
MAX_IN_FLIGHT = 4


@dataclass
class Delivery:
    channel: str
    alert: str
    ok: bool | None = None  # None: still running
    why: str = ""
    seconds: float = 0.0


@dataclass
class Channels:
    jsonl: Path | None = None
    tell: IO[str] | None = None  # a stream for the one-line alerts (a terminal, the recorder's pipe)
    tell_json: bool = False
    urls: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    deadline_s: float = DEADLINE_S
    run: dict[str, Any] = field(default_factory=dict)
    deliveries: list[Delivery] = field(default_factory=list)
    dropped: int = 0
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, alerts: Sequence[Alert]) -> None:
        for alert in alerts:
            alert.run = self.run
            record = alert.to_json()
            if self.jsonl is not None:
                self._append(record)
            if alert.suppressed:
                continue
            if self.tell is not None:
                with contextlib.suppress(OSError, ValueError):
                    self.tell.write((json.dumps(record, ensure_ascii=False) if self.tell_json else alert.line()) + "\n")
                    self.tell.flush()
            payload = json.dumps(record, ensure_ascii=False).encode()
            if self.urls:
                body = json.dumps({"urls": self.urls, "title": _title(alert), "body": _body(alert)}).encode()
                self._spawn("apprise", alert.id, [sys.executable, "-m", "forensics.live.deliver"], body)
            for cmd in self.commands:
                self._spawn(f"command {cmd}", alert.id, _shell(cmd), payload)

    def _append(self, record: dict[str, Any]) -> None:
        assert self.jsonl is not None
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
        try:
            fd = os.open(self.jsonl, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
        except OSError as exc:
            _say(f"cannot write {self.jsonl}: {exc.strerror or exc}")
            return
        try:
            os.write(fd, line)
            os.fsync(fd)
        except OSError as exc:
            _say(f"cannot write {self.jsonl}: {exc.strerror or exc}")
        finally:
            os.close(fd)

    def _spawn(self, channel: str, alert_id: str, argv: list[str], stdin: bytes) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            if len(self._threads) >= MAX_IN_FLIGHT:
                self.dropped += 1
                _say(f"{channel}: alert {alert_id} dropped ({MAX_IN_FLIGHT} deliveries still running)")
                return
            d = Delivery(channel, alert_id)
            self.deliveries.append(d)
            t = threading.Thread(target=self._deliver, args=(d, argv, stdin), daemon=True,
                                 name=f"forensics-deliver-{alert_id}")
            self._threads.append(t)
        t.start()

    def _deliver(self, d: Delivery, argv: list[str], stdin: bytes) -> None:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(die_with_recorder(argv), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, start_new_session=True, close_fds=True)
        except OSError as exc:
            d.ok, d.why = False, f"cannot start: {exc.strerror or exc}"
            _say(f"{d.channel}: {d.why}")
            return
        try:
            _, err = proc.communicate(stdin, timeout=self.deadline_s)
            d.ok = proc.returncode == 0
            if not d.ok:
                d.why = f"exit {proc.returncode}: " + err.decode("utf-8", "replace").strip()[-300:]
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            d.ok, d.why = False, f"no answer within {self.deadline_s:g} s; killed"
        except OSError as exc:  # a command that exits without reading its stdin: EPIPE
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=self.deadline_s)
            d.ok = proc.returncode == 0
            d.why = "" if d.ok else f"{exc.strerror or exc}"
        finally:
            d.seconds = time.monotonic() - start
            for pipe in (proc.stdin, proc.stderr):  # a killed or failed command's pipes too
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
        if not d.ok:
            _say(f"{d.channel}: alert {d.alert} not delivered ({d.why})")

    def wait(self, timeout: float) -> int:
        """Wait up to ``timeout`` for deliveries in flight; returns how many are still running."""
        end = time.monotonic() + timeout
        for t in list(self._threads):
            t.join(max(0.0, end - time.monotonic()))
        return sum(t.is_alive() for t in self._threads)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if sys.platform != "win32":
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        proc.wait(timeout=2)


def _shell(cmd: str) -> list[str]:
    if sys.platform == "win32":
        return [os.environ.get("COMSPEC", "cmd.exe"), "/c", cmd]
    return ["/bin/sh", "-c", cmd]  # (absolute: die_with_recorder execs it)


def _title(alert: Alert) -> str:
    head = {"new": "alert", "worse": "worse", "recovered": "recovered"}.get(alert.kind, alert.kind)
    host = alert.run.get("host")
    return f"forensics {head}: {alert.title}" + (f" on {host}" if host else "")


def _body(alert: Alert) -> str:
    lines = [alert.line()]
    if alert.kind != "recovered":
        lines += ["", alert.summary]
        if alert.culprit:
            lines += ["", alert.culprit]
        if alert.evidence:
            lines += ["", "Evidence:"] + [f"  {e['origin']}: {e['message'][:200]}" for e in alert.evidence]
        if alert.remedy:
            lines += ["", f"First: {alert.remedy}"]
    if alert.run.get("bundle"):
        lines += ["", f"forensics analyze {alert.run['bundle']}"]
    return "\n".join(lines)


def _say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"forensics watch: {text}\n")
        sys.stderr.flush()
