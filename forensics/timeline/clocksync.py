"""Clock offsets between hosts, estimated from moments every host of a job logs together.

A multi-node job leaves one set of logs per node, stamped by clocks that disagree by seconds to
minutes. Some events must happen at (nearly) the same moment on every host:

- ``step``: the same training step (progress lines);
- ``nccl-init``: NCCL ``Init COMPLETE`` of one communicator (its ``commId`` when the line prints
  one, else its size);
- ``watchdog``: the same collective's watchdog timeout (process group + sequence number; the
  operation type is left out, a desynchronised rank runs another one);
- ``c10d``: other records of one c10d collective (flight-recorder entries);
- ``rendezvous``: the c10d store's rendezvous lines (``Rendezvous complete``, ``joined``);
- ``restart``: torchrun restarting its worker group (``will restart worker group``,
  ``Starting worker group``);
- ``slurm-step``: Slurm starting one job step on every node (slurmd's ``launch task StepId=…``;
  ``srun -v``'s ``launching StepId=… on host …`` on the submitting host);
- ``slurm-job``: a job getting its nodes (slurmctld's ``sched: Allocate JobId=…``, the batch
  host's ``Launching batch job …``, ``srun -v``'s ``job … has been allocated resources``).
- ``launch``: a per-node launcher starting its workers (DeepSpeed's ``launch.py`` on each node
  of a pdsh run: ``nnodes=2, num_local_procs=8, node_rank=1``) — a loose moment: each node's
  ssh, shell and Python start take their own time (seconds, on a cold node a minute);
- ``clean-exit``: the launcher seeing its workers end well (``Process N exits successfully``) —
  loose too: rank 0 often has more to do at the end (printing, saving).
  Loose moments disagree with each other when they are loose, and kinds that disagree widen the
  uncertainty (below), so a launcher start that lags by a minute is not taken for a clock skew.
  A step's or a job's *end* is no such moment: the node that failed ends first, and the others
  only when they are killed (perhaps a watchdog timeout later), which is what the timeline is
  meant to show.

Each key names one such moment; per host the earliest time of each key is kept (several ranks of
one host log it). Offsets against a reference host (the one with the most keys) are the median of
the differences, with a robust uncertainty (1.4826·MAD/√n, at least the stamps' resolution, at
least what the kinds' own uncertainties give together, at least half the range of their medians);
hosts that share no key with the reference chain through a host that does. Each kind of moment
also gets its own median and uncertainty, so the report can say what the offset rests on.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from forensics.events import Event, TsSource
from forensics.lazy_re import lazy_compile

__all__ = ["SYNC_KINDS", "ClockEstimate", "ClockOffset", "KindOffset", "consistent", "describe_offset",
           "estimate", "kinds_json", "sync_key"]

NS = 1_000_000_000
_SHAPE_DIGITS = lazy_compile(r"\d+(?:\.\d+)?")

#: the kinds of shared moment, in the order the report lists them, with their names in words
SYNC_KINDS = {
    "nccl-init": "NCCL init",
    "rendezvous": "rendezvous",
    "watchdog": "watchdog timeout",
    "c10d": "c10d collective",
    "restart": "torchrun restart",
    "slurm-step": "Slurm step start",
    "slurm-job": "Slurm job start",
    "launch": "launcher start",
    "clean-exit": "clean exit",
    "step": "training step",
}


class ClockOffset(NamedTuple):
    """Seconds to add to one host's stamps to align it with the reference host."""

    offset_s: float
    uncertainty_s: float
    n_pairs: int


class KindOffset(NamedTuple):
    """The offset one kind of shared moment alone gives (see :data:`SYNC_KINDS`)."""

    kind: str
    offset_s: float
    uncertainty_s: float
    n_pairs: int


class ClockEstimate(NamedTuple):
    reference: str | None
    offsets: dict[str, ClockOffset]
    #: per host: the offset each kind of shared moment gives, in :data:`SYNC_KINDS` order
    by_kind: dict[str, list[KindOffset]]


