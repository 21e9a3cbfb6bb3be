"""Honest unknowns: the verdict ``unrecognized-failure`` when no signature fired but the inputs
show that something failed.

Failure evidence, most decisive first: the recorded child's non-zero exit or death by a signal
(bundle manifest), a recording left ``running`` (the recorder or the host stopped), an uncaught
exception (a ``traceback`` event with an exception type), a CUDA error, an error-level GPU
driver record (NVRM error, an Xid, an nvlddmkm error event, a bugcheck, a kernel crash), a
launcher's report of a failed worker or a shell's ``Killed`` / ``Segmentation fault``, and a
stack dump of a live process (people dump hung processes). Warnings, logging ERROR lines and
INFO chatter are never failure evidence: a healthy log stays "no failure found".

A known signature always wins: this runs only when the verdict found no root cause. The
finding's evidence is the decisive lines; ``facts`` carry the exit status / signal, and
:func:`attach_output_tail` adds the last lines of the child's output (text and JSON).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from forensics.catalogs.matching import Hit
from forensics.events import Event, Severity
from forensics.findings import Confidence, Finding, Role, Verdict
from forensics.lazy_re import lazy_compile
from forensics.parsers.producers.py_traceback import SIGNALS

__all__ = ["ID", "TAIL_LINES", "attach_output_tail", "failure_evidence", "unrecognized"]

ID = "unrecognized-failure"
TAIL_LINES = 20
MAX_EVIDENCE = 12

_REMEDY = [
    "Read the decisive lines below (and the last lines of the program's output): they are what failed, "
    "in words no known signature describes.",
    "If an exception is named, search its exact message together with the framework and version; run the "
    "failing rank alone (CUDA_LAUNCH_BLOCKING=1 for CUDA errors) to get its full traceback.",
    "For a run killed by a signal: SIGKILL usually comes from the kernel's OOM killer, the scheduler "
    "(Slurm/Kubernetes memory or time limit) or a person; look at dmesg/journalctl -k and the scheduler's "
    "log of that moment. SIGTERM / SIGINT come from the scheduler, the launcher or a user.",
    "For an interrupted recording (the recorder or the host stopped): check whether the host rebooted "
    "(journalctl --list-boots, the kernel log of the previous boot) or the recorder was killed.",
    "If this is a failure worth knowing, add a signature for it (docs/signatures.md) with these lines as "
    "its example.",
]
_EXPLAIN = ("The inputs show that the run failed, but none of the known failure signatures describes how. "
            "Rather than calling the run healthy, the verdict names the evidence of the failure itself; the "
            "cause has to be read from those lines.")


@dataclass(frozen=True)
class _Item:
    event: Event
    what: str  # the sentence for the summary
    group: str  # catalog | exit | interrupted | exception | cuda | driver | os | launcher | stack
    hit: Hit | None = None  # the producer's catalogued message, for group "catalog"
    pos: int = 0  # the event's place in the timeline: the evidence is listed in time order


def _signal_name(sig: object, name: object) -> str:
    if isinstance(name, str) and name:
        return name
    if isinstance(sig, int) and not isinstance(sig, bool):
        return SIGNALS.get(sig, f"signal {sig}")
    return "a signal"


def _exit_item(e: Event) -> _Item | None:
    code, sig = e.attrs.get("exit_code"), e.attrs.get("signal")
    if isinstance(sig, int) and not isinstance(sig, bool):
        return _Item(e, f"the run was killed by signal {sig} ({_signal_name(sig, e.attrs.get('signal_name'))})",
                     "exit")
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        what = f"the run exited with status {code}"
        if 128 < code <= 128 + 64:
            what += f" (128 + {code - 128}: killed by {SIGNALS.get(code - 128, f'signal {code - 128}')})"
        return _Item(e, what, "exit")
    return None


#: A segfault the kernel logged inside a GPU driver library (``python3[2214]: segfault at 8 … in libcuda.so.1.1``).
_GPU_LIBRARY = lazy_compile(r"\blib(?:cuda|nvidia-[\w-]+|nvcuda|dxcore)\.so[\w.]*")

#: NVRM topics seen on healthy hosts too (nvAssertFailedNoLog at boot on some driver versions).
_BENIGN_TOPICS = frozenset({"assertion"})


def _driver_item(e: Event) -> _Item | None:
    if e.kind == "xid":
        return _Item(e, f"the GPU driver reported Xid {e.attrs.get('xid', '?')}", "driver")
    if e.kind == "nvrm" and e.severity >= Severity.ERROR and e.attrs.get("topic") not in _BENIGN_TOPICS:
        return _Item(e, "the GPU driver logged an error", "driver")
    if e.kind == "winevent" and "nvlddmkm" in str(e.attrs.get("provider", "")).lower() \
            and (e.attrs.get("level") in (1, 2) or e.severity >= Severity.ERROR):
        return _Item(e, f"the NVIDIA driver logged error event {e.attrs.get('event_id', '?')}", "driver")
    if e.kind == "bugcheck":
        code = e.attrs.get("code")  # WinDbg's stop code (an int): written in hex, as Windows writes it
        return _Item(e, f"Windows stopped with bugcheck {f'0x{code:X}' if isinstance(code, int) else '?'}", "os")
    code = e.attrs.get("bugcheck_code")  # Kernel-Power 41 after a blue screen (0 = power loss, not a stop)
    if e.kind == "winevent" and e.attrs.get("event_id") == 41 and isinstance(code, str) \
            and code not in ("0x0", "0x00000000") and "kernel-power" in str(e.attrs.get("provider", "")).lower():
        return _Item(e, f"Windows stopped with bugcheck {code} and rebooted (Kernel-Power 41)", "os")
    if e.kind == "kernel" and e.attrs.get("crash"):
        return _Item(e, "the kernel crashed (oops / panic)", "os")
    if e.kind == "kernel" and e.attrs.get("segfault") and (lib := _GPU_LIBRARY.search(e.message)):
        return _Item(e, f"a process crashed inside the NVIDIA driver's library {lib.group(0)}", "driver")
    return None


def _item(e: Event) -> _Item | None:
    kind = e.kind
    if kind == "exit":
        return _exit_item(e)
    if kind == "recorder" and e.attrs.get("reason") == "recorder-died":
        return _Item(e, "the recording was interrupted (the recorder or its host stopped before the run ended)",
                     "interrupted")
    if kind == "traceback":
        typ = str(e.attrs.get("exc_type") or "")
        if not typ or typ.endswith("Warning") or e.severity < Severity.ERROR:
            return None
        return _Item(e, f"an uncaught exception: {e.message[:200]}", "exception")
    if kind == "c10d" and e.attrs.get("excerpt"):
        return _Item(e, f"a C++ exception in the process group: {e.message[:200]}", "cuda")
    if kind == "cuda-error" and e.severity >= Severity.ERROR:
        return _Item(e, f"a CUDA error: {e.message[:200]}", "cuda")
    if kind == "torchrun" and e.severity >= Severity.ERROR and (e.attrs.get("exitcode") not in (None, 0)
                                                                  or e.attrs.get("signal")):
        return _Item(e, f"a worker failed: {e.message[:160]}", "launcher")
    if kind == "log" and e.attrs.get("signal") and e.severity >= Severity.ERROR:
        return _Item(e, f"a process died: {e.message[:160]}", "launcher")
    if kind == "stack":
        return _Item(e, f"a stack dump of a stuck process: {e.message[:200]}", "stack")
    return _driver_item(e)


#: Groups by how decisive they are for the summary; the evidence keeps this order too. A producer's own
#: catalogued error names what failed better than an exit status or a bare exception does.
_ORDER = ("catalog", "exit", "interrupted", "exception", "cuda", "driver", "os", "launcher", "stack")
_TITLES = {
    "catalog": "An error a known program reports, not one this tool knows by name",
    "exit": "The run failed, and no known failure signature explains it",
    "interrupted": "The recording was interrupted, and no known failure signature explains it",
    "exception": "An uncaught exception that no known signature describes",
    "cuda": "A CUDA error that no known signature describes",
    "driver": "A GPU driver error that no known signature describes",
    "os": "The operating system crashed, and no known signature describes why",
    "launcher": "A worker process failed, and no known signature describes why",
    "stack": "A stack dump of a stuck process, with no known pattern in it",
}
_CATEGORY = {"driver": "driver", "os": "platform", "interrupted": "platform"}
#: The category of a catalogued error, by its producer.
_PRODUCER_CATEGORY = {"nvrm": "driver", "nvml": "driver", "cuda": "driver", "dxgkrnl": "platform",
                      "windows": "platform", "dcgm": "hardware", "slurm": "platform", "openmpi": "platform",
                      "ray": "platform"}


def _catalog_item(e: Event, hit: Hit) -> _Item:
    return _Item(e, f"{hit.catalog.title} reports \"{e.message[:160]}\" ({hit.message.id})", "catalog", hit)


def failure_evidence(events: Sequence[Event],
                     catalog_hits: Mapping[int, Sequence[Hit]] | None = None) -> list[_Item]:
    """Every event that shows a failure (see the module docstring), most decisive first. An event whose
    line is a producer's catalogued error (``catalog_hits``: position -> hit) counts as that error."""
    hits = catalog_hits or {}
    items = []
    for i, e in enumerate(events):
        hit = next((h for h in hits.get(i, ()) if h.severity == "error"), None)
        if hit is not None and e.kind == "recorder" and str(e.attrs.get("reason", "")).startswith("source-"):
            hit = None  # a source the recorder could not read (no NVIDIA driver on this host) is no failure of the run
        it = _catalog_item(e, hit) if hit is not None else _item(e)
        if it is not None:
            items.append(replace(it, pos=i))
    return sorted(items, key=lambda it: _ORDER.index(it.group))


