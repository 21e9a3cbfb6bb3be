"""The identity join's engine: facts merged into rows, in the order a sequential join would.

The sequential join (forensics/timeline/identity.py) tries each new fact against every row so far, in the
order rows were last changed, absorbs each row that shares a key with the growing merge and agrees
with it (no single-valued field with two values, no two hosts), and puts the merge last. Written
that way it costs rows × facts: a kernel log with a new GPU UUID on every NVRM line (four PCI
addresses, thousands of UUIDs, every pair disagreeing) made 100 MB take minutes. :class:`Joiner`
gives the same rows in the same order in about one visit per fact.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HOST_SCOPED", "SINGLE", "Group", "Joiner", "Key"]

#: Fields a worker has one value of.
SINGLE = ("rank", "local_rank", "gpu_index", "uuid", "pci")
#: Keys that name a worker only together with its host.
HOST_SCOPED = ("local_rank", "gpu_index", "pci", "pid")

Key = tuple[str, str | None, Any]


@dataclass(eq=False)
class Group:
    """One fact (what one event says of one worker), then one row: the facts merged into it."""

    host: str | None
    values: dict[str, Any] = field(default_factory=dict)
    pids: set[int] = field(default_factory=set)
    #: the join's bookkeeping: position in the row order, whether it is a row now, its keys
    seq: int = -1
    alive: bool = False
    keyset: set[Key] = field(default_factory=set)

    def compatible(self, other: Group) -> bool:
        """No field with two values, no two hosts."""
        if self.host != other.host and self.host is not None and other.host is not None:
            return False
        return all(self.values[k] == other.values[k] for k in self.values.keys() & other.values.keys())

    def absorb(self, other: Group) -> None:
        self.host = self.host or other.host
        for k, v in other.values.items():
            self.values.setdefault(k, v)
        self.pids |= other.pids

    def keys(self) -> list[Key]:
        """What it is known by: each value (with its host where it names a worker per host) and pid."""
        out: list[Key] = []
        for k, v in self.values.items():
            out.append((k, self.host if k in HOST_SCOPED else None, v))
        out.extend(("pid", self.host, p) for p in self.pids)
        return out


#: The fields a candidate row is filtered by within a key (``host`` and the single-valued ones).
_FIELDS = ("host", *SINGLE)
_ABSENT = object()

#: (row order when the entry was made, the row)
Entry = tuple[int, Group]
Bucket = dict[int, Entry]


def _value(g: Group, name: str) -> Any:
    if name == "host":
        return g.host if g.host is not None else _ABSENT
    return g.values.get(name, _ABSENT)


def _keys_of(g: Group, host: str | None) -> set[Key]:
    """``g``'s keys as they would be with ``host``."""
    keys: set[Key] = {(k, host if k in HOST_SCOPED else None, v) for k, v in g.values.items()}
    keys.update(("pid", host, p) for p in g.pids)
    return keys


def _values(g: Group) -> dict[str, Any]:
    return {name: _value(g, name) for name in _FIELDS}


