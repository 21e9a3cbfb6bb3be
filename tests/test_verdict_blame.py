"""Culprit + victims + why, odd-one-out evidence, run boundaries and Δt (issue 13, "The verdict").

The 8-rank logs in tests/data/report2/ carry the numbers of report 2 (an 8-GPU pipeline whose drafter
ranks 6 and 7 died silently at the memory margin; make_logs.py writes them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from forensics.analysis import analyze, to_json_dict
from forensics.events import Event, Origin, TsSource
from forensics.match.detectors.runs import run_boundaries
from forensics.text_report import render_text

DATA = Path(__file__).parent / "data" / "report2"
SAMPLE = Path(__file__).parent.parent / "samples" / "recorded" / "silent-stall-2gpu" / "bundle"
sys.path.insert(0, str(DATA))
import make_logs  # noqa: E402


def _paths(*names: str) -> list[str]:
    return [str(DATA / n) for n in names]


def test_eight_ranks_names_the_silent_ranks_not_the_survivors() -> None:
    a = analyze(_paths("restart.log", "nvidia-smi.csv"))
    v = a.verdict
    assert v.root_cause_id == "silent-worker-stall"
    assert v.blame is not None
    assert v.blame.culprit_ranks == [6, 7]
    assert v.blame.victim_ranks == [0, 1, 2, 3, 4, 5]
    assert v.blame.culprits == "ranks 6, 7 (GPUs 6, 7)"
    assert v.blame.victims == "ranks 0–5 (GPUs 0–5)"
    assert "GPUs 6, 7 hold 59 GiB at 0 %" in v.blame.why and "GPUs 0–5 hold 91–95 GiB" in v.blame.why
    assert "ranks 6, 7 printed nothing after step 1" in v.blame.why
    # The summary names the culprits, not the busy GPUs (the old headline listed 0, 1, 4, 5 and hid 6, 7).
    assert " on ranks 6, 7 (GPUs 6, 7) at " in v.summary and "0000:41:00.0" not in v.summary
    text = render_text(a)
    assert text.splitlines()[0].startswith("CULPRIT: ranks 6, 7 (GPUs 6, 7) · victims: ranks 0–5 (GPUs 0–5) — ")
    # The odd-one-out facts are evidence, listed in time order with the rest (issue 20).
    assert v.root_cause is not None
    kinds = [e.attrs.get("detector") for e in v.root_cause.evidence]
    assert "rank-silent" in kinds and "gpu-odd-one-out" in kinds
    stamps = [e.ts for e in v.root_cause.evidence if e.ts is not None]
    assert stamps == sorted(stamps)


def test_eight_ranks_json_blame_and_dt() -> None:
    d = to_json_dict(analyze(_paths("restart.log", "nvidia-smi.csv")))
    assert d["version"] == 1
    blame = d["verdict"]["blame"]
    assert blame["culprit_ranks"] == [6, 7] and blame["victim_ranks"] == [0, 1, 2, 3, 4, 5]
    assert blame["culprit_gpus"] == ["0000:a1:00.0", "0000:b1:00.0"]
    assert blame["line"].startswith("Culprit: ranks 6, 7")
    # Per-GPU / per-rank facts behind it: memory, utilization, power, last progress.
    assert blame["facts"]["GPU 6"]["mem_used_mib"] == 60416 and blame["facts"]["GPU 6"]["util_gpu_pct"] == 0
    assert blame["facts"]["GPU 6"]["power_w"] == 38.2 and blame["facts"]["GPU 2"]["util_gpu_pct"] == 100
    assert blame["facts"]["rank 7"]["last_step"] == 1
    assert blame["facts"]["rank 7"]["last_line"].startswith("dflash.drafter: step 1 | loss 2.399")
    assert d["verdict"]["root_first_event"] == "2026-05-14T05:37:00.222000Z"  # rank 6's last step
    ev = d["findings"][0]["evidence"]
    assert ev[0]["dt_s"] == 0.0
    odd = next(e for e in ev if e["message"].startswith("[gpu-odd-one-out]"))
    assert odd["dt_s"] == 9354.778  # 08:12:55 - 05:37:00.222
    json.dumps(d)


def test_recorded_two_gpu_stall_names_rank_1() -> None:
    a = analyze([str(SAMPLE)])
    b = a.verdict.blame
    assert b is not None and b.culprit_ranks == [1] and b.victim_ranks == [0]
    assert b.culprits == "rank 1 (GPU 1)" and b.victims == "rank 0 (GPU 0)"
    assert render_text(a).startswith("CULPRIT: rank 1 (GPU 1) · victims: rank 0 (GPU 0) — rank 1 fell behind")


def test_single_gpu_error_names_its_gpu_and_process(tmp_path: Path) -> None:
    """One GPU's Xid: the GPU and the process the line names are the culprit; nobody is a victim."""
    log = tmp_path / "dmesg.txt"
    log.write_text("2024-11-15T12:02:03,470068+00:00 NVRM: Xid (PCI:0000:19:00): 79, pid=4242, name=python, "
                   "GPU has fallen off the bus.\n", encoding="utf-8")
    a = analyze([str(log)])
    assert a.verdict.root_cause_id == "xid-79-fallen-off-bus"
    b = a.verdict.blame
    assert b is not None and b.culprit_gpus == ["0000:19:00.0"] and b.culprit_pids == [4242]
    assert b.victims == "" and b.victim_ranks == []
    assert render_text(a).startswith("CULPRIT: GPU 0000:19:00.0; pid 4242 (python) — GPU 0000:19:00.0 logged Xid 79")
    assert to_json_dict(a)["verdict"]["blame"]["culprit_pids"] == [4242]


