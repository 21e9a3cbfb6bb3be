"""Which stack-dump reader a line starts (py-spy, faulthandler, gdb), and the adapter that lets a
reader walk a :class:`~.stream_text.Follower` (the stream parser's view of the next lines)."""

from __future__ import annotations

from collections.abc import Callable

from forensics.parsers.common.stream_text import Follower
from forensics.parsers.producers import faulthandler_dump, gdb_bt, py_spy
from forensics.parsers.producers.hang_stack import Dump
from forensics.parsers.producers.py_spy import Lines

__all__ = ["TRIGGERS", "FollowerLines", "reader_for"]

#: Literals of the lines that start a dump (for the stream parser's candidate-line scan).
TRIGGERS: tuple[bytes, ...] = (b"(active", b"(idle", b"most recent call first", b"(LWP ", b"(gdb)", b"Timeout (")

Reader = Callable[[str, Lines, list[str]], Dump]


def reader_for(text: str) -> Reader | None:
    """The reader for a dump that starts at ``text`` (stripped), or ``None``."""
    c = text[:1]
    if c not in "TC(":
        return None
    if c == "T" and text.startswith("Thread ") and py_spy.is_thread(text):
        return py_spy.read
    if faulthandler_dump.is_header(text):
        return faulthandler_dump.read
    if gdb_bt.is_header(text):
        return gdb_bt.read
    return None


class FollowerLines:
    """:class:`~.py_spy.Lines` over a Follower: the text of the next line of the same writer."""

    def __init__(self, follow: Follower) -> None:
        self.follow = follow

    def peek_text(self) -> str | None:
        item = self.follow.peek()
        return None if item is None else item[1].text

    def take(self) -> object:
        return self.follow.take()
