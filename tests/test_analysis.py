"""The façade: one input file through detection, parsing and time placement."""

from datetime import UTC, datetime

from forensics.analysis import Options, parse_input
from forensics.ingest.sources import InputFile

DEC_JOURNAL = (
    b"Dec 30 23:58:01 node4 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.\n"
    b"Dec 31 00:10:00 node4 kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n"
)


def test_yearless_stamps_never_lie_after_the_files_mtime() -> None:
    # Copied on 2 January 2025: December lines belong to 2024, not to December 2025.
    mtime = datetime(2025, 1, 2, 8, 0, tzinfo=UTC).timestamp()
    report, events, _ = parse_input(InputFile("journal.txt", DEC_JOURNAL, mtime), Options())
    assert report.kind == "journalctl"
    years = {datetime.fromtimestamp(e.ts / 1e9, UTC).year for e in events if e.ts is not None}
    assert years == {2024}


def test_yearless_stamps_take_the_mtime_year_when_consistent() -> None:
    mtime = datetime(2025, 12, 31, 12, 0, tzinfo=UTC).timestamp()
    _, events, _ = parse_input(InputFile("journal.txt", DEC_JOURNAL, mtime), Options())
    years = {datetime.fromtimestamp(e.ts / 1e9, UTC).year for e in events if e.ts is not None}
    assert years == {2025}