def test_healthy_ranks_no_silent_rank(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("\n".join(make_logs.restarted_run(silent=())) + "\n", encoding="utf-8")
    a = analyze([str(log)])
    assert not any(e.attrs.get("detector") == "rank-silent" for e in a.timeline.events)
    assert a.verdict.root_cause is None


def test_restart_is_not_a_stall_and_runs_are_compared(tmp_path: Path) -> None:
    """The old log ended at the restart: no 'no progress for 2.6 h'; the restarted run at 5.5 K tok/s
    from its first step is a throughput collapse across runs, naming both runs."""
    old, new = tmp_path / "previous-run.log", tmp_path / "restart.log"
    old.write_text("\n".join(make_logs.previous_run()) + "\n", encoding="utf-8")
    new.write_text("\n".join(make_logs.restarted_run(silent=())) + "\n", encoding="utf-8")
    a = analyze([str(old), str(new)])
    derived = [e for e in a.timeline.events if e.kind == "derived"]
    assert not any(e.attrs.get("detector") == "no-progress" for e in derived)
    assert a.verdict.root_cause_id == "throughput-collapse"
    drop = next(e for e in derived if e.attrs.get("across_runs"))
    assert "fell from 21,500 to 5,500 (-74 %) across a restart" in drop.message
    assert "run 2" in drop.message and "run 1 did 21,500" in drop.message
    assert "previous-run.log → restart.log" in drop.message


def test_stall_before_a_restart_still_counts() -> None:
    """A stream silent for long *before* the restart is a stall (then restarted), measured to the restart."""
    from forensics.match.detectors.progress import no_progress

    events = [_progress(s, 10 * s) for s in range(100, 120)] + [_progress(1, 10 * 119 + 3600)]
    bounds = run_boundaries(events)
    assert len(bounds) == 1
    found = no_progress(events[:-1], 10 * 119 * 10**9 + 7200 * 10**9, bounds)
    assert len(found) == 1 and found[0].attrs["silence_s"] == 3600.0
    assert "until the restart ('step counter reset from 119 to 1')" in found[0].message
    # Ended right at the restart: nothing.
    quick = [_progress(s, 10 * s) for s in range(100, 120)] + [_progress(1, 10 * 119 + 30)]
    assert no_progress(quick[:-1], 10 * 119 * 10**9 + 7200 * 10**9, run_boundaries(quick)) == []


def _progress(step: int, t: int, rank: int | None = None) -> Event:
    return Event(ts=t * 10**9, ts_source=TsSource.EXACT, source="stdout", kind="progress", message=f"step {step}",
                 origin=Origin("train.log", t + 1), rank=rank, attrs={"step": step})


def test_step_counter_reset_is_a_boundary() -> None:
    events = [_progress(s, s) for s in range(100, 140)] + [_progress(s, 200 + s) for s in range(1, 20)]
    bounds = run_boundaries(events)
    assert len(bounds) == 1 and bounds[0].ts == 201 * 10**9
    assert bounds[0].why == "step counter reset from 139 to 1"
    # Many ranks resetting at once are one boundary.
    events = [_progress(s, s, r) for r in range(4) for s in range(100, 140)] + \
             [_progress(s, 200 + s, r) for r in range(4) for s in range(1, 20)]
    assert len(run_boundaries(sorted(events, key=lambda e: e.ts or 0))) == 1


def test_an_interleaved_loop_with_its_own_counter_is_not_a_restart() -> None:
    """Evaluation printing 'step 1..20' between training steps 500 and 501 (no bar label): the training
    counter comes back, so no boundary."""
    events = [_progress(s, s) for s in range(460, 501)] + [_progress(s, 600 + s) for s in range(1, 21)] + \
        [_progress(s, 700 + s) for s in range(501, 540)]
    assert run_boundaries(events) == []


def test_a_restart_after_an_interleaved_loop_is_still_one() -> None:
    """An evaluation loop (step 1..20, then back to 501), later a real restart to step 1 that never comes
    back: one boundary, at the restart; the jump back of the loop does not excuse the later drop."""
    events = [_progress(s, s) for s in range(460, 501)] + [_progress(s, 600 + s) for s in range(1, 21)] + \
        [_progress(s, 700 + s) for s in range(501, 540)] + [_progress(s, 1300 + s) for s in range(1, 30)]
    bounds = run_boundaries(events)
    assert [b.why for b in bounds] == ["step counter reset from 539 to 1"]


def test_torchrun_restart_line_is_a_boundary(tmp_path: Path) -> None:
    """The elastic agent's own lines (as in https://github.com/kubeflow/trainer/issues/1509: 'Rendezvous
    complete for workers', 'Starting worker group') between two runs mark the restart."""
    log = tmp_path / "train.log"
    steps = [f"2026-05-14 03:{m:02d}:00,000 INFO step {600 + m} | loss 1.0 | 21.5 Ktok/s" for m in range(10)]
    agent = ["INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group",
             "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:",
             "  restart_count=1",
             "INFO:torch.distributed.elastic.agent.server.api:[default] Starting worker group"]
    again = [f"2026-05-14 03:{m:02d}:00,000 INFO step {m - 19} | loss 1.0 | 5.5 Ktok/s" for m in range(20, 30)]
    log.write_text("\n".join(steps + agent + again) + "\n", encoding="utf-8")
    a = analyze([str(log)])
    bounds = run_boundaries(a.timeline.events)
    assert len(bounds) == 1 and bounds[0].why in ("Rendezvous complete for workers", "Starting worker group")
    assert a.verdict.root_cause_id == "throughput-collapse"
    assert not any(e.attrs.get("detector") == "no-progress" for e in a.timeline.events)


def test_restart_in_a_new_file_without_a_banner(tmp_path: Path) -> None:
    """No resume line at all: the new file's steps start again at 1 after the old file's 690."""
    old, new = tmp_path / "a.log", tmp_path / "b.log"
    old.write_text("\n".join(make_logs.previous_run()[1:-1]) + "\n", encoding="utf-8")
    new.write_text("\n".join(make_logs.restarted_run(silent=())[2:]) + "\n", encoding="utf-8")
    a = analyze([str(old), str(new)])
    bounds = run_boundaries(a.timeline.events)
    assert [b.why for b in bounds] == ["b.log starts again at step 1 after a.log ended at step 690"]
    assert not any(e.attrs.get("detector") == "no-progress" for e in a.timeline.events)
    assert a.verdict.root_cause_id == "throughput-collapse"


def test_xid_79_with_watchdog_timeouts_names_the_gpu_and_its_rank(tmp_path: Path) -> None:
    """Xid 79 on one GPU, NCCL watchdog timeouts on the other ranks: the GPU (and the rank NCCL's
    Init COMPLETE line puts on it) is the culprit, the ranks that timed out are victims."""
    bus = {0: "18000", 1: "2a000", 2: "3b000", 3: "5d000"}
    lines = [f"node1:100{r}:20{r} [{r}] NCCL INFO comm 0x55d{r}a0 rank {r} nranks 4 cudaDev {r} busId {bus[r]} - "
             "Init COMPLETE" for r in range(4)]
    lines += [f"[rank{r}]:[E1115 12:12:03.000000000 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective "
              "operation timeout: WorkNCCL(SeqNum=5001, OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, "
              "Timeout(ms)=600000) ran for 600012 milliseconds before timing out." for r in (0, 1, 3)]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "dmesg.txt").write_text("2024-11-15T12:02:03,470068+00:00 NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, "
                                        "name=python3, GPU has fallen off the bus.\n", encoding="utf-8")
    a = analyze([str(tmp_path / "dmesg.txt"), str(tmp_path / "train.log")])
    assert a.verdict.root_cause_id == "xid-79-fallen-off-bus"
    b = a.verdict.blame
    assert b is not None
    assert b.culprits == "rank 2 (GPU 0000:3b:00.0)" and b.victims == "ranks 0, 1, 3"
    assert b.why.startswith("GPU 0000:3b:00.0 logged Xid 79 (GPU has fallen off the bus)")


