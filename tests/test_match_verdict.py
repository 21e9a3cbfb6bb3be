"""The verdict: root cause vs consequences, pid joins, wrappers, risks, stale
incidents, confidence, and the healthy case."""

from matchkit import by_id, ev, run, sample

from forensics.findings import Confidence, Role

XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."
UNKNOWN = "RuntimeError: CUDA error: unknown error"
WATCHDOG = ("[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=80, OpType=ALLREDUCE, "
            "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.")
SIGABRT = "torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: {r} (pid: {pid})"


def _xid79_story(timed: bool) -> list:
    def t(x: float) -> float | None:
        return x if timed else None
    return [
        ev(XID79, kind="xid", t=t(0), path="dmesg.txt", host="node1", gpu="0000:3b:00.0"),
        ev(UNKNOWN, kind="traceback", t=t(2), path="train.log", host="node1", rank=3),
        *[ev(WATCHDOG.format(r=r), kind="c10d", t=t(600 + r * 0.1), path="train.log", host="node1", rank=r,
             timeout_ms=600000) for r in (0, 1, 2)],
        ev(SIGABRT.format(r=0, pid=4000), kind="torchrun", t=t(601), path="train.log", host="node1"),
    ]


def test_xid79_then_unknown_error_then_watchdogs() -> None:
    findings, v = run(_xid79_story(timed=True))
    assert v.root_cause_id == "xid-79-fallen-off-bus"
    assert [f.signature for f in v.consequences] == ["cuda-unknown-error", "nccl-watchdog-timeout",
                                                     "worker-killed-signal"]
    assert v.confidence == Confidence.HIGH
    assert by_id(findings)["nccl-watchdog-timeout"].note == "follows xid-79-fallen-off-bus 10 min later"
    assert by_id(findings)["nccl-watchdog-timeout"].role == Role.CONSEQUENCE
    assert findings[0].role == Role.ROOT_CAUSE and findings[0].signature == "xid-79-fallen-off-bus"
    assert "Then: cuda-unknown-error → nccl-watchdog-timeout → worker-killed-signal" in v.summary


def test_same_story_without_timestamps_uses_file_order_and_priority() -> None:
    _, v = run(_xid79_story(timed=False))
    assert v.root_cause_id == "xid-79-fallen-off-bus"
    assert {f.signature for f in v.consequences} == {"cuda-unknown-error", "nccl-watchdog-timeout",
                                                     "worker-killed-signal"}


def test_watchdog_alone_is_the_root_with_medium_confidence() -> None:
    _, v = run([ev(WATCHDOG.format(r=1), kind="c10d")])
    assert v.root_cause_id == "nccl-watchdog-timeout"
    assert v.confidence == Confidence.MEDIUM
    assert "usually a symptom" in v.summary


def test_exitcode_minus_9_joins_the_oom_killer_by_pid() -> None:
    events = [
        ev("[Tue May 21 15:43:01 2025] Out of memory: Killed process 14750 (python) total-vm:100kB", t=0,
           kind="oom-killer", pid=14750, path="dmesg.txt"),
        ev("failed (exitcode: -9) local_rank: 0 (pid: 14750) of binary: /usr/bin/python", t=2, kind="torchrun",
           pid=14750, path="torchrun.log"),
    ]
    findings, v = run(events)
    assert v.root_cause_id == "host-oom-killer"
    assert by_id(findings)["worker-killed-signal"].note == "follows host-oom-killer 2 s later (same pid 14750)"


def test_exitcode_minus_9_alone_is_the_root() -> None:
    _, v = run([ev("failed (exitcode: -9) local_rank: 0 (pid: 14750) of binary: /usr/bin/python")])
    assert v.root_cause_id == "worker-killed-signal"


def test_wrapper_yields_to_what_it_wraps() -> None:
    line = ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled cuda error, "
            "NCCL version 2.14.3 ncclUnhandledCudaError: Call to CUDA function failed. Last error: "
            "Cuda failure 'an illegal memory access was encountered'")
    findings, v = run([ev(line, kind="traceback")])
    assert v.root_cause_id == "cuda-illegal-memory-access"
    assert [f.signature for f in v.consequences] == ["nccl-error"]
    # The wrapped error printed a little later in the same file still explains the wrapper.
    _, v2 = run([ev("RuntimeError: NCCL error in: x.cpp:1, unhandled cuda error", line=10),
                 ev("CUDA error: an illegal memory access was encountered", line=25)])
    assert v2.root_cause_id == "cuda-illegal-memory-access"
    assert [f.signature for f in v2.consequences] == ["nccl-error"]


def test_star_link_needs_the_cause_first_in_the_same_file() -> None:
    # An unknown error far below a watchdog line in one file did not cause that earlier timeout.
    _, v = run([ev(WATCHDOG.format(r=0), line=10), ev(UNKNOWN, line=5000)])
    assert v.root_cause_id == "cuda-unknown-error"
    assert v.consequences == []
    assert v.ruled_out[0][0] == "nccl-watchdog-timeout"


def test_confidence_reflects_the_evidence() -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."
    _, v = run([ev(oom, kind="traceback")])
    assert (v.root_cause_id, v.confidence) == ("torch-cuda-oom", Confidence.HIGH)
    _, v = run([ev("Killed")])
    assert (v.root_cause_id, v.confidence) == ("host-oom-killer", Confidence.LOW)


