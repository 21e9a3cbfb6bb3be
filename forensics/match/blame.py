"""Culprit + victims + why: which ranks / GPUs / processes / nodes broke the job and which only waited.

Read from the root cause's and its consequences' evidence (:mod:`forensics.match.blame_evidence`),
strongest basis first: the cross-rank and odd-one-out detectors, then the GPU, rank or process the
root's own error names, then a symptom alone (its victims are known, its culprit not).

Identities are joined where the logs say who is who (forensics/timeline/identity.py: NCCL ``Init
COMPLETE`` lines put a rank on a bus id and a pid, torchrun lines a local rank on a pid, NVML a pid on
a GPU): an Xid's pid becomes its worker's rank, a rank its GPU. Where both sides single out the same
numbers on one host, rank i is GPU i.

The result is present whenever one rank, GPU, process or node is identifiable — a single worker's
failure too — and when the victims are known but not the culprit; then ``why`` says why the evidence
does not separate them. ``None`` when the evidence names nobody. Labels stay bounded at any scale:
``63 ranks (0–32, 34–63)``, at most :data:`MAX_PARTS` runs listed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from forensics.events import Event, MetricSample
from forensics.findings import Blame, Finding, Verdict
from forensics.match.blame_evidence import (
    HARDWARE,
    SYMPTOMS,
    Acc,
    from_detectors,
    from_errors,
    hardware_why,
    is_waiting,
    nums,
)
from forensics.match.detectors.odd_one_out import gpu_indices
from forensics.match.detectors.ranks import counted_ranks
from forensics.timeline.identity import IdentityTable

__all__ = ["MAX_PARTS", "blame"]

#: Runs of numbers listed in a label before "… (N more)".
MAX_PARTS = 12


def _root_gpus(acc: Acc, root: Finding, index: dict[tuple[str | None, str], int], rank_of: dict[str, int]) -> None:
    """A hardware root names its GPU even when the detectors named the rank: both are the culprit."""
    hw = [e for e in root.evidence if e.kind in HARDWARE and e.gpu]
    for e in hw:
        acc.c_gpus.setdefault(str(e.gpu), index.get((e.host, str(e.gpu))))
        if str(e.gpu).lower() in rank_of:
            acc.c_ranks.add(rank_of[str(e.gpu).lower()])
    if hw:
        acc.why.insert(0, hardware_why(hw[0]))
        acc.basis.insert(0, root.signature)


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
        idx = [i for i in gpus.values() if i is not None]
        from forensics.findings import number_ranges

        return f"GPU{'s' if len(idx) > 1 else ''} {number_ranges(idx, min_run=3, max_parts=MAX_PARTS)}"
    names = sorted(gpus)
    shown = ", ".join(names[:MAX_PARTS]) + (f", … ({len(names) - MAX_PARTS} more)" if len(names) > MAX_PARTS else "")
    return (f"{len(names)} GPUs ({shown})" if len(names) > 3 else ("GPUs " if len(names) > 1 else "GPU ") + shown) \
        if gpus else ""


def _pid_text(pids: dict[int, str]) -> str:
    if not pids:
        return ""
    shown = [f"{p} ({n})" if n else str(p) for p, n in sorted(pids.items())[:MAX_PARTS]]
    more = f", … ({len(pids) - MAX_PARTS} more)" if len(pids) > MAX_PARTS else ""
    return ("pids " if len(pids) > 1 else "pid ") + ", ".join(shown) + more


def _join(ranks: set[int], gpus: dict[str, int | None], rank_of: dict[str, int],
          pids: dict[int, str] | None = None) -> str:
    """"ranks 6, 7 (GPUs 6, 7)" when ranks and GPUs are the same workers, else both listed; then pids."""
    via_nccl = {rank_of[g.lower()] for g in gpus if g.lower() in rank_of}
    idx = {i for i in gpus.values() if i is not None}
    pid_text = _pid_text(pids or {})
    if ranks and len(gpus) == 1 and len(ranks) > 1 and not via_nccl:  # workers sharing one GPU
        return nums("rank", ranks, MAX_PARTS, also=pid_text) + f" on {_gpu_text(gpus)}"
    if ranks and gpus and (via_nccl == ranks or (not via_nccl and idx == ranks) or len(ranks) == len(gpus) == 1):
        text = nums("rank", ranks, MAX_PARTS, also=_gpu_text(gpus))
    elif not ranks and via_nccl and len(via_nccl) == len(gpus):
        text = f"{_gpu_text(gpus)} ({nums('rank', via_nccl, MAX_PARTS)})"
    else:
        text = "; ".join(t for t in (nums("rank", ranks, MAX_PARTS), _gpu_text(gpus)) if t)
    return "; ".join(t for t in (text, pid_text) if t)


#: Kinds in which a worker states its own rank and pid together (its own line, NCCL's init, the launcher).
_PID_RANK_KINDS = ("rank-activity", "nccl", "torchrun")


def _pid_ranks(events: Sequence[Event]) -> dict[int, int]:
    """pid → rank, where one event states both (several ranks for one pid: none)."""
    seen: dict[int, set[int]] = {}
    for e in events:
        if e.kind in _PID_RANK_KINDS and e.pid is not None and e.rank is not None:
            seen.setdefault(e.pid, set()).add(e.rank)
    return {pid: next(iter(rs)) for pid, rs in seen.items() if len(rs) == 1}


def _through_identity(acc: Acc, identity: IdentityTable | None, pid_rank: dict[int, int]) -> None:
    """The culprit (and victim) pids' workers: their ranks (a worker's own statement first) and GPU where
    the identity table joins them, when the evidence named no rank or GPU itself."""
    host = next(iter(acc.hosts)) if len(acc.hosts) == 1 else None
    table = identity if identity is not None and len(identity) else None
    named_ranks, named_gpus = bool(acc.c_ranks), bool(acc.c_gpus)
    for pid in sorted(acc.c_pids):
        row = table.find(host, pid=pid) if table is not None else None
        rank = pid_rank.get(pid, row.rank if row is not None else None)
        if rank is not None and not named_ranks:
            acc.c_ranks.add(rank)
        gpu = row.gpu if row is not None else None
        if gpu and not named_gpus:
            acc.c_gpus[gpu] = row.gpu_index if row is not None and row.gpu_index is not None else (
                int(gpu) if gpu.isdigit() else None)
        if row is not None and row.host:
            acc.hosts.add(row.host)
    if not acc.v_ranks:
        acc.v_ranks |= {pid_rank[pid] for pid in acc.v_pids if pid in pid_rank}


def _last_lines(acc: Acc, events: Sequence[Event]) -> None:
    """The culprit ranks' last lines (``rank-activity``) as facts, and in the why of a rank that fell behind."""
    last = {e.rank: e for e in events if e.kind == "rank-activity" and e.rank in acc.c_ranks}
    for r, e in sorted(last.items(), key=lambda kv: kv[0] or 0):
        text = e.attrs.get("last_text")
        if isinstance(text, str) and text:
            acc.facts.setdefault(f"rank {r}", {}).setdefault("last_line", text)
    pids = {e.pid for e in last.values() if e.pid is not None}
    if last and len(pids) == len(acc.c_ranks) and not acc.c_pids:  # each culprit rank's own process
        acc.c_pids = dict.fromkeys(sorted(pids), "")
    waits = [e for e in events if is_waiting(e)]
    if "rank-behind" in acc.basis and len(last) == 1 and len(acc.c_ranks) == 1 and waits:
        (r, e), = last.items()
        if all(_before(e, w) for w in waits):  # it went quiet before the others began to wait
            from forensics.units import when

            acc.why.append(f"rank {r}'s last line ({when(e)}): '{str(e.attrs.get('last_text', ''))[:100]}'")


