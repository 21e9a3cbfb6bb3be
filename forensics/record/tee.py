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
from collections.abc import Sequence

from forensics.ingest.bundle import IDX_MAGIC, pack_receipt
from forensics.record.lineorder import LineOrder
from forensics.record.writer import AppendFile

__all__ = ["StreamTee", "TeeGroup", "same_destination"]

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

    def halt(self) -> None:
        """Stop at the next idle moment (a blocking reader stops at its next read's end)."""
        self._quiet_since = float("-inf")
        self._stop_at = 0.0

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
            self.take(data)
            self._echo(data)
            if self.batch_s and len(data) < CHUNK:
                # A burst of small writes: let them gather in the pipe for a moment rather than wake
                # up (and make the child wake us) for each one. A pty's buffer is too small for this.
                time.sleep(self.batch_s)

    def take(self, data: bytes) -> None:
        """Bytes read from the child: to the log at once (the keeper goes on from here if this process
        is SIGKILLed), counted, and indexed; the echo is the caller's."""
        now = time.time_ns()
        self.last_data = time.monotonic()
        self.log.write(data)
        self.received += len(data)
        self.tail = data[-1:]
        self._index(now, b"\n" in data)

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


def same_destination(a: int, b: int) -> bool:
    """Do descriptors ``a`` and ``b`` lead to the same file, pipe or terminal (``> log 2>&1``)?"""
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


class TeeGroup(threading.Thread):
    """The streams whose echoes lead to one place, read by one thread (POSIX).

    Every round reads every stream (non-blocking; the one with an unfinished line on the output first,
    then those with a line held back), so a stream's continuation is seen before the bytes another
    stream wrote after it. With more than one stream the echo goes through :class:`LineOrder`: lines
    are passed on whole, in the order they began. The bundle's files get every byte at once."""

    def __init__(self, tees: Sequence[StreamTee], batch_s: float = 0.0) -> None:
        super().__init__(name="forensics-tees-" + "+".join(t.name.removeprefix("forensics-tee-") for t in tees),
                         daemon=True)
        self.tees = list(tees)
        self.batch_s = batch_s
        self.order: LineOrder | None = LineOrder(self._emit) if len(self.tees) > 1 else None
        self._stop_at: float | None = None
        self._quiet_since = 0.0
        self._halt = threading.Event()
        self.handed_over = False

    def stop_when_quiet(self, grace_s: float) -> None:
        """After the child is gone: stop at EOF of every stream, or once none gave a byte for ``grace_s``."""
        self._quiet_since = time.monotonic()
        self._stop_at = grace_s

    def halt(self) -> None:
        """Stop reading at once (the streams are being handed to the keeper); what is held is echoed."""
        self._halt.set()

    @property
    def open_streams(self) -> list[StreamTee]:
        return [t for t in self.tees if not t.eof.is_set()]

    def _emit(self, key: int, data: bytes) -> None:
        self.tees[key]._echo(data)

    def run(self) -> None:
        if sys.platform == "win32":  # a pipe cannot be polled there: platform/windows.py's BlockingTee
            raise NotImplementedError("TeeGroup polls its streams; use BlockingTee on Windows")
        for t in self.tees:
            os.set_blocking(t.src_fd, False)
        try:
            self._pump()
        except Exception:  # the recorder must not die in a tee; stop quietly
            pass
        finally:
            if self.order is not None:
                self.order.flush()
            for t in self.tees:
                t._flush_pending()
                if not self._halt.is_set():
                    t.eof.set()

    def _round_order(self, live: list[int]) -> list[int]:
        order = self.order
        if order is None:
            return live
        first = [k for k in live if k == order.owner]
        held = [k for k in live if k != order.owner and k in order._open]
        return first + held + [k for k in live if k not in first and k not in held]

    def _pump(self) -> None:
        live = list(range(len(self.tees)))
        while live and not self._halt.is_set():
            chunks: list[tuple[int, bytes]] = []
            for key in self._round_order(list(live)):
                t = self.tees[key]
                try:
                    data = os.read(t.src_fd, CHUNK)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    if exc.errno != errno.EIO:  # EIO: a pty whose slave side is closed, end of stream
                        raise
                    data = b""
                if not data:
                    live.remove(key)
                    t.eof.set()
                    if self.order is not None:
                        self.order.close(key)
                        self.order.pump(time.monotonic())
                    continue
                t.take(data)
                chunks.append((key, data))
            if chunks:
                self._pass_on(chunks)
                if self.batch_s:
                    # A burst of small writes: let them gather in the pipe for a moment rather than wake
                    # up (and make the child wake us) for each one. A pty's buffer is too small for this.
                    time.sleep(self.batch_s)
                continue
            if live:
                self._wait(live)

    def _pass_on(self, chunks: list[tuple[int, bytes]]) -> None:
        """One round's reads to the echo. With a shared destination: first what finishes a line already
        begun, then the other streams' bytes, then what those first streams wrote after that line's end
        (a child that ends a line, writes the other stream, then goes on: the order it wrote in)."""
        order = self.order
        if order is None:
            for key, data in chunks:
                self.tees[key]._echo(data)
            return
        now = time.monotonic()
        later: list[tuple[int, bytes]] = []
        begun = [c for c in chunks if c[0] in order._open or c[0] == order.owner]
        for key, data in begun:
            cut = min((i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0), default=len(data) - 1) + 1
            order.add(key, data[:cut], now)
            if cut < len(data):
                later.append((key, data[cut:]))
        for key, data in chunks:
            if (key, data) not in begun:
                order.add(key, data, now)
        for key, data in later:
            order.add(key, data, now)

    def _wait(self, live: list[int]) -> None:
        now = time.monotonic()
        timeout = IDLE_S
        if self.order is not None:
            self.order.pump(now)
            deadline = self.order.next_deadline()
            if deadline is not None:
                timeout = max(0.0, min(timeout, deadline - now))
        for t in self.tees:
            t._idle()
        quiet = now - max([self._quiet_since, *(t.last_data for t in self.tees)])
        if self._stop_at is not None and quiet >= self._stop_at:
            self._halt.set()
            return
        with contextlib.suppress(InterruptedError, OSError, ValueError):
            select.select([self.tees[k].src_fd for k in live], [], [], timeout)
