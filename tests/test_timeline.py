"""forensics/timeline/merge.py: boot anchors, untimed events, clock offsets between hosts, overrides."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from forensics.parsers.common.base import ParseContext
from forensics.parsers.registry import detect

from forensics.analysis import Options, analyze
from forensics.clock import NS
from forensics.events import Event, MetricSample, Origin, TsSource
from forensics.ingest.textdoc import TextDocument
from forensics.timeline.merge import ClockOffset, build_timeline, estimate_offsets, place_boot_relative, sync_key

T0 = 1_750_000_000 * NS


def ev(ts: int | None, *, host: str | None = None, kind: str = "log", message: str = "m", line: int = 1,
       ts_source: TsSource | None = None, uptime_ns: int | None = None, **attrs: Any) -> Event:
    source = ts_source or (TsSource.EXACT if ts is not None else TsSource.NONE)
    return Event(ts=ts, ts_source=source, source="file:x", kind=kind, message=message, origin=Origin("x", line),
                 host=host, attrs=attrs, uptime_ns=uptime_ns)


def parse(text: str, path: str = "log", **ctx_args: Any) -> list[Event]:
    doc = TextDocument.from_bytes(text.encode(), path)
    parser, _ = detect(doc.head())
    ctx = ParseContext(path=path, source=f"file:{path}", **ctx_args)
    out = [r for r in parser.parse(doc, ctx) if isinstance(r, Event)]
    assert not ctx.warnings
    return out


# -- boot-relative placement ------------------------------------------------------------------------
def test_place_boot_relative_with_known_boot_time() -> None:
    events = [ev(None, uptime_ns=5 * NS), ev(T0)]
    placed = place_boot_relative(events, T0 - 100 * NS)
    assert placed[0].ts == T0 - 95 * NS and placed[0].ts_source is TsSource.BOOT_RELATIVE
    assert placed[1] is events[1]
    assert place_boot_relative(events, None) == events


DMESG = ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
         "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
         "               NVRM: fallen off the bus and is not responding to commands.\n"
         "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n")


def test_raw_dmesg_placed_from_a_journal_json_of_the_same_boot() -> None:
    boot = 1_700_000_000 * NS
    entry = {"__REALTIME_TIMESTAMP": str((boot + 1843_500_000_000) // 1000), "__MONOTONIC_TIMESTAMP": "1843500000",
             "_SOURCE_MONOTONIC_TIMESTAMP": "1843439662", "_TRANSPORT": "kernel", "_HOSTNAME": "node1",
             "MESSAGE": "NVRM: The NVIDIA probe routine failed for 1 device(s)."}
    journal = parse(json.dumps(entry) + "\n", "journal.json")
    raw = parse(DMESG, "dmesg.txt")
    assert all(e.ts is None for e in raw)
    tl = build_timeline([(raw, []), (journal, [])], names=["dmesg.txt", "journal.json"])
    fallen = next(e for e in tl.events if e.attrs.get("topic") == "fallen-off-bus")
    assert fallen.ts == boot + 1843_308_145_000 and fallen.ts_source is TsSource.BOOT_RELATIVE
    assert any("dmesg.txt" in n and "boot-relative" in n for n in tl.notes)


def test_raw_dmesg_placed_from_dmesg_ctime_of_the_same_records() -> None:
    ctime = ("[Sun Jun  1 10:30:43 2025] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
             "[Sun Jun  1 10:30:43 2025] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01\n")
    raw = parse(DMESG + "[ 1843.439669] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01\n")
    wall = parse(ctime, year=2025)
    tl = build_timeline([(raw, []), (wall, [])])
    probe = next(e for e in tl.events if "probe routine" in e.message and e.ts_source is TsSource.BOOT_RELATIVE)
    # the ctime line has 1 s resolution: the placement is within a second of it
    assert abs(probe.ts - wall[0].ts) < NS  # type: ignore[operator]


def test_syslog_with_kernel_stamps_anchors_a_raw_dmesg() -> None:
    syslog = ("Sep 19 16:18:02 bubz kernel: [68183.615790] pcieport 0000:00:03.1: AER: Correctable error message "
              "received from 0000:00:00.0\n")
    raw = parse("[68183.615790] pcieport 0000:00:03.1: AER: Correctable error message received from 0000:00:00.0\n"
                "[68200.000000] NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, GPU has fallen off the bus.\n")
    sys_events = parse(syslog, year=2025)
    tl = build_timeline([(raw, []), (sys_events, [])])
    xid = next(e for e in tl.events if e.kind == "xid")
    assert xid.ts == sys_events[0].ts + (68200 * NS - 68183_615_790_000)  # type: ignore[operator]


def test_anchor_of_the_latest_boot_is_used_when_nothing_matches() -> None:
    a1 = ev(T0, kind="kernel", message="old boot", uptime_ns=10 * NS)
    a2 = ev(T0 + 86400 * NS, kind="kernel", message="new boot", uptime_ns=10 * NS)
    raw = [ev(None, kind="xid", message="x", uptime_ns=20 * NS)]
    tl = build_timeline([([a1, a2], []), (raw, [])])
    xid = next(e for e in tl.events if e.kind == "xid")
    assert xid.ts == T0 + 86400 * NS + 10 * NS
    assert any("latest of several boots" in n for n in tl.notes)


def test_no_anchor_leaves_boot_relative_events_unplaced() -> None:
    raw = parse(DMESG)
    tl = build_timeline([(raw, [])])
    assert all(e.ts is None and e.uptime_ns is not None for e in tl.events)


def test_anchor_of_another_host_is_not_used() -> None:
    anchor = ev(T0, host="node1", kind="kernel", message="a", uptime_ns=NS)
    raw = [ev(None, host="node2", kind="xid", message="x", uptime_ns=2 * NS),
           ev(None, host="node2", kind="kernel", message="y", uptime_ns=3 * NS)]
    tl = build_timeline([([anchor], []), (raw, [])])
    assert all(e.ts is None for e in tl.events if e.host == "node2")


# -- untimed events --------------------------------------------------------------------------------
def test_untimed_events_take_their_neighbours_time_within_a_source() -> None:
    events = [ev(None, line=1), ev(T0, line=2), ev(None, line=3), ev(T0 + NS, line=4)]
    tl = build_timeline([(events, [])])
    assert [e.ts for e in tl.events] == [T0, T0, T0, T0 + NS]
    assert [e.ts_source for e in tl.events] == [TsSource.INFERRED, TsSource.EXACT, TsSource.INFERRED,
                                                 TsSource.EXACT]


def test_unplaced_events_sort_after_placed_ones_in_file_order() -> None:
    tl = build_timeline([([ev(None, line=1, message="a"), ev(None, line=2, message="b")], []),
                         ([ev(T0, message="c")], [])])
    assert [e.message for e in tl.events] == ["c", "a", "b"]


# -- clock offsets between hosts -----------------------------------------------------------------------
def two_hosts(skew_s: float, steps: int = 20, jitter_ns: int = 20_000_000) -> list[tuple[list[Event], list]]:
    """node1 and node2 log the same NCCL init and training steps; node2's clock runs skew_s ahead."""
    skew = round(skew_s * NS)
    per_source: list[tuple[list[Event], list]] = []
    for host, shift, jitter in (("node1", 0, 0), ("node2", skew, jitter_ns)):
        events = [ev(T0 + shift + jitter, host=host, kind="nccl",
                     message=f"{host}:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 16 cudaDev 0 busId 1b000 - "
                             "Init COMPLETE",
                     nranks=16, rank=0)]
        for step in range(steps):
            wobble = (step % 3 - 1) * jitter  # the other host logs each step a little earlier or later
            events.append(ev(T0 + (step + 1) * 2 * NS + shift + wobble, host=host, kind="progress",
                             message=f"step {step}", step=step, loss=2.0))
        events.append(ev(T0 + 100 * NS + shift, host=host, kind="xid", message="only on this host"))
        per_source.append((events, []))
    return per_source


