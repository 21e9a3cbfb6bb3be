"""Follow growing files: per-file read offsets, rotation, new files in a directory.

A :class:`FollowedFile` hands out what was appended since the last read, complete lines only
(a line still being written waits for its newline; after ``HOLD_S`` without one it is handed out
as it is, so a last line without an end is not held for ever). Rotation is followed both ways
logrotate does it:

* ``copytruncate``: the file shrank below the read offset — the offset goes back to 0 and the
  file is read again from its start (what was appended between the copy and the truncation is
  lost to every reader; ``truncated`` counts these);
* ``rename`` (``create``): the path names another inode — the old file is read to its end through
  the descriptor still open on it, then the new file from its start.

A :class:`Tree` is the set of paths given (files, directories, bundles) and finds files that
appear in a directory. :class:`Wakeup` says whether anything changed since the last look: through
``watchfiles`` (inotify/FSEvents/kqueue) when it is installed, so quiet files cost no reads; files
that change at every look are polled instead (one event per write costs more than one read per
look: 1.5 % of a core at 1,000 writes/s), as are a recording's files from the start.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["MAX_READ", "FollowedFile", "Tree", "Wakeup"]

#: at most this much is read from one file per pass (the rest waits for the next pass)
MAX_READ = 4 << 20
#: a last line without its newline is handed out after this long unchanged
HOLD_S = 2.0
#: lines longer than this are handed out cut (a binary file or a line that never ends)
MAX_LINE = 1 << 20
#: looks in a row that found a change before the watcher polls instead of listening (Wakeup)
BUSY_LOOKS = 20


class FollowedFile:
    """One path followed from a byte offset."""

    def __init__(self, path: Path, start_at_end: bool = False) -> None:
        self.path = path
        self.fd: int | None = None
        self.ino: tuple[int, int] | None = None
        self.offset = 0  # bytes of the current file consumed (handed out)
        self.base = 0  # bytes handed out before the current file (earlier generations): a running position
        self.generation = 0  # rotations seen
        self.truncated = 0
        self._partial = b""
        self._partial_since = 0.0
        self._start_at_end = start_at_end
        self.gone = False

    # -- opening -----------------------------------------------------------------------------------
    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return False
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return False
        self.fd, self.ino = fd, (st.st_dev, st.st_ino)
        if self._start_at_end:
            self.offset = st.st_size
            self._start_at_end = False
        return True

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None

    # -- reading -----------------------------------------------------------------------------------
    def read(self, now: float | None = None, final: bool = False) -> tuple[int, bytes]:
        """``(start, lines)``: what was appended since the last call, complete lines only (``final``:
        also an unfinished last line), and the byte offset in the current file where it begins. After a
        rotation the old file is read to its end first; the new file's lines then begin at 0. Never
        raises on a vanished file."""
        now = time.monotonic() if now is None else now
        if self.fd is None and not self._open():
            self.gone = True
            return self.offset - len(self._partial), b""
        self.gone = False
        data = self._drain()
        if not data and self._renamed():  # the old file is read to its end: on to the new one
            tail = self._flush_partial()
            if tail:
                return self.offset - len(tail), tail
            self.close()
            self.base += self.offset
            self.offset = 0
            self.generation += 1
            if not self._open():
                return 0, b""
            data = self._drain()
        start = self.offset - len(data) - len(self._partial)
        return start, self._lines(data, now, final)

    def _renamed(self) -> bool:
        try:
            st = os.stat(self.path)
        except OSError:
            return False  # gone for now: keep reading the open descriptor
        return (st.st_dev, st.st_ino) != self.ino

    def _drain(self) -> bytes:
        assert self.fd is not None
        try:
            size = os.fstat(self.fd).st_size
        except OSError:
            return b""
        if size < self.offset:  # copytruncate: start again from the top
            self.truncated += 1
            self.base += self.offset
            self.offset = 0
            self.generation += 1
            self._partial = b""
        want = min(size - self.offset, MAX_READ)
        if want <= 0:
            return b""
        try:
            data = os.pread(self.fd, want, self.offset) if hasattr(os, "pread") else self._seek_read(want)
        except OSError:
            return b""
        self.offset += len(data)
        return data

    def _seek_read(self, want: int) -> bytes:
        assert self.fd is not None
        os.lseek(self.fd, self.offset, os.SEEK_SET)
        return os.read(self.fd, want)

    def _flush_partial(self) -> bytes:
        out, self._partial = self._partial, b""
        return out

    def _lines(self, data: bytes, now: float, final: bool) -> bytes:
        if data:
            data = self._partial + data
            self._partial = b""
            cut = data.rfind(b"\n") + 1
            if cut < len(data):
                self._partial = data[cut:]
                self._partial_since = now
                data = data[:cut]
            if len(self._partial) > MAX_LINE:
                data, self._partial = data + self._partial, b""
            return data
        if self._partial and (final or now - self._partial_since >= HOLD_S):
            return self._flush_partial()
        return b""

    @property
    def position(self) -> int:
        """Bytes handed out so far over every generation of the file (the start of what comes next)."""
        return self.base + self.offset - len(self._partial)


class Tree:
    """The files under the paths given: a file is followed as it is, a directory for the files that
    ``wanted(relative path)`` accepts, found again on every :meth:`scan` (new files are picked up).
    Files present at the start are read from their start, unless ``from_end``."""

    def __init__(self, roots: list[Path], wanted: Callable[[Path, str], bool], from_end: bool = False,
                 max_files: int = 256) -> None:
        self.roots = roots
        self.wanted = wanted
        self.from_end = from_end
        self.max_files = max_files
        self.files: dict[Path, FollowedFile] = {}
        self._first = True

    def scan(self, rescan: bool = True) -> list[FollowedFile]:
        """The files followed now (``rescan``: look for new ones in the directories first)."""
        if not rescan and not self._first:
            return list(self.files.values())
        for root in self.roots:
            for path in self._candidates(root):
                if path not in self.files and len(self.files) < self.max_files:
                    self.files[path] = FollowedFile(path, start_at_end=self.from_end and self._first)
        self._first = False
        return list(self.files.values())

    def _candidates(self, root: Path) -> Iterator[Path]:
        if root.is_file() or not root.exists():
            yield root
            return
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if self.wanted(root, path.relative_to(root).as_posix()):
                    yield path

    def close(self) -> None:
        for f in self.files.values():
            f.close()


class Wakeup:
    """Wait until a followed path changes, or ``period`` passes: ``watchfiles`` where it is installed
    (a thread that sets an event), else plain sleeping (polling)."""

    def __init__(self, roots: list[Path], use_watchfiles: bool = True) -> None:
        self._busy = 0
        self._event = threading.Event()
        self._poked = threading.Event()
        self._stop = threading.Event()
        self.mode = "poll"
        if use_watchfiles and os.environ.get("FORENSICS_LIVE_POLL") != "1":
            try:
                import watchfiles  # noqa: F401
            except ImportError:
                return
            targets = [str(r if r.is_dir() else r.parent) for r in roots if r.exists() or r.parent.exists()]
            if targets:
                self.mode = "watchfiles"
                threading.Thread(target=self._watch, args=(targets,), name="forensics-live-watch",
                                 daemon=True).start()

    def _watch(self, targets: list[str]) -> None:
        import watchfiles

        try:
            for _ in watchfiles.watch(*targets, stop_event=self._stop, debounce=50, step=50,
                                      yield_on_timeout=False, raise_interrupt=False, recursive=True):
                self._event.set()
        except Exception:  # noqa: BLE001 - a watcher that cannot watch falls back to polling
            self.mode = "poll"

    def wait(self, period: float) -> None:
        """Sleep ``period``, or less when :meth:`poke` is called."""
        if self._poked.wait(period):
            self._poked.clear()

    def changed(self) -> bool:
        """Whether a followed path changed since the last call (always True when polling). Files that
        change at every look are cheaper to poll than to hear about write by write: after
        ``BUSY_LOOKS`` such looks in a row the watch stops and this polls."""
        if self.mode != "watchfiles":
            return True
        woke = self._event.is_set()
        self._event.clear()
        self._busy = self._busy + 1 if woke else 0
        if self._busy >= BUSY_LOOKS:
            self.mode = "poll"
            self._stop.set()
        return woke

    def poke(self) -> None:
        """Wake the waiting loop now (the run ended, a stop was asked)."""
        self._poked.set()

    def close(self) -> None:
        self._stop.set()
        self._poked.set()
