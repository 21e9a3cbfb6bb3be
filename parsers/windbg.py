"""WinDbg ``!analyze -v`` output of a Windows crash dump (BSOD).

Each analysis (after the ``Bugcheck Analysis`` banner) becomes one ``bugcheck`` event: ``code``
(int), ``name`` (``DPC_WATCHDOG_VIOLATION``), ``args``, ``image`` (``nvlddmkm.sys``), ``module``,
``bucket``, ``process``. ``Debug session time:`` carries the zone, so it gives an exact time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.nvidia_smi_common import MONTHS

from forensics.events import Event, Severity, TsSource
from forensics.ingest.textdoc import Line, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER"]

_BANNER = lazy_compile(r"^\*\s+Bugcheck Analysis\s+\*")
# The analysis body pasted without its banner (users often copy from the stop's title, KEY_VALUES_STRING or
# BUGCHECK_CODE on): any of these lines opens an analysis when none is open.
_BODY_START = lazy_compile(r"^(?:KEY_VALUES_STRING:|BUGCHECK_CODE:\s+[0-9A-Fa-f]+\s*$)")
_BODY_FIELDS = lazy_compile(r"^(?:BUGCHECK_CODE:\s+[0-9A-Fa-f]+|BUGCHECK_P1:\s+[0-9A-Fa-f`]+|KEY_VALUES_STRING:.*)\s*$",
                            re.M)
_TITLE = lazy_compile(r"^([A-Z][A-Z0-9_]{3,})\s+\(([0-9a-fA-F]{1,8})\)\s*$")
# A stop's title with its argument list (`SYSTEM_SERVICE_EXCEPTION (3b)` … `Arguments:` / `Arg1: …`).
_TITLED_ARGS = lazy_compile(r"^[A-Z][A-Z0-9_]{3,}[ \t]+\([0-9a-fA-F]{1,8}\)[ \t]*\n(?:[^\n]*\n){0,4}?Arguments:[ \t]*\n"
                            r"Arg1:[ \t]*[0-9a-fA-F`]+", re.M)
_BUGCHECK_LINE = lazy_compile(r"^BugCheck\s+([0-9A-Fa-f]+),\s*\{([^}]*)\}")
_ARG = lazy_compile(r"^Arg(\d):\s*([0-9a-fA-F`]+)")
_FIELD = lazy_compile(r"^([A-Z][A-Z0-9_]+):\s+(.+)$")
_CAUSED = lazy_compile(r"^Probably caused by\s*:\s*(\S+)")
_SESSION = lazy_compile(r"^Debug session time:\s*\w{3}\s+(\w{3})\s+(\d{1,2})\s+"
                        r"(\d\d):(\d\d):(\d\d)(?:\.(\d+))?\s+(\d{4})"
                        r"\s*\(UTC\s*([+-])\s*(\d{1,2}):(\d\d)\)")
_MAX_DETAIL_LINES = 200


@dataclass
class _Analysis:
    first: Line
    code: int | None = None
    name: str | None = None
    args: list[str] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    last_no: int = 0


def _session_time(line: str) -> int | None:
    m = _SESSION.match(line)
    if not m or m.group(1) not in MONTHS:
        return None
    try:
        local = datetime(int(m.group(7)), MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)), int(m.group(4)),
                         int(m.group(5)), int((m.group(6) or "0")[:6].ljust(6, "0")), tzinfo=UTC)
    except ValueError:
        return None
    offset = timedelta(hours=int(m.group(9)), minutes=int(m.group(10)))
    utc = local - offset if m.group(8) == "+" else local + offset
    return (utc - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000


class WinDbgParser:
    name = "windbg"
    samples = (
        # Real: start of a `!analyze -v` of a DPC watchdog BSOD (corpus runelite15496).
        """*******************************************************************************
*                                                                             *
*                        Bugcheck Analysis                                    *
*                                                                             *
*******************************************************************************

DPC_WATCHDOG_VIOLATION (133)
The DPC watchdog detected a prolonged run time at an IRQL of DISPATCH_LEVEL
or above.
Arguments:
Arg1: 0000000000000001, The system cumulatively spent an extended period of time at
	DISPATCH_LEVEL or above. The offending component can usually be
	identified with a stack trace.
Arg2: 0000000000001e00, The watchdog period.
Arg3: fffff80518afb320, cast to nt!DPC_WATCHDOG_GLOBAL_TRIAGE_BLOCK, which contains
	additional information regarding the cumulative timeout
Arg4: 0000000000000000
""",  # noqa: E501, W291
        # Shape: the later fields of `!analyze -v` (names as WinDbg prints them) for a TDR failure.
        """Debug session time: Thu Nov 14 11:11:40.123 2024 (UTC + 1:00)
*******************************************************************************
*                        Bugcheck Analysis                                    *
*******************************************************************************

