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

__all__ = ["MAX_BYTES", "rank_activity"]

MAX_BYTES = 16 << 20
MAX_RANKS = 4096
_LABEL = lazy_compile(rb"^\[(?:rank|default) ?(\d{1,5})\](?::\s?| )", re.M)
_DIGITS = lazy_compile(r"\d+(?:\.\d+)?")


def _template(data: Data, start: int) -> str:
    """A line's text after its label, numbers masked: what ranks running the same code share."""
    end = data.find(b"\n", start, start + 400)
    text = data[start:end if end >= 0 else start + 400].decode("utf-8", "replace")
    return _DIGITS.sub("#", text.strip())[:120]


def rank_activity(doc: TextDocument, ctx: ParseContext,
                  timestamp: Callable[[int], tuple[int | None, TsSource]]) -> list[Event]:
    """One event per labelled rank of ``doc`` (empty for big files or fewer than two ranks).
    ``timestamp(offset)`` places a line (the recorder's receipt time in a bundle)."""
    data = doc.data
    if len(data) > MAX_BYTES or (data.find(b"[rank") < 0 and data.find(b"[default") < 0):
        return []
    seen: dict[int, list[int]] = {}  # rank -> [lines, last offset]
    first: dict[int, str] = {}  # rank -> its first labelled line's template
    for m in _LABEL.finditer(data):
        rank = int(m.group(1))
        entry = seen.get(rank)
        if entry is None:
            if len(seen) >= MAX_RANKS:
                continue
            seen[rank] = [1, m.start()]
            first[rank] = _template(data, m.end())
        else:
            entry[0] += 1
            entry[1] = m.start()
    if len(seen) < 2:
        return []
    number = doc.line_numberer()
    out = []
    for rank, (lines, offset) in sorted(seen.items()):
        ts, src = timestamp(offset)
        out.append(Event(ts=ts, ts_source=src, source=ctx.source, kind="rank-activity",
                         message=f"rank {rank} wrote {lines} labelled line(s)",
                         origin=Origin(ctx.path, number(offset), offset), host=ctx.host, rank=rank,
                         attrs={"rank": rank, "lines": lines, "first_template": first[rank]}))
    return out
