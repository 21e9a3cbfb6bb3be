"""Cross-rank reasoning on collective failures (kind ``c10d`` events: watchdog records
and flight-recorder entries).

Each rank that reports a stuck collective says *which* one: process group, SeqNum,
OpType and element count. Comparing the ranks tells two stories apart:

* ``nccl-desync`` — at the *same* SeqNum the ranks ran *different* collectives
  (another OpType, or another element count where sizes must agree): the code
  issued different collectives on different ranks, a program bug, not hardware.
  Ranks that merely sit at different SeqNums are not a desync: each rank reports
  its oldest unfinished work, and under FSDP the ranks are often a few collectives
  apart while all of them run the same program.
* ``rank-behind`` — the ranks agree, and one rank fell behind: it never enqueued
  the collective the others wait in (``last enqueued`` below it), it is one of a
  minority still stuck in an earlier SeqNum that the others completed, or it is
  missing from the reports (of a known world size). That rank is dead, stuck, or
  busy with work the others do not do.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from forensics.events import Event, Severity
from forensics.findings import number_ranges
from forensics.match.detectors.common import derived
from forensics.values import as_int as _int

__all__ = ["counted_ranks", "cross_rank", "is_wait"]

#: Without process-group names, SeqNums further apart than this belong to different groups.
SEQ_NEAR = 64
#: No job has this many ranks: a larger rank or world size is a garbled number, not evidence
#: (``[Rank 4294967296]`` once made ``range(world)`` take all the machine's memory).
MAX_RANKS = 1 << 20
#: Runs of ranks a sentence lists before "… (N more)" (a sentence stays bounded at 2048 ranks).
MAX_PARTS = 12


@dataclass(frozen=True)
class _Wait:
    """One rank waiting in one collective."""

    event: Event
    rank: int
    pg: str | None
    seq: int | None
    op: str | None  # as printed
    numel_in: int | None
    numel_out: int | None
    last_enqueued: int | None

    @property
    def op_key(self) -> str | None:
        if self.op is None:
            return None
        return re.sub(r"[^a-z]", "", self.op.lower().removeprefix("nccl:")) or None

    def describe(self) -> str:
        parts = []
        if self.op:
            parts.append(self.op)
        if self.seq is not None:
            parts.append(f"SeqNum {self.seq}")
        if self.numel_in is not None:
            parts.append(f"({self.numel_in:,} elements)")
        return " ".join(parts) or "an unknown collective"


def _rank(e: Event) -> int | None:
    rank = e.rank if e.rank is not None else _int(e.attrs.get("rank"))
    return rank if rank is not None and 0 <= rank < MAX_RANKS else None


def _pg(e: Event) -> str | None:
    pg = e.attrs.get("pg")
    if pg is None or pg == "":
        return None
    m = re.search(r"\d+", str(pg))
    return m.group(0) if m else str(pg)


#: A rank waiting in a gloo collective that timed out (gloo's own wording, in a traceback or a C++ line).
_GLOO_WAIT = re.compile(r"gloo\S*:\d+\] Timed out waiting (\d+)ms for (?:send|recv) operation|"
                        r"\[[^\]]*gloo[^\]]*\] (?:Connection closed by peer|Read error|Timed out)")
#: The collective a traceback's frames were in (``distributed_c10d.py:all_reduce``).
_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "barrier", "all_to_all", "reduce",
                "gather", "scatter", "send", "recv", "monitored_barrier", "all_gather_into_tensor",
                "reduce_scatter_tensor", "all_gather_object", "broadcast_object_list")


def counted_ranks(e: Event) -> list[int]:
    """Every rank an event stands for: its own, and those of the lines its template counted
    (``ranks`` / ``repeat_ranks``, parsers/common/templates.py)."""
    out: set[int] = set()
    rank = _rank(e)
    if rank is not None:
        out.add(rank)
    for key in ("ranks", "repeat_ranks"):
        values = e.attrs.get(key)
        if isinstance(values, list | tuple):
            out.update(r for r in values if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < MAX_RANKS)
    return sorted(out)


def _gloo_wait(e: Event) -> _Wait | None:
    rank = _rank(e)
    if rank is None or e.kind not in ("traceback", "log", "cuda-error") or not _GLOO_WAIT.search(e.text):
        return None
    frames = [str(f) for f in e.attrs.get("frames") or []]
    op = next((f.rsplit(":", 1)[-1] for f in reversed(frames)
               if "distributed_c10d" in f and f.rsplit(":", 1)[-1] in _COLLECTIVES), None)
    return _Wait(e, rank, None, None, op, None, None, None)


def is_wait(e: Event) -> bool:
    """A record of its writer waiting in a collective (a watchdog record, a gloo timeout)."""
    if e.kind == "c10d":
        return bool(e.attrs.get("timeout") or e.attrs.get("op_type"))
    return e.kind in ("traceback", "log", "cuda-error") and _GLOO_WAIT.search(e.text) is not None


def _waits(events: Iterable[Event]) -> list[_Wait]:
    out = []
    for e in events:
        if e.kind != "c10d":
            gloo = _gloo_wait(e)
            if gloo is not None:
                out.append(gloo)
            continue
        ranks = counted_ranks(e)
        if not ranks:
            continue
        state = e.attrs.get("state")
        if state is not None and str(state) == "completed":
            continue
        seq = _int(e.attrs.get("seq"))
        op = e.attrs.get("op_type")
        if seq is None and op is None and e.attrs.get("last_enqueued") is None:
            continue
        first = _rank(e)
        for rank in ranks:  # a counted line stands for the same wait on each rank it was seen on
            out.append(_Wait(e, rank, _pg(e), seq, str(op) if op else None, _int(e.attrs.get("numel_in")),
                             _int(e.attrs.get("numel_out")),
                             _int(e.attrs.get("last_enqueued")) if rank == first else None))
    return out


def _world(events: Sequence[Event]) -> tuple[int | None, bool]:
    """The number of ranks, from NCCL/c10d attrs (stated), else from the highest rank seen waiting or
    writing its own labelled lines (``rank-activity``; inferred)."""
    sizes = [n for e in events for key in ("nranks", "world_size")
             if (n := _int(e.attrs.get(key))) is not None and 0 < n <= MAX_RANKS]
    if sizes:
        return max(sizes), True
    ranks = [r for e in events if e.kind in ("c10d", "rank-activity") or _gloo_wait(e) is not None
             for r in counted_ranks(e)]
    return (max(ranks) + 1 if ranks else None), False


def _label(ranks: Iterable[int]) -> str:
    rs = sorted(set(ranks))
    return f"rank{'s' if len(rs) > 1 else ''} {number_ranges(rs, max_parts=MAX_PARTS)}"


def _first_per_rank(waits: Sequence[_Wait]) -> dict[int, _Wait]:
    """Each rank's earliest stuck collective (repeated reports of one rank count once)."""
    per: dict[int, _Wait] = {}
    for w in waits:
        cur = per.get(w.rank)
        if cur is None or (w.seq is not None and (cur.seq is None or w.seq < cur.seq)) or (
                cur.op is None and w.op is not None and w.seq == cur.seq):
            per[w.rank] = w
    for rank, w in per.items():  # the PG-status line of a rank may be a record of its own
        enqueued = [x.last_enqueued for x in waits if x.rank == rank and x.last_enqueued is not None]
        if w.last_enqueued is None and enqueued:
            per[rank] = replace(w, last_enqueued=max(enqueued))
    return per


