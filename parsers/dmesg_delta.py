"""``dmesg -H`` / ``--reltime`` (and ``-d`` without stamps): ``[  +0.000316] msg`` deltas.

``-H`` prints an absolute local ``[Feb13 15:05]`` anchor (minute resolution, no year) when
the minute changes and ``[  +0.000316]`` deltas from the previous message otherwise. Lines
after an anchor are placed at anchor + summed deltas (so their error is up to the anchor's
60 s resolution: attrs ``ts_resolution_s=60``); lines before any anchor carry only the delta
(attrs ``delta_s``) and are left for the timeline to place between neighbours.
"""

from __future__ import annotations

from forensics.parsers.common.base import ParseContext
from forensics.parsers.common.kernlog import Head, KernelLogParser, head_fraction
from forensics.parsers.dmesg import decode_prefix

from forensics.clock import month_number, uptime_ns
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER"]

_DELTA_RE = lazy_compile(r"^\[\s*\+\s*(\d+\.\d+)\]\s?")
_ANCHOR_RE = lazy_compile(r"^\[([^\W\d_]{2,5}\.?)\s?(\d{1,2}) (\d{1,2}):(\d\d)\]\s?")


class DeltaReader:
    sparse_ok = False  # every delta counts

    def __init__(self, ctx: ParseContext) -> None:
        self._anchor: tuple[int, int, int, int] | None = None
        self._since_anchor = 0

    def head(self, text: str) -> Head | None:
        rest, facility, level = decode_prefix(text) if text[:1] != "[" else (text, None, None)
        m = _DELTA_RE.match(rest)
        if m:
            delta = uptime_ns(m.group(1)) or 0
            msg = rest[m.end():]
            head = Head(msg=msg, col=len(text) - len(msg), level=level, facility=facility)
            head.attrs["delta_s"] = delta / 1e9
            if self._anchor is not None:
                self._since_anchor += delta
                head.wall = (*self._anchor, 0, 0)
                head.wall_plus_ns = self._since_anchor
                head.attrs["ts_resolution_s"] = 60
            return head
        m = _ANCHOR_RE.match(rest)
        if m:
            month = month_number(m.group(1))
            if month is None:
                return None
            self._anchor = (month, int(m.group(2)), int(m.group(3)), int(m.group(4)))
            self._since_anchor = 0
            msg = rest[m.end():]
            head = Head(msg=msg, col=len(text) - len(msg), level=level, facility=facility,
                        wall=(*self._anchor, 0, 0))
            head.attrs["ts_resolution_s"] = 60
            return head
        return None


def _detect(head: list[str]) -> float:
    def match(t: str) -> bool:
        rest = decode_prefix(t)[0]
        return bool(_DELTA_RE.match(rest) or _ANCHOR_RE.match(rest))

    if not any(_DELTA_RE.match(decode_prefix(t)[0]) for t in head):
        return 0.0
    frac = head_fraction(head, match)
    return 0.9 * frac if frac >= 0.3 else 0.0


PARSER = KernelLogParser(
    name="dmesg-delta",
    samples=(
        # catalog §0.1: an AER line as dmesg -H prints it inside a minute
        "[  +0.000316] pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0\n",
    ),
    reader=DeltaReader,
    detect=_detect,
)
