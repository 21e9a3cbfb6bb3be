"""c10d / glog records of every generation."""

from __future__ import annotations

from pathlib import Path

from forensics.parsers.common.stream_text import Stamp
from forensics.parsers.producers.c10d import is_incomplete, parse_glog_record, work_attrs

from forensics.analysis import analyze

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "recorded"


def test_three_generations() -> None:
    new = parse_glog_record("[E321 02:07:08.414640780 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught collective "
                            "operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, "
                            "NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.")
    assert new is not None and new.c10d and new.level == "ERROR"
    assert new.stamp == Stamp(None, 3, 21, 2, 7, 8, 414640780)
    assert new.attrs | {} == {"rank": 4, "seq": 1580, "op_type": "ALLREDUCE", "numel_in": 466119168,
                              "numel_out": 466119168, "timeout_ms": 600000, "ran_for_ms": 600060, "timeout": True,
                              "exception": False, "desync": False}
    mid = parse_glog_record("[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: "
                            "WorkNCCL(SeqNum=2, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800403 milliseconds")
    assert mid is not None and mid.stamp is None and mid.attrs["op_type"] == "BROADCAST"
    old = parse_glog_record("[E ProcessGroupNCCL.cpp:737] [Rank 0] Watchdog caught collective operation timeout: "
                            "WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1805337 milliseconds")
    assert old is not None and "seq" not in old.attrs and old.attrs["timeout_ms"] == 1800000


def test_pg_tags_and_work_numbers() -> None:
    a = work_attrs("[PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception")
    assert (a["pg"], a["pg_guid"], a["pg_name"], a["rank"], a["exception"]) == ("0", "0", "default_pg", 1, True)
    a = work_attrs("[PG 1 Rank 1] Timeout at NCCL work: 158046, last enqueued NCCL work: 158046, last completed "
                   "NCCL work: 158045.")
    assert (a["seq"], a["last_enqueued"], a["last_completed"], a["timeout"]) == (158046, 158046, 158045, True)
    a = work_attrs("Detected mismatch between collectives on ranks. Rank 0 is running collective: X")
    assert a["desync"] is True


def test_other_glog_files_and_non_records() -> None:
    rec = parse_glog_record("[W NNPACK.cpp:64] Could not initialize NNPACK! Reason: Unsupported hardware.")
    assert rec is not None and not rec.c10d and rec.level == "WARNING"
    assert parse_glog_record("[2024-01-01 00:00:00] not glog") is None
    assert parse_glog_record("[E] nothing") is None


def test_incomplete_record() -> None:
    assert is_incomplete("WorkNCCL(SeqNum=1, OpTy")
    assert not is_incomplete("WorkNCCL(SeqNum=1, Timeout(ms)=600000) ran for")


def test_last_enqueued_in_every_wording() -> None:
    # Real: samples/recorded/silent-stall-2gpu/bundle/stderr.log lines 8 and 19 (PyTorch 2.9, heartbeat monitor).
    a = work_attrs("[PG ID 0 PG GUID 0(default_pg) Rank 1] Received a dump signal due to a collective timeout from  "
                   "rank 0 and we will try our best to dump the debug info. Last enqueued NCCL work: 160, last "
                   "completed NCCL work: 160.This is most likely caused by incorrect usages of collectives")
    assert (a["rank"], a["last_enqueued"], a["last_completed"]) == (1, 160, 160)
    a = work_attrs("[PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by watchdog at work sequence id: 161 "
                   "PG status: last enqueued work: 168, last completed work: 160")
    assert (a["seq"], a["last_enqueued"], a["last_completed"]) == (161, 168, 160)
    # catalog-framework §1.4, the ~2.4 wording.
    a = work_attrs("[PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: 1580, last "
                   "enqueued NCCL work: 1582, last completed NCCL work: 1579.")
    assert (a["seq"], a["last_enqueued"], a["last_completed"]) == (1580, 1582, 1579)
    # Nothing ever enqueued (a frozen process, not a hung collective).
    a = work_attrs("[PG ID 0 PG GUID 0(default_pg) Rank 3] Received a dump signal due to a collective timeout from "
                   "this local rank and we will try our best to dump the debug info. Last enqueued NCCL work: -1, "
                   "last completed NCCL work: -1.")
    assert (a["last_enqueued"], a["last_completed"]) == (-1, -1)


def test_watchdog_text_alone_names_the_rank_behind(tmp_path: Path) -> None:
    """The stall sample's stderr without its flight-recorder dumps: rank 1's dump-signal line says it enqueued
    only up to 160 while rank 0 waits in SeqNum 161, so rank 1 is the one behind."""
    log = tmp_path / "stderr.log"
    log.write_bytes((SAMPLES / "silent-stall-2gpu" / "bundle" / "stderr.log").read_bytes())
    analysis = analyze([str(log)])
    behind = [e for e in analysis.timeline.events if e.kind == "derived" and e.attrs.get("detector") == "rank-behind"]
    assert [(e.attrs["behind"], e.attrs["seq"]) for e in behind] == [([1], 161)]
    root = analysis.verdict.root_cause
    assert root is not None and root.ranks == [1], analysis.verdict.summary
    assert "Rank 1 fell behind" in analysis.verdict.summary
