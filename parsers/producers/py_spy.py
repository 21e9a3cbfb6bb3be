"""``py-spy dump`` output: one or many processes, each ``Process N: cmd`` + ``Python vX`` and its
threads (``Thread 1234 (active+gil): "MainThread"``, older ``Thread 0x7F… (idle)``) with frames
``func (file:line)``, innermost first; ``--locals`` adds ``Arguments:`` / ``Locals:`` blocks and
``--native`` frames without a ``.py`` file.

:func:`read` turns the lines from a thread header on into a :class:`~.hang_stack.Dump`; the
stream parser (:mod:`.process_output`) calls it wherever such a header appears, and the
registered ``py-spy`` parser (:mod:`.stack_dumps`) claims files that start with a dump.
"""

from __future__ import annotations

import re
from typing import Protocol

from forensics.parsers.producers.hang_stack import Dump, Frame, StackThread, label_rank

from forensics.lazy_re import lazy_compile

__all__ = ["detect", "is_thread", "read"]

THREAD = lazy_compile(r'^Thread (?:(?P<id>0x[0-9A-Fa-f]+|\d+) )?\((?P<state>active|idle)(?P<gil>\+gil)?\)'
                      r'(?::\s*"(?P<name>.*)")?\s*$')
FRAME = lazy_compile(r"^(?P<func>\S.*?) \((?P<file>[^()]*?)(?::(?P<line>\d{1,12}))?\)$")
PROCESS = lazy_compile(r"^Process (?P<pid>\d{1,12}): (?P<cmd>.*)$")
_PYTHON = lazy_compile(r"^Python v\d")
_LOCALS = lazy_compile(r"^(?:Arguments|Locals):$|^[A-Za-z_]\w*: ")


class Lines(Protocol):
    """What a reader needs of the lines after a header: the next line's text, and consuming it."""

    def peek_text(self) -> str | None: ...

    def take(self) -> object: ...


def next_line(lines: Lines) -> str | None:
    """The next non-blank line's text, stripped and cut at 4,000 characters (a pathological line is
    never scanned whole), without consuming it; blank lines before it are consumed. ``None`` at the end."""
    while (text := lines.peek_text()) is not None:
        s = text.strip()[:4000]
        if s:
            return s
        lines.take()
    return None


def is_thread(text: str) -> bool:
    return THREAD.match(text) is not None


def frame(text: str) -> Frame | None:
    m = FRAME.match(text)
    if not m or m.group("func").startswith(("Thread ", "Process ")):
        return None
    path = m.group("file")
    line = int(m.group("line")) if m.group("line") else None
    return Frame(m.group("func"), path, line, native=not path.endswith(".py"))


def _header(before: list[str], dump: Dump) -> None:
    """Fill pid, command and rank from the lines above the first thread (nearest last)."""
    labels: list[str] = []
    for text in reversed(before[-6:]):
        s = text.strip()
        if not s or _PYTHON.match(s):
            continue
        m = PROCESS.match(s)
        if m and dump.pid is None:
            dump.pid = int(m.group("pid"))
            dump.command = m.group("cmd").strip()
            continue
        if THREAD.match(s) or frame(s) is not None:
            break
        labels.append(s)
        if len(labels) >= 2:
            break
    for text in labels + [dump.command or ""]:
        rank = label_rank(text)
        if rank is not None:
            dump.rank, dump.rank_source = rank, "label" if text in labels else "command"
            break


def read(first: str, lines: Lines, before: list[str]) -> Dump:
    """One process's dump from its first ``Thread`` line (``first``) on."""
    dump = Dump("py-spy", lines=[first])
    _header(before, dump)
    m = THREAD.match(first)
    current: StackThread | None = None
    if m:
        current = _thread(m)
        dump.threads.append(current)
    while len(dump.lines) < 4000 and (s := next_line(lines)) is not None:
        t = THREAD.match(s)
        if t:
            lines.take()
            dump.lines.append(s)
            current = _thread(t)
            dump.threads.append(current)
            continue
        f = frame(s)
        if f is not None and current is not None:
            lines.take()
            dump.lines.append(s)
            current.frames.append(f)
            continue
        if current is not None and current.frames and (_LOCALS.match(s) or s in ("...", "…")):
            lines.take()  # --locals: argument and local values under a frame
            continue
        break
    if dump.pid is not None:
        for th in dump.threads:
            if th.ident == str(dump.pid):
                th.main = True
    return dump


def _thread(m: re.Match[str]) -> StackThread:
    name = m.group("name")
    state = m.group("state") + ("+gil" if m.group("gil") else "")
    return StackThread(m.group("id") or "?", name, state, main=name == "MainThread")


def detect(head: list[str]) -> float:
    """A file that starts with a py-spy dump."""
    stripped = [h.strip() for h in head]
    threads = sum(1 for s in stripped if THREAD.match(s))
    frames = sum(1 for s in stripped if FRAME.match(s) and ".py" in s)
    if threads and (frames or any(PROCESS.match(s) for s in stripped)):
        return 0.8
    return 0.0
