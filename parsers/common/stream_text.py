"""Helpers for the raw text a training process prints: bar redraws, colours, prefixes, stamps.

What a job prints is one stream in which many writers interleave. Before any record can be read,
each physical line is split on bar redraws (``\\r``, a literal ``^M``, cursor-up ``ESC[A``), ANSI
colour codes are removed, and the prefixes that launchers and loggers put in front of a record
are peeled off into fields: ``srun --label`` ``N:``, ``[rankN]:``, Ray/vLLM ``(Worker pid=N)``,
and logging headers with a level and a time stamp (vLLM, glog, DeepSpeed, transformers, ISO,
std logging, journald). What is left is the *body* that record recognizers read.

Time stamps are parsed with exact, precompiled patterns and integer arithmetic; a wall-clock stamp
is placed with ``ctx.tz`` when known. A stamp without a year (glog ``E0514``, c10d ``[E321 …]``,
vLLM ``INFO 10-03``) borrows ``ctx.year`` while the file is read; once it is read,
:func:`place_yearless` gives those stamps their years the way the kernel logs get theirs
(:class:`forensics.clock.YearlessClock`: December → January rolls over, the file's mtime bounds the
newest stamp).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC

from forensics.parsers.common.base import ParseContext

from forensics.clock import YEAR_INFERRED, YearlessClock, wall_to_ns
from forensics.events import Event, TsSource
from forensics.ingest.textdoc import Line, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = [
    "RECORD_START",
    "Body",
    "Follower",
    "Stamp",
    "clean",
    "place_yearless",
    "segments",
    "split_body",
    "stamp_ns",
    "timestamp",
]

# -- raw line cleaning ------------------------------------------------------------------------

_ANSI = lazy_compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]")
_ORPHAN_SGR = lazy_compile(r"^(?:\[[0-9;]{1,8}m)+")
_SEGMENT_SPLIT = lazy_compile(r"\r|\^M|\x1b\[\d*A")


def clean(text: str) -> str:
    """Remove ANSI escape sequences (and orphaned ``[36m`` at the start) and trailing padding."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if text.startswith("["):
        text = _ORPHAN_SGR.sub("", text)
    return text.rstrip()


def segments(text: str) -> list[str]:
    """The bar-redraw segments of one physical line (``\\r``, ``^M``, ``ESC[A``), empty ones dropped.

    The last segment is what a terminal would have shown; records glued after a bar live in it.
    """
    if "\r" not in text and "^M" not in text and "\x1b[" not in text:
        return [text]
    parts = [p for p in _SEGMENT_SPLIT.split(text) if p.strip()]
    return parts or [""]


# -- time stamps ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stamp:
    """A wall-clock stamp as printed: year may be missing; ``utc`` when the text said so."""

    year: int | None
    month: int
    day: int
    hour: int
    minute: int
    second: int
    nanos: int = 0
    utc: bool = False


def stamp_ns(stamp: Stamp, ctx: ParseContext) -> tuple[int | None, TsSource]:
    """UTC nanoseconds of a printed stamp: ``exact`` when its zone is known, else ``local``
    (a year-less stamp provisionally in ``ctx.year``; see :func:`place_yearless`)."""
    year = stamp.year if stamp.year is not None else ctx.year
    if year is None:
        return None, TsSource.NONE
    placed = wall_to_ns(year, stamp.month, stamp.day, stamp.hour, stamp.minute, stamp.second, stamp.nanos,
                        UTC if stamp.utc else ctx.tz)
    return placed if placed is not None else (None, TsSource.NONE)


def place_yearless(items: Sequence[tuple[Event, Stamp]], ctx: ParseContext) -> list[Event]:
    """One file's events whose printed stamps had no year, in file order, placed by
    :class:`~forensics.clock.YearlessClock` (rollover at New Year, bounded by ``ctx.mtime_ns``) and
    marked ``year_inferred``. An event whose stamp makes no date in its year keeps its time."""
    clock = YearlessClock(ctx.year, ctx.tz, ctx.mtime_ns)
    for _, st in items:
        clock.add(st.month, st.day, st.hour, st.minute, st.second, st.nanos)
    out: list[Event] = []
    for (event, _), placed in zip(items, clock.resolve(), strict=True):
        if placed is None:
            out.append(event)
            continue
        attrs = event.attrs if event.attrs.get(YEAR_INFERRED) else {**event.attrs, YEAR_INFERRED: True}
        out.append(replace(event, ts=placed[0], ts_source=placed[1], attrs=attrs))
    return out


def timestamp(stamp: Stamp | None, ctx: ParseContext, offset: int) -> tuple[int | None, TsSource]:
    """The time of a record: its own stamp, else the recorder's receipt time, else none."""
    if stamp is not None:
        ts, src = stamp_ns(stamp, ctx)
        if ts is not None:
            return ts, src
    if ctx.receipt_ts is not None:
        ts = ctx.receipt_ts(offset)
        if ts is not None:
            return ts, TsSource.RECEIPT
    return None, TsSource.NONE


def _frac_ns(frac: str | None) -> int:
    if not frac:
        return 0
    return int(frac[:9].ljust(9, "0"))


_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                                       "Nov", "Dec"), 1)}

