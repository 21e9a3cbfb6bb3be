"""Flight-recorder JSON dumps (one per rank) → c10d events → cross-rank verdicts.
Pickle dumps are never unpickled."""

import json
import os
import pickle
from pathlib import Path
from typing import Any

from forensics.parsers.registry import detect

from forensics.analysis import analyze
from forensics.ingest.textdoc import TextDocument

T = 1_724_779_239_936_775_119


def _entry(seq: int, op: str, state: str, shape: list[int], rid: int) -> dict[str, Any]:
    return {"record_id": rid, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": seq,
            "p2p_seq_id": 0, "op_id": seq, "profiling_name": f"nccl:{op}", "time_created_ns": T + seq * 10**9,
            "input_sizes": [shape], "input_dtypes": ["Float"], "output_sizes": [shape], "output_dtypes": ["Float"],
            "state": state, "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
            "retired": state == "completed", "timeout_ms": 600000, "is_p2p": False}


def _dump(tmp: Path, rank: int, entries: list[dict[str, Any]], last_enqueued: int, last_completed: int,
          world: int = 4) -> str:
    data = {"version": "2.5",
            "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}},
            "pg_status": {"0": {"last_enqueued_collective": last_enqueued, "last_started_collective": last_enqueued,
                                "last_completed_collective": last_completed}},
            "entries": entries}
    path = tmp / f"nccl_trace_rank_{rank}"
    path.write_text(json.dumps(data, indent=2))
    return str(path)


def _derived(paths: list[str]) -> list[str]:
    a = analyze(paths)
    return [e.message for e in a.timeline.events if e.kind == "derived"]


def test_dump_is_detected_and_read(tmp_path: Path) -> None:
    path = _dump(tmp_path, 2, [_entry(6, "all_reduce", "completed", [3, 4], 5),
                               _entry(7, "all_reduce", "scheduled", [3, 4], 6)], 7, 6)
    doc = TextDocument.from_bytes(Path(path).read_bytes(), path)
    parser, confidence = detect(doc.head())
    assert parser.name == "flight-recorder" and confidence > 0.9
    a = analyze([path])
    events = [e for e in a.timeline.events if e.kind == "c10d"]
    assert [e.message for e in events] == [
        "[flight recorder] rank 2 PG 0: last enqueued 7, last started 7, last completed 6",
        "[flight recorder] rank 2 PG 0: all_reduce SeqNum 7 (12 elements) scheduled, not completed",
    ]
    pending = events[1]
    assert pending.rank == 2 and pending.attrs["seq"] == 7 and pending.attrs["last_completed"] == 6
    line = 1 + Path(path).read_text().split('"record_id": 6,')[0].count("\n")
    assert pending.ts == T + 7 * 10**9 and pending.origin.line == line


def test_rank_that_never_enqueued_is_named(tmp_path: Path) -> None:
    paths = [_dump(tmp_path, r, [_entry(7, "all_reduce", "started", [1024], 6)], 7, 6) for r in (0, 1, 2)]
    paths.append(_dump(tmp_path, 3, [_entry(6, "all_reduce", "completed", [1024], 5)], 6, 6))
    assert _derived(paths) == ["[rank-behind] rank 3 fell behind: ranks 0–2 wait in all_reduce SeqNum 7 "
                               "(1,024 elements) and it never enqueued SeqNum 7"]


def test_ranks_in_different_collectives_are_a_desync(tmp_path: Path) -> None:
    paths = [_dump(tmp_path, 0, [_entry(7, "all_reduce", "started", [1024], 6)], 7, 6, world=2),
             _dump(tmp_path, 1, [_entry(7, "broadcast", "started", [16], 6)], 7, 6, world=2)]
    assert _derived(paths) == ["[nccl-desync] ranks wait in different collectives: rank 0 in all_reduce SeqNum 7 "
                               "(1,024 elements); rank 1 in broadcast SeqNum 7 (16 elements)"]
    assert analyze(paths).verdict.root_cause_id == "nccl-desync"


class _Boom:
    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.target,))


def test_pickle_dumps_are_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    dump = tmp_path / "nccl_trace_rank_0"
    dump.write_bytes(pickle.dumps({"version": "2.5", "entries": [_Boom(str(marker))]}))
    analyze([str(dump)])
    assert not marker.exists()
