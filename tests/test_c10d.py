"""c10d / glog records of every generation."""

from __future__ import annotations

from forensics.parsers.c10d import is_incomplete, parse_glog_record, work_attrs
from forensics.parsers.stream_text import Stamp


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
