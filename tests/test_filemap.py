"""Mapped files (forensics/ingest/filemap.py): a TextDocument over a mapping reads as one over the same bytes,
pages are given back as the scan passes them, a blanked copy keeps its blanks, and big plain files
arrive from forensics/ingest/sources.py mapped (containers, BOM and UTF-16 files are read as before)."""

from __future__ import annotations

import gzip
import re
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import forensics.ingest.lineindex as lineindex
import forensics.ingest.sources as sources
import forensics.ingest.textdoc as textdoc
from forensics.analysis import analyze, to_json_dict
from forensics.ingest.filemap import FileMap, _unpinned, open_map
from forensics.ingest.sources import Limits, expand_inputs, input_size
from forensics.ingest.textdoc import TextDocument

PAGE = 4096


def mapped(path: Path) -> TextDocument:
    return TextDocument(open_map(path, path.stat().st_size), str(path))


def test_a_mapping_reads_like_bytes(tmp_path: Path) -> None:
    data = b"alpha\nbeta\r\n\ngamma Error\n" * 50
    p = tmp_path / "x.log"
    p.write_bytes(data)
    m = open_map(p, len(data))
    assert isinstance(m, FileMap)
    assert m[:6] == data[:6] and m[-4:] == data[-4:] and len(m) == len(data)
    assert m.find(b"Error") == data.find(b"Error") and m.rfind(b"\n", 0, 30) == data.rfind(b"\n", 0, 30)
    assert re.search(rb"gam+a", m).span() == re.search(rb"gam+a", data).span()  # type: ignore[union-attr]


def test_pieces_around_pinned_pages() -> None:
    pins = [(PAGE, 2 * PAGE), (4 * PAGE, 5 * PAGE)]
    assert _unpinned(0, 10 * PAGE, pins) == [(0, PAGE), (2 * PAGE, 4 * PAGE), (5 * PAGE, 10 * PAGE)]
    assert _unpinned(PAGE, 2 * PAGE, pins) == []
    assert _unpinned(0, 100, []) == [(0, 100)]


def test_blanked_copy_keeps_its_blanks_after_release(tmp_path: Path) -> None:
    data = b"".join(b"line %06d Error\n" % i for i in range(20000))
    p = tmp_path / "x.log"
    p.write_bytes(data)
    doc = mapped(p)
    at = data.find(b"line 010000")
    work = doc.without([(at, at + 17)])
    assert work.mapped and isinstance(work.data, FileMap)
    work.release(0, len(work))
    doc.release(0, len(doc))
    assert work.data[at : at + 17] == b" " * 17  # the private page was not given back
    assert doc.data[at : at + 17] == data[at : at + 17]  # the original is untouched
    again = work.without([(0, 4)])
    assert again.data[:4] == b"    " and again.data[at : at + 17] == b" " * 17
    assert p.read_bytes() == data  # the file itself is never written