def _sizes_must_agree(w: _Wait) -> bool:
    """All-to-all, gather and scatter move a different number of elements on each rank."""
    key = w.op_key or ""
    return not (key.startswith("alltoall") or key in ("gather", "scatter"))


def _desync(waits: Sequence[_Wait]) -> list[list[_Wait]] | None:
    """Groups of ranks that ran different collectives at one SeqNum (the earliest such
    SeqNum), or None when every SeqNum that several ranks report agrees."""
    at: dict[int, dict[int, _Wait]] = defaultdict(dict)  # SeqNum -> rank -> what it ran there
    for w in waits:
        if w.seq is None or (w.op_key is None and w.numel_in is None):
            continue
        cur = at[w.seq].get(w.rank)
        if cur is None or (cur.op_key is None and w.op_key is not None):
            at[w.seq][w.rank] = w
    for seq in sorted(at):
        ranks = at[seq]
        if len(ranks) < 2:
            continue
        ops = {w.op_key for w in ranks.values() if w.op_key}
        sizes = {w.numel_in for w in ranks.values() if w.numel_in is not None and _sizes_must_agree(w)}
        if len(ops) > 1 or len(sizes) > 1:
            by: dict[tuple[object, ...], list[_Wait]] = defaultdict(list)
            for w in ranks.values():
                by[(w.op_key, w.numel_in if _sizes_must_agree(w) else None)].append(w)
            return sorted(by.values(), key=lambda g: min(w.rank for w in g))
    return None


