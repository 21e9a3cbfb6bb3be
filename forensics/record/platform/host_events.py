"""The Windows System log's GPU-relevant events, read into the bundle as XML while the child runs.

Used on native Windows and inside WSL2 (through interop, which runs ``wevtutil.exe`` on the host).
A query (:class:`EventQuery`) is one ``wevtutil qe <channel> /q:<XPath> /f:xml`` call, or a
``powershell.exe Get-WinEvent -FilterXPath`` call where wevtutil is absent. The follower asks for
the ``BEFORE_S`` (10 minutes) before the start, then every ``POLL_S`` for events newer than the
last ``EventRecordID`` it kept (per channel), and once more when the run ends. Each new event is
appended to ``host-events.xml`` exactly as the host printed it (each ``<Event>`` on a line of its
own, so the Windows-event XML parser reads the file), each batch after a comment naming its receipt time;
``host-events.idx`` holds the same receipt times in the receipt-index format of ``stdout.idx``.

Interop can hang or be switched off: every call runs under a deadline (``CALL_TIMEOUT_S``), a
call that overruns is killed and counted, and when the host cannot be asked at all the manifest's
``host_events`` source says ``unavailable`` with the reason. Nothing here can delay the child.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.ingest.bundle import IDX_MAGIC, pack_receipt
from forensics.lazy_re import lazy_compile
from forensics.record.clock import iso_utc
from forensics.record.writer import AppendFile

__all__ = ["CHANNELS", "EVENTS_FILE", "EventQuery", "HostEventFollower", "QueryResult", "Runner",
           "as_utf8", "powershell_query", "run_with_deadline", "split_events", "wevtutil_query", "xpath"]

EVENTS_FILE = "host-events.xml"
INDEX_FILE = "host-events.idx"
BEFORE_S = 600.0
POLL_ENV = "FORENSICS_HOST_EVENTS_POLL_S"
POLL_S = 3.0
CALL_TIMEOUT_S = 15.0
TIMEOUT_ENV = "FORENSICS_HOST_EVENTS_TIMEOUT_S"

#: System-log providers whose events explain a GPU failure on Windows: the NVIDIA driver, the
#: display class driver's TDR report (Display 4101), hardware errors, unexpected power loss,
#: bugchecks (volmgr's dump, the "rebooted from a bugcheck" report) and the DirectX kernel.
SYSTEM_PROVIDERS = ("nvlddmkm", "Display", "Microsoft-Windows-WHEA-Logger", "Microsoft-Windows-Kernel-Power",
                    "volmgr", "BugCheck", "Microsoft-Windows-WER-SystemErrorReporting", "Microsoft-Windows-DxgKrnl",
                    "dxgkrnl")


@dataclass(frozen=True)
class Channel:
    """One log and the part of an XPath filter that picks its events."""

    name: str
    providers: tuple[str, ...]
    data_equals: str | None = None  # an EventData/Data value the event must hold


#: LiveKernelEvent reports (a TDR's live dump: 141, 117, 1a1 …) are written by Windows Error
#: Reporting to the Application log, named in its event data.
CHANNELS = (Channel("System", SYSTEM_PROVIDERS),
            Channel("Application", ("Windows Error Reporting",), data_equals="LiveKernelEvent"))


def xpath(channel: Channel, *, within_ms: int | None = None, after_record: int | None = None) -> str:
    """The XPath query (Windows Event Log's subset of XPath 1.0; under its 20-expression limit)."""
    conds = ["(" + " or ".join(f"@Name='{p}'" for p in channel.providers) + ")"]
    system = [f"Provider[{conds[0]}]"]
    if after_record is not None:
        system.append(f"EventRecordID > {after_record}")
    if within_ms is not None:
        system.append(f"TimeCreated[timediff(@SystemTime) <= {within_ms}]")
    query = "*[System[" + " and ".join(system) + "]"
    if channel.data_equals is not None:
        query += f" and EventData[Data='{channel.data_equals}']"
    return query + "]"


def wevtutil_query(exe: str, channel: str, query: str) -> list[str]:
    return [exe, "qe", channel, f"/q:{query}", "/f:xml"]


def powershell_query(exe: str, channel: str, query: str) -> list[str]:
    """``Get-WinEvent`` printing each event's XML; newest first, which the follower sorts out."""
    quoted = query.replace("'", "''")
    script = ("[Console]::OutputEncoding = [System.Text.Encoding]::UTF8; "
              f"Get-WinEvent -LogName '{channel}' -FilterXPath '{quoted}' -ErrorAction SilentlyContinue"
              " | ForEach-Object { $_.ToXml() }")
    return [exe, "-NoProfile", "-NonInteractive", "-Command", script]


@dataclass
class QueryResult:
    stdout: bytes = b""
    problem: str | None = None  # why there is no answer (cannot run, timed out, failed: first stderr line)


Runner = Callable[[Sequence[str], float], QueryResult]


class _Killable:
    """The process of the call in flight, so that stopping the follower can end it."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None

    def kill(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()


def run_with_deadline(argv: Sequence[str], timeout: float, holder: _Killable | None = None) -> QueryResult:
    """Run one host query; a call past ``timeout`` is killed, and never waited on without limit."""
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, close_fds=True)
    except OSError as exc:
        return QueryResult(problem=f"cannot run {os.path.basename(argv[0])}: {exc.strerror or exc}")
    if holder is not None:
        holder.proc = proc
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):  # stuck in interop: leave it
            proc.communicate(timeout=2.0)
        return QueryResult(problem=f"{os.path.basename(argv[0])} timed out after {timeout:g} s")
    finally:
        if holder is not None:
            holder.proc = None
    if proc.returncode != 0:
        first = (err.decode(errors="replace").strip().splitlines() or [f"exit status {proc.returncode}"])[0]
        return QueryResult(stdout=out, problem=f"{os.path.basename(argv[0])} failed: {first}")
    return QueryResult(stdout=out)


def as_utf8(raw: bytes) -> bytes:
    """The host's answer as UTF-8: a Windows tool writing to a pipe may print UTF-16 (with or without
    a byte-order mark) or UTF-8 with a mark; anything else is kept as it came."""
    if raw.startswith(b"\xff\xfe") or (len(raw) > 1 and raw[0:1] == b"<" and raw[1:2] == b"\0"):
        return raw.decode("utf-16-le", errors="replace").lstrip("\ufeff").encode()
    return raw.removeprefix(b"\xef\xbb\xbf")


_EVENT = lazy_compile(rb"<Event[\s>].*?</Event>", re.S)
_RECORD_ID = lazy_compile(rb"<EventRecordID>\s*(\d+)\s*</EventRecordID>")


def split_events(xml: bytes) -> list[tuple[int | None, bytes]]:
    """``(EventRecordID, element)`` for every ``<Event>`` the host printed, oldest record first."""
    out: list[tuple[int | None, bytes]] = []
    for m in _EVENT.finditer(as_utf8(xml)):
        rid = _RECORD_ID.search(m.group(0))
        out.append((int(rid.group(1)) if rid else None, m.group(0)))
    out.sort(key=lambda e: -1 if e[0] is None else e[0])
    return out


@dataclass(frozen=True)
class EventQuery:
    """How this machine asks the host: ``tool`` (``wevtutil`` / ``powershell``) at ``exe``."""

    tool: str
    exe: str

    def argv(self, channel: str, query: str) -> list[str]:
        build = wevtutil_query if self.tool == "wevtutil" else powershell_query
        return build(self.exe, channel, query)


def _float_env(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


@dataclass
class _ChannelState:
    last_record: int | None = None
    kept: int = 0
    problem: str | None = None
    answered: bool = False
    seen: set[int] = field(default_factory=set)


class HostEventFollower(threading.Thread):
    """Poll the host's event logs into ``host-events.xml`` until :meth:`stop`."""

    def __init__(self, bundle: Path, query: EventQuery, on_status: Callable[[str, dict[str, Any]], None],
                 files: Callable[[AppendFile], AppendFile], *, via: str,
                 runner: Runner | None = None, channels: Sequence[Channel] = CHANNELS) -> None:
        super().__init__(name="forensics-host-events", daemon=True)
        self.bundle = bundle
        self.query = query
        self.on_status = on_status
        self.register = files
        self.via = via  # "interop" (WSL2) or "local" (native Windows)
        self.channels = list(channels)
        self.poll_s = _float_env(POLL_ENV, POLL_S)
        self.timeout_s = _float_env(TIMEOUT_ENV, CALL_TIMEOUT_S)
        self._inflight = _Killable()
        self._run = runner or (lambda argv, timeout: run_with_deadline(argv, timeout, self._inflight))
        self._halt = threading.Event()
        self._abandon = threading.Event()  # stop() gave up waiting: start no further call
        self._t0 = time.monotonic()
        self._state = {c.name: _ChannelState() for c in self.channels}
        self._out: AppendFile | None = None
        self._idx: AppendFile | None = None
        self.polls = 0
        self.timeouts = 0

    def stop(self, timeout: float | None = None) -> None:
        """Ask once more (events the driver logged as the child died), then end; a call still hanging
        after its deadline is killed."""
        self._halt.set()
        self.join(self.timeout_s + 3.0 if timeout is None else timeout)
        self._abandon.set()
        self._inflight.kill()
        self.join(2.0)

    def run(self) -> None:
        try:
            self._poll()
            if not any(s.answered for s in self._state.values()):
                problems = "; ".join(f"{n}: {s.problem}" for n, s in self._state.items() if s.problem)
                self.on_status("host_events", {"status": "unavailable", "via": self.via, "tool": self.query.tool,
                                               "reason": problems or "no answer"})
                return
            while not self._halt.wait(self.poll_s):
                self._poll()
            self._poll()  # the last look, after the child ended
            self._report()
        except Exception as exc:  # never into the run
            self.on_status("host_events", {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"})

    def _poll(self) -> None:
        self.polls += 1
        elapsed_ms = int((time.monotonic() - self._t0) * 1000)
        for channel in self.channels:
            if self._abandon.is_set():
                return
            state = self._state[channel.name]
            if state.last_record is None:  # nothing kept yet: the host's own clock decides "recent"
                q = xpath(channel, within_ms=int(BEFORE_S * 1000) + elapsed_ms)
            else:
                q = xpath(channel, after_record=state.last_record)
            res = self._run(self.query.argv(channel.name, q), self.timeout_s)
            if res.problem is not None:
                state.problem = res.problem
                if "timed out" in res.problem:
                    self.timeouts += 1
                continue
            first_answer = not state.answered
            state.answered = True
            state.problem = None
            self._keep(channel.name, state, res.stdout)
            if first_answer:
                self._report()

    def _keep(self, name: str, state: _ChannelState, xml: bytes) -> None:
        fresh = [(rid, ev) for rid, ev in split_events(xml) if rid is None or rid not in state.seen]
        if not fresh:
            return
        if self._out is None:
            self._out = self.register(AppendFile(self.bundle / EVENTS_FILE))
            self._idx = self.register(AppendFile(self.bundle / INDEX_FILE))
            if self._idx.size == 0:
                self._idx.write(IDX_MAGIC)
        now = time.time_ns()
        lines = [f"<!-- received {iso_utc(now)} from {self.query.tool} ({name}) -->\n".encode()]
        for rid, ev in fresh:
            lines.append(ev + b"\n")
            if rid is not None:
                state.seen.add(rid)
                state.last_record = rid if state.last_record is None else max(state.last_record, rid)
        state.kept += len(fresh)
        self._out.write(b"".join(lines))
        assert self._idx is not None
        self._idx.write(pack_receipt(self._out.size, now))

    def _report(self) -> None:
        info: dict[str, Any] = {
            "status": "ok", "via": self.via, "tool": self.query.tool, "exe": self.query.exe,
            "file": EVENTS_FILE, "index": INDEX_FILE, "context_before_s": BEFORE_S, "period_s": self.poll_s,
            "call_timeout_s": self.timeout_s, "polls": self.polls, "timeouts": self.timeouts,
            "channels": {n: {"events": s.kept, "last_record_id": s.last_record,
                             **({"problem": s.problem} if s.problem else {})} for n, s in self._state.items()},
        }
        self.on_status("host_events", info)
