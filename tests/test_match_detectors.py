"""Detectors: GPU metrics, OOM numbers, progress lines, recorder health, cross-rank
records. Synthetic series, plus readings and lines taken from corpus cases."""

from dataclasses import replace
from pathlib import Path

import pytest
from matchkit import T0, ev, sample, timeline

from forensics.analysis import Options, analyze, parse_input
from forensics.findings import number_ranges
from forensics.ingest.sources import InputFile
from forensics.match import add_derived_events
from forensics.match.detectors.gpu_metrics import (
    clock_throttle,
    gpu_idle_while_peers_busy,
    memory_margin_nvml,
    pcie_link_below_max,
    spinning_collective,
)
from forensics.match.detectors.oom_margin import memory_margin_oom
from forensics.match.detectors.progress import no_progress, throughput_drop
from forensics.match.detectors.ranks import cross_rank
from forensics.match.detectors.recorder_health import nvml_unresponsive
from forensics.timeline.merge import build_timeline

CORPUS = Path(__file__).parent / "corpus" / "cases"


def _series(seconds: int, gpus: int = 8, **override: dict[int, dict[str, float]]) -> list:
    """1 Hz samples of ``gpus`` busy GPUs; ``override[str(gpu)] = {t: values}`` changes readings."""
    out = []
    for t in range(seconds):
        for g in range(gpus):
            values = {"util_gpu_pct": 100.0, "mem_used_mib": 50000.0, "mem_total_mib": 81559.0,
                      "power_w": 650.0, "power_limit_w": 700.0}
            values.update(override.get(str(g), {}).get(t, {}))
            out.append(sample(str(g), t, **values))
    return out


# -- gpu-idle-while-peers-busy -----------------------------------------------------------------
def test_idle_gpu_while_peers_busy() -> None:
    idle = {t: {"util_gpu_pct": 0.0} for t in range(60, 180)}
    found = gpu_idle_while_peers_busy(_series(180, **{"6": idle}))
    assert len(found) == 1
    e = found[0]
    assert e.gpu == "6" and e.kind == "derived" and e.attrs["detector"] == "gpu-idle-while-peers-busy"
    assert e.message == "[gpu-idle-while-peers-busy] GPU 6 at 0 % for 119 s while 7 peers were at 100 %"
    assert e.ts == T0 + 60 * 10**9 and e.attrs["end_ts"] == T0 + 179 * 10**9


def test_short_dip_or_unused_gpu_is_not_a_stall() -> None:
    dip = {t: {"util_gpu_pct": 0.0} for t in range(60, 80)}
    assert gpu_idle_while_peers_busy(_series(180, **{"2": dip})) == []
    unused = {t: {"util_gpu_pct": 0.0, "mem_used_mib": 0.0} for t in range(180)}
    assert gpu_idle_while_peers_busy(_series(180, **{"7": unused})) == []


def test_idle_gpu_in_a_single_snapshot() -> None:
    snap = [sample(str(g), 0, path="nvidia-smi.txt", util_gpu_pct=0.0 if g == 3 else 100.0,
                   mem_used_mib=55000.0, mem_total_mib=81559.0) for g in range(4)]
    found = gpu_idle_while_peers_busy(snap)
    assert [e.gpu for e in found] == ["3"]
    assert "in 1 snapshot" in found[0].message


# -- spinning-collective -------------------------------------------------------------------------
def test_spinning_collective_from_the_corpus_snapshot_readings() -> None:
    # stall-nvidia-smi-one-gpu-idle: H100s at 100 % drawing 116 W and 121 W of 700 W.
    snap = [sample("0", 0, path="nvidia-smi.txt", util_gpu_pct=100, power_w=116, power_limit_w=700),
            sample("1", 0, path="nvidia-smi.txt", util_gpu_pct=100, power_w=121, power_limit_w=700)]
    found = spinning_collective(snap)
    assert [e.gpu for e in found] == ["0", "1"]
    assert found[0].message.startswith("[spinning-collective] GPU 0 at 100 % utilization drawing only 116 W of "
                                       "700 W (17 %) in 1 snapshot")


def test_busy_gpus_at_full_power_or_one_lone_gpu_do_not_spin() -> None:
    assert spinning_collective(_series(120)) == []
    lone = [sample("0", t, util_gpu_pct=100, power_w=100, power_limit_w=700) for t in range(120)]
    assert spinning_collective(lone) == []


