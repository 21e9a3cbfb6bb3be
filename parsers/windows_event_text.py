"""Windows events as plain text, in the shapes people paste:

* Event Viewer *General* tab copied by hand: ``The description for Event ID 153 from source
  nvlddmkm cannot be found. …`` / ``The following information was included with the event:`` /
  insertion strings (no time, no level);
* Event Viewer *Copy → Copy details as text*: ``Log Name:``, ``Source:``, ``Date:``, ``Event ID:``,
  ``Level:``, ``Computer:``, ``Description:`` and often an ``Event Xml:`` part (whose UTC
  ``SystemTime`` then wins over the local ``Date:``);
* ``wevtutil qe … /f:text``: ``Event[0]:`` blocks with the same indented keys;
* the Hyper-V worker record of a crashed WSL VM (``'<VM id>' has encountered a fatal error.
  The guest operating system reported …`` then ``Guest message:`` and the Linux oops), whose
  guest text is also handed to the matching kernel-log parser.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.windows_events import (
    build_winevent,
    guess_date_order,
    level_from_name,
    parse_iso_utc,
    parse_local_datetime,
    stamp,
)
from forensics.parsers.windows_event_xml import iter_event_xml, salvage_event_xml

from forensics.events import TsSource
from forensics.ingest.textdoc import Line, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER", "insertion_strings"]

#: "Copy details as text" field labels per UI language (English, German, French, Spanish, Italian,
#: Portuguese, Russian, Chinese simplified and traditional, Japanese, Korean), lower-cased.
_KEYS = {
    "log name": "channel", "protokollname": "channel", "nom du journal": "channel",
    "nombre de registro": "channel", "nome registro": "channel", "nome do log": "channel",
    "имя журнала": "channel", "日志名称": "channel", "記錄檔名稱": "channel", "ログの名前": "channel",
    "로그 이름": "channel",
    "source": "provider", "quelle": "provider", "origen": "provider", "origine": "provider", "fonte": "provider",
    "источник": "provider", "来源": "provider", "來源": "provider", "ソース": "provider", "원본": "provider",
    "date": "date", "datum": "date", "fecha": "date", "data": "date", "дата": "date", "日期": "date",
    "日付": "date", "날짜": "date",
    "event id": "event_id", "ereignis-id": "event_id", "id de l'événement": "event_id",
    "id de l’événement": "event_id", "id. del evento": "event_id", "id evento": "event_id",
    "id do evento": "event_id", "код события": "event_id", "事件 id": "event_id", "事件識別碼": "event_id",
    "イベント id": "event_id", "이벤트 id": "event_id",
    "task category": "task", "task": "task", "aufgabenkategorie": "task", "catégorie de la tâche": "task",
    "categoría de la tarea": "task", "categoria attività": "task", "categoria da tarefa": "task",
    "категория задачи": "task", "任务类别": "task", "工作類別": "task", "タスクのカテゴリ": "task",
    "작업 범주": "task",
    "level": "level", "ebene": "level", "niveau": "level", "nivel": "level", "livello": "level",
    "уровень": "level", "级别": "level", "層級": "level", "レベル": "level", "수준": "level",
    "computer": "computer", "ordinateur": "computer", "equipo": "computer", "компьютер": "computer",
    "计算机": "computer", "電腦": "computer", "コンピューター": "computer", "컴퓨터": "computer",
    "keywords": "keywords", "keyword": "keywords", "user": "user", "user name": "user_name",
    "opcode": "opcode", "schlüsselwörter": "keywords", "benutzer": "user",
}
_DESC_KEYS = ("description", "beschreibung", "descripción", "descrizione", "descrição", "описание", "描述",
              "説明", "설명")
# A label is letters (any script), spaces and a few marks, then an ASCII or full-width colon.
_KEY_LINE = lazy_compile(r"^\s*([^\W\d_][\w'’. -]{0,29}?)\s*[:：]\s*(.*)$")
_WEVTUTIL_START = lazy_compile(r"^\s*Event\[\d+\]:\s*$")
_DETAILS_START = lazy_compile(
    r"^\s*(Log Name|Protokollname|Nom du journal|Nombre de registro|Nome registro|Nome do log|Имя журнала|"
    r"日志名称|記錄檔名稱|ログの名前|로그 이름)\s*[:：]"
)
_EVENT_ID_LABEL = lazy_compile(
    r"^[^\S\n]*(?:Event ID|Ereignis-ID|ID de l.événement|Id\. del evento|ID evento|ID do evento|Код события|事件 ID|"
    r"事件識別碼|イベント ID|이벤트 ID)\s*[:：]", re.M
)
_UNRESOLVED = lazy_compile(
    r"The description for Event ID '?(\d{1,10})'? (?:from|in) source '?([^' ]+)'? cannot be found", re.I
)
_UNRESOLVED_DE = lazy_compile(
    r"Die Beschreibung für die Ereignis-ID (\d{1,10}) aus der Quelle (\S+) wurde nicht gefunden")
_INCLUDED = lazy_compile(
    r"following information (?:was included with|is part of) the event|folgenden Informationen", re.I
)
_RESOURCE_NOTE = lazy_compile(r"message resource is present|the message resource|Die Nachrichtenressource", re.I)
_HYPERV = lazy_compile(r"has encountered a fatal error\.\s+The guest operating system reported")
_GUEST_MESSAGE = lazy_compile(r"^\s*Guest message:\s*$", re.I)
_EVENT_XML = lazy_compile(r"^\s*(?:Event Xml|Ereignis-XML|Xml de l.événement|Xml del evento|Xml de evento|XML evento|"
                          r"Xml события|事件 Xml|イベント Xml|이벤트 Xml)\s*[:：]\s*$", re.I)


@dataclass
class _Block:
    first: Line
    shape: str  # general | details | wevtutil | hyperv
    fields: dict[str, str] = field(default_factory=dict)
    description: list[str] = field(default_factory=list)
    xml_lines: list[Line] = field(default_factory=list)
    guest: list[Line] = field(default_factory=list)
    last_no: int = 0


def _starts_block(text: str) -> str | None:
    if _WEVTUTIL_START.match(text):
        return "wevtutil"
    if _DETAILS_START.match(text):
        return "details"
    if _UNRESOLVED.search(text) or _UNRESOLVED_DE.search(text):
        return "general"
    if _HYPERV.search(text):
        return "hyperv"
    return None


def _blocks(doc: TextDocument) -> Iterator[_Block]:
    block: _Block | None = None
    part = "fields"
    for line in doc.lines():
        text = line.text
        shape = _starts_block(text)
        # a wevtutil/details block owns the "Log Name:" and unresolved-description lines inside it
        inside_desc = block is not None and block.shape in ("wevtutil", "details") and part == "description"
        if shape and not (block is not None and block.shape == "wevtutil" and shape == "details"
                          and part == "fields") and not (inside_desc and shape == "general"):
            if block is not None:
                yield block
            block = _Block(line, shape)
            part = "fields" if shape in ("wevtutil", "details") else "description"
            if shape in ("general", "hyperv"):
                block.description.append(text)
            block.last_no = line.no
            continue
        if block is None:
            continue
        block.last_no = line.no
        if part == "xml":
            block.xml_lines.append(line)
            if "</Event>" in text:
                part = "after"
            continue
        if part == "guest":
            block.guest.append(line)
            continue
        if _EVENT_XML.match(text):
            part = "xml"
            continue
        if block.shape == "hyperv" and _GUEST_MESSAGE.match(text):
            part = "guest"
            continue
        if part == "fields":
            m = _KEY_LINE.match(text)
            if m:
                key = m.group(1).strip().lower()
                if key in _DESC_KEYS:
                    part = "description"
                    if m.group(2).strip():
                        block.description.append(m.group(2))
                    continue
                if key in _KEYS:
                    block.fields[_KEYS[key]] = m.group(2).strip()
            continue
        if part == "description":
            block.description.append(text)
    if block is not None:
        yield block


def insertion_strings(desc: list[str]) -> tuple[list[str], str | None]:
    """(insertion strings, rendered text): unresolved descriptions keep only their strings."""
    for i, text in enumerate(desc):
        if _INCLUDED.search(text):
            tail = text[_INCLUDED.search(text).end():].lstrip(": ")  # type: ignore[union-attr]
            strings: list[str] = []
            if tail:  # PowerShell style on one line: 'a', 'b'
                strings.extend(re.findall(r"'([^']*)'", tail) or [tail])
            for t in desc[i + 1:]:
                if _RESOURCE_NOTE.search(t):
                    break
                if t.strip():
                    strings.append(t.strip())
            return strings, None
    text = "\n".join(d for d in desc).strip()
    return [], text or None


class WindowsEventTextParser:
    name = "windows-event-text"
    samples = (
        # Real: Event Viewer General tab of nvlddmkm 153 (corpus openshell2025-nvlddmkm-event153).
        """The description for Event ID 153 from source nvlddmkm cannot be found. Either the component that raises this event is not installed on your local computer or the installation is corrupted. You can install or repair the component on the local computer.

