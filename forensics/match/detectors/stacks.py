"""Stack dumps compared across ranks (kind ``stack`` events: py-spy, faulthandler, gdb).

A hung job is usually every rank waiting in the same collective for one rank that is somewhere
else. With the dumps of several processes side by side:

* all but a few wait in one collective and the others are in *another* collective →
  ``nccl-desync`` (the ranks issued different collectives: a code-path bug);
* all but a few wait in one collective and the others are elsewhere (compute, the DataLoader,
  I/O, a lock, a CUDA synchronization, a checkpoint save) → ``rank-behind``: that rank is the
  culprit and the others its victims (``culprit_work`` says when it is work only some ranks do:
  a checkpoint save or an evaluation, which ``single-rank-long-work`` anchors on);
* every dumped process waits in the same collective → ``hang-stack``: the rank they wait for
  was not dumped, or the transport between them hangs.

A single process (or processes that are not in a collective) waiting in the DataLoader, a queue,
a lock, the rendezvous store, a CUDA synchronization or a collective → ``hang-stack``, naming it.
A dump of a process that is simply running code gives no derived event (it still counts as a
failure the signatures do not know: see :mod:`forensics.match.unrecognized`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from forensics.events import Event, Severity
from forensics.findings import number_ranges
from forensics.match.detectors.common import derived
from forensics.parsers.producers.hang_stack import WAITS, words

__all__ = ["stack_dumps"]


def _who(e: Event) -> str:
    if e.rank is not None:
        return f"rank {e.rank}"
    pid = e.attrs.get("pid")
    return f"pid {pid}" if pid is not None else f"the dump at {e.origin}"


def _op(e: Event) -> str:
    op = str(e.attrs.get("op") or "")
    return re.sub(r"[^a-z]", "", op.lower()) or "?"


def _where(e: Event) -> str:
    cat = str(e.attrs.get("waiting_in"))
    frame = str(e.attrs.get("frame") or "")
    m = re.match(r"^(.*) \((.*)\)$", frame)
    text = words(cat) + (f": {m.group(1)} at {m.group(2)}" if m else f": {frame}" if frame else "")
    context = e.attrs.get("context")
    if context and context != cat:
        text += f", within {words(str(context))}"
    return text


def _work(events: Sequence[Event]) -> str:
    """``checkpoint`` / ``evaluation`` when every rank elsewhere does work only some ranks do, else ``other``."""
    kinds = {str(e.attrs.get("context") or e.attrs.get("waiting_in")) for e in events}
    return kinds.pop() if len(kinds) == 1 and kinds <= {"checkpoint", "evaluation"} else "other"


def _group(events: Sequence[Event]) -> list[Event]:
    """The last dump of each process (a rank dumped twice is one process)."""
    last: dict[tuple[object, ...], Event] = {}
    for e in events:
        if e.rank is not None:
            key: tuple[object, ...] = (e.host, "rank", e.rank)
        elif e.attrs.get("pid") is not None:
            key = (e.host, "pid", e.attrs.get("pid"))
        else:
            key = ("dump", e.origin.path, e.origin.line)
        last[key] = e
    return list(last.values())


def _names(events: Sequence[Event]) -> str:
    ranks = [e.rank for e in events if e.rank is not None]
    if len(ranks) == len(events):
        return ("rank " if len(ranks) == 1 else "ranks ") + number_ranges(ranks)
    return ", ".join(_who(e) for e in events)


def _emit(detector: str, sentence: str, at: Event, evidence: Sequence[Event], attrs: dict[str, object],
          rank: int | None = None) -> Event:
    ts = [e.ts for e in evidence if e.ts is not None]
    return derived(detector, sentence, origin=at.origin, ts=min(ts) if ts else at.ts,
                   end_ts=max(ts) if ts else None, host=at.host, rank=rank, severity=Severity.ERROR,
                   attrs={"evidence": "stack-dumps", "dumps": len(evidence), **attrs})


def stack_dumps(events: Sequence[Event]) -> list[Event]:
    procs = _group([e for e in events if e.kind == "stack"])
    if not procs:
        return []
    in_coll = [e for e in procs if e.attrs.get("waiting_in") == "collective"]
    out: list[Event] = []
    if len(procs) >= 2 and in_coll:
        by_op: dict[str, list[Event]] = {}
        for e in in_coll:
            by_op.setdefault(_op(e), []).append(e)
        main_op, waiting = max(by_op.items(), key=lambda kv: len(kv[1]))
        odd = [e for e in procs if e not in waiting]
        if odd and len(odd) <= len(waiting):
            op_name = str(waiting[0].attrs.get("op") or main_op)
            others = f"{_names(waiting)} wait in {op_name}"
            elsewhere = [e for e in odd if e.attrs.get("waiting_in") != "collective"]
            other_coll = [e for e in odd if e.attrs.get("waiting_in") == "collective"]
            if other_coll:
                parts = "; ".join(f"{_who(e)} in {e.attrs.get('op')}" for e in other_coll)
                out.append(_emit("nccl-desync", f"ranks wait in different collectives (stack dumps): {others}; "
                                 f"{parts}", other_coll[0], procs,
                                 {"culprits": [_who(e) for e in other_coll], "op": op_name}))
            if elsewhere:
                first = elsewhere[0]
                where = "; ".join((f"{_who(e)} " if len(elsewhere) > 1 else "") + _where(e) for e in elsewhere)
                verb = "is" if len(elsewhere) == 1 else "are"
                out.append(_emit("rank-behind", f"{_names(elsewhere)} {verb} elsewhere ({where}) while {others} "
                                 "(stack dumps)", first, procs,
                                 {"culprits": [_who(e) for e in elsewhere], "op": op_name,
                                  "where": [str(e.attrs.get("waiting_in")) for e in elsewhere],
                                  "culprit_work": _work(elsewhere),
                                  "victims": [_who(e) for e in waiting]},
                                 rank=first.rank))
            return out
        if not odd:
            op_name = str(waiting[0].attrs.get("op") or main_op)
            out.append(_emit("hang-stack", f"all {len(procs)} dumped processes wait in {op_name} (stack dumps); "
                             "none of them is elsewhere: the rank they wait for was not dumped, or the transport "
                             "between them hangs", waiting[0], procs, {"where": "collective", "op": op_name}))
            return out
    for e in procs:
        cat = str(e.attrs.get("waiting_in"))
        if cat in WAITS:
            out.append(_emit("hang-stack", f"{_who(e)} waits in {_where(e)} (stack dump)", e, [e],
                             {"where": cat, "op": e.attrs.get("op")}, rank=e.rank))
    return out
