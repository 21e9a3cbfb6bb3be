"""Windows event-log parsers: every export shape of the same events gives the same ``winevent``s,
corpus files are detected as the right kind, and the report-1 scenario reads in order with exact
UTC times."""

from __future__ import annotations

import codecs
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from forensics.parsers.common.base import ParseContext
from forensics.parsers.registry import detect, parser_by_name
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.analysis import Options, analyze, parse_input
from forensics.events import Event, Severity, TsSource
from forensics.ingest.evtx import MARKER, evtx_to_xml
from forensics.ingest.sources import InputFile, expand_inputs
from forensics.ingest.textdoc import TextDocument

ROOT = Path(__file__).parent
CASES = ROOT / "corpus" / "cases"
DATA = ROOT / "data" / "windows"

WINDOWS_PARSERS = ("windows-event-xml", "windows-evtx", "windows-event-text", "windows-event-powershell",
                   "windows-event-csv", "windbg")


def _ns(text: str) -> int:
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (dt - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000


def _parse_file(path: Path, options: Options | None = None) -> tuple[str, list[Event], list[str]]:
    (item,) = list(expand_inputs([str(path)]))
    report, events, _ = parse_input(item, options or Options())
    return report.kind, events, report.warnings


def _parse_bytes(raw: bytes, name: str = "pasted.txt", options: Options | None = None) -> tuple[str, list[Event],
                                                                                                 list[str]]:
    report, events, _ = parse_input(InputFile(name, raw), options or Options())
    return report.kind, events, report.warnings


# -- corpus files ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("case", "file", "kind"),
    [
        ("openshell2025-nvlddmkm-event153", "eventlog.txt", "windows-event-text"),
        ("runelite15496-bsod-0x133-nvlddmkm", "windbg.txt", "windbg"),
        ("wsl10558-hyperv-guest-panic-cuda-exit", "eventlog.txt", "windows-event-text"),
    ],
)
def test_corpus_file_is_detected_and_parses_cleanly(case: str, file: str, kind: str) -> None:
    got, events, warnings = _parse_file(CASES / case / file)
    assert got == kind
    assert not warnings
    assert events


def test_event_viewer_general_tab_keeps_provider_id_and_insertion_strings() -> None:
    _, events, _ = _parse_file(CASES / "openshell2025-nvlddmkm-event153" / "eventlog.txt")
    (ev,) = events
    assert ev.kind == "winevent" and ev.source.startswith("file:")
    assert ev.attrs["provider"] == "nvlddmkm" and ev.attrs["event_id"] == 153
    assert ev.attrs["data"] == ["\\Device\\Video3", "Error occurred on GPUID: 100"]
    assert ev.message == "nvlddmkm 153: \\Device\\Video3 | Error occurred on GPUID: 100"
    assert ev.ts is None and ev.ts_source is TsSource.NONE
    assert ev.origin.line == 1 and ev.origin.nlines == 10


def test_windbg_bugcheck_code_name_and_arguments() -> None:
    _, events, _ = _parse_file(CASES / "runelite15496-bsod-0x133-nvlddmkm" / "windbg.txt")
    (ev,) = events
    assert ev.kind == "bugcheck" and ev.severity is Severity.CRITICAL
    assert ev.attrs["code"] == 0x133 and ev.attrs["name"] == "DPC_WATCHDOG_VIOLATION"
    assert ev.attrs["args"] == ["0000000000000001", "0000000000001e00", "fffff80518afb320", "0000000000000000"]
    assert "0x133" in ev.message and "DPC_WATCHDOG_VIOLATION" in ev.message


