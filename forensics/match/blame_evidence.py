"""What the verdict's evidence says about who broke the job: read by :mod:`forensics.match.blame`.

:class:`Acc` collects culprits (ranks, GPUs, processes, hosts) and victims with the sentences and
detectors they rest on. The readers, strongest basis first:

* :func:`from_detectors`: the cross-rank and odd-one-out detectors (``rank-behind``, ``rank-silent``,
  ``nccl-desync``, ``gpu-odd-one-out``, ``gpu-idle-while-peers-busy``);
* :func:`from_errors`: the GPU, rank or process the root's own error lines name (an Xid and its pid,
  a CUDA error or OOM on one rank, a worker killed by a signal the launcher did not send, the OOM
  killer's victim, a hung task); the ranks of the consequences that report waiting are the victims;
  a symptom alone (a timeout) names only victims — unless the symptom names the culprit itself
  (ranks that lost the c10d store while waiting for another rank's NCCL id).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from forensics.events import Event
from forensics.findings import Finding
from forensics.match.detectors.ranks import counted_ranks
from forensics.match.facts import oom_sentence
from forensics.match.xid_catalog import lookup
from forensics.pci import normalize_pci

__all__ = ["HARDWARE", "SYMPTOMS", "Acc", "from_detectors", "from_errors", "hardware_why", "is_waiting", "nums"]

#: Signatures whose own events are the waiting side, never a culprit (symptoms of someone else).
SYMPTOMS = ("nccl-watchdog-timeout", "nccl-error", "rendezvous-timeout", "silent-worker-stall",
            "throughput-collapse", "nccl-net-error")
SENT_BY_LAUNCHER = ("SIGTERM", "SIGINT")
HARDWARE = ("xid", "gpu-lost", "nvrm", "ecc", "aer")
#: Kinds whose ``gpu`` names the GPU at fault when they are the root's own evidence.
_GPU_FAULT = (*HARDWARE, "gpu-info", "nvidia-smi", "dcgm")
#: A GPU a message names by its PCI address (``GPU0000:03:00.0``, ``GPU 0000:81:00.0``, ``GPU PCI:0000:19:00``).
_GPU_BUS = re.compile(r"\bGPU ?(?:PCI:)?((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\b")
#: How much of an error's message makes it "the same error" on another worker (a paste may cut or join its end).
SAME_CHARS = 100
#: Kinds whose ``pid`` names the process at fault when they are the root's own evidence.
_PID_FAULT = ("oom-killer", "hung-task", "xid", "torchrun", "log", "warning")


def nums(kind: str, items: Iterable[int], limit: int = 0, also: str = "") -> str:
    """``rank 6`` / ``ranks 6, 7`` / ``ranks 0–5`` / ``63 ranks (0–32, 34–63)``: a count first when more
    than 3 are not one run. ``also`` joins what the same workers are called otherwise (their GPUs)."""
    from forensics.findings import number_ranges

    xs = sorted(set(items))
    if not xs:
        return ""
    listed = number_ranges(xs, min_run=3, max_parts=limit)
    if len(xs) > 3 and xs[-1] - xs[0] + 1 != len(xs):
        return f"{len(xs)} {kind}s ({listed}{'; ' + also if also else ''})"
    return f"{kind}{'s' if len(xs) > 1 else ''} {listed}" + (f" ({also})" if also else "")


def _sentence(e: Event) -> str:
    return e.message.split("] ", 1)[-1].rstrip(".")


def _int_list(v: object) -> list[int]:
    if not isinstance(v, list | tuple):
        return []
    return [int(x) for x in v if isinstance(x, int) and not isinstance(x, bool)]


class Acc:
    """What the evidence says so far."""

    def __init__(self) -> None:
        self.c_ranks: set[int] = set()
        self.v_ranks: set[int] = set()
        self.c_gpus: dict[str, int | None] = {}  # bus id or index text -> index
        self.v_gpus: dict[str, int | None] = {}
        self.c_pids: dict[int, str] = {}  # pid -> process name ('' when unknown)
        self.v_pids: set[int] = set()
        self.hosts: set[str] = set()
        self.why: list[str] = []
        self.basis: list[str] = []
        self.facts: dict[str, dict[str, object]] = {}

    def add_why(self, text: str, basis: str) -> None:
        if text and text not in self.why:
            self.why.append(text)
        if basis not in self.basis:
            self.basis.append(basis)

    @property
    def named(self) -> bool:
        return bool(self.c_ranks or self.c_gpus or self.c_pids or self.hosts)


#: A detector that sets stopped workers apart: its attr of their ranks (and ``<it>_hosts``, ``<it>_pids``: the
#: workers a launcher named by node or process) and its attr of the ranks that went on or wait.
_STOPPED = {"rank-behind": ("behind", "waiting"), "rank-silent": ("silent", "going")}


def _derived(acc: Acc, e: Event, index: dict[tuple[str | None, str], int]) -> None:
    det = e.attrs.get("detector")
    if det in _STOPPED:
        stopped, others = _STOPPED[str(det)]
        acc.c_ranks |= set(_int_list(e.attrs.get(stopped)))
        acc.v_ranks |= set(_int_list(e.attrs.get(others)))
        acc.hosts |= {str(h) for h in e.attrs.get(f"{stopped}_hosts") or []}
        for pid in _int_list(e.attrs.get(f"{stopped}_pids")):
            acc.c_pids.setdefault(pid, "")
    if det == "rank-behind":
        acc.add_why(_sentence(e), det)
    elif det == "rank-silent":
        last = e.attrs.get("last_step")
        for r, step in (last.items() if isinstance(last, dict) else []):
            if step is not None or f"rank {r}" not in acc.facts:
                acc.facts.setdefault(f"rank {r}", {})["last_step"] = step
        lines = e.attrs.get("last_line")
        for w, text in (lines.items() if isinstance(lines, dict) else []):
            acc.facts.setdefault(str(w), {})["last_line"] = text
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
    elif det in ("stunted-workers", "idle-workers") and e.attrs.get("stunted_pids"):
        for pid in _int_list(e.attrs.get("stunted_pids")):
            acc.c_pids.setdefault(pid, "")
        acc.v_pids |= set(_int_list(e.attrs.get("busy_pids") or e.attrs.get("grown_pids")))
        acc.add_why(_sentence(e), str(det))


def from_detectors(related: Sequence[Finding], index: dict[tuple[str | None, str], int]) -> Acc:
    acc = Acc()
    seen: set[int] = set()
    order = ("rank-behind", "rank-silent", "nccl-desync", "gpu-odd-one-out")
    evs = [e for f in related for e in f.evidence if e.kind == "derived"]
    for det in order:
        for e in evs:
            if e.attrs.get("detector") == det and id(e) not in seen:
                seen.add(id(e))
                _derived(acc, e, index)
    for e in evs:  # the processes of workers that sit idle on a busy GPU are culprits with their ranks
        if e.attrs.get("detector") == "idle-workers" and id(e) not in seen:
            seen.add(id(e))
            _derived(acc, e, index)
    if not acc.named:  # workers on one GPU told apart by their own memory alone
        for e in evs:
            if e.attrs.get("detector") == "stunted-workers" and id(e) not in seen:
                seen.add(id(e))
                _derived(acc, e, index)
                break
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
    for e in evs:
        if e.attrs.get("detector") == "queue-backpressure" and acc.named:
            acc.add_why(_sentence(e), "queue-backpressure")
            break
    return acc


def _rank_of(e: Event) -> int | None:
    r = e.rank if e.rank is not None else e.attrs.get("rank")
    return r if isinstance(r, int) and not isinstance(r, bool) else None


def _pid_of(e: Event) -> int | None:
    p = e.pid if e.pid is not None else e.attrs.get("pid")
    return p if isinstance(p, int) and not isinstance(p, bool) and p > 0 else None


def from_errors(acc: Acc, root: Finding, consequences: Sequence[Finding],
                index: dict[tuple[str | None, str], int], events: Sequence[Event] = (),
                context: set[int] | frozenset[int] = frozenset()) -> None:
    """The GPU, rank or process that the root's own (non-derived) error lines name; the same error
    on other ranks (the same kind and message: the evidence keeps only some of them) names those too."""
    if root.signature in SYMPTOMS:
        for e in root.evidence:
            if is_waiting(e):
                acc.v_ranks.update(r for r in counted_ranks(e) if r not in acc.c_ranks)
        _store_host_gone(acc, root)
        if not acc.named:
            _dead_worker(acc, root, events)
        return
    if _mismatch(acc, root):
        return
    first: Event | None = None
    program = ("traceback", "log", "cuda-error", "c10d")  # a program's own lines (a launcher may label their node)
    own_run = [e for e in root.evidence if id(e) not in context]
    for e in own_run or root.evidence:
        if e.kind == "derived":
            continue
        if e.kind == "torchrun" and (e.attrs.get("sent") or e.attrs.get("signal") in SENT_BY_LAUNCHER):
            r = _rank_of(e)
            if r is not None:
                acc.v_ranks.add(r)
            continue
        if is_waiting(e):
            acc.v_ranks.update(counted_ranks(e))
            continue
        hit = False
        if e.gpu and (e.kind in _GPU_FAULT or (e.kind == "traceback" and e.attrs.get("oom"))):
            acc.c_gpus.setdefault(e.gpu, index.get((e.host, e.gpu)) if not e.gpu.isdigit() else int(e.gpu))
            hit = True
        elif not e.gpu and (m := _GPU_BUS.search(e.message)):  # "… device handle for GPU0000:03:00.0"
            bus = normalize_pci(m.group(1))
            if bus:
                acc.c_gpus.setdefault(bus, index.get((e.host, bus)))
                hit = True
        r = _rank_of(e)
        if r is not None:
            acc.c_ranks.add(r)
            hit = True
        pid = _pid_of(e)
        if pid is not None and e.kind in _PID_FAULT:  # the process that printed or died of the error
            acc.c_pids.setdefault(pid, str(e.attrs.get("process") or ""))
            hit = True
        elif e.kind == "kernel" and (task := _TASK.search(e.message)):  # a hung task's own stack header
            acc.c_pids.setdefault(int(task.group(2)), task.group(1))
            hit = True
        if hit:
            first = first or e
            if e.host:
                acc.hosts.add(e.host)
    if not acc.named and len({e.host for e in events if e.host}) > 1:  # the node a launcher labelled them with
        nodes = {e.host for e in own_run or root.evidence if e.kind in program and e.host}
        if len(nodes) == 1:
            acc.hosts |= nodes
            first = first or next((e for e in own_run or root.evidence if e.kind in program), None)
    if not acc.named:
        _p2p_pair(acc, root, events, index)
    gpu = root.facts.get("gpu") if isinstance(root.facts, dict) else None
    if isinstance(gpu, int) and not isinstance(gpu, bool) and not acc.c_gpus:  # "GPU 6 has a total capacity …"
        acc.c_gpus[str(gpu)] = gpu
        first = first or next((e for e in own_run or root.evidence if e.kind != "derived"), None)
    own = {(e.kind, e.message[:SAME_CHARS]) for e in root.evidence if e.kind in ("traceback", "cuda-error")}
    if own:  # the same error on other workers: by rank, else by the node or process a launcher named
        same = [e for e in events if (e.kind, e.message[:SAME_CHARS]) in own]
        ranks = {r for e in same if (r := _rank_of(e)) is not None}
        acc.c_ranks |= ranks
        if not ranks and len({e.host for e in events if e.host}) > 1:
            acc.hosts |= {e.host for e in same if e.host}
        if not ranks:
            for pid in {p for e in same if (p := _pid_of(e)) is not None}:
                acc.c_pids.setdefault(pid, "")
    process = next((e for e in own_run or root.evidence if e.kind in ("oom-killer", "hung-task") and _pid_of(e)
                    and e.attrs.get("process") and (e.kind != "oom-killer" or "rss_kb" in e.attrs
                                                    or "score" in e.attrs)), None)
    if first is not None and process is not None and not acc.c_ranks and not acc.c_gpus:
        acc.add_why(_process_why(process), root.signature)
    elif first is not None:
        if first.kind in HARDWARE and first.gpu:
            acc.add_why(hardware_why(first), root.signature)
        elif first.kind == "torchrun" and first.attrs.get("signal"):
            text = f"{nums('rank', acc.c_ranks) or 'a worker'} died of {first.attrs['signal']} " \
                   f"(exitcode {first.attrs.get('exitcode')})"
            if acc.v_ranks - acc.c_ranks:
                text += f"; the launcher then terminated {nums('rank', acc.v_ranks - acc.c_ranks)}"
            acc.add_why(text, root.signature)
        elif oom_sentence(root.facts):  # the sizes; the phase is the summary's to say
            acc.add_why(oom_sentence({k: v for k, v in root.facts.items() if k not in ("phase", "first")}),
                        root.signature)
        else:
            acc.add_why(f"{root.signature}: {' '.join(first.message.split())[:140]}", root.signature)
    for f in consequences:  # the ranks the consequences show waiting (not those that failed on their own)
        for e in f.evidence:
            if is_waiting(e):
                acc.v_ranks.update(r for r in counted_ranks(e) if r not in acc.c_ranks)


#: Roots that are a failure of the peer-to-peer path between GPUs: its two ends are the culprit.
P2P_ROOTS = ("nccl-p2p-failure",)
#: NCCL naming both ends of a P2P connection by bus id: ``Channel 00 : 1[c2000] -> 0[c1000] via P2P/direct
#: pointer`` (NCCL before 2.12), ``Could not enable P2P between dev 5(=89000) and dev 4(=88000)``.
_P2P_BUSES = re.compile(r"\d+\[([0-9a-fA-F]{5,})\] -> \d+\[([0-9a-fA-F]{5,})\].*\bvia P2P"
                        r"|P2P between dev \d+\(=([0-9a-fA-F]{4,})\) and dev \d+\(=([0-9a-fA-F]{4,})\)")


def _p2p_pair(acc: Acc, root: Finding, events: Sequence[Event], index: dict[tuple[str | None, str], int]) -> None:
    """A P2P failure is between two GPUs, and both are the culprit when the logs name exactly two: by the NVML
    numbers NCCL gives its workers' GPUs (``Setting affinity for GPU 3``, ``nvmlDev 3``: nvidia-smi's numbers,
    whatever ``CUDA_VISIBLE_DEVICES`` renumbered), else by bus id (nccl-tests' device list, NCCL's P2P lines)."""
    if root.signature not in P2P_ROOTS:
        return
    pids = {e.pid for e in root.evidence if e.kind == "nccl" and e.pid is not None}
    nccl = [e for e in events if e.kind == "nccl" and (not pids or e.pid is None or e.pid in pids)]
    nvml: dict[tuple[str | None, int | None, object], int] = {}
    for e in nccl:
        n = e.attrs.get("nvml_dev")
        if isinstance(n, int) and not isinstance(n, bool):
            nvml.setdefault((e.host, e.pid, e.attrs.get("cuda_dev")), n)
    host = next((e.host for e in nccl if e.host), None)
    gpus: dict[str, int | None] = {}
    if len(set(nvml.values())) == 2:
        gpus = {str(n): n for n in sorted(set(nvml.values()))}
    else:
        buses = {str(d["pci"]) for e in nccl if e.attrs.get("tool") == "nccl-tests"
                 for d in (e.attrs.get("devices") or []) if isinstance(d, dict) and d.get("pci")}
        if len(buses) != 2:
            buses = {b for e in nccl if (m := _P2P_BUSES.search(e.message))
                     for g in m.groups() if g and (b := normalize_pci(g))}
        if len(buses) == 2:
            gpus = {b: index.get((host, b)) for b in sorted(buses)}
    if len(gpus) != 2:
        return
    acc.c_gpus.update(gpus)
    a, b = (f"GPU {i if i is not None else g}" for g, i in gpus.items())
    acc.add_why(f"the peer-to-peer path between {a} and {b} failed: both ends are suspects (a PCIe switch with "
                "ACS on, a board or a slot between them)", root.signature)


def _process_why(e: Event) -> str:
    """What happened to a process in the kernel's words, shortly: the OOM killer's victim, a hung task."""
    name = f"pid {_pid_of(e)} ({e.attrs.get('process')})"
    if e.kind == "oom-killer":
        rss = e.attrs.get("rss_kb")
        held = f", holding {int(rss) / 2**20:.1f} GiB of RAM" if isinstance(rss, int) and rss > 0 else ""
        return f"the kernel's OOM killer ended {name}{held}"
    secs = e.attrs.get("seconds")
    return f"{name} blocked in the kernel" + (f" for more than {secs} s" if secs else "")


def is_waiting(e: Event) -> bool:
    """A line that shows its rank waiting for, or stopped because of, someone else."""
    if e.kind == "c10d":
        return bool(e.attrs.get("timeout") or e.attrs.get("op_type") or e.attrs.get("last_enqueued") is not None)
    if e.kind == "traceback" and "Timed out waiting" in e.message and "gloo" in e.message:
        return True
    return e.kind == "torchrun" and bool(e.attrs.get("sent") or e.attrs.get("signal") in SENT_BY_LAUNCHER)


def hardware_why(e: Event) -> str:
    code = e.attrs.get("xid")
    if e.kind == "xid" and isinstance(code, int):
        info = lookup(code)
        return f"GPU {e.gpu} logged Xid {code}" + (f" ({info.description})" if info else "")
    return f"GPU {e.gpu}: {e.message[:120]}"


#: PyTorch's collective fingerprint check (``TORCH_DISTRIBUTED_DEBUG=DETAIL``, ProcessGroupWrapper): ``Detected
#: mismatch between collectives on ranks. Rank 4 is running collective: CollectiveFingerPrint(SequenceNumber=101,
#: OpType=ALLGATHER, …), but Rank 7 is running collective: CollectiveFingerPrint(SequenceNumber=0OpType=REDUCE)``.
_FINGERPRINT = re.compile(r"Rank (\d+) is running collective: CollectiveFingerPrint\(SequenceNumber=(\d+),?\s*"
                          r"OpType=(\w+)")


#: The kernel's header of a task's stack (``sched_show_task``): ``task:python3.11 state:D stack:0 pid:15277``.
_TASK = re.compile(r"\btask:(\S+)\s+state:[A-Z]\b.*?\bpid:\s*(\d+)")
#: A supervisor saying which worker process died: Ray's raylet (``A worker died or was killed … Worker IP
#: address: 172.19.24.110 … Worker PID: 90738``).
_DEAD_WORKER = re.compile(r"worker died or was killed.*?Worker IP address: ([\d.:a-f]+).*?Worker PID: (\d+)", re.I)


def _dead_worker(acc: Acc, root: Finding, events: Sequence[Event]) -> None:
    """A symptom (a peer's collective failed: a remote process exited) and one worker its supervisor saw die:
    that worker is the culprit, the ranks that report the failure its victims."""
    dead = {(m.group(1), int(m.group(2))) for e in events if e.kind in ("log", "warning", "traceback")
            and "Worker PID" in e.message and (m := _DEAD_WORKER.search(e.message))}
    if len(dead) != 1:
        return
    ((host, pid),) = dead
    acc.c_pids.setdefault(pid, "")
    acc.hosts.add(host)
    for e in root.evidence:
        acc.v_ranks.update(counted_ranks(e))
    acc.add_why(f"the worker process {pid} on {host} died (its supervisor says so); the others' collectives then "
                "failed", root.signature)


def _mismatch(acc: Acc, root: Finding) -> bool:
    """Ranks the fingerprint check names: those running the collective fewer ranks run are the culprits
    (on a tie, the rank furthest behind in sequence numbers), the others their victims."""
    seen: dict[int, tuple[int, str]] = {}
    for e in root.evidence:
        for m in _FINGERPRINT.finditer(e.text):
            seen.setdefault(int(m.group(1)), (int(m.group(2)), m.group(3)))
    ops: dict[str, set[int]] = {}
    for rank, (_, op) in seen.items():
        ops.setdefault(op, set()).add(rank)
    if len(ops) < 2:
        return False
    sizes = sorted(len(r) for r in ops.values())
    if sizes[0] < sizes[-1]:
        odd = {r for rs in ops.values() if len(rs) == sizes[0] for r in rs}
    else:
        low = min(seq for seq, _ in seen.values())
        behind = {r for r, (seq, _) in seen.items() if seq == low}
        if len(behind) == len(seen):
            return False
        odd = behind
    acc.c_ranks |= odd
    acc.v_ranks |= set(seen) - odd
    text = "; ".join(f"{nums('rank', rs)} at {ops_name} (SequenceNumber {seen[min(rs)][0]})"
                     for ops_name, rs in sorted(ops.items(), key=lambda kv: min(kv[1])))
    acc.add_why(f"the collective fingerprint check found the ranks in different collectives: {text}", root.signature)
    return True


#: ``[15] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store
#: by key '0', but store->get('0') got error: Connection reset by peer`` (PyTorch's own message goes on:
#: "a possible application crash on rank 0"); before 2.0 spelled "retreiving" and "got exception".
_STORE_HOST_GONE = re.compile(r"\[(\d+)\] is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from "
                              r"\[(\d+)\] via c10d key-value store.*got (?:error|exception): "
                              r".*(Connection reset by peer|Broken pipe|Connection refused)")


def _store_host_gone(acc: Acc, root: Finding) -> None:
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
    acc.add_why(f"{nums('rank', waiting)} lost the c10d store ({reason}) while waiting for rank {culprit}'s "
                f"NCCL id: rank {culprit}'s process had ended (its own output says why)", root.signature)
