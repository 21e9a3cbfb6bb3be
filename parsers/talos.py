"""``talosctl dmesg`` (Talos Linux): ``192.168.11.119: kern: warning: [2026-04-22T21:27:51.288830314Z]: msg``.

Node address (absent when one node is asked without ``-n``), facility, level (padded),
then an RFC 3339 UTC stamp with up to nanoseconds (a trailing zero may be dropped:
``.28885631Z``). The node address becomes the event's host.
"""

from __future__ import annotations

from forensics.parsers.common.base import ParseContext
from forensics.parsers.common.kernlog import Head, KernelLogParser, share_detector

from forensics.clock import parse_iso
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER"]

_TALOS_RE = lazy_compile(
    r"^(?:(\S+?):\s+)?([a-z0-9]+):\s+([a-z]+):\s+\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d))\]:\s?"
)
_LEVELS = {"emerg": 0, "alert": 1, "crit": 2, "err": 3, "warning": 4, "warn": 4, "notice": 5, "info": 6, "debug": 7}


class TalosReader:
    sparse_ok = True

    def __init__(self, ctx: ParseContext) -> None:
        self.tz = ctx.tz

    def head(self, text: str) -> Head | None:
        m = _TALOS_RE.match(text)
        if not m:
            return None
        host, facility, level_name, stamp = m.groups()
        msg = text[m.end():]
        level = _LEVELS.get(level_name)
        head = Head(msg=msg, col=m.end(), host=host, facility=facility, level=level)
        if level is None:
            head.attrs["level"] = level_name
        placed = parse_iso(stamp, self.tz)
        if placed is not None:
            head.ts, head.ts_source = placed
        return head


PARSER = KernelLogParser(
    name="talosctl-dmesg",
    samples=(
        # siderolabs/talos (via open-gpu-kernel-modules#1118): the GSP RPC history after a timeout
        "192.168.11.119: kern: warning: [2026-04-22T21:27:51.288830314Z]: NVRM:      0    76   GSP_RM_CONTROL"
        "              4127 0x0000000020803039 0x00000000000000b0 0x00065013160bb6e0 0x0000000000000000          y\n"
        "192.168.11.119: kern: warning: [2026-04-22T21:27:51.28885631Z]: NVRM:     -4    76   GSP_RM_CONTROL"
        "              4123 0x0000000020809064 0x0000000000000208 0x00065013118cef7b 0x00065013118cefe3    104us  \n",
    ),
    reader=TalosReader,
    detect=share_detector(lambda t: _TALOS_RE.match(t) is not None, 0.95),
)
