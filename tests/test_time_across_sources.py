"""Year-less logs beside dated ones: the guessed year is marked by the parsers and re-anchored by
the timeline (forensics/timeline/merge.py ``anchor_years``), end to end through ``analyze``."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from forensics.parsers.common.base import ParseContext
from forensics.parsers.registry import detect

from forensics.analysis import analyze
from forensics.cli import main
from forensics.clock import NS, YEAR_INFERRED, epoch_ns
from forensics.events import Event, MetricSample, Origin, TsSource
from forensics.ingest.textdoc import TextDocument
from forensics.timeline.merge import anchor_years, build_timeline

# Real line shapes: dmesg --time-format iso (corpus ert7797), NVRM Xid 79, c10d watchdog (corpus
# illegal-address-via-nccl-watchdog, PyTorch 2.4 glog stamp without a year).
DMESG_ISO_2024 = (
    "2024-08-16T01:34:10,118273+00:00 NVRM: GPU at PCI:0000:3b:00: GPU-6a4b9e1c-0d9c-4a51-b3f1-2c7e5d8a9f01\n"
    "2024-08-16T01:34:10,118279+00:00 NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, GPU has fallen off the bus.\n"
    "2024-08-16T01:34:10,118301+00:00 NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n"
)
C10D_GLOG = (
    "[rank3]:[E816 01:45:40.212150935 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=80078, OpType=ALLREDUCE, NumelIn=2106881, NumelOut=2106881, Timeout(ms)=600000) "
    "ran for 600013 milliseconds before timing out.\n"
    "[rank7]:[E816 01:45:40.183009389 ProcessGroupNCCL.cpp:607] [Rank 7] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=80078, OpType=ALLREDUCE, NumelIn=2106881, NumelOut=2106881, Timeout(ms)=600000) "
    "ran for 600026 milliseconds before timing out.\n"
)
MTIME_2026 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC).timestamp()
MTIME_2024 = datetime(2024, 8, 16, 2, 0, tzinfo=UTC).timestamp()


def write(path: Path, text: str, mtime: float) -> str:
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    return str(path)


def year(ts: int | None) -> int:
    assert ts is not None
    return datetime.fromtimestamp(ts / NS, UTC).year


def parse(text: str, path: str = "log", **ctx_args: Any) -> list[Event]:
    doc = TextDocument.from_bytes(text.encode(), path)
    parser, _ = detect(doc.head())
    ctx = ParseContext(path=path, source=f"file:{path}", **ctx_args)
    return [r for r in parser.parse(doc, ctx) if isinstance(r, Event)]


# -- the case of the brief: a 2024 dmesg beside a freshly copied train.log --------------------------
def test_copied_glog_train_log_lines_up_after_the_dated_xid(tmp_path: Path) -> None:
    dmesg = write(tmp_path / "dmesg.txt", DMESG_ISO_2024, MTIME_2024)
    train = write(tmp_path / "train.log", C10D_GLOG, MTIME_2026)
    analysis = analyze([dmesg, train])
    events = analysis.timeline.events
    xid = next(e for e in events if e.kind == "xid")
    timeouts = [e for e in events if e.kind == "c10d"]
    assert len(timeouts) == 2
    assert all(e.attrs.get(YEAR_INFERRED) for e in timeouts)
    assert all(e.ts_source is TsSource.LOCAL for e in timeouts)  # still honest: zone unknown
    assert xid.ts is not None and all(e.ts is not None and 0 < e.ts - xid.ts < 3600 * NS for e in timeouts)
    assert events.index(xid) < min(events.index(e) for e in timeouts)
    assert timeouts[0].ts == epoch_ns(2024, 8, 16, 1, 45, 40, 183009389)
    assert any("train.log" in n and "put in 2024" in n and "gave 2026" in n for n in analysis.timeline.notes)
    assert analysis.verdict.root_cause_id == "xid-79-fallen-off-bus"
    assert "nccl-watchdog-timeout" in [f.signature for f in analysis.verdict.consequences]


def test_forensics_analyze_names_xid_79_as_root_and_the_timeout_as_its_consequence(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dmesg = write(tmp_path / "dmesg.txt", DMESG_ISO_2024, MTIME_2024)
    train = write(tmp_path / "train.log", C10D_GLOG, MTIME_2026)
    assert main(["analyze", "--format", "json", dmesg, train]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"]["root_cause"] == "xid-79-fallen-off-bus"
    assert "nccl-watchdog-timeout" in out["verdict"]["consequences"]
    timeout = next(f for f in out["findings"] if f["signature"] == "nccl-watchdog-timeout")
    assert timeout["first_seen"].startswith("2024-08-16T01:45:40")


def test_without_dated_logs_the_file_keeps_its_date_and_says_so(tmp_path: Path) -> None:
    train = write(tmp_path / "train.log", C10D_GLOG, MTIME_2026)
    analysis = analyze([train])
    assert {year(e.ts) for e in analysis.timeline.events if e.kind == "c10d"} == {2026}
    assert any("train.log" in n and "2026 taken from the file's date" in n for n in analysis.timeline.notes)


def test_a_log_is_never_moved_forward_past_its_file_date(tmp_path: Path) -> None:
    """A year-less log dated 2024 by its file beside 2026 dated logs stays in 2024."""
    dmesg = write(tmp_path / "dmesg.txt", DMESG_ISO_2024.replace("2024-08-16", "2026-08-16"), MTIME_2026)
    train = write(tmp_path / "train.log", C10D_GLOG, MTIME_2024)
    analysis = analyze([dmesg, train])
    assert {year(e.ts) for e in analysis.timeline.events if e.kind == "c10d"} == {2024}
    assert any("train.log" in n and "kept from the file's date" in n for n in analysis.timeline.notes)


def test_mixed_file_year_less_lines_follow_its_own_dated_lines(tmp_path: Path) -> None:
    """A launcher log with ISO-stamped elastic lines and year-less c10d lines, copied in 2026."""
    text = ("[2024-08-16 01:44:02,030] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process "
            "48211 closing signal SIGTERM\n" + C10D_GLOG)
    train = write(tmp_path / "train.log", text, MTIME_2026)
    analysis = analyze([train])
    c10d = [e for e in analysis.timeline.events if e.kind == "c10d"]
    assert c10d and {year(e.ts) for e in c10d} == {2024}
    dated = [e for e in analysis.timeline.events if e.ts is not None and not e.attrs.get(YEAR_INFERRED)]
    assert dated and {year(e.ts) for e in dated} == {2024}


# -- which parsers mark the year as guessed ---------------------------------------------------------
def test_syslog_and_journal_short_stamps_are_marked() -> None:
    events = parse("Aug 16 01:45:40 node1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, GPU has fallen "
                   "off the bus.\n", year=2026)
    assert events and all(e.attrs.get(YEAR_INFERRED) is True for e in events)


def test_a_journal_header_year_is_not_a_guess() -> None:
    events = parse("-- Logs begin at Fri 2024-08-16 01:00:00 UTC, end at Fri 2024-08-16 02:00:00 UTC. --\n"
                   "Aug 16 01:45:40 node1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, GPU has fallen "
                   "off the bus.\n", year=2026)
    xid = next(e for e in events if e.kind == "xid")
    assert year(xid.ts) == 2024 and YEAR_INFERRED not in xid.attrs


def test_dated_kernel_stamps_are_not_marked() -> None:
    events = parse(DMESG_ISO_2024, year=2026)
    assert events and not any(YEAR_INFERRED in e.attrs for e in events)


def test_process_output_marks_glog_and_vllm_stamps_but_not_iso_ones() -> None:
    text = ("ERROR 08-16 01:45:41 multiproc_worker_utils.py:226] Worker VllmWorkerProcess pid 48211 died, exit "
            "code: -9\n"
            "[2024-08-16 01:44:02,030] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: "
            "-9) local_rank: 0 (pid: 48211) of binary: /usr/bin/python\n" + C10D_GLOG)
    events = parse(text, "train.log", year=2026)
    by_line = {e.origin.line: e for e in events}
    assert by_line[1].attrs.get(YEAR_INFERRED) is True
    assert YEAR_INFERRED not in by_line[2].attrs and year(by_line[2].ts) == 2024
    assert all(by_line[n].attrs.get(YEAR_INFERRED) is True for n in (3, 4))


def test_journal_lines_handed_to_the_stream_parser_keep_the_mark() -> None:
    text = ("Aug 16 01:45:41 node1 trainer[394]: Traceback (most recent call last):\n"
            "Aug 16 01:45:41 node1 trainer[394]:   File \"train.py\", line 3, in <module>\n"
            "Aug 16 01:45:41 node1 trainer[394]: RuntimeError: CUDA error: unspecified launch failure\n")
    events = parse(text, "journal.txt", year=2026)
    tb = next(e for e in events if e.kind == "traceback")
    assert tb.ts_source is TsSource.LOCAL and tb.attrs.get(YEAR_INFERRED) is True


# -- anchor_years on events ---------------------------------------------------------------------------
def ev(ts: int, *, host: str | None = None, guessed: bool = False, kind: str = "log", line: int = 1,
       ts_source: TsSource = TsSource.LOCAL) -> Event:
    attrs = {YEAR_INFERRED: True} if guessed else {}
    return Event(ts=ts, ts_source=ts_source, source="file:x", kind=kind, message="m", origin=Origin("x", line),
                 host=host, attrs=attrs)


def test_only_dated_logs_of_the_same_host_anchor_a_named_host() -> None:
    dated = [ev(epoch_ns(2024, 8, 16, 1), host="node1", ts_source=TsSource.EXACT)]
    other = [ev(epoch_ns(2026, 8, 16, 2), host="node2", guessed=True)]
    same = [ev(epoch_ns(2026, 8, 16, 2), host="node1", guessed=True)]
    notes: list[str] = []
    out = anchor_years([dated, other, same], ["dmesg", "node2.log", "node1.log"], notes=notes)
    assert year(out[1][0].ts) == 2026 and year(out[2][0].ts) == 2024
    assert out[2][0].ts_source is TsSource.LOCAL and out[2][0].attrs.get(YEAR_INFERRED)
    assert any(n.startswith("node2.log") and "taken from the file's date" in n for n in notes)


def test_logs_naming_no_host_anchor_any_host_and_are_anchored_by_any() -> None:
    unnamed_dated = [ev(epoch_ns(2024, 8, 16, 1), ts_source=TsSource.EXACT)]
    named_guess = [ev(epoch_ns(2026, 8, 16, 2), host="node1", guessed=True)]
    out = anchor_years([unnamed_dated, named_guess])
    assert year(out[1][0].ts) == 2024
    named_dated = [ev(epoch_ns(2024, 8, 16, 1), host="node7", ts_source=TsSource.EXACT)]
    unnamed_guess = [ev(epoch_ns(2026, 8, 16, 2), guessed=True)]
    out = anchor_years([named_dated, unnamed_guess])
    assert year(out[1][0].ts) == 2024


def test_dated_metric_samples_anchor_too() -> None:
    sample = MetricSample(ts=epoch_ns(2025, 3, 2, 10), ts_source=TsSource.EXACT, gpu="0", values={"temp_c": 60.0},
                          origin=Origin("smi.csv", 2))
    out = anchor_years([[ev(epoch_ns(2026, 3, 2, 11), guessed=True)]], metrics=[sample])
    assert out[0][0].ts == epoch_ns(2025, 3, 2, 11)


def test_a_rollover_inside_the_file_moves_as_a_whole() -> None:
    guessed = [ev(epoch_ns(2025, 12, 31, 23, 59), guessed=True, line=1),
               ev(epoch_ns(2026, 1, 1, 0, 1), guessed=True, line=2),
               ev(epoch_ns(2024, 1, 1, 0, 2), kind="x", line=3, ts_source=TsSource.EXACT)]
    dated = [ev(epoch_ns(2023, 12, 31, 23, 0), ts_source=TsSource.EXACT)]
    out = anchor_years([dated, guessed])
    assert [e.ts for e in out[1][:2]] == [epoch_ns(2023, 12, 31, 23, 59), epoch_ns(2024, 1, 1, 0, 1)]
    assert out[1][2] is guessed[2]  # a dated line of the file is not moved


def test_far_from_any_year_is_left_alone() -> None:
    dated = [ev(epoch_ns(2024, 2, 1), ts_source=TsSource.EXACT)]
    guessed = [ev(epoch_ns(2026, 8, 16), guessed=True)]
    notes: list[str] = []
    out = anchor_years([dated, guessed], ["d", "g"], notes=notes)
    assert out[1][0] is guessed[0]
    assert any(n.startswith("g:") and "kept from the file's date" in n for n in notes)


def test_already_near_the_dated_logs_stays_in_its_year() -> None:
    dated = [ev(epoch_ns(2026, 1, 2), ts_source=TsSource.EXACT)]
    guessed = [ev(epoch_ns(2025, 12, 30), guessed=True)]
    notes: list[str] = []
    out = anchor_years([dated, guessed], ["d", "g"], notes=notes)
    assert out[1][0] is guessed[0]
    assert any(n.startswith("g:") and "as the dated logs" in n for n in notes)


def test_29_february_rules_out_a_common_year() -> None:
    guessed = [ev(epoch_ns(2028, 2, 29, 12), guessed=True)]
    near_common = [ev(epoch_ns(2027, 3, 1, 12), ts_source=TsSource.EXACT)]
    assert anchor_years([near_common, guessed])[1][0] is guessed[0]
    near_leap = [ev(epoch_ns(2024, 3, 1, 12), ts_source=TsSource.EXACT)]
    assert anchor_years([near_leap, guessed])[1][0].ts == epoch_ns(2024, 2, 29, 12)


def test_year_less_sources_do_not_anchor_each_other() -> None:
    a = [ev(epoch_ns(2026, 8, 16), guessed=True)]
    b = [ev(epoch_ns(2025, 8, 16), guessed=True)]
    out = anchor_years([a, b])
    assert out[0][0] is a[0] and out[1][0] is b[0]


def test_inferred_stamps_do_not_date_a_file() -> None:
    """An untimed line placed from a guessed neighbour is no evidence of the year."""
    a = [ev(epoch_ns(2024, 8, 16), ts_source=TsSource.INFERRED)]
    b = [ev(epoch_ns(2026, 8, 16), guessed=True)]
    assert anchor_years([a, b])[1][0] is b[0]


def test_timeline_places_boot_relative_stamps_after_the_years_moved() -> None:
    """A year-less syslog line holding the kernel stamp anchors a raw dmesg only once its year is right."""
    syslog = [Event(ts=epoch_ns(2026, 8, 16, 1, 45, 40), ts_source=TsSource.LOCAL, source="file:syslog",
                    kind="xid", message="NVRM: Xid 79", origin=Origin("syslog", 1), host="node1",
                    attrs={YEAR_INFERRED: True}, uptime_ns=100 * NS)]
    dated = [ev(epoch_ns(2024, 8, 16, 1, 40), host="node1", ts_source=TsSource.EXACT)]
    raw = [Event(ts=None, ts_source=TsSource.NONE, source="file:dmesg", kind="kernel", message="later",
                 origin=Origin("dmesg", 1), host="node1", uptime_ns=160 * NS)]
    tl = build_timeline([(dated, []), (syslog, []), (raw, [])], names=["iso", "syslog", "dmesg"])
    placed = next(e for e in tl.events if e.message == "later")
    assert placed.ts == epoch_ns(2024, 8, 16, 1, 46, 40)


# -- the clocks, shown: JSON timeline block and the terminal report ------------------------------------
def skewed_hosts(tmp_path: Path, skew_s: int = 3) -> list[str]:
    """Two hosts' rsyslog files of one job (a training service logging each step); nodeB runs skew_s ahead."""
    paths = []
    for host, skew in (("nodeA", 0), ("nodeB", skew_s)):
        lines = [f"2024-03-03T10:11:{10 + step * 2 + skew:02d}.{(step % 3) * 10:06d}+00:00 {host} trainer[12]: "
                 f"{{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 1e-05, 'epoch': 0.1, 'step': {step}}}\n"
                 for step in range(1, 8)]
        paths.append(write(tmp_path / f"{host}.log", "".join(lines), MTIME_2024))
    return paths