def _catalog_title(hit: Hit) -> str:
    what = hit.cls.title if hit.cls is not None else f"an error {hit.catalog.title} reports"
    return f"{what[:1].upper()}{what[1:]}, not one this tool knows by name"


def unrecognized(events: Sequence[Event],
                 catalog_hits: Mapping[int, Sequence[Hit]] | None = None) -> Finding | None:
    """The ``unrecognized-failure`` finding, or ``None`` when nothing in ``events`` shows a failure."""
    items = failure_evidence(events, catalog_hits)
    if not items:
        return None
    top = items[0]
    shown = _pick(items)
    facts: dict[str, object] = {"reasons": list(dict.fromkeys(it.what for it in shown))[:6],
                                "evidence_kinds": sorted({it.group for it in items})}
    for it in items:
        if it.group == "exit":
            facts["exit_code"] = it.event.attrs.get("exit_code")
            if it.event.attrs.get("signal") is not None:
                facts["signal"] = it.event.attrs.get("signal")
                facts["signal_name"] = _signal_name(it.event.attrs.get("signal"), it.event.attrs.get("signal_name"))
            break
    if any(it.group == "interrupted" for it in items):
        facts["interrupted"] = True
    evs = [it.event for it in sorted(shown, key=lambda it: it.pos)]  # chosen most decisive first, shown in time order
    title = _TITLES[top.group]
    category = _CATEGORY.get(top.group, "application")
    remedy = list(_REMEDY)
    if top.group == "exit":
        title = f"{top.what[:1].upper()}{top.what[1:]}, and no known failure signature explains it"
    elif top.hit is not None:
        title = _catalog_title(top.hit)
        category = _PRODUCER_CATEGORY.get(top.hit.catalog.producer, "framework")
        remedy = [*(top.hit.cls.next if top.hit.cls is not None else ()), *remedy]
        facts["catalog"] = [{"producer": it.hit.catalog.producer, "message": it.hit.message.id,
                             "class": it.hit.message.class_id, "where": it.hit.message.where,
                             "version": it.hit.catalog.version}
                            for it in shown if it.hit is not None][:6]
    return Finding(
        signature=ID, title=title, category=category,
        score=0.4, evidence=evs, role=Role.ROOT_CAUSE, explain=_EXPLAIN, remedy=remedy,
        hosts=sorted({e.host for e in evs if e.host}), gpus=sorted({str(e.gpu) for e in evs if e.gpu is not None}),
        ranks=sorted({e.rank for e in evs if e.rank is not None}), matched=len(items),
        note="no known signature matched; the decisive lines are the evidence", facts=facts,
    )