# -- prefixes ---------------------------------------------------------------------------------

#: Marks the writer of a line whose launcher label was peeled (``\x1fnode07:\x1f``): records are read
#: from one writer's lines, as with the prefixes below.
WRITER_TAG = "\x1f"
_LEVEL = r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)"
_SRUN_LABEL = lazy_compile(r"^\s{0,4}(?P<label>\d{1,5}): ")
_RANK = lazy_compile(r"^\[(?:rank|default) ?(?P<rank>\d+)\](?::\s?| )")
# Open MPI ``mpirun --tag-output`` ("[jobid,rank]<stdout>:"), optionally after a stamp
# ("--timestamp-output" or a log collector): "2020-11-08 20:25:49 [1,0]<stdout>:host:993:993 [3] NCCL WARN ..."
_OMPI_TAG = lazy_compile(r"^(?:(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d) (?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d) )?"
                         r"\[\d+,(?P<rank>\d+)\]<std(?:out|err|diag)>:\s?")
_RAY = lazy_compile(r"^\((?P<actor>[A-Za-z_][\w.-]*)(?: rank=(?P<rank>\d+))? pid=(?P<pid>\d+)(?:, ip=[\d.:a-f]+)?\)\s?")
# vLLM: "ERROR 08-06 18:38:55 multiproc_worker_utils.py:226] " / "INFO 04-15 00:31:11 [worker.py:574] "
_VLLM = lazy_compile(_LEVEL + r" (?P<mo>\d\d)-(?P<d>\d\d) (?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)(?:\.(?P<f>\d+))? "
                     r"\[?[\w./-]+:\d+\]\s?")
# glog as printed by Python logging in torch.distributed.elastic: "E0909 14:03:50.013000 22579342468928 api.py:833] "
_GLOG_PY = lazy_compile(r"(?P<lv>[EWIF])(?P<mo>\d\d)(?P<d>\d\d) (?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)\.(?P<f>\d+) "
                        r"(?P<tid>\d+) (?P<src>[^\s\]]+):\d+\]\s?")
# DeepSpeed / axolotl / NCCL >= 2.26 / elastic ~2.1 / SGLang: "[2024-09-11 17:52:18,030] [INFO] [file.py:183:func] "
_BRACKET_ISO = lazy_compile(
    r"\[(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[ T](?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)(?:[,.](?P<f>\d+))?"
    r"(?P<z>Z)?(?: TP\d+)?\]\s?"
    r"(?:[\w.]+: )?"  # elastic ~2.1: "torch.distributed.elastic.multiprocessing.api: [ERROR] "
    r"(?:\[" + _LEVEL + r"\]\s?)?"
    r"(?:\[[\w./-]+:\d+(?::\w+)?\]\s?)?"
    r"(?:\[PID:(?P<pid>\d+)\]\s?)?(?:\[RANK:(?P<rank>\d+)\]\s?)?"
)
# transformers / LLaMA-Factory: "[INFO|trainer.py:1156] 2021-06-05 16:46:31,375 >> "
_HF = lazy_compile(r"\[" + _LEVEL + r"\|[\w./-]+:\d+\] (?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d) "
                   r"(?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)(?:,(?P<f>\d+))? >> ")
