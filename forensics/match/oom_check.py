"""A SIGKILL verdict reads the kernel log it was given for the OOM killer, and says what it found.

SIGKILL comes from outside the process: most often the kernel's (or a cgroup's) out-of-memory killer,
else the scheduler or a person. When the root cause is a worker or run killed by signal 9
(``worker-killed-signal``, or ``unrecognized-failure`` with signal 9 / exit status 137) and
``host-oom-killer`` did not fire, each kernel log among the inputs on the killed process's host (a
bundle's ``kmsg.log``, a ``dmesg`` or ``journalctl -k`` file) is named in *ruled out* with what it
holds: how many records, up to when, and whether it covers the kill (a bundle's kernel log is
followed live for the whole recording, so it covers what happened while the run was recorded; a
loose file covers the kill only if it holds records from after it). A kernel log that ends before the
kill is named too, as one that cannot tell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from forensics.events import Event
from forensics.findings import Finding, Verdict
from forensics.lazy_re import lazy_compile

__all__ = ["OOM_ID", "rule_out_oom_killer"]

OOM_ID = "host-oom-killer"
#: Event kinds only a kernel log yields; a file of which most events are these is a kernel log.
_KERNEL_KINDS = frozenset({"kernel", "nvrm", "xid", "aer", "boot", "oom-killer", "hung-task", "iommu",
                           "pcie-link", "dxg", "recorder"})
_SIGKILL = lazy_compile(r"exitcode\s*:?\s*-9\b|\bSIGKILL\b|Signal 9\b|signal 9\b|exit status 137\b")


@dataclass
class _KernelLog:
    path: str
    host: str | None
    records: int = 0
    first: int | None = None
    last: int | None = None
    bundle: bool = False  # recorded live by `forensics record` (source kmsg)


def _killed_by_sigkill(root: Finding) -> Event | None:
    """The first evidence line that shows a SIGKILL, when the root is a signal-9 kill."""
    if root.signature == "unrecognized-failure" and root.facts.get("signal") != 9 \
            and root.facts.get("exit_code") != 137:
        return None
    if root.signature not in ("worker-killed-signal", "unrecognized-failure"):
        return None
    for e in root.evidence:
        if e.attrs.get("signal") == 9 or e.attrs.get("exitcode") == -9 or e.attrs.get("exit_code") == 137 \
                or _SIGKILL.search(e.message):
            return e
    return None


def _kernel_logs(events: Sequence[Event]) -> list[_KernelLog]:
    per_file: dict[str, list[Event]] = {}
    for e in events:
        if e.kind != "derived":
            per_file.setdefault(e.origin.path, []).append(e)
    logs = []
    for path, evs in per_file.items():
        kernel = [e for e in evs if e.kind in _KERNEL_KINDS]
        if not kernel or 2 * len(kernel) < len(evs) or not any(e.kind in ("kernel", "boot") for e in kernel):
            continue
        stamps = [e.ts for e in kernel if e.ts is not None]
        logs.append(_KernelLog(path, next((e.host for e in kernel if e.host), None), len(kernel),
                               min(stamps, default=None), max(stamps, default=None),
                               any(e.source == "kmsg" for e in kernel)))
    return logs


def _stamp(value: object) -> int | None:
    from forensics.clock import parse_iso

    parsed = parse_iso(value) if isinstance(value, str) and value else None
    return parsed[0] if parsed is not None else None


def _recorded_span(events: Sequence[Event], path: str) -> tuple[int, int] | None:
    """The recording's start and end when ``path`` lies in a recorded bundle."""
    for e in events:
        folder = str(e.attrs.get("path") or "")
        if e.kind == "recording" and folder and path.startswith(folder.rstrip("/") + "/"):
            start, end = _stamp(e.attrs.get("start")), _stamp(e.attrs.get("end") or e.attrs.get("heartbeat"))
            if start is not None and end is not None:
                return start, end
    return None


def when_ns(ts: int | None) -> str:
    """``2026-11-29 17:37:05Z``."""
    from forensics.units import iso

    text = iso(ts)
    return text[:19].replace("T", " ") + "Z" if text else "(no time)"


def _why(log: _KernelLog, kill: Event, events: Sequence[Event]) -> str:
    what = f"no OOM-killer line (`Out of memory: Killed process`, `oom-kill:`, `invoked oom-killer`) in {log.path}"
    span = _recorded_span(events, log.path) if log.bundle else None
    if span is not None and kill.ts is not None and span[0] <= kill.ts <= span[1] + 60 * 10**9:
        return (f"{what} ({log.records} kernel records), the kernel log recorded live from {when_ns(span[0])} "
                f"to {when_ns(span[1])}, through the kill at {when_ns(kill.ts)}")
    if log.last is None or kill.ts is None:
        return f"{what} ({log.records} kernel records; their times cannot be set against the kill's)"
    if log.last >= kill.ts:
        return f"{what} ({log.records} kernel records, {when_ns(log.first)} to {when_ns(log.last)}, through the kill)"
    gap = (kill.ts - log.last) / 1e9
    return (f"cannot be ruled out: {log.path} ({log.records} kernel records) ends at {when_ns(log.last)}, "
            f"{gap:.0f} s before the kill, and holds no OOM-killer line up to there")


def rule_out_oom_killer(verdict: Verdict, events: Sequence[Event], findings: Sequence[Finding]) -> None:
    """Add what the kernel logs say about the OOM killer to ``verdict.ruled_out`` (see the module docstring)."""
    root = verdict.root_cause
    if root is None or any(f.signature == OOM_ID for f in findings):
        return
    kill = _killed_by_sigkill(root)
    if kill is None:
        return
    host = kill.host or next((h for h in root.hosts), None)
    for log in _kernel_logs(events):
        if host is not None and log.host is not None and log.host != host:
            continue
        verdict.ruled_out.append((OOM_ID, _why(log, kill, events)))