If the event originated on another computer, the display information had to be saved with the event.

The following information was included with the event: 

\\Device\\Video3
Error occurred on GPUID: 100

The message resource is present but the message was not found in the message table
""",  # noqa: E501, W291
        # Shape: `wevtutil qe System /f:text` (documented field layout; description text from the
        # Microsoft TDR documentation).
        """Event[0]:
  Log Name: System
  Source: Display
  Date: 2024-11-14T10:11:13.1230000Z
  Event ID: 4101
  Task: N/A
  Level: Warning
  Opcode: N/A
  Keyword: Classic
  User: N/A
  User Name: N/A
  Computer: WS01
  Description: 
Display driver nvlddmkm stopped responding and has successfully recovered.
""",  # noqa: E501, W291
        # Real: Hyper-V worker record of a crashed WSL VM (corpus wsl10558), first lines.
        """'CBE50D14-6A2A-4DB3-8399-BAA1E458EAAA' has encountered a fatal error.  The guest operating system reported that it failed with the following error codes: ErrorCode0: 0x0, ErrorCode1: 0x0, ErrorCode2: 0x0, ErrorCode3: 0x0, ErrorCode4: 0x0.  PreOSId: 0.  If the problem persists, contact Product Support for the guest operating system.  (Virtual machine ID CBE50D14-6A2A-4DB3-8399-BAA1E458EAAA)

