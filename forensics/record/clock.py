"""Clocks for the bundle: UTC nanoseconds, the kernel's boot time, the local zone name.

Kernel log records carry microseconds since boot. To turn them into UTC the bundle
stores the boot time measured three ways at start (see docs/bundle-format.md):
``CLOCK_REALTIME - CLOCK_MONOTONIC`` (what printk stamps follow: neither counts
time spent suspended), ``CLOCK_REALTIME - CLOCK_BOOTTIME`` (the brief's choice;
equal to the first on a machine that never suspended) and ``/proc/stat`` btime
(whole seconds, as ``dmesg -T`` uses it).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from datetime import UTC, datetime

__all__ = ["boot_times", "iso_utc", "local_zone_name", "now_ns", "stamp_for_path"]


def now_ns() -> int:
    return time.time_ns()


def iso_utc(ns: int) -> str:
    """``2025-01-31T12:00:00.123456Z`` for UTC nanoseconds."""
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stamp_for_path(ns: int) -> str:
    """A compact UTC stamp for directory names: ``20250131T120000Z``."""
    return datetime.fromtimestamp(ns // 1_000_000_000, UTC).strftime("%Y%m%dT%H%M%SZ")


def _offset(clock: int) -> int:
    """CLOCK_REALTIME minus ``clock``, read as a tight pair (smallest of three tries)."""
    if sys.platform == "win32":  # no clock_gettime there
        raise OSError("no clock_gettime on Windows")
    best: tuple[int, int] | None = None
    for _ in range(3):
        a = time.clock_gettime_ns(time.CLOCK_REALTIME)
        b = time.clock_gettime_ns(clock)
        c = time.clock_gettime_ns(time.CLOCK_REALTIME)
        if best is None or c - a < best[0]:
            best = (c - a, (a + c) // 2 - b)
    assert best is not None
    return best[1]


def boot_times() -> dict[str, int | None]:
    """The boot time in UTC ns by each method; ``None`` where a clock is missing."""
    out: dict[str, int | None] = {"monotonic": None, "boottime": None, "btime": None}
    if sys.platform == "win32":  # no kernel log with boot-relative stamps to place: none is needed
        return out
    with contextlib.suppress(AttributeError, OSError):
        out["monotonic"] = _offset(time.CLOCK_MONOTONIC)
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is not None:
        with contextlib.suppress(OSError):
            out["boottime"] = _offset(boottime)
    try:
        with open("/proc/stat", "rb") as fh:
            for line in fh:
                if line.startswith(b"btime "):
                    out["btime"] = int(line.split()[1]) * 1_000_000_000
                    break
    except (OSError, ValueError, IndexError):
        pass
    return out


def local_zone_name() -> str | None:
    """The IANA name of the local zone (``TZ`` or the ``/etc/localtime`` link), if known."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz and "/" in tz and not tz.startswith("/"):
        return tz
    if tz in ("UTC", "GMT"):
        return "UTC"
    try:
        target = os.path.realpath("/etc/localtime")
    except OSError:
        return None
    marker = "zoneinfo/"
    if marker in target:
        return target.split(marker, 1)[1] or None
    try:
        with open("/etc/timezone", encoding="utf-8") as fh:
            name = fh.read().strip()
            return name or None
    except OSError:
        return None