def test_windbg_fields_and_session_time_give_image_and_exact_utc() -> None:
    sample = parser_by_name("windbg").samples[1]
    _, events, warnings = _parse_bytes(sample.encode())
    (ev,) = events
    assert not warnings
    assert ev.attrs["code"] == 0x116 and ev.attrs["image"] == "nvlddmkm.sys" and ev.attrs["module"] == "nvlddmkm"
    assert ev.attrs["bucket"] == "0x116_IMAGE_nvlddmkm.sys"
    assert ev.ts == _ns("2024-11-14T10:11:40.123Z") and ev.ts_source is TsSource.EXACT  # 11:11:40 at UTC+1
    assert "nvlddmkm.sys" in ev.message


def test_windbg_loader_line_and_banner_of_one_dump_make_one_event() -> None:
    text = (
        "BugCheck 116, {ffffc60d4a3e2010, fffff8067c3a1e40, ffffffffc000009a, 4}\n"
        "Probably caused by : nvlddmkm.sys ( nvlddmkm+1a1e40 )\n"
        "*******************************************************************************\n"
        "*                        Bugcheck Analysis                                    *\n"
        "*******************************************************************************\n\n"
        "VIDEO_TDR_FAILURE (116)\n"
    )
    _, events, _ = _parse_bytes(text.encode())
    (ev,) = events
    assert ev.attrs["code"] == 0x116 and ev.attrs["name"] == "VIDEO_TDR_FAILURE"
    assert ev.attrs["image"] == "nvlddmkm.sys"


def test_hyperv_guest_crash_is_a_winevent_and_its_oops_lines_stay_reachable() -> None:
    path = CASES / "wsl10558-hyperv-guest-panic-cuda-exit" / "eventlog.txt"
    _, events, _ = _parse_file(path)
    host = events[0]
    assert host.kind == "winevent" and host.attrs["provider"] == "Microsoft-Windows-Hyper-V-Worker"
    assert host.severity is Severity.CRITICAL
    assert "has encountered a fatal error" in host.message and "Guest message: " in host.message
    assert "hmgrtable_free_handle" in host.text and "cuda-EvtHandlr" in host.text
    lines = path.read_text().splitlines()
    for ev in events[1:]:  # the guest oops, parsed by the kernel-log parser, points at the real lines
        assert ev.message.split()[0] in lines[ev.origin.line - 1]
        assert ev.origin.line >= 4


# -- the report-1 scenario ---------------------------------------------------------------------------

def test_report1_xml_reads_in_order_with_exact_utc_times() -> None:
    kind, events, warnings = _parse_file(DATA / "report1-p2p-sram.xml")
    assert kind == "windows-event-xml" and not warnings
    assert [(e.attrs["provider"], e.attrs["event_id"]) for e in events] == [
        ("nvlddmkm", 14), ("nvlddmkm", 14), ("nvlddmkm", 153), ("Display", 4101)]
    assert [e.ts for e in events] == [  # 7 fractional digits: 100 ns resolution kept
        _ns("2026-03-14T21:07:31.412187Z") + 600, _ns("2026-03-14T21:07:31.412900Z") + 300,
        _ns("2026-03-14T21:07:31.587041Z") + 200, _ns("2026-03-14T21:07:33.001445Z") + 500]
    assert all(e.ts_source is TsSource.EXACT for e in events)
    p2p, reorder, tdr, display = events
    assert p2p.message == "nvlddmkm 14: \\Device\\Video3 | PCIE P2PREQ, Uncorrectable SRAM Error"
    assert "PCIE REORDER, Uncorrectable SRAM Error" in reorder.message
    assert p2p.attrs["qualifiers"] == 49322 and p2p.attrs["level"] == 2 and p2p.severity is Severity.ERROR
    assert p2p.host == "AI-RIG" and p2p.attrs["channel"] == "System" and p2p.attrs["record_id"] == 48211
    assert p2p.attrs["binary"].startswith("0000000002003000")
    assert tdr.message.startswith("nvlddmkm 153:")
    assert display.severity is Severity.WARNING
    assert display.message == "Display 4101: Display driver nvlddmkm stopped responding and has successfully recovered."
    assert [e.origin.line for e in events] == [10, 11, 12, 13]


