"""``dmesg -T`` / ``--ctime``: ``[Fri Mar  3 04:27:08 2023] msg``.

The stamp is boot time + uptime printed as local wall clock with 1 s resolution (it drifts
after suspend/resume: see ARCHITECTURE.md "Time"). Converted with ``ctx.tz`` when known
(exact), else taken as UTC and marked ``local``. Month and day names may be localized.
Also accepts the ``-x`` decode prefix.
"""

from __future__ import annotations

from forensics.parsers.common.base import ParseContext
from forensics.parsers.common.kernlog import Head, KernelLogParser, share_detector, stamped_head
from forensics.parsers.dmesg import decode_prefix

from forensics.clock import parse_ctime
from forensics.events import TsSource
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER"]

_CTIME_RE = lazy_compile(r"^\[(\S+\s+\S+\s+\d{1,2}\s+\d{1,2}:\d\d:\d\d(?:[.,]\d{1,9})?\s+\d{4})\]\s?")


class CtimeReader:
    sparse_ok = True

    def __init__(self, ctx: ParseContext) -> None:
        self.tz = ctx.tz
        self._cache: dict[str, tuple[int, TsSource] | None] = {}

    def head(self, text: str) -> Head | None:
        rest, facility, level = decode_prefix(text) if text[:1] != "[" else (text, None, None)
        m = _CTIME_RE.match(rest)
        if not m:
            return None
        stamp = m.group(1)
        if stamp in self._cache:
            placed = self._cache[stamp]
        else:
            placed = parse_ctime(stamp, self.tz)
            if len(self._cache) > 100_000:
                self._cache.clear()
            self._cache[stamp] = placed
        return stamped_head(text, rest[m.end():], placed, level, facility)


def _match(text: str) -> bool:
    return _CTIME_RE.match(decode_prefix(text)[0]) is not None


PARSER = KernelLogParser(
    name="dmesg-ctime",
    samples=(
        # akash-network/support#244: dmesg -T | grep NVRM, shell prompt included as posted
        "root@node4:~# dmesg -T |grep NVRM\n"
        "[Mon Aug  5 03:54:13 2024] NVRM: GPU at PCI:0000:00:07: GPU-3b6ec030-5adc-1847-e155-79f635584b4e\n"
        "[Mon Aug  5 03:54:13 2024] NVRM: GPU Board Serial Number: 1652923017935\n"
        "[Mon Aug  5 03:54:13 2024] NVRM: Xid (PCI:0000:00:07): 31, pid=2512125, name=python3.10, Ch 00000008, "
        "intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_8 faulted @ 0x73ac_1c000000. Fault is of type "
        "FAULT_PDE ACCESS_TYPE_VIRT_WRITE\n",
        # leptonai/gpud#117: hung task report after Xid 45
        "[Sat Oct 12 18:35:32 2024] NVRM: Xid (PCI:0000:61:00): 45, pid=1496200, name=distprovers-gpu, Ch 0000000a\n"
        "[Sat Oct 12 18:38:44 2024] INFO: task cache_mgr_event:620917 blocked for more than 120 seconds.\n"
        "[Sat Oct 12 18:38:44 2024]       Tainted: P           OE     5.15.0-97-generic #107-Ubuntu\n",
    ),
    reader=CtimeReader,
    detect=share_detector(_match),
    tested_with={"NVIDIA driver": ("535.129.03", "535.183.01")},  # NVRM's lines in neg-gpud-kvm-a and akash244
)