def test_risk_is_never_the_root_cause() -> None:
    samples = [sample("0", t, mem_used_mib=81300, mem_total_mib=81559, util_gpu_pct=90) for t in (0, 1, 2)]
    findings, v = run([ev("epoch 1 step 10 loss 2.3", kind="progress", t=0)], metrics=samples)
    assert v.root_cause is None
    assert [f.signature for f in v.contributing] == ["memory-margin"]
    assert findings[0].role == Role.CONTRIBUTING
    assert v.summary.endswith("Risks found: memory-margin.")


def test_oom_with_small_shortfall_has_memory_margin_contributing() -> None:
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.35 GiB. GPU 3 has a total capacity of "
           "63.42 GiB of which 1.70 GiB is free.")
    _, v = run([ev(oom, kind="traceback")])
    assert v.root_cause_id == "torch-cuda-oom"
    assert [f.signature for f in v.contributing] == ["memory-margin"]


def test_healthy_run_says_so() -> None:
    findings, v = run([ev("epoch 1 step 10 loss 2.31", kind="progress"),
                       ev("NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>", kind="nccl")])
    assert findings == [] and v.root_cause is None
    assert v.summary.startswith("No failure signature matched 2 notable event(s)")
    _, v = run([ev("done", kind="exit", exit_code=0)])
    assert v.confidence == Confidence.HIGH
    _, v = run([])
    assert v.confidence == Confidence.LOW


def test_an_old_unrelated_incident_is_ruled_out() -> None:
    days = 3 * 86400
    events = [ev(XID79, t=0, path="dmesg.txt"),
              ev("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 40.00 GiB.", t=days)]
    _, v = run(events)
    assert v.root_cause_id == "torch-cuda-oom"
    assert v.ruled_out == [("xid-79-fallen-off-bus", "an earlier, separate incident (72.0 h before "
                                                     "torch-cuda-oom)")]


def test_a_later_weak_symptom_does_not_make_a_real_fault_stale() -> None:
    events = [ev(XID79, t=0, path="dmesg.txt"),
              ev("NVRM: Xid (PCI:0000:61:00): 45, pid=1496200, name=python, Ch 0000000a", t=3 * 86400,
                 path="dmesg.txt")]
    _, v = run(events)
    assert v.root_cause_id == "xid-79-fallen-off-bus"
    assert v.ruled_out == [("xid-45-preemptive-cleanup", "lower priority (15) than xid-79-fallen-off-bus (90) "
                                                         "and not its cause")]


def test_runner_up_and_why_it_lost() -> None:
    events = [ev("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 40.00 GiB.", line=1),
              ev("CUDA error: an illegal memory access was encountered", line=2)]
    _, v = run(events)
    assert v.root_cause_id == "torch-cuda-oom"
    assert v.ruled_out == [("cuda-illegal-memory-access", "as likely as torch-cuda-oom, which comes first in the logs")]
    assert v.confidence == Confidence.MEDIUM  # the runner-up explains the logs almost as well


def test_earliest_of_similar_strength_wins_with_timestamps() -> None:
    events = [ev("CUDA error: an illegal memory access was encountered", t=0, rank=5),
              ev("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 40.00 GiB.", t=30, rank=2)]
    _, v = run(events)
    assert v.root_cause_id == "cuda-illegal-memory-access"
    assert v.ruled_out == [("torch-cuda-oom", "happened after cuda-illegal-memory-access 30 s")]


def test_named_links_stay_on_their_host() -> None:
    events = [ev("Out of memory: Killed process 99 (python)", t=0, host="a"),
              ev("failed (exitcode: -9) local_rank: 0 (pid: 14750)", t=5, host="b")]
    findings, v = run(events)
    # worker-killed-signal also says "*", so the stronger finding still explains it, but not by the pid/host link.
    assert v.root_cause_id == "host-oom-killer"
    assert "same pid" not in by_id(findings)["worker-killed-signal"].note


def test_report_two_shape_with_the_shipped_signatures() -> None:
    """Report 2: 21.5 Ktok/s falls to 5.5 Ktok/s, 5 of 8 GPUs drop to 0 %, one GPU ran ~900 MiB from full."""
    from forensics.match import load_signatures

    events = [ev(f"step {690 + i} | {21.5 if i < 20 else 5.5} Ktok/s", kind="progress", t=i * 30, step=690 + i,
                 tokens_s=21500.0 if i < 20 else 5500.0, path="train.log") for i in range(40)]
    metrics = []
    for t in range(0, 1200, 5):
        for g in range(8):
            dead = g in (0, 1, 4, 6, 7) and t >= 600
            metrics.append(sample(str(g), t, util_gpu_pct=0.0 if dead else 100.0, power_w=80 if dead else 550,
                                  power_limit_w=600, mem_total_mib=97887.0,
                                  mem_used_mib=500.0 if dead else 97000.0 if g == 6 else 90000.0))
    findings, v = run(events, load_signatures(), metrics)
    assert v.root_cause_id in ("silent-worker-stall", "throughput-collapse")
    assert {f.signature for f in findings} >= {"silent-worker-stall", "throughput-collapse", "memory-margin"}
    assert [f.signature for f in v.contributing] == ["memory-margin"]
    stall = by_id(findings)["silent-worker-stall"]
    assert stall.gpus == ["0", "1", "4", "6", "7"]


def test_the_drivers_recovery_action_is_in_the_summary() -> None:
    from forensics.match import load_signatures

    lines = ["[171167.620236] NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6)",
             "[171167.621162] NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 "
             "(Drain and Reset)"]
    _, v = run([ev(line, kind="xid") for line in lines], load_signatures())
    assert v.root_cause_id == "xid-nvlink"
    assert v.summary.endswith("The driver's own verdict (Xid 154): Drain and Reset.")
