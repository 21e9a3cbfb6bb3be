"""Who is who across layers: host × rank × local rank × GPU index × UUID × PCI bus id × pid.

Each layer names the same worker differently: NCCL's ``Init COMPLETE`` line gives rank, pid and
bus id; an Xid line gives the PCI address and the pid that owned the channel; the OOM killer
gives a pid; torchrun gives local rank and pid; nvidia-smi and NVML give index, bus id and
UUID. :class:`IdentityTable` joins whatever the events reveal into rows, so that an Xid on
``0000:3b:00.0`` can be attributed to rank 6, and an OOM-killed pid to its rank and GPU.

Joining rules: facts from one event describe one worker; two facts join when they share a
key — a PCI address, UUID, pid, local rank or GPU index on the same host, or a global rank —
unless joining would give one row two different values of a single-valued field (a pid
reused by another job, a sub-communicator's rank), in which case they stay apart. Ranks are
taken from NCCL only for the largest communicator seen (the world), since sub-communicators
number their ranks from 0. Events without a host join the only named host when there is one.

The join is sequential, as if each new fact were tried against every row so far in the order the
rows were last changed, absorbing each that shares a key with it and agrees with it; it is computed
with an index by key (and, within a key, by each field's value), so a fact costs the rows it could
join, not all rows: a kernel log with a new GPU UUID on every line no longer costs a pass over all
earlier UUIDs per line (``_Joiner``).

Only GPUs become rows. A PCI address is a GPU's when a parser put it in ``Event.gpu`` (NVML,
nvidia-smi, lspci NVIDIA devices, an ``nvidia`` driver line) or when it is the ``pci``/``bus_id``
of an event whose kind speaks of GPUs (Xid and NVRM lines, NVML events, nvidia-smi, NCCL's
busId); the ``pci`` of any other event (an AER line from a root port, an IOMMU fault of a NIC, an
NVSwitch SXid) names no GPU. Such an event gets a GPU only when an address it names is one already
known: its own ``pci``, or for AER the device behind the port that the message names
(``AER: Corrected error received: 0000:b8:00.0``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from forensics.events import Event, MetricSample
from forensics.parsers.base import as_int as _int
from forensics.pci import find_pci, normalize_pci

__all__ = ["Identity", "IdentityTable", "build_identity"]

_SINGLE = ("rank", "local_rank", "gpu_index", "uuid", "pci")
_HOST_SCOPED = ("local_rank", "gpu_index", "pci", "pid")
#: event kinds whose ``pci``/``bus_id`` attr is a GPU's address
_GPU_KINDS = frozenset({"xid", "nvrm", "ecc", "gpu-lost", "gpu-info", "nvidia-smi", "nccl"})


@dataclass(frozen=True)
class Identity:
    """One worker/GPU as far as the logs reveal it; unknown fields are ``None``."""

    host: str | None
    rank: int | None = None
    local_rank: int | None = None
    gpu_index: int | None = None
    uuid: str | None = None
    pci: str | None = None
    pids: frozenset[int] = frozenset()

    @property
    def gpu(self) -> str | None:
        """The GPU as Event.gpu names it: the PCI address, else the index."""
        if self.pci:
            return self.pci
        return str(self.gpu_index) if self.gpu_index is not None else None


Key = tuple[str, str | None, Any]


@dataclass(eq=False)
class _Group:
    host: str | None
    values: dict[str, Any] = field(default_factory=dict)
    pids: set[int] = field(default_factory=set)
    #: the join's bookkeeping: position in the row order, whether it is a row now, its keys
    seq: int = -1
    alive: bool = False
    keyset: set[Key] = field(default_factory=set)

    def compatible(self, other: _Group) -> bool:
        if self.host != other.host and self.host is not None and other.host is not None:
            return False
        return all(self.values[k] == other.values[k] for k in self.values.keys() & other.values.keys())

    def absorb(self, other: _Group) -> None:
        self.host = self.host or other.host
        for k, v in other.values.items():
            self.values.setdefault(k, v)
        self.pids |= other.pids

    def keys(self) -> list[tuple[str, str | None, Any]]:
        out: list[tuple[str, str | None, Any]] = []
        for k, v in self.values.items():
            out.append((k, self.host if k in _HOST_SCOPED else None, v))
        out.extend(("pid", self.host, p) for p in self.pids)
        return out


def _gpu_address(kind: str, attrs: Mapping[str, Any]) -> str | None:
    """The GPU address an event's attrs state, for kinds that speak of GPUs (an SXid names a switch)."""
    if kind not in _GPU_KINDS or "sxid" in attrs:
        return None
    return normalize_pci(attrs.get("pci")) or normalize_pci(attrs.get("bus_id"))


