"""The per-chunk template pre-pass (parsers/common/template_scan.py): the lines it hands over, what it counts
instead, and that analyses read through it say what the line-by-line scan says."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from forensics.parsers import dmesg
from forensics.parsers.common import kernlog, template_scan
from forensics.parsers.common.base import ParseContext
from forensics.parsers.common.templates import FULL, Templates, raw_rank, template_key
from forensics.parsers.process_output import (
    ANOMALY_LITERALS,
    BAR_LITERALS,
    PROGRESS_LITERALS,
    TRIGGER_LITERALS,
    scan,
)

from forensics.analysis import analyze
from forensics.evaluation.evaluate import evaluate
from forensics.events import Event
from forensics.ingest.textdoc import TextDocument

ROOT = Path(__file__).resolve().parent

WARN = ("[rank{r}]:[W1129 15:{m:02d}:{s:02d}.{ns:09d} ProcessGroupNCCL.cpp:{ln}] Warning: "
        "TORCH_NCCL_AVOID_RECORD_STREAMS=1 has no effect for point-to-point collectives. (function operator())")
NCCL = "node-a{h}:{pid}:{tid} [{r}] NCCL INFO Channel {c:02d}/0 : {r}[{r}] -> {n}[{n}] via P2P/IPC/read"
ITER = (" iteration {i:8d}/  100000 | consumed samples: {c:10d} | elapsed time per iteration (ms): {ms:.1f} | "
        "learning rate: 2.000E-05 | global batch size:   256 | lm loss: {loss:.6E} | loss scale: 1.0 | "
        "grad norm: 0.512 | number of skipped iterations:   0 | number of nan iterations: {nan:3d} |")
BAR = "\r {p:3d}%|{fill}| {i}/100000 [12:34<1:23:45,  {r:.2f}it/s]"
DICT = "{{'loss': {loss:.4f}, 'grad_norm': {g}, 'learning_rate': 2e-05, 'epoch': {e:.2f}}}"
WATCHDOG = ("[rank3]:[E1129 15:59:07.408271257 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
            "Timeout(ms)=600000) ran for 600015 milliseconds before timing out.")
XID = "[ 8123.456789] NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, name=python3, GPU has fallen off the bus."


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every document through the pre-pass, in small chunks (so records and templates cross them)."""
    monkeypatch.setattr(template_scan, "MIN_BYTES", 0)
    monkeypatch.setattr(template_scan, "CHUNK_FIRST", 2048)
    monkeypatch.setattr(template_scan, "CHUNK_MAX", 16384)


