"""Progress of ``forensics analyze``: the byte meter, its throttling, the stderr line, and the hooks
that report from inside one file (``TextDocument.progress``) and from reading (``sources``)."""

from __future__ import annotations

import gzip
import io
import re
import tarfile
from pathlib import Path

import pytest

from forensics.analysis import analyze, parse_input
from forensics.cli import main
from forensics.ingest import meter as progress_mod
from forensics.ingest import textdoc
from forensics.ingest.meter import Meter, Progress, ProgressLine, describe, human_bytes
from forensics.ingest.sources import InputFile, input_size
from forensics.ingest.textdoc import TextDocument


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _meter(total: int = 1000, interval: float = 0.2) -> tuple[Meter, list[Progress], FakeClock]:
    seen: list[Progress] = []
    clock = FakeClock()
    return Meter(total, seen.append, interval=interval, clock=clock), seen, clock


# -- the meter ------------------------------------------------------------------------------------

def test_meter_throttles_to_the_interval() -> None:
    meter, seen, clock = _meter()
    meter.step("a.log", 1000)
    assert [p.done for p in seen] == [0]  # the first step shows at once
    for i in range(1, 101):
        meter.advance(i / 100)  # a hundred calls inside one interval
    assert len(seen) == 1
    clock.now += 0.25
    meter.advance(1.0)  # no news: no redraw either
    assert len(seen) == 1
    meter.step("b.log", 0)
    assert len(seen) == 2 and seen[-1].done == 1000 and seen[-1].name == "b.log"


def test_meter_counts_steps_and_never_goes_back() -> None:
    meter, seen, clock = _meter(total=1000, interval=0)
    meter.step("a.log", 200)
    meter.advance(0.5)
    meter.advance(0.25)  # a second pass over the file starts again at its top
    assert meter.done == 100
    meter.step("b.log", 800)
    meter.advance(0.5)
    assert meter.done == 600
    clock.now += 2.0
    meter.finish()
    last = seen[-1]
    assert (last.done, last.total, last.name, last.fraction) == (1000, 1000, "", 1.0)
    assert last.rate == pytest.approx(500.0)
    assert [p.done for p in seen] == sorted(p.done for p in seen)


def test_finish_always_draws_even_inside_the_interval() -> None:
    meter, seen, _ = _meter()
    meter.step("a.log", 10)
    meter.finish()
    assert len(seen) == 2 and seen[-1].done == 1000


# -- the line on stderr ---------------------------------------------------------------------------

def test_line_fits_the_terminal_and_keeps_the_end_of_the_name() -> None:
    line = ProgressLine(io.StringIO(), width=lambda: 80)
    p = Progress(done=480_000_000, total=1_000_000_000, name="/data/run-17/logs/rank07/train.log" * 3, elapsed=2.0)
    text = line.render(p)
    assert len(text) <= 79
    bar = text[:ProgressLine.BAR]
    assert set(bar) <= set("━╸╺") and text[ProgressLine.BAR:].lstrip().startswith("48%")
    assert "480 MB / 1.0 GB" in text and "240 MB/s" in text
    assert text.endswith("rank07/train.log") and "…" in text


def test_line_on_a_narrow_terminal_drops_the_name_not_the_bar() -> None:
    line = ProgressLine(io.StringIO(), width=lambda: 30)
    text = line.render(Progress(5, 10, "x.log", 1.0))
    assert len(text) <= 29 and set(text[:ProgressLine.BAR]) <= set("━╸╺") and "50%" in text


def test_line_falls_back_to_ascii_where_the_stream_cannot_encode_blocks() -> None:
    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    line = ProgressLine(stream, width=lambda: 100)
    text = line.render(Progress(1, 4, "a/b.log", 1.0))
    assert text.isascii() and "25%" in text and text.endswith("a/b.log")
    line(Progress(1, 4, "a/b.log", 1.0))  # writing it must not raise either
    line.clear()