def _before(a: Event, b: Event) -> bool:
    """``a`` came before ``b``: by line in one file (times inferred for untimed lines may cross), else by time."""
    if a.origin.path == b.origin.path:
        return a.origin.line < b.origin.line
    return a.ts is not None and b.ts is not None and a.ts < b.ts


def _undecided(acc: Acc, events: Sequence[Event]) -> str:
    """Why the evidence does not single out a culprit (victims known, culprit not)."""
    world = max((n for e in events for k in ("nranks", "world_size")
                 if isinstance(n := e.attrs.get(k), int) and not isinstance(n, bool) and 0 < n < 1 << 20),
                default=None)
    waiting = acc.v_ranks
    verb = "reports" if len(waiting) == 1 else "report"
    if world is not None and waiting and len(waiting) >= world:
        return (f"all {world} ranks {verb} waiting: none is missing from the reports, so the rank that stopped "
                "first is not in these logs (its own output, its node's kernel log or a stack dump would show it)")
    if world is not None and waiting:
        missing = world - len(waiting)
        return (f"{nums('rank', waiting, MAX_PARTS)} of {world} {verb} waiting (timed out); {missing} "
                f"rank{'s' if missing > 1 else ''} did not report, too many to tell which one stopped first")
    if waiting:
        return (f"{nums('rank', waiting, MAX_PARTS)} {verb} waiting (timed out); the logs give neither the job's "
                "size nor the output of a rank that stopped, so the one that stopped first cannot be told")
    return "the logs do not show which worker stopped first"