def _mixed(n: int, seed: int, crlf: bool = False) -> str:
    """A training log of ``n`` lines: NCCL chatter, c10d warnings, Megatron lines, bars, loss dicts; one
    NaN loss, one non-zero nan-iteration counter, a watchdog timeout and an Xid near the end."""
    rnd = random.Random(seed)
    out = []
    it = 0
    for i in range(n):
        r = rnd.randrange(8)
        x = rnd.random()
        if i == n - 40:
            line = WATCHDOG
        elif i == n - 20:
            line = XID
        elif i == n // 2:
            line = DICT.format(loss=1.5, g="nan", e=0.5)
        elif i == n // 3:
            line = ITER.format(i=it, c=it * 256, ms=801.0, loss=2.5, nan=3)
        elif x < 0.35:
            line = NCCL.format(h=12, pid=48211 + r, tid=48300 + r, r=r, c=rnd.randrange(32), n=(r + 1) % 8)
        elif x < 0.5:
            it += 1
            line = ITER.format(i=it, c=it * 256, ms=800 + rnd.random() * 40, loss=2 + rnd.random(), nan=0)
        elif x < 0.62:
            line = DICT.format(loss=1 + rnd.random(), g=f"{rnd.random():.4f}", e=it / 10000)
        elif x < 0.74:
            p = it % 100
            line = BAR.format(p=p, fill="#" * (p // 10) + " " * (10 - p // 10), i=it, r=1 + rnd.random())
        elif x < 0.9:
            line = WARN.format(r=r, m=rnd.randrange(60), s=rnd.randrange(60), ns=rnd.randrange(10**9),
                               ln=rnd.randrange(500, 5000))
        else:
            line = f"[{1000 + i / 1000:12.6f}] some benign line number {i}"
        out.append(line)
    eol = "\r\n" if crlf else "\n"
    return eol.join(out) + eol


def _events(text: str) -> list[Event]:
    doc = TextDocument.from_bytes(text.encode(), "train.log")
    return list(scan(doc, ParseContext(path="train.log", source="file:train.log", year=2026)))  # type: ignore[misc]


def test_value_literals_are_the_ones_whose_digits_are_a_value() -> None:
    assert template_scan.value_literal(b"error=59") and template_scan.value_literal(b"'loss': 0.0,")
    assert template_scan.value_literal(b"0x00000116 (") and template_scan.value_literal(b"ZeRO-3")
    assert template_scan.value_literal(b"nan iterations:   1")
    assert not template_scan.value_literal(b"via P2P") and not template_scan.value_literal(b"[10de:")
    assert not template_scan.value_literal(b"transport/p2p.cc") and not template_scan.value_literal(b"D3cold")
    assert not template_scan.value_literal(b"Traceback")


@pytest.mark.parametrize("crlf", [False, True])
def test_visits_hold_every_candidate_line_with_its_number(forced: None, crlf: bool) -> None:
    """With nothing learned yet (no template judged simple), the pre-pass hands over every line the
    line-by-line literal scan finds (the progress lines sampled alike), each with its line number."""
    text = _mixed(3000, seed=5, crlf=crlf).encode()
    doc = TextDocument(text, "x.log")
    plan = template_scan.VisitPlan(TRIGGER_LITERALS + ANOMALY_LITERALS, tail=BAR_LITERALS,
                                   sampled=PROGRESS_LITERALS)
    got = list(template_scan.visits(doc, Templates(len(text)), plan))
    want = doc.candidate_starts(TRIGGER_LITERALS + ANOMALY_LITERALS, tail=BAR_LITERALS, sampled=PROGRESS_LITERALS)
    assert set(want) <= {start for start, _ in got}
    assert [start for start, _ in got] == sorted({start for start, _ in got})
    for start, no in got:
        assert doc.line_no_at(start) == no
    # a value literal is looked for in the raw bytes: the non-zero nan counter is handed over
    nan_line = next(i for i, line in enumerate(text.split(b"\n")) if b"nan iterations:   3" in line)
    assert nan_line + 1 in {no for _, no in got}


def test_progress_lines_are_sampled_and_anomalies_kept(forced: None) -> None:
    text = _mixed(6000, seed=9).encode()
    doc = TextDocument(text, "x.log")
    plan = template_scan.VisitPlan(TRIGGER_LITERALS + ANOMALY_LITERALS, tail=BAR_LITERALS,
                                   sampled=PROGRESS_LITERALS)
    got = {no for _, no in template_scan.visits(doc, Templates(len(text)), plan, every=16)}
    lines = text.split(b"\n")
    progress = [i + 1 for i, line in enumerate(lines) if b"iteration " in line and b"nan iterations:   0" in line]
    assert 0 < len(got & set(progress)) < len(progress) / 4  # sampled
    assert next(i + 1 for i, line in enumerate(lines) if b"'grad_norm': nan" in line) in got


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.slow
def test_repeated_lines_are_counted_with_their_ranks_as_the_line_scan_counts_them(
        forced: None, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _mixed(8000, seed=seed)
    through = _events(text)
    monkeypatch.setattr(template_scan, "MIN_BYTES", 1 << 40)
    line_by_line = _events(text)
    true_count = sum(1 for line in text.split("\n") if "TORCH_NCCL_AVOID_RECORD_STREAMS" in line)
    for events in (through, line_by_line):
        warns = [e for e in events if "TORCH_NCCL_AVOID_RECORD_STREAMS" in e.message]
        assert FULL <= len(warns) < true_count / 4
        assert warns[0].attrs["count"] == true_count
        assert warns[0].attrs["ranks"] == list(range(8))
        assert warns[-1].origin.line == max(i + 1 for i, line in enumerate(text.split("\n"))
                                            if "TORCH_NCCL_AVOID_RECORD_STREAMS" in line)
        kinds = {e.kind for e in events}
        assert {"c10d", "progress"} <= kinds
        assert any("Watchdog caught" in e.message for e in events)
        assert any(e.kind == "progress" and e.severity.name == "WARNING" for e in events)  # the NaN


def test_nccl_prefix_ranks_are_read_for_counted_lines(forced: None) -> None:
    lines = [NCCL.format(h=7, pid=100 + r * 1000, tid=5 + r, r=r, c=i % 32, n=(r + 1) % 8)
             for i in range(4000) for r in [i % 5 if i < 3990 else 7]]
    starts = []
    pos = 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    import numpy as np

    raw = ("\n".join(lines) + "\n").encode()
    assert template_scan._ranks(raw, np.array(starts)) == {0, 1, 2, 3, 4, 7}
    assert {raw_rank(raw, s) for s in starts} == {0, 1, 2, 3, 4, 7}


@pytest.mark.slow
def test_analysis_through_the_pre_pass_says_what_the_line_scan_says(tmp_path: Path, forced: None,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "train.log"
    log.write_text(_mixed(12000, seed=4))
    through = analyze([str(log)])
    monkeypatch.setattr(template_scan, "MIN_BYTES", 1 << 40)
    line_by_line = analyze([str(log)])
    assert through.verdict is not None and line_by_line.verdict is not None
    assert through.verdict.root_cause.signature == line_by_line.verdict.root_cause.signature
    assert through.verdict.root_cause.signature == "xid-79-fallen-off-bus"
    assert [f.signature for f in through.findings] == [f.signature for f in line_by_line.findings]


AER = ("[{t:12.6f}] pcieport 0000:3a:01.0: AER: Corrected error received: 0000:3b:00.0\n"
       "[{t:12.6f}] nvidia 0000:3b:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n"
       "[{t:12.6f}] nvidia 0000:3b:00.0:   device [10de:2330] error status/mask=00000001/0000e000\n"
       "[{t:12.6f}] nvidia 0000:3b:00.0:    [ 0] RxErr                  (First)\n")


def test_kernel_records_with_continuation_lines_are_counted_whole(tmp_path: Path, forced: None,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A corrected-AER report continues on two indented lines: repeated, the whole record is counted
    (its continuation lines never read as records of their own), and the fatal error after the storm
    is still found."""
    monkeypatch.setattr(kernlog, "FULL_PARSE_BYTES", 0)  # the sparse (big-log) path
    rnd = random.Random(2)
    parts = []
    t = 10000.0
    for i in range(3000):
        t += rnd.random()
        parts.append(AER.format(t=t) if i % 3 else f"[{t:12.6f}] EXT4-fs (nvme0n1p2): re-mounted. Opts: (null)\n")
    parts.append(f"[{t + 5:12.6f}] pcieport 0000:3a:01.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0\n")
    parts.append(f"[{t + 6:12.6f}] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus.\n")
    log = tmp_path / "dmesg.log"
    log.write_text("".join(parts))
    doc = TextDocument(log.read_bytes(), str(log))
    ctx = ParseContext(path=str(log), source="file:dmesg.log", year=2026)
    events = list(dmesg.PARSER.parse(doc, ctx))  # type: ignore[misc]
    assert not any(e.message.lstrip().startswith(("device [10de", "[ 0] RxErr")) for e in events)
    bus = [e for e in events if "PCIe Bus Error" in e.message]
    assert 0 < len(bus) < 400
    counted = [e for e in bus if "count" in e.attrs]
    assert counted and counted[0].attrs["count"] == 2000
    result = analyze([str(log)])
    # The fatal AER one second before the Xid 79 is its cause (a precursor, issue 20); the Xid follows it.
    assert result.verdict.root_cause is not None and result.verdict.root_cause.signature == "pcie-aer"
    assert [f.signature for f in result.verdict.consequences] == ["xid-79-fallen-off-bus"]


@pytest.mark.slow
def test_the_corpus_reads_the_same_through_the_pre_pass(forced: None) -> None:
    report = evaluate(ROOT / "corpus")
    correct, cases = report.top1
    assert cases >= 60 and correct == cases and report.false_alarms[0] == 0


def test_template_key_deletes_digits() -> None:
    assert template_key(b"[rank12]: step 5000 loss 0.25") == b"[rank]: step  loss ."


@pytest.mark.slow
def test_worker_processes_prepare_the_same_plan(forced: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks cut by forked worker processes give the lines the in-process pre-pass gives."""
    text = _mixed(9000, seed=11).encode()
    plan = template_scan.VisitPlan(TRIGGER_LITERALS + ANOMALY_LITERALS, tail=BAR_LITERALS,
                                   sampled=PROGRESS_LITERALS)

    def run() -> list[tuple[int, int]]:
        doc = TextDocument(text, "x.log")
        return list(template_scan.visits(doc, Templates(len(text)), plan, every=4))

    serial = run()
    monkeypatch.setattr(template_scan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setenv(template_scan.WORKERS_ENV, "2")
    assert template_scan.scan_workers(len(text)) == 2
    events_parallel = _events(text.decode())  # (chunks growing more slowly than in one process)
    monkeypatch.setattr(template_scan, "PARALLEL_GROWTH", 2.0)  # the serial run's chunks
    assert run() == serial
    monkeypatch.setenv(template_scan.WORKERS_ENV, "1")
    events_serial = _events(text.decode())

    def counted(events: list[Event]) -> list[tuple[str, int, int, tuple[int, ...]]]:
        return [(e.kind, e.origin.line, e.attrs["count"], tuple(e.attrs.get("ranks", ()))) for e in events
                if "count" in e.attrs]

    # other chunks read other occurrences of a template in full, but every template is counted alike
    assert counted(events_parallel) == counted(events_serial) != []
    assert {e.kind for e in events_parallel} == {e.kind for e in events_serial}


@pytest.mark.slow
def test_a_failing_worker_pool_falls_back_to_this_process(forced: None, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _mixed(3000, seed=12).encode()
    plan = template_scan.VisitPlan(TRIGGER_LITERALS + ANOMALY_LITERALS)
    doc = TextDocument(text, "x.log")
    serial = list(template_scan.visits(doc, Templates(len(text)), plan))
    monkeypatch.setattr(template_scan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setenv(template_scan.WORKERS_ENV, "2")

    def broken(start: int, end: int) -> None:
        raise OSError("worker died")

    monkeypatch.setattr(template_scan, "_prepare_shared", broken)
    assert list(template_scan.visits(TextDocument(text, "x.log"), Templates(len(text)), plan)) == serial


def test_without_hyperscan_the_same_lines_are_handed_over(forced: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from forensics.ingest import textdoc

    text = _mixed(4000, seed=13).encode()
    plan = template_scan.VisitPlan(TRIGGER_LITERALS + ANOMALY_LITERALS, tail=BAR_LITERALS,
                                   sampled=PROGRESS_LITERALS)
    with_hs = list(template_scan.visits(TextDocument(text, "x.log"), Templates(len(text)), plan, every=4))
    monkeypatch.setattr(textdoc, "USE_HYPERSCAN", False)
    assert list(template_scan.visits(TextDocument(text, "x.log"), Templates(len(text)), plan, every=4)) == with_hs


def _anchored_iterations(limit: int) -> tuple[bytes, list[int]]:
    """6000 Megatron iteration lines (the anchor ``number of nan iterations`` on each, budget
    ``limit``) and the numbers of the lines the pre-pass hands over, sampling one in 8."""
    lines = [ITER.format(i=i, c=i * 256, ms=800.0, loss=2.0, nan=0) for i in range(1, 6001)]
    text = ("\n".join(lines) + "\n").encode()
    plan = template_scan.VisitPlan(TRIGGER_LITERALS + ANOMALY_LITERALS, limited=(b"number of nan iterations",),
                                   tail=BAR_LITERALS, sampled=PROGRESS_LITERALS)
    doc = TextDocument(text, "x.log")
    return text, [no for _, no in template_scan.visits(doc, Templates(len(text)), plan, limit=limit, every=8)]


def test_progress_lines_an_anchor_also_names_are_still_sampled_past_its_budget(forced: None) -> None:
    """Megatron's iteration line holds the anchor ``number of nan iterations``: its budget spent, the
    lines are still sampled as progress lines (the series goes on to the end of the file)."""
    _, got = _anchored_iterations(limit=100)
    assert any(no > 5000 for no in got) and len(got) < 1500


def test_progress_lines_an_anchor_names_are_sampled_not_read_up_to_its_budget(forced: None) -> None:
    """The anchor's budget is not spent on progress lines: past the first ones (the parser learns the
    template on them) they are read one in ``every``, like the progress lines no anchor names."""
    text, got = _anchored_iterations(limit=1000)
    chunks = len(template_scan._chunk_bounds(text, len(text)))  # (the last of each chunk is always kept)
    assert len(got) <= 6000 // 8 + chunks + 1 and max(got) == 6000


@pytest.mark.slow
def test_a_zero_loss_scale_late_in_a_big_log_is_read_whatever_the_sampling(tmp_path: Path) -> None:
    """Megatron's iteration line names two anchors (``loss scale``, ``number of nan iterations``) and is
    a progress line: sampled in a big log. The value that makes it evidence (a scale printed as 0) is a
    literal of its own, so the two such lines near the end of a 6 MB log are read and the signature
    fires; a plain scale of 1.0 on every other line is not evidence."""
    lines = [ITER.format(i=i, c=i * 256, ms=800.0, loss=2.0, nan=0) for i in range(1, 24001)]
    for i in (23_990, 23_995):
        lines[i] = lines[i].replace("loss scale: 1.0", "loss scale: 0.0")
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert log.stat().st_size >= template_scan.MIN_BYTES
    found = {f.signature for f in analyze([str(log)]).findings}
    assert "loss-scale-collapse" in found
    lines[23_990] = lines[23_995] = lines[0]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "loss-scale-collapse" not in {f.signature for f in analyze([str(log)]).findings}


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.slow
def test_a_mapped_file_is_planned_as_its_bytes_and_its_pages_are_given_back(
        tmp_path: Path, forced: None, monkeypatch: pytest.MonkeyPatch, workers: str) -> None:
    import sys

    from forensics.ingest import textdoc
    from forensics.ingest.filemap import open_map

    monkeypatch.setattr(textdoc, "RELEASE_LAG", 64 << 10)
    text = _mixed(20000, seed=14).encode()
    path = tmp_path / "train.log"
    path.write_bytes(text)
    plan = template_scan.VisitPlan(TRIGGER_LITERALS + ANOMALY_LITERALS, tail=BAR_LITERALS,
                                   sampled=PROGRESS_LITERALS)
    want = list(template_scan.visits(TextDocument(text, "x.log"), Templates(len(text)), plan, every=4))
    monkeypatch.setattr(template_scan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(template_scan, "PARALLEL_GROWTH", 2.0)  # the chunks of the run above
    monkeypatch.setenv(template_scan.WORKERS_ENV, workers)
    doc = TextDocument(open_map(path, len(text)), str(path))
    assert list(template_scan.visits(doc, Templates(len(text)), plan, every=4)) == want
    # the pre-pass counted the newlines of every block: the line index is made from them, not again
    from forensics.ingest.lineindex import LineIndex

    adopted = doc._index
    assert adopted is not None and list(adopted.cum) == list(LineIndex(text).cum)
    if sys.platform.startswith("linux"):
        resident = 0
        lines = Path("/proc/self/smaps").read_text().splitlines()
        for i, line in enumerate(lines):
            if line.endswith(str(path)):
                resident += next(int(x.split()[1]) for x in lines[i + 1:] if x.startswith("Rss:"))
        assert resident * 1024 < len(text) // 2  # the chunks behind the scan are no longer resident
    plain = TextDocument(text, "x.log")
    for offset in range(0, len(text), 9973):
        assert doc.line_no_at(offset) == plain.line_no_at(offset)


@pytest.mark.slow
def test_a_parser_that_stops_early_leaves_no_worker_behind(forced: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    text = _mixed(20000, seed=15).encode()
    plan = template_scan.VisitPlan(TRIGGER_LITERALS + ANOMALY_LITERALS)
    monkeypatch.setattr(template_scan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setenv(template_scan.WORKERS_ENV, "2")
    lines = template_scan.visits(TextDocument(text, "x.log"), Templates(len(text)), plan)
    assert next(lines)
    lines.close()  # the parser raised, or stopped reading
    assert multiprocessing.active_children() == []
    assert template_scan._SHARED is None


def test_the_default_workers_are_the_usable_cpus_up_to_eight(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity here")
    monkeypatch.delenv(template_scan.WORKERS_ENV, raising=False)
    big = template_scan.PARALLEL_MIN_BYTES
    for usable, want in ((1, 1), (3, 3), (32, template_scan.MAX_WORKERS)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, n=usable: set(range(n)))
        assert template_scan.scan_workers(big) == want
    assert template_scan.scan_workers(big - 1) == 1  # a smaller document: in this process


def _started_in_workers(monkeypatch: pytest.MonkeyPatch, log: Path, delay: float) -> None:
    """Workers note each chunk they start in ``log`` (one line each), then take ``delay`` seconds more."""
    import time

    prepare = template_scan._prepare_shared

    def noting(start: int, end: int):  # type: ignore[no-untyped-def]
        with log.open("a") as f:
            f.write(f"{start}\n")
        time.sleep(delay)
        return prepare(start, end)

    noting.__module__, noting.__qualname__ = template_scan.__name__, "_prepare_shared"  # (pickled by name)
    monkeypatch.setattr(template_scan, "_prepare_shared", noting)  # (forked: the workers have it too)


@pytest.mark.parametrize("parser_first", [True, False])
@pytest.mark.slow
def test_workers_run_only_as_far_ahead_as_the_parser_needs(
        tmp_path: Path, forced: None, monkeypatch: pytest.MonkeyPatch, parser_first: bool) -> None:
    """A parser slower than the workers keeps the first few chunks in flight, never more, where it
    shares the CPUs with them; one that waits for its chunks gets more of them prepared at once."""
    import time

    monkeypatch.setattr(template_scan, "_usable_cpus", lambda: 4)  # as many as the workers
    text = _mixed(12000, seed=15).encode()
    log = tmp_path / "started"
    log.touch()
    _started_in_workers(monkeypatch, log, delay=0.0 if parser_first else 0.05)
    bounds = template_scan._chunk_bounds(text, len(text), template_scan.PARALLEL_GROWTH)
    most_ahead = 0
    for consumed, _ in enumerate(template_scan._prepared(text, bounds, [], workers=4), 1):
        if parser_first:
            time.sleep(0.05)  # the parser is the slow one: the workers are done long before
        started = len(log.read_text().split())
        most_ahead = max(most_ahead, started + 1 - consumed)  # (+1: the first chunk is prepared here)
    assert len(log.read_text().split()) == len(bounds) - 1
    if parser_first:
        assert most_ahead <= template_scan.AHEAD_FIRST
    else:
        assert most_ahead > template_scan.AHEAD_FIRST


@pytest.mark.slow
def test_with_a_cpu_to_spare_every_worker_starts_busy(
        tmp_path: Path, forced: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parser has a CPU of its own: every worker gets a chunk at once (and one waits queued),
    however slow the parser; never more before it waits."""
    import time

    monkeypatch.setattr(template_scan, "_usable_cpus", lambda: 16)
    text = _mixed(12000, seed=15).encode()
    log = tmp_path / "started"
    log.touch()
    _started_in_workers(monkeypatch, log, delay=0.0)
    bounds = template_scan._chunk_bounds(text, len(text), template_scan.PARALLEL_GROWTH)
    assert len(bounds) > 8
    most_ahead = 0
    for consumed, _ in enumerate(template_scan._prepared(text, bounds, [], workers=4), 1):
        time.sleep(0.1)  # the slow parser: the workers finish long before it asks
        most_ahead = max(most_ahead, len(log.read_text().split()) + 1 - consumed)
    assert most_ahead == 4 + 1