def test_line_redraws_in_place_and_clears() -> None:
    out = io.StringIO()
    line = ProgressLine(out, width=lambda: 80)
    line.clear()
    assert out.getvalue() == ""  # nothing drawn: nothing to clear
    line(Progress(1, 2, "a.log", 1.0))
    line(Progress(2, 2, "a.log", 1.0))
    drawn = out.getvalue()
    assert drawn.count("a.log") == 2 and "\n" not in drawn  # redrawn on its own line, no scrolling
    assert drawn.startswith("\x1b[?25l") and "\r\x1b[2K" in drawn  # cursor hidden, line erased before a redraw
    line.clear()
    end = out.getvalue()[len(drawn):]
    assert end.endswith("\x1b[2K") and "\x1b[?25h" in end  # erased at the end, the cursor back


def test_describe_for_a_loading_screen() -> None:
    assert describe(Progress(340_000_000, 1_000_000_000, "big.log", 1.0)) == \
        "reading big.log: 340 MB of 1.0 GB (34%), 340 MB/s"
    assert describe(Progress(10, 10, "", 1.0)).startswith("read 10 B at 10 B/s; matching")
    assert human_bytes(12_345) == "12 kB" and human_bytes(1_500_000) == "1.5 MB" and human_bytes(999) == "999 B"


# -- the hooks ------------------------------------------------------------------------------------

def _dmesg(n: int) -> bytes:
    return b"".join(b"[%8d.%06d] eth0: link up, 100Gbps, full duplex\n" % (i, i) for i in range(n))


def test_lines_report_in_batches_not_per_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textdoc, "PROGRESS_STEP", 4096)
    data = _dmesg(5000)
    doc = TextDocument(data, "x")
    seen: list[float] = []
    doc.progress = seen.append
    n = sum(1 for _ in doc.lines())
    assert n == 5000
    assert len(data) // 4096 - 1 <= len(seen) <= len(data) // 4096 + 1
    assert seen == sorted(seen) and 0 < seen[0] < 0.01 and seen[-1] > 0.98
    doc.progress = None
    seen.clear()
    list(doc.lines())
    assert seen == []


@pytest.mark.parametrize("hyperscan", [False, True])
def test_scan_reports_its_half_then_the_candidate_lines_the_rest(monkeypatch: pytest.MonkeyPatch,
                                                                 hyperscan: bool) -> None:
    if hyperscan:
        pytest.importorskip("hyperscan")
        monkeypatch.setattr(textdoc, "HS_MIN_BYTES", 0)
        monkeypatch.setattr(textdoc, "_HS_CHUNK", 64 << 10)
    else:
        monkeypatch.setattr(textdoc, "USE_HYPERSCAN", False)
    monkeypatch.setattr(textdoc, "PROGRESS_STEP", 16 << 10)
    data = b"".join(b"step %d ok\n" % i if i % 50 else b"step %d NaN loss\n" % i for i in range(40_000))
    doc = TextDocument(data, "x")
    seen: list[float] = []
    doc.progress = seen.append
    starts = doc.candidate_starts([b"NaN", b"Traceback"], limited=[b"ok"], limit=10)
    scan = list(seen)
    assert len(starts) == 800 + 10
    assert len(scan) >= 2 and scan[-1] == pytest.approx(textdoc.SCAN_SHARE)
    assert all(0 <= f <= textdoc.SCAN_SHARE for f in scan)
    number = doc.line_numberer()
    for s in starts:
        doc.lines_at(s, number(s))
    rest = seen[len(scan):]
    assert rest and all(textdoc.SCAN_SHARE <= f <= 1.0 for f in rest) and rest == sorted(rest)
    assert rest[-1] > 0.95


