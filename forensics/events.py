"""The normalized data every parser produces: :class:`Event` and :class:`MetricSample`.

An event is one happening, one line of ``message`` (multi-line records such as a
traceback keep their full text in ``detail``), placed in UTC nanoseconds when its
time is known, and always pointing back at the raw bytes it came from
(:class:`Origin`). Parsers never drop raw text: the file is the source of truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from types import MappingProxyType
from typing import Any

__all__ = ["EMPTY_ATTRS", "Event", "MetricSample", "Origin", "Severity", "TsSource"]

EMPTY_ATTRS: Mapping[str, Any] = MappingProxyType({})


class TsSource(StrEnum):
    """How an event's time was obtained."""

    EXACT = "exact"  # the line carried an absolute time (zone known or assumed UTC)
    LOCAL = "local"  # the line carried a wall-clock time whose zone is unknown
    BOOT_RELATIVE = "boot-relative"  # seconds since boot, placed via a boot-time anchor
    RECEIPT = "receipt"  # when the recorder read the line
    INFERRED = "inferred"  # placed between stamped neighbours by file order
    NONE = "none"  # no time at all; ordered by file position only


class Severity(IntEnum):
    DEBUG = 10
    INFO = 20
    WARNING = 30
    ERROR = 40
    CRITICAL = 50


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an event's raw text lives: ``path`` (as shown to the user), 1-based ``line``,
    byte ``offset`` of that line's start, and how many physical lines the record spans."""

    path: str
    line: int
    offset: int = 0
    nlines: int = 1

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True, slots=True, eq=False)
class Event:
    """One normalized happening.

    ``kind`` is a short tag from the vocabulary in ARCHITECTURE.md (``xid``, ``aer``,
    ``traceback``, ``cuda-error``, ``c10d``, ``nccl``, ``torchrun``, ``oom-killer``,
    ``progress``, ``winevent``, ``exit``, ``log`` …). ``attrs`` carries parsed fields
    (``xid=79``, ``exitcode=-9``, ``tried_mib=1024.0``).
    ``uptime_ns`` keeps a kernel boot-relative stamp so the timeline can place it
    once it knows the boot time; ``ts`` is UTC nanoseconds or ``None``.
    """

    ts: int | None
    ts_source: TsSource
    source: str
    kind: str
    message: str
    origin: Origin
    severity: Severity = Severity.INFO
    host: str | None = None
    gpu: str | None = None
    rank: int | None = None
    pid: int | None = None
    attrs: Mapping[str, Any] = field(default_factory=lambda: EMPTY_ATTRS)
    detail: str = ""
    uptime_ns: int | None = None

    @property
    def text(self) -> str:
        """The whole record: the message and any continuation lines."""
        return self.detail or self.message

    def __repr__(self) -> str:
        from forensics.units import iso

        message = self.message if len(self.message) <= 80 else self.message[:79] + "…"
        return f"Event({iso(self.ts)}, {self.source!r}, {self.kind!r}, {message!r}, origin='{self.origin}')"


@dataclass(frozen=True, slots=True, eq=False)
class MetricSample:
    """One reading of one GPU at one time (NVML, ``nvidia-smi dmon``, ``--query-gpu``).

    ``values`` uses the column names listed in ARCHITECTURE.md (``mem_used_mib``,
    ``mem_total_mib``, ``util_gpu_pct``, ``power_w``, ``temp_c``, ``sm_clock_mhz``,
    ``clock_reasons``, ``pcie_gen``, ``pcie_gen_max``, ``pcie_width``, ``pcie_width_max`` …).
    """

    ts: int | None
    ts_source: TsSource
    gpu: str
    values: Mapping[str, float]
    origin: Origin
    host: str | None = None
    source: str = "nvml"