def _named_addresses(event: Event) -> list[str]:
    """PCI addresses an event names that may be its GPU, most direct first: its ``gpu``, its
    ``pci``, and for AER the reporting device and every address in the message."""
    found = [event.gpu if event.gpu and not event.gpu.isdigit() else None, event.attrs.get("pci")]
    if event.kind == "aer":
        found.append(event.attrs.get("source_pci"))
        found.extend(find_pci(word) for word in event.message.split() if ":" in word)
    out: list[str] = []
    for value in found:
        norm = normalize_pci(value) if isinstance(value, str) else None
        if norm and norm not in out:
            out.append(norm)
    return out


def _fact(host: str | None, attrs: Mapping[str, Any], kind: str, gpu: str | None, rank: int | None,
          pid: int | None, world: int | None) -> _Group | None:
    g = _Group(host)
    pci = _gpu_address(kind, attrs)
    if gpu and not pci:
        if gpu.isascii() and gpu.isdigit():
            g.values["gpu_index"] = int(gpu)
        else:
            pci = normalize_pci(gpu)
    if pci:
        g.values["pci"] = pci
    uuid = attrs.get("uuid")
    if isinstance(uuid, str) and uuid.startswith("GPU-"):
        g.values["uuid"] = uuid
    if kind in ("gpu-info", "nvidia-smi"):
        index = _int(attrs.get("index", attrs.get("gpu_index")))
        if index is not None:
            g.values["gpu_index"] = index
    r = rank if rank is not None else _int(attrs.get("rank"))
    if r is not None and kind == "nccl":
        nranks = _int(attrs.get("nranks"))
        if world is not None and nranks != world:
            r = None  # a sub-communicator's rank is not the global rank
    if r is not None:
        g.values["rank"] = r
    lr = _int(attrs.get("local_rank"))
    if lr is not None:
        g.values["local_rank"] = lr
    for p in (pid, _int(attrs.get("pid"))):
        if p is not None and p > 0:
            g.pids.add(p)
    if len(g.values) + len(g.pids) < 2 and not (set(g.values) & {"pci", "uuid"}):
        return None  # a lone pid or rank joins nothing and says nothing
    return g


class IdentityTable:
    """The joined rows, with look-ups by any key."""

    def __init__(self, rows: Iterable[Identity] = ()) -> None:
        self.rows: list[Identity] = list(rows)
        self._hosts = {r.host for r in self.rows if r.host}
        self._index: dict[tuple[str, str | None, Any], Identity] = {}
        for row in self.rows:
            for key in _row_keys(row):
                self._index.setdefault(key, row)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Identity]:
        return iter(self.rows)

    def _host(self, host: str | None) -> str | None:
        if host is None and len(self._hosts) == 1:
            return next(iter(self._hosts))
        return host

    def find(self, host: str | None = None, *, rank: int | None = None, local_rank: int | None = None,
             gpu_index: int | None = None, uuid: str | None = None, pci: str | None = None,
             pid: int | None = None) -> Identity | None:
        """The row matching any given key (PCI spellings are normalized)."""
        h = self._host(host)
        probes: list[tuple[str, str | None, Any]] = []
        if pci is not None:
            norm = normalize_pci(pci)
            if norm:
                probes.append(("pci", h, norm))
        if uuid is not None:
            probes.append(("uuid", None, uuid))
        if rank is not None:
            probes.append(("rank", None, rank))
        if pid is not None:
            probes.append(("pid", h, pid))
        if local_rank is not None:
            probes.append(("local_rank", h, local_rank))
        if gpu_index is not None:
            probes.append(("gpu_index", h, gpu_index))
        for key in probes:
            row = self._index.get(key)
            if row is not None:
                return row
        return None

    def fill(self, event: Event) -> Event:
        """``event`` with ``gpu``/``rank`` filled in where the table joins them (else unchanged)."""
        if event.gpu is not None and event.rank is not None:
            return event
        attrs = event.attrs
        pid = event.pid if event.pid is not None else _int(attrs.get("pid"))
        host = self._host(event.host)
        row = next((r for a in _named_addresses(event) if (r := self._index.get(("pci", host, a))) is not None), None)
        if row is None:
            row = self.find(event.host, uuid=attrs.get("uuid") if isinstance(attrs.get("uuid"), str) else None,
                            rank=event.rank, pid=pid, local_rank=_int(attrs.get("local_rank")))
        if row is None:
            return event
        gpu = event.gpu if event.gpu is not None else row.gpu
        rank = event.rank if event.rank is not None else row.rank
        if gpu == event.gpu and rank == event.rank:
            return event
        return replace(event, gpu=gpu, rank=rank)


