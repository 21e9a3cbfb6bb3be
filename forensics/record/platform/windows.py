"""Native Windows: the child in its own process group, output teed from pipes, the System log.

* **Process group.** The child is started with ``CREATE_NEW_PROCESS_GROUP``: a console Ctrl-C no
  longer reaches it on its own (Windows disables Ctrl-C in a new group), so the recorder takes it
  and passes it on as ``CTRL_BREAK_EVENT`` to the child's group — exactly once. A console
  Ctrl-Break reaches every process on the console, the child included, so the recorder does not
  send it a second time. Python children see ``CTRL_BREAK_EVENT`` as ``SIGBREAK``. Early signals
  are kept and passed on after the spawn as on POSIX (:class:`forensics.record.relay.SignalRelay`).
* **Output.** Always pipes, read by blocking reads on a thread each (``select`` does not take pipes
  on Windows). Not ConPTY (``pywinpty``): a pseudo console renders the child's output on a virtual
  screen and sends what changed, as terminal sequences — cursor moves, a cleared screen, repeated
  or dropped bytes, one merged stream for stdout and stderr, text decoded to ``str`` — and that
  varies with the Windows build. The bundle keeps the bytes the child wrote, stream by stream;
  the cost is that the child sees a pipe, not a console (no colours, block-buffered Python output
  unless ``PYTHONUNBUFFERED``). See ``docs/bundle-format.md``, *Platforms*.
* **Waiting.** In short slices, so that Ctrl-C handlers run while the child lives.
* **NVML.** Sampled as on Linux (``nvidia-ml-py`` finds ``nvml.dll``); the sampler maps its deadline
  page by path, as Windows has no ``pass_fds`` (``nvml_page = "path"``, :mod:`forensics.record.deadline`).
* **Host events.** ``wevtutil.exe`` from System32, else ``powershell.exe``, through the same
  follower as WSL2 (:mod:`.host_events`); no ``pywin32`` needed.
* **Not here.** No keeper process (it needs ``fork``); no kernel log (the System log stands in).

None of this has been run on Windows: it is type-checked on Linux with ``mypy --platform win32``
and its logic is unit-tested with fakes (``tests/test_record_platform.py``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.record.platform.host_events import EventQuery, HostEventFollower
from forensics.record.relay import SignalRelay
from forensics.record.tee import StreamTee
from forensics.record.writer import AppendFile

__all__ = ["BlockingTee", "WindowsChild", "WindowsPlatform", "WindowsStatus"]

WAIT_SLICE_S = 0.25
KERNEL_LOG_UNAVAILABLE = "Windows has no kernel ring buffer to follow; its System log is read as host_events"


@dataclass
class WindowsStatus:
    code: int | None = None
    signal: int | None = None

    @property
    def shell_status(self) -> int:
        return self.code if self.code is not None else 1


@dataclass
class _Pipe:
    read_fd: int
    child_fd: int
    echo_fd: int
    is_pty: bool = False


def _creationflags() -> int:
    if sys.platform == "win32":
        return subprocess.CREATE_NEW_PROCESS_GROUP
    return 0


def _break_event() -> int:
    if sys.platform == "win32":
        return signal.CTRL_BREAK_EVENT
    return int(signal.SIGINT)


def _handled_signals() -> tuple[int, ...]:
    if sys.platform == "win32":
        return (signal.SIGINT, signal.SIGBREAK)
    return (signal.SIGINT,)


@dataclass
class WindowsChild(SignalRelay):
    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: str | None = None
    popen: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen
    kill: Callable[[int, int], None] = os.kill
    proc: subprocess.Popen[bytes] | None = None
    streams: dict[str, _Pipe] = field(default_factory=dict)
    tty_fd: int | None = None
    forwarded: list[int] = field(default_factory=list)
    _pending: list[int] = field(default_factory=list)
    _old_handlers: dict[int, object] = field(default_factory=dict)

    def open_streams(self) -> dict[str, _Pipe]:
        if not self.streams:
            for name, echo in (("stdout", 1), ("stderr", 2)):
                r, w = os.pipe()
                self.streams[name] = _Pipe(r, w, echo)
        return self.streams

    def _relayed(self) -> Iterable[int]:
        return _handled_signals()

    def start(self) -> None:
        self.open_streams()
        out, err = self.streams["stdout"], self.streams["stderr"]
        try:
            self.proc = self.popen(list(self.argv), stdin=None, stdout=out.child_fd, stderr=err.child_fd,
                                   env=dict(self.env), cwd=self.cwd, creationflags=_creationflags())
        finally:
            for s in (out, err):
                os.close(s.child_fd)
        self._forward_pending()

    def _forward(self, sig: int) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        if sys.platform == "win32" and sig == signal.SIGBREAK:
            return  # the console delivered Ctrl-Break to the child's group already
        self.forwarded.append(sig)
        with contextlib.suppress(OSError):
            self.kill(proc.pid, _break_event())

    def wait(self) -> WindowsStatus:
        proc = self.proc
        assert proc is not None
        while True:
            try:
                return WindowsStatus(code=proc.wait(timeout=WAIT_SLICE_S))
            except subprocess.TimeoutExpired:
                continue

    def take_back_terminal(self) -> None:
        return None

    def sync_window_size(self) -> None:
        return None


class BlockingTee(StreamTee):
    """:class:`StreamTee` reading with blocking reads (a pipe on Windows cannot be polled)."""

    def run(self) -> None:
        try:
            while True:
                data = os.read(self.src_fd, 1 << 16)
                if not data:
                    return
                now = time.time_ns()
                self.last_data = time.monotonic()
                self.log.write(data)
                self._echo(data)
                self.received += len(data)
                self.tail = data[-1:]
                self._index(now, b"\n" in data)
        except Exception:  # the recorder must not die in a tee; stop quietly
            pass
        finally:
            self._flush_pending()
            self.eof.set()


class WindowsPlatform:
    name = "windows"
    keeper = False
    nvml_unavailable: str | None = None
    nvml_page = "path"  # no pass_fds: the sampler maps its deadline page by name (deadline.PageFile)
    kernel_log_unavailable: str | None = KERNEL_LOG_UNAVAILABLE

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.facts: dict[str, Any] | None = {"kind": "windows", "evidence": [f"sys.platform is {sys.platform}"]}

    def child(self, argv: Sequence[str], env: Mapping[str, str]) -> WindowsChild:
        return WindowsChild(argv, env)

    def tee(self, name: str, src_fd: int, echo_fd: int, log: AppendFile, idx: AppendFile,
            batch_s: float = 0.0) -> StreamTee:
        return BlockingTee(name, src_fd, echo_fd, log, idx)

    def tee_runners(self, tees: Sequence[StreamTee], batch_s: float) -> list[Any]:
        """Each stream its own blocking reader (a pipe cannot be polled there)."""
        return list(tees)

    def query_tool(self) -> EventQuery | None:
        root = self.env.get("SystemRoot", r"C:\Windows")
        for tool, exe, sub in (("wevtutil", "wevtutil.exe", ""),
                               ("powershell", "powershell.exe", r"WindowsPowerShell\v1.0")):
            candidate = os.path.join(root, "System32", sub, exe) if sub else os.path.join(root, "System32", exe)
            found = candidate if os.path.isfile(candidate) else shutil.which(exe, path=self.env.get("PATH"))
            if found:
                return EventQuery(tool, found)
        return None

    def host_events(self, bundle: Path, on_status: Callable[[str, dict[str, Any]], None],
                    files: Callable[[AppendFile], AppendFile]) -> HostEventFollower | None:
        query = self.query_tool()
        if query is None:
            on_status("host_events", {"status": "unavailable", "via": "local",
                                      "reason": "neither wevtutil.exe nor powershell.exe found"})
            return None
        return HostEventFollower(bundle, query, on_status, files, via="local")