Guest message:
[14820.508204] Oops: 0002 [#1] SMP NOPTI
[14820.508794] RIP: 0010:hmgrtable_free_handle+0x91/0xa0
""",  # noqa: E501, W291
    )

    def detect(self, head: list[str]) -> float:
        if not head:
            return 0.0
        first = head[0]
        if _HYPERV.search(first) or _UNRESOLVED.search(first) or _UNRESOLVED_DE.search(first):
            return 0.97
        text = "\n".join(head[:30])
        if _WEVTUTIL_START.match(first) and re.search(r"^\s*Log Name:", text, re.M):
            return 0.95
        if _DETAILS_START.match(first) and _EVENT_ID_LABEL.search(text):
            return 0.95
        if _UNRESOLVED.search(text) or _HYPERV.search(text):
            return 0.7
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        blocks = list(_blocks(doc))
        order, ambiguous = guess_date_order([b.fields.get("date", "") for b in blocks])
        if ambiguous:
            ctx.warn("local dates are ambiguous (day and month both ≤ 12); read as month/day (US order)")
        for b in blocks:
            yield from self._records(doc, ctx, b, order)

    def _records(self, doc: TextDocument, ctx: ParseContext, b: _Block, order: str) -> Iterator[Record]:
        if b.xml_lines:  # "Copy details as text" with its Event Xml: the XML is the better record
            start = b.xml_lines[0].offset
            end = b.xml_lines[-1].offset + len(b.xml_lines[-1].text.encode())
            xml_events = list(iter_event_xml(doc, ctx, start=start, end=end, extra={"export": b.shape}, cut_ok=True))
            if xml_events:
                yield from xml_events
                return
        salvaged = salvage_event_xml("\n".join(x.text for x in b.xml_lines)) if b.xml_lines else {}
        fields = b.fields
        strings, rendered = insertion_strings(b.description)
        provider = fields.get("provider")
        event_id: int | None = int(fields["event_id"]) if fields.get("event_id", "").isdigit() else None
        first = "\n".join(b.description[:1])
        m = _UNRESOLVED.search(first) or _UNRESOLVED_DE.search(first)
        if m:
            event_id = event_id if event_id is not None else int(m.group(1))
            provider = provider or m.group(2)
        level = level_from_name(fields["level"]) if fields.get("level") else None
        extra: dict[str, Any] = {"export": b.shape}
        if salvaged:  # an Event Xml part cut before </Event>: its System fields and named data still hold
            provider = provider or salvaged.get("provider")
            event_id = event_id if event_id is not None else salvaged.get("event_id")
            level = level if level is not None else salvaged.get("level")
            if salvaged.get("named"):
                extra["named_data"] = salvaged["named"]
                strings = strings or [f"{k}={v}" for k, v in salvaged["named"].items()]
            if salvaged.get("time"):  # UTC, better than the local Date: line
                fields = {**fields, "date": salvaged["time"]}
            extra["xml_cut"] = True
        if fields.get("task"):
            extra["task"] = fields["task"]
        guest_text = ""
        if b.shape == "hyperv":
            provider = provider or "Microsoft-Windows-Hyper-V-Worker"
            extra["provider_inferred"] = True
            level = level if level is not None else 1
            guest_text = "\n".join(g.text for g in b.guest).strip()
            rendered = " ".join(t.strip() for t in b.description if t.strip())
            if guest_text:
                rendered += " Guest message: " + next(t.strip() for t in guest_text.splitlines() if t.strip())
        ts, ts_source = self._time(fields.get("date", ""), order, ctx)
        detail = ""
        if rendered and "\n" in rendered:
            detail = rendered
        if guest_text:
            detail = "\n".join(t.strip() for t in b.description if t.strip()) + "\nGuest message:\n" + guest_text
        yield build_winevent(
            ctx,
            ctx.origin(b.first, b.last_no - b.first.no + 1),
            ts=ts,
            ts_source=ts_source,
            provider=provider,
            event_id=event_id,
            level=level,
            computer=fields.get("computer") or None,
            channel=fields.get("channel") or None,
            data=strings,
            rendered=rendered,
            detail=detail,
            extra=extra,
        )
        if b.guest:
            from forensics.parsers.nvidia_bug_report import parse_embedded

            first_guest = b.guest[0]
            end = b.guest[-1].offset + len(b.guest[-1].text.encode())
            yield from parse_embedded(doc, first_guest, end, ctx, exclude=(self.name,), min_score=0.3)

    @staticmethod
    def _time(date: str, order: str, ctx: ParseContext) -> tuple[int | None, TsSource]:
        if not date:
            return None, TsSource.NONE
        iso = parse_iso_utc(date)
        if iso is not None:
            ns, zoned = iso
            if zoned:
                return ns, TsSource.EXACT
            naive = parse_local_datetime(date.replace("T", " "), "ymd")
            return stamp(naive, ctx)
        return stamp(parse_local_datetime(date, order), ctx)


PARSER = WindowsEventTextParser()
