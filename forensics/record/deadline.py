"""Per-call deadlines for NVML, shared between the sampler process and its supervisor.

The sampler process writes "call X on GPU N started at T" into a small shared memory
page before every NVML call and clears it afterwards (two ``struct.pack_into``, about a
microsecond). The supervisor in the recorder reads the page ten times a second; a call
older than its deadline means NVML (the driver) stopped answering. A blocked call
cannot be cancelled, so the supervisor records the event and replaces the process.

Layout: ``SLOTS`` slots of ``SLOT_BYTES`` each: ``u64 start_ns`` (0 = idle),
``i32 gpu``, ``u32 extra_ms`` (time the call may legitimately block, e.g. an event
wait), ``48 bytes`` call name (UTF-8, NUL padded).
"""

from __future__ import annotations

import mmap
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["SLOTS", "SLOT_BYTES", "CallGuard", "Stuck", "open_page", "read_slots"]

SLOT_BYTES = 64
SLOTS = 4  # 0: sampler thread, 1: event listener thread
_HEAD = struct.Struct("<QiI")
_NAME_BYTES = SLOT_BYTES - _HEAD.size

T = TypeVar("T")


def open_page(fd: int) -> mmap.mmap:
    """Map the shared page behind ``fd`` (created by the supervisor, ``SLOTS*SLOT_BYTES`` long)."""
    return mmap.mmap(fd, SLOTS * SLOT_BYTES)


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
