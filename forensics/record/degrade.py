"""When recording degrades (the disk fills, the bundle directory is removed, a file cannot be
written), say so — once on stderr, as GNU ``tee`` does with ``No space left on device`` — and
write down what was lost from when, while the command runs on untouched.

What is lost goes to the manifest (``"degraded"``: file, error, since, byte offset) and to a
small marker file, :data:`MARKER`, which ``analyze`` reads as well: on a full disk the manifest
may not be rewritable. Room for both is kept from the start in a ballast file
(:data:`BALLAST`, 64 KiB), given back to the file system the moment something is lost. A
bundle directory that vanished is made again to hold the manifest and the marker (the output
written before went with the old directory).
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from forensics.record.clock import iso_utc
from forensics.record.writer import OPEN_FLAGS, atomic_write_json

__all__ = ["BALLAST", "MARKER", "MARKER_FORMAT", "Degradation"]

MARKER = "recording-degraded.json"
MARKER_FORMAT = "gpu-forensics-degraded"
BALLAST = ".forensics-reserve"
BALLAST_BYTES = 64 << 10
#: how a write into a directory being removed fails (``os.strerror``, as the writers report it)
_VANISHED = os.strerror(errno.ENOENT)


class Degradation:
    """What the recording lost; :meth:`lost` may be called from any thread, any number of times."""

    def __init__(self, bundle: Path, persist: Callable[[list[dict[str, Any]]], bool], err_fd: int = 2) -> None:
        self.bundle = bundle
        self.items: list[dict[str, Any]] = []
        self._persist_manifest = persist
        self._err_fd = err_fd
        self._lock = threading.Lock()
        self._said = False
        self._dir_id: tuple[int, int] | None = None
        with contextlib.suppress(OSError):
            st = os.stat(bundle)
            self._dir_id = (st.st_dev, st.st_ino)
            fd = os.open(bundle / BALLAST, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | OPEN_FLAGS, 0o644)
            try:
                os.write(fd, b"\0" * BALLAST_BYTES)
            finally:
                os.close(fd)

    def lost(self, what: str, error: str, offset: int | None = None, note: str = "") -> None:
        """``what`` (a bundle file, or the bundle directory) stopped being written because of ``error``."""
        if what != "bundle directory":
            self.check_directory()  # a file that vanished with its directory: the directory is what to say
        ns = time.time_ns()
        with self._lock:
            if any(i["file"] == what for i in self.items):
                return
            item: dict[str, Any] = {"file": what, "error": error, "since": iso_utc(ns), "since_ns": ns}
            if offset is not None:
                item["offset"] = offset
            if note:
                item["note"] = note
            if what == "bundle directory":
                self._fold_into_removal(item)
            else:
                self.items.append(item)
            # one line on stderr: the first loss — and the bundle directory's removal whenever it comes
            # (a file inside it, deleted by the same removal, may have been noticed a moment before)
            first = not self._said or what == "bundle directory"
            self._said = True
        if first:
            line = (f"forensics record: {what}: {error}; recording degraded from {item['since']} "
                    f"(the command runs on; what was lost is noted in {self.bundle}/{MARKER})\n")
            with contextlib.suppress(OSError):
                os.write(self._err_fd, line.encode())
        self.persist()

    def _fold_into_removal(self, removal: dict[str, Any]) -> None:
        """The directory's removal goes first: a file that vanished a moment before it was noticed
        (``rm -r`` empties a directory before removing it; the manifest's rewrite finds it half
        gone) was lost to the removal, which began then."""
        vanished = [i for i in self.items if i["error"] == _VANISHED]
        if vanished:
            first = min(vanished, key=lambda i: i["since_ns"])
            removal["since"], removal["since_ns"] = first["since"], first["since_ns"]
            removal["first_noticed"] = sorted(i["file"] for i in vanished)
        self.items[:] = [removal] + [i for i in self.items if i["error"] != _VANISHED]

    def check_directory(self) -> None:
        """Called once a second: has the bundle directory been removed or replaced?"""
        if self._dir_id is None or any(i["file"] == "bundle directory" for i in self.items):
            return
        try:
            st = os.stat(self.bundle)
            gone = (st.st_dev, st.st_ino) != self._dir_id
        except FileNotFoundError:
            gone = True
        except OSError:
            return
        if gone:
            self.lost("bundle directory", "removed while recording", note="every file written in it is gone; "
                      "the output after this time is not recorded either")

    def persist(self) -> None:
        with self._lock:
            items = [dict(i) for i in self.items]
        if not items:
            return
        with contextlib.suppress(OSError):
            os.truncate(self.bundle / BALLAST, 0)  # room for the manifest and the marker
        if any(i["file"] == "bundle directory" for i in items):
            with contextlib.suppress(OSError):
                self.bundle.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            atomic_write_json(self.bundle / MARKER, {"format": MARKER_FORMAT, "version": 1, "degraded": items})
        self._persist_manifest(items)

    def close(self) -> None:
        """At the end of a recording: the ballast is not needed any more."""
        with contextlib.suppress(OSError):
            os.unlink(self.bundle / BALLAST)
