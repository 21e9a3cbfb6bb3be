"""The machinery every line-oriented kernel-log format shares: records, continuation lines,
pasted noise, huge files, and the Event built from each record.

A format supplies a :class:`LineReader` whose ``head(text)`` recognises the first line of a
record and returns a :class:`Head` (message, stamp, host, level …). This module does the rest:

- **continuation lines** (a printk holding ``\\n``: dmesg and journalctl indent the following
  lines to the message column; rsyslog writes ``#012`` — the reader splits those into the
  message) are joined into ONE event: ``message`` is the whole record flattened to one line
  when short, else its first line; ``detail`` the record's lines; ``origin.nlines`` spans them;
- **pasted noise** (shell prompts, ``...``/``[...]`` elisions, markdown fences and quote
  markers) is skipped silently;
- lines with no stamp in a stamped file join the previous record when they look like a hard
  wrap, otherwise become untimed events that the timeline places between neighbours;
- **huge files** (over :data:`FULL_PARSE_BYTES`) are not read line by line: only lines holding
  a kernel trigger literal or a signature anchor (``ctx.notable``) are decoded, each extended
  back to its record's first line and forward over its continuation lines;
- **year-less stamps** (syslog, journalctl ``short``) are resolved per file by
  :class:`forensics.clock.YearlessClock` once the whole file is read; unless a journal header
  gave the year, those events carry ``year_inferred`` (the timeline may move them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from forensics.parsers.common import template_scan
from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.templates import Template, Templates, template_key
from forensics.parsers.producers.kernel_messages import (
    LEVEL_NAMES,
    TRIGGER_LITERALS,
    classify,
    level_severity,
    mark_link_devices,
)

from forensics.clock import YEAR_INFERRED, YearlessClock
from forensics.events import Event, Severity, TsSource
from forensics.ingest.textdoc import Data, Line, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = [
    "FULL_PARSE_BYTES",
    "strip_ansi",
    "Head",
    "KernelLogParser",
    "LineReader",
    "KRecord",
    "head_fraction",
    "is_noise",
    "share_detector",
    "stamped_head",
]

#: files up to this size are read record by record (every record an event, ~30 µs each); bigger
#: ones through literal scanning (only notable records become events)
FULL_PARSE_BYTES = 4 << 20
#: longest record (continuation lines) kept in one event
MAX_CONTINUATION = 200
#: a record flattened to at most this many characters becomes the event's one-line message
MAX_FLAT_MESSAGE = 320

_PROMPT_RE = lazy_compile(
    r"""^\s*(?:
        [$#%❯➜»λ]\s                               # bare prompt characters
      | [\w.-]+@[\w.-]+:\S*\s?[$#%]\s?             # user@host:~$  root@node4:~#
      | \[[\w.-]+@[\w.-]+[^\]]*\]\s?[$#%]\s?       # [user@host ~]$
      | PS\s\S*>\s                                 # PowerShell
      | (?:sudo|dmesg|journalctl|grep|egrep|zgrep|zcat|cat|tail|less|talosctl|kubectl)\s
        .*(?:dmesg|journal|grep|syslog|messages|kern|tail|\|)   # a pasted command line
    )""",
    re.VERBOSE,
)
# Linear on any line: a marker that starts with a decoration character (``-- No entries``) is found after
# a lazy run, and a rule (``-----``, ``=====``) is told by :func:`_is_rule`, not by runs that overlap.
_ELISION_RE = lazy_compile(
    r"^(?:[\s>*=#-]*(?:\.{3,}|…|\[\s*(?:\.{2,}|…|/?snip|cut|truncated|omitted)[^\]]*\]|<snip>|\(snip\)|\(\.{3}\)|"
    r"```\w*|~~~\w*)|[\s>*=#-]*?-- (?:No entries|Logs begin at|Journal begins at|Journal ends at|cursor:).*)"
    r"[\s>*=#-]*$"
)
_DECORATION = " \t\r\n\f\v>*=#-"


def _is_rule(stripped: str) -> bool:
    """A line of decoration holding ``---`` or ``===`` (a pasted separator)."""
    return not stripped.strip(_DECORATION) and ("---" in stripped or "===" in stripped)


_ANSI_RE = lazy_compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """Remove terminal colour codes (``dmesg --color=always``, captured terminals)."""
    return _ANSI_RE.sub("", text) if "\x1b" in text else text


def is_noise(text: str) -> bool:
    """A pasted shell prompt, command line, elision or markdown fence: not log content."""
    stripped = text.strip()
    if not stripped:
        return True
    return bool(_ELISION_RE.match(stripped) or _is_rule(stripped) or _PROMPT_RE.match(text))


@dataclass(slots=True)
class Head:
    """What a format reader found on the first line of a record."""

    msg: str
    col: int = 0  # column where the message starts (continuation lines are indented to it)
    ts: int | None = None
    ts_source: TsSource = TsSource.NONE
    uptime_ns: int | None = None
    #: year-less local wall clock (month, day, hour, minute, second, ns), resolved per file
    wall: tuple[int, int, int, int, int, int] | None = None
    wall_plus_ns: int = 0  # added to the resolved wall clock (dmesg -H deltas after an anchor)
    host: str | None = None
    ident: str | None = None  # syslog identifier; None or "kernel" for kernel messages
    pid: int | None = None  # pid of the logging process (journal)
    level: int | None = None  # syslog level 0-7
    facility: str | None = None
    kind: str | None = None  # forced event kind (journal boot markers)
    joins_previous: bool = False  # /dev/kmsg "+" fragments
    attrs: dict[str, Any] = field(default_factory=dict)


class LineReader(Protocol):
    """Per-file, possibly stateful, recogniser of record heads."""

    #: whether the format can be read sparsely (false for delta stamps and sequence checks)
    sparse_ok: bool

    def head(self, text: str) -> Head | None: ...


@dataclass(slots=True)
class KRecord:
    head: Head
    line: Line
    cont: list[str] = field(default_factory=list)
    nlines: int = 1
    template: Template | None = None  # a repeated record's template (sparse reading)


def head_fraction(head: list[str], matches: Callable[[str], bool]) -> float:
    """Share of the meaningful first lines of a file that ``matches`` accepts (indented
    continuation lines and pasted noise are left out of the count)."""
    total = hits = 0
    for text in head:
        text = strip_ansi(text)
        if not text.strip() or is_noise(text) or text[:1] in (" ", "\t"):
            continue
        total += 1
        if matches(text):
            hits += 1
    return hits / total if total else 0.0


def share_detector(matches: Callable[[str], bool], weight: float = 0.9) -> Callable[[list[str]], float]:
    """``detect(head)`` for a format recognised line by line: ``weight`` × the share of the first
    lines that ``matches`` accepts (see :func:`head_fraction`), 0 when under 30 %."""

    def detect(head: list[str]) -> float:
        frac = head_fraction(head, matches)
        return weight * frac if frac >= 0.3 else 0.0

    return detect


def stamped_head(text: str, msg: str, placed: tuple[int, TsSource] | None, level: int | None = None,
                 facility: str | None = None) -> Head:
    """The head of a line whose message ``msg`` ends it after a stamp placed at ``placed``."""
    head = Head(msg=msg, col=len(text) - len(msg), level=level, facility=facility)
    if placed is not None:
        head.ts, head.ts_source = placed
    return head


def _prev_line(doc: TextDocument, line: Line) -> Line | None:
    if line.offset <= 0:
        return None
    end = line.offset - 1
    start = doc.data.rfind(b"\n", 0, end) + 1
    text = doc.data[start:end].decode("utf-8", errors="replace").rstrip("\r")
    return Line(line.no - 1, start, text)


def _is_indented(text: str) -> bool:
    return text[:1] in (" ", "\t")


def _records_full(doc: TextDocument, reader: LineReader, bare: bool) -> Iterator[KRecord]:
    current: KRecord | None = None
    for line in doc.lines():
        text = strip_ansi(line.text)
        if text.startswith("> ") and not bare:  # markdown quote of a pasted log
            text = text[2:]
        head = reader.head(text)
        if head is not None:
            if head.joins_previous and current is not None:
                current.cont.append(head.msg)
                current.nlines = line.no - current.line.no + 1
                continue
            if current is not None:
                yield current
            current = KRecord(head, line)
            continue
        if is_noise(text):
            if text.strip() and current is not None:  # an elision ends the record before it
                yield current
                current = None
            continue
        prop = _property(reader, text)
        if prop is not None and current is not None:
            current.head.attrs[prop[0]] = prop[1]
            current.nlines = line.no - current.line.no + 1
            continue
        wrap_ok = _is_indented(text) or (not bare and current is not None and len(current.cont) < 3)
        if current is not None and wrap_ok and len(current.cont) < MAX_CONTINUATION:
            current.cont.append(text)
            current.nlines = line.no - current.line.no + 1
            continue
        if current is not None:
            yield current
        current = KRecord(Head(msg=text.strip(), col=len(text) - len(text.lstrip())), line)
    if current is not None:
        yield current


def _property(reader: LineReader, text: str) -> tuple[str, str] | None:
    fn = getattr(reader, "property_line", None)
    return fn(text) if fn is not None else None


def _record_at(doc: TextDocument, reader: LineReader, hit: Line) -> KRecord | None:
    """The whole record holding the line ``hit`` (walked back to its head); None for noise."""
    line: Line | None = hit
    start = hit
    steps = 0
    while line is not None and reader.head(line.text) is None and _is_indented(line.text) and steps < 50:
        line = _prev_line(doc, line)
        steps += 1
        if line is not None:
            start = line
    head = reader.head(strip_ansi(start.text))
    if head is None:
        if is_noise(start.text):
            return None
        head = Head(msg=strip_ansi(start.text).strip())
    rec = KRecord(head, start)
    end = start
    for nxt in doc.lines_from(start):
        if len(rec.cont) >= MAX_CONTINUATION or not _is_indented(nxt.text) or reader.head(nxt.text) is not None:
            break
        rec.cont.append(nxt.text)
        end = nxt
    rec.nlines = end.no - start.no + 1
    return rec


def _records_sparse(doc: TextDocument, reader: LineReader, literals: Iterable[bytes]) -> Iterator[KRecord]:
    """Only the records around lines holding a literal; each extended to its whole record.

    A one-line record repeated with only its numbers changed (a corrected-AER storm, NVRM chatter)
    is read a bounded number of times (``templates``); the first record of such a template carries
    the counts (:func:`_repeat_attrs`)."""
    if not any(lit for lit in literals):
        return
    data = doc.data
    size = len(data)
    templates = Templates(size)
    out: list[KRecord] = []
    last_end = -1

    def read(start: int, no: int, tpl: Template | None) -> None:
        nonlocal last_end
        nl = data.find(b"\n", start)
        line = Line(no, start, doc._decode(start, size if nl < 0 else nl))
        rec = _record_at(doc, reader, line)
        if rec is None:
            return
        if tpl is not None:
            follow = _continuation_keys(data, start, rec.nlines)
            if rec.line.offset != start or follow is None or tpl.follow not in (None, follow):
                tpl.simple = False
            else:
                tpl.follow = follow
                tpl.last_parsed = start
                rec.template = tpl
        if rec.line.offset > last_end or tpl is None or rec.template is tpl:
            out.append(rec)
        last_end = max(last_end, _record_end(doc, rec))

    plan = template_scan.plan_for(tuple(literals))
    for start, no in template_scan.visits(doc, templates, plan):
        if start <= last_end:
            continue  # inside the record just read
        nl = data.find(b"\n", start)
        end = size if nl < 0 else nl
        tpl = templates.lookup(data, start, end)
        if tpl is not None and templates.should_skip(tpl, data, start, end, no):
            continue
        read(start, no, tpl)
    for tpl, start, no in templates.pending_tail(doc.line_numberer()):
        if tpl.simple:
            read(start, no, tpl)
    out.sort(key=lambda r: r.line.offset)
    yield from out


#: Continuation lines a repeated record may have and still be counted as one template.
MAX_TEMPLATE_CONTINUATION = 8


def _continuation_keys(data: Data, start: int, nlines: int) -> tuple[bytes, ...] | None:
    """The template keys of the lines a record starting at ``start`` continues on (None: too many)."""
    if nlines - 1 > MAX_TEMPLATE_CONTINUATION:
        return None
    keys = []
    pos = start
    for _ in range(nlines - 1):
        pos = data.find(b"\n", pos) + 1
        nl = data.find(b"\n", pos)
        keys.append(template_key(data[pos:len(data) if nl < 0 else nl]))
    return tuple(keys)


def _record_end(doc: TextDocument, rec: KRecord) -> int:
    """Offset of the last line of ``rec``."""
    pos = rec.line.offset
    for _ in range(rec.nlines - 1):
        nl = doc.data.find(b"\n", pos)
        if nl < 0:
            break
        pos = nl + 1
    return pos


def _repeat_attrs(pairs: list[tuple[Event, KRecord]]) -> list[tuple[Event, KRecord]]:
    """The counts of each repeated template on its first event: ``count``, ``first``/``last`` (ns),
    ``first_line``/``last_line``."""
    groups: dict[int, list[int]] = {}
    for i, (_, rec) in enumerate(pairs):
        if rec.template is not None and rec.template.skipped:
            groups.setdefault(id(rec.template), []).append(i)
    for idx in groups.values():
        first, last = pairs[idx[0]], pairs[idx[-1]]
        tpl = first[1].template
        assert tpl is not None
        ev = first[0]
        add = {"count": tpl.n, "first": ev.ts, "last": last[0].ts, "first_line": ev.origin.line,
               "last_line": max(tpl.last_no, last[0].origin.line)}
        attrs = dict(ev.attrs)
        for k, v in add.items():
            if v is not None:
                attrs["repeat_" + k if k in ev.attrs else k] = v
        pairs[idx[0]] = (replace(ev, attrs=attrs), first[1])
    return pairs


def iter_records(doc: TextDocument, ctx: ParseContext, reader: LineReader, *, bare: bool = False) -> Iterator[KRecord]:
    """Every record of ``doc`` (or, for a huge file, every notable one), in file order."""
    if len(doc.data) > FULL_PARSE_BYTES and reader.sparse_ok:
        return _records_sparse(doc, reader, TRIGGER_LITERALS + tuple(ctx.notable))
    return _records_full(doc, reader, bare)


# -- record -> Event ---------------------------------------------------------------------------
def _lines_of(rec: KRecord) -> list[str]:
    first = rec.head.msg.rstrip()
    if not rec.cont and "\n" not in first:
        return [first]
    lines = first.split("\n") if "\n" in first else [first]
    lines.extend(c.strip() for c in rec.cont)
    return [ln.rstrip() for ln in lines if ln.strip()] or [first]


def _flatten(lines: list[str]) -> str:
    """One line for a multi-line record; a repeated ``NVRM:``-style prefix is written once."""
    if len(lines) == 1:
        return lines[0].strip()
    first = lines[0].strip()
    prefix = first.split(" ", 1)[0] if first.split(" ", 1)[0].endswith(":") else ""
    parts = [first]
    for ln in lines[1:]:
        ln = ln.strip()
        if prefix and ln.startswith(prefix + " "):
            ln = ln[len(prefix) + 1 :].lstrip()
        parts.append(ln)
    return " ".join(parts)


def build_event(rec: KRecord, ctx: ParseContext, ts: int | None = None, ts_source: TsSource | None = None) -> Event:
    """The normalized event for one record (``ts``/``ts_source`` override the head's stamp)."""
    h = rec.head
    lines = _lines_of(rec)
    flat = _flatten(lines)
    is_kernel = h.ident in (None, "kernel")
    info = classify(flat, kernel=is_kernel)
    kind = h.kind or info.kind
    if not is_kernel and kind == "kernel":
        kind = "log"
    level_sev = level_severity(h.level)
    severity = info.severity if not info.generic else (level_sev or info.severity)
    if h.kind == "boot":
        severity = Severity.INFO
    attrs: dict[str, Any] = {k: v for k, v in h.attrs.items() if not k.startswith("_")} if h.attrs else {}
    if h.level is not None and 0 <= h.level <= 7:
        attrs["level"] = LEVEL_NAMES[h.level]
    if h.facility:
        attrs["facility"] = h.facility
    if h.ident and not is_kernel:
        attrs["ident"] = h.ident
    attrs.update(info.attrs)
    if ts is None and ts_source is None:
        ts, ts_source = h.ts, h.ts_source
    uptime = h.uptime_ns
    if ts is None and uptime is not None and ctx.boot_time_ns is not None:
        ts, ts_source = ctx.boot_time_ns + uptime, TsSource.BOOT_RELATIVE
    if ts is None:
        ts_source = TsSource.NONE
    message = flat if len(flat) <= MAX_FLAT_MESSAGE else lines[0].strip()
    return Event(
        ts=ts,
        ts_source=ts_source or TsSource.NONE,
        source=ctx.source,
        kind=kind,
        message=message,
        origin=ctx.origin(rec.line, rec.nlines),
        severity=severity,
        host=h.host or ctx.host,
        gpu=info.gpu,
        pid=info.pid if info.pid is not None else (h.pid if not is_kernel else None),
        attrs=attrs,
        detail="\n".join(lines) if len(lines) > 1 else "",
        uptime_ns=uptime,
    )


def resolve_walls(pairs: list[tuple[Event, KRecord]], ctx: ParseContext,
                  first_year: int | None = None) -> list[Event]:
    """Place the events whose records carry a year-less wall clock (see YearlessClock); they are
    marked ``year_inferred`` unless ``first_year`` (a journal header) gave the year."""
    clock = YearlessClock(ctx.year, ctx.tz, ctx.mtime_ns)
    clock.first_year = first_year
    index: list[int | None] = []
    for _, rec in pairs:
        w = rec.head.wall
        index.append(clock.add(*w) if w is not None else None)
    resolved = clock.resolve()
    out: list[Event] = []
    for (event, rec), i in zip(pairs, index, strict=True):
        if i is not None:
            r = resolved[i]
            if r is not None:
                attrs = {**event.attrs, YEAR_INFERRED: True} if first_year is None else event.attrs
                event = replace(event, ts=r[0] + rec.head.wall_plus_ns, ts_source=r[1], attrs=attrs)
            else:
                ctx.warn(f"impossible date on line {event.origin.line}; left unplaced")
        out.append(event)
    return out


class KernelLogParser:
    """A kernel-log format: a reader factory plus a detector, parsed by the shared engine."""

    def __init__(self, name: str, samples: tuple[str, ...], reader: Callable[[ParseContext], LineReader],
                 detect: Callable[[list[str]], float], bare: Callable[[TextDocument], bool] | None = None,
                 tested_with: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.name = name
        self.samples = samples
        self.tested_with = dict(tested_with or {})
        self._reader = reader
        self._detect = detect
        self._bare = bare

    def detect(self, head: list[str]) -> float:
        return self._detect(head)

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        reader = self._reader(ctx)
        bare = self._bare(doc) if self._bare is not None else False
        from forensics.parsers.common.user_space import hand_over

        pairs = _repeat_attrs([(build_event(rec, ctx), rec) for rec in iter_records(doc, ctx, reader, bare=bare)])
        if any(rec.head.wall is not None for _, rec in pairs):
            events = resolve_walls(pairs, ctx, getattr(reader, "first_year", None))
        else:
            events = [event for event, _ in pairs]
        if any(e.kind == "pcie-link" for e in events):
            events = mark_link_devices(events)  # is the link-limited device a GPU?
        yield from hand_over(events, ctx)  # programs' journal lines: to the process-output parser
