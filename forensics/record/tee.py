"""Tee one output stream of the child: raw bytes to the bundle, the same bytes to the
terminal, and receipt times to a compact index.

The bytes go to ``<stream>.log`` first (one ``os.write``, no buffering: what was read
survives a SIGKILL of the recorder), then to the recorder's own stdout/stderr. If the
terminal goes away (EIO/EPIPE) echoing stops and recording goes on.

The receipt index (``<stream>.idx``, format in :mod:`forensics.ingest.bundle`) holds
``(end_offset, utc_ns)`` pairs: "bytes before end_offset had arrived by utc_ns". A pair
is written for a chunk that completes a line, at most one per ``MIN_GAP_NS``, and for
a chunk without a newline (a ``\\r`` progress bar redraw) at most once a second, plus
once when the stream goes quiet. So the index grows with time and lines, never with
``\\r`` redraws: a 10-hour tqdm bar costs at most a few entries a second.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import sys
import threading
import time

from forensics.ingest.bundle import IDX_MAGIC, pack_receipt
from forensics.record.writer import AppendFile

__all__ = ["StreamTee"]

CHUNK = 1 << 16
MIN_GAP_NS = 10_000_000  # 10 ms between entries for line-completing chunks
BAR_GAP_NS = 1_000_000_000  # 1 s between entries for chunks without a newline
IDLE_S = 0.25
PIPE_BATCH_S = 0.002  # see _pump: how long small writes may gather in a (1 MiB) pipe


class StreamTee(threading.Thread):
    def __init__(self, name: str, src_fd: int, echo_fd: int | None, log: AppendFile, idx: AppendFile,
                 batch_s: float = 0.0) -> None:
        super().__init__(name=f"forensics-tee-{name}", daemon=True)
        self.src_fd = src_fd
        self.echo_fd = echo_fd
        self.batch_s = batch_s
        self.log = log
        self.idx = idx
        self.received = 0
        self.tail = b""  # the last byte passed on (did the output end its line?)
        self.echo_error: str | None = None
        self.eof = threading.Event()
        self._stop_at: float | None = None
        self._quiet_since = 0.0
        self._last_entry_ns = 0
        self._pending: tuple[int, int] | None = None
        self._pending_nl = False
        self.last_data = time.monotonic()
        if idx.size == 0:
            idx.write(IDX_MAGIC)

    def stop_when_quiet(self, grace_s: float) -> None:
        """After the child is gone: stop at EOF, or once no byte came for ``grace_s``
        (a grandchild that kept the pipe open must not keep the recorder alive)."""
        self._quiet_since = time.monotonic()
        self._stop_at = grace_s

    def run(self) -> None:
        if sys.platform == "win32":  # a pipe cannot be polled there: platform/windows.py's BlockingTee
            raise NotImplementedError("StreamTee polls its stream; use BlockingTee on Windows")
        os.set_blocking(self.src_fd, False)
        try:
            self._pump()
        except Exception:  # the recorder must not die in a tee; stop quietly
            pass
        finally:
            self._flush_pending()
            self.eof.set()

    def _pump(self) -> None:
        fd = self.src_fd
        while True:
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                self._idle()
                quiet = time.monotonic() - max(self.last_data, self._quiet_since)
                if self._stop_at is not None and quiet >= self._stop_at:
                    return
                with contextlib.suppress(InterruptedError):
                    select.select([fd], [], [], IDLE_S)
                continue
            except OSError as exc:
                if exc.errno == errno.EIO:  # a pty whose slave side is closed: end of stream
                    return
                raise
            if not data:
                return
            now = time.time_ns()
            self.last_data = time.monotonic()
            self.log.write(data)  # at once: the keeper goes on from here if this process is SIGKILLed
            self._echo(data)
            self.received += len(data)
            self.tail = data[-1:]
            self._index(now, b"\n" in data)
            if self.batch_s and len(data) < CHUNK:
                # A burst of small writes: let them gather in the pipe for a moment rather than wake
                # up (and make the child wake us) for each one. A pty's buffer is too small for this.
                time.sleep(self.batch_s)

    def _index(self, now: int, newline: bool) -> None:
        self._pending = (self.received, now)
        self._pending_nl = self._pending_nl or newline
        gap = MIN_GAP_NS if self._pending_nl else BAR_GAP_NS
        if now - self._last_entry_ns >= gap:
            self._flush_pending()

    def _idle(self) -> None:
        if self._pending is not None and time.monotonic() - self.last_data >= IDLE_S:
            self._flush_pending()

    def _flush_pending(self) -> None:
        if self._pending is None:
            return
        end, ns = self._pending
        self.idx.write(pack_receipt(end, ns))
        self._last_entry_ns = ns
        self._pending = None
        self._pending_nl = False

    def _echo(self, data: bytes) -> None:
        fd = self.echo_fd
        if fd is None or self.echo_error is not None:
            return
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:  # someone made the terminal non-blocking: wait, never drop
                select.select([], [fd], [], 1.0)
            except OSError as exc:
                self.echo_error = os.strerror(exc.errno or errno.EIO)
                return
