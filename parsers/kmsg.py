"""``/dev/kmsg`` records, as the recorder stores them raw in a bundle's ``kmsg.log``.

``prefix,seq,usec,flags[,caller=T123];message`` (Documentation/ABI/testing/dev-kmsg):
prefix = facility * 8 + level, ``seq`` a 64-bit record number, ``usec`` microseconds since
boot, flags ``-`` (``c`` = assembled from fragments; the obsolete ``+`` = a fragment that
continues the previous record, joined here). Non-printable bytes and ``\\`` arrive escaped as
``\\xNN``: a multi-line printk is one record with ``\\x0a`` inside. Lines starting with a space
after a record are its dictionary (``SUBSYSTEM=pci``, ``DEVICE=+pci:0000:01:00.0``) and become
attrs. A jump in ``seq`` means the ring buffer overwrote records before they were read: it is
reported as a warning-level ``recorder`` event (attrs ``reason=kmsg-records-lost``, ``lost``).
"""

from __future__ import annotations

from collections.abc import Iterator

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.kernlog import Head, KernelLogParser, share_detector
from forensics.parsers.dmesg import FACILITIES

from forensics.events import Event, Severity, TsSource
from forensics.ingest.textdoc import TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER"]

_KMSG_RE = lazy_compile(r"^(\d{1,4}),(\d{1,20}),(\d{1,20}),([^;,]*)((?:,[^;]*)?);")
_ESCAPE_RE = lazy_compile(r"\\x([0-9a-fA-F]{2})")
_DICT_RE = lazy_compile(r"^ ([A-Z_][A-Z0-9_]*)=(.*)$")


def _unescape(msg: str) -> str:
    if "\\x" not in msg:
        return msg
    return _ESCAPE_RE.sub(lambda m: chr(int(m.group(1), 16)), msg)


class KmsgReader:
    sparse_ok = False  # sequence gaps need every record

    def __init__(self, ctx: ParseContext) -> None:
        self._last_seq: int | None = None

    def head(self, text: str) -> Head | None:
        if not text[:1].isdigit():
            return None
        m = _KMSG_RE.match(text)
        if not m:
            return None
        pri, seq, usec, flags, extra = int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4), m.group(5)
        fac_no = pri >> 3
        msg = _unescape(text[m.end():]).replace("\r\n", "\n").rstrip("\n")
        head = Head(msg=msg, col=m.end(), uptime_ns=usec * 1000, level=pri & 7,
                    facility=FACILITIES[fac_no] if fac_no < len(FACILITIES) else str(fac_no),
                    joins_previous="+" in flags)
        head.attrs["seq"] = seq
        for item in extra.split(","):
            key, sep, value = item.partition("=")
            if sep and key:
                head.attrs[key.strip()] = value.strip()
        if self._last_seq is not None and seq > self._last_seq + 1:
            head.attrs["lost_before"] = seq - self._last_seq - 1
        if self._last_seq is None or seq > self._last_seq:
            self._last_seq = seq
        return head

    def property_line(self, text: str) -> tuple[str, str] | None:
        m = _DICT_RE.match(text)
        return (m.group(1).lower(), m.group(2)) if m else None


class KmsgParser(KernelLogParser):
    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        for rec in super().parse(doc, ctx):
            lost = rec.attrs.get("lost_before") if isinstance(rec, Event) else None
            if isinstance(rec, Event) and isinstance(lost, int) and lost > 0:
                yield Event(
                    ts=rec.ts,
                    ts_source=rec.ts_source if rec.ts is not None else TsSource.NONE,
                    source=ctx.source,
                    kind="recorder",
                    message=f"{lost} kernel log record(s) lost before seq {rec.attrs.get('seq')} "
                            "(ring buffer overwritten before they were read)",
                    origin=rec.origin,
                    severity=Severity.WARNING,
                    host=rec.host,
                    attrs={"reason": "kmsg-records-lost", "lost": lost, "seq": rec.attrs.get("seq")},
                    uptime_ns=rec.uptime_ns,
                )
            yield rec


PARSER = KmsgParser(
    name="kmsg",
    samples=(
        # Documentation/ABI/testing/dev-kmsg: an example record with its dictionary
        "7,160,424069,-;pci_root PNP0A03:00: host bridge window [io 0x0000-0x0cf7] (ignored)\n"
        " SUBSYSTEM=acpi\n"
        " DEVICE=+acpi:PNP0A03:00\n",
        # the same document: consecutive records, the second from user space (facility 3)
        "6,339,5140900,-;NET: Registered protocol family 10\n"
        "30,340,5690716,-;udevd[80]: starting version 181\n",
        # leptonai/gpud pkg/kmsg/testdata/kmsg.1.log
        "6,3964,206764307,-;nvidia-nvswitch2: open (major=510)\n"
        "6,3965,206764310,-;nvidia-nvswitch2: open (major=510)\n"
        "6,3966,206764312,-;nvidia-nvswitch2: open (major=510)\n",
    ),
    reader=KmsgReader,
    detect=share_detector(lambda t: _KMSG_RE.match(t) is not None, 0.95),
    # the recorded samples' kmsg.log (NVRM's load line, the kernel's own version line)
    tested_with={"NVIDIA driver": ("580.159.04",), "Linux kernel": ("6.18.44-fc-v657-gpu", "6.18.44-fc-v973-gpu")},
)