# ISO at column 0, optional level and logger: "2025-07-10 12:52:20 INFO ", icefall "... WARNING [train.py:546] (0/7) "
_ISO = lazy_compile(r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[ T](?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)(?:[,.](?P<f>\d+))?"
                    r"(?P<z>Z|[+-]\d\d:?\d\d)?\s+(?:-\s+)?(?:" + _LEVEL + r"\b\s*(?:-\s+)?)?"
                    r"(?:\[[\w./-]+:\d+\]\s?)?(?:\((?P<rank>\d+)/\d+\)\s?)?")
# LLaMA-Factory older: "07/06/2024 02:12:04 - INFO - llamafactory.model.loader - "
_US_DATE = lazy_compile(r"(?P<mo>\d\d)/(?P<d>\d\d)/(?P<y>\d{4}) (?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d) - " + _LEVEL
                        + r" - [\w.]+ - ")
# rich console handler: "[03/17/23 20:03:12] INFO "
_RICH = lazy_compile(r"\[(?P<mo>\d\d)/(?P<d>\d\d)/(?P<yy>\d\d) (?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)\]\s+(?:"
                     + _LEVEL + r"\s+)?")
# std logging default: "ERROR:torch.distributed.elastic.multiprocessing.api:" / "WARNING:root:"
_STDLOG = lazy_compile(_LEVEL + r":(?P<logger>[A-Za-z_][\w.]*):")
# journald / syslog: "Oct 04 15:02:41 llm sd-webui-forge-start[394]: "
_SYSLOG = lazy_compile(r"(?P<mon>[A-Z][a-z]{2}) +(?P<d>\d{1,2}) (?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)(?:\.(?P<f>\d+))? "
                       r"(?P<host>[\w.-]+) [\w.@/-]+?(?:\[(?P<pid>\d+)\])?: ")

_GLOG_LEVEL = {"E": "ERROR", "W": "WARNING", "I": "INFO", "F": "FATAL"}


@dataclass(slots=True)
class Body:
    """One record-bearing piece of a line with its prefixes peeled off.

    ``key`` names the writer (``srun`` label, rank, Ray/vLLM pid) so that a multi-line record is
    read from its own writer's lines only; ``framed`` says a logging header was removed (a line
    with a header starts a new record).
    """

    text: str
    rank: int | None = None
    pid: int | None = None
    host: str | None = None
    level: str | None = None
    stamp: Stamp | None = None
    key: str = ""
    framed: bool = False


def _stamp(m: re.Match[str], year: int | None = None) -> Stamp:
    g = m.groupdict()
    y = int(g["y"]) if g.get("y") else year
    z = g.get("z")
    return Stamp(y, int(g["mo"]), int(g["d"]), int(g["H"]), int(g["M"]), int(g["S"]), _frac_ns(g.get("f")),
                 utc=z in ("Z", "+00:00", "+0000"))


def split_body(text: str, srun_labels: bool = False) -> Body:
    """Peel launcher, rank and logging prefixes off ``text`` (already cleaned)."""
    body = Body(text)
    key_parts: list[str] = []
    if srun_labels:
        m = _SRUN_LABEL.match(text)
        if m:
            label = m.group("label")
            body.rank = int(label)
            key_parts.append("n" + label)
            text = text[m.end():]
    for _ in range(3):
        if text.startswith(WRITER_TAG):  # a launcher label peeled by ingest/presentation.py, kept as the writer
            end = text.find(WRITER_TAG, 1)
            if end > 0:
                key_parts.append("w" + text[1:end])
                text = text[end + 1:]
                continue
        if "]<std" in text[:40]:
            m = _OMPI_TAG.match(text)
            if m:
                body.rank = int(m.group("rank"))
                if m.group("y"):
                    body.stamp = _stamp(m)
                key_parts.append("m" + m.group("rank"))
                text = text[m.end():]
                continue
        if text.startswith("[rank") or text.startswith("[default"):
            m = _RANK.match(text)
            if m:
                body.rank = int(m.group("rank"))
                key_parts.append("r" + m.group("rank"))
                text = text[m.end():]
                continue
        if text.startswith("("):
            m = _RAY.match(text)
            if m:
                body.pid = int(m.group("pid"))
                if m.group("rank"):
                    body.rank = int(m.group("rank"))
                key_parts.append("p" + m.group("pid"))
                rest = text[m.end():]
                text = _ORPHAN_SGR.sub("", rest)
                if text != rest:  # "(Worker pid=1)[0m ERROR ...": the reset code sat before the space
                    text = text.lstrip(" ")
                continue
        break
    text = _strip_log_header(text, body)
    body.text = text
    body.key = "/".join(key_parts)
    return body