VIDEO_TDR_FAILURE (116)
Attempt to reset the display driver and recover from timeout failed.
Arguments:
Arg1: ffffc60d4a3e2010, Optional pointer to internal TDR recovery context (TDR_RECOVERY_CONTEXT).
Arg2: fffff8067c3a1e40, The pointer into responsible device driver module (e.g. owner tag).
Arg3: ffffffffc000009a, Optional error code (NTSTATUS) of the last failed operation.
Arg4: 0000000000000004, Optional internal context dependent data.

BUGCHECK_CODE:  116
MODULE_NAME: nvlddmkm
IMAGE_NAME:  nvlddmkm.sys
PROCESS_NAME:  System
FAILURE_BUCKET_ID:  0x116_IMAGE_nvlddmkm.sys
""",
        # Real: the body of `!analyze -v` pasted without its banner (tensorflow issue 62633, trimmed).
        """KEY_VALUES_STRING: 1

    Key  : Analysis.CPU.mSec
    Value: 3015

    Key  : WER.OS.Version
    Value: 10.0.19041.1

BUGCHECK_CODE:  133

BUGCHECK_P1: 1

BUGCHECK_P2: 1e00

BUGCHECK_P3: fffff8024c8fb320

BUGCHECK_P4: 0

DPC_TIMEOUT_TYPE:  DPC_QUEUE_EXECUTION_TIMEOUT_EXCEEDED
""",
    )

    def detect(self, head: list[str]) -> float:
        text = "\n".join(head[:30])
        if "Bugcheck Analysis" in text:
            return 0.97
        if re.search(r"^BugCheck [0-9A-Fa-f]+, \{", text, re.M) or "Microsoft (R) Windows Debugger" in text:
            return 0.9
        if len(_BODY_FIELDS.findall("\n".join(head[:60]))) >= 2:
            return 0.85
        if _TITLED_ARGS.search("\n".join(head[:60])):  # the analysis pasted from its title on
            return 0.85
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        session: int | None = None
        current: _Analysis | None = None
        for line in doc.lines():
            text = line.text.rstrip()
            st = _session_time(text)
            if st is not None:
                session = st
            banner = _BANNER.match(text) is not None
            header = _BUGCHECK_LINE.match(text) is not None  # the dump loader's summary line
            # A new analysis starts at a banner or "BugCheck …" line, unless the current one has
            # not reached its title yet (the loader's line and the banner of one dump).
            if (banner or header) and (current is None or current.name is not None):
                if current is not None:
                    yield self._event(current, ctx, session)
                current = _Analysis(line)
            elif current is None and (_BODY_START.match(text) or _TITLE.match(text)):
                current = _Analysis(line)  # a title (`SYSTEM_SERVICE_EXCEPTION (3b)`) is read just below
            if current is None:
                continue
            current.last_no = line.no
            if len(current.lines) < _MAX_DETAIL_LINES:
                current.lines.append(text)
            m = _TITLE.match(text)
            if m and current.name is None:
                current.name, current.code = m.group(1), int(m.group(2), 16)
                continue
            m = _BUGCHECK_LINE.match(text)
            if m:
                current.code = current.code if current.code is not None else int(m.group(1), 16)
                if not current.args:
                    current.args = [a.strip() for a in m.group(2).split(",")]
                continue
            m = _ARG.match(text)
            if m:
                current.args.append(m.group(2).replace("`", ""))
                continue
            m = _CAUSED.match(text)
            if m:
                current.fields.setdefault("CAUSED_BY", m.group(1))
                continue
            m = _FIELD.match(text)
            if m:
                current.fields.setdefault(m.group(1), m.group(2).strip())
        if current is not None and (current.code is not None or current.name or current.fields):
            yield self._event(current, ctx, session)

    def _event(self, a: _Analysis, ctx: ParseContext, session: int | None) -> Event:
        f = a.fields
        code = a.code
        if code is None and f.get("BUGCHECK_CODE"):
            try:
                code = int(f["BUGCHECK_CODE"], 16)
            except ValueError:
                code = None
        image = f.get("IMAGE_NAME") or f.get("CAUSED_BY")
        name = a.name or f.get("BUGCHECK_STR") or f.get("DEFAULT_BUCKET_ID")
        msg = "bugcheck" + (f" 0x{code:X}" if code is not None else "") + (f" {name}" if name else "")
        if image:
            msg += f" (image {image})"
        args = a.args or [f[k].replace("`", "") for k in ("BUGCHECK_P1", "BUGCHECK_P2", "BUGCHECK_P3", "BUGCHECK_P4")
                          if k in f]
        attrs = {"code": code, "name": name, "args": args, "image": image, "module": f.get("MODULE_NAME"),
                 "bucket": f.get("FAILURE_BUCKET_ID"), "process": f.get("PROCESS_NAME")}
        return Event(ts=session, ts_source=TsSource.EXACT if session is not None else TsSource.NONE,
                     source=ctx.source, kind="bugcheck", message=msg,
                     origin=ctx.origin(a.first, a.last_no - a.first.no + 1), severity=Severity.CRITICAL,
                     host=ctx.host, attrs={k: v for k, v in attrs.items() if v is not None},
                     detail="\n".join(a.lines))


PARSER = WinDbgParser()