def _pick(items: list[_Item]) -> list[_Item]:
    """The decisive lines: a few of each group, distinct messages, most decisive groups first."""
    out: list[_Item] = []
    seen: set[str] = set()
    per_group: dict[str, int] = {}
    for it in items:
        key = it.event.message[:200]
        if key in seen or per_group.get(it.group, 0) >= 4:
            continue
        seen.add(key)
        per_group[it.group] = per_group.get(it.group, 0) + 1
        out.append(it)
        if len(out) >= MAX_EVIDENCE:
            break
    return out


def verdict_for(finding: Finding, findings: list[Finding], healthy: Verdict) -> tuple[list[Finding], Verdict]:
    """The verdict with ``finding`` as its root (the risks found stay contributing)."""
    reasons = finding.facts.get("reasons")
    what = "; ".join(str(r) for r in reasons[:3]) if isinstance(reasons, list) else ""
    summary = (f"{what[:1].upper()}{what[1:]}." if what else "") + (
        " No known failure signature matched, so the cause is not named: read the evidence below"
        + (" and the last lines of the program's output." if "exit_code" in finding.facts else "."))
    verdict = Verdict(root_cause=finding, confidence=Confidence.LOW, summary=summary.strip(),
                      contributing=list(healthy.contributing), ruled_out=list(healthy.ruled_out),
                      warnings=list(healthy.warnings))
    return [finding, *findings], verdict


def attach_output_tail(finding: Finding | None, read_tail: Callable[[str], dict[str, list[str]]]) -> None:
    """Add the last lines of the recorded child's output to an exit-based ``unrecognized-failure``:
    ``read_tail(bundle_path)`` returns {file name: last lines} for the bundle of the exit event."""
    if finding is None or finding.signature != ID or "exit_code" not in finding.facts:
        return
    for e in finding.evidence:
        if e.kind == "exit":
            path = e.origin.path.rsplit("/", 1)[0] if "/" in e.origin.path else "."
            tail = read_tail(path)
            if tail:
                finding.facts["last_lines"] = tail
            return
