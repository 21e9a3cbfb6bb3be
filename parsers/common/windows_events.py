"""Shared pieces of the Windows event-log parsers (not a parser itself).

Every Windows export shape (XML, .evtx, Event Viewer text, wevtutil text, PowerShell lists and
tables, Event Viewer CSV) ends in the same ``winevent`` :class:`Event`, built here, so that a
signature written for ``nvlddmkm 153`` matches whichever way the user exported the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from forensics.parsers.common.base import ParseContext

from forensics.events import Event, Origin, Severity, TsSource
from forensics.lazy_re import lazy_compile

__all__ = [
    "DateOrder",
    "KNOWN_MESSAGES",
    "LEVEL_NAMES",
    "build_winevent",
    "guess_date_order",
    "level_from_name",
    "parse_local_datetime",
    "parse_iso_utc",
    "stamp",
]

#: Windows event levels: 1 critical, 2 error, 3 warning, 4 information, 5 verbose (0 = "LogAlways").
_LEVEL_SEVERITY = {0: Severity.INFO, 1: Severity.CRITICAL, 2: Severity.ERROR, 3: Severity.WARNING,
                   4: Severity.INFO, 5: Severity.DEBUG}

#: Level display names as Event Viewer and PowerShell print them (English, German, French, Spanish,
#: Italian, Portuguese, Russian, Chinese simplified/traditional, Japanese, Korean).
LEVEL_NAMES = {
    "critical": 1, "kritisch": 1, "critique": 1, "crítico": 1, "critico": 1, "крайне важное": 1,
    "критический": 1, "критическая": 1, "критическое": 1, "关键": 1, "严重": 1, "重大": 1, "嚴重": 1,
    "긴급": 1, "위험": 1,
    "error": 2, "fehler": 2, "erreur": 2, "errore": 2, "erro": 2, "ошибка": 2, "错误": 2, "錯誤": 2,
    "エラー": 2, "오류": 2,
    "warning": 3, "warnung": 3, "avertissement": 3, "advertencia": 3, "avviso": 3, "aviso": 3,
    "предупреждение": 3, "警告": 3, "경고": 3,
    "information": 4, "informationen": 4, "informations": 4, "información": 4, "info": 4, "informazioni": 4,
    "informações": 4, "сведения": 4, "信息": 4, "資訊": 4, "情報": 4, "정보": 4,
    "verbose": 5, "ausführlich": 5, "détails": 5, "detallado": 5, "подробности": 5, "详细": 5, "詳細": 5,
    "자세한 정보": 5,
}


def level_from_name(text: str) -> int | None:
    """The numeric level of a display name (``Error`` → 2) or of a number written as text."""
    t = text.strip().lower()
    if t.isdigit():
        return int(t)
    return LEVEL_NAMES.get(t)


#: Descriptions of well-known events whose message DLL is not in an XML/evtx export
#: (Microsoft's documented wording; ``{0}`` = first insertion string).
KNOWN_MESSAGES = {
    ("display", 4101): "Display driver {0} stopped responding and has successfully recovered.",
}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def build_winevent(
    ctx: ParseContext,
    origin: Origin,
    *,
    ts: int | None,
    ts_source: TsSource,
    provider: str | None,
    event_id: int | None,
    level: int | None = None,
    qualifiers: int | None = None,
    computer: str | None = None,
    channel: str | None = None,
    record_id: int | None = None,
    data: Sequence[str] = (),
    rendered: str | None = None,
    detail: str = "",
    extra: dict[str, Any] | None = None,
) -> Event:
    """One ``winevent``: message = ``<provider> <id>: <description or insertion strings>``."""
    strings = [s for s in (_one_line(d) for d in data) if s]
    known = KNOWN_MESSAGES.get(((provider or "").lower(), event_id or -1))
    if not (rendered and rendered.strip()) and known and strings:
        rendered = known.format(*strings)
    body = _one_line(rendered) if rendered and rendered.strip() else " | ".join(strings)
    head = " ".join(p for p in (provider or "", str(event_id) if event_id is not None else "") if p)
    message = f"{head}: {body}" if head and body else (head or body or "Windows event")
    attrs: dict[str, Any] = {
        "provider": provider,
        "event_id": event_id & 0xFFFF if event_id is not None else None,
        "qualifiers": qualifiers,
        "level": level,
        "computer": computer,
        "channel": channel,
        "record_id": record_id,
        "data": list(strings),
    }
    if extra:
        attrs.update(extra)
    code = _bugcheck_code((extra or {}).get("named_data"))
    if code:  # Kernel-Power 41 keeps the stop code in EventData, in decimal: name it in the message
        attrs["bugcheck_code"] = f"0x{code:x}"
        message += f" [BugcheckCode {code} = 0x{code:x}]"
    severity = _LEVEL_SEVERITY.get(level, Severity.INFO) if level is not None else Severity.INFO
    return Event(
        ts=ts,
        ts_source=ts_source,
        source=ctx.source,
        kind="winevent",
        message=message,
        origin=origin,
        severity=severity,
        host=computer or ctx.host,
        attrs=attrs,
        detail=detail,
    )


def _bugcheck_code(named: Any) -> int | None:
    """``BugcheckCode`` of an event's named data (decimal, or hex with ``0x``); ``None`` when 0 or absent."""
    if not isinstance(named, dict):
        return None
    raw = str(named.get("BugcheckCode", "")).strip()
    try:
        code = int(raw, 16) if raw.lower().startswith("0x") else int(raw)
    except ValueError:
        return None
    return code or None


