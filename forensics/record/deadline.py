"""Per-call deadlines for NVML, shared between the sampler process and its supervisor.

The sampler process writes "call X on GPU N started at T" into a small shared memory
page before every NVML call and clears it afterwards (two ``struct.pack_into``, about a
microsecond). The supervisor in the recorder reads the page ten times a second; a call
older than its deadline means NVML (the driver) stopped answering. A blocked call
cannot be cancelled, so the supervisor records the event and replaces the process.

Layout: ``SLOTS`` slots of ``SLOT_BYTES`` each: ``u64 start_ns`` (0 = idle),
``i32 gpu``, ``u32 extra_ms`` (time the call may legitimately block, e.g. an event
wait), ``48 bytes`` call name (UTF-8, NUL padded).

The page is a small file both processes map (:class:`PageFile`), handed over one of two ways:

* ``fd`` (POSIX): an unlinked temporary file whose descriptor the sampler inherits
  (``pass_fds``); nothing is left on disk even when the recorder is SIGKILLed.
* ``path`` (Windows, which has no ``pass_fds``): a named file in the temporary directory that the
  sampler opens and maps by name. On Windows both sides open it ``O_TEMPORARY`` (delete on close,
  shared for deletion), so it goes when the last handle does — a sampler stuck in the driver keeps
  it until it dies; elsewhere whoever closes it last also unlinks it.

The sampler is told which by its page argument (:func:`page_arg`, :func:`map_page_arg`).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import secrets
import struct
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["HANDOVERS", "PAGE_BYTES", "SLOTS", "SLOT_BYTES", "CallGuard", "PageFile", "Stuck", "map_page_arg",
           "open_page", "read_slots"]

SLOT_BYTES = 64
SLOTS = 4  # 0: sampler thread, 1: event listener thread
PAGE_BYTES = SLOTS * SLOT_BYTES
HANDOVERS = ("fd", "path")
#: how a page file is opened by path: delete-on-close and shareable for deletion on Windows
#: (``O_TEMPORARY``), binary; both are 0 elsewhere
_PATH_FLAGS = os.O_RDWR | getattr(os, "O_TEMPORARY", 0) | getattr(os, "O_BINARY", 0)
_HEAD = struct.Struct("<QiI")
_NAME_BYTES = SLOT_BYTES - _HEAD.size

T = TypeVar("T")


def open_page(fd: int) -> mmap.mmap:
    """Map the shared page behind ``fd`` (created by the supervisor, ``PAGE_BYTES`` long)."""
    return mmap.mmap(fd, PAGE_BYTES)


class PageFile:
    """The supervisor's side of one sampler's page: ``page`` (the map), ``arg`` (what the sampler is
    given to find it) and ``pass_fds`` (the descriptors it must inherit for that)."""

    def __init__(self, handover: str) -> None:
        if handover not in HANDOVERS:
            raise ValueError(f"unknown deadline page handover {handover!r}")
        self.path: str | None = None
        if handover == "fd":
            fd = _unlinked_file()
            self.pass_fds: tuple[int, ...] = (fd,)
            self.arg = str(fd)
        else:
            self.path = os.path.join(tempfile.gettempdir(), f"forensics-nvml-{os.getpid()}-{secrets.token_hex(6)}.page")
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | _PATH_FLAGS, 0o600)
            self.pass_fds = ()
            self.arg = self.path
        self._fd: int | None = fd
        try:
            os.ftruncate(fd, PAGE_BYTES)
            self.page = open_page(fd)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Unmap and close; a page file given by path is removed where the system lets it go."""
        if getattr(self, "page", None) is not None:
            with contextlib.suppress(BufferError, ValueError):
                self.page.close()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self.path is not None:
            with contextlib.suppress(OSError):  # Windows: still open in a sampler (it goes with it)
                os.unlink(self.path)


def _unlinked_file() -> int:
    fd, path = tempfile.mkstemp(prefix="forensics-nvml-", suffix=".page")
    os.unlink(path)
    return fd


def map_page_arg(arg: str) -> tuple[mmap.mmap | None, Callable[[], None]]:
    """The sampler's side: map the page its argument names (``-1``: none; digits: an inherited
    descriptor; anything else: a page file's path). Returns the map and what to call as the
    sampler ends (the map itself stays until the process goes: a thread may still be in a call)."""
    if arg.lstrip("-").isdigit():
        fd = int(arg)
        return (open_page(fd) if fd >= 0 else None), lambda: None
    fd = os.open(arg, _PATH_FLAGS)
    try:
        page = open_page(fd)
    finally:
        os.close(fd)

    def forget() -> None:  # the recorder may have died first; on Windows it goes with the last handle
        with contextlib.suppress(OSError):
            os.unlink(arg)

    return page, forget


class CallGuard:
    """Publishes each call in one slot while it runs."""

    def __init__(self, page: mmap.mmap | None, slot: int) -> None:
        self._page = page
        self._off = slot * SLOT_BYTES

    def __call__(self, name: str, gpu: int, fn: Callable[..., T], *args: Any, extra_ms: int = 0) -> T:
        page = self._page
        if page is None:
            return fn(*args)
        raw = name.encode()[:_NAME_BYTES]
        page[self._off + _HEAD.size : self._off + SLOT_BYTES] = raw.ljust(_NAME_BYTES, b"\0")
        _HEAD.pack_into(page, self._off, time.time_ns(), gpu, extra_ms)
        try:
            return fn(*args)
        finally:
            _HEAD.pack_into(page, self._off, 0, gpu, 0)


@dataclass(frozen=True)
class Stuck:
    slot: int
    call: str
    gpu: int
    since_ns: int


def read_slots(page: mmap.mmap, now_ns: int, deadline_ns: int) -> list[Stuck]:
    """Calls that have run longer than their deadline (plus their allowed blocking time)."""
    out = []
    for slot in range(SLOTS):
        off = slot * SLOT_BYTES
        start, gpu, extra_ms = _HEAD.unpack_from(page, off)
        if start and now_ns - start > deadline_ns + extra_ms * 1_000_000:
            name = bytes(page[off + _HEAD.size : off + SLOT_BYTES]).rstrip(b"\0").decode(errors="replace")
            out.append(Stuck(slot, name, gpu, start))
    return out
