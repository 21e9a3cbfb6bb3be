"""Culprit + victims + why: which ranks / GPUs / nodes broke a multi-rank job and which only waited.

Read from the root cause's and its consequences' evidence, strongest basis first:

1. cross-rank and odd-one-out detectors: ``rank-behind`` (the ranks that fell behind vs the ranks
   waiting), ``rank-silent`` (ranks whose progress stopped vs those that went on),
   ``gpu-odd-one-out`` (idle GPUs with much less memory than their peers), ``nccl-desync`` (the
   smaller group of ranks that ran another collective), ``gpu-idle-while-peers-busy``;
2. the GPU or rank a hardware / process error names (an Xid, a GPU lost, a CUDA error or OOM on
   one rank, a worker killed by a signal the launcher did not send); the ranks of the
   consequences (watchdog timeouts, ranks the launcher terminated) are the victims;
3. a symptom alone (every rank timed out, nothing else): the victims are known, the culprit is not —
   unless the symptom names it: ranks that lost the c10d store while waiting for another rank's NCCL
   id (``store->get('0') got error: Connection reset by peer``) name the rank whose process ended.

Ranks and GPUs are joined where the logs say which rank used which GPU (NCCL ``Init COMPLETE``
lines), or where both sides single out the same numbers on one host (rank i on GPU i).
The result is ``None`` unless the job has at least two ranks or GPUs and someone is named.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from forensics.events import Event, MetricSample
from forensics.findings import Blame, Finding, Verdict, number_ranges
from forensics.match.detectors.odd_one_out import gpu_indices
from forensics.match.xid_catalog import lookup

__all__ = ["blame"]

#: Signatures whose own events are the waiting side, never a culprit (symptoms of someone else).
_SYMPTOMS = ("nccl-watchdog-timeout", "nccl-error", "rendezvous-timeout", "silent-worker-stall",
             "throughput-collapse", "nccl-net-error")
_SENT_BY_LAUNCHER = ("SIGTERM", "SIGINT")


def _nums(kind: str, items: Iterable[int]) -> str:
    xs = sorted(set(items))
    return f"{kind}{'s' if len(xs) > 1 else ''} {number_ranges(xs, min_run=3)}" if xs else ""


def _sentence(e: Event) -> str:
    return e.message.split("] ", 1)[-1].rstrip(".")


def _int_list(v: object) -> list[int]:
    if not isinstance(v, list | tuple):
        return []
    return [int(x) for x in v if isinstance(x, int) and not isinstance(x, bool)]


class _Acc:
    """What the evidence says so far."""

    def __init__(self) -> None:
        self.c_ranks: set[int] = set()
        self.v_ranks: set[int] = set()
        self.c_gpus: dict[str, int | None] = {}  # bus id or index text -> index
        self.v_gpus: dict[str, int | None] = {}
        self.hosts: set[str] = set()
        self.why: list[str] = []
        self.basis: list[str] = []
        self.facts: dict[str, dict[str, object]] = {}

    def add_why(self, text: str, basis: str) -> None:
        if text and text not in self.why:
            self.why.append(text)
        if basis not in self.basis:
            self.basis.append(basis)


def _derived(acc: _Acc, e: Event, index: dict[tuple[str | None, str], int]) -> None:
    det = e.attrs.get("detector")
    if det == "rank-behind":
        acc.c_ranks |= set(_int_list(e.attrs.get("behind")))
        acc.v_ranks |= set(_int_list(e.attrs.get("waiting")))
        acc.add_why(_sentence(e), det)
    elif det == "rank-silent":
        acc.c_ranks |= set(_int_list(e.attrs.get("silent")))
        acc.v_ranks |= set(_int_list(e.attrs.get("going")))
        last = e.attrs.get("last_step")
        for r, step in (last.items() if isinstance(last, dict) else []):
            acc.facts.setdefault(f"rank {r}", {})["last_step"] = step
        acc.add_why(_sentence(e), det)
    elif det == "nccl-desync":
        groups = [g for g in e.attrs.get("groups") or [] if isinstance(g, dict)]
        sizes = sorted(len(_int_list(g.get("ranks"))) for g in groups)
        if len(sizes) >= 2 and sizes[0] < sizes[1]:
            small = min(groups, key=lambda g: len(_int_list(g.get("ranks"))))
            acc.c_ranks |= set(_int_list(small.get("ranks")))
            for g in groups:
                if g is not small:
                    acc.v_ranks |= set(_int_list(g.get("ranks")))
        else:  # groups of equal size: a program bug on both sides, no rank to single out
            acc.basis.append(det)
            return
        acc.add_why(_sentence(e), det)
    elif det == "gpu-odd-one-out":
        raw = e.attrs.get("state")
        state: dict[str, dict[str, float]] = raw if isinstance(raw, dict) else {}
        for key, dest in (("culprit_gpus", acc.c_gpus), ("peer_gpus", acc.v_gpus)):
            for g in e.attrs.get(key) or []:
                dest[str(g)] = index.get((e.host, str(g)))
                i = dest[str(g)]
                if str(g) in state:
                    acc.facts[f"GPU {i if i is not None else g}"] = {"bus_id": str(g), **state[str(g)]}
        acc.add_why(_sentence(e), det)
        if e.host:
            acc.hosts.add(e.host)


def _from_detectors(related: Sequence[Finding], index: dict[tuple[str | None, str], int]) -> _Acc:
    acc = _Acc()
    seen: set[int] = set()
    order = ("rank-behind", "rank-silent", "nccl-desync", "gpu-odd-one-out")
    evs = [e for f in related for e in f.evidence if e.kind == "derived"]
    for det in order:
        for e in evs:
            if e.attrs.get("detector") == det and id(e) not in seen:
                seen.add(id(e))
                _derived(acc, e, index)
    if not acc.c_gpus:
        idle = [e for e in evs if e.attrs.get("detector") == "gpu-idle-while-peers-busy" and e.gpu]
        busy = {str(p) for e in idle for p in e.attrs.get("busy_peers") or []}
        idle_gpus = {str(e.gpu) for e in idle}
        if idle and busy and len(idle_gpus) <= len(busy - idle_gpus):
            host = idle[0].host
            acc.c_gpus = {g: index.get((host, g)) for g in idle_gpus}
            acc.v_gpus = {g: index.get((host, g)) for g in busy - idle_gpus}
            acc.add_why(_sentence(idle[0]) + (f" (and {len(idle) - 1} more)" if len(idle) > 1 else ""),
                        "gpu-idle-while-peers-busy")
    return acc


def _from_errors(acc: _Acc, root: Finding, consequences: Sequence[Finding],
                 index: dict[tuple[str | None, str], int]) -> None:
    """The GPU or rank that the root's own (non-derived) error lines name."""
    if root.signature in _SYMPTOMS:
        for e in root.evidence:
            r = e.rank if e.rank is not None else e.attrs.get("rank")
            if isinstance(r, int) and not isinstance(r, bool) and r not in acc.c_ranks:
                acc.v_ranks.add(r)
        _store_host_gone(acc, root)
        return
    named = False
    acc.c_ranks |= {r for e in root.evidence  # every rank the root's own error shows up on
                    if isinstance(r := e.rank, int) and e.kind != "derived" and not _waiting(e)}
    for e in root.evidence:
        if e.kind == "derived":
            continue
        if e.kind == "torchrun" and (e.attrs.get("sent") or e.attrs.get("signal") in _SENT_BY_LAUNCHER):
            r = e.rank if e.rank is not None else e.attrs.get("rank")
            if isinstance(r, int):
                acc.v_ranks.add(r)
            continue
        if e.gpu and e.kind in ("xid", "gpu-lost", "nvrm", "ecc", "aer", "gpu-info"):
            acc.c_gpus.setdefault(e.gpu, index.get((e.host, e.gpu)))
            named = True
        r = e.rank if e.rank is not None else e.attrs.get("rank")
        if isinstance(r, int) and not isinstance(r, bool):
            acc.c_ranks.add(r)
            named = True
        if e.host and named:
            acc.hosts.add(e.host)
    if named:
        first = next((e for e in root.evidence if e.kind != "derived" and (e.gpu or e.rank is not None)), None)
        if first is not None and first.kind in _HARDWARE and first.gpu:
            acc.add_why(_hardware_why(first), root.signature)
        elif first is not None and first.kind == "torchrun" and first.attrs.get("signal"):
            died = sorted(acc.c_ranks)
            text = f"{_nums('rank', died)} died of {first.attrs['signal']} (exitcode {first.attrs.get('exitcode')})"
            if acc.v_ranks - acc.c_ranks:
                text += f"; the launcher then terminated {_nums('rank', acc.v_ranks - acc.c_ranks)}"
            acc.add_why(text, root.signature)
        elif first is not None:
            acc.add_why(f"{root.signature}: {first.message[:140]}", root.signature)
    for f in consequences:  # the ranks the consequences show waiting (not those that failed on their own)
        for e in f.evidence:
            r = e.rank if e.rank is not None else e.attrs.get("rank")
            if isinstance(r, int) and not isinstance(r, bool) and r not in acc.c_ranks and _waiting(e):
                acc.v_ranks.add(r)


