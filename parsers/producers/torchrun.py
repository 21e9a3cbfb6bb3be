"""torchrun / torch.distributed.elastic records: agent lines and the ChildFailedError report.

Agent lines come in three logging generations (std logging, bracketed ISO, glog-style); the
launcher-agnostic part is the message, which is what these recognizers read::

    failed (exitcode: -9) local_rank: 0 (pid: 31631) of binary: /usr/bin/python3
    Sending process 812914 closing signal SIGTERM

A per-node launcher says when it starts its workers and when they end well; DeepSpeed's
``launch.py`` (one per node, started by pdsh/ssh) prints both::

    nnodes=2, num_local_procs=8, node_rank=1
    Process 57911 exits successfully.

The report block lists each failed worker as ``[N]:`` followed by ``time``, ``host``, ``rank``,
``exitcode``, ``error_file`` and ``traceback`` fields; pasted copies sometimes lose the line
breaks (``rank2 (local rank: 2)exitcode: -9 (pid: 36071)error file: <N/A>``), so the fields are
read by pattern, not by position.
"""

from __future__ import annotations

from typing import Any

from forensics.parsers.common.stream_text import Follower, Stamp, is_border
from forensics.parsers.producers.py_traceback import SIGNALS

from forensics.lazy_re import lazy_compile

__all__ = ["agent_line", "exit_attrs", "read_report", "report_entry"]

_FAILED = lazy_compile(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<lr>\d+) \(pid: (?P<pid>\d+)\)"
                       r"(?: of binary: (?P<binary>.*))?")
_CLOSING = lazy_compile(r"Sending process (?P<pid>\d+) closing signal (?P<sig>SIG\w+)")
_TERMINATING = lazy_compile(r"Terminating process (?P<pid>\d+) via signal (?P<sig>SIG\w+)")
_RETURN_CODE = lazy_compile(r"exits with return code = (?P<code>-?\d+)")
_DIED_WITH = lazy_compile(r"died with <Signals\.(?P<sig>SIG\w+): (?P<num>\d+)>")
_LAUNCH = lazy_compile(r"\bnnodes=(?P<nnodes>\d+), num_local_procs=(?P<procs>\d+), node_rank=(?P<node_rank>\d+)")
_EXITS_OK = lazy_compile(r"\bProcess (?P<pid>\d+) exits successfully")


def exit_attrs(code: int) -> dict[str, Any]:
    """``exitcode`` and, for a negative code (killed by signal -code), the signal's name."""
    attrs: dict[str, Any] = {"exitcode": code}
    if code < 0:
        attrs["signal"] = SIGNALS.get(-code, f"SIG{-code}")
    elif code > 128 and code - 128 in SIGNALS:
        attrs["signal"] = SIGNALS[code - 128]  # shells report death by signal N as 128+N
    return attrs


def agent_line(text: str) -> tuple[str, dict[str, Any]] | None:
    """An elastic-agent (or other launcher) line about a worker's exit, or a per-node launcher
    starting its workers (``launch``, ``nnodes``, ``node_rank``): (message, attrs)."""
    m = _FAILED.search(text)
    if m:
        attrs = exit_attrs(int(m.group("code")))
        attrs.update(local_rank=int(m.group("lr")), pid=int(m.group("pid")))
        if m.group("binary"):
            attrs["binary"] = m.group("binary").strip()
        return text[m.start():].strip(), attrs
    m = _CLOSING.search(text) or _TERMINATING.search(text)
    if m:
        return text[m.start():].strip(), {"pid": int(m.group("pid")), "signal": m.group("sig"), "sent": True}
    m = _RETURN_CODE.search(text)
    if m:
        return text.strip(), exit_attrs(int(m.group("code")))
    m = _DIED_WITH.search(text)
    if m:
        return text.strip(), {"signal": m.group("sig"), "exitcode": -int(m.group("num"))}
    m = _EXITS_OK.search(text)
    if m:
        return text[m.start():].strip(), {"exitcode": 0, "pid": int(m.group("pid"))}
    m = _LAUNCH.search(text)
    if m:
        return text[m.start():].strip(), {"launch": True, "nnodes": int(m.group("nnodes")),
                                          "local_procs": int(m.group("procs")),
                                          "node_rank": int(m.group("node_rank"))}
    return None


_ENTRY_HEAD = lazy_compile(r"^\[(\d+)\]:$")
_F_TIME = lazy_compile(r"time\s*:\s*(\d{4})-(\d\d)-(\d\d)_(\d\d):(\d\d):(\d\d)")
_F_HOST = lazy_compile(r"host\s*:\s*(\S+)")
_F_RANK = lazy_compile(r"\brank\s*:?\s*(\d+) ?\(local[ _]rank:? (\d+)\)")
_F_EXIT = lazy_compile(r"exitcode\s*(?::\s*)?(-?\d+) \(pid: (\d+)\)")
_F_ERRFILE = lazy_compile(r"error[ _]file\s*:\s*(\S+)")
_F_TRACE = lazy_compile(r"traceback\s*:\s*(.*)")
_F_SIGNAL = lazy_compile(r"Signal (\d+) \((SIG\w+)\) received by PID (\d+)")


def report_entry(text: str) -> tuple[dict[str, Any], Stamp | None] | None:
    """The fields of one report entry (its lines joined); ``None`` without an exit code."""
    m = _F_EXIT.search(text)
    if not m:
        return None
    attrs = exit_attrs(int(m.group(1)))
    attrs["pid"] = int(m.group(2))
    r = _F_RANK.search(text)
    if r:
        attrs["rank"], attrs["local_rank"] = int(r.group(1)), int(r.group(2))
    h = _F_HOST.search(text)
    if h:
        attrs["host"] = h.group(1)
    e = _F_ERRFILE.search(text)
    if e:
        attrs["error_file"] = e.group(1)
    t = _F_TRACE.search(text)
    if t:
        attrs["traceback"] = t.group(1).strip()
    s = _F_SIGNAL.search(text)
    if s:
        attrs["signal"] = s.group(2)
    stamp = None
    tm = _F_TIME.search(text)
    if tm:
        y, mo, d, hh, mi, ss = (int(x) for x in tm.groups())
        stamp = Stamp(y, mo, d, hh, mi, ss)
    return attrs, stamp


def read_report(follow: Follower, root_cause: bool) -> list[tuple[list[str], bool]]:
    """Entries after ``Failures:`` or ``Root Cause (first observed failure):``: each as its lines and whether
    it is listed under Root Cause. Stops at the closing border."""
    entries: list[tuple[list[str], bool]] = []
    current: list[str] | None = None
    under_root = root_cause
    while True:
        item = follow.peek()
        if item is None:
            break
        s = item[1].text.strip()
        if is_border(s):
            follow.take()
            if current is not None:
                entries.append((current, under_root))
                current = None
            nxt = follow.peek()
            if nxt is None or not nxt[1].text.strip().startswith(("Root Cause", "Failures:")):
                break
            continue
        if s.startswith("Root Cause"):
            follow.take()
            under_root = True
            continue
        if s.startswith("Failures:"):
            follow.take()
            under_root = False
            continue
        if _ENTRY_HEAD.match(s):
            follow.take()
            if current is not None:
                entries.append((current, under_root))
            current = [s]
            continue
        if s == "<NO_OTHER_FAILURES>" or (current is not None and ":" in s):
            follow.take()
            if current is not None:
                current.append(s)
            continue
        if not s:
            follow.take()
            continue
        break
    if current is not None:
        entries.append((current, under_root))
    return entries
