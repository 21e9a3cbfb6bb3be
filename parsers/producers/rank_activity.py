"""Which ranks wrote to a process-output file, and where each one's last line is.

Programs that label their own lines per rank (``[rank 5] drafter ready``, ``[rank3]: …``,
torchrun's ``[default3]:``) show which ranks are alive even in lines no signature reads. One bytes
scan of a small file (``MAX_BYTES``) gives one ``rank-activity`` event per rank: how many lines it
wrote and where its last one is (the event's origin and time). The detectors compare that with the
ranks' progress lines (forensics/match/detectors/stunted.py): a rank that announced itself and then
never progressed while its peers did is a silent worker. No event for a file with fewer than two
ranks.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from forensics.parsers.common.base import ParseContext

from forensics.events import Event, Origin, TsSource
from forensics.ingest.textdoc import Data, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["MAX_BYTES", "RankActivity", "rank_activity"]

MAX_BYTES = 16 << 20
MAX_RANKS = 4096
_LABEL = lazy_compile(rb"^\[(?:rank|default) ?(\d{1,5})\](?::\s?| )", re.M)
_DIGITS = lazy_compile(r"\d+(?:\.\d+)?")


def _template(data: Data, start: int) -> str:
    """A line's text after its label, numbers masked: what ranks running the same code share."""
    end = data.find(b"\n", start, start + 400)
    text = data[start:end if end >= 0 else start + 400].decode("utf-8", "replace")
    return _DIGITS.sub("#", text.strip())[:120]


class RankActivity:
    """The scan, fed one piece of a file at a time (the whole file here; what a file appended in the
    live watcher, forensics/live)."""

    def __init__(self) -> None:
        self.seen: dict[int, list[int]] = {}  # rank -> [lines, last offset, last line number]
        self.first: dict[int, str] = {}  # rank -> its first labelled line's template

    def feed(self, data: Data, base: int = 0, line_of: Callable[[int], int] | None = None) -> None:
        """The labelled lines of ``data``, which begins at byte ``base`` of the file (``line_of``: the
        line number of an offset of ``data``, to keep each rank's last one)."""
        seen, first = self.seen, self.first
        for m in _LABEL.finditer(data):
            rank = int(m.group(1))
            entry = seen.get(rank)
            if entry is None:
                if len(seen) >= MAX_RANKS:
                    continue
                entry = seen[rank] = [0, 0, 0]
                first[rank] = _template(data, m.end())
            entry[0] += 1
            entry[1] = base + m.start()
            if line_of is not None:
                entry[2] = line_of(m.start())

    def events(self, ctx: ParseContext, number: Callable[[int], int] | None,
               timestamp: Callable[[int], tuple[int | None, TsSource]]) -> list[Event]:
        """One event per rank (none for fewer than two); ``number(offset)``: a line's number (None: the
        numbers kept by :meth:`feed`)."""
        if len(self.seen) < 2:
            return []
        out = []
        for rank, (lines, offset, line_no) in sorted(self.seen.items()):
            ts, src = timestamp(offset)
            out.append(Event(ts=ts, ts_source=src, source=ctx.source, kind="rank-activity",
                             message=f"rank {rank} wrote {lines} labelled line(s)",
                             origin=Origin(ctx.path, number(offset) if number is not None else line_no, offset),
                             host=ctx.host, rank=rank,
                             attrs={"rank": rank, "lines": lines, "first_template": self.first[rank]}))
        return out


def rank_activity(doc: TextDocument, ctx: ParseContext,
                  timestamp: Callable[[int], tuple[int | None, TsSource]]) -> list[Event]:
    """One event per labelled rank of ``doc`` (empty for big files or fewer than two ranks).
    ``timestamp(offset)`` places a line (the recorder's receipt time in a bundle)."""
    data = doc.data
    if len(data) > MAX_BYTES or (data.find(b"[rank") < 0 and data.find(b"[default") < 0):
        return []
    scan = RankActivity()
    scan.feed(data)
    if len(scan.seen) < 2:
        return []
    return scan.events(ctx, doc.line_numberer(), timestamp)