def test_json_timeline_shows_clock_offsets_and_notes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    train = write(tmp_path / "train.log", C10D_GLOG, MTIME_2026)
    dmesg = write(tmp_path / "dmesg.txt", DMESG_ISO_2024, MTIME_2024)
    main(["analyze", "--format", "json", *skewed_hosts(tmp_path), dmesg, train])
    timeline = json.loads(capsys.readouterr().out)["timeline"]
    assert {"events", "metrics", "kinds", "hosts", "start", "end"} <= set(timeline)  # the old keys stay
    assert timeline["clock_reference"] == "nodeA"
    b = timeline["clock_offsets"]["nodeB"]
    assert b["offset_s"] == pytest.approx(-3.0) and b["applied_s"] == pytest.approx(-3.0)
    assert b["pairs"] == 7 and 0 < b["uncertainty_s"] <= 0.5 and b["given"] is False
    assert any("train.log" in n and "put in 2024" in n for n in timeline["notes"])


def test_json_marks_a_user_given_offset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["analyze", "--format", "json", "--offset", "nodeB=-2.5", *skewed_hosts(tmp_path)])
    b = json.loads(capsys.readouterr().out)["timeline"]["clock_offsets"]["nodeB"]
    assert b == {"offset_s": -2.5, "uncertainty_s": 0.0, "pairs": 0, "applied_s": -2.5, "given": True, "by_kind": {}}


def test_terminal_report_shows_the_clocks_and_the_inferred_years(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    train = write(tmp_path / "train.log", C10D_GLOG, MTIME_2026)
    dmesg = write(tmp_path / "dmesg.txt", DMESG_ISO_2024, MTIME_2024)
    main(["analyze", *skewed_hosts(tmp_path), dmesg, train])
    lines = capsys.readouterr().out.splitlines()
    read = next(i for i, line in enumerate(lines) if line.startswith("Read 4 file(s)"))
    assert lines[read + 1] == ("Clocks against nodeA: nodeB -3.000 s ±0.500 s (7 shared moments of training step; "
                               "applied)")
    note = lines[read + 2]
    assert note.startswith("Time: ") and "train.log: 2 stamp(s) without a year: put in 2024" in note


def test_terminal_report_says_nothing_of_clocks_for_one_host(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    main(["analyze", write(tmp_path / "dmesg.txt", DMESG_ISO_2024, MTIME_2024)])
    out = capsys.readouterr().out
    assert "Clocks" not in out and "Time: " not in out
