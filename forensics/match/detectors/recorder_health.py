"""``nvml-unresponsive``: the recorder's NVML calls stopped answering (kind ``recorder``
events). A wedged driver hangs NVML; that is evidence of a driver hang, not noise."""

from __future__ import annotations

import re
from collections.abc import Sequence

from forensics.events import Event, Severity
from forensics.lazy_re import lazy_compile
from forensics.match.detectors.common import derived

__all__ = ["nvml_unresponsive"]

_NVML = lazy_compile(r"nvml", re.IGNORECASE)
_STUCK = lazy_compile(r"unrespons|not respond|timed? ?out|timeout|deadline|hang|hung|did not return|stuck",
                      re.IGNORECASE)
MAX_EVENTS = 20


def _describes_nvml_hang(e: Event) -> bool:
    reason = str(e.attrs.get("reason", ""))
    text = f"{reason} {e.text}"
    return bool(_NVML.search(text) and _STUCK.search(text))


def nvml_unresponsive(events: Sequence[Event]) -> list[Event]:
    out: list[Event] = []
    for e in events:
        if e.kind != "recorder" or not _describes_nvml_hang(e):
            continue
        where = f" on GPU {e.gpu}" if e.gpu is not None else ""
        since = e.attrs.get("since")
        sentence = f"NVML calls stopped answering{where}: {e.message.strip()[:200]}"
        out.append(derived("nvml-unresponsive", sentence, origin=e.origin, ts=e.ts,
                           end_ts=e.attrs.get("end_ts") if isinstance(e.attrs.get("end_ts"), int) else e.ts,
                           ts_source=e.ts_source, source=e.source, host=e.host, gpu=e.gpu,
                           severity=Severity.ERROR, attrs={"reason": e.attrs.get("reason"), "since": since}))
        if len(out) >= MAX_EVENTS:
            break
    return out
