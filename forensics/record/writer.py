"""Crash-safe writing: append-only files, an atomically replaced manifest, a flusher.

Every byte the recorder receives is handed to the kernel at once (``os.write``, no
user-space buffer), so a SIGKILLed recorder loses nothing already read. The
:class:`Flusher` fsyncs every dirty file once a second and refreshes the heartbeat,
so a power cut loses at most about a second. Write errors (disk full, a vanished
mount) are counted, never raised: the run must go on.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["OPEN_FLAGS", "AppendFile", "Flusher", "atomic_write_json", "fsync_dir"]

#: added to every ``os.open`` of a bundle file: close-on-exec (Windows has none: its handles are not
#: inherited by default) and, on Windows, binary mode (``os.open`` there translates ``\n`` otherwise)
OPEN_FLAGS = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` with ``data`` so that a reader sees the old or the new file, never half."""
    tmp = path.with_name(path.name + ".tmp")
    payload = (json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n").encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | OPEN_FLAGS, 0o644)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    _replace(tmp, path)
    fsync_dir(path.parent)


#: Tries of a rename on Windows, where a reader holding the old file open (``analyze`` or a virus
#: scanner reading the manifest) makes it fail for as long as it holds it.
REPLACE_TRIES = 20


def _replace(tmp: Path, path: Path, tries: int = REPLACE_TRIES, pause_s: float = 0.05) -> None:
    """``os.replace``, tried again for about a second when the target is held open (Windows
    ``PermissionError``); the last failure is raised to the caller, who reports it."""
    for attempt in range(tries):
        try:
            os.replace(tmp, path)
            return
        except PermissionError:
            if sys.platform != "win32" or attempt == tries - 1:
                raise
            time.sleep(pause_s)


class AppendFile:
    """One append-only file written with plain ``os.write`` calls."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0
        self.dropped = 0  # bytes that could not be written (disk full …)
        self.error: str | None = None
        #: called once, with this file, when a write first fails (the recorder says so: degrade.py)
        self.on_error: Callable[[AppendFile], None] | None = None
        self._dirty = False
        self._lock = threading.Lock()
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | OPEN_FLAGS, 0o644)
        self.size = os.fstat(self._fd).st_size

    def write(self, data: bytes) -> bool:
        """Append ``data``; ``False`` (and counted in ``dropped``) when it could not be written."""
        fd = self._fd
        if fd is None or self.error is not None:
            self.dropped += len(data)
            return False
        view = memoryview(data)
        try:
            while view:
                n = os.write(fd, view)
                view = view[n:]
                self.size += n
        except OSError as exc:
            self.error = os.strerror(exc.errno or errno.EIO)
            self.dropped += len(view)
            if self.on_error is not None:
                with contextlib.suppress(Exception):
                    self.on_error(self)
            return False
        self._dirty = True
        return True

    def fsync(self) -> None:
        with self._lock:
            if self._fd is None or not self._dirty:
                return
            self._dirty = False
            with contextlib.suppress(OSError):
                os.fsync(self._fd)

    def close(self) -> None:
        self.fsync()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class Flusher(threading.Thread):
    """Once a second: fsync every dirty file, then call ``tick`` (heartbeat, manifest)."""

    def __init__(self, tick: Callable[[], None], period_s: float = 1.0,
                 on_error: Callable[[AppendFile], None] | None = None) -> None:
        super().__init__(name="forensics-flusher", daemon=True)
        self.files: list[AppendFile] = []
        self.on_error = on_error
        self._tick = tick
        self._period = period_s
        self._halt = threading.Event()

    def add(self, f: AppendFile) -> AppendFile:
        self.files.append(f)
        if f.on_error is None:
            f.on_error = self.on_error
        return f

    def run(self) -> None:
        while not self._halt.wait(self._period):
            self.flush()

    def flush(self) -> None:
        for f in list(self.files):
            f.fsync()
        with contextlib.suppress(Exception):  # the heartbeat must never take the recorder down
            self._tick()

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout=5)
        self.flush()
