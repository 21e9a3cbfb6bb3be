"""gdb back-traces of a live process: ``thread apply all bt`` (``Thread 3 (Thread 0x7f… (LWP 123)
"name"):`` then ``#0  0x… in pthread_cond_wait … from /lib/libc.so.6`` / ``#4  ncclProxyProgress
(…) at proxy.cc:868``), a lone ``bt`` after a ``(gdb)`` prompt, and the Python view from
``py-bt`` (``Traceback (most recent call first):`` + ``File "…", line N, in func`` and
``<built-in method allreduce of PyCapsule object …>``; the old form ``#4 Frame 0x…, for file
x.py, line 358, in wait (…)`` too). Frames are innermost first; Thread 1 is the main thread.
"""

from __future__ import annotations

import re

from forensics.parsers.producers.hang_stack import Dump, Frame, StackThread, label_rank
from forensics.parsers.producers.py_spy import Lines, next_line

from forensics.lazy_re import lazy_compile

__all__ = ["detect", "is_header", "read"]

THREAD = lazy_compile(r'^Thread (?P<n>\d{1,12}) \((?:Thread (?P<addr>0x[0-9a-f]+) )?\(?LWP (?P<lwp>\d{1,12})\)\)?'
                      r'(?: "(?P<name>[^"]*)")?\)?:?\s*$')
FRAME = lazy_compile(r"^#(?P<n>\d{1,12})\s+(?:(?P<addr>0x[0-9a-fA-F]+) in )?(?P<rest>.+)$")
_PY_FRAME_OLD = lazy_compile(r"Frame 0x[0-9a-f]+, for file (?P<file>[^,]+), line (?P<line>\d{1,12}), "
                             r"in (?P<func>[\w<>.]+)")
_PY_FRAME = lazy_compile(r'^File "(?P<file>[^"]*)", line (?P<line>\d{1,12}), in (?P<func>.+)$')
_BUILTIN = lazy_compile(r"^<built-in (?:method|function) (?P<func>[\w.]+)")
PY_BT = "Traceback (most recent call first):"
_PROMPT = lazy_compile(r"^\(gdb\)\s*(?P<cmd>.*)$")
_ATTACH = lazy_compile(r"Attaching to (?:process|program: \S+, process) (?P<pid>\d{1,12})|"
                       r"\bgdb\b.*?-p\s*(?P<pid2>\d{1,12})|^\(gdb\)\s*attach (?P<pid3>\d{1,12})")


def is_header(text: str) -> bool:
    if THREAD.match(text) or text == PY_BT:
        return True
    m = _PROMPT.match(text)
    return bool(m and re.match(r"(?:thread apply all )?(?:bt|backtrace|where|py-bt)\b", m.group("cmd")))


def _c_frame(rest: str) -> Frame:
    m = _PY_FRAME_OLD.search(rest)
    if m:
        return Frame(m.group("func"), m.group("file").strip(), int(m.group("line")))
    lib = ""
    at = re.search(r" at (\S+?):(\d{1,12})\s*$", rest)
    line: int | None = None
    if at:
        lib, line = at.group(1), int(at.group(2))
        rest = rest[:at.start()]
    else:
        fr = re.search(r" from (\S+)\s*$", rest)
        if fr:
            lib = fr.group(1)
            rest = rest[:fr.start()]
    name = rest.split(" (", 1)[0].strip()
    name = re.sub(r"\(.*$", "", name) or name  # C++ parameter lists
    return Frame(name, lib, line, native=True)


def read(first: str, lines: Lines, before: list[str]) -> Dump:
    dump = Dump("gdb", lines=[first])
    current: StackThread | None = None

    def start(thread: StackThread) -> StackThread:
        dump.threads.append(thread)
        return thread

    t = THREAD.match(first)
    if t:
        current = start(_thread(t))
    elif first == PY_BT:
        current = start(StackThread("py-bt", "Python (py-bt)", main=True))
    for prev in [*before[-4:], first]:
        above = prev.strip()
        a = _ATTACH.search(above)
        if a:
            dump.pid = int(a.group("pid") or a.group("pid2") or a.group("pid3"))
        rank = label_rank(above) if not FRAME.match(above) else None
        if rank is not None:
            dump.rank, dump.rank_source = rank, "label"
    pending_py: Frame | None = None
    while len(dump.lines) < 6000 and (s := next_line(lines)) is not None:
        t = THREAD.match(s)
        if t:
            lines.take()
            dump.lines.append(s)
            current = start(_thread(t))
            continue
        if s == PY_BT:
            lines.take()
            dump.lines.append(s)
            current = start(StackThread("py-bt", "Python (py-bt)", main=True))
            continue
        p = _PROMPT.match(s)
        if p and is_header(s):
            lines.take()
            dump.lines.append(s)
            continue
        f = FRAME.match(s)
        if f:
            lines.take()
            dump.lines.append(s)
            if current is None:
                current = start(StackThread("1", main=True))
            current.frames.append(_c_frame(f.group("rest")))
            continue
        if current is not None and current.ident == "py-bt":
            pf = _PY_FRAME.match(s)
            b = _BUILTIN.match(s)
            if pf:
                lines.take()
                dump.lines.append(s)
                pending_py = Frame(pf.group("func").strip(), pf.group("file"), int(pf.group("line")))
                current.frames.append(pending_py)
                continue
            if b:
                lines.take()
                dump.lines.append(s)
                current.frames.append(Frame(b.group("func"), "<built-in>", None, native=True))
                continue
            if pending_py is not None and not s.startswith(("(gdb)", "Thread ", "#")) and len(s) < 400:
                lines.take()  # the source line under a py-bt frame
                dump.lines.append(s)
                pending_py = None
                continue
            if s in ("Waiting for the GIL", "(unable to read python frame information)"):
                lines.take()
                dump.lines.append(s)
                continue
        if s.startswith(("from /", "at ")) and current is not None:
            lines.take()  # a frame wrapped onto the next line
            continue
        if s.startswith("[") and ("Thread debugging" in s or "New Thread" in s or "Switching to" in s):
            lines.take()
            continue
        break
    if dump.pid is None:
        for th in dump.threads:
            if th.main and th.ident.startswith("LWP"):
                dump.pid = int(th.ident[3:])
    return dump


def _thread(m: re.Match[str]) -> StackThread:
    n = int(m.group("n"))
    return StackThread(f"LWP{m.group('lwp')}", m.group("name") or f"Thread {n}", main=n == 1)


def detect(head: list[str]) -> float:
    stripped = [h.strip() for h in head]
    frames = sum(1 for s in stripped if FRAME.match(s) and (" in " in s or " at " in s or " from " in s))
    if frames >= 2 and any(THREAD.match(s) or s == PY_BT or _PROMPT.match(s) for s in stripped):
        return 0.75
    return 0.0