def test_worker_killed_names_the_killed_rank() -> None:
    a = analyze([str(SAMPLE.parent.parent / "worker-killed" / "bundle")])
    b = a.verdict.blame
    assert b is not None and b.culprit_ranks == [1] and b.victim_ranks == [0]
    assert b.why == "rank 1 died of SIGKILL (exitcode -9); the launcher then terminated rank 0"


CORPUS = Path(__file__).parent / "corpus" / "cases"


def test_watchdog_timeouts_alone_name_victims_not_a_culprit() -> None:
    """Real log (tests/corpus/cases/nccl-timeout-tqdm-glued): ranks 0 and 7 time out, nothing says who stopped."""
    case = CORPUS / "nccl-timeout-tqdm-glued"
    a = analyze([str(p) for p in case.iterdir() if p.name != "case.toml"])
    b = a.verdict.blame
    assert a.verdict.root_cause_id == "nccl-watchdog-timeout"
    assert b is not None and b.culprits == "" and b.victim_ranks == [0, 7]
    assert b.line() == ("Culprit: not singled out · victims: ranks 0, 7 — ranks 0, 7 report waiting (timed out); "
                        "the logs give neither the job's size nor the output of a rank that stopped, so the one "
                        "that stopped first cannot be told")


def test_the_same_error_on_two_ranks_makes_neither_a_victim() -> None:
    """Real log (tests/corpus/cases/destroy-pg-devices-busy-via-nccl, pytorch#148150): ranks 1 and 7 both fail
    with the same CUDA error; rank 7 is not 'a victim' of rank 1."""
    a = analyze([str(CORPUS / "destroy-pg-devices-busy-via-nccl" / "traceback.txt")])
    assert a.verdict.root_cause_id == "cuda-devices-unavailable"
    b = a.verdict.blame
    assert b is not None and b.culprit_ranks == [1, 7] and b.victim_ranks == []