def _row_keys(row: Identity) -> list[tuple[str, str | None, Any]]:
    keys: list[tuple[str, str | None, Any]] = []
    if row.pci:
        keys.append(("pci", row.host, row.pci))
    if row.uuid:
        keys.append(("uuid", None, row.uuid))
    if row.rank is not None:
        keys.append(("rank", None, row.rank))
    if row.local_rank is not None:
        keys.append(("local_rank", row.host, row.local_rank))
    if row.gpu_index is not None:
        keys.append(("gpu_index", row.host, row.gpu_index))
    keys.extend(("pid", row.host, p) for p in row.pids)
    return keys


def build_identity(events: Iterable[Event], metrics: Iterable[MetricSample] = ()) -> IdentityTable:
    """Join the identities that ``events`` (and NVML samples) reveal."""
    events = list(events)
    world = max((n for e in events if e.kind == "nccl" for n in [_int(e.attrs.get("nranks"))] if n is not None),
                default=None)
    seen: set[tuple[Any, ...]] = set()
    facts: list[_Group] = []

    def add(g: _Group | None) -> None:
        if g is None:
            return
        sig = (g.host, tuple(sorted(g.values.items())), tuple(sorted(g.pids)))
        if sig not in seen:
            seen.add(sig)
            facts.append(g)

    for e in events:
        add(_fact(e.host, e.attrs, e.kind, e.gpu, e.rank, e.pid, world))
    for m in metrics:
        add(_fact(m.host, {}, "nvml", m.gpu, None, None, world))
    named = {f.host for f in facts if f.host}
    if len(named) == 1:
        only = next(iter(named))
        for f in facts:
            f.host = f.host or only

    joiner = _Joiner()
    for f in facts:
        joiner.add(f)
    groups = joiner.rows()
    rows = [
        Identity(host=g.host, rank=g.values.get("rank"), local_rank=g.values.get("local_rank"),
                 gpu_index=g.values.get("gpu_index"), uuid=g.values.get("uuid"), pci=g.values.get("pci"),
                 pids=frozenset(g.pids))
        for g in groups
    ]
    rows.sort(key=lambda r: (r.host or "", r.rank if r.rank is not None else 1 << 30, r.pci or "", r.gpu_index or 0))
    return IdentityTable(rows)


#: The fields a candidate row is filtered by within a key (``host`` and the single-valued ones).
_FIELDS = ("host", *_SINGLE)
_ABSENT = object()

#: (row order when the entry was made, the row)
Entry = tuple[int, _Group]
Bucket = dict[int, Entry]


def _value(g: _Group, name: str) -> Any:
    if name == "host":
        return g.host if g.host is not None else _ABSENT
    return g.values.get(name, _ABSENT)


def _keys_of(g: _Group, host: str | None) -> set[Key]:
    """``g``'s keys as they would be with ``host``."""
    keys: set[Key] = {(k, host if k in _HOST_SCOPED else None, v) for k, v in g.values.items()}
    keys.update(("pid", host, p) for p in g.pids)
    return keys


def _values(g: _Group) -> dict[str, Any]:
    return {name: _value(g, name) for name in _FIELDS}


class _Joiner:
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
        self._all: dict[int, _Group] = {}
        #: compatibility checks made (a measure of work, for the tests)
        self.checks = 0
        #: a merge has renamed keys; the "rows sharing a key disagree" shortcut no longer holds
        self.renamed = False

    # -- index ---------------------------------------------------------------------------------
    def _insert(self, g: _Group, keys: Iterable[Key], names: Iterable[str] = _FIELDS) -> None:
        entry = (g.seq, g)
        values = _values(g)
        for key in keys:
            by_field = self._index.setdefault(key, {})
            for name in names:
                bucket = by_field.setdefault(name, {}).setdefault(values[name], {})
                bucket.pop(id(g), None)  # (an entry that moves goes to the end: dicts keep insertion order)
                bucket[id(g)] = entry

    def _remove(self, g: _Group, keys: Iterable[Key], values: Mapping[str, Any]) -> None:
        for key in keys:
            by_field = self._index.get(key)
            if by_field is None:
                continue
            for name, value in values.items():
                bucket = by_field.get(name, {}).get(value)
                if bucket is not None:
                    bucket.pop(id(g), None)

    def _buckets(self, fact: _Group, key: Key) -> list[Bucket]:
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
    def add(self, fact: _Group) -> None:
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

    def rows(self) -> list[_Group]:
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

    def __init__(self, joiner: _Joiner, fact: _Group) -> None:
        self.joiner = joiner
        self.container = fact
        self.pos = -1
        self.heap: list[tuple[int, int, _Group, _Cursor | None]] = []
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

    def absorb(self, g: _Group) -> None:
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
            values = [(k, big.host if k in _HOST_SCOPED else None, v) for k, v in big.values.items()]
            joiner._insert(big, [key for key in values if key not in self.added])
            joiner._insert(big, self.added)