def _strip_log_header(text: str, body: Body) -> str:
    """Remove one logging header (level and/or stamp) from the start of ``text``, filling ``body``."""
    if not text:
        return text
    c = text[0]
    m: re.Match[str] | None = None
    if c == "[":
        if text[1:2].isdigit():
            m = _BRACKET_ISO.match(text)
            if m is None:
                m = _RICH.match(text)
                if m:
                    body.stamp = Stamp(2000 + int(m.group("yy")), int(m.group("mo")), int(m.group("d")),
                                       int(m.group("H")), int(m.group("M")), int(m.group("S")))
                    body.level = m.group("level")
                    body.framed = True
                    return text[m.end():]
            if m:
                body.stamp = _stamp(m)
                body.level = m.group("level")
                if m.group("pid"):
                    body.pid = int(m.group("pid"))
                if m.group("rank"):
                    body.rank = int(m.group("rank"))
        elif text[1:2].isupper():
            m = _HF.match(text)
            if m:
                body.stamp = _stamp(m)
                body.level = m.group("level")
    elif c.isdigit():
        m = _ISO.match(text)
        if m:
            body.stamp = _stamp(m)
            body.level = m.group("level")
            if m.group("rank"):
                body.rank = int(m.group("rank"))
        else:
            m = _US_DATE.match(text)
            if m:
                body.stamp = _stamp(m)
                body.level = m.group("level")
    elif c in "EWIF" and text[1:2].isdigit():
        m = _GLOG_PY.match(text)
        if m:
            body.stamp = Stamp(None, int(m.group("mo")), int(m.group("d")), int(m.group("H")), int(m.group("M")),
                               int(m.group("S")), _frac_ns(m.group("f")))
            body.level = _GLOG_LEVEL[m.group("lv")]
    if m is None and c.isupper():
        m = _VLLM.match(text)
        if m:
            body.stamp = Stamp(None, int(m.group("mo")), int(m.group("d")), int(m.group("H")), int(m.group("M")),
                               int(m.group("S")), _frac_ns(m.group("f")))
            body.level = m.group("level")
        else:
            m = _STDLOG.match(text)
            if m:
                body.level = m.group("level")
            else:
                m = _SYSLOG.match(text)
                if m and m.group("mon") in _MONTHS:
                    body.stamp = Stamp(None, _MONTHS[m.group("mon")], int(m.group("d")), int(m.group("H")),
                                       int(m.group("M")), int(m.group("S")), _frac_ns(m.group("f")))
                    body.host = m.group("host")
                    if m.group("pid"):
                        body.pid = int(m.group("pid"))
                elif m:
                    m = None
    if m is None:
        return text
    body.framed = True
    if body.level == "WARN":
        body.level = "WARNING"
    return text[m.end():]


def parse_glog_stamp(letter_digits: str, clock: str) -> Stamp | None:
    """A glog ``[E321 02:07:08.414640780`` stamp: month not zero-padded (``321`` = Mar 21, ``1206`` = Dec 6)."""
    digits = letter_digits
    if len(digits) == 3:
        month, day = int(digits[0]), int(digits[1:])
    elif len(digits) == 4:
        month, day = int(digits[:2]), int(digits[2:])
    else:
        return None
    try:
        h, mi, rest = clock.split(":", 2)
        s, _, frac = rest.partition(".")
        return Stamp(None, month, day, int(h), int(mi), int(s), _frac_ns(frac))
    except ValueError:
        return None


def srun_labelled(lines: list[str]) -> bool:
    """Whether most lines carry an ``srun --label`` ``N: `` prefix."""
    if not lines:
        return False
    hits = sum(1 for line in lines if _SRUN_LABEL.match(line))
    return hits >= max(2, int(len(lines) * 0.6))


# -- record starts ----------------------------------------------------------------------------