def test_single_rank_long_work_names_the_busy_rank_and_what_it_did(tmp_path: Path) -> None:
    lines = ["[rank0]:[2026-05-14 03:00:00,000] INFO Saving model checkpoint to /out/checkpoint-500"]
    lines += [f"[rank{r}]:[E514 03:30:01.000000000 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective "
              "operation timeout: WorkNCCL(SeqNum=9001, OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, "
              "Timeout(ms)=1800000) ran for 1800012 milliseconds before timing out." for r in (1, 2, 3)]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    a = analyze([str(tmp_path / "train.log")])
    assert a.verdict.root_cause_id == "single-rank-long-work"
    b = a.verdict.blame
    assert b is not None and b.culprits == "rank 0" and b.victims == "ranks 1–3"
    assert "rank 0: Saving model checkpoint to /out/checkpoint-500" in b.why


def test_multi_node_culprit_names_its_node(tmp_path: Path) -> None:
    """Two nodes' logs (each line prefixed by torchrun's rank and the node's NCCL host tag): rank 5 on node-b
    stopped printing while the other ranks went on."""
    for node, ranks in (("node-a", range(4)), ("node-b", range(4, 8))):
        lines = [f"{node}:{1000 + r}:{2000 + r} [{r % 4}] NCCL INFO comm 0x5{r}a0 rank {r} nranks 8 cudaDev {r % 4} "
                 f"busId {0x18 + r % 4:x}000 - Init COMPLETE" for r in ranks]
        for step in range(1, 31):
            for r in ranks:
                if r == 5 and step > 3:
                    continue
                lines.append(f"[rank{r}]:2026-05-14 03:{step:02d}:00,{r:03d} INFO step {step} | loss 1.0 | 20 Ktok/s")
        (tmp_path / f"{node}.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    a = analyze([str(tmp_path / "node-a.log"), str(tmp_path / "node-b.log")])
    b = a.verdict.blame
    assert b is not None and b.culprit_ranks == [5]
    assert b.culprits == "rank 5 on node-b"


def test_dt_wording() -> None:
    from forensics.units import fmt_dt

    assert [fmt_dt(s) for s in (0.0, -0.2, -3, 45, 600, 9354.8)] == ["+0 s", "+0 s", "-3 s", "+45 s", "+10 min",
                                                                     "+2.6 h"]
    assert fmt_dt(None) == ""