def test_event_viewer_xml_view_with_collapse_markers_and_one_line_wevtutil_output() -> None:
    parser = parser_by_name("windows-event-xml")
    ev_view, wevtutil = parser.samples
    _, events, _ = _parse_bytes(ev_view.encode())
    (ev,) = events
    assert ev.attrs["event_id"] == 14 and ev.attrs["data"] == ["\\Device\\Video4"]
    assert ev.ts == _ns("2009-05-05T11:26:24.899Z")
    _, events, _ = _parse_bytes(wevtutil.encode())
    assert [e.attrs["event_id"] for e in events] == [153, 4101]
    assert events[0].ts == _ns("2024-11-14T09:11:12.345678Z") + 900  # 7 fractional digits kept
    assert events[1].attrs["data"] == ["nvlddmkm"] and "stopped responding" in events[1].message
    assert all(e.origin.line == 1 for e in events)


def test_xml_with_a_dtd_or_a_broken_event_costs_that_event_only() -> None:
    text = ('<!DOCTYPE x [<!ENTITY a "aaaa">]>\n<Event xmlns="http://schemas.microsoft.com/win/2004/08/events/'
            'event"><System><Provider Name="x"/><EventID>1</EventID>&a;</System></Event>\n'
            '<Event xmlns="http://schemas.microsoft.com/win/2004/08/events/event"><System><Provider Name="y"/>'
            '<EventID>2</EventID><Level>2</Level></Sys></Event>\n'
            '<Event xmlns="http://schemas.microsoft.com/win/2004/08/events/event"><System><Provider Name="z"/>'
            '<EventID>3</EventID></System></Event>\n')
    doc = TextDocument(text.encode(), "x.xml")
    ctx = ParseContext(path="x.xml", source="file:x.xml")
    events = list(parser_by_name("windows-event-xml").parse(doc, ctx))
    assert [e.attrs["provider"] for e in events if isinstance(e, Event)] == ["z"]
    assert len(ctx.warnings) == 2


# -- evtx ---------------------------------------------------------------------------------------------

def test_real_evtx_file_becomes_windows_evtx_events() -> None:
    # A real 17-record Application log (omerbenamram/evtx samples, MIT/Apache-2.0; README.md here).
    kind, events, warnings = _parse_file(DATA / "Application_no_crc32.evtx")
    assert kind == "windows-evtx" and not warnings
    assert [e.attrs["record_id"] for e in events] == list(range(426, 443))
    assert all(e.host == "DESKTOP-0HIJB49" and e.attrs["export"] == "evtx" for e in events)
    assert events[0].attrs["provider"] == "SecurityCenter" and events[0].attrs["event_id"] == 1
    assert events[0].ts == 1617234705018767000 and events[0].ts_source is TsSource.EXACT
    assert events[1].message == "SecurityCenter 15: Windows Defender | SECURITY_PRODUCT_STATE_ON"
    assert events[2].attrs["provider"] == "Microsoft-Windows-Winlogon" and events[2].attrs["event_id"] == 6000
    assert [e.ts for e in events] == sorted(e.ts for e in events)


@pytest.mark.slow
def test_real_system_evtx_reads_whole_and_holds_no_failure() -> None:
    """A real System log of 1881 records (omerbenamram/evtx samples): every record read, errors kept as
    errors, and a healthy log: Kernel-Boot 153 and Kernel-Power 42/107/172 are not nvlddmkm 153 or
    Kernel-Power 41."""
    kind, events, warnings = _parse_file(DATA / "system.evtx")
    assert kind == "windows-evtx" and not warnings and len(events) == 1881
    assert {e.host for e in events} == {"WIN-P4SIAA0SQCO", "DESKTOP-2KGM189"}  # renamed during its life
    assert sum(e.severity is Severity.ERROR for e in events) == 41
    boot153 = [e for e in events if e.attrs["event_id"] == 153]
    assert boot153 and {e.attrs["provider"] for e in boot153} == {"Microsoft-Windows-Kernel-Boot"}
    power = {e.attrs["event_id"] for e in events if e.attrs["provider"] == "Microsoft-Windows-Kernel-Power"}
    assert 41 not in power and {42, 107, 172} <= power
    analysis = analyze([str(DATA / "system.evtx")])
    assert analysis.verdict.root_cause is None