def _mapping_rss_kb(path: Path) -> int:
    """Resident KiB of the mappings of ``path`` in this process (Linux /proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/smaps and MADV_DONTNEED: Linux")
@pytest.mark.slow
def test_the_scan_gives_its_pages_back(tmp_path: Path) -> None:
    pytest.importorskip("hyperscan")
    p = tmp_path / "big.log"
    row = b"h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC plain words here\n"
    p.write_bytes(row * (40 * (1 << 20) // len(row)) + b"RuntimeError: boom\n")
    doc = mapped(p)
    arr = memoryview(doc.data)
    touched = sum(arr[i] for i in range(0, len(doc), PAGE))  # every page read once
    assert touched > 0 and _mapping_rss_kb(p) > 30_000
    doc.release(0, len(doc))
    assert _mapping_rss_kb(p) < 1024
    del arr
    starts = list(doc.iter_candidate_starts([b"RuntimeError"]))
    assert [doc.line_no_at(s) for s in starts] == [doc.line_count()]
    number = doc.line_numberer()
    assert number(starts[0]) == doc.line_count()
    assert _mapping_rss_kb(p) < 4096  # a 40 MB scan and the line index: a chunk's tail at most
    assert [line.text for line in doc.context(doc.line_count(), 1, 1)][-1] == "RuntimeError: boom"
    for _ in doc.lines():  # reading every line gives the pages back behind it
        pass
    assert _mapping_rss_kb(p) < (textdoc.RELEASE_LAG + 2 * textdoc.PROGRESS_STEP) // 1024 + 1024


ROWS = st.lists(st.sampled_from(["", "Error here", "xErrorx", "Traceback (most", "plain text", "a\rError",
                                 "Error\rb", "é ü", "{'loss': 1.0}", "{'loss': nan} Error", "\r", "x" * 90]),
                max_size=80)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=ROWS, use_hs=st.booleans(), final_nl=st.booleans(), block=st.sampled_from([16, 64, 4096]))
@pytest.mark.slow
def test_mapped_document_matches_bytes(monkeypatch: pytest.MonkeyPatch, rows: list[str], use_hs: bool,
                                       final_nl: bool, block: int) -> None:
    """Lines, offsets, line numbers, context, candidate starts and lines: the same over a mapping."""
    data = "\n".join(rows).encode() + (b"\n" if final_nl else b"")
    if not data:
        return  # an empty file is never mapped
    monkeypatch.setattr(textdoc, "USE_HYPERSCAN", use_hs)
    monkeypatch.setattr(textdoc, "HS_MIN_BYTES", 0)
    monkeypatch.setattr(textdoc, "_HS_CHUNK", 32)
    monkeypatch.setattr(lineindex, "BLOCK", block)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        p = Path(tmp) / "x.log"
        p.write_bytes(data)
        m, b = mapped(p), TextDocument(data, "x")
        assert list(m.lines()) == list(b.lines())
        assert m.line_count() == b.line_count() == len(b.line_starts())
        for no in range(1, b.line_count() + 1):
            assert m.line_start(no) == b.line_starts()[no - 1]
            assert m.context(no, 2, 2) == b.context(no, 2, 2)
        for off in range(0, len(data) + 1):
            assert m.line_no_at(off) == b.line_no_at(off)
            if off < len(data):
                assert m.line_at(off) == b.line_at(off)
        lits = dict(literals=[b"Error", b"Traceback"], tail=[b"loss"], sampled=[b"'loss'"], every=3)
        starts = b.candidate_starts(**lits)  # type: ignore[arg-type]
        assert m.candidate_starts(**lits) == starts  # type: ignore[arg-type]
        assert list(m.iter_candidate_starts(**lits)) == starts  # type: ignore[arg-type]
        nm, nb = m.line_numberer(), b.line_numberer()
        assert [nm(s) for s in starts] == [nb(s) for s in starts]
        assert [m.lines_at(s, nm(s), [b"Error"]) for s in starts] == [b.lines_at(s, nb(s), [b"Error"])
                                                                       for s in starts]
        assert list(m.candidate_lines([b"Error"], limited=[b"plain"], limit=2)) == list(
            b.candidate_lines([b"Error"], limited=[b"plain"], limit=2))
        blank = [(0, min(3, len(data)))]
        assert list(m.without(blank).lines()) == list(b.without(blank).lines())


def test_holding_back_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past HOLD_MAX held starts, the pending dropped line is let through: a superset, still in order."""
    pytest.importorskip("hyperscan")
    monkeypatch.setattr(textdoc, "HS_MIN_BYTES", 0)
    monkeypatch.setattr(textdoc, "_HS_CHUNK", 64)
    rows = [f"{{'loss': {i}}}" for i in range(50)] + [f"Error {i}" for i in range(400)]
    doc = TextDocument(("\n".join(rows) + "\n").encode(), "x")
    args = ([b"Error"],)
    full = doc.candidate_starts(*args, sampled=[b"'loss'"], every=10)
    monkeypatch.setattr(textdoc, "HOLD_MAX", 8)
    bounded = doc.candidate_starts(*args, sampled=[b"'loss'"], every=10)
    assert bounded == sorted(set(bounded)) and set(full) <= set(bounded)
    assert len(bounded) <= len(full) + 1


# -- sources ----------------------------------------------------------------------------------------

def test_big_plain_file_is_mapped_and_not_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "MAP_MIN_BYTES", 1 << 10)
    p = tmp_path / "train.log"
    p.write_bytes(b"step 1 ok\n" * 1000)
    [item] = list(expand_inputs([str(p)], Limits(max_file_bytes=4096)))
    assert isinstance(item.raw, FileMap) and item.raw[:] == p.read_bytes() and not item.warnings
    assert input_size([str(p)], Limits(max_file_bytes=4096)) == p.stat().st_size