def test_offset_between_two_hosts_is_estimated_and_applied() -> None:
    tl = build_timeline(two_hosts(3.2))
    off = tl.clock_offsets["node2"]
    assert isinstance(off, ClockOffset)
    assert off.offset_s == pytest.approx(-3.2, abs=0.1)
    assert off.n_pairs == 21 and 0 < off.uncertainty_s < 0.1
    assert tl.clock_reference == "node1" and tl.clock_offsets["node1"] == (0.0, 0.0, 0)
    assert tl.offsets_applied["node2"] == pytest.approx(-3.2, abs=0.1)
    step5 = [e.ts for e in tl.events if e.attrs.get("step") == 5]
    assert abs(step5[0] - step5[1]) < 0.1 * NS  # type: ignore[operator]
    assert tl.clock_given == [] and not any("clock" in n for n in tl.notes)  # shown from the fields


def test_user_offset_overrides_the_estimate() -> None:
    tl = build_timeline(two_hosts(3.2), offsets={"node2": -3.0})
    assert tl.clock_offsets["node2"] == ClockOffset(-3.0, 0.0, 0)
    assert tl.clock_given == ["node2"] and tl.offsets_applied["node2"] == -3.0
    xid2 = next(e for e in tl.events if e.kind == "xid" and e.host == "node2")
    assert xid2.ts == T0 + 100 * NS + round(3.2 * NS) - 3 * NS


def test_user_offset_on_the_reference_host_moves_the_aligned_hosts_with_it() -> None:
    tl = build_timeline(two_hosts(3.2), offsets={"node1": 10.0})
    step0 = [e for e in tl.events if e.attrs.get("step") == 0]
    assert {e.host for e in step0} == {"node1", "node2"}
    assert abs(step0[0].ts - step0[1].ts) < 0.1 * NS  # type: ignore[operator]
    assert step0[0].ts == pytest.approx(T0 + 2 * NS + 10 * NS, abs=0.1 * NS)


def test_synchronized_hosts_are_not_shifted() -> None:
    tl = build_timeline(two_hosts(0.0, jitter_ns=0))
    assert tl.offsets_applied == {}
    assert tl.clock_offsets["node2"].offset_s == 0.0


