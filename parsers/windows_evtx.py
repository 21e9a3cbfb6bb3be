"""Binary Windows event logs (``.evtx``), read through the ``evtx`` package (Rust-backed).

``forensics.ingest.sources`` sees the ``ElfFile\\0`` magic and calls
:func:`forensics.ingest.evtx.evtx_to_xml`, which turns the records into one XML text that starts with
:data:`~forensics.ingest.evtx.MARKER`. This parser claims that text
(so the source kind reads ``windows-evtx``) and reads it with the XML parser. Origins point
at lines of the converted text; each event also keeps its ``record_id``.
"""

from __future__ import annotations

from collections.abc import Iterator

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.windows_event_xml import iter_event_xml

from forensics.ingest.evtx import MARKER
from forensics.ingest.textdoc import TextDocument

__all__ = ["PARSER"]

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
