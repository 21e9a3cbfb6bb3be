"""Clock offsets across hosts (forensics/timeline/clocksync.py): the kinds of shared moment, their evidence,
and the cross-host verdict once the clocks are aligned.

Real lines (sources next to them):
- NCCL ``ncclCommSplit … commId … Init COMPLETE``: https://github.com/sgl-project/sglang/issues/3836
- watchdog timeout + ``detected by watchdog at work`` (SeqNum 808 on ranks 0–2):
  https://github.com/XPixelGroup/BasicSR/issues/737
- watchdog timeout prefixed by milabench's ``<bench>.<node> [stderr]``, SeqNum 2070 on several ranks
  of node cn-d004: https://github.com/mila-iqia/milabench/pull/269
- recorded bundle ``samples/recorded/collective-desync-2gpu`` (2 × H200), split into two hosts by
  rank with one clock shifted (tests/multihost_fixture.py).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from forensics.analysis import Options, analyze, to_json_dict
from forensics.events import Event, Origin, TsSource
from forensics.text_report import render_text
from forensics.timeline.clocksync import ClockOffset, describe_offset, estimate, sync_key
from tests.multihost_fixture import split_bundle

ROOT = Path(__file__).resolve().parent.parent
DESYNC = ROOT / "samples" / "recorded" / "collective-desync-2gpu" / "bundle"
NS = 1_000_000_000
T0 = 1_750_000_000 * NS


def ev(ts: int, host: str, kind: str, message: str, **attrs: object) -> Event:
    return Event(ts=ts, ts_source=TsSource.EXACT, source="file:x", kind=kind, message=message,
                 origin=Origin("x", 1), host=host, attrs=dict(attrs))


# -- the kinds of shared moment ----------------------------------------------------------------------
def test_nccl_init_is_keyed_by_the_communicator_id_when_the_line_prints_one() -> None:
    # sglang#3836, as printed by rank 2 of a 16-rank split communicator
    line = ("ncclCommSplit comm 0x5601dc4ed8b0 rank 2 nranks 16 cudaDev 2 nvmlDev 2 busId 41000 parent "
            "0x5601b34852c0 color 1197013201 key 2 commId 0x44d8628a425864f9 - Init COMPLETE")
    assert sync_key(ev(T0, "n1", "nccl", line, nranks=16)) == ("nccl-init", "0x44d8628a425864f9")
    other = line.replace("0x44d8628a425864f9", "0x1111111111111111")
    assert sync_key(ev(T0, "n1", "nccl", other, nranks=16)) != sync_key(ev(T0, "n1", "nccl", line, nranks=16))
    assert sync_key(ev(T0, "n1", "nccl", "comm 0x1 rank 3 nranks 8 - Init COMPLETE", nranks=8)) == ("nccl-init", 8)


def test_watchdog_timeouts_of_one_collective_share_a_key_whatever_the_op_type() -> None:
    # BasicSR#737 (ranks 0 and 1 of SeqNum 808) and a desynchronised rank running another op
    a = ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, "
         "NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.")
    b = a.replace("Rank 1", "Rank 0").replace("ALLREDUCE", "BROADCAST")
    ka = sync_key(ev(T0, "n1", "c10d", a, seq=808, op_type="ALLREDUCE"))
    kb = sync_key(ev(T0, "n2", "c10d", b, seq=808, op_type="BROADCAST"))
    assert ka == kb == ("watchdog", None, 808)
    detected = ("[PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout) detected by "
                "watchdog at work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807.")
    assert sync_key(ev(T0, "n1", "c10d", detected, seq=808, pg="0")) == ("watchdog", "0", 808)
    dying = "[PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: " + a
    assert sync_key(ev(T0, "n1", "c10d", dying, seq=808, pg="0")) is None  # printed when the process dies


def test_launcher_restarts_rendezvous_and_slurm_steps_are_moments() -> None:
    restart = "[default] Worker group FAILED. 3/3 attempts left; will restart worker group"
    assert sync_key(ev(T0, "n1", "warning", restart)) == sync_key(ev(T0, "n2", "warning", restart))
    assert sync_key(ev(T0, "n1", "warning", restart))[0] == "restart"  # type: ignore[index]
    assert sync_key(ev(T0, "n1", "log", "[default] Starting worker group"))[0] == "restart"  # type: ignore[index]
    rdzv = sync_key(ev(T0, "n1", "log", "[default] Rendezvous complete for workers. Result:"))
    assert rdzv is not None and rdzv[0] == "rendezvous"
    assert sync_key(ev(T0, "n1", "log", "RendezvousTimeoutError: rendezvous timed out")) is None
    step = sync_key(ev(T0, "n1", "log", "launch task StepId=4121.0 request from UID:1000 GID:1000"))
    assert step == ("slurm-step", "4121.0")
    assert sync_key(ev(T0, "n1", "xid", "Rendezvous")) is None


def test_each_kind_gives_its_own_offset_and_disagreeing_kinds_widen_the_uncertainty() -> None:
    events = []
    for host, skew in (("a", 0), ("b", 30 * NS)):
        for step in range(10):
            wobble = (step % 2) * 1_000_000 if host == "b" else 0  # b logs every other step 1 ms later
            events.append(ev(T0 + step * NS + skew + wobble, host, "progress", f"step {step}", step=step))
        # b's watchdog fires 400 ms later than its clock error alone explains
        events.append(ev(T0 + 60 * NS + skew + (400_000_000 if host == "b" else 0), host, "c10d",
                         "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, …",
                         seq=5, op_type="ALLREDUCE"))
    est = estimate(events)
    assert est.reference == "a"
    kinds = {k.kind: k for k in est.by_kind["b"]}
    assert kinds["step"].offset_s == pytest.approx(-30.0005) and kinds["step"].n_pairs == 10
    assert kinds["step"].uncertainty_s <= 0.001
    assert kinds["watchdog"].offset_s == pytest.approx(-30.4) and kinds["watchdog"].n_pairs == 1
    off = est.offsets["b"]
    assert off.offset_s == pytest.approx(-30.001) and off.n_pairs == 11
    assert off.uncertainty_s == pytest.approx(0.2, abs=0.001)  # half the spread of the kinds' medians
    text = describe_offset(off, est.by_kind["b"], applied=True)
    assert text.startswith("-30.001 s ±0.200 s (11 shared moments: ")
    assert "1 watchdog timeout -30.400 s" in text and "10 training step -30.000 s ±0.001 s" in text
    assert text.endswith("; applied)")
    assert describe_offset(ClockOffset(2.5, 0.0, 0), given=True) == "+2.500 s (given)"


# -- a recorded job, split into two hosts with one clock shifted -------------------------------------------
@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("nodes")
    return split_bundle(DESYNC, root, {"nodeA": ({0}, 0.0), "nodeB": ({1}, 137.25)})


def test_fixture_moves_the_shifted_hosts_manifest_text_and_receipts_consistently(two_nodes: list[Path]) -> None:
    a, b = (json.loads((p / "manifest.json").read_text()) for p in two_nodes)
    assert (a["host"], b["host"]) == ("nodeA", "nodeB")
    assert b["start_ns"] - a["start_ns"] == 137_250_000_000 == b["boot_time_ns"] - a["boot_time_ns"]
    assert "[rank1]" not in (two_nodes[0] / "stderr.log").read_text()
    assert "[rank0]" not in (two_nodes[1] / "stderr.log").read_text()
    assert "[rank1]:[E1129 17:43:19.150702307" in (two_nodes[1] / "stderr.log").read_text()  # 17:41:01.9007 + 137.25
    assert not (two_nodes[0] / "torch" / "flight-recorder-rank-1").exists()


@pytest.mark.slow
def test_a_recorded_job_on_two_hosts_is_aligned_with_the_estimated_offset(two_nodes: list[Path]) -> None:
    a = analyze([str(p) for p in two_nodes])
    tl = a.timeline
    assert tl.clock_reference == "nodeA"
    off = tl.clock_offsets["nodeB"]
    assert off.offset_s == pytest.approx(-137.25, abs=off.uncertainty_s + 0.001)
    assert off.uncertainty_s < 0.1 and tl.offsets_applied["nodeB"] == off.offset_s
    kinds = {k.kind for k in tl.clock_evidence["nodeB"]}
    assert {"step", "watchdog"} <= kinds
    # once aligned, the two ranks' watchdog timeouts for SeqNum 11 are 60 ms apart, as recorded
    timeouts = [e for e in tl.events if e.kind == "c10d" and "Watchdog caught" in e.message]
    assert {e.host for e in timeouts} == {"nodeA", "nodeB"}
    assert abs(timeouts[0].ts - timeouts[1].ts) < 200_000_000  # type: ignore[operator]
    assert a.verdict.root_cause is not None and a.verdict.root_cause.signature == "nccl-desync"
    text = render_text(a)
    assert "Clocks against nodeA: nodeB -137.2" in text and "shared moments: " in text and "watchdog timeout" in text
    data = to_json_dict(a)["timeline"]["clock_offsets"]
    assert data["nodeB"]["by_kind"]["step"]["pairs"] == 11 and data["nodeB"]["applied_s"] == off.offset_s
    assert data["nodeA"]["by_kind"] == {}


@pytest.mark.slow
def test_the_user_offset_still_overrides_the_estimate(two_nodes: list[Path]) -> None:
    a = analyze([str(p) for p in two_nodes], Options(offsets={"nodeB": -100.0}))
    assert a.timeline.clock_offsets["nodeB"] == ClockOffset(-100.0, 0.0, 0)
    assert a.timeline.offsets_applied["nodeB"] == -100.0 and "nodeB" not in a.timeline.clock_evidence
    assert "nodeB -100.000 s (given)" in render_text(a)


@pytest.mark.slow
def test_the_tui_run_panel_shows_the_clocks(two_nodes: list[Path]) -> None:
    from forensics.tui.app import ForensicsApp
    from tests.test_tui_app import opened, screen

    async def run() -> str:
        app = ForensicsApp([str(p) for p in two_nodes])
        async with app.run_test(size=(200, 60)) as pilot:
            await opened(pilot)
            return screen(app)

    text = asyncio.run(run())
    assert "Clocks" in text and "against nodeA: nodeB -137.2" in text


# -- the cross-host verdict with a skewed clock ------------------------------------------------------------
def _glog(t: datetime) -> str:
    return t.strftime("%m%d %H:%M:%S.%f")


def _node_logs(tmp: Path, skew_b_s: float) -> list[str]:
    """Two 8-GPU nodes of a 16-rank job. True time: nodeB's GPU 2 falls off the bus at 10:02; ten
    minutes later every rank's watchdog fires for SeqNum 1203. nodeB's clock is ``skew_b_s`` ahead.
    Lines in the formats of NCCL 2.19+, torch 2.4+ (c10d glog), Megatron and syslog."""
    true0 = datetime(2024, 5, 14, 10, 0, 0, tzinfo=UTC)
    paths = []
    for host, ranks, skew in (("nodeA", range(8), 0.0), ("nodeB", range(8, 16), skew_b_s)):
        t0 = true0 + timedelta(seconds=skew)
        lines = [f"{host}:{1000 + r}:{1100 + r} [{r % 8}] NCCL INFO ncclCommInitRank comm 0x55{r:02d}aa rank {r} "
                 f"nranks 16 cudaDev {r % 8} nvmlDev {r % 8} busId {r % 8 + 1}0000 commId 0x44d8628a425864f9 - "
                 "Init COMPLETE" for r in ranks]
        for n in range(100, 600, 100):
            t = t0 + timedelta(seconds=30 * n // 100)
            lines.append(f" [{t:%Y-%m-%d %H:%M:%S}] iteration      {n}/   10000 | consumed samples:   {n * 512} | "
                         "elapsed time per iteration (ms): 410.2 | learning rate: 3.000E-04 | lm loss: 2.104E+00 |")
        for r in ranks:
            t = t0 + timedelta(minutes=12, milliseconds=3 * r)
            lines.append(f"[rank{r}]:[E{_glog(t)} ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
                         "operation timeout: WorkNCCL(SeqNum=1203, OpType=ALLREDUCE, NumelIn=1048576, "
                         "NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.")
        (tmp / f"{host}-train.log").write_text("\n".join(lines) + "\n")
        paths.append(str(tmp / f"{host}-train.log"))
    x = true0 + timedelta(seconds=skew_b_s, minutes=2)
    (tmp / "nodeB-syslog").write_text(f"{x:%b %d %H:%M:%S} nodeB kernel: [12345.678901] NVRM: Xid (PCI:0000:30:00): "
                                      "79, pid=2201, name=python, GPU has fallen off the bus.\n")
    return [*paths, str(tmp / "nodeB-syslog")]


@pytest.mark.parametrize("skew_s", [15 * 60.0, -7 * 60.0])
def test_with_a_skewed_clock_the_gpu_that_fell_off_comes_first_and_its_node_is_the_culprit(
        tmp_path: Path, skew_s: float) -> None:
    a = analyze(_node_logs(tmp_path, skew_s))
    tl = a.timeline
    assert tl.offsets_applied["nodeB"] == pytest.approx(-skew_s, abs=1.0)
    root = a.verdict.root_cause
    assert root is not None and root.signature == "xid-79-fallen-off-bus"
    timeout = next(f for f in a.verdict.consequences if f.signature == "nccl-watchdog-timeout")
    assert timeout.first_seen - root.first_seen == pytest.approx(600 * NS, abs=2 * NS)  # type: ignore[operator]
    first_timeout = min(e.ts for e in tl.events if e.kind == "c10d")  # type: ignore[type-var]
    xid = next(e for e in tl.events if e.kind == "xid")
    assert xid.ts is not None and xid.ts < first_timeout  # the GPU fell off before anyone timed out
    blame = a.verdict.blame
    assert blame is not None and blame.culprit_hosts == ["nodeB"] and "on nodeB" in blame.culprits
    assert 0 in blame.victim_ranks and 15 in blame.victim_ranks and 10 not in blame.victim_ranks
    assert "Clocks against nodeA: nodeB" in render_text(a)


def test_without_alignment_the_same_logs_put_the_timeouts_before_the_fault(tmp_path: Path) -> None:
    """The control: ``--offset nodeB=0`` keeps nodeB's clock as it is, and its Xid 79 then seems
    to come five minutes after nodeA's timeouts: the estimate is what orders them."""
    a = analyze(_node_logs(tmp_path, 15 * 60.0), Options(offsets={"nodeB": 0.0}))
    xid = next(e for e in a.timeline.events if e.kind == "xid")
    first_timeout = min(e.ts for e in a.timeline.events if e.kind == "c10d")  # type: ignore[type-var]
    assert xid.ts is not None and xid.ts > first_timeout


def test_a_pasted_log_of_several_nodes_keeps_the_other_nodes_ranks_unhosted(tmp_path: Path) -> None:
    """One host named by NCCL lines (ranks 0–1) in a paste that also holds ranks 8–9 of another
    node: only ranks 0–1 and unranked lines take the host. (A one-host analysis fills nothing.)"""
    lines = [f"nodeA:{100 + r}:{100 + r} [{r}] NCCL INFO comm 0x1{r} rank {r} nranks 16 cudaDev {r} busId {r + 1}0000 "
             "- Init COMPLETE" for r in (0, 1)]
    for r in (0, 1, 8, 9):
        lines.append(f"[rank{r}]:[E0514 10:12:00.{r:06d} ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
                     "collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                     "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.")
    path = tmp_path / "paste.log"
    path.write_text("\n".join(lines) + "\n")
    other = tmp_path / "nodeC-syslog"  # a second host: the job is a multi-host one
    other.write_text("May 14 10:11:00 nodeC kernel: [12345.678901] NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n")
    events = [e for e in analyze([str(path), str(other)]).timeline.events if e.kind == "c10d"]
    hosts = {e.rank: e.host for e in events}
    assert hosts == {0: "nodeA", 1: "nodeA", 8: None, 9: None}
