"""Event Viewer *Save All Events As…* CSV (comma) and TXT (tab): header ``Level,Date and Time,Source,
Event ID,Task Category`` (localised in other UI languages) and a sixth, unnamed column with the
description, which may hold newlines inside quotes.

Times are local and locale-formatted (``11/14/2024 10:11:12 AM``, ``14.11.2024 10:11:12``):
``ctx.tz`` places them, otherwise they are ``local``. The day/month order is decided once per
file (a field above 12 decides; else US order, with a warning only if that choice changes a date).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

from forensics.parsers.common.base import ParseContext, Record, whole_text
from forensics.parsers.common.windows_events import (
    build_winevent,
    guess_date_order,
    level_from_name,
    parse_local_datetime,
    stamp,
)
from forensics.parsers.windows_event_text import insertion_strings

from forensics.events import TsSource
from forensics.ingest.textdoc import Line, TextDocument

__all__ = ["PARSER"]

#: Header cells per UI language: level, date, source, event id, task category.
_HEADERS = (
    ("level", "date and time", "source", "event id", "task category"),
    ("ebene", "datum und uhrzeit", "quelle", "ereignis-id", "aufgabenkategorie"),
    ("niveau", "date et heure", "source", "id de l’événement", "catégorie de la tâche"),
    ("nivel", "fecha y hora", "origen", "id. del evento", "categoría de la tarea"),
    ("niveau", "date et heure", "source", "id de l'événement", "catégorie de la tâche"),
    ("级别", "日期和时间", "来源", "事件 id", "任务类别"),
    ("層級", "日期和時間", "來源", "事件識別碼", "工作類別"),
    ("レベル", "日付と時刻", "ソース", "イベント id", "タスクのカテゴリ"),
    ("уровень", "дата и время", "источник", "код события", "категория задачи"),
)


def _header_kind(line: str) -> str | None:
    for sep in (",", "\t", ";"):
        cells = [c.strip().strip('"').lower() for c in line.lstrip("\ufeff").split(sep)]
        if len(cells) >= 5 and any(tuple(cells[:5]) == h for h in _HEADERS):
            return sep
    return None


class WindowsEventCsvParser:
    name = "windows-event-csv"
    samples = (
        # Shape: Event Viewer "Save All Events As… → CSV" (documented column order; sixth column
        # unnamed); texts are the real nvlddmkm 153 strings (corpus openshell2025) and Microsoft's
        # documented Display 4101 message.
        """Level,Date and Time,Source,Event ID,Task Category
Warning,11/14/2024 10:11:13 AM,Display,4101,None,Display driver nvlddmkm stopped responding and has successfully recovered.
Error,11/14/2024 10:11:12 AM,nvlddmkm,153,None,"The description for Event ID 153 from source nvlddmkm cannot be found. Either the component that raises this event is not installed on your local computer or the installation is corrupted. You can install or repair the component on the local computer.

If the event originated on another computer, the display information had to be saved with the event.

The following information was included with the event: 

\\Device\\Video3
Error occurred on GPUID: 100

The message resource is present but the message was not found in the message table
"
""",  # noqa: E501, W291
        # Shape: the tab-separated TXT variant from a German Windows.
        "Ebene\tDatum und Uhrzeit\tQuelle\tEreignis-ID\tAufgabenkategorie\n"
        "Warnung\t14.11.2024 10:11:13\tDisplay\t4101\tKeine\t"
        "Der Anzeigetreiber nvlddmkm reagiert nicht mehr und wurde wiederhergestellt.\n",
    )

    def detect(self, head: list[str]) -> float:
        return 0.97 if head and _header_kind(head[0]) else 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        raw = whole_text(doc, ctx)
        if raw is None:
            return
        text = raw.decode("utf-8", errors="replace")
        first_nl = text.find("\n")
        sep = _header_kind(text[: first_nl if first_nl >= 0 else len(text)])
        if sep is None:
            ctx.warn("no Event Viewer header line")
            return
        starts = doc.line_starts()
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep)
        rows: list[tuple[int, int, list[str]]] = []
        try:
            next(reader)
            line_before = reader.line_num
            for row in reader:
                rows.append((line_before + 1, reader.line_num, row))
                line_before = reader.line_num
        except csv.Error as exc:
            ctx.warn(f"csv stopped being readable ({exc}); read what came before")
        order, ambiguous = guess_date_order([r[2][1] for r in rows if len(r[2]) > 1])
        if ambiguous:
            ctx.warn("local dates are ambiguous (day and month both ≤ 12); read as month/day (US order)")
        for first_no, last_no, row in rows:
            if len(row) < 4 or not any(c.strip() for c in row):
                continue
            level_text, when, source, event_id_text = (c.strip() for c in row[:4])
            description = row[5] if len(row) > 5 else ""
            strings, rendered = insertion_strings(description.splitlines())
            naive = parse_local_datetime(when, order)
            ts, ts_source = stamp(naive, ctx) if naive else (None, TsSource.NONE)
            line_no = min(first_no, len(starts))
            line = Line(line_no, starts[line_no - 1], "")
            yield build_winevent(
                ctx, ctx.origin(line, last_no - first_no + 1), ts=ts, ts_source=ts_source,
                provider=source or None, event_id=int(event_id_text) if event_id_text.isdigit() else None,
                level=level_from_name(level_text), data=strings, rendered=rendered,
                detail=description.strip() if "\n" in (rendered or "") else "",
                extra={"export": "eventviewer-csv" if sep == "," else "eventviewer-txt",
                       "task": row[4].strip() if len(row) > 4 else None},
            )


PARSER = WindowsEventCsvParser()