def test_evtx_converter_survives_cut_and_damaged_files() -> None:
    raw = (DATA / "Application_no_crc32.evtx").read_bytes()
    xml, warnings = evtx_to_xml(raw)
    assert xml.startswith(MARKER.encode()) and xml.count(b"<Event ") == 17 and not warnings
    xml, warnings = evtx_to_xml(raw[:100])
    assert xml == b"" and warnings and "unreadable" in warnings[0]
    xml, warnings = evtx_to_xml(raw[:6000])
    assert xml.count(b"<Event ") == 0 and warnings
    damaged = bytearray(raw)
    damaged[4096 + 600: 4096 + 900] = b"\xff" * 300
    xml, warnings = evtx_to_xml(bytes(damaged))
    assert xml.count(b"<Event ") == 0 and any("chunk" in w for w in warnings)
    # A damaged first chunk of a many-chunk log costs that chunk only.
    big = bytearray((DATA / "system.evtx").read_bytes())
    big[4096 + 600: 4096 + 900] = b"\xff" * 300
    xml, warnings = evtx_to_xml(bytes(big))
    assert 0 < xml.count(b"<Event ") < 1881 and any("chunk" in w for w in warnings)
    items = list(expand_inputs([str(DATA / "Application_no_crc32.evtx")]))
    assert len(items) == 1 and items[0].raw.startswith(MARKER.encode())


# -- text exports -------------------------------------------------------------------------------------

def test_wevtutil_text_block_with_zulu_date_is_exact() -> None:
    _, events, warnings = _parse_bytes(parser_by_name("windows-event-text").samples[1].encode())
    (ev,) = events
    assert not warnings
    assert ev.attrs["provider"] == "Display" and ev.attrs["event_id"] == 4101 and ev.attrs["level"] == 3
    assert ev.host == "WS01" and ev.attrs["channel"] == "System"
    assert ev.ts == _ns("2024-11-14T10:11:13.123Z") and ev.ts_source is TsSource.EXACT
    assert "stopped responding" in ev.message


COPY_DETAILS = """Log Name:      System
Source:        nvlddmkm
Date:          11/14/2024 10:11:12 AM
Event ID:      153
Task Category: None
Level:         Error
Keywords:      Classic
User:          N/A
Computer:      AI-RIG
Description:
The description for Event ID 153 from source nvlddmkm cannot be found. Either the component that raises \
this event is not installed on your local computer or the installation is corrupted. You can install or \
repair the component on the local computer.

The following information was included with the event:

\\Device\\Video3
Error occurred on GPUID: 100

The message resource is present but the message was not found in the message table

Event Xml:
<Event xmlns="http://schemas.microsoft.com/win/2004/08/events/event">
  <System>
    <Provider Name="nvlddmkm" />
    <EventID Qualifiers="49322">153</EventID>
    <Level>2</Level>
    <TimeCreated SystemTime="2024-11-14T09:11:12.3456789Z" />
    <EventRecordID>9001</EventRecordID>
    <Channel>System</Channel>
    <Computer>AI-RIG</Computer>
  </System>
  <EventData>
    <Data>\\Device\\Video3</Data>
    <Data>Error occurred on GPUID: 100</Data>
  </EventData>
</Event>
Log Name:      System
Source:        Display
Date:          11/14/2024 10:11:13 AM
Event ID:      4101
Task Category: None
Level:         Warning
Computer:      AI-RIG
Description:
Display driver nvlddmkm stopped responding and has successfully recovered.
"""


