"""Windows events as XML: Event Viewer *Details → XML View*, ``wevtutil qe … /f:xml`` (events
concatenated on one line, single-quoted attributes, maybe wrapped in ``<Events>``) and
``/f:RenderedXml`` (with ``<RenderingInfo><Message>``).

Each ``<Event>`` becomes one ``winevent``; ``SystemTime`` is UTC, so times are ``exact``.
Event Viewer's XML view pasted from a browser puts ``- `` before collapsible tags; that is
stripped. Markup posted HTML-escaped (``&lt;Event …&gt;``, a web page's copy) is read unescaped, at
the same lines. One event's XML pasted without its ``<Event>`` element (from ``<Provider …>`` or
``<EventData>`` on: Kernel-Power 41's ``BugcheckCode`` quoted alone) becomes one ``winevent`` of what it
holds. Documents with a DTD are refused (no entity expansion from user files).
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

from forensics.parsers.common.base import ParseContext, Record, whole_text
from forensics.parsers.common.windows_events import build_winevent, parse_iso_utc

from forensics.events import Origin, TsSource
from forensics.ingest.textdoc import TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER", "iter_event_xml", "salvage_event_xml"]

_EVENT_START = lazy_compile(rb"<Event[\s>]")
_EVENT_END = b"</Event>"
_COLLAPSE_MARK = lazy_compile(r"(?m)^[ \t]*[-+][ \t]+(?=<)")
_MAX_EVENT_BYTES = 1 << 20


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child(elem: ET.Element | None, name: str) -> ET.Element | None:
    if elem is None:
        return None
    for c in elem:
        if _local(c.tag) == name:
            return c
    return None


def _text(elem: ET.Element | None) -> str:
    return (elem.text or "").strip() if elem is not None else ""


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    t = text.strip()
    try:
        return int(t, 16) if t.lower().startswith("0x") else int(t)
    except ValueError:
        return None


def _leaf_texts(elem: ET.Element) -> list[str]:
    out = []
    for e in elem.iter():
        if len(e) == 0 and e.text and e.text.strip():
            out.append(e.text.strip())
    return out


def _fields(root: ET.Element) -> dict[str, Any]:
    system = _child(root, "System")
    provider = _child(system, "Provider")
    eid = _child(system, "EventID")
    created = _child(system, "TimeCreated")
    data: list[str] = []
    named: dict[str, str] = {}
    binary = ""
    event_data = _child(root, "EventData")
    if event_data is not None:
        for d in event_data:
            name = _local(d.tag)
            value = (d.text or "").strip()
            if name == "Data":
                data.append(value)
                if d.get("Name"):
                    named[str(d.get("Name"))] = value
            elif name == "Binary":
                binary = value
    user_data = _child(root, "UserData")
    if user_data is not None:
        data.extend(_leaf_texts(user_data))
    rendering = _child(root, "RenderingInfo")
    return {
        "provider": ((provider.get("Name") or provider.get("EventSourceName") or "").strip() or None)
        if provider is not None else None,
        "event_id": _int(_text(eid)),
        "qualifiers": _int(eid.get("Qualifiers")) if eid is not None and eid.get("Qualifiers") else None,
        "level": _int(_text(_child(system, "Level"))),
        "time": (created.get("SystemTime") or "").strip() if created is not None else "",
        "record_id": _int(_text(_child(system, "EventRecordID"))),
        "channel": _text(_child(system, "Channel")) or None,
        "computer": _text(_child(system, "Computer")) or None,
        "data": data,
        "named": named,
        "binary": binary,
        "rendered": _text(_child(rendering, "Message")) or None,
    }


def iter_event_xml(doc: TextDocument, ctx: ParseContext, extra: dict[str, Any] | None = None,
                   start: int = 0, end: int | None = None, cut_ok: bool = False) -> Iterator[Record]:
    """Every ``<Event>`` element of ``doc`` (within bytes ``start:end``) as a ``winevent``; ``cut_ok``:
    an element cut before ``</Event>`` is the caller's to salvage (no warning)."""
    data = doc.data
    limit = len(data) if end is None else end
    pos = start
    bad = 0
    while True:
        m = _EVENT_START.search(data, pos, limit)
        if not m:
            return
        ev_start = m.start()
        ev_end = data.find(_EVENT_END, ev_start, limit)
        if ev_end < 0:
            if not cut_ok:
                ctx.warn("an <Event> element is not closed (file cut?); skipped", doc.line_at(ev_start))
            return
        ev_end += len(_EVENT_END)
        pos = ev_end
        chunk = data[ev_start:ev_end]
        line = doc.line_at(ev_start)
        if len(chunk) > _MAX_EVENT_BYTES or b"<!DOCTYPE" in chunk or b"<!ENTITY" in chunk:
            ctx.warn("oversized or DTD-bearing <Event> element skipped", line)
            continue
        text = _COLLAPSE_MARK.sub("", chunk.decode("utf-8", errors="replace"))
        try:
            root = ET.fromstring(text)
        except ET.ParseError as exc:
            bad += 1
            if bad <= 5:
                ctx.warn(f"unreadable <Event> element ({exc})", line)
            continue
        f = _fields(root)
        parsed = parse_iso_utc(f["time"]) if f["time"] else None
        ts, ts_source = (parsed[0], TsSource.EXACT) if parsed else (None, TsSource.NONE)
        attrs = dict(extra or {})
        if f["named"]:
            attrs["named_data"] = f["named"]
        if f["binary"]:
            attrs["binary"] = f["binary"][:1024]
        multi = [s for s in [f["rendered"] or "", *f["data"]] if "\n" in s]
        detail = "\n".join([f["rendered"] or " | ".join(f["data"])] + f["data"]) if multi else ""
        yield build_winevent(
            ctx,
            ctx.origin(line, chunk.count(b"\n") + 1),
            ts=ts,
            ts_source=ts_source,
            provider=f["provider"],
            event_id=f["event_id"],
            level=f["level"],
            qualifiers=f["qualifiers"],
            computer=f["computer"],
            channel=f["channel"],
            record_id=f["record_id"],
            data=f["data"],
            rendered=f["rendered"],
            detail=detail,
            extra=attrs,
        )