# -- times ------------------------------------------------------------------------------------

_ISO = lazy_compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?\s*(Z|[+-]\d\d:?\d\d)?")


def parse_iso_utc(text: str) -> tuple[int, bool] | None:
    """An ISO-8601 time in UTC ns and whether it carried a zone (``Z``/offset). Fractions of any
    length (Windows writes 3 or 7 digits) are kept to the nanosecond."""
    m = _ISO.search(text)
    if not m:
        return None
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    frac = (m.group(7) or "")[:9].ljust(9, "0")
    try:
        base = datetime(y, mo, d, h, mi, s, tzinfo=UTC)
    except ValueError:
        return None
    ns = int(base.timestamp()) * 1_000_000_000 + int(frac)
    zone = m.group(8)
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        hh, mm = int(zone[1:3]), int(zone[-2:])
        ns -= sign * (hh * 3600 + mm * 60) * 1_000_000_000
    return ns, zone is not None


class DateOrder:
    """How a file writes numeric dates: ``mdy`` (US), ``dmy`` (most of Europe) or ``ymd``."""

    MDY = "mdy"
    DMY = "dmy"
    YMD = "ymd"


_LOCAL = lazy_compile(
    r"(?P<a>\d{1,4})(?P<sep>[./-])(?P<b>\d{1,2})(?P=sep)(?P<c>\d{2,4})\.?[ T,]+"
    r"(?:(?P<ampm0>上午|下午|午前|午後|오전|오후)\s*)?"
    r"(?P<h>\d{1,2}):(?P<mi>\d\d)(?::(?P<s>\d\d)(?:[.,](?P<f>\d+))?)?\s*(?P<ampm>[AaPp]\.?[Mm]\.?)?"
)
#: Chinese, Japanese and Korean words for before/after noon, written before the time.
_AMPM_WORDS = {"上午": "am", "午前": "am", "오전": "am", "下午": "pm", "午後": "pm", "오후": "pm"}


def _fields(text: str) -> tuple[int, int, int, str] | None:
    m = _LOCAL.search(text)
    if not m:
        return None
    return int(m.group("a")), int(m.group("b")), int(m.group("c")), m.group("sep")


def guess_date_order(samples: Sequence[str]) -> tuple[str, bool]:
    """The date order of a file's local stamps and whether it stayed ambiguous *and* matters.

    A field above 12 decides; dotted dates are day-first (German, Russian …); four-digit first
    field means year-first. Otherwise US order is assumed, and it matters only if some date
    would read differently the other way (day ≠ month).
    """
    ambiguous_matters = False
    for text in samples:
        f = _fields(text)
        if f is None:
            continue
        a, b, _c, sep = f
        if a > 31:
            return DateOrder.YMD, False
        if sep == ".":
            return DateOrder.DMY, False
        if a > 12:
            return DateOrder.DMY, False
        if b > 12:
            return DateOrder.MDY, False
        if a != b:
            ambiguous_matters = True
    return DateOrder.MDY, ambiguous_matters


def parse_local_datetime(text: str, order: str) -> datetime | None:
    """A naive local ``datetime`` from a locale-formatted stamp (``11/14/2024 10:11:12 AM``,
    ``14.11.2024 10:11:12``, ``2024-11-14 10:11:12``)."""
    m = _LOCAL.search(text)
    if not m:
        return None
    a, b, c = int(m.group("a")), int(m.group("b")), int(m.group("c"))
    if order == DateOrder.YMD or a > 31:
        y, mo, d = a, b, c
    elif order == DateOrder.DMY:
        d, mo, y = a, b, c
    else:
        mo, d, y = a, b, c
    if y < 100:
        y += 2000
    h, mi, s = int(m.group("h")), int(m.group("mi")), int(m.group("s") or 0)
    ampm = (m.group("ampm") or "").lower().replace(".", "") or _AMPM_WORDS.get(m.group("ampm0") or "", "")
    if ampm == "pm" and h < 12:
        h += 12
    elif ampm == "am" and h == 12:
        h = 0
    frac = (m.group("f") or "")[:6].ljust(6, "0")
    try:
        return datetime(y, mo, d, h, mi, s, int(frac))
    except ValueError:
        return None


def stamp(naive: datetime | None, ctx: ParseContext) -> tuple[int | None, TsSource]:
    """UTC ns for a wall-clock time: exact through ``ctx.tz`` when known, else read as UTC and
    marked ``local`` (zone unknown)."""
    if naive is None:
        return None, TsSource.NONE
    if ctx.tz is not None:
        aware = naive.replace(tzinfo=ctx.tz)
        return _ns(aware), TsSource.EXACT
    return _ns(naive.replace(tzinfo=UTC)), TsSource.LOCAL


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ns(dt: datetime) -> int:
    return (dt - _EPOCH) // timedelta(microseconds=1) * 1000
