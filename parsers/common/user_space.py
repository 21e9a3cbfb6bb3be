"""Journal entries written by programs rather than the kernel, read as the process output they are.

A training job run as a systemd service logs its stdout/stderr into the journal, so a
traceback arrives as journal lines (``Oct 04 15:02:41 llm app[394]: RuntimeError: CUDA
error: ...``). The kernel classifier has nothing to say about such lines; the process-output
parser (parsers/process_output.py) does. :func:`hand_over` strips the journal prefixes,
gives the messages to that parser as one stream (each line's journal time as its receipt
time), and maps the records it finds back to the journal's lines.

User-space lines it finds nothing in are dropped as events (they stay in the file), except
those the journal marked as errors (priority ``err`` or worse) or holding a signature anchor.

Lines of Slurm's daemons (identifier ``slurmd``, ``slurmctld``, ``slurmstepd``, ``slurmd-<node>``)
are not a job's output: they go to Slurm's own record reader (``parsers/producers/slurm.py``), which keeps
the step and job records (a step launched on this node, a job allocated, done) and the errors.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import replace

from forensics.parsers.common.base import ParseContext
from forensics.parsers.producers import slurm

from forensics.clock import YEAR_INFERRED
from forensics.events import Event, Origin, TsSource
from forensics.ingest.textdoc import TextDocument

__all__ = ["hand_over"]

_KEEP_LEVELS = ("emerg", "alert", "crit", "err")


def _is_user_space(e: Event) -> bool:
    return e.kind == "log" and "ident" in e.attrs


def _slurm_daemons(events: Sequence[Event]) -> list[Event]:
    """``events`` with the Slurm daemons' lines read as Slurm records (others dropped)."""
    if not any(_is_user_space(e) and slurm.is_daemon(e.attrs.get("ident")) for e in events):
        return list(events)
    out: list[Event] = []
    for e in events:
        if _is_user_space(e) and slurm.is_daemon(e.attrs.get("ident")):
            read = slurm.daemon_event(e)
            if read is not None:
                out.append(read)
        else:
            out.append(e)
    return out


def hand_over(events: Sequence[Event], ctx: ParseContext) -> list[Event]:
    """``events`` with the generic user-space ones replaced by what the process-output parser
    finds in them (unchanged when there are none); Slurm daemons' lines are
    read by the Slurm record reader instead."""
    events = _slurm_daemons(events)
    picked = [e for e in events if _is_user_space(e)]
    if not picked:
        return list(events)
    from forensics.parsers.process_output import PARSER as parser  # it reads kernel logs' neighbours too

    # one virtual line per message line; remember where each came from
    lines: list[str] = []
    starts: list[int] = []
    owner: list[int] = []  # index into picked
    pos = 0
    for i, e in enumerate(picked):
        for text in (e.detail.split("\n") if e.detail else [e.message]):
            lines.append(text)
            starts.append(pos)
            owner.append(i)
            pos += len(text.encode("utf-8")) + 1
    vdoc = TextDocument("\n".join(lines).encode("utf-8"), ctx.path)

    def owner_of_offset(offset: int) -> Event:
        return picked[owner[max(0, bisect_right(starts, offset) - 1)]]

    def receipt(offset: int) -> int | None:
        return owner_of_offset(offset).ts

    sub = ParseContext(path=ctx.path, source=ctx.source, host=ctx.host, year=ctx.year, mtime_ns=ctx.mtime_ns,
                       tz=ctx.tz, receipt_ts=receipt, notable=ctx.notable, detect=ctx.detect)
    found: list[Event] = []
    covered: set[int] = set()
    try:
        records = list(parser.parse(vdoc, sub))
    except Exception as exc:  # the other parser's bug must not cost the kernel events
        ctx.warn(f"process-output parser failed on journal entries: {type(exc).__name__}: {exc}")
        return list(events)
    for r in records:
        if not isinstance(r, Event):
            continue
        first = max(1, min(r.origin.line, len(lines)))
        last = max(first, min(first + r.origin.nlines - 1, len(lines)))
        head, tail = picked[owner[first - 1]], picked[owner[last - 1]]
        covered.update(owner[first - 1 : last])
        origin = Origin(ctx.path, head.origin.line, head.origin.offset,
                        tail.origin.line + tail.origin.nlines - head.origin.line)
        ts, src = r.ts, r.ts_source
        attrs = dict(r.attrs)
        if src is TsSource.RECEIPT or ts is None:
            ts, src = head.ts, head.ts_source
            if head.attrs.get(YEAR_INFERRED):  # the journal line's year-less stamp
                attrs[YEAR_INFERRED] = True
        attrs.setdefault("ident", head.attrs.get("ident"))
        found.append(replace(r, origin=origin, ts=ts, ts_source=src, host=r.host or head.host,
                             pid=r.pid if r.pid is not None else head.pid, attrs=attrs))
    for w in sub.warnings:
        ctx.warn(w.removeprefix(f"{ctx.path}: "))

    notable = tuple(lit.decode("utf-8", errors="ignore") for lit in ctx.notable)
    kept = [e for i, e in enumerate(picked) if i not in covered
            and (e.attrs.get("level") in _KEEP_LEVELS or any(lit and lit in e.text for lit in notable))]
    picked_ids = {id(e) for e in picked}
    out = [e for e in events if id(e) not in picked_ids] + kept + found
    out.sort(key=lambda e: (e.origin.offset, e.origin.line))
    return out
