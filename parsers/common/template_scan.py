"""The lines of a big log worth reading, found chunk by chunk in C, with repeated lines counted.

A long training log is mostly a few line *templates* repeated: the same NCCL INFO line on every
rank, the same warning on every step, a loss dict per step; 40–90 % of its lines hold a trigger
literal. Looking at each hit line from Python (a match callback, a template lookup, a skip check)
cost a few microseconds a line; grep spends a fraction of one. :func:`visits` instead works on a
whole chunk at a time with C-level operations only:

1. (:func:`_prepare`, in a forked worker process for big files) the chunk's bytes with their digits
   deleted (``bytes.translate``), split into lines: each line's *template key* (``[rank3]`` and
   ``[rank12]``, step 5 and step 50 000 are one key); the lines grouped by key with one ``map`` of
   ``dict.setdefault`` and numpy; the ranks on each group's lines read from its prefix column;
2. each of the chunk's distinct keys given its file-wide id; a key seen for the first time is
   classified once — which literals it holds, and of which class (:data:`PLAIN`, :data:`SAMPLED`,
   :data:`CAPPED`) — by a Hyperscan pass over the chunk's *new* keys only;
3. numpy picks the lines to read: every line of a key that is new or that the parser has not found
   safe to count yet, one progress line in ``every``, and for a key the parser has found simple
   (:class:`~forensics.parsers.common.templates.Templates`) only its first line in each stretch of the
   file, and a progress line that an anchor also names only when sampled; the other occurrences
   are counted into its :class:`Template` (count, the last offsets, their ranks) without a Python
   call each;
4. literals whose digits carry the meaning (``nan iterations:   3``, ``'loss': 0.0,``,
   ``error=59``) cannot be judged from a key with the digits gone: one Hyperscan pass over the raw
   chunk finds them (they are rare, so it has almost no callbacks).

Chunks start at 1 MiB and double (with worker processes: grow by :data:`PARALLEL_GROWTH`) up to
:data:`CHUNK_MAX`, so the templates of a log are learned on its first megabytes. The generator is
lazy: the parser reads one chunk's lines (learning which templates are simple) before the next
chunk is planned, and a chunk is planned again once its new templates have been read
:data:`~forensics.parsers.common.templates.FULL` times. The lines it yields are exactly the lines
``TextDocument.candidate_starts`` would (up to a literal that spans a deleted digit, which only
adds lines), minus the occurrences of simple templates that are counted instead and the progress
lines an anchor names that the sampling passes over.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import accumulate, count, repeat
from typing import TYPE_CHECKING, Any, NamedTuple

from forensics.parsers.common.templates import (
    BUCKETS,
    DIGITS,
    FULL,
    MAX_TEMPLATE_BYTES,
    RAW_RANK,
    TAIL,
    Templates,
    raw_rank,
    template_key,
)

from forensics.ingest import lineindex, preload, textdoc
from forensics.ingest.literals import scratch_for
from forensics.lazy_re import lazy_compile

if TYPE_CHECKING:
    from forensics.ingest.textdoc import Data, TextDocument

__all__ = ["CHUNK_MAX", "MIN_BYTES", "VisitPlan", "plan_for", "value_literal", "visits"]

#: First chunk planned; each next one twice as big, up to :data:`CHUNK_MAX`.
CHUNK_FIRST = 1 << 20
CHUNK_MAX = 16 << 20
#: Line classes (bits): a plain trigger, a progress literal only (sampled), a capped anchor; a line
#: that is not a template (a bar redrawn with ``\r``, an over-long line, past the template limit); a
#: key holding the digit-less form of a raw literal (its chunk's bytes are scanned for it).
PLAIN, SAMPLED, CAPPED, WHOLE, VALUE = 1, 2, 4, 8, 16
#: Smallest document worth the pre-pass (below it numpy's import and the chunk set-up cost more).
MIN_BYTES = 4 << 20
#: A template with more lines than this in a chunk, not yet judged by the parser, is learned first:
#: the chunk is read up to its :data:`~forensics.parsers.common.templates.FULL`-th line, then planned again.
LEARN_MIN = 64
#: Rounds of that per chunk at most.
MAX_ROUNDS = 4
#: Progress lines the sampling aims to hand over per file (the thinner keeps ~2k of them).
SAMPLED_TARGET = 2560
#: A sampled template's first lines, all read (its series kept whole while it is rare).
SAMPLED_MIN = 256
#: A template is rare when at most this small a share (1/RARE_SHARE) of a chunk's sampled lines.
RARE_SHARE = 16


_TOKEN = lazy_compile(rb"[A-Za-z0-9]+")


def value_literal(lit: bytes) -> bool:
    """Whether a literal's digits are a value (``error=59``, ``0.0``, ``0x00000116``) rather than part
    of a name (``P2P``, ``p2p.cc``, ``10de``, ``D3cold``): a value is looked for in the raw bytes,
    a name in the keys (where its digit-less form stands for it)."""
    for token in _TOKEN.findall(lit):
        if token.translate(None, DIGITS) == token:
            continue
        if token.isdigit() or token[:2].lower() == b"0x":
            return True
    return False


class VisitPlan:
    """The literals of one scan by class, split into those judged on keys and those on raw bytes."""

    def __init__(self, literals: Iterable[bytes], limited: Iterable[bytes] = (), tail: Iterable[bytes] = (),
                 sampled: Iterable[bytes] = ()) -> None:
        plain = {lit for lit in literals if lit}
        tails = {lit for lit in tail if lit} - plain
        samp = {lit for lit in sampled if lit}
        capped = {lit for lit in limited if lit} - plain - tails - samp
        #: literals looked for in the raw chunk (their digits matter), with their class
        self.raw: list[tuple[bytes, int]] = []
        #: literals looked for in the keys: (key form, class, counts only after the last ``\r``, literal)
        self.masked: list[tuple[bytes, int, bool, bytes]] = []
        self.capped = sorted(capped)
        #: the capped literals' indices in :attr:`capped`, for the budget of each
        self.cap_index = {lit: i for i, lit in enumerate(self.capped)}
        for lit in sorted(plain | tails | samp | capped):
            cls = SAMPLED if lit in samp or lit in tails else CAPPED if lit in capped else PLAIN
            key = template_key(lit)
            if value_literal(lit) or not key:
                self.raw.append((lit, cls))
                if key:  # a key holding its digit-less form may hold the literal: scan that chunk's bytes
                    self.masked.append((key, VALUE, False, lit))
            else:
                self.masked.append((key, cls, lit in tails, lit))


_PLANS: dict[tuple[tuple[bytes, ...], ...], VisitPlan] = {}


def plan_for(literals: tuple[bytes, ...], limited: tuple[bytes, ...] = (), tail: tuple[bytes, ...] = (),
             sampled: tuple[bytes, ...] = ()) -> VisitPlan:
    """The :class:`VisitPlan` of these literal sets, built once per process."""
    key = (literals, limited, tail, sampled)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) > 8:
            _PLANS.clear()
        plan = _PLANS[key] = VisitPlan(literals, limited, tail, sampled)
    return plan


class _Keys:
    """The template keys of one file: a dense id each, its class bits and capped literals."""

    def __init__(self, plan: VisitPlan) -> None:
        import numpy as np

        self.plan = plan
        self.ids: dict[bytes, int] = {}
        self.keys: list[bytes] = []
        self.caps: list[tuple[int, ...]] = []
        self.cls = np.zeros(1024, dtype=np.int8)
        #: per id: the parser has judged its template (counted in bulk, or never skippable): nothing
        #: left to learn about it
        self.settled = np.zeros(1024, dtype=bool)

    def classify(self, keys: list[bytes]) -> list[tuple[int, tuple[int, ...]]]:
        """(class bits, capped literal indices) of each key: one multi-literal pass over them all."""
        bits = [WHOLE if len(k) > MAX_TEMPLATE_BYTES or b"\r" in k.rstrip(b"\r") else 0 for k in keys]
        caps: list[set[int]] = [set() for _ in keys]
        masked = self.plan.masked
        if masked and keys:
            joined = b"\n".join(keys)
            ends = list(accumulate(len(k) + 1 for k in keys))
            for lit_i, end in _multi_find(joined, [m[0] for m in masked]):
                k = bisect_right(ends, end - 1)
                key_form, cls, is_tail, lit = masked[lit_i]
                if is_tail:
                    body = keys[k].rstrip(b"\r")
                    if end - len(key_form) - (ends[k] - len(keys[k]) - 1) <= body.rfind(b"\r"):
                        continue  # a rate in an earlier redraw of a bar: only the visible state counts
                bits[k] |= cls
                if cls == CAPPED:
                    caps[k].add(self.plan.cap_index[lit])
        return [(b, tuple(sorted(c))) for b, c in zip(bits, caps, strict=True)]

    def _grow(self, need: int) -> None:
        import numpy as np

        if need > len(self.cls):
            grow = max(need, 2 * len(self.cls)) - len(self.cls)
            self.cls = np.concatenate([self.cls, np.zeros(grow, np.int8)])
            self.settled = np.concatenate([self.settled, np.zeros(grow, bool)])

    def ids_for(self, distinct: list[bytes]) -> Any:
        """The id of each of a chunk's distinct keys (a numpy array); new keys classified and added.
        Past :data:`MAX_KEYS` new keys get ids of this chunk only (their lines are read whole, like
        lines that are not templates)."""
        import numpy as np

        base = len(self.keys)
        del self.caps[base:]  # the last chunk's ids of its own
        ids = np.fromiter(map(self.ids.get, distinct, repeat(-1)), np.int64, len(distinct))
        new_at = np.flatnonzero(ids < 0)
        if len(new_at):
            new = [distinct[i] for i in new_at.tolist()]
            room = max(0, MAX_KEYS - len(self.keys))
            self._grow(base + len(new))
            for i, (key, (bits, caps)) in enumerate(zip(new, self.classify(new), strict=True)):
                self.caps.append(caps)
                self.settled[base + i] = False
                if i < room:
                    self.ids[key] = base + i
                    self.keys.append(key)
                    self.cls[base + i] = bits
                else:
                    self.cls[base + i] = bits | WHOLE
            ids[new_at] = base + np.arange(len(new))
        return ids


#: Distinct keys kept per file; past this a new key's lines are classified chunk by chunk and read.
MAX_KEYS = 200_000


def _multi_find(data: bytes, lits: list[bytes]) -> list[tuple[int, int]]:
    """(literal index, end offset) of every occurrence of each literal in ``data``."""
    db = textdoc._hs_database(tuple(lits)) if len(data) >= 4096 else None
    if db is not None:
        found: list[tuple[int, int]] = []
        db.scan(data, match_event_handler=lambda i, _f, to, _fl, _c: found.append((i, to)),  # type: ignore[attr-defined]
                scratch=scratch_for(db))
        return found
    out: list[tuple[int, int]] = []
    for i, lit in enumerate(lits):
        pos = data.find(lit)
        while pos >= 0:
            out.append((i, pos + len(lit)))
            pos = data.find(lit, pos + 1)
    return out


def _chunk_end(data: bytes, start: int, want: int, size: int) -> int:
    """The end of the chunk from ``start`` of about ``want`` bytes: just after a newline (or the end)."""
    end = start + want
    if end >= size:
        return size
    nl = data.rfind(b"\n", start, end)
    if nl < 0:  # one line longer than the chunk: take it whole
        nl = data.find(b"\n", end)
        return size if nl < 0 else nl + 1
    return nl + 1


def _distinct(values: Any) -> Any:
    """The distinct integers of a 1-D array, ascending. (``np.unique`` imports ``numpy.ma`` on its first
    call since numpy 2.3, 25-40 ms in the parser and again in every forked worker.)"""
    import numpy as np

    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    return ordered[np.concatenate((np.ones(1, bool), ordered[1:] != ordered[:-1]))]


#: Lines of one template read one by one for a rank inside the message (the rest of a bigger group is not).
MESSAGE_RANK_LINES = 1 << 17


def _ranks(data: Any, starts: Any) -> set[int]:
    """The ranks named in the prefixes of the lines at ``starts`` (all of one template), read in numpy.

    One template has one prefix shape (:func:`~forensics.parsers.common.templates.raw_rank`): its first line
    says which, and the column where the rank's digits begin; the digits there are read from every line
    whose byte before that column is the same as the first line's (a ``[``), as the distinct 8-byte
    windows at that column (one per rank). The few others (an NCCL line whose pid has another number
    of digits) are read one by one."""
    import numpy as np

    if not len(starts):
        return set()
    m = RAW_RANK.match(data, int(starts[0]))
    if m is None:  # a rank inside the message (c10d's ``[Rank 3]``): its column moves, read line by line
        return {r for start in starts[:MESSAGE_RANK_LINES].tolist() if (r := raw_rank(data, start)) is not None}
    group = next(g for g in (1, 2, 3, 4) if m.group(g) is not None)
    arr = np.frombuffer(data, np.uint8)
    last = len(arr) - 1
    col = starts + (m.start(group) - m.start())
    ranks: set[int] = set()
    if m.start(group) > m.start():
        here = arr[np.minimum(col - 1, last)] == arr[m.start(group) - 1]
        if not here.all():
            for start in starts[~here].tolist():
                rank = raw_rank(data, start)
                if rank is not None:
                    ranks.add(rank)
            col = col[here]
    # The 8 bytes at each rank column, as one 64-bit number: the distinct ones are few (one per rank).
    window = np.ascontiguousarray(arr[np.minimum(col[:, None] + np.arange(8), last)])
    for packed in _distinct(window.view(np.uint64).ravel()).tolist():
        head = int(packed).to_bytes(8, "little")
        digits = len(head) - len(head.lstrip(DIGITS))
        if digits:
            ranks.add(int(head[:digits]))
    return ranks


class _Prepared(NamedTuple):
    """One chunk cut into template keys and grouped by key (what a worker process hands back).

    Groups follow the order of :attr:`distinct` (a key's first occurrence); group ``g``'s lines,
    ascending, are ``order[bounds[g]:bounds[g + 1]]``."""

    start: int
    end: int
    distinct: list[bytes]  # the chunk's distinct keys, in the order they first occur
    local: Any  # per line: its key's group
    order: Any  # line indices grouped by key
    bounds: Any  # where each group starts in ``order`` (and, last, its length)
    line_starts: Any  # per line: its start, relative to the chunk
    ranks: dict[int, set[int]]  # per group of two lines or more with a rank prefix: the ranks on its lines
    raw_pairs: Any  # (line index, raw literal index) of each raw literal hit; None: not scanned
    blocks: Any  # newlines in each lineindex.BLOCK from the chunk's first block (for the line index)


def _prepare(data: Data, start: int, end: int, raw_lits: list[bytes] | None, pooled: bool = False) -> _Prepared:
    """The C-level part of a chunk's plan: keys, groups, line starts, ranks, raw literal hits
    (``pooled``: while worker processes prepare chunks, a mapped file's pages are given back)."""
    import numpy as np

    raw = data[start:end]
    release = getattr(data, "release", None)  # a mapped file: give the pages back (a worker's own mapping)
    if release is not None and pooled:
        release(start, end)
    keys = raw.translate(None, DIGITS).split(b"\n")
    if raw.endswith(b"\n"):
        keys.pop()
    first: dict[bytes, int] = {}
    by_first = np.fromiter(map(first.setdefault, keys, count()), np.int64, len(keys))
    firsts = np.fromiter(first.values(), np.int64, len(first))
    group_of_first = np.empty(len(keys), np.int64)
    group_of_first[firsts] = np.arange(len(firsts))
    local = group_of_first[by_first]
    # (a stable sort of 16-bit keys is numpy's radix sort: linear; most chunks have far fewer keys)
    order = np.argsort(local.astype(np.uint16) if len(firsts) <= 1 << 16 else local, kind="stable")
    sizes = np.bincount(local, minlength=len(firsts))
    bounds = np.concatenate((np.zeros(1, np.int64), np.cumsum(sizes)))
    newlines = np.flatnonzero(np.frombuffer(raw, np.uint8) == 10)
    line_starts = np.concatenate((np.zeros(1, np.int64), newlines[: len(keys) - 1] + 1))
    blocks = np.bincount((newlines + start) // lineindex.BLOCK - start // lineindex.BLOCK)
    ranks: dict[int, set[int]] = {}
    for g in np.flatnonzero(sizes > 1).tolist():
        if raw_rank(raw, int(line_starts[firsts[g]])) is not None:
            ranks[g] = _ranks(raw, line_starts[order[bounds[g]:bounds[g + 1]]])
    pairs = _raw_pairs(raw, line_starts, raw_lits) if raw_lits else None
    return _Prepared(start, end, list(first), local, order, bounds, line_starts, ranks, pairs, blocks)


def _raw_pairs(raw: bytes, line_starts: Any, lits: list[bytes]) -> Any:
    """(line index, literal index) of every line holding each raw literal, each pair once, in line order."""
    import numpy as np

    hits = _multi_find(raw, lits)
    if not hits:
        return np.zeros((0, 2), np.int64)
    found = np.array(hits, dtype=np.int64)
    lines = np.searchsorted(line_starts, found[:, 1] - 1, side="right") - 1
    pairs = _distinct(lines * len(lits) + found[:, 0])  # (line, literal) as one number: ascending, once
    return np.stack([pairs // len(lits), pairs % len(lits)], axis=1)


class _ChunkScan:
    """What :func:`visits` decides per chunk, over groups of lines rather than lines."""

    def __init__(self, templates: Templates, plan: VisitPlan, table: _Keys, limit: int, size: int) -> None:
        self.templates = templates
        self.plan = plan
        self.table = table
        self.budget = [limit] * len(plan.capped)
        self.raw_budget = {lit: limit for lit, cls in plan.raw if cls == CAPPED}
        self.size = max(1, size)
        #: line indices of this chunk counted as the continuation of a counted record
        self.consumed: list[Any] = []
        #: lines handed over per key id whose template the parser has not looked up
        self.handed: dict[int, int] = {}

    def raw_hits(self, pairs: Any) -> Any:
        """Indices of the chunk's lines holding a raw (value) literal, each capped one within its budget."""
        import numpy as np

        lits = self.plan.raw
        keep: list[int] = []
        for line, lit_i in pairs.tolist():
            lit = lits[lit_i][0]
            if lit in self.raw_budget:
                if self.raw_budget[lit] <= 0:
                    continue
                self.raw_budget[lit] -= 1
            keep.append(line)
        return _distinct(np.array(keep, dtype=np.int64))

    @staticmethod
    def _lines(prep: _Prepared, g: int, lo: int, cut: int) -> Any:
        occ = prep.order[prep.bounds[g]:prep.bounds[g + 1]]
        if lo > 0 or cut < len(prep.local):
            occ = occ[(occ >= lo) & (occ < cut)]
        return occ

    def learning_cut(self, prep: _Prepared, gids: Any, groups: list[int], lo: int) -> int:
        """The line (index in the chunk) after which every frequent template of ``groups`` that the
        parser has not judged yet has been read :data:`FULL` times; past the chunk when there is none."""
        n = len(prep.local)
        cut = -1
        table, by_key = self.table, self.templates.by_key
        for g in groups:
            k = int(gids[g])
            bits = int(table.cls[k])
            if table.settled[k] or prep.bounds[g + 1] - prep.bounds[g] <= LEARN_MIN or bits & WHOLE \
                    or not bits & PLAIN:  # capped-only lines are read up to their budget anyway
                continue
            tpl = by_key.get(table.keys[k])
            need = FULL - (tpl.n if tpl is not None else 0)
            if (tpl is not None and not tpl.simple) or need <= 0:
                continue
            occ = self._lines(prep, g, lo, n)
            if need < len(occ):
                cut = max(cut, int(occ[need]))
        return n if cut < 0 else cut

    def templated(self, prep: _Prepared, gids: Any, groups: list[int], lo: int, cut: int,
                  first_no: int) -> list[Any]:
        """The lines to read, among those in ``[lo, cut)`` of the ``groups`` (keys with a plain or capped hit).

        A group of a template the parser found simple is read at its first line in each stretch of
        the file not yet represented; its other lines are counted into the :class:`Template`. A group
        hit only by capped literals is read up to their budget, unless its lines are progress lines
        (a sampled literal holds too: Megatron's iteration line names ``loss scale`` and ``number of
        nan iterations``, two anchors): those are sampled like every progress line, their anomalies
        (a non-zero NaN count, a zero scale) being literals of their own. Every other group is read whole."""
        import numpy as np

        table, templates, budget = self.table, self.templates, self.budget
        cls = table.cls
        out: list[Any] = []
        for g in groups:
            occ = self._lines(prep, g, lo, cut)
            if not len(occ):
                continue
            k = int(gids[g])
            bits = int(cls[k])
            capped_only = not bits & PLAIN
            if capped_only and bits & SAMPLED:
                continue  # a progress line an anchor names too: sampled like the others (see VisitPlan)
            tpl = None if bits & WHOLE else templates.by_key.get(table.keys[k])
            bulk = tpl is not None and tpl.simple and tpl.n >= FULL
            if bulk or (tpl is not None and not tpl.simple):
                table.settled[k] = True
            if not bulk and not capped_only:
                out.append(occ)
                if tpl is None:  # a parser that never looks it up (a progress line it skips): nothing to learn
                    self.handed[k] = self.handed.get(k, 0) + len(occ)
                    if self.handed[k] >= FULL:
                        table.settled[k] = True
                continue
            rel = prep.line_starts[occ]
            if bulk and tpl is not None:
                buckets = (rel + prep.start) * BUCKETS // self.size  # ascending: occ is
                firsts = np.flatnonzero(np.diff(buckets, prepend=-1))
                read = [i for b, i in zip(buckets[firsts].tolist(), firsts.tolist(), strict=True)
                        if b not in tpl.buckets]
            else:
                read = list(range(len(occ)))
            if capped_only:
                caps = table.caps[k]
                allowed = max((budget[c] for c in caps), default=0)
                read = read[:allowed]
                for c in caps:
                    budget[c] = max(0, budget[c] - len(read))
            if bulk and tpl is not None:  # (tpl is not None whenever bulk: said again for the type checker)
                if tpl.follow:
                    read = self._consume_follow(tpl.follow, occ, read, prep, gids)
                skipped = len(occ) - len(read)
                tpl.n += skipped
                tpl.skipped += skipped
                templates.skipped += skipped
                if skipped:
                    chosen = set(read)
                    tail = [i for i in range(max(0, len(occ) - TAIL - len(read)), len(occ)) if i not in chosen]
                    tpl.tail.extend((prep.start + int(rel[i]), first_no + int(occ[i])) for i in tail[-TAIL:])
                    tpl.ranks.update(prep.ranks.get(g, ()))
            if read:
                out.append(occ[read])
        return out

    def _consume_follow(self, follow: tuple[bytes, ...], occ: Any, read: list[int], prep: _Prepared,
                        gids: Any) -> list[int]:
        """For a counted record that continues on lines of known templates: its continuation lines
        are counted with it (added to :attr:`consumed`); an occurrence whose next lines are not those
        templates (or run past the chunk) is read instead."""
        import numpy as np

        follow_ids = [self.table.ids.get(key, -1) for key in follow]
        n = len(prep.local)
        counted = np.ones(len(occ), dtype=bool)
        counted[read] = False
        ok = counted.copy()
        for j, fid in enumerate(follow_ids, 1):
            nxt = occ + j
            inside = nxt < n
            ok &= inside
            ok[inside] &= gids[prep.local[nxt[inside]]] == fid
        self.consumed.append((occ[ok][:, None] + np.arange(1, len(follow) + 1)).ravel())
        return sorted(read + np.flatnonzero(counted & ~ok).tolist())


#: Files from this size on are cut into keys by worker processes (forked: they share the bytes).
PARALLEL_MIN_BYTES = 64 << 20
#: ``FORENSICS_SCAN_WORKERS``: worker processes for the pre-pass (0 or 1: none; default: the CPUs this
#: process may use, at most :data:`MAX_WORKERS`).
WORKERS_ENV = "FORENSICS_SCAN_WORKERS"
#: A worker prepares a chunk about four times slower than the parser reads it: past four workers the
#: parser waits less while the first chunks come in, and a 1 GB log goes ~40 % faster with eight than
#: with four on a 16-CPU machine (bench/README.md).
MAX_WORKERS = 8
#: Chunks handed to the workers before the parser has read any (more as soon as it waits for one),
#: where the workers and the parser would share CPUs; with a CPU to spare, every worker starts busy.
AHEAD_FIRST = 3
#: In a worker process only: (the document's bytes, raw literals), given at its start (never set in the
#: parent, where two analyses in two threads would each overwrite the other's before their workers fork).
_SHARED: tuple[Any, list[bytes]] | None = None


def _start_worker(parent: int, data: Any, raw_lits: list[bytes]) -> None:
    """A forked worker's start: die with ``parent``, and keep this analysis's document (forked, not copied)."""
    global _SHARED
    from forensics import orphans

    orphans.die_with(parent)
    _SHARED = (data, raw_lits)


def _prepare_shared(start: int, end: int) -> _Prepared:
    assert _SHARED is not None
    data, lits = _SHARED
    return _prepare(data, start, end, lits, pooled=True)


def scan_workers(size: int) -> int:
    """Worker processes the pre-pass of a ``size``-byte document uses (1: it runs in this process)."""
    import multiprocessing
    import os

    if size < PARALLEL_MIN_BYTES or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    env = os.environ.get(WORKERS_ENV, "").strip()
    if env:
        return max(1, int(env)) if env.isdigit() else 1
    return max(1, min(MAX_WORKERS, _usable_cpus()))


def _usable_cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _ahead_first(workers: int) -> int:
    """Chunks in flight before the parser has read one: every worker busy (and one more queued) where
    the parser has a CPU of its own; else :data:`AHEAD_FIRST` (the parser may be the slower side and
    would share its CPU with workers racing ahead: see :func:`_prepared`)."""
    return max(workers + 1, AHEAD_FIRST) if _usable_cpus() > workers else AHEAD_FIRST


def _chunk_bounds(data: Any, size: int, growth: float = 2.0) -> list[tuple[int, int]]:
    """The chunks of ``data``: the first of :data:`CHUNK_FIRST` bytes, each next one ``growth`` times
    bigger, up to :data:`CHUNK_MAX` (each ends after a newline)."""
    bounds = []
    start, want = 0, float(CHUNK_FIRST)
    while start < size:
        end = _chunk_end(data, start, int(want), size)
        bounds.append((start, end))
        start, want = end, min(float(CHUNK_MAX), want * growth)
    return bounds


#: How fast chunks grow when worker processes prepare them. The parser reads a prepared chunk about
#: four times faster than one worker prepares it (mixed log, 16-CPU machine), so with chunks doubling
#: it would wait for each bigger chunk in turn; growing by a quarter, the chunks before one (four times
#: its size) take the parser about as long as that one takes its worker.
PARALLEL_GROWTH = 1.25


def _prepared(data: Any, bounds: list[tuple[int, int]], raw_lits: list[bytes], workers: int) -> Iterator[_Prepared]:
    """Each chunk prepared, in order: here, or by ``workers`` forked processes a few chunks ahead
    (any failure of theirs — no fork, a killed worker — and the chunk is prepared here instead)."""
    if workers <= 1:
        for start, end in bounds:
            yield _prepare(data, start, end, None)
        return
    import multiprocessing
    import os
    from concurrent.futures import Future, ProcessPoolExecutor

    if raw_lits:
        textdoc._hs_database(tuple(raw_lits))  # compiled before the fork: every worker has it
    pending: deque[tuple[int, int, Future[_Prepared] | None]] = deque()  # None: to prepare here
    pending.append((*bounds[0], None))  # the first chunk here, while the workers start
    todo = iter(bounds[1:])
    # Each worker dies with this process: one left writing a result nobody reads would wait for ever.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                             initializer=_start_worker, initargs=(os.getpid(), data, raw_lits)) as pool:

        def submit() -> bool:
            nxt = next(todo, None)
            if nxt is None:
                return False
            try:
                pending.append((*nxt, pool.submit(_prepare_shared, *nxt)))
            except Exception:  # a broken pool: the rest here
                pending.append((*nxt, None))
            return True

        # Chunks in flight: as many as keep the parser from waiting. Where it shares the CPUs
        # with the workers, a parser slower than one worker (a kernel log's records) keeps two
        # or three busy, not all of them racing ahead for the CPU it needs itself; with a CPU
        # to spare all start busy. One that waits gets one more, up to twice the workers.
        ahead = _ahead_first(workers)
        try:
            while len(pending) < ahead and submit():
                pass
            while pending:
                start, end, fut = pending.popleft()
                prepared = None
                if fut is not None:
                    if not fut.done():
                        ahead = min(2 * workers, ahead + 1)
                    try:
                        prepared = fut.result()
                    except Exception:  # a worker that died or failed: this chunk here
                        prepared = None
                while len(pending) < ahead and submit():
                    pass
                yield prepared if prepared is not None else _prepare(data, start, end, raw_lits, pooled=True)
        finally:  # also when the parser stops early: what is queued is not prepared for nothing
            for *_, queued in pending:
                if queued is not None:
                    queued.cancel()


def visits(doc: TextDocument, templates: Templates, plan: VisitPlan, *, limit: int = 2000,
           every: int = 1) -> Iterator[tuple[int, int]]:
    """(start offset, 1-based line number) of each line to read, in file order (see the module docstring).

    ``templates`` is the parser's: a template it has found simple has its other occurrences
    counted here. ``limit`` caps the lines each capped literal contributes; a line hit only by
    sampled literals is kept about one in ``every`` (raised when the file's progress lines turn out
    dense; the last one of each chunk always kept)."""
    preload.settle()  # (numpy imported beside the file's read: done before any fork)
    import numpy as np

    data = doc.data
    size = len(data)
    table = _Keys(plan)
    scan = _ChunkScan(templates, plan, table, limit, size)
    raw_lits = [lit for lit, _ in plan.raw]
    n_sampled = 0
    rare: dict[int, int] = {}  # per sampled template: its lines so far
    first_no = 1  # the number of the chunk's first line
    released = 0  # pages before this offset given back
    block_counts = np.zeros(size // lineindex.BLOCK + 1, np.int64)
    workers = scan_workers(size)
    bounds = _chunk_bounds(data, size, PARALLEL_GROWTH if workers > 1 else 2.0)
    for prep in _prepared(data, bounds, raw_lits, workers if len(bounds) > 2 else 1):
        n_lines = len(prep.local)
        first_block = prep.start // lineindex.BLOCK
        block_counts[first_block:first_block + len(prep.blocks)] += prep.blocks
        gids = table.ids_for(prep.distinct)
        group_cls = table.cls[gids]
        fixed = []  # lines read whatever the templates say: raw hits, sampled progress lines
        if raw_lits and (group_cls & VALUE).any():
            pairs = prep.raw_pairs
            if pairs is None:
                pairs = _raw_pairs(data[prep.start:prep.end], prep.line_starts, raw_lits)
            fixed.append(scan.raw_hits(pairs))
        strong = (group_cls & (PLAIN | CAPPED)) != 0
        # a progress line is sampled unless a plain trigger is on it too (an anchor's budget is apart)
        sampled = ((group_cls & SAMPLED) != 0) & ((group_cls & PLAIN) == 0)
        if sampled.any():
            sampled_only = np.flatnonzero(sampled[prep.local])
            # the stride from the density so far, this chunk's included: the first chunk is sampled
            # like the rest (read whole, it was the most expensive chunk of a long log)
            while every * SAMPLED_TARGET < (n_sampled + len(sampled_only)) * size // prep.end:
                every *= 2
            fixed += [sampled_only[(np.arange(len(sampled_only)) + n_sampled) % every == 0], sampled_only[-1:]]
            n_sampled += len(sampled_only)
            # A rare template's lines are all read up to SAMPLED_MIN of them: a pipeline's monitor line is
            # not drowned by 2,048 ranks' step lines.
            of = gids[prep.local[sampled_only]]
            for g, n in zip(*np.unique(of, return_counts=True), strict=True):
                seen = rare.get(int(g), 0)
                if seen < SAMPLED_MIN and n * RARE_SHARE <= len(sampled_only):
                    fixed.append(sampled_only[of == g][:SAMPLED_MIN - seen])
                rare[int(g)] = seen + int(n)
        every_fixed = _distinct(np.concatenate(fixed)) if fixed else np.zeros(0, np.int64)
        groups = np.flatnonzero(strong).tolist()
        # In rounds: up to where the templates new in this chunk have been read FULL times, then the
        # rest with what the parser has learned of them meanwhile.
        lo, rounds = 0, 0
        while lo < n_lines:
            cut = n_lines if rounds >= MAX_ROUNDS else scan.learning_cut(prep, gids, groups, lo)
            picked = [every_fixed[(every_fixed >= lo) & (every_fixed < cut)]]
            picked += scan.templated(prep, gids, groups, lo, cut, first_no)
            read = _distinct(np.concatenate(picked))
            if scan.consumed:
                read = read[~np.isin(read, np.concatenate(scan.consumed))]
            yield from zip((prep.line_starts[read] + prep.start).tolist(), (read + first_no).tolist(), strict=True)
            lo, rounds = cut, rounds + 1
        scan.consumed.clear()
        doc.note_read(prep.end)
        # The parser is done with the chunk before the last (it may still read a little past a chunk's
        # end): a mapped file's pages of it are given back.
        behind = max(released, prep.start - textdoc.RELEASE_LAG)
        doc.release(released, behind)
        released = behind
        first_no += n_lines
    doc.adopt_block_counts(block_counts.tolist())
