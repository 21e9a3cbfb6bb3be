"""Binary Windows event logs (``.evtx``), read through the ``evtx`` package (Rust-backed).

``forensics.sources`` sees the ``ElfFile\\0`` magic and calls :func:`evtx_to_xml`, which turns
the records into one XML text that starts with :data:`MARKER`. This parser claims that text
(so the source kind reads ``windows-evtx``) and reads it with the XML parser. Origins point
at lines of the converted text; each event also keeps its ``record_id``.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

from forensics.lazy_re import lazy_compile
from forensics.parsers.base import ParseContext, Record
from forensics.parsers.windows_event_xml import iter_event_xml
from forensics.textdoc import TextDocument

__all__ = ["EVTX_MAGIC", "MARKER", "PARSER", "evtx_to_xml", "is_evtx"]

EVTX_MAGIC = b"ElfFile\x00"
MARKER = "<!-- gpu-forensics: records of a binary .evtx file, converted to XML -->"
_XML_DECL = lazy_compile(rb"^\s*<\?xml[^>]*\?>\s*")
_MAX_RECORD_ERRORS = 20


def is_evtx(raw: bytes) -> bool:
    return raw.startswith(EVTX_MAGIC)


def evtx_to_xml(raw: bytes) -> tuple[bytes, list[str]]:
    """The records of an ``.evtx`` file as XML text (``MARKER`` line, then ``<Events>``), and
    warnings for what could not be read. Never raises: a corrupt chunk costs its records."""
    warnings: list[str] = []
    out = [MARKER.encode(), b"<Events>"]
    try:
        import evtx
    except ImportError:
        return b"", ["the evtx package is not installed; cannot read .evtx files (pip install evtx)"]
    try:
        records = evtx.PyEvtxParser(io.BytesIO(raw)).records()
    except (OSError, RuntimeError, ValueError) as exc:
        return b"", [f"unreadable .evtx file ({exc})"]
    errors = 0
    count = 0
    while True:
        try:
            rec = next(records)
        except StopIteration:
            break
        except Exception as exc:  # the binding raises RuntimeError per bad chunk, then goes on
            errors += 1
            if errors <= 3:
                warnings.append(f"unreadable .evtx chunk skipped ({str(exc)[:200]})")
            if errors >= _MAX_RECORD_ERRORS:
                warnings.append("too many unreadable .evtx chunks; stopped reading")
                break
            continue
        xml = rec.get("data") if isinstance(rec, dict) else None
        if not isinstance(xml, str):
            continue
        out.append(_XML_DECL.sub(b"", xml.encode("utf-8", errors="replace")).rstrip())
        count += 1
    out.append(b"</Events>")
    if count == 0 and not warnings:
        warnings.append(".evtx file holds no readable records (empty or cut before its first chunk ended)")
    return b"\n".join(out) + b"\n", warnings


class WindowsEvtxParser:
    name = "windows-evtx"
    samples = (
        # Real: what evtx_to_xml makes of tests/data/windows/Application_no_crc32.evtx (a real Application
        # log from the omerbenamram/evtx samples, MIT/Apache-2.0), its second record.
        MARKER
        + """
<Events>
<Event xmlns="http://schemas.microsoft.com/win/2004/08/events/event">
  <System>
    <Provider Name="SecurityCenter">
    </Provider>
    <EventID Qualifiers="0">15</EventID>
    <Version>0</Version>
    <Level>4</Level>
    <Task>0</Task>
    <Opcode>0</Opcode>
    <Keywords>0x80000000000000</Keywords>
    <TimeCreated SystemTime="2021-03-31T23:51:47.112518Z">
    </TimeCreated>
    <EventRecordID>427</EventRecordID>
    <Correlation>
    </Correlation>
    <Execution ProcessID="0" ThreadID="0">
    </Execution>
    <Channel>Application</Channel>
    <Computer>DESKTOP-0HIJB49</Computer>
    <Security>
    </Security>
  </System>
  <EventData>
    <Data>Windows Defender</Data>
    <Data>SECURITY_PRODUCT_STATE_ON</Data>
    <Binary></Binary>
  </EventData>
</Event>
</Events>
""",
    )

    def detect(self, head: list[str]) -> float:
        return 1.0 if head and head[0].strip() == MARKER else 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        yield from iter_event_xml(doc, ctx, extra={"export": "evtx"})


PARSER = WindowsEvtxParser()
