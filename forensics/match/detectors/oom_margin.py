"""``memory-margin`` from a CUDA out-of-memory message's own numbers.

When the allocation that failed was small next to the GPU's capacity (the run was
short by at most 5 % of the card, or asked for no more than 512 MiB), the run was
living at the edge: the OOM is the symptom, the missing headroom the risk. Reads the
parser's attrs (``tried_mib``, ``total_mib``/``total_gib``, ``free_mib``) when present,
else the message text of every generation (catalog §1.9).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from forensics.events import Event, Severity
from forensics.lazy_re import lazy_compile
from forensics.match.detectors.common import derived

__all__ = ["memory_margin_oom", "oom_numbers"]

SHORT_FRACTION = 0.05
SMALL_REQUEST_MIB = 512.0

_SIZE = r"(\d+(?:\.\d+)?)\s*(GiB|MiB|KiB|GB|MB|KB|bytes|B)\b"
_TRIED = lazy_compile(r"Tried to allocate " + _SIZE)
# (?<!\d): a number starts where digits start (the same leftmost match, found in linear time)
_TOTAL = lazy_compile(r"total capacity of " + _SIZE + r"|(?<!\d)" + _SIZE + r" total capacity")
_FREE = lazy_compile(r"of which " + _SIZE + r" is free|(?<!\d)" + _SIZE + r" free")
_UNIT_MIB = {"GiB": 1024.0, "GB": 1000**3 / 2**20, "MiB": 1.0, "MB": 1000**2 / 2**20, "KiB": 1 / 1024,
             "KB": 1000 / 2**20, "B": 1 / 2**20, "bytes": 1 / 2**20}


def _mib(m: re.Match[str] | None) -> float | None:
    if m is None:
        return None
    groups = [g for g in m.groups() if g is not None]
    return float(groups[0]) * _UNIT_MIB[groups[1]]


def _attr_mib(e: Event, key: str) -> float | None:
    v = e.attrs.get(f"{key}_mib")
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    v = e.attrs.get(f"{key}_gib")
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v) * 1024
    return None


def oom_numbers(e: Event) -> tuple[float | None, float | None, float | None]:
    """(tried, total, free) in MiB from one OOM event; None where not stated."""
    text = e.text
    tried = _attr_mib(e, "tried")
    total = _attr_mib(e, "total")
    free = _attr_mib(e, "free")
    if tried is None:
        tried = _mib(_TRIED.search(text))
    if total is None:
        total = _mib(_TOTAL.search(text))
    if free is None:
        free = _mib(_FREE.search(text))
    return tried, total, free


def _fmt(mib: float) -> str:
    return f"{mib / 1024:.2f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def memory_margin_oom(events: Sequence[Event]) -> list[Event]:
    out: list[Event] = []
    seen: set[tuple[object, ...]] = set()
    for e in events:
        if e.kind == "derived" or "Tried to allocate" not in e.text:
            continue
        tried, total, free = oom_numbers(e)
        if tried is None:
            continue
        key = (tried, total, free, e.rank, e.host)
        if key in seen:  # the same OOM as traceback and as plain line
            continue
        if total is not None and free is not None:
            short = tried - free
            if short > SHORT_FRACTION * total and tried > SMALL_REQUEST_MIB:
                continue
            sentence = (f"the failed allocation of {_fmt(tried)} met {_fmt(free)} free on a {_fmt(total)} GPU: "
                        f"short by {_fmt(max(short, 0))} ({max(short, 0) / total * 100:.1f} % of capacity)")
        elif total is not None:
            if tried > SHORT_FRACTION * total:
                continue
            sentence = f"the failed allocation was only {_fmt(tried)} on a {_fmt(total)} GPU"
        else:
            if tried > SMALL_REQUEST_MIB:
                continue
            sentence = f"the failed allocation was only {_fmt(tried)}: the GPU was already full"
        seen.add(key)
        out.append(derived("memory-margin", sentence + ", so the run lived at the edge of GPU memory",
                           origin=e.origin, ts=e.ts, end_ts=e.ts, ts_source=e.ts_source, source=e.source,
                           host=e.host, gpu=e.gpu, rank=e.rank, severity=Severity.INFO,
                           attrs={"tried_mib": tried, "total_mib": total, "free_mib": free, "from": "oom"}))
    return out
