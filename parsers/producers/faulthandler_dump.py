"""faulthandler thread dumps without a fatal error: ``faulthandler.dump_traceback()``,
``dump_traceback_later()`` (headed ``Timeout (0:10:00)!``), ``register(SIGUSR1)`` and test
harnesses that print ``Process 3 timed out with traceback:``. Each dump lists threads as
``Thread 0x7f… (most recent call first):`` / ``Current thread 0x… (most recent call first):``
with frames ``File "x.py", line 12 in func``, innermost first; the main thread comes last.

(A dump headed ``Fatal Python error: …`` is a crash and stays a ``traceback`` event, read by
:func:`~.py_traceback.read_faulthandler`.)
"""

from __future__ import annotations

import re

from forensics.parsers.producers.hang_stack import Dump, Frame, StackThread, label_rank
from forensics.parsers.producers.py_spy import Lines, next_line

from forensics.lazy_re import lazy_compile

__all__ = ["detect", "is_header", "read"]

THREAD = lazy_compile(r"^(?P<cur>Current thread|Thread) (?P<id>0x[0-9a-fA-F]+)(?: \[(?P<name>[^\]]*)\])? "
                      r"\(most recent call first\):?\s*$")
FRAME = lazy_compile(r'^File "(?P<file>[^"]*)", line (?P<line>\d{1,12}) in (?P<func>.+)$')
TIMEOUT = lazy_compile(r"^Timeout \((?P<t>\d+:\d\d:\d\d(?:\.\d+)?)\)!\s*$")
_HARNESS = lazy_compile(r"^Process (?P<rank>\d{1,12}) timed out with traceback:?\s*$")


def is_header(text: str) -> bool:
    return THREAD.match(text) is not None or TIMEOUT.match(text) is not None


def read(first: str, lines: Lines, before: list[str]) -> Dump:
    dump = Dump("faulthandler", lines=[first])
    current: StackThread | None = None
    m = TIMEOUT.match(first)
    if m:
        dump.timeout = m.group("t")
    else:
        current = _thread(THREAD.match(first))
        dump.threads.append(current)
    for prev in reversed(before[-3:]):
        above = prev.strip()
        if not above:
            continue
        t = TIMEOUT.match(above)
        if t:
            dump.timeout = t.group("t")
            continue
        h = _HARNESS.match(above)
        rank = int(h.group("rank")) if h else label_rank(above)
        if rank is not None:
            dump.rank, dump.rank_source = rank, "label"
        break
    while len(dump.lines) < 4000 and (s := next_line(lines)) is not None:
        t = THREAD.match(s)
        if t:
            lines.take()
            dump.lines.append(s)
            current = _thread(t)
            dump.threads.append(current)
            continue
        f = FRAME.match(s)
        if f and current is not None:
            lines.take()
            dump.lines.append(s)
            current.frames.append(Frame(f.group("func").strip(), f.group("file"), int(f.group("line"))))
            continue
        if s == "<no Python frame>" or s.startswith("...") and current is not None:
            lines.take()
            dump.lines.append(s)
            continue
        break
    if dump.threads:
        dump.threads[-1].main = True  # faulthandler lists the newest thread first: the main thread is last
    return dump


def _thread(m: re.Match[str] | None) -> StackThread:
    if m is None:
        return StackThread("?")
    return StackThread(m.group("id"), m.group("name"), "current" if m.group("cur") != "Thread" else None)


def detect(head: list[str]) -> float:
    stripped = [h.strip() for h in head]
    if any(s.startswith("Fatal Python error") for s in stripped):
        return 0.0  # a crash: the process-output parser reads it as a traceback
    if any(THREAD.match(s) for s in stripped) and any(FRAME.match(s) for s in stripped):
        return 0.75
    return 0.0
