"""Cross-rank reasoning on collective failures (kind ``c10d`` events: watchdog records
and flight-recorder entries).

Each rank that reports a stuck collective says *which* one: process group, SeqNum,
OpType and element count. Comparing the ranks tells two stories apart:

* ``nccl-desync`` — the ranks wait in *different* collectives (another SeqNum, or the
  same SeqNum with another OpType or size): the code issued different collectives on
  different ranks, a program bug, not hardware.
* ``rank-behind`` — the ranks agree, and one rank is missing from the reports or says
  it never enqueued that collective (``last enqueued`` below it): that rank fell
  behind (dead, stuck, or busy with work the others do not do).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from forensics.events import Event, Severity
from forensics.match.detectors.common import derived

__all__ = ["cross_rank", "rank_ranges"]

#: Without process-group names, SeqNums further apart than this are not compared.
SEQ_NEAR = 64


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


def _int(v: object) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def _rank(e: Event) -> int | None:
    return e.rank if e.rank is not None else _int(e.attrs.get("rank"))


def _pg(e: Event) -> str | None:
    pg = e.attrs.get("pg")
    if pg is None or pg == "":
        return None
    m = re.search(r"\d+", str(pg))
    return m.group(0) if m else str(pg)


def _waits(events: Iterable[Event]) -> list[_Wait]:
    out = []
    for e in events:
        if e.kind != "c10d":
            continue
        rank = _rank(e)
        if rank is None:
            continue
        state = e.attrs.get("state")
        if state is not None and str(state) == "completed":
            continue
        seq = _int(e.attrs.get("seq"))
        op = e.attrs.get("op_type")
        if seq is None and op is None and e.attrs.get("last_enqueued") is None:
            continue
        out.append(_Wait(e, rank, _pg(e), seq, str(op) if op else None, _int(e.attrs.get("numel_in")),
                         _int(e.attrs.get("numel_out")), _int(e.attrs.get("last_enqueued"))))
    return out


def _world(events: Sequence[Event]) -> int | None:
    """The number of ranks, from NCCL/c10d attrs, else from the highest rank seen."""
    sizes = [n for e in events for key in ("nranks", "world_size")
             if (n := _int(e.attrs.get(key))) is not None and n > 0]
    if sizes:
        return max(sizes)
    ranks = [r for e in events if (r := _rank(e)) is not None]
    return max(ranks) + 1 if ranks else None


def rank_ranges(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0–2, 5"``."""
    rs = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        parts.append(str(rs[i]) if i == j else f"{rs[i]}–{rs[j]}")
        i = j + 1
    return ", ".join(parts)


def _label(ranks: Iterable[int]) -> str:
    rs = sorted(set(ranks))
    return f"rank{'s' if len(rs) > 1 else ''} {rank_ranges(rs)}"


def _first_per_rank(waits: Sequence[_Wait]) -> dict[int, _Wait]:
    """Each rank's earliest stuck collective (repeated reports of one rank count once)."""
    per: dict[int, _Wait] = {}
    for w in waits:
        cur = per.get(w.rank)
        if cur is None or (w.seq is not None and (cur.seq is None or w.seq < cur.seq)) or (
                cur.op is None and w.op is not None and w.seq == cur.seq):
            per[w.rank] = w
    return per


def _desync(per: dict[int, _Wait], pg_known: bool) -> list[list[_Wait]] | None:
    """Groups of ranks that wait in different collectives, or None when they agree.

    Without process-group names, SeqNums far apart belong to different groups (each
    group counts its own), so only nearby SeqNums are compared.
    """
    groups: dict[tuple[object, ...], list[_Wait]] = defaultdict(list)
    for w in per.values():
        groups[(w.seq,)].append(w)
    seqs = {w.seq for w in per.values() if w.seq is not None}
    if len(seqs) > 1:
        if not pg_known and max(seqs) - min(seqs) > SEQ_NEAR:
            return None
        return sorted(groups.values(), key=lambda g: min(w.rank for w in g))
    ops = {w.op_key for w in per.values() if w.op_key}
    sizes = {w.numel_in for w in per.values() if w.numel_in is not None}
    if len(ops) > 1 or len(sizes) > 1:
        by: dict[tuple[object, ...], list[_Wait]] = defaultdict(list)
        for w in per.values():
            by[(w.op_key, w.numel_in)].append(w)
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
    if len({w.rank for w in waits}) < 2 and not any(w.last_enqueued is not None for w in waits):
        return []
    pgs = {w.pg for w in waits}
    by_pg: dict[str | None, list[_Wait]] = defaultdict(list)
    for w in waits:
        by_pg[w.pg if None not in pgs else None].append(w)
    world = _world(events)
    out: list[Event] = []
    for pg, pg_waits in by_pg.items():
        per = _first_per_rank(pg_waits)
        pg_text = f" in process group {pg}" if pg is not None and len(by_pg) > 1 else ""
        groups = _desync(per, pg is not None) if len(per) >= 2 else None
        if groups:
            desc = "; ".join(f"{_label(w.rank for w in g)} in {g[0].describe()}" for g in groups)
            sentence = f"ranks wait in different collectives{pg_text}: {desc}"
            out.append(_event("nccl-desync", sentence, list(per.values()),
                              {"ranks": sorted(per), "pg": pg,
                               "groups": [{"ranks": sorted(w.rank for w in g), "seq": g[0].seq,
                                           "op_type": g[0].op, "numel_in": g[0].numel_in} for g in groups]}))
            continue
        behind = _behind(per, world)
        if behind:
            ranks, why = behind
            waiting = sorted(r for r in per if r not in ranks)
            ref = per[waiting[0]] if waiting else next(iter(per.values()))
            sentence = (f"{_label(ranks)} fell behind{pg_text}: {_label(waiting)} wait in {ref.describe()}"
                        f" and {why}")
            out.append(_event("rank-behind", sentence, list(per.values()),
                              {"behind": ranks, "waiting": waiting, "pg": pg, "seq": ref.seq,
                               "op_type": ref.op, "world": world},
                              rank=ranks[0] if len(ranks) == 1 else None))
    return out


def _behind(per: dict[int, _Wait], world: int | None) -> tuple[list[int], str] | None:
    seqs = [w.seq for w in per.values() if w.seq is not None]
    target = max(seqs) if seqs else None
    if target is not None:
        lagging = sorted(r for r, w in per.items() if w.last_enqueued is not None and w.last_enqueued < target)
        if lagging and len(lagging) < len(per):
            return lagging, f"{'they' if len(lagging) > 1 else 'it'} never enqueued SeqNum {target}"
    if world is None or len(per) < 2:
        return None
    absent = sorted(set(range(world)) - set(per))
    if absent and len(absent) <= max(1, world // 4):
        return absent, f"{'they' if len(absent) > 1 else 'it'} reported no stuck collective"
    return None