class Joiner:
    """The rows joined so far, indexed by key and, within a key, by each field's value.

    :meth:`add` gives the same rows, in the same order, as the sequential join: try the new fact
    against every row in row order, absorb each row that shares a key with the growing merge and
    agrees with it, and put the merge last. Two things make it cheap:

    * only the rows holding one of the fact's keys and agreeing with it on one field (the most
      selective) are visited, lazily, in row order, a bucket at a time (:class:`_Cursor`); a row
      that disagrees stays in disagreement as the merge grows (values are only added);
    * two rows that share a key disagree (else the join would have merged them), so once a row is
      absorbed, every other row holding one of its keys is known to disagree: those buckets are
      walked no further, and the absorbed row's own keys bring no candidates. This holds until a
      merge renames keys (a host-less group takes a host, so its host-scoped keys change); after
      that (``renamed``) every bucket is walked whole and every gained key is looked up.

    The merge lives in the largest group it absorbs (union by size): a GPU seen with thousands of
    pids is updated in place, its index entries kept (an entry made before the row moved is followed
    to the row's current place in the order), not rebuilt per fact.
    """

    def __init__(self) -> None:
        self._seq = 0
        #: key -> field -> value (or _ABSENT) -> id(row) -> entry, in the order entries were made
        self._index: dict[Key, dict[str, dict[Any, Bucket]]] = {}
        self._all: dict[int, Group] = {}
        #: compatibility checks made (a measure of work, for the tests)
        self.checks = 0
        #: a merge has renamed keys; the "rows sharing a key disagree" shortcut no longer holds
        self.renamed = False

    # -- index ---------------------------------------------------------------------------------
    def _insert(self, g: Group, keys: Iterable[Key], names: Iterable[str] = _FIELDS) -> None:
        entry = (g.seq, g)
        values = _values(g)
        for key in keys:
            by_field = self._index.setdefault(key, {})
            for name in names:
                bucket = by_field.setdefault(name, {}).setdefault(values[name], {})
                bucket.pop(id(g), None)  # (an entry that moves goes to the end: dicts keep insertion order)
                bucket[id(g)] = entry

    def _remove(self, g: Group, keys: Iterable[Key], values: Mapping[str, Any]) -> None:
        for key in keys:
            by_field = self._index.get(key)
            if by_field is None:
                continue
            for name, value in values.items():
                bucket = by_field.get(name, {}).get(value)
                if bucket is not None:
                    bucket.pop(id(g), None)

    def _buckets(self, fact: Group, key: Key) -> list[Bucket]:
        """The rows holding ``key`` that may agree with ``fact``: those with its value, or none, for
        the field that leaves fewest."""
        by_field = self._index.get(key)
        if not by_field:
            return []
        best: list[Bucket] = []
        best_n = -1
        for name in _FIELDS:
            value = _value(fact, name)
            if value is _ABSENT:
                continue
            buckets = by_field.get(name, {})
            pair = [b for b in (buckets.get(value), buckets.get(_ABSENT)) if b]
            n = sum(len(b) for b in pair)
            if best_n < 0 or n < best_n:
                best, best_n = pair, n
        if best_n < 0:  # a fact of pids only: every row holding the key
            best = [b for b in by_field.get("host", {}).values() if b]
        return best

    # -- the join --------------------------------------------------------------------------------
    def add(self, fact: Group) -> None:
        """Join ``fact`` into the rows (see the class docstring)."""
        fact.keyset = set(fact.keys())
        merge = _Merge(self, fact)
        while merge.heap:
            seq, _, g, cursor = heapq.heappop(merge.heap)
            merge.pos = seq
            if g.alive and (not merge.renamed or merge.container.keyset & g.keyset):
                self.checks += 1
                if merge.container.compatible(g):
                    merge.absorb(g)
            if cursor is not None and not cursor.closed:
                cursor.advance()
        merge.finish()

    def rows(self) -> list[Group]:
        """The rows in the order they were last changed (the order the sequential join leaves)."""
        return sorted(self._all.values(), key=lambda g: g.seq)


class _Cursor:
    """A walk over one bucket in row order: the next row whose entry is current is put on the heap
    and waits there (the rows after it in the bucket come later in the order); a row whose entry
    predates its last move is put on the heap at its current place and the walk goes on."""

    def __init__(self, merge: _Merge, key: Key, bucket: Bucket) -> None:
        self.merge = merge
        self.key = key
        self.closed = False
        self._it: Iterator[Entry] = iter(list(bucket.values()) if merge.joiner.renamed else bucket.values())

    def snapshot(self) -> None:
        """Walk a copy of what is left (the bucket may change while this walk is open)."""
        self._it = iter(list(self._it))

    def advance(self) -> None:
        merge = self.merge
        for seq, g in self._it:
            if not g.alive or g.seq <= merge.pos or id(g) in merge.pushed:
                continue
            merge.pushed.add(id(g))
            if g.seq == seq:
                heapq.heappush(merge.heap, (g.seq, id(g), g, self))
                return
            heapq.heappush(merge.heap, (g.seq, id(g), g, None))
        self.closed = True