_SALVAGE = {
    "provider": re.compile(r"<Provider\s[^>]*?Name=[\"']([^\"']+)"),
    "event_id": re.compile(r"<EventID[^>]*>\s*(\d+)\s*</EventID>"),
    "level": re.compile(r"<Level>\s*(\d+)\s*</Level>"),
    "time": re.compile(r"<TimeCreated\s[^>]*?SystemTime=[\"']([^\"']+)"),
    "computer": re.compile(r"<Computer>([^<]+)</Computer>"),
}
_NAMED_DATA = lazy_compile(r"<Data\s+Name=[\"']([^\"']+)[\"']\s*>([^<]*)</Data>")


def salvage_event_xml(text: str) -> dict[str, Any]:
    """The System fields and named ``<Data>`` of an ``<Event>`` that was cut before its end (a paste
    that stopped mid-way): language-neutral facts a localized text export would otherwise lose."""
    out: dict[str, Any] = {}
    for key, rx in _SALVAGE.items():
        m = rx.search(text)
        if m:
            out[key] = int(m.group(1)) if key in ("event_id", "level") else m.group(1).strip()
    named = {m.group(1): m.group(2).strip() for m in _NAMED_DATA.finditer(text)}
    if named:
        out["named"] = named
    return out


def _salvage_last(doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
    """An ``<Event>`` the paste cut before ``</Event>``: its System fields and named data, marked ``xml_cut``."""
    data = doc.data
    starts = list(_EVENT_START.finditer(data, max(0, len(data) - _MAX_EVENT_BYTES)))
    if not starts or data.find(_EVENT_END, starts[-1].start()) >= 0:
        return
    at = starts[-1].start()
    chunk = data[at:]
    if b"<!DOCTYPE" in chunk or b"<!ENTITY" in chunk:
        return
    found = salvage_event_xml(_COLLAPSE_MARK.sub("", chunk.decode("utf-8", errors="replace")))
    if not found.get("provider") and found.get("event_id") is None:
        return
    yield _salvaged(ctx, found, ctx.origin(doc.line_at(at), chunk.count(b"\n") + 1))


def _salvage_fragment(doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
    """Part of one event's XML pasted without its ``<Event>`` element (from ``<Provider …>`` or
    ``<EventData>`` on): its System fields and named data, marked ``xml_cut``."""
    data = doc.data[:_MAX_EVENT_BYTES]
    if _EVENT_START.search(data) or b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        return
    found = salvage_event_xml(_COLLAPSE_MARK.sub("", data.decode("utf-8", errors="replace")))
    if not found.get("named") and found.get("event_id") is None:
        return
    at = data.find(b"<")
    yield _salvaged(ctx, found, ctx.origin(doc.line_at(max(at, 0)), data.count(b"\n") + 1))


def _salvaged(ctx: ParseContext, found: dict[str, Any], origin: Origin) -> Record:
    """The event ``salvage_event_xml`` recovered from a cut or partial paste, marked ``xml_cut``."""
    parsed = parse_iso_utc(found["time"]) if found.get("time") else None
    ts, ts_source = (parsed[0], TsSource.EXACT) if parsed else (None, TsSource.NONE)
    extra: dict[str, Any] = {"xml_cut": True}
    if found.get("named"):
        extra["named_data"] = found["named"]
    return build_winevent(ctx, origin, ts=ts, ts_source=ts_source, provider=found.get("provider"),
                          event_id=found.get("event_id"), level=found.get("level"), computer=found.get("computer"),
                          data=[f"{k}={v}" for k, v in found.get("named", {}).items()], extra=extra)


_NS = "schemas.microsoft.com/win/2004/08/events/event"
#: An export whose markup was HTML-escaped when it was posted (``- &lt;Event xmlns=…&gt;``).
_ESCAPED = lazy_compile(r"^\s*(?:[-+]\s+)?&lt;")


class WindowsEventXmlParser:
    name = "windows-event-xml"
    samples = (
        # Shape: Event Viewer "Details → XML View" of a real nvlddmkm Event 14 posted on a forum
        # (vistax64.com "who's to blame", 2009), with its "- " collapse markers.
        """- <Event xmlns="http://schemas.microsoft.com/win/2004/08/events/event">
- <System>
<Provider Name="nvlddmkm" />
<EventID Qualifiers="49322">14</EventID>
<Level>2</Level>
<Task>0</Task>
<Keywords>0x80000000000000</Keywords>
<TimeCreated SystemTime="2009-05-05T11:26:24.899Z" />
<EventRecordID>26420</EventRecordID>
<Channel>System</Channel>
<Computer>stoney-PC</Computer>
<Security />
</System>
- <EventData>
<Data>\\Device\\Video4</Data>
<Data />
<Binary>0000000002003000000000000E00AAC0000000000000000000000000000000000000000000000000</Binary>
</EventData>
</Event>
""",
        # Shape: `wevtutil qe System /c:2 /f:xml` (documented: one line, single quotes, no root);
        # the Display 4101 text is Microsoft's documented TDR message.
        "<Event xmlns='http://schemas.microsoft.com/win/2004/08/events/event'><System>"
        "<Provider Name='nvlddmkm'/><EventID Qualifiers='49322'>153</EventID><Level>2</Level>"
        "<Task>0</Task><Keywords>0x80000000000000</Keywords>"
        "<TimeCreated SystemTime='2024-11-14T09:11:12.3456789Z'/><EventRecordID>9001</EventRecordID>"
        "<Channel>System</Channel><Computer>WS01</Computer><Security/></System><EventData>"
        "<Data>\\Device\\Video3</Data><Data>Error occurred on GPUID: 100</Data></EventData></Event>"
        "<Event xmlns='http://schemas.microsoft.com/win/2004/08/events/event'><System>"
        "<Provider Name='Display'/><EventID Qualifiers='0'>4101</EventID><Level>3</Level>"
        "<TimeCreated SystemTime='2024-11-14T09:11:13.1234567Z'/><EventRecordID>9002</EventRecordID>"
        "<Channel>System</Channel><Computer>WS01</Computer></System><EventData>"
        "<Data>nvlddmkm</Data><Data></Data></EventData><RenderingInfo Culture='en-US'>"
        "<Message>Display driver nvlddmkm stopped responding and has successfully recovered.</Message>"
        "</RenderingInfo></Event>\n",
    )

    def detect(self, head: list[str]) -> float:
        if head and _ESCAPED.match(head[0]):
            head = [html.unescape(h) for h in head]
        if not head or not re.match(r"^\s*(?:[-+]\s+)?<", head[0]):
            return 0.0  # XML exports start with markup; text exports that embed XML are not this
        text = "\n".join(head[:20])
        if _NS in text and "<Event" in text:
            return 0.95
        if "<Event" in text and "<Provider Name=" in text and "<EventID" in text:
            return 0.9
        if "<Events>" in text and "<Event" in text:
            return 0.6
        # one event's XML pasted without its <Event> element: from <Provider …> or <EventData> on
        if re.search(r"<Data Name=[\"'][A-Za-z]", text) and ("<EventData" in text or "<EventID" in text):
            return 0.8
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        if _ESCAPED.match(doc.data[:200].decode("utf-8", errors="replace")):
            # entities hold no newline: the unescaped text keeps every line where it was
            raw = whole_text(doc, ctx)
            if raw is None:
                return
            doc = TextDocument(html.unescape(raw.decode("utf-8", errors="replace")).encode(), doc.path)
        yield from iter_event_xml(doc, ctx, cut_ok=True)
        yield from _salvage_last(doc, ctx)
        yield from _salvage_fragment(doc, ctx)


PARSER = WindowsEventXmlParser()
