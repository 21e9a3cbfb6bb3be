"""The lines of a big log worth reading, found chunk by chunk in C, with repeated lines counted.

A long training log is mostly a few line *templates* repeated: the same NCCL INFO line on every
rank, the same warning on every step, a loss dict per step; 40–90 % of its lines hold a trigger
literal. Looking at each hit line from Python (a match callback, a template lookup, a skip check)
cost a few microseconds a line; grep spends a fraction of one. :func:`visits` instead works on a
whole chunk at a time with C-level operations only:

1. the chunk's bytes with their digits deleted (``bytes.translate``), split into lines: each line's
   *template key* (``[rank3]`` and ``[rank12]``, step 5 and step 50 000 are one key);
2. each line's key mapped to a small integer by one ``map`` over a dict (``setdefault``), into a
   numpy array; a key seen for the first time is classified once — which literals it holds, and
   of which class (:data:`PLAIN`, :data:`SAMPLED`, :data:`CAPPED`) — by a Hyperscan pass over the
   chunk's *new* keys only;
3. numpy picks the lines to read: every line of a key that is new or that the parser has not found
   safe to count yet, one progress line in ``every``, and for a key the parser has found simple
   (:class:`~forensics.parsers.templates.Templates`) only its first line in each stretch of the
   file; the other occurrences are counted into its :class:`Template` (count, the last offsets, the
   ranks of a sample of them) without a Python call each;
4. literals whose digits carry the meaning (``nan iterations:   3``, ``'loss': 0.0,``,
   ``error=59``) cannot be judged from a key with the digits gone: one Hyperscan pass over the raw
   chunk finds them (they are rare, so it has almost no callbacks).

Chunks start at 1 MiB and double up to :data:`CHUNK_MAX`, so the templates of a log are learned on
its first megabytes. The generator is lazy: the parser reads one chunk's lines (learning which
templates are simple) before the next chunk is planned. The lines it yields are exactly the lines
``TextDocument.candidate_starts`` would (up to a literal that spans a deleted digit, which only
adds lines), minus the occurrences of simple templates that are counted instead.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from itertools import accumulate, count, repeat
from typing import TYPE_CHECKING, Any

from forensics import textdoc
from forensics.parsers.templates import (
    BUCKETS,
    DIGITS,
    FULL,
    MAX_TEMPLATE_BYTES,
    RAW_RANK,
    TAIL,
    Templates,
    template_key,
)

if TYPE_CHECKING:
    from forensics.textdoc import TextDocument

__all__ = ["CHUNK_MAX", "MIN_BYTES", "VisitPlan", "plan_for", "value_literal", "visits"]

#: First chunk planned; each next one twice as big, up to :data:`CHUNK_MAX`.
CHUNK_FIRST = 1 << 20
CHUNK_MAX = 16 << 20
#: Line classes (bits): a plain trigger, a progress literal only (sampled), a capped anchor; a line
#: that is not a template (a bar redrawn with ``\r``, an over-long line, past the template limit).
PLAIN, SAMPLED, CAPPED, WHOLE = 1, 2, 4, 8
#: Smallest document worth the pre-pass (below it numpy's import and the chunk set-up cost more).
MIN_BYTES = 4 << 20
#: A template with more lines than this in a chunk, not yet judged by the parser, is learned first:
#: the chunk is read up to its :data:`~forensics.parsers.templates.FULL`-th line, then planned again.
LEARN_MIN = 64
#: Rounds of that per chunk at most.
MAX_ROUNDS = 4
#: Progress lines the sampling aims to hand over per file (the thinner keeps ~2k of them).
SAMPLED_TARGET = 4096


_TOKEN = re.compile(rb"[A-Za-z0-9]+")


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
        #: every literal, sorted (what ``lines_at`` cuts over-long lines around)
        self.literals = sorted(plain | tails | samp | capped)
        #: literals looked for in the raw chunk (their digits matter), with their class
        self.raw: list[tuple[bytes, int]] = []
        #: literals looked for in the keys: (key form, class, counts only after the last ``\r``, literal)
        self.masked: list[tuple[bytes, int, bool, bytes]] = []
        self.capped = sorted(capped)
        #: the capped literals' indices in :attr:`capped`, for the budget of each
        self.cap_index = {lit: i for i, lit in enumerate(self.capped)}
        for lit in self.literals:
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


#: Class bit of a key that holds the digit-less form of a raw literal (its chunk is scanned raw).
VALUE = 16


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

    def ids_of(self, keys: list[bytes]) -> Any:
        """The id of each key (a numpy array), new keys classified and added.

        One C-level ``map`` of ``dict.setdefault``: a new key gets a provisional id (``base`` plus its
        first line's index), then the new ones are renumbered densely. Past :data:`MAX_KEYS` new keys
        get ids of this chunk only (their lines are read whole, like lines that are not templates)."""
        import numpy as np

        base = len(self.keys)
        if len(self.ids) < MAX_KEYS:
            ids = np.fromiter(map(self.ids.setdefault, keys, count(base)), np.int64, len(keys))
            fresh = ids >= base
            if fresh.any():
                first_lines = np.unique(ids[fresh])
                new = [keys[i] for i in (first_lines - base).tolist()]
                ids[fresh] = base + np.searchsorted(first_lines, ids[fresh])
                self._grow(base + len(new))
                for i, (key, (bits, caps)) in enumerate(zip(new, self.classify(new), strict=True)):
                    self.ids[key] = base + i
                    self.keys.append(key)
                    self.caps.append(caps)
                    self.cls[base + i] = bits
            return ids
        ids = np.fromiter(map(self.ids.get, keys, repeat(-1)), np.int64, len(keys))
        unknown = np.flatnonzero(ids < 0)
        if len(unknown):  # ids past the table, valid for this chunk only
            local: dict[bytes, int] = {}
            for i in unknown.tolist():
                ids[i] = base + local.setdefault(keys[i], len(local))
            new = list(local)
            self._grow(base + len(new))
            self.settled[base:base + len(new)] = False
            del self.caps[base:]
            for i, (bits, caps) in enumerate(self.classify(new)):
                self.cls[base + i] = bits | WHOLE
                self.caps.append(caps)
        return ids


#: Distinct keys kept per file; past this a new key's lines are classified chunk by chunk and read.
MAX_KEYS = 200_000


def _multi_find(data: bytes, lits: list[bytes]) -> list[tuple[int, int]]:
    """(literal index, end offset) of every occurrence of each literal in ``data``."""
    db = textdoc._hs_database(tuple(lits)) if len(data) >= 4096 else None
    if db is not None:
        found: list[tuple[int, int]] = []
        db.scan(data, match_event_handler=lambda i, _f, to, _fl, _c: found.append((i, to)))  # type: ignore[attr-defined]
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


def _ranks(raw: bytes, starts: Any) -> set[int]:
    """The ranks named in the prefixes of the lines at ``starts`` (all of one template), read in numpy.

    One template has one prefix shape (:func:`~forensics.parsers.templates.raw_rank`): its first line
    says which, and where the rank's digits begin — a fixed column for ``[rankN]`` and ``N: ``, the
    first ``[`` for NCCL's ``host:pid:tid [N]``; up to 6 digits are read there from every line."""
    import numpy as np

    if not len(starts):
        return set()
    m = RAW_RANK.match(raw, int(starts[0]))
    if m is None:
        return set()
    group = next(g for g in (1, 2, 3) if m.group(g) is not None)
    arr = np.frombuffer(raw, np.uint8)
    last = len(arr) - 1
    if group == 2:  # the column of the first "[" varies with the digits before it (pid, tid)
        width = m.start(2) - m.start() + 8
        rows = arr[np.minimum(starts[:, None] + np.arange(width), last)]
        col = starts + np.argmax(rows == ord("["), axis=1) + 1
    else:
        col = starts + (m.start(group) - m.start())
    digits = arr[np.minimum(col[:, None] + np.arange(6), last)].astype(np.int64) - ord("0")
    going = np.cumprod((digits >= 0) & (digits <= 9), axis=1).astype(bool)
    value = np.zeros(len(starts), np.int64)
    for k in range(6):
        value = np.where(going[:, k], value * 10 + digits[:, k], value)
    return set(np.unique(value[going[:, 0]]).tolist())


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

    def raw_hits(self, raw: bytes, line_starts: Any) -> Any:
        """Indices of the chunk's lines holding a raw (value) literal."""
        import numpy as np

        lits = [lit for lit, _ in self.plan.raw]
        starts: set[int] = set()
        for i, end in _multi_find(raw, lits):
            lit = lits[i]
            line = raw.rfind(b"\n", 0, end - 1) + 1
            if lit in self.raw_budget:
                if self.raw_budget[lit] <= 0 or line in starts:
                    continue
                self.raw_budget[lit] -= 1
            starts.add(line)
        return np.searchsorted(line_starts, np.fromiter(sorted(starts), np.int64, len(starts)))

    def templated(self, lines: Any, ids: Any, line_starts: Any, raw: bytes, chunk_start: int,
                  first_no: int) -> list[Any]:
        """The lines to read among ``lines`` (indices of the chunk's lines with a plain or capped hit).

        Lines are grouped by key. A group of a template the parser found simple is read at its first
        line in each stretch of the file not yet represented; its other lines are counted into the
        :class:`Template`. A group hit only by capped literals is read up to their budget. Every
        other group is read whole."""
        import numpy as np

        table, templates, budget = self.table, self.templates, self.budget
        tid = ids[lines]
        order = np.argsort(tid, kind="stable")
        sorted_ids, sorted_lines = tid[order], lines[order]
        cuts = np.flatnonzero(sorted_ids[1:] != sorted_ids[:-1]) + 1
        g_start = np.concatenate((np.zeros(1, np.int64), cuts))
        g_end = np.concatenate((cuts, np.array([len(sorted_ids)], np.int64)))
        whole = np.ones(len(g_start), dtype=bool)
        out: list[Any] = []
        cls = table.cls
        for g, k in enumerate(sorted_ids[g_start].tolist()):
            bits = int(cls[k])
            capped_only = not bits & PLAIN
            tpl = None if bits & WHOLE else templates.by_key.get(table.keys[k])
            bulk = tpl is not None and tpl.simple and tpl.n >= FULL
            if bulk or (tpl is not None and not tpl.simple):
                table.settled[k] = True
            if not bulk and not capped_only:
                continue
            whole[g] = False
            occ = sorted_lines[g_start[g]:g_end[g]]
            rel = line_starts[occ]
            if bulk:
                assert tpl is not None
                buckets = (rel + chunk_start) * BUCKETS // self.size
                ub, ui = np.unique(buckets, return_index=True)
                read = [i for b, i in zip(ub.tolist(), ui.tolist(), strict=True) if b not in tpl.buckets]
            else:
                read = list(range(len(occ)))
            if capped_only:
                caps = table.caps[k]
                allowed = max((budget[c] for c in caps), default=0)
                read = read[:allowed]
                for c in caps:
                    budget[c] = max(0, budget[c] - len(read))
            if bulk and tpl is not None and tpl.follow:
                read = self._consume_follow(tpl.follow, occ, read, ids)
            if bulk:
                assert tpl is not None
                skipped = len(occ) - len(read)
                tpl.n += skipped
                tpl.skipped += skipped
                templates.skipped += skipped
                if skipped:
                    chosen = set(read)
                    tail = [i for i in range(max(0, len(occ) - TAIL - len(read)), len(occ)) if i not in chosen]
                    tpl.tail.extend((chunk_start + int(rel[i]), first_no + int(occ[i])) for i in tail[-TAIL:])
                    counted = np.ones(len(occ), dtype=bool)
                    counted[read] = False
                    tpl.ranks.update(_ranks(raw, rel[counted]))
            if read:
                out.append(occ[read])
        if whole.any():
            out.append(sorted_lines[np.repeat(whole, g_end - g_start)])
        return out

    def learning_cut(self, lines: Any, ids: Any) -> int:
        """The line (index in the chunk) after which every frequent template among ``lines`` that the
        parser has not judged yet has been read :data:`FULL` times; past the chunk when there is none."""
        import numpy as np

        lines = lines[~self.table.settled[ids[lines]]]
        if not len(lines):
            return len(ids)
        tid = ids[lines]
        uniq, first, counts = np.unique(tid, return_index=True, return_counts=True)
        frequent = counts > LEARN_MIN
        if not frequent.any():
            return len(ids)
        order = None
        cut = -1
        for k, n in zip(uniq[frequent].tolist(), counts[frequent].tolist(), strict=True):
            if int(self.table.cls[k]) & WHOLE:
                continue
            tpl = self.templates.by_key.get(self.table.keys[k])
            need = FULL - (tpl.n if tpl is not None else 0)
            if (tpl is not None and not tpl.simple) or need <= 0 or need >= n:
                continue
            if order is None:
                order = np.argsort(tid, kind="stable")
                sorted_ids = tid[order]
            at = int(np.searchsorted(sorted_ids, k)) + need
            cut = max(cut, int(lines[order[at]]))
        return len(ids) if cut < 0 else cut

    def _consume_follow(self, follow: tuple[bytes, ...], occ: Any, read: list[int], ids: Any) -> list[int]:
        """For a counted record that continues on lines of known templates: its continuation lines
        are counted with it (added to :attr:`consumed`); an occurrence whose next lines are not those
        templates (or run past the chunk) is read instead."""
        import numpy as np

        follow_ids = [self.table.ids.get(key, -1) for key in follow]
        counted = np.ones(len(occ), dtype=bool)
        counted[read] = False
        ok = counted.copy()
        for j, fid in enumerate(follow_ids, 1):
            nxt = occ + j
            inside = nxt < len(ids)
            ok &= inside
            ok[inside] &= ids[nxt[inside]] == fid
        self.consumed.append((occ[ok][:, None] + np.arange(1, len(follow) + 1)).ravel())
        return sorted(read + np.flatnonzero(counted & ~ok).tolist())


def visits(doc: TextDocument, templates: Templates, plan: VisitPlan, *, limit: int = 2000,
           every: int = 1) -> Iterator[tuple[int, int]]:
    """(start offset, 1-based line number) of each line to read, in file order (see the module docstring).

    ``templates`` is the parser's: a template it has found simple has its other occurrences
    counted here. ``limit`` caps the lines each capped literal contributes; a line hit only by
    sampled literals is kept about one in ``every`` (raised when the file's progress lines turn out
    dense; the last one of each chunk always kept)."""
    import numpy as np

    data = doc.data
    size = len(data)
    table = _Keys(plan)
    scan = _ChunkScan(templates, plan, table, limit, size)
    n_sampled = 0
    first_no = 1  # the number of the chunk's first line
    start, want = 0, CHUNK_FIRST
    while start < size:
        end = _chunk_end(data, start, want, size)
        want = min(CHUNK_MAX, want * 2)
        raw = data[start:end]
        keys = raw.translate(None, DIGITS).split(b"\n")
        if raw.endswith(b"\n"):
            keys.pop()
        ids = table.ids_of(keys)
        newlines = np.flatnonzero(np.frombuffer(raw, np.uint8) == 10)
        line_starts = np.concatenate((np.zeros(1, np.int64), newlines[: len(keys) - 1] + 1))
        cls = table.cls[ids]
        fixed = []  # lines read whatever the templates say: raw hits, sampled progress lines
        if plan.raw and (cls & VALUE).any():
            fixed.append(scan.raw_hits(raw, line_starts))
        lines = np.flatnonzero(cls & (PLAIN | SAMPLED | CAPPED))
        strong_lines = lines[(cls[lines] & (PLAIN | CAPPED)) != 0]
        sampled_only = lines[(cls[lines] & (PLAIN | CAPPED)) == 0]
        if len(sampled_only):
            fixed += [sampled_only[(np.arange(len(sampled_only)) + n_sampled) % every == 0], sampled_only[-1:]]
            n_sampled += len(sampled_only)
        every_fixed = np.unique(np.concatenate(fixed)) if fixed else np.zeros(0, np.int64)
        # In rounds: up to where the templates new in this chunk have been read FULL times, then the
        # rest with what the parser has learned of them meanwhile.
        lo, rounds = 0, 0
        while lo < len(keys):
            part = strong_lines[strong_lines >= lo]
            cut = len(keys) if rounds >= MAX_ROUNDS else scan.learning_cut(part, ids)
            part = part[part < cut]
            picked = [every_fixed[(every_fixed >= lo) & (every_fixed < cut)]]
            if len(part):
                picked += scan.templated(part, ids, line_starts, raw, start, first_no)
            read = np.unique(np.concatenate(picked))
            if scan.consumed:
                read = np.setdiff1d(read, np.concatenate(scan.consumed))
            yield from zip((line_starts[read] + start).tolist(), (read + first_no).tolist(), strict=True)
            lo, rounds = cut, rounds + 1
        scan.consumed.clear()
        while n_sampled and every * SAMPLED_TARGET < n_sampled * size // end:
            every *= 2
        doc.note_read(end)
        first_no += len(keys)
        start = end