# -- clock-throttle --------------------------------------------------------------------------------
def test_thermal_slowdown_under_load() -> None:
    hot = {t: {"clock_reasons": 0x40, "temp_c": 91.0, "sm_clock_mhz": 1100.0} for t in range(30, 90)}
    found = clock_throttle(_series(120, gpus=2, **{"1": hot}))
    assert len(found) == 1 and found[0].gpu == "1"
    assert "HW Thermal Slowdown for 59 s under load" in found[0].message
    assert "1,100 MHz, 91 °C" in found[0].message


def test_power_cap_or_idle_reasons_are_benign() -> None:
    capped = {t: {"clock_reasons": 0x4} for t in range(120)}
    assert clock_throttle(_series(120, gpus=2, **{"0": capped})) == []
    idle_slow = {t: {"clock_reasons": 0x8 | 0x1, "util_gpu_pct": 0.0} for t in range(120)}
    assert clock_throttle(_series(120, gpus=2, **{"0": idle_slow})) == []


# -- pcie-link-below-max ---------------------------------------------------------------------------
def test_link_below_max_only_under_load() -> None:
    link = {"pcie_gen": 4.0, "pcie_gen_max": 5.0, "pcie_width": 4.0, "pcie_width_max": 16.0}
    busy = {t: link for t in range(120)}
    found = pcie_link_below_max(_series(120, gpus=2, **{"1": busy}))
    assert len(found) == 1 and "GPU 1 PCIe link at Gen4 x4 (max Gen5 x16)" in found[0].message
    idle = {t: {**link, "pcie_gen": 1.0, "pcie_width": 16.0, "util_gpu_pct": 0.0} for t in range(120)}
    assert pcie_link_below_max(_series(120, gpus=2, **{"1": idle})) == []


# -- memory-margin -----------------------------------------------------------------------------------
def test_memory_margin_from_nvml_peak() -> None:
    near = _series(10, gpus=2, **{"0": {5: {"mem_used_mib": 81300.0}}})
    found = memory_margin_nvml(near)
    assert [e.gpu for e in found] == ["0"]
    assert "peaked at 81,300 MiB of 81,559 MiB (259 MiB free)" in found[0].message
    assert memory_margin_nvml(_series(10, gpus=2)) == []


@pytest.mark.parametrize("text, fires, phrase", [
    ("Tried to allocate 3.14 GiB (GPU 5; 31.75 GiB total capacity; 28.28 GiB already allocated; 1.95 GiB free; "
     "28.28 GiB reserved in total by PyTorch)", True, "short by 1.19 GiB (3.7 % of capacity)"),
    ("RuntimeError: CUDA out of memory. Tried to allocate 86.00 MiB (GPU 0;", True, "only 86 MiB"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.35 GiB. GPU 3 has a total capacity of "
     "63.42 GiB of which 1.70 GiB is free. Process 2521735 has 474.00 MiB memory in use.", True,
     "short by 2.65 GiB (4.2 % of capacity)"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 40.00 GiB. GPU 0 has a total capacity of "
     "79.15 GiB of which 3.00 GiB is free.", False, ""),
])
def test_memory_margin_from_oom_messages(text: str, fires: bool, phrase: str) -> None:
    found = memory_margin_oom([ev(text, kind="traceback")])
    assert bool(found) == fires
    if fires:
        assert phrase in found[0].message and found[0].message.startswith("[memory-margin] ")


def test_memory_margin_prefers_parsed_attrs() -> None:
    e = ev("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate (numbers cut)", kind="traceback",
           tried_mib=100.0, total_mib=24576.0, free_mib=20.0)
    assert "short by 80 MiB" in memory_margin_oom([e])[0].message


# -- progress -----------------------------------------------------------------------------------------
def _progress(n: int, every: float = 2.0, start: float = 0.0, **rates: list[float]) -> list:
    out = []
    for i in range(n):
        attrs = {k: v[i] for k, v in rates.items()}
        out.append(ev(f"step {i}", kind="progress", t=start + i * every, step=i, **attrs))
    return out


