"""Which workers wrote to a process-output file, how regularly, and where each one's last line is.

Workers that label their lines (a launcher prefix, a rank in the message, a role and a number, a
launcher label: parsers/producers/worker_identity.py) show which of them are alive even in lines no
signature reads. One pass over a small file (``MAX_BYTES``) gives one ``rank-activity`` event per
worker, at its last line before the job was being shut down (the first Ctrl-C, ``KeyboardInterrupt``,
signal sent or received by the launcher: what every worker prints then says nothing about who
stopped first). Its attrs are the facts a detector compares (forensics/match/detectors/stopped.py):

* ``lines`` it wrote, ``first_ts`` (its first line's time; the event's is its last line's), ``seq_last``
  (the position of its last line among all labelled lines), ``seq_total`` (all labelled lines before
  the shutdown), ``cadence`` (the median number of labelled lines between two of its own: one per round
  when workers take turns), ``seq_marks`` (the positions of every ``seq_step``-th of its lines, at most
  :data:`MARKS`: how many lines it wrote after any point, within ``seq_step``);
* ``first_template`` (its first line, numbers masked: what workers running the same code share),
  ``last_text`` (its last line), ``role`` (the word that named it: ``drafter``), ``shutdown`` (whether
  the file shows the job being stopped, and at which line).

No event for a file with fewer than two workers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from statistics import median

from forensics.parsers.common.base import ParseContext
from forensics.parsers.common.stream_text import clean, split_body
from forensics.parsers.producers.worker_identity import Identities, Worker, identify

from forensics.events import Event, Origin, TsSource
from forensics.ingest.textdoc import Data, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["MAX_BYTES", "SHUTDOWN", "rank_activity", "shutdown_offset"]

MAX_BYTES = 16 << 20
MAX_WORKERS = 4096
#: Positions kept per worker (every k-th of its labelled lines): enough to count its lines after a point.
MARKS = 64
_DIGITS = lazy_compile(r"\d+(?:\.\d+)?")
#: What a job prints as it is being stopped (by the user, the launcher or the scheduler).
SHUTDOWN: tuple[bytes, ...] = (b"KeyboardInterrupt", b"death signal", b"closing signal", b"SignalException",
                               b"\n^C", b"Sending SIGTERM", b"Sending SIGINT", b"srun: forcing job termination",
                               b"Job step aborted", b"CANCELLED AT")
_HEADER = lazy_compile(r"^(?:\[[^\]]{1,40}\]:?\s?|\d+:\s|\x1f[^\x1f]*\x1f)")


def shutdown_offset(data: Data) -> int | None:
    """The start of the first line that shows the job being stopped, or None."""
    found = [i for lit in SHUTDOWN if (i := data.find(lit)) >= 0]
    if not found:
        return None
    first = min(found)
    return data.rfind(b"\n", 0, first + 1 if data[first:first + 1] == b"\n" else first) + 1


def _text(data: Data, start: int) -> str:
    end = data.find(b"\n", start, start + 400)
    return data[start:end if end >= 0 else start + 400].decode("utf-8", "replace").strip(" \t\r\n")


def _message(text: str) -> str:
    """A line without its launcher prefix and logging header: what the worker said."""
    return split_body(clean(text)).text.strip() or text


def _template(text: str) -> str:
    """A line's text after its label, numbers masked: what workers running the same code share."""
    return _DIGITS.sub("#", _HEADER.sub("", text, count=1).strip())[:120]


def rank_activity(doc: TextDocument, ctx: ParseContext, timestamp: Callable[[int], tuple[int | None, TsSource]],
                  ids: Identities | None = None) -> list[Event]:
    """One event per worker of ``doc`` (empty for big files or fewer than two workers).
    ``timestamp(offset)`` places a line (the recorder's receipt time in a bundle); ``ids`` the file's
    identities when the caller has them."""
    data = doc.data
    if len(data) > MAX_BYTES:
        return []
    ids = ids if ids is not None else identify(data)
    if len({w.key for w in ids.at.values()}) < 2:
        return []
    cut = shutdown_offset(data)
    seen: dict[str, list[int]] = {}  # worker key -> offsets of its lines before the shutdown
    workers: dict[str, Worker] = {}
    order: list[str] = []  # the writer of each labelled line, in file order
    for offset in sorted(ids.at):
        if cut is not None and offset >= cut:
            break
        w = ids.at[offset]
        key = w.key
        if key not in seen:
            if len(seen) >= MAX_WORKERS:
                continue
            seen[key], workers[key] = [], w
        seen[key].append(offset)
        order.append(key)
    if len(seen) < 2:
        return []
    seq: dict[str, list[int]] = {}
    for i, key in enumerate(order):
        seq.setdefault(key, []).append(i)
    numberer = doc.line_numberer()
    wanted = sorted({o for offsets in seen.values() for o in (offsets[0], offsets[-1])}
                    | ({cut} if cut is not None else set()))
    lines = {o: numberer(o) for o in wanted}  # in increasing order: the numberer counts forward
    cut_line = lines[cut] if cut is not None else None
    out = []
    for key in sorted(seen, key=lambda k: (workers[k].rank is None, workers[k].rank or 0, k)):
        offsets, w, positions = seen[key], workers[key], seq[key]
        gaps = [b - a for a, b in zip(positions, positions[1:], strict=False)]
        last_text = _text(data, offsets[-1])
        ts, src = timestamp(offsets[-1])
        first_ts, _ = timestamp(offsets[0])
        step = max(1, -(-len(positions) // MARKS))
        attrs: dict[str, object] = {"worker": key, "lines": len(offsets), "first_line": lines[offsets[0]],
                                    "first_ts": first_ts, "seq_last": positions[-1], "seq_total": len(order),
                                    "cadence": median(gaps) if gaps else None,
                                    "seq_marks": positions[step - 1::step], "seq_step": step,
                                    "first_template": _template(_text(data, offsets[0])),
                                    "last_text": re.sub(r"\s+", " ", _message(last_text))[:200]}
        if w.rank is not None:
            attrs["rank"] = w.rank
            if w.rank in ids.roles:
                attrs["role"] = ids.roles[w.rank]
        if cut_line is not None:
            attrs["shutdown_line"] = cut_line
        label = f"rank {w.rank}" if w.rank is not None else w.label
        out.append(Event(ts=ts, ts_source=src, source=ctx.source, kind="rank-activity",
                         message=f"{label} wrote {len(offsets)} labelled line(s)",
                         origin=Origin(ctx.path, lines[offsets[-1]], offsets[-1]),
                         host=ctx.host or w.host, rank=w.rank, pid=w.pid if w.pid is not None else ids.pids.get(key),
                         attrs=attrs))
    return out