_HARDWARE = ("xid", "gpu-lost", "nvrm", "ecc", "aer")
#: ``[15] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store
#: by key '0', but store->get('0') got error: Connection reset by peer`` (PyTorch's own message goes on:
#: "a possible application crash on rank 0"); before 2.0 spelled "retreiving" and "got exception".
_STORE_HOST_GONE = re.compile(r"\[(\d+)\] is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from "
                              r"\[(\d+)\] via c10d key-value store.*got (?:error|exception): "
                              r".*(Connection reset by peer|Broken pipe|Connection refused)")


def _store_host_gone(acc: _Acc, root: Finding) -> None:
    """Ranks that lost the c10d store while they waited for the NCCL id: the rank whose id they waited
    for is the culprit (its process, holding the store, ended), they are its victims."""
    lost: dict[int, int] = {}  # waiting rank -> the rank it waited for
    reason = ""
    for e in root.evidence:
        m = _STORE_HOST_GONE.search(e.text)
        if m:
            lost[int(m.group(1))] = int(m.group(2))
            reason = m.group(3)
    roots = set(lost.values())
    if len(roots) != 1:
        return
    (culprit,) = roots
    waiting = set(lost) - roots
    if not waiting:
        return
    acc.c_ranks.add(culprit)
    acc.v_ranks |= waiting
    acc.add_why(f"{_nums('rank', waiting)} lost the c10d store ({reason}) while waiting for rank {culprit}'s "
                f"NCCL id: rank {culprit}'s process had ended (its own output says why)", root.signature)