def test_no_progress_until_the_watchdog() -> None:
    events = [*_progress(50), ev("Watchdog caught collective operation timeout", kind="c10d", t=700)]
    found = no_progress(events, T0 + 700 * 10**9)
    assert len(found) == 1
    assert found[0].message == "[no-progress] no progress line for 10 min after step 49 (≈ 301 step-times of 2 s)"


def test_no_progress_is_quiet_for_a_steady_run_or_a_clean_exit() -> None:
    assert no_progress(_progress(50), T0 + 100 * 10**9) == []
    t = timeline([*_progress(50), ev("exited", kind="exit", t=900, exit_code=0)])
    add_derived_events(t)
    assert not [e for e in t.events if e.kind == "derived"]


def test_throughput_drop_report_two_shape() -> None:
    rates = [21500.0] * 10 + [5500.0] * 10  # report 2: 21.5 Ktok/s → 5.5 Ktok/s
    found = throughput_drop(_progress(20, tokens_s=rates))
    assert len(found) == 1
    assert found[0].message == ("[throughput-drop] tokens/s fell from 21,500 to 5,500 (-74 %) at step 10 and "
                                "stayed down for 10 readings")


def test_throughput_dip_or_warmup_is_not_a_collapse() -> None:
    dip = [10.0] * 8 + [3.0] + [10.0] * 8
    assert throughput_drop(_progress(17, it_s=dip)) == []
    warmup = [1.0, 2.0, 5.0] + [10.0] * 12
    assert throughput_drop(_progress(15, it_s=warmup)) == []
    slower = [2.0] * 8 + [6.0] * 6  # s/it rising threefold is a drop in it/s
    assert len(throughput_drop(_progress(14, s_it=slower))) == 1


# -- nvml-unresponsive ---------------------------------------------------------------------------------
def test_nvml_unresponsive_from_recorder_events() -> None:
    hang = ev("NVML unresponsive since 2024-05-01T10:00:00Z: nvmlDeviceGetPowerUsage did not return in 2 s",
              kind="recorder", t=5, gpu="3", reason="nvml-timeout")
    other = ev("kernel log unavailable: permission denied", kind="recorder", t=0, reason="source-unavailable")
    found = nvml_unresponsive([other, hang])
    assert len(found) == 1 and found[0].gpu == "3"
    assert found[0].message.startswith("[nvml-unresponsive] NVML calls stopped answering on GPU 3: ")


# -- cross-rank ------------------------------------------------------------------------------------------
def _c10d(rank: int, seq: int, op: str | None, numel: int | None = None, pg: str | None = None,
          **extra: object) -> object:
    return ev(f"[Rank {rank}] Watchdog caught collective operation timeout", kind="c10d", rank=rank, seq=seq,
              op_type=op, numel_in=numel, numel_out=numel, pg=pg, timeout_ms=600000, **extra)


def test_desync_same_seqnum_different_collectives() -> None:
    # nccl-timeout-collective-mismatch (NVIDIA/nccl#1409).
    found = cross_rank([_c10d(7, 80078, "BROADCAST", 5056), _c10d(3, 80078, "ALLREDUCE", 2106881)])
    assert [e.attrs["detector"] for e in found] == ["nccl-desync"]
    assert found[0].message == ("[nccl-desync] ranks wait in different collectives: rank 3 in ALLREDUCE SeqNum "
                                "80078 (2,106,881 elements); rank 7 in BROADCAST SeqNum 80078 (5,056 elements)")
    assert found[0].attrs["ranks"] == [3, 7]


def test_nearby_seqnums_are_not_a_desync() -> None:
    # NeMo#13562 shape: rank 0 two collectives ahead of ranks 1-2. Each rank reports its oldest unfinished
    # work; ranks a few SeqNums apart run the same program (FSDP), so nothing says they diverged.
    assert cross_rank([_c10d(0, 532341, "_ALLGATHER_BASE"), _c10d(1, 532339, "BROADCAST"),
                       _c10d(2, 532339, "BROADCAST")]) == []


def test_a_minority_still_in_an_earlier_collective_is_behind() -> None:
    events = [_c10d(r, 12, "ALLREDUCE", 64) for r in (0, 1, 3)] + [_c10d(2, 11, "ALLREDUCE", 64)]
    found = cross_rank(events)
    assert [e.attrs["detector"] for e in found] == ["rank-behind"]
    assert found[0].rank == 2 and found[0].attrs["behind"] == [2]
    assert found[0].message == ("[rank-behind] rank 2 fell behind: ranks 0–1, 3 wait in ALLREDUCE SeqNum 12 "
                                "(64 elements) and it is still in SeqNum 11, which the others completed")