_NUM_RE = lazy_compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?")
_SYNC_SOURCES = (TsSource.EXACT, TsSource.LOCAL, TsSource.RECEIPT, TsSource.BOOT_RELATIVE)
_COMM_ID = lazy_compile(r"\bcommId (0x[0-9a-fA-F]+)")
_WATCHDOG = lazy_compile(r"Watchdog caught collective operation timeout|detected by watchdog at work")
_RESTART = lazy_compile(r"will restart worker group|Restarting worker group|Starting worker group", re.I)
_STEP_LAUNCH = lazy_compile(r"launch task (?:StepId=)?(?P<id>\d+\.\w+)")


def _normalized(text: str, host: str | None) -> str:
    if host:
        text = text.replace(host, "H")
    return " ".join(_NUM_RE.sub("#", text).lower().split())


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def sync_key(e: Event) -> tuple[Any, ...] | None:
    """A key naming a moment every host of a job logs (``None`` for other events); its first
    element is the kind of moment (:data:`SYNC_KINDS`)."""
    a = e.attrs
    kind, msg = e.kind, e.message
    if kind == "progress":  # the same step of the same loop: its line's shape (a pipeline's roles count apart)
        step = _int(a.get("step"))
        return ("step", _SHAPE_DIGITS.sub("#", msg)[:48], step) if step is not None else None
    if kind == "nccl" and "Init COMPLETE" in msg:
        m = _COMM_ID.search(msg)
        return ("nccl-init", m.group(1).lower()) if m else ("nccl-init", a.get("nranks"))
    if kind == "c10d" and _int(a.get("seq")) is not None:
        if "terminated with exception" in msg:
            return None  # printed when the process is taken down, not when the collective failed
        if _WATCHDOG.search(msg):
            return ("watchdog", a.get("pg"), a.get("seq"))
        return ("c10d", a.get("pg"), a.get("seq"), str(a.get("op_type") or "").lower())
    if kind in ("torchrun", "log", "warning", "c10d"):
        if "endezvous" in msg and "imeout" not in msg and "rror" not in msg:
            return ("rendezvous", _normalized(msg, e.host))
        if _RESTART.search(msg):
            return ("restart", _normalized(msg, e.host))
    if kind == "slurm":
        return _slurm_key(a)
    if kind == "torchrun" and a.get("launch"):
        return ("launch", a.get("nnodes"))
    if kind == "torchrun" and a.get("exitcode") == 0 and "exits successfully" in msg:
        return ("clean-exit",)
    if kind == "log":
        m = _STEP_LAUNCH.search(msg)
        if m:
            return ("slurm-step", m.group("id"))
    return None


