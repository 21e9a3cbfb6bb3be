"""Which ranks wrote to a stream the watcher follows, fed one appended piece at a time.

The analysis reads a whole file's workers (``parsers/producers/rank_activity.py``, every way a
launcher or a program names them); the watcher sees a stream grow and keeps, per rank, only how many
labelled lines it wrote and where its last one is: the ``[rank 5] …``, ``[rank3]: …`` and torchrun
``[default3]:`` labels. That is enough for "rank 5 went quiet while its peers write" while the run goes;
the full reading comes with ``analyze`` once it ends.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from forensics.events import Event, Origin, TsSource
from forensics.ingest.textdoc import Data
from forensics.lazy_re import lazy_compile
from forensics.parsers.common.base import ParseContext

__all__ = ["RankActivity"]

MAX_RANKS = 4096
_LABEL = lazy_compile(rb"^\[(?:rank|default) ?(\d{1,5})\](?::\s?| )", re.M)
_DIGITS = lazy_compile(r"\d+(?:\.\d+)?")


def _template(data: Data, start: int) -> str:
    """A line's text after its label, numbers masked: what ranks running the same code share."""
    end = data.find(b"\n", start, start + 400)
    text = data[start:end if end >= 0 else start + 400].decode("utf-8", "replace")
    return _DIGITS.sub("#", text.strip())[:120]


class RankActivity:
    """The labelled-line scan, fed what a followed file appended."""

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
        """One ``rank-activity`` event per rank (none for fewer than two); ``number(offset)``: a line's
        number (None: the numbers kept by :meth:`feed`)."""
        if len(self.seen) < 2:
            return []
        out = []
        for rank, (lines, offset, line_no) in sorted(self.seen.items()):
            ts, src = timestamp(offset)
            out.append(Event(ts=ts, ts_source=src, source=ctx.source, kind="rank-activity",
                             message=f"rank {rank} wrote {lines} labelled line(s)",
                             origin=Origin(ctx.path, number(offset) if number is not None else line_no, offset),
                             host=ctx.host, rank=rank,
                             attrs={"worker": f"rank {rank}", "rank": rank, "lines": lines,
                                    "first_template": self.first[rank]}))
        return out
