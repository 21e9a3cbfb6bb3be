"""Hostile input measured in issue 14, each reproduced as it was found: no traceback, no hang,
no memory blow-up, and a bad record costs one record (with a warning), never the file."""

from __future__ import annotations

import io
import resource
import time
from pathlib import Path

import pytest
from matchkit import ev

from forensics.analysis import analyze
from forensics.match.detectors.ranks import cross_rank


def _c10d(rank: int, seq: int, **extra: object) -> object:
    return ev(f"[Rank {rank}] Watchdog caught collective operation timeout", kind="c10d", rank=rank, seq=seq,
              op_type="ALLREDUCE", numel_in=1, numel_out=1, timeout_ms=600000, **extra)


@pytest.mark.parametrize("extra", [{}, {"nranks": 4294967296}, {"world_size": 10**30}])
def test_a_huge_rank_or_world_size_costs_no_memory(extra: dict[str, object]) -> None:
    """``[Rank 4294967296]`` once built ``set(range(4294967297))`` (23.6 GB before the OOM killer)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, hard))
    try:
        found = cross_rank([_c10d(0, 5, **extra), _c10d(4294967296, 5, **extra)])
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert all(e.attrs.get("behind") != list(range(1, 4294967296)) for e in found)


def test_a_missing_rank_of_a_known_world_is_still_found() -> None:
    found = cross_rank([_c10d(r, 5, nranks=8) for r in range(8) if r != 3])
    assert [e.attrs["behind"] for e in found] == [[3]]


def _analyze_text(tmp_path: Path, name: str, text: str | bytes) -> object:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return analyze([str(path)])


def _cli(tmp_path: Path, name: str, data: bytes, *extra: str) -> tuple[int, str]:
    """``forensics analyze`` on one file, in text and in JSON: the exit status and the JSON."""
    from contextlib import redirect_stdout

    from forensics.cli import main

    path = tmp_path / name
    path.write_bytes(data)
    out = io.StringIO()
    with redirect_stdout(out):
        code_text = main(["analyze", str(path), *extra])
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["analyze", "--format", "json", str(path), *extra])
    assert code == code_text
    return code, out.getvalue()


XID79 = ("[Mon Mar  3 04:27:08 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, "
         "GPU has fallen off the bus.\n")

NVML_HEADER = ('{"format":"gpu-forensics-nvml","version":1,"time":"unix-ms","columns":{"mu":"mem_used_mib"},'
               '"interval_s":0.1,"host":"n1","gpus":[{"i":0,"pci":"0000:3b:00.0","name":"H200","uuid":"GPU-1"}],'
               '"segment":1}\n')


@pytest.mark.parametrize(("name", "data"), [
    ("iso9999.log", b"9999-12-31T23:59:59-14:00 host kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off\n"
                    b"9999-12-31T23:59:59.999999 host python: RuntimeError: CUDA error: unspecified launch failure\n"),
    ("year0.log", b"0000-01-01T00:00:00Z host kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off\n"),
    ("dmesg.log", b"[99999999999999999999.123456] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
                  b"[    5.000000] NVRM: Xid (PCI:0000:3b:00): 48, DBE\n"),
    ("nvml.jsonl", NVML_HEADER.encode() + b'{"t":99999999999999999999999,"k":1,"g":{"0":{"mu":1}}}\n'
                   b'{"t":-99999999999999999999999,"k":1,"g":{"0":{"mu":2}}}\n'),
    ("events.jsonl", b'{"type":"xid","gpu":0,"pci":"0000:3b:00.0","xid":79,"t":1' + b"0" * 40 + b"}\n"),
])
def test_out_of_range_stamps_never_reach_the_renderer(tmp_path: Path, name: str, data: bytes) -> None:
    code, out = _cli(tmp_path, name, data)
    assert code in (0, 1)
    assert '"version": 1' in out


def test_a_huge_boot_offset_is_refused_not_rendered() -> None:
    from forensics.clock import MAX_TS_NS, plausible_ns, uptime_ns
    from forensics.timeline.merge import place_boot_relative

    assert uptime_ns("9" * 5000) is None  # int() of > 4300 digits raises in Python 3.11
    assert plausible_ns(MAX_TS_NS) is None and plausible_ns(float("nan")) is None
    e = ev("x", uptime_ns=10**18)
    assert place_boot_relative([e], 10**30)[0].ts is None


def test_a_300_character_zone_name_is_no_zone(tmp_path: Path) -> None:
    from forensics.analysis import _zone

    assert _zone("A" * 300) is None
    assert _zone("../../etc/passwd") is None
    assert _zone("Europe/Berlin") is not None


def test_a_timeout_too_large_for_a_float_is_no_crash(tmp_path: Path) -> None:
    """``verdict._node`` multiplied a 400-digit ``Timeout(ms)`` by a float (OverflowError)."""
    line = ("[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=" + "9" * 400 +
            ") ran for 600010 milliseconds before timing out.\n")
    code, out = _cli(tmp_path, "train.log", line.encode())
    assert code == 1 and '"root_cause": "nccl-watchdog-timeout"' in out


def test_a_5000_digit_number_costs_its_line_not_the_xid_beside_it(tmp_path: Path) -> None:
    data = (b"[  100.000000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n"
            b"[  101.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=" + b"9" * 5000 + b", Graphics Exception\n"
            b"[  102.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n")
    a = analyze([str(_write(tmp_path, "dmesg.txt", data))])
    assert a.verdict.root_cause_id == "xid-79-fallen-off-bus"
    # digit runs are cut to 1,000 digits on decoding, so even the Xid 13 line is read
    assert sorted(e.attrs.get("xid") for e in a.timeline.events if e.kind == "xid") == [13, 79]
    assert not any("failed" in w for w in a.warnings), a.warnings


class _Fragile:
    """A parser that raises on a line holding BAD — on reading it, or (``ahead``) one line later,
    as parsers that glue continuation lines do."""

    name = "fragile"
    samples = ()

    def __init__(self, ahead: bool) -> None:
        self.ahead = ahead

    def detect(self, head: list[str]) -> float:
        return 1.0

    def parse(self, doc: object, ctx: object) -> object:
        from forensics.events import Event, TsSource

        prev = ""
        for line in doc.lines():  # type: ignore[attr-defined]
            if "BAD" in (prev if self.ahead else line.text):
                raise ValueError("cannot read this")
            prev = line.text
            yield Event(None, TsSource.NONE, "file:x", "log", line.text, ctx.origin(line))  # type: ignore[attr-defined]


@pytest.mark.parametrize("ahead", [False, True], ids=["on-the-line", "one-line-later"])
def test_a_parser_that_raises_costs_the_bad_line_only(ahead: bool) -> None:
    from forensics.parsers.common.base import ParseContext
    from forensics.parsers.common.guard import parse_guarded

    from forensics.ingest.textdoc import TextDocument

    doc = TextDocument(b"one\ntwo BAD\nthree\nfour BAD\nfive\n", "x.log")
    ctx = ParseContext(path="x.log", source="file:x")
    parsed = parse_guarded(_Fragile(ahead), doc, ctx)  # type: ignore[arg-type]
    assert [e.message for e in parsed.events if e.message.strip()] == ["one", "three", "five"]
    assert [w.split(": parser")[0] for w in ctx.warnings] == ["x.log: line 2", "x.log: line 4"]
    assert all("could not read this record (ValueError: cannot read this); skipped it" in w for w in ctx.warnings)
    assert doc.data.count(b"BAD") == 2  # the document shown as evidence context is the original


EVENTS_HEADER = b'{"format": "gpu-forensics-nvml-events", "version": 1, "host": "n1"}\n'
XID_EVENT = b'{"type":"xid","gpu":0,"pci":"0000:3b:00.0","xid":79,"t":1740910%d0000000000}\n'
DEEP = 100_000


@pytest.mark.parametrize(("name", "data", "xids"), [
    ("events.jsonl", EVENTS_HEADER + XID_EVENT % 21 + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"\n" + XID_EVENT % 22,
     2),
    # the 5,000-digit stamp, cut to 1,000 digits on decoding, is no time: that Xid stays, untimed
    ("events.jsonl", EVENTS_HEADER + XID_EVENT % 21 + b'{"type":"xid","xid":79,"t":' + b"9" * 5000 + b"}\n"
                     + b'{"type":"unresponsive","since":' + b"9" * 30 + b',"t":1}\n' + XID_EVENT % 22, 3),
    ("events.xml", b'<?xml version="1.0"?><Events>' + b"<a>" * DEEP + b"</a>" * DEEP + b"</Events>", 0),
], ids=["deep-json", "huge-ints-json", "deep-xml"])
def test_deep_nesting_costs_one_record(tmp_path: Path, name: str, data: bytes, xids: int) -> None:
    a = analyze([str(_write(tmp_path, name, data))])
    assert not any("failed" in w and "rest of the file" in w for w in a.warnings), a.warnings[:3]
    found = [e for e in a.timeline.events if e.kind == "xid"]
    assert len(found) == xids  # an untimed one is placed between its neighbours by the timeline
    assert all(e.ts is None or e.ts < 1 << 62 for e in found)


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("line", ["1" * 100_000, "1/" * 50_000, "1:" * 50_000, "[1" * 50_000],
                         ids=["digits", "slashes", "colons", "brackets"])
@pytest.mark.slow
def test_a_long_first_line_is_detected_in_linear_time(line: str) -> None:
    """The process-output detector's ``\\d+/\\d+ \\[`` was quadratic in a run of digits: a first line of
    100,000 digits took 60 s (a 1 MB line, hours); detection lines are also cut to 64 KiB. The bound
    is generous (about 1.5 s here): it fails only on a quadratic pattern, not on a slow machine."""
    from forensics.parsers.registry import detect

    start = time.perf_counter()
    detect([line] * 40)
    assert time.perf_counter() - start < 20


def test_the_progress_bar_shape_still_makes_process_output() -> None:
    from forensics.parsers.process_output import detect_process_output

    assert detect_process_output([" 45%|████▌     | 450/1000 [01:02<01:16,  7.21it/s]"]) > 0


def test_a_csv_header_cell_of_brackets_is_read_in_linear_time() -> None:
    """``\\s*\\[[^\\]]*\\]\\s*$`` rescanned to the end from every '[': 100,000 of them took 7 s."""
    from forensics.parsers.common.base import ParseContext
    from forensics.parsers.registry import parser_by_name

    from forensics.ingest.textdoc import TextDocument

    parser = parser_by_name("nvidia-smi-csv")
    doc = TextDocument.from_bytes(b"[" * 100_000 + b"\n" + parser.samples[0].encode(), "x.csv")
    start = time.perf_counter()
    list(parser.parse(doc, ParseContext(path="x.csv", source="file:x.csv")))
    assert time.perf_counter() - start < 5  # about 0.01 s now