def _root_gpus(acc: _Acc, root: Finding, index: dict[tuple[str | None, str], int], rank_of: dict[str, int]) -> None:
    """A hardware root names its GPU even when the detectors named the rank: both are the culprit."""
    hw = [e for e in root.evidence if e.kind in _HARDWARE and e.gpu]
    for e in hw:
        acc.c_gpus.setdefault(str(e.gpu), index.get((e.host, str(e.gpu))))
        if str(e.gpu).lower() in rank_of:
            acc.c_ranks.add(rank_of[str(e.gpu).lower()])
    if hw:
        acc.why.insert(0, _hardware_why(hw[0]))
        acc.basis.insert(0, root.signature)


def _hardware_why(e: Event) -> str:
    code = e.attrs.get("xid")
    if e.kind == "xid" and isinstance(code, int):
        info = lookup(code)
        return f"GPU {e.gpu} logged Xid {code}" + (f" ({info.description})" if info else "")
    return f"GPU {e.gpu}: {e.message[:120]}"


def _waiting(e: Event) -> bool:
    """A line that shows its rank waiting for, or stopped because of, someone else."""
    if e.kind == "c10d":
        return bool(e.attrs.get("timeout") or e.attrs.get("op_type") or e.attrs.get("last_enqueued") is not None)
    return e.kind == "torchrun" and bool(e.attrs.get("sent") or e.attrs.get("signal") in _SENT_BY_LAUNCHER)


def _rank_of_gpu(events: Sequence[Event]) -> dict[str, int]:
    """Bus id → rank, from NCCL ``Init COMPLETE`` lines (``rank``, ``bus_id`` / ``pci``)."""
    out: dict[str, int] = {}
    for e in events:
        if e.kind != "nccl":
            continue
        r, pci = e.attrs.get("rank"), e.attrs.get("pci") or e.attrs.get("bus_id")
        if isinstance(r, int) and isinstance(pci, str):
            out.setdefault(pci.lower(), r)
    return out


