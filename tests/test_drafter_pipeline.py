"""Report 2's pipeline on one GPU (samples/recorded/drafter-pipeline-*): the stunted drafters and the
fall across runs, and the per-process detector on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze
from forensics.events import Event, Origin, TsSource
from forensics.match.detectors.stunted import stunted_workers

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "recorded"
FITS, MARGIN = (str(SAMPLES / f"drafter-pipeline-{n}" / "bundle") for n in ("fits", "margin"))


def _derived(paths: list[str], detector: str) -> list[Event]:
    return [e for e in analyze(paths).timeline.events if e.kind == "derived" and e.attrs.get("detector") == detector]


def test_run_b_names_the_two_stunted_drafters() -> None:
    (found,) = _derived([MARGIN], "stunted-workers")
    assert found.attrs["group_size"] == 3 and len(found.attrs["stunted_pids"]) == 2
    assert found.attrs["peer_peak_mib"] > 1.25 * max(found.attrs["stunted_peak_mib"])


def test_run_a_has_no_stunted_workers() -> None:
    assert _derived([FITS], "stunted-workers") == []


@pytest.mark.slow
def test_run_b_alone_names_ranks_6_and_7() -> None:
    analysis = analyze([MARGIN])
    blame = analysis.verdict.blame
    assert blame is not None and blame.line().startswith("Culprit: ranks 6, 7"), analysis.verdict.summary
    (silent,) = _derived([MARGIN], "rank-silent")
    assert silent.attrs["silent"] == [6, 7] and silent.attrs["going"] == [5]


def test_both_runs_of_the_job_show_the_fall_across_the_new_recording() -> None:
    analysis = analyze([FITS, MARGIN])
    root = analysis.verdict.root_cause
    assert root is not None and root.signature == "silent-worker-stall", analysis.verdict.summary
    assert analysis.verdict.blame is not None and analysis.verdict.blame.culprit_ranks == [6, 7]
    assert "throughput-collapse" in {f.signature for f in analysis.verdict.consequences}
    drop = next(e for e in root.evidence if e.attrs.get("detector") == "throughput-drop")
    assert drop.attrs["across_runs"] and drop.attrs["ratio"] < 0.5
    assert drop.attrs["boundary"].startswith("a new recording")


def test_ranks_that_all_progress_are_not_silent() -> None:
    assert _derived([FITS], "rank-silent") == []


def _proc(pid: int, plateaus: tuple[float, ...], peak: float) -> Event:
    return Event(ts=pid, ts_source=TsSource.EXACT, source="nvml", kind="gpu-process", message=f"pid {pid}",
                 origin=Origin("nvml.jsonl", pid), gpu="0", pid=pid,
                 attrs={"pid": pid, "plateaus": plateaus, "peak_mib": peak, "last_ts": pid})


def test_workers_that_grow_alike_or_a_pair_are_not_stunted() -> None:
    alike = [_proc(p, (518.0, 1320.0, 4940.0), 4940.0) for p in (1, 2, 3)]
    pair = [_proc(4, (700.0, 900.0), 3000.0), _proc(5, (700.0, 900.0), 900.0)]
    assert stunted_workers(alike + pair) == []


def test_the_finest_shared_plateau_makes_the_group() -> None:
    # Everyone passes through the bare context (1250); targets share 2800, drafters 2052.
    targets = [_proc(p, (1250.0, 2800.0), 2800.0) for p in (10, 11, 12, 13, 14)]
    drafters = [_proc(20, (1250.0, 2052.0, 3570.0), 5992.0), _proc(21, (1250.0, 2052.0), 4562.0),
                _proc(22, (2052.0, 3570.0), 3570.0)]
    (found,) = stunted_workers(targets + drafters)
    assert found.attrs["stunted_pids"] == [21, 22] and found.attrs["group_size"] == 3


def test_rank_zero_only_progress_is_no_silent_worker_without_memory_evidence(tmp_path: Path) -> None:
    """A program that logs progress on rank 0 only: every rank announces itself, one progresses. With no
    per-process memory showing stunted workers this is ordinary logging, never a stall."""
    lines = [f"[rank {r}] worker ready: weights 1665 MiB" for r in range(4)]
    lines += [f"[rank 0] step {s} loss {1 / s:.4f} | 21,500 tokens/s" for s in range(1, 40)]
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    analysis = analyze([str(log)])
    activity = [e for e in analysis.timeline.events if e.kind == "rank-activity"]
    assert sorted(e.rank for e in activity if e.rank is not None) == [0, 1, 2, 3]
    assert _derived([str(log)], "rank-silent") == []
    assert analysis.verdict.root_cause is None