def blame(verdict: Verdict, events: Sequence[Event], samples: Sequence[MetricSample] = (),
          identity: IdentityTable | None = None, context: set[int] | frozenset[int] = frozenset()) -> Blame | None:
    """The culprit line of ``verdict`` (module docstring); ``context`` holds the id() of events from before
    a recording began, which name nobody while the root has events of this run."""
    root = verdict.root_cause
    if root is None:
        return None
    related = [root, *verdict.consequences]
    index = gpu_indices(events, samples)
    rank_of = _rank_of_gpu(events)
    acc = from_detectors(related, index)
    if not acc.basis:
        from_errors(acc, root, verdict.consequences, index, events, context)
    elif root.signature not in SYMPTOMS:
        _root_gpus(acc, root, index, rank_of)
        own = next((e for e in root.evidence if e.kind != "derived" and e.rank in acc.c_ranks
                    and e.kind not in HARDWARE), None)
        if own is not None and root.signature not in acc.basis:  # what the culprit rank itself was doing
            text = re.sub(r"^(?:INFO|WARNING|WARN|ERROR|DEBUG)\b\s*[:-]?\s*", "", " ".join(own.message.split()))
            acc.why.insert(0, f"rank {own.rank}: {text[:120]}")
            acc.basis.append(root.signature)
    _through_identity(acc, identity, _pid_ranks(events))
    acc.v_ranks -= acc.c_ranks
    for g in acc.c_gpus:
        acc.v_gpus.pop(g, None)
    if acc.c_ranks and not (acc.v_ranks or acc.v_gpus):  # the other ranks seen waiting or terminated
        acc.v_ranks = {r for e in events if is_waiting(e) for r in counted_ranks(e)} - acc.c_ranks
    if not acc.named and not (acc.v_ranks or acc.v_gpus):
        return None
    _last_lines(acc, events)
    culprits = _join(acc.c_ranks, acc.c_gpus, rank_of, acc.c_pids)
    victims = _join(acc.v_ranks, acc.v_gpus, rank_of)
    all_hosts = {e.host for e in events if e.host}
    if len(all_hosts) > 1 and acc.c_ranks:  # multi-node: which node the culprit ranks ran on
        acc.hosts |= {e.host for e in events if e.host and e.rank in acc.c_ranks}
    if culprits and len(acc.hosts) == 1 and len(all_hosts) > 1:
        culprits += f" on {next(iter(acc.hosts))}"
    elif not culprits and acc.hosts:  # workers a launcher named by their node only
        names = sorted(acc.hosts)
        culprits = ("nodes " if len(names) > 1 else "node ") + ", ".join(names[:MAX_PARTS]) + (
            f", … ({len(names) - MAX_PARTS} more)" if len(names) > MAX_PARTS else "")
    why = "; ".join(acc.why)
    if not culprits:
        why = why or _undecided(acc, events)
    return Blame(culprits=culprits, victims=victims, why=why, culprit_ranks=sorted(acc.c_ranks),
                 culprit_gpus=sorted(acc.c_gpus), culprit_hosts=sorted(acc.hosts),
                 victim_ranks=sorted(acc.v_ranks), victim_gpus=sorted(acc.v_gpus), basis=acc.basis,
                 facts=acc.facts, culprit_pids=sorted(acc.c_pids))