def test_copy_details_as_text_prefers_the_embedded_xml_time() -> None:
    kind, events, warnings = _parse_bytes(COPY_DETAILS.encode())
    assert kind == "windows-event-text" and not warnings
    tdr, display = events
    assert tdr.attrs["event_id"] == 153 and tdr.ts == _ns("2024-11-14T09:11:12.345678Z") + 900
    assert tdr.ts_source is TsSource.EXACT and tdr.origin.line == 21  # the <Event> line of the XML part
    assert display.attrs["event_id"] == 4101 and display.ts_source is TsSource.LOCAL
    assert display.ts == _ns("2024-11-14T10:11:13Z")  # local wall clock, zone unknown
    tz = timezone(timedelta(hours=1))
    _, events, _ = _parse_bytes(COPY_DETAILS.encode(), options=Options(tz=tz))
    assert events[1].ts == _ns("2024-11-14T09:11:13Z") and events[1].ts_source is TsSource.EXACT


FORMAT_LIST = parser_by_name("windows-event-powershell").samples[0]


def test_powershell_format_list_in_utf16_with_bom() -> None:
    raw = codecs.BOM_UTF16_LE + FORMAT_LIST.replace("\n", "\r\n").encode("utf-16-le")
    kind, events, warnings = _parse_bytes(raw, "events.txt")
    assert kind == "windows-event-powershell" and not warnings
    tdr, display = events
    assert tdr.attrs["provider"] == "nvlddmkm" and tdr.attrs["event_id"] == 153
    assert tdr.attrs["data"] == ["\\Device\\Video3", "Error occurred on GPUID: 100"]
    assert tdr.message == "nvlddmkm 153: \\Device\\Video3 | Error occurred on GPUID: 100"
    assert tdr.ts == _ns("2024-11-14T10:11:12Z") and tdr.ts_source is TsSource.LOCAL
    assert display.message.startswith("Display 4101: Display driver nvlddmkm stopped responding")
    assert tdr.origin.line == 3 and tdr.origin.nlines == 7


def test_powershell_table_with_provider_group_and_day_first_dates() -> None:
    kind, events, warnings = _parse_bytes(parser_by_name("windows-event-powershell").samples[1].encode())
    assert kind == "windows-event-powershell" and not warnings
    assert [(e.attrs["provider"], e.attrs["event_id"], e.attrs["level"]) for e in events] == [
        ("nvlddmkm", 153, 2), ("nvlddmkm", 14, 2)]
    assert events[0].ts == _ns("2024-11-14T10:11:12Z")  # 14.11.2024: dotted dates are day-first


def test_get_eventlog_instance_id_splits_into_qualifiers_and_id() -> None:
    text = ("\nIndex              : 48213\nEntryType          : Error\nInstanceId         : 3221880985\n"
            "Message            : The description for Event ID '153' in Source 'nvlddmkm' cannot be found.  The "
            "following information is part of the event:'\\Device\\Video3', 'Error occurred on GPUID: 100'\n"
            "Source             : nvlddmkm\nTimeGenerated      : 3/14/2026 10:07:31 PM\n")
    kind, events, _ = _parse_bytes(text.encode())
    (ev,) = events
    assert kind == "windows-event-powershell"
    assert ev.attrs["event_id"] == 153 and ev.attrs["qualifiers"] == 49162 and ev.attrs["record_id"] == 48213
    assert ev.ts == _ns("2026-03-14T22:07:31Z")


CSV_SAMPLE = parser_by_name("windows-event-csv").samples[0]


def test_event_viewer_csv_with_quoted_multiline_description() -> None:
    kind, events, warnings = _parse_bytes(CSV_SAMPLE.encode())
    assert kind == "windows-event-csv" and not warnings
    display, tdr = events
    assert display.attrs["event_id"] == 4101 and display.severity is Severity.WARNING
    assert tdr.attrs["data"] == ["\\Device\\Video3", "Error occurred on GPUID: 100"]
    assert tdr.origin.line == 3 and tdr.origin.nlines == 11
    assert tdr.ts == _ns("2024-11-14T10:11:12Z") and tdr.ts_source is TsSource.LOCAL