#: Where a record can begin anywhere in a line (after a bar, or glued to another record).
RECORD_START = lazy_compile(
    r"Traceback \(most recent call last\):"
    r"|terminate called (?:after throwing|without an active|recursively)"
    r"|(?:\[rank\d+\]:)?\[[EWIF](?:\d{3,4} \d\d:\d\d:\d\d\.\d+)?(?: \d+)? ?[\w./-]+\.(?:cpp|cc|hpp|h):\d+\]"
    r"|\[rank\d+\]:"
    r"|Fatal Python error: "
    r"|slurmstepd(?:-[\w.-]+)?: "
    r"|srun: (?:error|Job step|launch|Force|forcing)"
    r"|(?<![\w/.])[EWIF]\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ \S+:\d+\]"
    r"|\[20\d\d-\d\d-\d\d[ T]\d\d:\d\d:\d\d"
    r"|(?:ERROR|WARNING|CRITICAL):[A-Za-z_][\w.]*:"
    r"|THCudaCheck FAIL"
    r"|\{'(?:loss|eval_loss|train_runtime|train_loss|grad_norm|learning_rate)'"
    r"|\([A-Za-z_][\w.-]* (?:rank=\d+ )?pid=\d+\)"
    r"|(?<![\w ])Killed\s*$"
)
#: Cheap literal pre-check: a line holding none of these has no record start past column 0.
START_HINTS = ("Traceback", "terminate called", ".cpp:", ".cc:", ".h:", "[rank", "Fatal Python", "slurmstepd",
               "srun:", "exitcode", "closing signal", "[20", "ERROR:", "WARNING:", "CRITICAL:", "THCudaCheck", "{'",
               "pid=", "Killed")


_HINTS = lazy_compile("|".join(re.escape(h) for h in START_HINTS))


def may_hold_record(text: str) -> bool:
    """Whether ``text`` may hold another record past its first character (cheap pre-check)."""
    return _HINTS.search(text, 1) is not None


def record_starts(text: str) -> list[int]:
    """Offsets (> 0) in ``text`` where another record begins."""
    if _HINTS.search(text, 1) is None:
        return []
    return [m.start() for m in RECORD_START.finditer(text, 1)]


_BORDER = lazy_compile(r"^[=\-*#_]{12,}$")


def is_border(text: str) -> bool:
    """A line of ``=====`` / ``-----`` (report boxes)."""
    return bool(_BORDER.match(text.strip()))


# -- following a record over its next lines ---------------------------------------------------


class Follower:
    """The lines after a record's first line, written by the same writer.

    Lines of other writers (another rank, another Ray actor) are stepped over (up to ``max_skip``
    of them) so that whole-line interleaving does not cut a record; with ``loose`` (set for C++
    continuations, which native code prints without the launcher's rank prefix) unprefixed lines
    count as the writer's own. ``taken`` lists the line
    numbers a record used, so the caller does not read them twice.
    """

    def __init__(self, doc: TextDocument, after: Line, key: str, srun: bool, max_lines: int = 2000,
                 max_skip: int = 200, loose: bool = False, framed: bool = False) -> None:
        self._it = doc.lines_from(after)
        self._key = key
        self.loose = loose
        self.framed = framed
        self._srun = srun
        self._peeked: tuple[Line, Body] | None = None
        self._budget = max_lines
        self._skip = max_skip
        self.taken: list[int] = []
        self.last: Line = after

    def peek(self) -> tuple[Line, Body] | None:
        if self._peeked is not None:
            return self._peeked
        while self._budget > 0:
            line = next(self._it, None)
            if line is None:
                return None
            self._budget -= 1
            text = clean(line.text)
            if "\r" in text or "^M" in text:
                segs = segments(text)
                text = segs[0] if segs else ""
            body = split_body(text, self._srun)
            if body.key != self._key and body.text.strip() and not (self.loose and not body.key):
                if self._skip <= 0:
                    return None
                self._skip -= 1
                continue
            self._peeked = (line, body)
            return self._peeked
        return None

    def starts_new(self, body: Body) -> bool:
        """A logging header on a line of a record whose first line had none: a new record begins."""
        return body.framed and not self.framed

    def take(self) -> tuple[Line, Body] | None:
        item = self.peek()
        if item is not None:
            self._peeked = None
            self.taken.append(item[0].no)
            self.last = item[0]
        return item
