"""Detectors: small functions that read GPU metrics, progress lines, recorder health
and c10d records, and add *derived* events (kind ``derived``, message
``[<detector>] <sentence>``, attrs ``detector``, ``end_ts`` and the numbers) that
signatures anchor on with ``kinds = ["derived"]`` and ``literals = ["[<detector>]"]``.

| detector | reads | fires when |
|---|---|---|
| ``gpu-idle-while-peers-busy`` | metrics | a GPU of the job at ≤ 5 % while a peer is ≥ 80 %, 60 s (*) (**) |
| ``spinning-collective`` | metrics | ≥ 2 GPUs at ≥ 90 % utilization drawing ≤ 30 % of their power limit (**) |
| ``clock-throttle`` | metrics | HW slowdown / thermal / power-brake clock reasons under load, 10 s |
| ``pcie-link-below-max`` | metrics | link gen or width below max while ≥ 50 % busy, 30 s |
| ``memory-margin`` | metrics, OOM text | peak use within 512 MiB + 0.5 % of capacity; an OOM short by ≤ 5 % |
| ``no-progress`` | progress events | silence after the last progress line ≥ 10 step-times and ≥ 3 min |
| ``throughput-drop`` | progress events | a rate at ≤ 60 % of its earlier median, never back above 75 % |
| ``nvml-unresponsive`` | recorder events | the recorder reports NVML calls that did not return |
| ``nccl-desync`` / ``rank-behind`` | c10d events | see :mod:`.ranks` |
| ``rank-behind`` / ``nccl-desync`` / ``hang-stack`` | stack dumps | see :mod:`.stacks` |
| ``stunted-workers`` | ``gpu-process`` events | workers that started alike on one GPU grew apart (:mod:`.stunted`) |
| ``idle-workers`` | ``gpu-process`` events | processes idle to the end (SM 0 %) beside busy peers (:mod:`.stunted`) |
| ``gpu-odd-one-out`` | metrics | last minute: idle GPUs of the job with much less memory than peers (***) |
| ``rank-silent`` | progress events | ranks whose progress stopped long before their peers' in one run (***) |
| ``throughput-drop`` | progress, run boundaries | also: a restarted run at ≤ 60 % of the previous run's rate (****) |
| ``rank-silent`` | ``rank-activity`` events | workers whose lines stopped while peers went on (:mod:`.stopped`) |
| ``queue-backpressure`` | progress lines | a pipeline's queues filled up or drained (:mod:`.queues`) |

``no-progress``, ``throughput-drop`` and ``rank-silent`` read run boundaries (:mod:`.runs`): a
stream that ended at a restart is observed until the restart, and runs are compared, not merged.

(*) durations apply to dense series; on a few snapshots the last ones count (see :mod:`.frames`).
(**) only when the GPU never recovered afterwards, or the state lasted 10 min (a checkpoint save is normal).
(***) see :mod:`.odd_one_out`. (****) see :mod:`.runs`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from forensics.events import Event
from forensics.match.detectors.context import DetectorContext, active
from forensics.match.detectors.gpu_metrics import (
    clock_throttle,
    gpu_idle_while_peers_busy,
    memory_margin_nvml,
    pcie_link_below_max,
    spinning_collective,
)
from forensics.match.detectors.odd_one_out import gpu_odd_one_out, rank_silent
from forensics.match.detectors.oom_margin import memory_margin_oom
from forensics.match.detectors.progress import no_progress, throughput_drop
from forensics.match.detectors.queues import queue_backpressure
from forensics.match.detectors.ranks import cross_rank
from forensics.match.detectors.recorder_health import nvml_unresponsive
from forensics.match.detectors.runs import boundaries_of, throughput_across_runs
from forensics.match.detectors.stacks import stack_dumps
from forensics.match.detectors.stopped import missing_waiters, stopped_workers
from forensics.match.detectors.stunted import idle_workers, silent_stunted_ranks, stunted_workers
from forensics.timeline.merge import Timeline

__all__ = ["DETECTORS", "live_stall_thresholds", "run_detectors"]


def _end_of_observation(timeline: Timeline) -> int | None:
    span = timeline.span
    ends = [t for t in (span[1] if span else None, timeline.observed_until) if t is not None]
    return max(ends) if ends else None


def live_stall_thresholds(min_s: float, steps: int) -> None:
    """For the live watcher's process (forensics/live): a stall (no progress, a rank silent while its
    peers go on, a GPU idle or spinning while its peers work) counts after ``min_s`` seconds and
    ``steps`` step-times instead of the post-mortem's 3 min / 10 step-times and 60 s, and a young
    NVML series is a series, not a few snapshots whose last state counts at once."""
    from forensics.match.detectors import frames, gpu_metrics, odd_one_out, progress

    progress.MIN_STALL_NS = odd_one_out.MIN_SILENT_NS = gpu_metrics.MIN_STALL_NS = int(min_s * 1e9)
    progress.STALL_STEPS = odd_one_out.SILENT_STEPS = steps
    frames.SPARSE_FRAMES = 0


def _clean_exit(events: Sequence[Event]) -> bool:
    """The recorded run ended with status 0 (a long quiet end is then not a stall)."""
    return any(e.kind in ("exit", "recording") and e.attrs.get("exit_code") == 0 for e in events)


def _no_progress(t: Timeline) -> list[Event]:
    return [] if _clean_exit(t.events) else no_progress(t.events, _end_of_observation(t), boundaries_of(t.events))


def _rank_silent(t: Timeline) -> list[Event]:
    """Ranks whose progress stopped, then workers whose own lines stopped (:mod:`.stopped`)."""
    bounds = boundaries_of(t.events)
    by_progress = rank_silent(t.events, bounds)
    return by_progress + stopped_workers(t.events, bounds, stunted_workers(t.events) + idle_workers(t.events),
                                         by_progress)


def _cross_rank(t: Timeline) -> list[Event]:
    """Ranks that fell behind or ran another collective; workers named by node or process only, too."""
    found = cross_rank(t.events)
    return found + missing_waiters(t.events, found)


def _workers_on_gpus(t: Timeline) -> list[Event]:
    """Per-process memory and utilization: stunted and idle workers, and the silent ranks they explain."""
    bounds = boundaries_of(t.events)
    loss = bool(throughput_drop(t.events, bounds) or throughput_across_runs(t.events, bounds)
                or queue_backpressure(t.events))
    return stunted_workers(t.events) + idle_workers(t.events, corroborated=loss) + silent_stunted_ranks(t.events)


DETECTORS: tuple[tuple[str, Callable[[Timeline], list[Event]]], ...] = (
    ("gpu-idle-while-peers-busy", lambda t: gpu_idle_while_peers_busy(t.metrics)),
    ("spinning-collective", lambda t: spinning_collective(t.metrics)),
    ("clock-throttle", lambda t: clock_throttle(t.metrics)),
    ("pcie-link-below-max", lambda t: pcie_link_below_max(t.metrics)),
    ("memory-margin", lambda t: memory_margin_nvml(t.metrics) + memory_margin_oom(t.events)),
    ("no-progress", _no_progress),
    ("throughput-drop", lambda t: throughput_drop(t.events, boundaries_of(t.events))
     + throughput_across_runs(t.events, boundaries_of(t.events))),
    ("gpu-odd-one-out", lambda t: gpu_odd_one_out(t.metrics, t.events)),
    ("rank-silent", _rank_silent),
    ("queue-backpressure", lambda t: queue_backpressure(t.events)),
    ("nvml-unresponsive", lambda t: nvml_unresponsive(t.events)),
    ("cross-rank", _cross_rank),
    ("stack-dumps", lambda t: stack_dumps(t.events)),
    ("stunted-workers", _workers_on_gpus),
)


def run_detectors(timeline: Timeline) -> tuple[list[Event], list[str]]:
    """Every detector's derived events, and a warning for any detector that failed
    (a detector bug costs that detector, not the analysis). What the detectors share lives in one
    :class:`~.context.DetectorContext` of this call, never seen by another analysis."""
    out: list[Event] = []
    warnings: list[str] = []
    with active(DetectorContext()):
        for name, detect in DETECTORS:
            try:
                out.extend(detect(timeline))
            except Exception as exc:  # noqa: BLE001 - reported, never raised into the analysis
                warnings.append(f"detector {name} failed: {type(exc).__name__}: {exc}")
    return out, warnings
