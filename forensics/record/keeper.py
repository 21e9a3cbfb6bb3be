"""The keeper: the child's output outlives a SIGKILLed recorder.

The recorder forks the keeper before it starts the child. The keeper holds duplicates of
the read ends of the child's output (pipe read ends or pty masters) and the read end of
a *lifeline* pipe whose write end only the recorder holds. While the recorder lives, the
keeper blocks on the lifeline and never touches the output: the recorder reads it alone.

Lifeline protocol (bytes the recorder writes): ``P<pid>\\n`` once the child is running,
``D`` when the recorder has read the child's output to its end. EOF after ``D``: the
keeper exits at once. ``H`` (hand over): the child has ended but another process — a daemon
it left behind — still holds its stdout or stderr; the recorder has finished the bundle and
exits with the child's status, and the keeper passes that output on (terminal, log, index) until
every holder has closed it, so the daemon's writes go where they would have gone without the
recorder and never fail with EPIPE. EOF without ``D``: the recorder died (SIGKILL, OOM killer), so the
keeper takes over: it passes the child's output on to the same stdout/stderr the recorder
echoed to, appends the raw bytes to the bundle's ``stdout.log``/``stderr.log`` (and
receipt records to ``*.idx``), and exits at EOF, or once the child has ended and the
streams stayed quiet for ``DRAIN_S`` (a grandchild holding them open must not keep it).
It never completes the manifest: the bundle stays ``running``, which readers report as
``interrupted`` at the last heartbeat.

Because it holds the read ends, the child's writes never fail with EPIPE (pipe) or EIO
(pty) when the recorder is gone. The keeper ignores the signals the recorder forwards
(the recorder passes them on; the keeper must not add a second copy), never touches the
terminal's settings or foreground group, and runs only code already imported by the
recorder (it is a fork, not a new interpreter).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from forensics.ingest.bundle import IDX_MAGIC, pack_receipt

if sys.platform == "win32":  # it needs fork; the session never imports it there (tells mypy so)
    raise ImportError("forensics.record.keeper is POSIX only")

__all__ = ["DRAIN_S", "Keeper", "KeptStream"]

DRAIN_S = 2.0  # after the child has ended: how long a quiet stream is still read
IDLE_S = 0.25
CHUNK = 1 << 16
MIN_GAP_NS = 10_000_000  # at most one receipt record per 10 ms and stream
FSYNC_S = 1.0
REAP_S = 2.0  # at the normal end: how long the recorder waits for the keeper to leave
IGNORED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
           signal.SIGALRM, signal.SIGPWR, signal.SIGXCPU, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU,
           signal.SIGPIPE)


@dataclass(frozen=True)
class KeptStream:
    read_fd: int  # pipe read end or pty master, shared with the recorder's tee
    echo_fd: int  # 1 or 2: where the recorder echoes this stream
    log: Path  # <bundle>/<stream>.log
    idx: Path  # <bundle>/<stream>.idx


class Keeper:
    """The recorder's handle on its keeper process."""

    def __init__(self, pid: int, lifeline_fd: int) -> None:
        self.pid = pid
        self._fd: int | None = lifeline_fd

    @classmethod
    def start(cls, streams: list[KeptStream]) -> Keeper:
        """Fork the keeper (call before the child exists; raises OSError when it cannot fork)."""
        r, w = os.pipe()  # not inheritable: no other process of the run ever holds the write end
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            raise
        if pid == 0:  # the keeper; never returns into the recorder's code
            code = 1
            try:
                os.close(w)
                code = _keeper_main(r, streams)
            finally:
                os._exit(code)
        os.close(r)
        return cls(pid, w)

    def child_started(self, pid: int) -> None:
        self._send(b"P%d\n" % pid)

    def hand_over(self) -> None:
        """The child has ended, its output is still held open by another process: the keeper passes it on
        until end of file (it is not waited for)."""
        self._send(b"H")
        self.abandon()

    def release(self) -> None:
        """The recorder has read the child's output to its end: let the keeper go, and reap it."""
        self._send(b"D")
        self.abandon()
        deadline = time.monotonic() + REAP_S
        while True:
            try:
                done, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return
            if done:
                return
            if time.monotonic() >= deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(self.pid, 0)
                return
            time.sleep(0.01)

    def abandon(self) -> None:
        """Close the lifeline without ``D``: the keeper takes the output over (or leaves, after ``D``)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _send(self, data: bytes) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):  # a keeper that died early costs its help, never the run
                os.write(self._fd, data)


# -- the keeper process ---------------------------------------------------------------------------
def _keeper_main(lifeline: int, streams: list[KeptStream]) -> int:
    for sig in IGNORED:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_IGN)
    _close_all_but({lifeline, 1, 2, *(s.read_fd for s in streams)})
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDONLY)
        if null != 0:
            os.dup2(null, 0)
            os.close(null)
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
        comm.write("forensics-keep")
    released, child_pid = _wait_on_lifeline(lifeline)
    if released == "done":
        return 0
    _take_over(streams, child_pid, until_eof=released == "handed-over")
    return 0


def _close_all_but(keep: set[int]) -> None:
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd not in keep and fd > 2:
            with contextlib.suppress(OSError):
                os.close(fd)


def _wait_on_lifeline(fd: int) -> tuple[str, int | None]:
    """Block until the recorder closes the lifeline: (``done``, ``handed-over`` or ``died``, the child's pid)."""
    buf = b""
    while True:
        try:
            data = os.read(fd, 256)
        except OSError:
            data = b""
        if not data:
            break
        buf += data
    os.close(fd)
    released = "done" if buf.endswith(b"D") else "handed-over" if buf.endswith(b"H") else "died"
    pid = None
    if buf.startswith(b"P") and b"\n" in buf:
        with contextlib.suppress(ValueError):
            pid = int(buf[1:buf.index(b"\n")])
    return released, pid


class _ChildWatch:
    """Has the child ended? A pidfd when the kernel has them (a zombie counts as ended), else kill(0)."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.fd: int | None = None
        self.ended_at: float | None = None
        if pid is not None:
            try:
                self.fd = os.pidfd_open(pid)
            except (OSError, AttributeError):
                self.fd = None

    def poll(self, ready: list[int]) -> None:
        if self.pid is None or self.ended_at is not None:
            return
        if self.fd is not None:
            if self.fd not in ready:
                return
        else:
            try:
                os.kill(self.pid, 0)
                return
            except ProcessLookupError:
                pass
            except PermissionError:
                return
        self.ended_at = time.monotonic()

    def waitable(self) -> list[int]:
        return [self.fd] if self.fd is not None and self.ended_at is None else []


class _Out:
    """One stream the keeper passes on: log, receipt index, echo."""

    def __init__(self, s: KeptStream) -> None:
        self.echo: int | None = s.echo_fd
        self.log: int | None = None
        self.idx: int | None = None
        self.offset = 0
        self.pending: tuple[int, int] | None = None
        self.last_entry_ns = 0
        with contextlib.suppress(OSError):  # no bundle to write to: still pass the output on
            self.log = os.open(s.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
            self.offset = os.fstat(self.log).st_size  # what the recorder had written: the stream offset
            self.idx = _open_index(s.idx)

    def take(self, data: bytes) -> None:
        now = time.time_ns()
        if self.log is not None:
            _write_all(self.log, data)
        self.offset += len(data)
        self._echo(data)
        self.pending = (self.offset, now)
        if now - self.last_entry_ns >= MIN_GAP_NS:
            self.flush_index()

    def flush_index(self) -> None:
        if self.pending is not None and self.idx is not None:
            end, ns = self.pending
            _write_all(self.idx, pack_receipt(end, ns))
            self.last_entry_ns = ns
            self.pending = None

    def fsync(self) -> None:
        for fd in (self.log, self.idx):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.fsync(fd)

    def _echo(self, data: bytes) -> None:
        if self.echo is None:
            return
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.echo, view):]
            except BlockingIOError:  # someone made the terminal non-blocking: wait, never drop
                select.select([], [self.echo], [], 1.0)
            except OSError:  # the terminal is gone: keep recording
                self.echo = None
                return


def _open_index(path: Path) -> int:
    """Open a receipt index for appending whole records (after a torn one the recorder may have left)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    size = os.fstat(fd).st_size
    if size < len(IDX_MAGIC):  # the recorder died before (or while) writing the magic
        os.ftruncate(fd, 0)
        os.write(fd, IDX_MAGIC)
        size = len(IDX_MAGIC)
    else:
        size -= (size - len(IDX_MAGIC)) % 16  # drop a torn last record
        os.ftruncate(fd, size)
    os.lseek(fd, size, os.SEEK_SET)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    with contextlib.suppress(OSError):  # disk full: the child's run matters more than its log
        while view:
            view = view[os.write(fd, view):]


def _take_over(streams: list[KeptStream], child_pid: int | None, until_eof: bool = False) -> None:
    outs: dict[int, _Out] = {}
    for s in streams:
        with contextlib.suppress(OSError):
            os.set_blocking(s.read_fd, False)
        outs[s.read_fd] = _Out(s)
    child = _ChildWatch(child_pid)
    open_fds = set(outs)
    last_data = time.monotonic()
    last_sync = last_data
    while open_fds:
        try:
            ready, _, _ = select.select([*open_fds, *child.waitable()], [], [], IDLE_S)
        except OSError:
            ready = []
        child.poll(ready)
        for fd in [f for f in ready if f in open_fds]:
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                continue
            except OSError:  # EIO: a pty whose slave side is all closed
                data = b""
            if not data:
                open_fds.discard(fd)
                continue
            outs[fd].take(data)
            last_data = time.monotonic()
        now = time.monotonic()
        if not ready:
            for out in outs.values():
                out.flush_index()
        if now - last_sync >= FSYNC_S:
            for out in outs.values():
                out.fsync()
            last_sync = now
        if not until_eof and child.ended_at is not None and now - max(last_data, child.ended_at) >= DRAIN_S:
            break
    for out in outs.values():
        out.flush_index()
        out.fsync()
