"""Run boundaries: where one launch of a job ends and the next begins, within a file or across
the files of one job.

A boundary is a moment after which progress belongs to a new run:

* a launcher or trainer line that says so — torchrun's ``Restarting workers`` / ``Starting
  worker group`` / ``Rendezvous complete``, a resume from a checkpoint (``Resuming from
  checkpoint``, HF ``Continuing training from checkpoint``), a launch banner (``launching 8
  ranks``) — once some progress was seen before it;
* a new recording: a bundle's manifest (``forensics record`` started the job again);
* a step counter that starts again: a progress stream of one rank (across files, by time) whose
  step falls to less than half of what it had reached (at least step 10).

The detectors use boundaries so that a log that ended at a restart is not a stall, ranks are
compared within one run, and throughput is compared across runs (``throughput_across_runs``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from forensics.events import Event
from forensics.lazy_re import lazy_compile
from forensics.match.detectors.common import derived, fmt_num
from forensics.match.detectors.context import memo

__all__ = ["BOUNDARY_LITERALS", "Boundary", "boundaries_of", "run_boundaries", "run_index",
           "throughput_across_runs"]

#: Lines that can mark a new run; also passed to the parsers as notable literals so they become events.
BOUNDARY_LITERALS = ("Restarting workers", "will restart worker group", "Starting worker group", "Rendezvous complete",
                     "esuming from", "esume from", "esuming training", "Continuing training from checkpoint",
                     "Starting elastic_operator")
_BANNER = lazy_compile(
    r"Restarting workers|will restart worker group|Starting worker group|Rendezvous complete for workers"
    r"|[Rr]esum(?:e|ing)(?: training)? from (?:the )?(?:last |latest )?(?:checkpoint|step|ckpt|epoch)"
    r"|Continuing training from checkpoint|Starting elastic_operator")
MIN_STEP_BEFORE_RESET = 10
MIN_READINGS = 3
DROP_RATIO = 0.6


@dataclass(frozen=True)
class Boundary:
    ts: int
    event: Event
    why: str  # "Restarting workers", "step counter reset from 690 to 1", …


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v == v else None


def run_boundaries(events: Sequence[Event]) -> list[Boundary]:
    """Boundaries in time order; only those after the first progress line (the first launch is not one)."""
    progress = [e for e in events if e.kind == "progress" and e.ts is not None]
    if not progress:
        return []
    first_progress = min(e.ts for e in progress if e.ts is not None)
    out: list[Boundary] = []
    for e in events:
        if e.ts is None or e.ts <= first_progress or e.kind in ("progress", "derived"):
            continue
        if e.kind == "recording":  # the start of another bundle of the job: a new launch
            out.append(Boundary(e.ts + 1, e, f"a new recording ({_file_parent(e)})"))
            continue
        m = _BANNER.search(e.message)
        if m:  # 1 ns later: a banner whose time was inferred from the line before it still follows that line
            out.append(Boundary(e.ts + 1, e, m.group(0)))
    announced = [b.ts for b in out]  # banners and new recordings found above
    per_rank: dict[tuple[object, object], list[Event]] = defaultdict(list)
    for e in progress:
        rank = e.rank if e.rank is not None else e.attrs.get("rank")
        if e.attrs.get("desc"):
            continue  # a labelled bar (eval, data loading) counts its own steps
        per_rank[(e.host, rank if isinstance(rank, int | str) else None)].append(e)
    for stream in per_rank.values():
        stream.sort(key=lambda e: e.ts or 0)
        steps = [(e, s) for e in stream if (s := _num(e.attrs.get("step"))) is not None]
        top = None
        resumes_to = _highest_resume_after([s for _, s in steps])
        for i, (e, step) in enumerate(steps):
            if i and any((steps[i - 1][0].ts or 0) < ts <= (e.ts or 0) for ts in announced):
                top = step  # a counter that starts again after a restart already found: the same restart
                continue
            if top is not None and top >= MIN_STEP_BEFORE_RESET and step < top / 2 \
                    and resumes_to[i] < 0.9 * top:
                out.append(Boundary(e.ts or 0, e, f"step counter reset from {fmt_num(top)} to {fmt_num(step)}"))
                top = step
                continue
            top = step if top is None else max(top, step)
    out += _file_restarts(progress, announced)
    out.sort(key=lambda b: b.ts)
    merged: list[Boundary] = []
    for b in out:  # one restart logged by several lines (banner, resume, every rank's reset) is one boundary
        if merged and b.ts - merged[-1].ts <= 15 * 60 * 10**9 and not _progress_between(progress, merged[-1].ts, b.ts):
            continue
        merged.append(b)
    return merged


def _highest_resume_after(steps: Sequence[float]) -> list[float]:
    """Per index ``i``: the highest step that an old counter jumps back to from ``i`` on (``-inf``:
    none). An interleaved loop with its own counter (an evaluation printing ``step 1..50`` between
    training steps) is not a restart when the old counter comes back, in one jump, to where it was
    (to 90 % of the top before the drop, at least)."""
    out = [float("-inf")] * len(steps)
    best = float("-inf")
    for j in range(len(steps) - 2, -1, -1):
        prev, step = steps[j], steps[j + 1]
        if step - prev > max(10.0, prev):
            best = max(best, step)
        out[j] = best
    return out


def _file_restarts(progress: Sequence[Event], announced: Sequence[int] = ()) -> list[Boundary]:
    """A log file whose steps start again low after another file of the job ended high (the restart
    written to a new file): ``restart.log`` starts at step 1 after ``train.log`` ended at step 690."""
    spans: dict[str, list[Event]] = defaultdict(list)
    for e in progress:
        if _num(e.attrs.get("step")) is not None and not e.attrs.get("desc"):
            spans[e.origin.path].append(e)
    ends = {p: (min(evs, key=lambda e: e.ts or 0), max(evs, key=lambda e: e.ts or 0)) for p, evs in spans.items()}
    out = []
    for b_path, (b_first, _) in ends.items():
        for a_path, (_, a_last) in ends.items():
            a_step, b_step = _num(a_last.attrs.get("step")), _num(b_first.attrs.get("step"))
            if a_path == b_path or a_step is None or b_step is None or (b_first.ts or 0) < (a_last.ts or 0):
                continue
            if any((a_last.ts or 0) < ts <= (b_first.ts or 0) for ts in announced):
                continue  # the restart between the two files is already known (a new recording, a banner)
            if a_step >= MIN_STEP_BEFORE_RESET and b_step < a_step / 2:
                out.append(Boundary(b_first.ts or 0, b_first, f"{_file(b_first)} starts again at step "
                                    f"{fmt_num(b_step)} after {_file(a_last)} ended at step {fmt_num(a_step)}"))
                break
    return out


def boundaries_of(events: Sequence[Event]) -> list[Boundary]:
    """:func:`run_boundaries`, kept for the analysis (:mod:`.context`; every detector asks for the same)."""
    return memo("boundaries", events, run_boundaries)


def _progress_between(progress: Sequence[Event], a: int, b: int) -> bool:
    return any(e.ts is not None and a < e.ts < b for e in progress)


def run_index(ts: int | None, boundaries: Sequence[Boundary]) -> int:
    """Which run (0 = before the first boundary) a moment belongs to."""
    if ts is None:
        return 0
    return bisect_right([b.ts for b in boundaries], ts)


_RATE_KEYS = (("tokens_s", "tokens/s"), ("samples_s", "samples/s"), ("it_s", "it/s"))


def throughput_across_runs(events: Sequence[Event], boundaries: Sequence[Boundary]) -> list[Event]:
    """A run that, from its first steps, ran at ``DROP_RATIO`` of the previous run's rate or less: a
    ``throughput-drop`` across a restart (within one run ``throughput_drop`` does the job)."""
    if not boundaries:
        return []
    by_run: dict[int, list[Event]] = defaultdict(list)
    for e in events:
        if e.kind == "progress" and e.ts is not None and not e.attrs.get("desc"):
            by_run[run_index(e.ts, boundaries)].append(e)
    out: list[Event] = []
    runs = sorted(by_run)
    for prev, cur in zip(runs, runs[1:], strict=False):
        for key, unit in _RATE_KEYS:
            before = [v for e in by_run[prev] if (v := _num(e.attrs.get(key))) is not None and v > 0]
            after_pts = [(v, e) for e in by_run[cur] if (v := _num(e.attrs.get(key))) is not None and v > 0]
            if len(before) < MIN_READINGS or len(after_pts) < MIN_READINGS:
                continue
            b, a = median(before[1:] or before), median(v for v, _ in after_pts)
            if a <= DROP_RATIO * b and max(v for v, _ in after_pts) <= 0.75 * b:
                first = after_pts[0][1]
                last_prev = max(by_run[prev], key=lambda e: e.ts or 0)
                bound = boundaries[cur - 1]
                files = (f" ({_file(last_prev)} → {_file(first)})" if _file(last_prev) != _file(first) else "")
                sentence = (f"{unit} fell from {fmt_num(b)} to {fmt_num(a)} ({(a / b - 1) * 100:+.0f} %) across a "
                            f"restart: run {cur + 1} (after '{bound.why}') ran at {fmt_num(a)} from its first step, "
                            f"where run {prev + 1} did {fmt_num(b)}{files}")
                out.append(derived("throughput-drop", sentence, origin=first.origin, ts=first.ts,
                                   end_ts=after_pts[-1][1].ts, ts_source=first.ts_source, source=first.source,
                                   host=first.host, rank=first.rank,
                                   attrs={"before": b, "after": a, "ratio": a / b, "unit": unit,
                                          "readings_after": len(after_pts), "across_runs": True,
                                          "run_before": prev + 1, "run_after": cur + 1,
                                          "boundary": bound.why}))
            break
    return out


def _file(e: Event) -> str:
    return e.origin.path.rsplit("/", 1)[-1]


def _file_parent(e: Event) -> str:
    """The folder an event's file lies in (a bundle's manifest: the bundle)."""
    parts = e.origin.path.rsplit("/", 2)
    return "/".join(parts[-3:-1]) if len(parts) > 2 else (parts[0] if len(parts) == 2 else e.origin.path)
