"""``journalctl -o json`` (one object per line), ``-o json-pretty`` and ``-o export``.

The best kernel log to ask a remote user for (``journalctl -k -b -1 -o json``): every entry
carries its host, boot id, priority and both clocks. Fields used: ``MESSAGE`` (a string, an
array of byte values when not valid UTF-8, ``null`` when journalctl dropped it for size),
``__REALTIME_TIMESTAMP`` / ``_SOURCE_REALTIME_TIMESTAMP`` (µs since the epoch),
``__MONOTONIC_TIMESTAMP`` (µs since boot when journald received the entry),
``_SOURCE_MONOTONIC_TIMESTAMP`` (the kernel's own printk stamp), ``_BOOT_ID``, ``_HOSTNAME``,
``PRIORITY``, ``SYSLOG_FACILITY``, ``SYSLOG_IDENTIFIER``, ``_TRANSPORT``, ``_PID``,
``_SYSTEMD_UNIT``, ``_KERNEL_SUBSYSTEM``, ``_KERNEL_DEVICE``.

Kernel entries are placed at their printk time (receive time minus the receive lag, which
can be seconds for early boot messages); every entry with both clocks records the boot time
(``attrs.boot_time_ns`` = realtime − monotonic at receipt), which the timeline uses to place
plain ``dmesg`` files from the same boot.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.kernlog import FULL_PARSE_BYTES, Head, KRecord, build_event
from forensics.parsers.dmesg import FACILITIES
from forensics.parsers.producers.kernel_messages import TRIGGER_LITERALS

from forensics.events import Event, TsSource
from forensics.ingest.reader import loads_bounded
from forensics.ingest.textdoc import Line, TextDocument

__all__ = ["PARSER"]

_MARKERS = ('"__REALTIME_TIMESTAMP"', '"__CURSOR"', '"_BOOT_ID"', '"_SOURCE_MONOTONIC_TIMESTAMP"')


def _int(value: Any) -> int | None:
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    return None


def _text(value: Any) -> str | None:
    """A journal field value as text (byte arrays decoded; multi-valued fields joined)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if all(isinstance(v, int) and 0 <= v < 256 for v in value):
            return bytes(value).decode("utf-8", errors="replace")
        parts = [_text(v) for v in value]
        return " ".join(p for p in parts if p is not None)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def entry_head(entry: dict[str, Any]) -> Head | None:
    """The record head for one journal entry (``None`` when it is not an entry at all)."""
    if not isinstance(entry, dict) or not any(k in entry for k in ("MESSAGE", "__REALTIME_TIMESTAMP", "__CURSOR")):
        return None
    raw_msg = entry.get("MESSAGE")
    msg = _text(raw_msg)
    attrs: dict[str, Any] = {}
    if msg is None:
        msg = "(message not shown: journalctl drops fields over 4096 bytes unless --all is given)"
        attrs["message_omitted"] = True
    elif isinstance(raw_msg, list):
        attrs["message_bytes"] = True
    msg = msg.rstrip("\n")
    transport = _text(entry.get("_TRANSPORT"))
    ident = _text(entry.get("SYSLOG_IDENTIFIER")) or _text(entry.get("_COMM"))
    if transport == "kernel":
        ident = "kernel"
    realtime = _int(entry.get("__REALTIME_TIMESTAMP"))
    source_rt = _int(entry.get("_SOURCE_REALTIME_TIMESTAMP"))
    mono = _int(entry.get("__MONOTONIC_TIMESTAMP"))
    source_mono = _int(entry.get("_SOURCE_MONOTONIC_TIMESTAMP"))
    head = Head(msg=msg, ident=ident, host=_text(entry.get("_HOSTNAME")), pid=_int(entry.get("_PID")),
                level=_int(entry.get("PRIORITY")))
    fac = _int(entry.get("SYSLOG_FACILITY"))
    if fac is not None:
        head.facility = FACILITIES[fac] if 0 <= fac < len(FACILITIES) else str(fac)
    if realtime is not None and mono is not None:
        attrs["boot_time_ns"] = (realtime - mono) * 1000
    if transport == "kernel" and source_mono is not None:
        head.uptime_ns = source_mono * 1000
        if "boot_time_ns" in attrs:
            head.ts = attrs["boot_time_ns"] + head.uptime_ns
    elif mono is not None:
        head.uptime_ns = mono * 1000
    if head.ts is None:
        stamp = source_rt if source_rt is not None else realtime
        if stamp is not None:
            head.ts = stamp * 1000
    if head.ts is not None:
        head.ts_source = TsSource.EXACT
    for key, name in (("_BOOT_ID", "boot_id"), ("_TRANSPORT", "transport"), ("_SYSTEMD_UNIT", "unit"),
                      ("_KERNEL_SUBSYSTEM", "subsystem"), ("_KERNEL_DEVICE", "device"), ("_COMM", "comm")):
        value = _text(entry.get(key))
        if value:
            attrs[name] = value
    head.attrs = attrs
    return head


