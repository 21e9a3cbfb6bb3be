"""Pickled flight-recorder dumps are read as plain data (never unpickled) and give the same
events as JSON dumps; the recorded H200 bundles name the rank that stopped and the collectives
the ranks disagreed on."""

from __future__ import annotations

import collections
import datetime
import json
import math
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
from forensics.parsers.flight_recorder import pickle_to_json
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.analysis import analyze, to_json_dict
from forensics.ingest.safe_pickle import PickleError, UnsafePickle, is_pickle, load_plain, plain_nodes

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "recorded"
STALL = SAMPLES / "silent-stall-2gpu" / "bundle"
DESYNC = SAMPLES / "collective-desync-2gpu" / "bundle"
T = 1_795_973_863_905_553_874


# -- the reader -------------------------------------------------------------------------------------------
def _plain(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                                st.dictionaries(st.one_of(st.text(max_size=6), st.integers()), inner, max_size=4)),
        max_leaves=30,
    )


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12))
PLAIN = _plain(SCALARS)
PLAIN_WITH_BYTES = _plain(st.one_of(SCALARS, st.binary(max_size=12)))


@settings(max_examples=100, deadline=None)
@given(PLAIN, st.integers(0, 5))
@pytest.mark.slow
def test_plain_data_reads_back_equal_in_every_protocol(value: Any, protocol: int) -> None:
    assert load_plain(pickle.dumps(value, protocol=protocol)) == value


@settings(max_examples=50, deadline=None)
@given(PLAIN_WITH_BYTES, st.integers(3, 5))
def test_bytes_read_back_from_protocol_3_on(value: Any, protocol: int) -> None:
    # Protocols 0-2 have no bytes opcode: Python writes bytes there as a call (refused, see below).
    assert load_plain(pickle.dumps(value, protocol=protocol)) == value


def test_shared_references_and_sets() -> None:
    shared = ["x"]
    got = load_plain(pickle.dumps({"a": shared, "b": shared, "s": {3}, "f": frozenset({4})}, protocol=4))
    assert got == {"a": ["x"], "b": ["x"], "s": [3], "f": [4]}
    assert got["a"] is got["b"]


def test_is_pickle_by_content() -> None:
    assert is_pickle(pickle.dumps({"a": 1}, protocol=2)) and is_pickle(pickle.dumps([], protocol=5))
    assert not is_pickle(b'{"version": "2.5"}') and not is_pickle(b"\x80") and not is_pickle(b"\x80\x09xx")


class _Boom:
    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.target,))