@pytest.mark.parametrize("head", [b"\xef\xbb\xbf", b"\xff\xfe", b"\x80\x04", b""])
def test_decoded_and_container_files_are_read_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        head: bytes) -> None:
    monkeypatch.setattr(sources, "MAP_MIN_BYTES", 1 << 10)
    p = tmp_path / "x"
    body = b"".join(b"step %d ok %x\n" % (i, i * 2654435761 % (1 << 32)) for i in range(2000))
    p.write_bytes(head + body if head else gzip.compress(body))
    assert p.stat().st_size > 1 << 10
    [item] = list(expand_inputs([str(p)]))
    assert isinstance(item.raw, bytes) and item.raw
    [over] = list(expand_inputs([str(p)], Limits(max_file_bytes=512)))  # held in memory: the cap applies
    assert not over.raw and "skipped" in over.warnings[0]


def _generated(path: Path) -> None:
    """A few MB in the shape of bench_shapes' mixed log: chatter, progress and a failure."""
    rows = []
    for i in range(60000):
        r = i % 7
        if r == 0:
            rows.append(f"node-a12:4821{i % 8}:4830{i % 8} [{i % 8}] NCCL INFO Channel {i % 32:02d}/0 : "
                        f"{i % 8}[{i % 8}] -> 1[1] via P2P/IPC/read")
        elif r == 1:
            rows.append(f"{{'loss': {1 + i / 1e5:.4f}, 'grad_norm': 0.5, 'learning_rate': 2e-05, "
                        f"'epoch': {i / 6e4:.2f}}}")
        elif r == 2:
            rows.append(f"[rank{i % 8}]:[W1129 15:21:07.40827 ProcessGroupNCCL.cpp:{500 + i % 9}] Warning: "
                        "TORCH_NCCL_AVOID_RECORD_STREAMS=1 has no effect for point-to-point collectives. "
                        "(function operator())")
        else:
            rows.append(f" {i % 100:3d}%|#####     | {i}/100000 [12:34<1:23:45,  1.5it/s]")
    rows[45000] = "[ 8123.456789] NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, name=python3, GPU has fallen off the bus."
    rows[45003] = ("[rank3]:[E1129 15:21:07.408271257 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective "
                   "operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
                   "Timeout(ms)=600000) ran for 600015 milliseconds before timing out.")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


@pytest.mark.slow
def test_analyze_a_mapped_file_gives_the_same_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "train.log"
    _generated(p)
    monkeypatch.setattr(sources, "MAP_MIN_BYTES", 1 << 60)
    via_bytes = analyze([str(p)])
    assert isinstance(via_bytes.sources[0].document.data, bytes)  # type: ignore[union-attr]
    monkeypatch.setattr(sources, "MAP_MIN_BYTES", 1 << 20)
    via_map = analyze([str(p)])
    assert isinstance(via_map.sources[0].document.data, FileMap)  # type: ignore[union-attr]
    assert to_json_dict(via_map) == to_json_dict(via_bytes)
    assert via_map.verdict.root_cause is not None


@pytest.mark.parametrize("case", ["samples/recorded/oom-first-backward", "samples/recorded/silent-stall-2gpu",
                                  "tests/corpus/cases/nccl-timeout-tqdm-glued"])
@pytest.mark.slow
def test_analyze_real_inputs_mapped(monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """Real inputs (recorded bundles, a pasted log), every plain file mapped: the same JSON. A mapped
    file is never peeled (presentation.py), so peeling is off on both sides here; with the real
    threshold a file is mapped exactly when it is too big to peel."""
    import forensics.parsers.common.presentation as presentation

    path = Path(__file__).resolve().parents[1] / case
    monkeypatch.setattr(presentation, "MAX_BYTES", 0)
    monkeypatch.setattr(sources, "MAP_MIN_BYTES", 1 << 60)
    via_bytes = to_json_dict(analyze([str(path)]))
    monkeypatch.setattr(sources, "MAP_MIN_BYTES", 1)
    run = analyze([str(path)])
    assert sum(s.document is not None and s.document.mapped for s in run.sources) >= 1
    assert to_json_dict(run) == via_bytes


def test_mapping_threshold_is_where_peeling_stops() -> None:
    import forensics.parsers.common.presentation as presentation

    from forensics.ingest.filemap import MAP_MIN_BYTES

    assert MAP_MIN_BYTES == presentation.MAX_BYTES