class _Merge:
    """One fact's merge in progress: the group holding it (the largest absorbed so far), the rows
    waiting to be visited (a heap in row order) and what the index holds of the container."""

    def __init__(self, joiner: Joiner, fact: Group) -> None:
        self.joiner = joiner
        self.container = fact
        self.pos = -1
        self.heap: list[tuple[int, int, Group, _Cursor | None]] = []
        self.pushed: set[int] = set()
        self.cursors: list[_Cursor] = []
        self.renamed = joiner.renamed
        #: the index's view of the container: its field values then (None: a new fact, not indexed),
        #: the keys it gained since, or exactly the keys indexed (after a rename)
        self.idx_vals: dict[str, Any] | None = None
        self.added: set[Key] = set()
        self.idx_keys: set[Key] | None = None
        self.look_up(fact.keyset)

    def look_up(self, keys: Iterable[Key]) -> None:
        for key in keys:
            for bucket in self.joiner._buckets(self.container, key):
                cursor = _Cursor(self, key, bucket)
                self.cursors.append(cursor)
                cursor.advance()

    def absorb(self, g: Group) -> None:
        joiner = self.joiner
        g.alive = False
        del joiner._all[id(g)]
        if not self.renamed:  # the rows holding g's keys disagree with the merge now
            for cursor in self.cursors:
                if cursor.key in g.keyset:
                    cursor.closed = True
        fresh: set[Key] | None = None  # (after a rename) keys the merge did not hold: to look up
        if len(g.keyset) > len(self.container.keyset):  # the bigger group holds the merge
            if self.idx_vals is not None:
                held = self.idx_keys if self.idx_keys is not None else self.container.keyset - self.added
                joiner._remove(self.container, held, self.idx_vals)
            if self.renamed:
                fresh = g.keyset - self.container.keyset
            small, self.container = self.container, g
            self.idx_vals, self.added, self.idx_keys = _values(g), set(), None
        else:
            small = g
            joiner._remove(g, g.keyset, _values(g))
        big = self.container
        host_before = big.host
        # a host-less group joining a host's: its host-scoped keys now carry that host
        small_keys = small.keyset if small.host == big.host or big.host is None else _keys_of(small, big.host)
        gained = small_keys - big.keyset
        big.absorb(small)
        if big.host != host_before:  # the container took a host: its own host-scoped keys change
            if self.idx_vals is not None and self.idx_keys is None:
                self.idx_keys = big.keyset - self.added
            big.keyset = set(big.keys())
            self.rename()
            self.look_up(big.keyset)  # (once in a group's life: a host is never lost)
            return
        big.keyset |= gained
        self.added |= gained
        was_renamed = self.renamed
        if small_keys != small.keyset:
            self.rename()
        if self.renamed:
            if not was_renamed and small is not g:  # renamed just now, the merge moved into g: all new
                self.look_up(big.keyset)
            else:
                self.look_up(gained if fresh is None else fresh | gained)

    def rename(self) -> None:
        """Keys were renamed: from now on buckets are walked whole, over copies (rows are removed
        from them while they are walked)."""
        if not self.renamed:
            self.renamed = self.joiner.renamed = True
            for cursor in self.cursors:
                if not cursor.closed:
                    cursor.snapshot()

    def finish(self) -> None:
        joiner, big = self.joiner, self.container
        joiner._seq += 1
        big.seq = joiner._seq
        big.alive = True
        joiner._all[id(big)] = big
        if self.idx_vals is None:  # a new fact (with what it absorbed)
            joiner._insert(big, big.keyset)
        elif self.idx_keys is not None:  # keys renamed: every entry moves
            joiner._remove(big, self.idx_keys, self.idx_vals)
            joiner._insert(big, big.keyset)
        else:  # updated in place: entries of changed fields move, gained keys are added
            now = _values(big)
            changed = [name for name in _FIELDS if self.idx_vals[name] is _ABSENT and now[name] is not _ABSENT]
            if changed:
                held = big.keyset - self.added
                joiner._remove(big, held, {name: self.idx_vals[name] for name in changed})
                joiner._insert(big, held, changed)
            # The entries of its value keys (at most five, where other rows crowd) move to its new
            # place in the order; its pid keys' entries (possibly thousands) stay, followed when met.
            values = [(k, big.host if k in HOST_SCOPED else None, v) for k, v in big.values.items()]
            joiner._insert(big, [key for key in values if key not in self.added])
            joiner._insert(big, self.added)
