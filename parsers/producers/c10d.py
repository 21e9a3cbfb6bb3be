"""ProcessGroupNCCL (c10d) records and other glog-style C++ records from PyTorch.

Three generations share one shape (catalog §1.4)::

    [rank4]:[E321 02:07:08.414640780 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught ...
    [rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught ...
    [E ProcessGroupNCCL.cpp:737] [Rank 0] Watchdog caught ...

The ``.cpp`` line number moves with every release and is never used for meaning; the severity
letter and the message are. The stamp's month is not zero-padded (``E321`` = 21 March).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from forensics.parsers.common.stream_text import Stamp, parse_glog_stamp

from forensics.lazy_re import lazy_compile

__all__ = ["GlogRecord", "is_incomplete", "parse_glog_record", "work_attrs"]

_RECORD = lazy_compile(
    r"^\[(?P<lv>[EWIF])(?:(?P<md>\d{3,4}) (?P<clock>\d\d:\d\d:\d\d\.\d+))?(?: \d+)? ?"
    r"(?P<file>[\w./-]+\.(?:cpp|cc|hpp|h)):(?P<line>\d+)\]\s?(?P<msg>.*)$",
    re.S,
)
_C10D_FILES = ("ProcessGroupNCCL", "NCCLUtils", "ProcessGroupGloo", "TCPStore", "socket.cpp", "Utils.hpp",
               "reducer", "logger.cpp", "FlightRecorder", "ProcessGroupWrapper", "Backend", "ProcessGroup.cpp",
               "comm.hpp", "intra_node_comm", "Work.cpp", "ProcessGroupUCC", "ProcessGroupMPI", "init.cpp")
_LEVELS = {"E": "ERROR", "W": "WARNING", "I": "INFO", "F": "FATAL"}

_PG = (
    re.compile(r"\[PG ID (?P<pg>\d+) PG GUID (?P<guid>[\w-]+)(?:\((?P<name>[^)]*)\))? Rank (?P<rank>\d+)\]"),
    re.compile(r"\[PG (?P<pg>\d+)(?: \((?P<name>[^)]*)\))? Rank (?P<rank>\d+)\]"),
    re.compile(r"\[Rank (?P<rank>\d+)\]"),
)
_WORK = lazy_compile(r"WorkNCCL\(((?:[^()]|\([^()]*\))*)\)")
_WORK_FIELD = lazy_compile(r"(?<!\w)(\w+(?:\(ms\))?)=([^,]+)")
_WORK_KEYS = {"SeqNum": "seq", "OpType": "op_type", "NumelIn": "numel_in", "NumelOut": "numel_out",
              "Timeout(ms)": "timeout_ms"}
#: The watchdog's work numbers in every wording seen (catalog-framework §1.4, §2.10):
#: ``Timeout at NCCL work: 158046, last enqueued NCCL work: 158046, last completed NCCL work: 158045``
#: (~2.3), ``detected by watchdog at work: 1580, last enqueued NCCL work: 1582, …`` (~2.4),
#: ``failure detected by watchdog at work sequence id: 161 PG status: last enqueued work: 168,
#: last completed work: 160`` (2.5+), and the heartbeat monitor's dump line ``Received a dump
#: signal … Last enqueued NCCL work: 160, last completed NCCL work: 160`` (capital L).
_NUMBERS = (
    ("ran_for_ms", re.compile(r"ran for (\d+) milliseconds")),
    ("seq", re.compile(r"\bat (?:NCCL )?work(?: sequence id)?: (\d+)")),
    ("last_enqueued", re.compile(r"\blast enqueued (?:NCCL )?work: (-?\d+)", re.I)),
    ("last_started", re.compile(r"\blast started (?:NCCL )?work: (-?\d+)", re.I)),
    ("last_completed", re.compile(r"\blast completed (?:NCCL )?work: (-?\d+)", re.I)),
)


@dataclass
class GlogRecord:
    """One ``[L<MMDD> <time> file.cpp:N] message`` record."""

    level: str
    file: str
    message: str
    stamp: Stamp | None
    c10d: bool
    attrs: dict[str, Any] = field(default_factory=dict)


def parse_glog_record(text: str) -> GlogRecord | None:
    """Parse a C++ glog record that starts ``text``; ``None`` when it is not one."""
    m = _RECORD.match(text)
    if not m:
        return None
    stamp = parse_glog_stamp(m.group("md"), m.group("clock")) if m.group("md") else None
    file = m.group("file")
    base = file.rsplit("/", 1)[-1]
    msg = m.group("msg").strip()
    c10d = any(base.startswith(f) or f in base for f in _C10D_FILES)
    rec = GlogRecord(_LEVELS[m.group("lv")], base, msg, stamp, c10d)
    if c10d:
        rec.attrs = work_attrs(msg)
    return rec


def work_attrs(msg: str) -> dict[str, Any]:
    """The collective's identity and the watchdog's numbers stated in a c10d message."""
    attrs: dict[str, Any] = {}
    for rx in _PG:
        m = rx.search(msg)
        if m:
            attrs["rank"] = int(m.group("rank"))
            g = m.groupdict()
            if g.get("pg") is not None:
                attrs["pg"] = g["pg"]
            if g.get("name"):
                attrs["pg_name"] = g["name"]
            if g.get("guid"):
                attrs["pg_guid"] = g["guid"]
            break
    w = _WORK.search(msg)
    if w:
        for key, value in _WORK_FIELD.findall(w.group(1)):
            name = _WORK_KEYS.get(key)
            if name is None:
                continue
            value = value.strip()
            attrs[name] = value if name == "op_type" else _int(value)
    for name, rx in _NUMBERS:
        if name in attrs:
            continue
        m = rx.search(msg)
        if m:
            attrs[name] = int(m.group(1))
    low = msg.lower()
    attrs["timeout"] = ("timeout" in low or "timed out" in low) and "flight recorder dumps" not in low
    attrs["exception"] = "exception" in low or "error" in low or "failed" in low
    attrs["desync"] = "desync" in low or "mismatch between collectives" in low
    return attrs


def _int(value: str) -> int | str:
    try:
        return int(value)
    except ValueError:
        return value


def is_incomplete(text: str) -> bool:
    """A record cut by a terminal hard-wrap: an unbalanced ``(`` or ``[`` (e.g. ``WorkNCCL(`` without ``)``)."""
    return text.count("(") > text.count(")") or text.count("[") > text.count("]")
