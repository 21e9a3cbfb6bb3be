"""Windows events as PowerShell prints them: ``Get-WinEvent``/``Get-EventLog`` piped to
``Format-List`` (``TimeCreated : …``, ``ProviderName : …``, ``Id : …``, ``Message : …``, values
wrapped onto indented lines) or shown as the default table (``TimeCreated  Id LevelDisplayName
Message`` under a ``ProviderName: …`` group header). Windows PowerShell 5.1 writes redirected
output as UTF-16LE with a BOM; :class:`TextDocument` decodes it before this parser runs.

Times are the machine's local time in its culture's format: ``ctx.tz`` places them, otherwise
they are ``local``; the day/month order is decided once per file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.nvidia_smi_common import MONTHS
from forensics.parsers.common.windows_events import (
    build_winevent,
    guess_date_order,
    level_from_name,
    parse_local_datetime,
    stamp,
)

from forensics.events import TsSource
from forensics.ingest.textdoc import Line, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER"]

_LIST_KEY = lazy_compile(r"^([A-Za-z][A-Za-z0-9]*)\s*:\s?(.*)$")
_KEYS = {"timecreated", "providername", "id", "level", "leveldisplayname", "message", "machinename", "logname",
         "recordid", "qualifiers", "properties", "taskdisplayname", "timegenerated", "timewritten", "source",
         "eventid", "instanceid", "entrytype", "index", "replacementstrings", "category", "containerlog",
         "version", "task", "opcode", "keywords", "providerid", "processid", "threadid", "userid", "activityid",
         "relatedactivityid", "matchedqueryids", "bookmark", "opcodedisplayname", "keywordsdisplaynames",
         "username", "data", "site", "container", "categorynumber", "splitlines"}
_GROUP = lazy_compile(r"^\s*ProviderName:\s*(\S.*)$")
_TABLE_HEAD = lazy_compile(r"^\s*(TimeCreated|Index|TimeGenerated)\b.*\b(Id|InstanceID|EventID|Message)\b")
_DASHES = lazy_compile(r"^\s*-+(\s+-+)+\s*$")
_PART_OF_EVENT = lazy_compile(r"The following information is part of the event:\s*(.*)$", re.S)
_UNRESOLVED = lazy_compile(r"The description for Event ID '?(\d+)'? in Source '?([^']+?)'? cannot be found")
_SHORT_TIME = lazy_compile(r"^([A-Z][a-z]{2}) (\d{1,2}) (\d\d):(\d\d)")
_ROW_TIME = lazy_compile(
    r"^(\d{1,4}[./-]\d{1,2}[./-]\d{2,4}\s+\d{1,2}:\d\d(?::\d\d)?(?:\s*[AaPp]\.?[Mm]\.?)?"
    r"|[A-Z][a-z]{2} \d{1,2} \d\d:\d\d)\s*"
)


@dataclass
class _Rec:
    first: Line
    fields: dict[str, str] = field(default_factory=dict)
    last_no: int = 0


def _list_records(doc: TextDocument) -> Iterator[_Rec]:
    rec: _Rec | None = None
    last_key: str | None = None
    for line in doc.lines():
        text = line.text.rstrip()
        if not text.strip():
            continue
        m = _LIST_KEY.match(text)
        key = m.group(1).lower() if m else None
        if m and key in _KEYS and not text.startswith((" ", "\t")):
            if rec is None or key in rec.fields:
                if rec is not None:
                    yield rec
                rec = _Rec(line)
            rec.fields[key] = m.group(2).strip()
            rec.last_no = line.no
            last_key = key
        elif rec is not None and last_key is not None and text.startswith((" ", "\t")):
            rec.fields[last_key] = (rec.fields[last_key] + "\n" + text.strip()).strip()
            rec.last_no = line.no
    if rec is not None:
        yield rec


def _table_records(doc: TextDocument) -> Iterator[_Rec]:
    provider: str | None = None
    columns: list[str] | None = None
    rec: _Rec | None = None
    expect_dashes = False
    for line in doc.lines():
        text = line.text.rstrip()
        if not text.strip():
            continue
        g = _GROUP.match(text)
        if g:
            provider = g.group(1).strip()
            continue
        if _TABLE_HEAD.match(text):
            columns = [c.lower() for c in text.split()]
            expect_dashes = True
            continue
        if expect_dashes and _DASHES.match(text):
            expect_dashes = False
            continue
        if columns is None:
            continue
        cells = _split_row(text.strip(), columns)
        if cells is None:
            if rec is not None and columns[-1] in rec.fields:  # -Wrap continuation of the message
                rec.fields[columns[-1]] += "\n" + text.strip()
                rec.last_no = line.no
            continue
        if rec is not None:
            yield rec
        rec = _Rec(line, dict(cells), line.no)
        if provider and "providername" not in rec.fields:
            rec.fields["providername"] = provider
    if rec is not None:
        yield rec


def _split_row(text: str, columns: list[str]) -> list[tuple[str, str]] | None:
    out: list[tuple[str, str]] = []
    rest = text
    for i, col in enumerate(columns):
        if i == len(columns) - 1:
            out.append((col, rest.strip()))
            break
        if col in ("timecreated", "timegenerated", "time"):
            m = _ROW_TIME.match(rest)
            if not m:
                return None
            out.append((col, m.group(1)))
            rest = rest[m.end():]
            continue
        parts = rest.split(None, 1)
        if not parts:
            return None
        out.append((col, parts[0]))
        rest = parts[1] if len(parts) > 1 else ""
    ids = dict(out)
    if not any(ids.get(k, "").isdigit() for k in ("id", "eventid", "instanceid", "index")):
        return None
    return out


def _strings_of(message: str, fields: dict[str, str]) -> tuple[list[str], str | None]:
    m = _PART_OF_EVENT.search(message)
    if m:
        return re.findall(r"'([^']*)'", m.group(1)) or [m.group(1).strip()], None
    rs = fields.get("replacementstrings", "")
    if rs and not message:
        return [s.strip() for s in rs.strip("{}").split(",") if s.strip()], None
    return [], message or None


class WindowsEventPowerShellParser:
    name = "windows-event-powershell"
    samples = (
        # Shape: `Get-WinEvent -FilterHashtable @{LogName='System';ProviderName='nvlddmkm'} | Format-List`
        # (property names as PowerShell prints them; the unresolved-description wording is .NET's
        # EventLogRecord fallback); the insertion strings are the real ones of corpus openshell2025.
        """