class _Plain:
    def __init__(self) -> None:
        self.x = 1


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_code_is_refused_and_never_run(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(UnsafePickle, match="not unpickled") as err:
        load_plain(pickle.dumps({"entries": [_Boom(str(marker))]}, protocol=protocol))
    assert "GLOBAL" in str(err.value) or "INST" in str(err.value)
    assert not marker.exists()


@pytest.mark.parametrize("obj", [collections.OrderedDict(a=1), datetime.date(2025, 1, 1), _Plain(), math.pi.hex])
def test_objects_of_any_class_are_refused(obj: object) -> None:
    with pytest.raises(UnsafePickle):
        load_plain(pickle.dumps(obj, protocol=2))


def test_damaged_pickles_are_errors_not_crashes() -> None:
    whole = pickle.dumps({"version": "2.10", "entries": [1, 2, 3]}, protocol=2)
    for cut in (3, len(whole) // 2, len(whole) - 1):
        with pytest.raises(PickleError):
            load_plain(whole[:cut])
    for bad in (b"\x80\x02\xff.", b"\x80\x02e.", b"\x80\x02h\x05.", b"\x80\x02]]s.", b"\x80\x02N\x85}]s."):
        with pytest.raises(PickleError):
            load_plain(bad)


def test_self_reference_and_expansion_are_bounded() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(PickleError, match="contains itself"):
        plain_nodes(load_plain(pickle.dumps(loop, protocol=2)))
    layer: list[Any] = ["x"]
    for _ in range(40):  # 2**40 values once every reference is followed
        layer = [layer, layer]
    bomb = pickle.dumps(layer, protocol=2)
    assert len(bomb) < 2000
    with pytest.raises(PickleError, match="expands"):
        plain_nodes(load_plain(bomb))
    raw, notes = pickle_to_json(bomb)
    assert raw == b"" and "expands" in notes[0]


# -- the dump as JSON text --------------------------------------------------------------------------------
def _entry(seq: int, op: str, state: str, shape: list[int]) -> dict[str, Any]:
    return {"frames": [{"name": "all_reduce", "filename": "distributed_c10d.py", "line": 3068}],
            "record_id": seq - 1, "pg_id": 0, "process_group": ("0", "default_pg"), "thread_name": "python",
            "thread_id": "1399", "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
            "profiling_name": f"nccl:{op}", "time_created_ns": T + seq * 10**6, "input_sizes": [shape],
            "input_dtypes": ["Float"], "output_sizes": [shape], "output_dtypes": ["Float"], "state": state,
            "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
            "retired": state == "completed", "timeout_ms": 60000, "is_p2p": False}


def _dump(last_enqueued: int, entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
            "comm_lib_version": "2.28.9",
            "pg_status": {"0": {"last_enqueued_collective": last_enqueued, "last_started_collective": -1,
                                "last_completed_collective": 160}},
            "entries": entries}


def test_pickle_and_json_dumps_give_the_same_events(tmp_path: Path) -> None:
    dumps = {0: _dump(162, [_entry(160, "all_reduce", "completed", [4096]),
                            _entry(161, "all_reduce", "scheduled", [4096, 4096]),
                            _entry(162, "all_reduce", "scheduled", [4096])]),
             1: _dump(160, [_entry(160, "all_reduce", "completed", [4096])])}
    for kind in ("json", "pickle"):
        (tmp_path / kind).mkdir()
        for rank, data in dumps.items():
            path = tmp_path / kind / f"flight-recorder-rank-{rank}"
            if kind == "json":
                path.write_text(json.dumps(data))
            else:
                path.write_bytes(pickle.dumps(data, protocol=2))
    got = {}
    for kind in ("json", "pickle"):
        a = analyze([str(tmp_path / kind)])
        assert [s.kind for s in a.sources] == ["flight-recorder", "flight-recorder"], a.warnings
        got[kind] = [(e.kind, e.rank, e.ts, e.message, e.attrs) for e in a.timeline.events]
    assert got["pickle"] == got["json"]
    derived = [m for k, _, _, m, _ in got["pickle"] if k == "derived"]
    assert derived == ["[rank-behind] rank 1 fell behind: rank 0 waits in all_reduce SeqNum 161 (16,777,216 "
                       "elements) and it never enqueued SeqNum 161"]


def test_evidence_points_at_a_readable_line(tmp_path: Path) -> None:
    path = tmp_path / "flight-recorder-rank-0"
    path.write_bytes(pickle.dumps(_dump(161, [_entry(161, "broadcast", "scheduled", [7])]), protocol=2))
    a = analyze([str(path)])
    [pending] = [e for e in a.timeline.events if e.kind == "c10d" and e.attrs.get("seq") == 161]
    doc = a.document(str(path))
    assert doc is not None
    line = doc.line_at(doc.line_starts()[pending.origin.line - 1]).text
    assert line.startswith('{"record_id": 160, ') and '"profiling_name": "nccl:broadcast"' in line
    assert line.endswith('"frames": [{"name": "all_reduce", "filename": "distributed_c10d.py", "line": 3068}]}')


def test_other_pickles_are_named_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "weights.pkl").write_bytes(pickle.dumps({"layer": [1.0, 2.0]}, protocol=4))
    (tmp_path / "evil.pkl").write_bytes(pickle.dumps({"entries": [_Boom(str(tmp_path / "ran"))]}, protocol=2))
    a = analyze([str(tmp_path)])
    assert [(Path(s.path).name, s.kind) for s in a.sources] == [("evil.pkl", "pickle"), ("weights.pkl", "pickle")]
    evil, weights = (" ".join(s.warnings) for s in a.sources)
    assert "STACK_GLOBAL" in evil or "GLOBAL" in evil
    assert "not a flight-recorder dump" in weights
    assert not (tmp_path / "ran").exists()


# -- the recorded H200 bundles ----------------------------------------------------------------------------
@pytest.mark.slow
def test_recorded_dumps_are_sources_of_kind_flight_recorder() -> None:
    for bundle in (STALL, DESYNC):
        sources = {Path(s["path"]).name: s for s in to_json_dict(analyze([str(bundle)]))["sources"]}
        for rank in (0, 1):
            s = sources[f"flight-recorder-rank-{rank}"]
            assert s["kind"] == "flight-recorder" and s["events"] >= 1 and s["warnings"] == []
            assert s["record_kinds"] == ["c10d"]


def test_recorded_stall_dump_fields() -> None:
    data = load_plain((STALL / "torch" / "flight-recorder-rank-0").read_bytes())
    assert data["version"] == "2.10" and data["pg_config"]["0"]["ranks"] == "[0, 1]"
    assert data["pg_status"]["0"] == {"last_enqueued_collective": 168, "last_started_collective": -1,
                                      "last_completed_collective": 160}
    assert len(data["entries"]) == 168 and data["entries"][-1]["process_group"] == ("0", "default_pg")


@pytest.mark.slow
def test_stall_names_rank_1_as_the_rank_that_stopped() -> None:
    v = analyze([str(STALL)]).verdict
    assert v.root_cause is not None and v.root_cause.ranks == [1]
    assert "Rank 1 fell behind: rank 0 waits in all_reduce SeqNum 161" in v.summary


def test_desync_names_both_collectives() -> None:
    v = analyze([str(DESYNC)]).verdict
    assert v.root_cause_id == "nccl-desync"
    assert "rank 0 in all_reduce SeqNum 11 (4,194,304 elements); rank 1 in broadcast SeqNum 11 (7 elements)" \
        in v.summary


def test_value_counts_follow_every_reference() -> None:
    leaf = [1, 2]
    assert plain_nodes({"a": leaf, "b": leaf}) == 1 + 2 * (1 + 3)  # dict + 2 keys + 2 × (list + 2 ints)
    assert plain_nodes(7) == 1
    deep: list[Any] = []
    for _ in range(250):
        deep = [deep]
    with pytest.raises(PickleError, match="deeper"):
        plain_nodes(deep)