def _slurm_key(a: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """A step launched on a node (``slurm-step``) or a job given its nodes (``slurm-job``)."""
    event, job, step = a.get("step_event"), a.get("job"), a.get("step")
    if not job:
        return None
    if event == "start" and step == "batch":
        return ("slurm-job", str(job))  # the batch host starts the job the moment it is allocated
    if event == "start" and step:
        return ("slurm-step", f"{job}.{step}")
    if event == "allocated":
        return ("slurm-job", str(job))
    return None


def _first_times(events: Iterable[Event]) -> dict[str, dict[tuple[Any, ...], int]]:
    """Per host, per sync key, the earliest time (several ranks of one host log the same key)."""
    out: dict[str, dict[tuple[Any, ...], int]] = defaultdict(dict)
    for e in events:
        if e.host is None or e.ts is None or e.ts_source not in _SYNC_SOURCES:
            continue
        key = sync_key(e)
        if key is None:
            continue
        seen = out[e.host].get(key)
        if seen is None or e.ts < seen:
            out[e.host][key] = e.ts
    return out


def _robust(diffs: list[int]) -> tuple[float, float]:
    """Median (s) and its uncertainty (s): 1.4826·MAD/√n, at least the stamps' resolution."""
    med = statistics.median(diffs)
    n = len(diffs)
    if n == 1:
        return med / NS, 1.0
    mad = statistics.median(abs(d - med) for d in diffs)
    whole_seconds = all(d % NS == 0 for d in diffs)
    floor = 0.5 if whole_seconds else 0.001
    return med / NS, max(1.4826 * mad / NS / n**0.5, floor)


def estimate(events: Iterable[Event]) -> ClockEstimate:
    """Reference host, per-host offsets and their per-kind evidence."""
    times = _first_times(events)
    if len(times) < 2:
        return ClockEstimate(next(iter(times)) if times else None, {}, {})
    ref = max(sorted(times), key=lambda h: len(times[h]))
    known: dict[str, float] = {ref: 0.0}
    offsets: dict[str, ClockOffset] = {ref: ClockOffset(0.0, 0.0, 0)}
    by_kind: dict[str, list[KindOffset]] = {}
    while True:
        best: tuple[int, str] | None = None
        for h in sorted(times):
            if h in known:
                continue
            common = sum(len(times[h].keys() & times[g].keys()) for g in known)
            if common and (best is None or common > best[0]):
                best = (common, h)
        if best is None:
            break
        h = best[1]
        grouped: dict[str, list[int]] = defaultdict(list)
        for g in known:
            for k in times[h].keys() & times[g].keys():
                grouped[k[0]].append(times[g][k] + int(known[g] * NS) - times[h][k])
        diffs = [d for ds in grouped.values() for d in ds]
        off, unc = _robust(diffs)
        kinds = []
        for kind in SYNC_KINDS:
            if grouped.get(kind):
                k_off, k_unc = _robust(grouped[kind])
                kinds.append(KindOffset(kind, round(k_off, 6), round(k_unc, 6), len(grouped[kind])))
        # Never surer than the kinds together (inverse-variance: coarse stamps of one kind are not
        # made fine by another kind's pairs), and kinds that disagree widen it to half their range.
        unc = max(unc, sum(1 / max(k.uncertainty_s, 1e-6) ** 2 for k in kinds) ** -0.5,
                  (max(k.offset_s for k in kinds) - min(k.offset_s for k in kinds)) / 2)
        known[h] = off
        offsets[h] = ClockOffset(round(off, 6), round(unc, 6), len(diffs))
        by_kind[h] = kinds
    return ClockEstimate(ref, offsets, by_kind)


def consistent(off: ClockOffset) -> bool:
    """Worth applying: two or more pairs, an offset beyond its uncertainty, and pairs that agree
    (their spread, uncertainty·√n, under half the offset: a straggler is not a clock skew)."""
    if off.n_pairs < 2:
        return False
    spread = off.uncertainty_s * off.n_pairs**0.5
    return abs(off.offset_s) > max(off.uncertainty_s, 2 * spread)


def _seconds(x: float) -> str:
    return f"{x:+.3f} s"


def describe_offset(off: ClockOffset, kinds: Iterable[KindOffset] = (), given: bool = False,
                    applied: bool = False) -> str:
    """One host's offset in words: ``-720.004 s ±0.012 s (14 shared moments: 2 NCCL init
    -720.010 s ±1.000 s, 12 training step …; applied)``."""
    if given:
        return f"{_seconds(off.offset_s)} (given)"
    kinds = list(kinds)
    what = f"{off.n_pairs} shared moment{'s' if off.n_pairs != 1 else ''}"
    if len(kinds) > 1:
        what += ": " + ", ".join(f"{k.n_pairs} {SYNC_KINDS.get(k.kind, k.kind)} {_seconds(k.offset_s)} "
                                 f"±{k.uncertainty_s:.3f} s" for k in kinds)
    elif kinds:
        what += f" of {SYNC_KINDS.get(kinds[0].kind, kinds[0].kind)}"
    state = "applied" if applied else "not applied"
    return f"{_seconds(off.offset_s)} ±{off.uncertainty_s:.3f} s ({what}; {state})"


def kinds_json(kinds: Iterable[KindOffset]) -> dict[str, dict[str, float | int]]:
    """The per-kind evidence as the JSON contract writes it."""
    return {k.kind: {"offset_s": k.offset_s, "uncertainty_s": k.uncertainty_s, "pairs": k.n_pairs} for k in kinds}