class JournalJsonParser:
    name = "journalctl-json"
    samples = (
        # Yandex wall-e checks, tests/test_walle_fs_check.py: real `journalctl -o json` kernel entries
        '{ "__CURSOR" : "s=2c2f7f3d64d844aa9bc1844a48026313;i=1f345;b=c4b33c96f240457abc130dcb73da2b24;m=192b58ccf5;'
        't=5aec659160d52;x=eb931437dac873e3", "__REALTIME_TIMESTAMP" : "1599541804928338", "__MONOTONIC_TIMESTAMP" : '
        '"108101422325", "_BOOT_ID" : "c4b33c96f240457abc130dcb73da2b24", "_MACHINE_ID" : '
        '"6641fb6ac4e235aef340bea75f556792", "_HOSTNAME" : "vla2-6758.search.yandex.net", "_TRANSPORT" : "kernel", '
        '"SYSLOG_FACILITY" : "0", "SYSLOG_IDENTIFIER" : "kernel", "_SOURCE_MONOTONIC_TIMESTAMP" : "108101136410", '
        '"PRIORITY" : "2", "MESSAGE" : "EXT4-fs error (device sdc2): ext4_wait_block_bitmap:519: comm Trash:store1: '
        'Cannot read block bitmap - block_group = 2571, block_bitmap = 83886091" }\n'
        '{ "__CURSOR" : "s=2c2f7f3d64d844aa9bc1844a48026313;i=1f346;b=c4b33c96f240457abc130dcb73da2b24;m=192b594fbf;'
        't=5aec65916901c;x=3ed7ff8758066553", "__REALTIME_TIMESTAMP" : "1599541804961820", "__MONOTONIC_TIMESTAMP" : '
        '"108101455807", "_BOOT_ID" : "c4b33c96f240457abc130dcb73da2b24", "_MACHINE_ID" : '
        '"6641fb6ac4e235aef340bea75f556792", "_HOSTNAME" : "vla2-6758.search.yandex.net", "_TRANSPORT" : "kernel", '
        '"SYSLOG_FACILITY" : "0", "SYSLOG_IDENTIFIER" : "kernel", "PRIORITY" : "2", "_SOURCE_MONOTONIC_TIMESTAMP" : '
        '"108101169896", "MESSAGE" : "EXT4-fs error (device sdc2) in ext4_free_blocks:4969: IO failure" }\n',
        # an LKML thread on dev_printk and the journal (2020): one entry as json-pretty (the mail's
        # line wrap inside MESSAGE undone, the wrapped __CURSOR left out)
        '{\n'
        '        "_HOSTNAME" : "pn",\n'
        '        "_TRANSPORT" : "kernel",\n'
        '        "__MONOTONIC_TIMESTAMP" : "1806379233",\n'
        '        "SYSLOG_IDENTIFIER" : "kernel",\n'
        '        "_SOURCE_MONOTONIC_TIMESTAMP" : "1805611354",\n'
        '        "SYSLOG_FACILITY" : "0",\n'
        '        "MESSAGE" : "blk_update_request: critical medium error, dev nvme0n1, sector 10000 op 0x0:(READ) '
        'flags 0x80700 phys_seg 3 prio class 0",\n'
        '        "PRIORITY" : "3",\n'
        '        "_MACHINE_ID" : "3f31a0847cea4c95b7a9cec13d07deeb",\n'
        '        "__REALTIME_TIMESTAMP" : "1601471260802301",\n'
        '        "_BOOT_ID" : "b03ed610f21d46ab8243a495ba5a0058"\n'
        '}\n',
    )

    def detect(self, head: list[str]) -> float:
        if not head:
            return 0.0
        first = head[0].lstrip()
        if first.startswith("{") and any(m in first for m in _MARKERS):
            return 0.97
        if first.rstrip() == "{" and any(m in line for line in head[1:12] for m in _MARKERS):
            return 0.97
        if first.startswith(("__CURSOR=", "__REALTIME_TIMESTAMP=")):
            return 0.97
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        from forensics.parsers.common.user_space import hand_over

        head = doc.head(2)
        if head and head[0].startswith(("__CURSOR=", "__REALTIME_TIMESTAMP=")):
            events = self._export(doc, ctx)
        elif head and head[0].strip() == "{":
            events = self._pretty(doc, ctx)
        else:
            events = self._lines(doc, ctx)
        yield from hand_over(list(events), ctx)  # programs' entries: to the process-output parser

    # -- json lines ------------------------------------------------------------------------
    def _lines(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Event]:
        if len(doc.data) > FULL_PARSE_BYTES:
            lines: Iterator[Line] = doc.candidate_lines(TRIGGER_LITERALS + tuple(ctx.notable))
        else:
            lines = doc.lines()
        bad = 0
        for line in lines:
            text = line.text.strip()
            if not text:
                continue
            try:
                entry = loads_bounded(text)
            except (ValueError, RecursionError):
                bad += 1
                continue
            h = entry_head(entry)
            if h is None:
                bad += 1
                continue
            yield build_event(KRecord(h, line), ctx)
        if bad:
            ctx.warn(f"{bad} line(s) were not journal JSON entries and were skipped")

    # -- json-pretty -------------------------------------------------------------------------
    def _pretty(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Event]:
        start: Line | None = None
        buf: list[str] = []
        bad = 0
        for line in doc.lines():
            if start is None:
                if line.text.strip() == "{":
                    start, buf = line, ["{"]
                elif line.text.strip():
                    bad += 1
                continue
            buf.append(line.text)
            if line.text.rstrip() == "}":
                try:
                    h = entry_head(loads_bounded("\n".join(buf)))
                except (ValueError, RecursionError):
                    h = None
                if h is None:
                    bad += 1
                else:
                    yield build_event(KRecord(h, start, nlines=line.no - start.no + 1), ctx)
                start, buf = None, []
        if start is not None:
            bad += 1
        if bad:
            ctx.warn(f"{bad} block(s) were not complete journal JSON entries and were skipped")

    # -- export ------------------------------------------------------------------------------
    def _export(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Event]:
        """``-o export``: ``KEY=value`` lines, binary fields as ``KEY``, a 64-bit little-endian
        length and the raw bytes; entries separated by an empty line."""
        data = doc.data
        pos, size = 0, len(data)
        entry: dict[str, Any] = {}
        entry_start = 0

        def finish(last_byte: int) -> Iterator[Event]:
            h = entry_head(entry) if entry else None
            if h is not None:
                first = doc.line_no_at(entry_start)
                last = doc.line_no_at(max(entry_start, last_byte))
                line = Line(first, entry_start, f"__CURSOR={entry.get('__CURSOR', '')}")
                yield build_event(KRecord(h, line, nlines=last - first + 1), ctx)

        while pos < size:
            nl = data.find(b"\n", pos)
            end = size if nl < 0 else nl
            raw = data[pos:end]
            if not raw:  # the empty line that ends an entry
                yield from finish(pos - 1)
                entry, entry_start = {}, end + 1
                pos = end + 1
                continue
            key, eq, value = raw.partition(b"=")
            if eq:
                entry[key.decode("ascii", errors="replace")] = value.decode("utf-8", errors="replace")
                pos = end + 1
                continue
            if end + 9 > size:
                ctx.warn("journal export stream ends inside a binary field")
                break
            (length,) = struct.unpack("<Q", data[end + 1 : end + 9])
            value_end = end + 9 + length
            if value_end > size:
                ctx.warn("journal export stream ends inside a binary field")
                break
            entry[key.decode("ascii", errors="replace")] = data[end + 9 : value_end]
            pos = value_end + 1
        yield from finish(size - 1)


PARSER = JournalJsonParser()
