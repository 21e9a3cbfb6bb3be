"""Repeated records of one template, parsed a bounded number of times and counted.

A template is a line's raw bytes with every digit deleted (numbers, ranks, pids, stamps,
addresses). A long log repeats a few templates tens of thousands
of times (the same c10d warning on every rank, a driver line on every step); parsing each occurrence
costs Python time and yields the same event again. :class:`Templates` decides, before a candidate
line is decoded, whether it must be parsed:

* the first :data:`FULL` occurrences always are (more than any signature's ``min_count``), and
  so is the first one in each of :data:`BUCKETS` equal stretches of the file, so a repeated line
  stays represented near every later anchor a signature's window may look from;
* a template whose parse ever read a following line, emitted more than one event, a multi-line
  event, a progress point or a pending record is never skipped (its occurrences differ by what
  follows them or by the values a detector reads) — except a kernel record whose continuation
  lines have the same templates at every occurrence (:attr:`Template.follow`: an AER report's
  ``device [10de:…]`` and ``[ 0] RxErr`` lines), which is skipped with them;
* the others are counted (and their rank read from the raw prefix); the last :data:`TAIL` of them
  are parsed at the end, so the occurrences just before a failure near the end of a log (a
  corrected-error storm before the fatal one) are real events inside every window that looks back.

The first event of a template that had skipped occurrences carries the evidence: ``count`` (every
occurrence in the file), ``first`` / ``last`` (UTC ns of the first and last parsed occurrence),
``ranks`` (the ranks seen on its lines) and ``first_line`` / ``last_line``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from forensics.lazy_re import lazy_compile

if TYPE_CHECKING:
    from forensics.ingest.textdoc import Data

__all__ = ["BUCKETS", "DIGITS", "FULL", "MAX_TEMPLATE_BYTES", "RAW_RANK", "TAIL", "Template", "Templates", "raw_rank",
           "template_key"]

#: Occurrences of a template always parsed in full (above every signature's ``min_count``).
FULL = 8
#: Stretches of the file in each of which a template's first occurrence is parsed in full.
BUCKETS = 64
#: Skipped occurrences, the last ones of a template, parsed at the end of the file.
TAIL = 8
#: Lines longer than this (or holding a ``\r``) are never treated as a template.
MAX_TEMPLATE_BYTES = 2048
#: Distinct templates tracked per file; past this new ones are parsed as before.
MAX_TEMPLATES = 50_000

#: ``[rank3]:`` (torch), ``host:pid:tid [3]`` (NCCL), ``3:`` (srun --label) at a line's start.
RAW_RANK = lazy_compile(rb"\s*(?:\[rank(\d+)\]|\[default(\d+)\]|[\w.-]+:\d+:\d+ \[(\d+)\]|(\d+): )")


DIGITS = b"0123456789"


def template_key(raw: bytes) -> bytes:
    """A line's template: its bytes with every digit deleted (``[rank3]`` and ``[rank12]``, step 5 and
    step 50 000 are one template). One ``bytes.translate``, in C."""
    return raw.translate(None, DIGITS)


#: A rank inside the message, near its start: c10d's ``[Rank 3]``, ``[rank 3]``, ``rank=3``.
RAW_MESSAGE_RANK = lazy_compile(rb"(?<![\w.])(?:\[(?:Rank|rank|RANK)[ :=]?(\d{1,6})\]|(?:rank|RANK)=(\d{1,6})\b)")
#: How far into a line a rank inside the message is looked for.
MESSAGE_HEAD = 200


def raw_rank(data: Data, start: int, end: int | None = None) -> int | None:
    """The rank a raw line names in its prefix (``[rank3]:``, ``[default3]:``, NCCL's ``host:pid:tid [3]``,
    ``3: ``), else near the start of its message (``[Rank 3]``, ``rank=3``): a counted line keeps its rank."""
    m = RAW_RANK.match(data, start) if end is None else RAW_RANK.match(data, start, end)
    if m is not None:
        return int(m.group(1) or m.group(2) or m.group(3) or m.group(4))
    stop = start + MESSAGE_HEAD if end is None else min(end, start + MESSAGE_HEAD)
    m = RAW_MESSAGE_RANK.search(data, start, stop)
    return int(m.group(1) or m.group(2)) if m is not None else None


@dataclass(slots=True)
class Template:
    """What is known of one template in one file."""

    n: int = 0
    simple: bool = True
    buckets: set[int] = field(default_factory=set)
    first_event: int = -1  # index of its first event in the scan's event list
    last_event: int = -1
    skipped: int = 0
    #: (offset, line number or 0 when not counted) of the last skipped occurrences
    tail: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=TAIL))
    last_no: int = 0
    last_parsed: int = -1  # offset of the last occurrence parsed in full
    first_no: int = 0
    ranks: set[int] = field(default_factory=set)
    #: the keys of the lines its record continues on, the same at every occurrence parsed (a kernel
    #: AER report's ``device [10de:…]`` line); None until known, ``()`` for a one-line record
    follow: tuple[bytes, ...] | None = None


class Templates:
    """The templates of one file's candidate lines (see the module docstring)."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self.by_key: dict[bytes, Template] = {}
        self.skipped = 0

    def lookup(self, data: Data, start: int, end: int) -> Template | None:
        """The template of the line ``data[start:end]``; None when the line is not one (too long, a bar)."""
        if end - start > MAX_TEMPLATE_BYTES:
            return None
        key = template_key(data[start:end])
        if b"\r" in key.rstrip(b"\r"):
            return None
        tpl = self.by_key.get(key)
        if tpl is None:
            if len(self.by_key) >= MAX_TEMPLATES:
                return None
            tpl = self.by_key[key] = Template()
        return tpl

    def should_skip(self, tpl: Template, data: Data, start: int, end: int, no: int = 0) -> bool:
        """Count this occurrence; True when it need not be parsed. ``no``: its line number when the
        caller knows it (else it is not even counted)."""
        tpl.n += 1
        bucket = start * BUCKETS // self.size
        if not tpl.simple or tpl.n <= FULL or bucket not in tpl.buckets:
            tpl.buckets.add(bucket)
            return False
        tpl.skipped += 1
        self.skipped += 1
        tpl.tail.append((start, no))
        rank = raw_rank(data, start, end)
        if rank is not None:
            tpl.ranks.add(rank)
        return True

    def pending_tail(self, number: Callable[[int], int]) -> list[tuple[Template, int, int]]:
        """(template, offset, line no) of the skipped last occurrences to parse at the end, in file order;
        ``number`` is a fresh :meth:`~forensics.ingest.textdoc.TextDocument.line_numberer` (called in order, for
        the occurrences whose number was not known when they were skipped)."""
        found = sorted(((start, no, t) for t in self.by_key.values() if t.simple for start, no in t.tail
                        if start > t.last_parsed), key=lambda item: item[0])
        out = []
        for start, no, t in found:
            no = no or number(start)
            t.last_no = max(t.last_no, no)
            out.append((t, start, no))
        return out