def _event(detector: str, sentence: str, waits: Sequence[_Wait], attrs: dict[str, object],
           rank: int | None = None) -> Event:
    first = min(waits, key=lambda w: (w.event.ts is None, w.event.ts or 0, w.event.origin.line))
    stamps = [w.event.ts for w in waits if w.event.ts is not None]
    e = first.event
    return derived(detector, sentence, origin=e.origin, ts=min(stamps) if stamps else None,
                   end_ts=max(stamps) if stamps else None, ts_source=e.ts_source, source=e.source,
                   host=e.host if len({w.event.host for w in waits}) == 1 else None, rank=rank,
                   severity=Severity.ERROR, attrs=attrs)


def cross_rank(events: Sequence[Event]) -> list[Event]:
    waits = _waits(events)
    writing = {r for e in events if e.kind == "rank-activity" for r in counted_ranks(e)}
    if len({w.rank for w in waits}) < 2 and not any(w.last_enqueued is not None for w in waits) \
            and not (waits and writing - {w.rank for w in waits}):
        return []
    pgs = {w.pg for w in waits}
    by_pg: dict[str | None, list[_Wait]] = defaultdict(list)
    for w in waits:
        by_pg[w.pg if None not in pgs else None].append(w)
    world, stated = _world(events)
    out: list[Event] = []
    for pg, pg_waits in by_pg.items():
        per = _first_per_rank(pg_waits)
        pg_text = f" in process group {pg}" if pg is not None and len(by_pg) > 1 else ""
        groups = _desync(pg_waits) if len(per) >= 2 else None
        if groups:
            desc = "; ".join(f"{_label(w.rank for w in g)} in {g[0].describe()}" for g in groups)
            sentence = f"ranks wait in different collectives{pg_text}: {desc}"
            out.append(_event("nccl-desync", sentence, list(per.values()),
                              {"ranks": sorted(per), "pg": pg,
                               "groups": [{"ranks": sorted(w.rank for w in g), "seq": g[0].seq,
                                           "op_type": g[0].op, "numel_in": g[0].numel_in} for g in groups]}))
            continue
        behind = _behind(per, world, pg is not None, writing, stated)
        if behind:
            ranks, why = behind
            waiting = sorted(r for r in per if r not in ranks)
            ref = max((per[r] for r in waiting), key=lambda w: -1 if w.seq is None else w.seq,
                      default=next(iter(per.values())))
            verb = "waits" if len(waiting) == 1 else "wait"
            sentence = (f"{_label(ranks)} fell behind{pg_text}: {_label(waiting)} {verb} in {ref.describe()}"
                        f" and {why}")
            out.append(_event("rank-behind", sentence, list(per.values()),
                              {"behind": ranks, "waiting": waiting, "pg": pg, "seq": ref.seq,
                               "op_type": ref.op, "world": world},
                              rank=ranks[0] if len(ranks) == 1 else None))
    return out


def _behind(per: dict[int, _Wait], world: int | None, pg_known: bool,
            writing: set[int] | frozenset[int] = frozenset(), stated: bool = True) -> tuple[list[int], str] | None:
    """The ranks that fell behind and why, or None when the reports do not single them out. Missing
    ranks are named when the job's size is stated (NCCL's nranks); when it is only inferred from the
    ranks seen, or one rank alone waits, only missing ranks whose own lines are among the inputs
    (``writing``): their output is there, and it says nothing of waiting."""
    seqs = [w.seq for w in per.values() if w.seq is not None]
    target = max(seqs) if seqs else None
    if target is not None:
        lagging = sorted(r for r, w in per.items() if w.last_enqueued is not None and w.last_enqueued < target)
        if lagging and len(lagging) < len(per):
            return lagging, f"{_pronoun(lagging)} never enqueued SeqNum {target}"
        earliest = min(seqs)
        stuck_early = sorted(r for r, w in per.items() if w.seq == earliest)
        near = pg_known or target - earliest <= SEQ_NEAR  # else: SeqNums of different groups
        if earliest < target and near and 2 * len(stuck_early) < len(per):
            return stuck_early, (f"{_pronoun(stuck_early)} {'is' if len(stuck_early) == 1 else 'are'} still in "
                                 f"SeqNum {earliest}, which the others completed")
    if world is None or not per:
        return None
    if world - len(per) > max(1, world // 4):  # too many absent to name (and never a huge range)
        return None
    absent = sorted(set(range(world)) - set(per))
    if (len(per) < 2 or not stated) and not set(absent) <= writing:
        return None
    if absent and len(absent) <= max(1, world // 4):
        if not seqs:  # gloo and other waits without a SeqNum
            return absent, f"{_pronoun(absent)} reported no wait of {'their' if len(absent) > 1 else 'its'} own"
        return absent, f"{_pronoun(absent)} reported no stuck collective"
    return None


def _pronoun(ranks: Sequence[int]) -> str:
    return "they" if len(ranks) > 1 else "it"
