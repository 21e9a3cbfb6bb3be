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
with an index (``forensics/timeline/identity_join.py``), so a fact costs the rows it could join, not all rows.

Only GPUs become rows. A PCI address is a GPU's when a parser put it in ``Event.gpu`` (NVML,
nvidia-smi, lspci NVIDIA devices, an ``nvidia`` driver line) or when it is the ``pci``/``bus_id``
of an event whose kind speaks of GPUs (Xid and NVRM lines, NVML events, nvidia-smi, NCCL's
busId); the ``pci`` of any other event (an AER line from a root port, an IOMMU fault of a NIC, an
NVSwitch SXid) names no GPU. Such an event gets a GPU only when an address it names is one already
known: its own ``pci``, or for AER the device behind the port that the message names
(``AER: Corrected error received: 0000:b8:00.0``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from forensics.events import Event, MetricSample
from forensics.pci import find_pci, normalize_pci
from forensics.timeline.identity_join import Group as _Group
from forensics.timeline.identity_join import Joiner
from forensics.values import as_int as _int

__all__ = ["Identity", "IdentityTable", "build_identity"]

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

    joiner = Joiner()
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