def test_a_single_shared_event_is_reported_but_not_applied() -> None:
    a = [ev(T0, host="a", kind="progress", message="s", step=1)]
    b = [ev(T0 + 5 * NS, host="b", kind="progress", message="s", step=1)]
    tl = build_timeline([(a, []), (b, [])])
    assert tl.clock_offsets["b"] == ClockOffset(-5.0, 1.0, 1)
    assert "b" not in tl.offsets_applied


def test_disagreeing_pairs_are_not_taken_for_a_clock_skew() -> None:
    """Half the shared moments say 0 s, half say 10 s: report it, shift nothing."""
    a = [ev(T0 + i * NS, host="a", kind="progress", message="s", step=i) for i in range(10)]
    b = [ev(T0 + i * NS + (10 * NS if i % 2 else 0), host="b", kind="progress", message="s", step=i)
         for i in range(10)]
    tl = build_timeline([(a, []), (b, [])])
    assert tl.clock_offsets["b"].n_pairs == 10
    assert tl.offsets_applied == {}


def test_hosts_chain_through_a_third() -> None:
    """c shares nothing with the reference a, only with b."""
    a = [ev(T0 + i * NS, host="a", kind="progress", message="s", step=i) for i in range(5)]
    a += [ev(T0 + 50 * NS, host="a", kind="progress", message="s", step=50)]
    b = [ev(T0 + i * NS + 2 * NS, host="b", kind="progress", message="s", step=i) for i in range(3)]
    b += [ev(T0 + (100 + i) * NS + 2 * NS, host="b", kind="c10d", message="t", seq=i, op_type="ALLREDUCE", pg="0")
          for i in range(3)]
    c = [ev(T0 + (100 + i) * NS + 7 * NS, host="c", kind="c10d", message="t", seq=i, op_type="ALLREDUCE", pg="0")
         for i in range(3)]
    ref, offsets = estimate_offsets([*a, *b, *c])
    assert ref == "a"
    assert offsets["b"].offset_s == pytest.approx(-2.0)
    assert offsets["c"].offset_s == pytest.approx(-7.0)


def test_metrics_move_with_their_host() -> None:
    per = two_hosts(3.2)
    sample = MetricSample(ts=T0 + 50 * NS, ts_source=TsSource.EXACT, gpu="0", values={"power_w": 300.0},
                          origin=Origin("nvml", 1), host="node2")
    per[1] = (per[1][0], [sample])
    tl = build_timeline(per)
    assert tl.metrics[0].ts == pytest.approx(T0 + 50 * NS - 3.2 * NS, abs=0.1 * NS)


def test_sync_keys() -> None:
    key = sync_key(ev(T0, kind="progress", step=7))
    assert key is not None and key[0] == "step" and key[-1] == 7
    # one loop's step on every host is one moment; a pipeline's other loop counting its own steps is not
    a = sync_key(ev(T0, kind="progress", message="drafter 5: step 40 loss=2.1", step=40))
    b = sync_key(ev(T0, kind="progress", message="drafter 6: step 40 loss=2.0", step=40))
    c = sync_key(ev(T0, kind="progress", message="monitor: step=40 throughput=21.5K tok/s", step=40))
    assert a == b != c
    assert sync_key(ev(T0, kind="progress", loss=1.0)) is None
    assert sync_key(ev(T0, kind="nccl", message="comm 0x1 rank 3 nranks 8 - Init COMPLETE", nranks=8)) == (
        "nccl-init", 8)
    assert sync_key(ev(T0, kind="c10d", seq=12, op_type="ALLREDUCE", pg="0")) == ("c10d", "0", 12, "allreduce")
    a = sync_key(ev(T0, host="n1", kind="torchrun", message="[n1] Rendezvous complete for workers. Result: round 2"))
    b = sync_key(ev(T0, host="n22", kind="torchrun", message="[n22] Rendezvous complete for workers. Result: round 2"))
    assert a == b is not None
    assert sync_key(ev(T0, kind="xid", message="Rendezvous")) is None


def test_analyze_applies_offset_option(tmp_path: Path) -> None:
    a = tmp_path / "a.log"
    b = tmp_path / "b.log"
    a.write_text("2024-03-03T10:11:12.000000+00:00 nodeA kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, "
                 "GPU has fallen off the bus.\n")
    b.write_text("2024-03-03T10:11:12.000000+00:00 nodeB kernel: NVRM: Xid (PCI:0000:3c:00): 79, pid=2, name=y, "
                 "GPU has fallen off the bus.\n")
    plain = analyze([str(a), str(b)])
    shifted = analyze([str(a), str(b)], Options(offsets={"nodeB": 3.5}))
    ts = {e.host: e.ts for e in plain.timeline.events}
    ts2 = {e.host: e.ts for e in shifted.timeline.events}
    assert ts["nodeA"] == ts["nodeB"]
    assert ts2["nodeB"] - ts2["nodeA"] == 3_500_000_000  # type: ignore[operator]
    assert shifted.timeline.clock_offsets["nodeB"] == (3.5, 0.0, 0)
