"""This run before the run's past: what a recording saw of its own run, and what is only context.

``forensics record`` keeps five minutes of kernel log from before the command started (``kmsg.log``
begins with the ring buffer), so a bundle may hold another, earlier run's Xid on the same GPU. Those
lines are *context*: they explain this run only when they concern its GPUs and no event of its own
does. :func:`scope` reads the recordings' start times (``recording`` events, one per bundle) and this
run's processes (the recorded child, NVML's per-process list during the recording, the workers' own
lines, NCCL's and the launcher's pids), and marks every event from before its host's recording began.

The verdict (:mod:`forensics.match.verdict`) then times a finding by its own events, shows them first,
and never lets a finding made only of context be the root cause while another finding has events of
this run; the culprit line (:mod:`forensics.match.blame`) names the processes of this run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from forensics.events import Event

__all__ = ["RunScope", "scope"]

#: Clock slack between the recorder's start and the kernel's stamps.
SLACK_NS = 2 * 10**9
#: Kinds that describe the recording itself (never context).
_RECORDER = frozenset({"recording", "exit", "recorder"})
#: Kinds whose ``pid`` is a process of the recorded run when seen during it.
_RUN_PID_KINDS = frozenset({"gpu-process", "rank-activity", "nccl", "torchrun"})


@dataclass
class RunScope:
    """The recorded runs' start per host, their processes, and the events that are context."""

    starts: dict[str | None, int] = field(default_factory=dict)
    pids: set[int] = field(default_factory=set)
    gpus: set[str] = field(default_factory=set)
    context: set[int] = field(default_factory=set)  # id() of events from before their recording began

    def is_context(self, e: Event) -> bool:
        return id(e) in self.context

    def own(self, events: Sequence[Event]) -> list[Event]:
        """``events`` of this run (not context); all of them when none is."""
        mine = [e for e in events if id(e) not in self.context]
        return mine or list(events)

    def ordered(self, events: Sequence[Event]) -> list[Event]:
        """This run's events first — those naming its processes before the others — then the context."""
        def key(e: Event) -> int:
            if id(e) in self.context:
                return 2
            pid = e.pid if e.pid is not None else e.attrs.get("pid")
            return 0 if not isinstance(pid, int) or pid in self.pids or not self.pids else 1

        return sorted(events, key=key)


def _start_of(e: Event, starts: dict[str | None, int]) -> int | None:
    if e.host in starts:
        return starts[e.host]
    if len(starts) == 1:
        return next(iter(starts.values()))
    return None


def scope(events: Sequence[Event]) -> RunScope:
    """The run scope of a timeline (empty when no recording is among the inputs)."""
    out = RunScope()
    for e in events:
        if e.kind == "recording" and e.ts is not None:
            out.starts[e.host] = min(e.ts, out.starts.get(e.host, e.ts))
            child = e.attrs.get("child_pid")
            if isinstance(child, int):
                out.pids.add(child)
    if not out.starts:
        return out
    for e in events:
        if e.kind in _RECORDER or e.ts is None:
            continue
        start = _start_of(e, out.starts)
        if start is None:
            continue
        if e.ts < start - SLACK_NS:
            out.context.add(id(e))
            continue
        pid = e.pid if e.pid is not None else e.attrs.get("pid")
        if e.kind in _RUN_PID_KINDS and isinstance(pid, int) and not isinstance(pid, bool):
            out.pids.add(pid)
        if e.kind == "gpu-process" and e.gpu:
            out.gpus.add(e.gpu)
    return out