def test_csv_day_month_order_is_decided_per_file_and_warned_only_when_it_matters() -> None:
    header = "Level,Date and Time,Source,Event ID,Task Category\n"
    dmy = header + "Error,13/03/2026 10:00:00,nvlddmkm,153,None,x\nError,03/04/2026 10:00:00,nvlddmkm,153,None,y\n"
    _, events, warnings = _parse_bytes(dmy.encode())
    assert [e.ts for e in events] == [_ns("2026-03-13T10:00:00Z"), _ns("2026-04-03T10:00:00Z")] and not warnings
    ambiguous = header + "Error,03/04/2026 10:00:00 PM,nvlddmkm,153,None,x\n"
    _, events, warnings = _parse_bytes(ambiguous.encode())
    assert events[0].ts == _ns("2026-03-04T22:00:00Z") and any("ambiguous" in w for w in warnings)
    same = header + "Error,04/04/2026 10:00:00,nvlddmkm,153,None,x\n"
    _, _, warnings = _parse_bytes(same.encode())
    assert not warnings


def test_german_tab_separated_export() -> None:
    kind, events, warnings = _parse_bytes(parser_by_name("windows-event-csv").samples[1].encode())
    (ev,) = events
    assert kind == "windows-event-csv" and not warnings
    assert ev.attrs["level"] == 3 and ev.ts == _ns("2024-11-14T10:11:13Z") and ev.attrs["export"] == "eventviewer-txt"


def test_same_event_reads_alike_from_every_export() -> None:
    """The nvlddmkm 153 record: general tab, details copy, PowerShell list and CSV agree."""
    texts = [
        (CASES / "openshell2025-nvlddmkm-event153" / "eventlog.txt").read_bytes(),
        COPY_DETAILS.encode(),
        FORMAT_LIST.encode(),
        CSV_SAMPLE.encode(),
    ]
    seen = []
    for raw in texts:
        _, events, _ = _parse_bytes(raw)
        ev = next(e for e in events if e.attrs.get("event_id") == 153)
        seen.append((ev.kind, ev.attrs["provider"], ev.message))
    assert len(set(seen)) == 1, seen


# -- robustness ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", WINDOWS_PARSERS)
@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=600))
def test_parsers_never_raise_on_arbitrary_text(name: str, text: str) -> None:
    parser = parser_by_name(name)
    prefix = {"windows-evtx": MARKER + "\n", "windows-event-csv": "Level,Date and Time,Source,Event ID,Task Category\n",
              "windows-event-xml": "<Event xmlns='http://schemas.microsoft.com/win/2004/08/events/event'>",
              "windows-event-text": "Event[0]:\n  Log Name: System\n", "windbg": "Bugcheck Analysis\n",
              "windows-event-powershell": "TimeCreated  : "}[name]
    for body in (text, prefix + text):
        doc = TextDocument.from_bytes(body.encode(), "fuzz")
        ctx = ParseContext(path="fuzz", source="file:fuzz", year=2025)
        list(parser.parse(doc, ctx))
        parser.detect(doc.head())


@settings(max_examples=60, deadline=None)
@given(raw=st.binary(max_size=2048))
def test_evtx_converter_never_raises_on_arbitrary_bytes(raw: bytes) -> None:
    xml, warnings = evtx_to_xml(b"ElfFile\x00" + raw)
    assert xml or warnings


def test_detection_of_windows_samples_is_not_claimed_by_another_parser() -> None:
    for name in WINDOWS_PARSERS:
        for sample in parser_by_name(name).samples:
            assert detect(TextDocument.from_bytes(sample.encode(), "s").head())[0].name == name