def test_parse_input_feeds_the_hook_and_detaches_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textdoc, "PROGRESS_STEP", 4096)
    from forensics.analysis import Options

    seen: list[float] = []
    report, events, _ = parse_input(InputFile("k.log", _dmesg(3000)), Options(), (), seen.append)
    assert report.kind == "dmesg" and events
    assert len(seen) > 10 and seen[-1] > 0.9
    assert report.document is not None and report.document.progress is None


def test_input_size_counts_what_is_read(tmp_path: Path) -> None:
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.log").write_bytes(b"x" * 100)
    (tmp_path / "d" / "sub" / "b.log").write_bytes(b"y" * 50)
    (tmp_path / "d" / "link.log").symlink_to(tmp_path / "d" / "a.log")  # not followed when reading either
    (tmp_path / "c.log").write_bytes(b"z" * 7)
    assert input_size([str(tmp_path / "d"), str(tmp_path / "c.log"), str(tmp_path / "missing")]) == 157


def _inputs(tmp_path: Path) -> list[str]:
    """A big plain log, a small one, and a .tar.gz of two logs."""
    big = tmp_path / "rank0.log"
    big.write_bytes(_dmesg(60_000))
    small = tmp_path / "rank1.log"
    small.write_bytes(_dmesg(200))
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w") as tar:
        for name, n in (("a/kern.log", 3000), ("a/kern2.log", 1000)):
            body = _dmesg(n)
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    archive = tmp_path / "more.tar.gz"
    archive.write_bytes(gzip.compress(packed.getvalue()))
    return [str(big), str(small), str(archive)]


@pytest.mark.slow
def test_analyze_reports_bytes_of_every_file_up_to_the_total(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_mod, "INTERVAL", 0.0)
    monkeypatch.setattr(textdoc, "PROGRESS_STEP", 64 << 10)
    paths = _inputs(tmp_path)
    total = sum(Path(p).stat().st_size for p in paths)
    names: list[str] = []
    seen: list[Progress] = []
    analysis = analyze(paths, progress=names.append, on_progress=seen.append)
    assert len(analysis.sources) == 4
    assert names == [s.path for s in analysis.sources]  # the old per-file callback still works
    assert all(p.total == total for p in seen)
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert seen[-1].done == total and seen[-1].name == ""
    within_big = [p for p in seen if p.name == paths[0]]
    assert len(within_big) > 10  # inside one file, not only between files
    big_size = Path(paths[0]).stat().st_size
    assert max(p.done for p in within_big) >= 0.95 * big_size
    assert {f"{paths[2]}!a/kern.log", f"{paths[2]}!a/kern2.log"} <= {p.name for p in seen}


# -- the command line -----------------------------------------------------------------------------

def _tty(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setattr(progress_mod, "INTERVAL", 0.0)


@pytest.mark.slow
def test_cli_draws_a_bar_on_a_terminal_and_clears_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _tty(monkeypatch, capsys)
    monkeypatch.setattr(textdoc, "PROGRESS_STEP", 64 << 10)
    paths = _inputs(tmp_path)
    assert main(["analyze", "--format", "json", *paths]) == 0
    captured = capsys.readouterr()
    err = captured.err
    assert captured.out.startswith("{")
    frames = [f for f in re.split(r"\r\x1b\[2K", err) if f]
    assert len(frames) > 10
    assert any("rank0.log" in f and "%" in f and "/s" in f for f in frames)
    assert any("100%" in f for f in frames)  # the full bar at the end
    assert err.endswith("\x1b[2K") and "\x1b[?25h" in err  # erased, the cursor shown again


@pytest.mark.parametrize("why", ["quiet", "not a tty"])
def test_cli_is_silent_when_quiet_or_not_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str], why: str) -> None:
    if why == "quiet":
        _tty(monkeypatch, capsys)
    log = tmp_path / "k.log"
    log.write_bytes(_dmesg(100))
    assert main(["analyze", *(["--quiet"] if why == "quiet" else []), str(log)]) == 0
    assert capsys.readouterr().err == ""