def test_desync_at_a_later_seqnum_than_the_oldest_pending() -> None:
    # Flight-recorder shape: rank 0 has SeqNums 5 and 6 pending, rank 1 only 6, and at 6 they disagree.
    events = [_c10d(0, 5, "ALLREDUCE", 8, pg="0"), _c10d(0, 6, "ALLREDUCE", 8, pg="0"),
              _c10d(1, 6, "BROADCAST", 8, pg="0")]
    found = cross_rank(events)
    assert [e.attrs["detector"] for e in found] == ["nccl-desync"]
    assert found[0].attrs["groups"][0]["seq"] == 6


def test_sizes_differ_legitimately_in_all_to_all_but_not_in_all_reduce() -> None:
    uneven = [_c10d(0, 9, "ALLTOALL_BASE", 100), _c10d(1, 9, "ALLTOALL_BASE", 140)]
    assert cross_rank(uneven) == []
    mismatched = [_c10d(0, 9, "ALLREDUCE", 100), _c10d(1, 9, "ALLREDUCE", 140)]
    assert [e.attrs["detector"] for e in cross_rank(mismatched)] == ["nccl-desync"]


#: pytorch/torchtune#2093 (comment of 2025-02-28): full fine-tune with FSDP, timeout while saving a
#: checkpoint. Ranks 0 and 3 report their oldest unfinished work two SeqNums apart, in different
#: collectives, and every rank had enqueued both: not a desync.
TORCHTUNE_2093 = (
    "[rank0]:[E227 23:07:54.322446753 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective opera"
    "tion timeout: WorkNCCL(SeqNum=619725, OpType=_ALLGATHER_BASE, NumelIn=54528000, NumelOut=218112000, "
    "Timeout(ms)=1800000) ran for 1800034 milliseconds before timing out.\n"
    "[rank0]:[E227 23:07:54.322713545 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank 0]  "
    "failure detected by watchdog at work sequence id: 619725 PG status: last enqueued work: 619732, last"
    " completed work: 619724\n"
    "[rank0]:[E227 23:07:54.322728963 ProcessGroupNCCL.cpp:667] Stack trace of the failed collective not "
    "found, potentially because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE"
    "_BUFFER_SIZE to a non-zero value.\n"
    "[rank3]:[E227 23:07:54.323599416 ProcessGroupNCCL.cpp:629] [Rank 3] Watchdog caught collective opera"
    "tion timeout: WorkNCCL(SeqNum=619727, OpType=_REDUCE_SCATTER_BASE, NumelIn=4096, NumelOut=1024, Time"
    "out(ms)=1800000) ran for 1800060 milliseconds before timing out.\n"
    "[rank3]:[E227 23:07:54.323727781 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank 3]  "
    "failure detected by watchdog at work sequence id: 619727 PG status: last enqueued work: 619730, last"
    " completed work: 619726\n"
)


def test_fsdp_checkpoint_save_timeout_is_not_a_desync(tmp_path: Path) -> None:
    log = tmp_path / "torchtune-2093.log"
    log.write_text(TORCHTUNE_2093)
    analysis = analyze([str(log)])
    assert not [e for e in analysis.timeline.events if e.kind == "derived"]
    assert analysis.verdict.root_cause_id in ("single-rank-long-work", "nccl-watchdog-timeout")
    assert "nccl-desync" not in {f.signature for f in analysis.findings}


def test_far_apart_seqnums_without_process_groups_are_not_compared() -> None:
    # nccl-timeout-tqdm-glued: ranks 0 and 7 in different process groups.
    assert cross_rank([_c10d(0, 96120, "ALLREDUCE"), _c10d(0, 96117, "ALLREDUCE"),
                       _c10d(7, 64088, "ALLREDUCE")]) == []