TimeCreated  : 11/14/2024 10:11:12 AM
ProviderName : nvlddmkm
Id           : 153
Message      : The description for Event ID '153' in Source 'nvlddmkm' cannot be found.  The local computer may not
               have the necessary registry information or message DLL files to display the message, or you may not
               have permission to access them.  The following information is part of the event:'\\Device\\Video3',
               'Error occurred on GPUID: 100'

TimeCreated  : 11/14/2024 10:11:13 AM
ProviderName : Display
Id           : 4101
Message      : Display driver nvlddmkm stopped responding and has successfully recovered.
""",
        # Shape: `Get-WinEvent -LogName System -MaxEvents 2` default table (grouped by provider).
        """

   ProviderName: nvlddmkm

TimeCreated                      Id LevelDisplayName Message
-----------                      -- ---------------- -------
14.11.2024 10:11:12             153 Error            The description for Event ID '153' in Source 'nvlddmkm' ...
14.11.2024 10:11:12              14 Error            The description for Event ID '14' in Source 'nvlddmkm' c...
""",
    )

    def detect(self, head: list[str]) -> float:
        keys = {m.group(1).lower() for h in head[:30] if (m := _LIST_KEY.match(h)) and not h.startswith(" ")}
        if {"timecreated", "id"} <= keys or {"timecreated", "providername"} <= keys:
            return 0.92
        if {"timegenerated", "entrytype"} <= keys or {"instanceid", "source", "message"} <= keys:
            return 0.9
        for i, h in enumerate(head[:20]):
            if _TABLE_HEAD.match(h) and i + 1 < len(head) and _DASHES.match(head[i + 1]):
                return 0.9
        if any(_GROUP.match(h) for h in head[:5]):
            return 0.5
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        head = doc.head(40)
        is_table = any(_TABLE_HEAD.match(h) for h in head)
        recs = list(_table_records(doc) if is_table else _list_records(doc))
        times = [r.fields.get("timecreated") or r.fields.get("timegenerated") or r.fields.get("time") or ""
                 for r in recs]
        order, ambiguous = guess_date_order(times)
        if ambiguous:
            ctx.warn("local dates are ambiguous (day and month both ≤ 12); read as month/day (US order)")
        for rec, when in zip(recs, times, strict=True):
            f = rec.fields
            message = f.get("message", "")
            strings, rendered = _strings_of(message, f)
            provider = f.get("providername") or f.get("source")
            raw_id = f.get("id") or f.get("eventid") or f.get("instanceid") or ""
            event_id = int(raw_id) if raw_id.isdigit() else None
            qualifiers = int(f["qualifiers"]) if f.get("qualifiers", "").isdigit() else None
            if event_id is not None and event_id > 0xFFFF:  # Get-EventLog InstanceId = qualifiers << 16 | id
                qualifiers, event_id = event_id >> 16, event_id & 0xFFFF
            um = _UNRESOLVED.search(message)
            if um:
                event_id = event_id if event_id is not None else int(um.group(1))
                provider = provider or um.group(2)
            level_text = f.get("leveldisplayname") or f.get("entrytype") or f.get("level") or ""
            level = level_from_name(level_text) if level_text else None
            ts, ts_source = self._time(when, order, ctx)
            record_id = f.get("recordid") or f.get("index") or ""
            yield build_winevent(
                ctx, ctx.origin(rec.first, rec.last_no - rec.first.no + 1), ts=ts, ts_source=ts_source,
                provider=provider, event_id=event_id, level=level, qualifiers=qualifiers,
                computer=f.get("machinename") or None, channel=f.get("logname") or None,
                record_id=int(record_id) if record_id.isdigit() else None, data=strings, rendered=rendered,
                detail=message if "\n" in (rendered or "") else "",
                extra={"export": "powershell-table" if is_table else "powershell-list"},
            )

    @staticmethod
    def _time(when: str, order: str, ctx: ParseContext) -> tuple[int | None, TsSource]:
        if not when:
            return None, TsSource.NONE
        naive = parse_local_datetime(when, order)
        if naive is None:
            m = _SHORT_TIME.match(when)
            if m and ctx.year and m.group(1) in MONTHS:
                try:
                    naive = datetime(ctx.year, MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)), int(m.group(4)))
                except ValueError:
                    naive = None
        return stamp(naive, ctx)


PARSER = WindowsEventPowerShellParser()