def _gpu_text(gpus: dict[str, int | None]) -> str:
    if gpus and all(i is not None for i in gpus.values()):
        return _nums("GPU", [i for i in gpus.values() if i is not None])
    return ("GPUs " if len(gpus) > 1 else "GPU ") + ", ".join(sorted(gpus)) if gpus else ""


def _join(ranks: set[int], gpus: dict[str, int | None], rank_of: dict[str, int]) -> str:
    """"ranks 6, 7 (GPUs 6, 7)" when ranks and GPUs are the same workers, else both listed."""
    via_nccl = {rank_of[g.lower()] for g in gpus if g.lower() in rank_of}
    idx = {i for i in gpus.values() if i is not None}
    if ranks and gpus and (via_nccl == ranks or (not via_nccl and idx == ranks)):
        return f"{_nums('rank', ranks)} ({_gpu_text(gpus)})"
    if not ranks and via_nccl and len(via_nccl) == len(gpus):
        return f"{_gpu_text(gpus)} ({_nums('rank', via_nccl)})"
    return "; ".join(t for t in (_nums("rank", ranks), _gpu_text(gpus)) if t)


def blame(verdict: Verdict, events: Sequence[Event], samples: Sequence[MetricSample] = ()) -> Blame | None:
    root = verdict.root_cause
    if root is None:
        return None
    related = [root, *verdict.consequences]
    index = gpu_indices(events, samples)
    acc = _from_detectors(related, index)
    if not acc.basis:
        _from_errors(acc, root, verdict.consequences, index)
    elif root.signature not in _SYMPTOMS:
        _root_gpus(acc, root, index, _rank_of_gpu(events))
        own = next((e for e in root.evidence if e.kind != "derived" and e.rank in acc.c_ranks
                    and e.kind not in _HARDWARE), None)
        if own is not None and root.signature not in acc.basis:  # what the culprit rank itself was doing
            text = re.sub(r"^(?:INFO|WARNING|WARN|ERROR|DEBUG)\b\s*[:-]?\s*", "", " ".join(own.message.split()))
            acc.why.insert(0, f"rank {own.rank}: {text[:120]}")
            acc.basis.append(root.signature)
    acc.v_ranks -= acc.c_ranks
    for g in acc.c_gpus:
        acc.v_gpus.pop(g, None)
    if not (acc.v_ranks or acc.v_gpus):
        # Culprit ranks only: the other ranks of the job are the victims. A GPU error alone names no
        # victims (other GPUs of the machine may have nothing to do with it): no culprit line then.
        if acc.c_ranks:  # ranks seen waiting (watchdog / flight-recorder records) or terminated by the launcher
            acc.v_ranks = {r for e in events if isinstance(r := e.rank, int) and _waiting(e)} - acc.c_ranks
        if not (acc.v_ranks or acc.v_gpus):
            return None
    workers = len(acc.c_ranks | acc.v_ranks) + len(set(acc.c_gpus) | set(acc.v_gpus))
    if workers < 2 or not (acc.c_ranks or acc.c_gpus or acc.v_ranks):
        return None
    rank_of = _rank_of_gpu(events)
    culprits = _join(acc.c_ranks, acc.c_gpus, rank_of)
    victims = _join(acc.v_ranks, acc.v_gpus, rank_of)
    all_hosts = {e.host for e in events if e.host}
    if len(all_hosts) > 1 and acc.c_ranks:  # multi-node: which node the culprit ranks ran on
        acc.hosts |= {e.host for e in events if e.host and e.rank in acc.c_ranks}
    if culprits and len(acc.hosts) == 1 and len(all_hosts) > 1:
        culprits += f" on {next(iter(acc.hosts))}"
    why = "; ".join(acc.why)
    if not culprits:
        verb = "reports" if len(acc.v_ranks) == 1 else "report"
        why = why or f"{victims} {verb} waiting (timed out); the logs do not show which rank stopped first"
    return Blame(culprits=culprits, victims=victims, why=why, culprit_ranks=sorted(acc.c_ranks),
                 culprit_gpus=sorted(acc.c_gpus), culprit_hosts=sorted(acc.hosts),
                 victim_ranks=sorted(acc.v_ranks), victim_gpus=sorted(acc.v_gpus), basis=acc.basis,
                 facts=acc.facts)