def test_rank_missing_from_the_timeouts_is_behind() -> None:
    events = [ev("NCCL INFO comm 0x1 rank 0 nranks 8 cudaDev 0 busId 1000 - Init COMPLETE", kind="nccl",
                 nranks=8, rank=0)]
    events += [_c10d(r, 1580, "ALLREDUCE", 466119168, pg="0") for r in range(1, 8)]
    found = cross_rank(events)
    assert [e.attrs["detector"] for e in found] == ["rank-behind"]
    assert found[0].rank == 0
    assert found[0].message == ("[rank-behind] rank 0 fell behind: ranks 1–7 wait in ALLREDUCE SeqNum 1580 "
                                "(466,119,168 elements) and it reported no stuck collective")


def test_rank_that_never_enqueued_the_collective_is_behind() -> None:
    events = [_c10d(0, 200, "ALLREDUCE", pg="0", last_enqueued=200),
              _c10d(1, 199, None, pg="0", last_enqueued=199)]
    events[1] = ev("[PG 0 Rank 1] Exception detected by watchdog", kind="c10d", rank=1, pg="0",
                   last_enqueued=199, last_completed=199, seq=None)
    found = cross_rank(events)
    assert found and found[0].attrs["behind"] == [1]


def test_few_pasted_ranks_say_nothing_about_the_others() -> None:
    events = [_c10d(r, 10, "ALLREDUCE", 8) for r in (2, 5)]
    events.append(ev("comm rank 0 nranks 16", kind="nccl", nranks=16))
    assert cross_rank(events) == []


def test_rank_ranges() -> None:
    assert number_ranges([5, 0, 1, 2, 7]) == "0–2, 5, 7"


# -- real files through the parsers ---------------------------------------------------------------------
def _derived_from_case(case: str) -> list:
    per_source = []
    for path in sorted((CORPUS / case).iterdir()):
        if path.name == "case.toml":
            continue
        _, events, metrics = parse_input(InputFile(str(path), path.read_bytes()), Options())
        per_source.append((events, metrics))
    t = build_timeline(per_source)
    add_derived_events(t)
    return [e for e in t.events if e.kind == "derived"]


def test_spinning_collective_on_the_real_nvidia_smi_snapshot() -> None:
    found = _derived_from_case("stall-nvidia-smi-one-gpu-idle")
    assert {e.attrs["detector"] for e in found} == {"spinning-collective"}
    assert len(found) == 2


def test_desync_on_the_real_watchdog_lines() -> None:
    found = _derived_from_case("nccl-timeout-collective-mismatch")
    assert [e.attrs["detector"] for e in found] == ["nccl-desync"]
    assert "rank 7 in BROADCAST SeqNum 80078" in found[0].message


def test_a_stall_that_ends_by_itself_is_normal_life() -> None:
    # Rank 0 saves a checkpoint for 3 minutes while the others wait, then training resumes.
    save = {t: {"util_gpu_pct": 0.0} for t in range(100, 280)}
    assert gpu_idle_while_peers_busy(_series(400, **{"0": save})) == []
    # The same GPU never coming back is a stall; so is a wait of more than ten minutes.
    dead = {t: {"util_gpu_pct": 0.0} for t in range(100, 400)}
    assert len(gpu_idle_while_peers_busy(_series(400, **{"0": dead}))) == 1
    long_save = {t: {"util_gpu_pct": 0.0} for t in range(100, 800)}
    assert len(gpu_idle_while_peers_busy(_series(900, **{"0": long_save}))) == 1


def test_spinning_that_resumes_normal_work_is_not_reported() -> None:
    spin = {t: {"power_w": 100.0} for t in range(100, 200)}
    waiting = _series(300, gpus=2, **{"0": spin, "1": spin})
    assert spinning_collective(waiting) == []
    stuck = {t: {"power_w": 100.0} for t in range(100, 300)}
    assert len(spinning_collective(_series(300, gpus=2, **{"0": stuck, "1": stuck}))) == 2


def test_sw_thermal_slowdown_alone_is_not_throttling() -> None:
    warm = {t: {"clock_reasons": 0x20} for t in range(120)}
    assert clock_throttle(_series(120, gpus=2, **{"0": warm})) == []


def test_progress_lines_with_an_odd_rank_attribute_still_group() -> None:
    lines = _progress(20, tokens_s=[100.0] * 10 + [10.0] * 10)
    odd = [replace(e, attrs={**e.attrs, "rank": [0, 1]}) for e in lines]
    assert len(throughput_drop(odd)) == 1
