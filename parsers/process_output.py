"""The stream parser for what a training job prints (stdout/stderr of torchrun, accelerate,
deepspeed, python, a Slurm ``.out``, a pasted traceback), in which many record types interleave.

How it reads a file of any size without turning it into millions of objects:

1. ``TextDocument.candidate_lines`` scans the whole buffer once for the trigger literals of every
   record module (:data:`TRIGGER_LITERALS`) plus ``ctx.notable`` (the signatures' anchors); only
   those lines are decoded. NCCL INFO chatter, bar redraws without news and ordinary log lines
   are never looked at one by one.
2. Each hit line is cleaned (ANSI codes, padding), split on bar redraws, stripped of launcher and
   logging prefixes (``stream_text``) and searched for record starts *anywhere* in it, so a
   traceback glued to a tqdm bar or a whole stderr pasted as one line still yields every record.
3. Each piece goes to the record modules (``c10d``, ``py_traceback``, ``torchrun``,
   ``nccl_debug``, ``slurm``, ``progress``); a multi-line record reads forward from its first
   line through a :class:`~forensics.parsers.common.stream_text.Follower` that steps over other ranks'
   interleaved lines, and the lines it used are not read again.
4. Progress lines are thinned (``progress.Thinner``): anomalies always kept, the rest an evenly
   spaced series of at most ~2k per file.

Events come out in file order. Registered instances: :data:`PARSER` (``process-output``),
:data:`SLURM_PARSER` (``slurm``: a Slurm ``.out`` / ``srun --label`` output) and
:data:`NCCL_DEBUG_PARSER` (``nccl-debug``: a file of NCCL_DEBUG lines or nccl-tests output);
they differ only in what they claim at detection. ``plaintext`` reuses :func:`scan` too.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any, NamedTuple

from forensics.parsers.common import stack_reader, template_scan
from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.stream_text import (
    START_HINTS,
    Body,
    Follower,
    Stamp,
    clean,
    place_yearless,
    record_starts,
    segments,
    split_body,
    srun_labelled,
    timestamp,
)
from forensics.parsers.common.templates import Template, Templates
from forensics.parsers.producers import (
    c10d,
    hang_stack,
    nccl_debug,
    py_traceback,
    rank_activity,
    slurm,
    torchrun,
    worker_identity,
)
from forensics.parsers.producers import training_progress as progress

from forensics.clock import YEAR_INFERRED
from forensics.events import EMPTY_ATTRS, Event, Origin, Severity, TsSource
from forensics.ingest.literals import any_of
from forensics.ingest.textdoc import Data, Line, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = [
    "ANOMALY_LITERALS",
    "BAR_LITERALS",
    "NCCL_DEBUG_PARSER",
    "PARSER",
    "PROGRESS_LITERALS",
    "SLURM_PARSER",
    "TRIGGER_LITERALS",
    "StreamParser",
    "scan",
]

#: Literals that can begin or mark a record; a line holding none of them (or of ``ctx.notable``) is never decoded.
TRIGGER_LITERALS: tuple[bytes, ...] = (
    # exceptions and C++ errors
    b"Traceback", b"Error", b"Exception", b"Interrupt", b"SystemExit", b"terminate called", b"what():",
    b"Fatal Python error", b"CUDA error", b"cuda runtime error", b"THCudaCheck", b"Assertion", b"Cuda failure",
    # c10d and other glog records
    b".cpp:", b".hpp:",
    # launchers, schedulers, shells
    b"exitcode", b"closing signal", b"via signal", b"return code =", b"died with <Signals", b"Root Cause",
    b"exits successfully", b", node_rank=",
    b"Failures:", b"slurmstepd", b"srun: ", b"Killed", b"Segmentation fault", b"Aborted", b"Bus error",
    b"core dumped",
    # NCCL
    b"NCCL WARN", b"NCCL ERROR", b"Init COMPLETE", b"NCCL version", b"set by environment to", b"# nThread",
    b"Setting affinity for GPU",
    b"Test CUDA failure", b"Test NCCL failure", b"Test failure",
    # warnings and logging levels
    b"Warning", b"WARNING", b"CRITICAL", b"FATAL", b"ERROR", b"meta device",
    # progress
    b"'loss'", b"tokens/s", b"samples/s", b"SamplesPerSec", b"samples/sec", b"_per_second", b"per iteration",
    b"/step", b"Loss", b"loss:", b"loss=", b"OVERFLOW", b"loss scale",
    # stack dumps of a live process (py-spy, faulthandler, gdb)
    *stack_reader.TRIGGERS,
)
#: Progress rates that recur in every redraw of a bar: they count only in a line's last ``\r`` segment.
BAR_LITERALS: tuple[bytes, ...] = (b"it/s", b"s/it", b"tok/s", b"toks/s")
#: Literals that mark a progress line; lines hit only by these are sampled evenly in big files.
PROGRESS_LITERALS: tuple[bytes, ...] = BAR_LITERALS + (
    b"'loss'", b"tokens/s", b"samples/s", b"SamplesPerSec", b"samples/sec", b"_per_second", b"per iteration",
    b"/step", b"Loss", b"loss:", b"loss=", b"loss scale", b"skipped=", b" loss ",
)
#: What makes a progress line an anomaly worth keeping whatever the sampling (NaN/inf, loss 0.0, overflow).
#: (``nan`` after a separator, not `` nan`` alone: Megatron prints ``number of nan iterations:   0`` on every
#: iteration line, which made each of them a line to read.)
ANOMALY_LITERALS: tuple[bytes, ...] = (b": nan", b" nan,", b" nan}", b" nan)", b" nan]", b" nan|",
                                       b" nan\n", b" nan\r", b"loss nan", b"=nan", b" NaN", b" inf", b"=inf", b"-inf",
                                       b"'loss': 0.0,", b"loss=0.0,", b"loss 0.0 ", b"loss: 0.0 ", b"OVERFLOW",
                                       # Megatron's ``number of nan iterations: {:3d}`` when it is not 0
                                       *(b"nan iterations:" + pad + str(d).encode() for pad in (b"   ", b"  ", b" ")
                                         for d in range(1, 10)),
                                       # a loss scale printed as zero (the scale-is-zero evidence)
                                       *(name + sep + b"0" for name in (b"loss scale", b"loss_scale", b"Loss Scale",
                                                                       b"grad scale", b"grad_scale", b"Grad Scale")
                                         for sep in (b": ", b"=", b"': ", b'": ')))
#: Progress series thinned apart (``_Scan._series``), and how much of a line's start names its series.
MAX_SERIES = 8
SERIES_CHARS = 24
_NO_DIGITS = str.maketrans("", "", "0123456789")
_NOTABLE_GENERIC = (b"Error", b"ERROR", b"error:", b"Traceback", b"FATAL", b"Fatal", b"Killed", b"panic")

_WARNING = lazy_compile(r"^(?:(?P<path>.+?):(?P<line>\d+): )?(?P<cat>[A-Z]\w*Warning): ?(?P<msg>.*)$")
_CUDA_ERROR = lazy_compile(r"CUDA error: |cuda runtime error \(\d+\)|THCudaCheck FAIL|CUDA driver error|"
                           r"cudaError\w+: |Cuda failure")
_ASSERT = lazy_compile(r"^(?P<file>\S+?):(?P<line>\d+): (?P<kernel>[^:]+): block: \[[\d,]+\], thread: \[[\d,]+\] "
                       r"Assertion `(?P<cond>.*)` failed\.?$")
_PROGRESS_HINTS = ("it/s", "s/it", "'loss'", "tok/s", "toks/s", "tokens/s", "samples/s", "SamplesPerSec",
                   "samples/sec", "_per_second", "per iteration", "/step", "loss", "Loss", "OVERFLOW", "step")
_ANOMALY_HINTS = ("nan", "NaN", "inf", "OVERFLOW", "overflow", "'loss': 0.0,", "loss 0.0")
_LEVEL_SEVERITY = {"ERROR": Severity.ERROR, "CRITICAL": Severity.CRITICAL, "FATAL": Severity.CRITICAL,
                   "WARNING": Severity.WARNING, "INFO": Severity.INFO, "DEBUG": Severity.DEBUG}
#: Identical warnings / notable INFO lines kept per file (the rest stay in the file, unlisted).
MAX_REPEATS = 3
_MAX_BAR_SAMPLES = 8
_LONG_BAR = 64
# Anything that makes a progress line worth a closer look: a glued record, an anomaly, escapes.
_RAW_ODD = lazy_compile("|".join(re.escape(h) for h in (*START_HINTS, *_ANOMALY_HINTS, "\x1b", "^M")).encode())
#: Megatron's counters when they are 0 (``number of nan iterations:   0 |``): not an anomaly.
_ZERO_ITERS_SOURCE = r"number of (?:nan|skipped) iterations:\s*0\b"
_ZERO_ITERS = lazy_compile(_ZERO_ITERS_SOURCE)
_ZERO_ITERS_RAW = lazy_compile(_ZERO_ITERS_SOURCE.encode())
_SIGNAL_WORDS = ("Killed", "fault", "Aborted", "Bus error", "exception", "instruction")
#: Lines each signature anchor may contribute on its own (an anchor that is chatter in this log stops there).
NOTABLE_LINES = 1000


def _notable_matcher(notable: tuple[bytes, ...]) -> Callable[[str], bool]:
    """``holds(text)``: whether ``text`` holds one of the signatures' or catalogues' anchor literals (one
    compiled matcher per anchor set, cached: the same set serves every file of an analysis)."""
    return any_of(notable)


class _Scan:
    """The state of one file's scan: events found so far and the lines already used."""

    def __init__(self, doc: TextDocument, ctx: ParseContext, generic: bool) -> None:
        self.doc = doc
        self.ctx = ctx
        self.generic = generic
        # The first 64 KiB tell whether ``srun --label`` prefixes are there (without decoding a
        # multi-megabyte first line the way ``doc.head`` would).
        head = doc.data[:65536].decode("utf-8", "replace").splitlines()[:200]
        self.srun = srun_labelled([h for h in head if h.strip()])
        self.notable = _notable_matcher(ctx.notable)
        self.events: list[tuple[int, int, Event]] = []
        self.taken: set[int] = set()
        self.thinner = progress.Thinner(size_hint=len(doc))
        self.last_progress: tuple[int, Any] | None = None
        #: progress series by shape (``_series``), each thinned on its own, and each one's last line
        self.series: dict[str, progress.Thinner] = {}
        self.series_last: dict[str, tuple[int, Any]] = {}
        self.repeats: Counter[str] = Counter()
        self.nccl_comms: set[tuple[int, str]] = set()
        self.pending_assert: dict[str, Any] | None = None
        #: id(event) -> its year-less printed stamp, placed once the file is read (place_yearless)
        self.yearless: dict[int, Stamp] = {}
        self._n = 0
        self.last_n = 0

    # -- output ---------------------------------------------------------------------------------
    def emit(self, line: Line, kind: str, message: str, severity: Severity, body: Body, *,
             attrs: dict[str, Any] | None = None, detail: str = "", last_no: int | None = None,
             stamp: Stamp | None = None, rank: int | None = None, pid: int | None = None,
             gpu: str | None = None, host: str | None = None, hold: bool = False) -> Event:
        printed = stamp or body.stamp
        ts, src = timestamp(printed, self.ctx, line.offset)
        yearless = printed is not None and printed.year is None and ts is not None and src is not TsSource.RECEIPT
        if yearless:
            attrs = attrs if attrs is not None else {}
            attrs[YEAR_INFERRED] = True  # a glog/vLLM/syslog stamp: its year is the file's date
        if rank is None:
            rank = body.rank
        if rank is None and attrs and isinstance(attrs.get("rank"), int):
            rank = attrs["rank"]
        if rank is not None and attrs is not None:
            attrs.setdefault("rank", rank)
        nlines = max(1, (last_no or line.no) - line.no + 1)
        if pid is None:
            pid = body.pid
        ev = Event(ts=ts, ts_source=src, source=self.ctx.source, kind=kind, message=message.strip()[:4000],
                   origin=Origin(self.ctx.path, line.no, line.offset, nlines), severity=severity,
                   host=self.ctx.host or host or body.host, gpu=gpu, rank=rank, pid=pid,
                   attrs=MappingProxyType(attrs) if attrs else EMPTY_ATTRS,
                   detail=detail if detail and detail.strip() != message.strip() else "")
        if yearless and printed is not None:
            self.yearless[id(ev)] = printed
        self._n += 1
        self.last_n = self._n
        if not hold:
            self.events.append((line.offset, self._n, ev))
        return ev

    def follow(self, line: Line, body: Body, loose: bool = False) -> Follower:
        return Follower(self.doc, line, body.key, self.srun, loose=loose, framed=body.framed)

    def done_with(self, follow: Follower) -> int:
        self.taken.update(follow.taken)
        return follow.last.no

    def once(self, key: str) -> bool:
        """True for the first few occurrences of ``key`` in this file."""
        self.repeats[key] += 1
        return self.repeats[key] <= MAX_REPEATS

    # -- lines ----------------------------------------------------------------------------------
    def line(self, line: Line) -> None:
        text = line.text
        if "\r" in text or "^M" in text or "\x1b[" in text:
            if text.count("\r") > _LONG_BAR or "^M" in text or "\x1b[" in text:
                segs = segments(clean(text))
                # Bar redraws: the last segment is the visible state and may carry a glued record;
                # the earlier ones are bar states, sampled for the throughput series when a line
                # holds many of them (a run that rarely prints a newline).
                step = max(1, (len(segs) - 1) // _MAX_BAR_SAMPLES)
                for seg in segs[:-1:step][:_MAX_BAR_SAMPLES]:
                    self.progress_only(line, split_body(seg, self.srun))
                text = segs[-1]
            else:
                text = text[text.rfind("\r") + 1:] or text.rstrip("\r")
        text = clean(text)
        if text:
            self.segment(line, text)

    def skippable_progress(self, data: Data, start: int, no: int = 0) -> bool:
        """The bulk of a long log, judged from raw bytes: a loss dict or a bar whose turn has not come
        in the thinned series, with nothing glued to it and nothing odd in it. Counted, not decoded."""
        thinner = self.thinner
        seq = thinner.seen
        if seq < thinner.head or seq % thinner.stride == 0:
            return False
        nl = data.find(b"\n", start)
        end = len(data) if nl < 0 else nl
        seg = data.rfind(b"\r", start, end - 1) + 1 or start
        iteration = data.find(b" iteration ", seg, end) >= 0 and data.find(b"per iteration", seg, end) >= 0
        if not (iteration or data[seg:seg + 2] == b"{'" or data.find(b"it/s]", seg, end) >= 0
                or data.find(b"s/it]", seg, end) >= 0):
            return False
        if iteration:  # a Megatron line names its nan/skipped counters: only a non-zero one is odd
            if _RAW_ODD.search(_ZERO_ITERS_RAW.sub(b"", data[seg + 1:end])):
                return False
        elif _RAW_ODD.search(data, seg + 1, end):
            return False
        thinner.seen = seq + 1
        self.last_progress = (seq, _Skipped(start, seg, no))
        return True

    def segment(self, line: Line, text: str) -> None:
        head = split_body(text, self.srun)
        starts = record_starts(head.text)
        if not starts:
            self.record(line, head, multiline=True)
            return
        bounds = [0, *starts, len(head.text)]
        for i in range(len(bounds) - 1):
            piece = head.text[bounds[i]:bounds[i + 1]]
            if i == 0:
                body = Body(piece, head.rank, head.pid, head.host, head.level, head.stamp, head.key, head.framed)
            else:
                body = split_body(piece)
                if not body.key:
                    body.key = head.key
                    body.framed = body.framed or head.framed
                    if body.rank is None:
                        body.rank = head.rank
                    if body.pid is None:
                        body.pid = head.pid
            self.record(line, body, multiline=i == len(bounds) - 2)

    def _series(self, t: str) -> str:
        """Which thinned series a progress line belongs to: its start's shape, digits dropped (a pipeline's
        monitor line and 2,048 ranks' step lines are thinned apart, so the monitor keeps its points); the
        first shapes only (:data:`MAX_SERIES`), the rest share the file's first series."""
        key = t[:SERIES_CHARS].translate(_NO_DIGITS)
        if key in self.series:
            return key
        if not self.series:
            self.series[key] = self.thinner
        elif len(self.series) < MAX_SERIES:
            self.series[key] = progress.Thinner()
        else:
            return next(iter(self.series))
        return key

    def progress_only(self, line: Line, body: Body) -> bool:
        t = body.text.strip()
        if not any(h in t for h in _PROGRESS_HINTS):
            return False
        key = self._series(t)
        thinner = self.series[key]
        seq = thinner.next_seq()
        wanted = thinner.wanted(seq)
        probe = _ZERO_ITERS.sub("", t) if "iterations:" in t else t
        if not wanted and not any(h in probe for h in _ANOMALY_HINTS):
            self.last_progress = self.series_last[key] = (seq, (line, body))
            return True
        attrs = progress.parse_progress(t)
        if attrs is None:
            thinner.seen -= 1
            return False
        self._progress_event(line, body, t, attrs, seq, key)
        return True

    def _progress_event(self, line: Line, body: Body, t: str, attrs: dict[str, Any], seq: int, key: str = "") -> None:
        anomalous = progress.is_anomalous(attrs)
        rank = attrs.pop("rank", None)
        ev = self.emit(line, "progress", t, Severity.WARNING if anomalous else Severity.INFO, body, attrs=attrs,
                       rank=rank, hold=not anomalous)
        if anomalous:
            self.last_progress = None
            self.series_last.pop(key, None)
        else:
            self.series.get(key, self.thinner).hold(seq, (line.offset, self.last_n, ev))
            self.last_progress = self.series_last[key] = (seq, (line.offset, self.last_n, ev))

    # -- records --------------------------------------------------------------------------------
    def record(self, line: Line, body: Body, multiline: bool) -> None:
        t = body.text.strip()
        if not t:
            return
        c = t[0]
        if ((c == "{" and t.startswith("{'")) or "it/s]" in t or "s/it]" in t) and self.progress_only(line, body):
            return  # the common case in a long log: a loss dict or a bar, nothing glued to it
        if c == "[":
            glog = c10d.parse_glog_record(t)
            if glog is not None:
                self.glog(line, body, glog, multiline)
                return
        if c in "TC(" and multiline and self.stack_dump(line, body, t):
            return
        if c == "T" and t.startswith("Traceback (most recent call last)"):
            self.python_traceback(line, body, multiline)
            return
        if c in "╭+" and py_traceback.is_rich_top(t):
            self.python_traceback(line, body, multiline)
            return
        if c == "t" and t.startswith("terminate called"):
            follow = self.follow(line, body, loose=True) if multiline else None
            rec = py_traceback.read_cpp_terminate(t, follow)
            self.exc_event(line, body, rec, follow)
            return
        if c == "F" and t.startswith("Fatal Python error"):
            follow = self.follow(line, body)
            rec = py_traceback.read_faulthandler(t, follow)
            self.exc_event(line, body, rec, follow)
            return
        if c == "s" and t.startswith(("slurmstepd", "srun: ")):
            parsed = slurm.parse_slurm(t)
            if parsed is not None:
                attrs, stamp, error = parsed
                self.emit(line, "slurm", t, Severity.ERROR if error else Severity.INFO, body, attrs=attrs, stamp=stamp)
                return
        if ("exitcode" in t or "signal" in t or "return code" in t or "died with" in t or "exits successfully" in t
                or "node_rank=" in t) and self.agent(line, body, t):
            return
        if c in "RF" and t.startswith(("Root Cause", "Failures:")) and multiline:
            self.report(line, body, t)
            return
        if ":" in t and "NCCL" in t and self.nccl(line, body, t, multiline):
            return
        if c == "#" and self.nccl_tests(line, body, t):
            return
        if "Warning" in t and self.warning(line, body, t, multiline):
            return
        if c in "Ef" and t.startswith(("Exception raised from ", "frame #")):
            self.cpp_excerpt(line, body, t, multiline)
            return
        typ = py_traceback.exception_type(t)
        if typ is not None and typ.rsplit(".", 1)[-1].endswith(("Error", "Exception", "Exit", "Interrupt")):
            self.orphan_exception(line, body, t, multiline)
            return
        if "Assertion `" in t:
            m = _ASSERT.match(t)
            if m:
                self.kernel_assert(line, body, t, m)
                return
        if ("CUDA" in t or "uda" in t or "THC" in t) and _CUDA_ERROR.search(t):
            self.cuda_error(line, body, t, multiline)
            return
        sig = slurm.parse_shell_signal(t) if any(w in t for w in _SIGNAL_WORDS) else None
        if sig is not None:
            self.emit(line, "log", t, Severity.ERROR, body, attrs=sig)
            return
        if self.progress_only(line, body):
            return
        if "meta device" in t and "offloaded" in t:
            self.emit(line, "warning", t, Severity.WARNING, body, attrs={"category": "offload"})
            return
        level = body.level
        if level in ("ERROR", "CRITICAL", "FATAL"):
            self.emit(line, "log", t, _LEVEL_SEVERITY[level], body, attrs={"level": level})
            return
        if level == "WARNING":
            if self.once(t[:200]):
                self.emit(line, "warning", t, Severity.WARNING, body, attrs={"level": level})
            return
        if self.notable(t):
            self.emit(line, "log", t, Severity.INFO, body)
            return
        if self.generic and any(w in t for w in ("Error", "ERROR", "error:", "FATAL", "Fatal", "Killed", "panic")):
            self.emit(line, "log", t, Severity.ERROR, body)

    def glog(self, line: Line, body: Body, rec: c10d.GlogRecord, multiline: bool) -> None:
        text = rec.message
        follow = self.follow(line, body, loose=True) if multiline else None
        lines = [body.text.strip()]
        if follow is not None:
            # Terminal hard-wraps cut records mid-token (``OpTy`` / ``pe=BROADCAST``): rejoin them.
            for _ in range(3):
                if not c10d.is_incomplete(text):
                    break
                item = follow.peek()
                if item is None:
                    break
                nxt = item[1].text.strip()
                if not nxt or record_starts(" " + nxt) == [1]:
                    break
                follow.take()
                text += nxt
                lines[-1] += nxt
            if rec.c10d and text != rec.message:
                rec.attrs = c10d.work_attrs(text)
            lines.extend(py_traceback.read_cpp_tail(follow))
        last_no = self.done_with(follow) if follow is not None else None
        severity = _LEVEL_SEVERITY.get(rec.level, Severity.INFO)
        if rec.c10d:
            attrs = dict(rec.attrs)
            attrs["level"] = rec.level
            rank = body.rank if body.rank is not None else attrs.get("rank")
            self.emit(line, "c10d", text, severity, body, attrs=attrs, detail="\n".join(lines), last_no=last_no,
                      stamp=rec.stamp, rank=rank)
            return
        attrs = {"level": rec.level, "file": rec.file}
        if rec.level in ("ERROR", "FATAL"):
            self.emit(line, "log", text, severity, body, attrs=attrs, detail="\n".join(lines), last_no=last_no,
                      stamp=rec.stamp)
        elif rec.level == "WARNING":
            if self.once(text[:200]):
                self.emit(line, "warning", text, severity, body, attrs=attrs, stamp=rec.stamp)
        elif self.notable(text):
            self.emit(line, "log", text, severity, body, attrs=attrs, stamp=rec.stamp)

    def stack_dump(self, line: Line, body: Body, t: str) -> bool:
        """A stack dump of a live process (py-spy, faulthandler, gdb): one ``stack`` event per process."""
        reader = stack_reader.reader_for(t)
        if reader is None:
            return False
        follow = self.follow(line, body, loose=True)
        dump = reader(t, stack_reader.FollowerLines(follow), self._lines_before(line, body, 6))
        last_no = self.done_with(follow)
        if not any(th.frames for th in dump.threads):
            return True  # a header with nothing under it
        if dump.rank is None and body.rank is not None:
            dump.rank, dump.rank_source = body.rank, "prefix"
        message, attrs = hang_stack.event_fields(dump)
        self.emit(line, "stack", message, Severity.WARNING, body, attrs=attrs, detail="\n".join(dump.lines),
                  last_no=last_no, pid=dump.pid, rank=dump.rank)
        return True

    def _lines_before(self, line: Line, body: Body, n: int) -> list[str]:
        """The texts of up to ``n`` lines of the same writer above ``line``, oldest first."""
        data = self.doc.data
        end = line.offset - 1
        out: list[str] = []
        while end > 0 and len(out) < n:
            start = data.rfind(b"\n", 0, end) + 1
            b = split_body(clean(data[start:end].decode("utf-8", "replace")), self.srun)
            if b.key == body.key or not b.key:
                out.append(b.text)
            end = start - 1
        out.reverse()
        return out

    def python_traceback(self, line: Line, body: Body, multiline: bool) -> None:
        if not multiline:
            # A traceback flattened onto one line: the exception is whatever follows the last frame.
            rec = py_traceback.ExcRecord(message=body.text.strip(), lines=[body.text.strip()])
            m = re.search(r"(?:^|\s)((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): (.*)$", body.text)
            if m:
                rec.exc_type, rec.message = m.group(1), f"{m.group(1)}: {m.group(2)}"
                rec.exceptions.append(rec.message)
            self.exc_event(line, body, rec, None)
            return
        follow = self.follow(line, body)
        rec = py_traceback.read_python(body.text.strip(), follow)
        self.exc_event(line, body, rec, follow)

    def orphan_exception(self, line: Line, body: Body, t: str, multiline: bool) -> None:
        """An exception line without its ``Traceback`` header (an excerpt): frames are read backwards."""
        rec = py_traceback.ExcRecord(message=t, lines=[], exc_type=py_traceback.exception_type(t))
        before = self._frames_before(line, body)
        for s in before:
            rec.lines.append(s)
            frame = py_traceback.frame_of(s)
            if frame:
                rec.frames.append(frame)
        rec.exceptions.append(t)
        follow = self.follow(line, body) if multiline else None
        if follow is not None:
            py_traceback.read_exception_tail(t, follow, rec)
        else:
            rec.lines.append(t)
        self.exc_event(line, body, rec, follow, first_no=line.no - len(before))

    def _frames_before(self, line: Line, body: Body, limit: int = 80) -> list[str]:
        """Frame and source lines directly above ``line`` (same writer), oldest first."""
        data = self.doc.data
        end = line.offset - 1
        out: list[str] = []
        while end > 0 and len(out) < limit:
            start = data.rfind(b"\n", 0, end) + 1
            raw = data[start:end].decode("utf-8", "replace")
            b = split_body(clean(raw), self.srun)
            s = b.text.strip()
            if b.key != body.key or not s or b.framed != body.framed:
                break
            if py_traceback.frame_of(s) is None and not _source_like(s):
                break
            out.append(s)
            end = start - 1
        out.reverse()
        return out

    def exc_event(self, line: Line, body: Body, rec: py_traceback.ExcRecord, follow: Follower | None,
                  first_no: int | None = None) -> None:
        last_no = self.done_with(follow) if follow is not None else None
        text = rec.detail
        attrs: dict[str, Any] = dict(rec.attrs)
        if rec.exc_type:
            attrs["exc_type"] = rec.exc_type
        if rec.frames:
            attrs["frames"] = rec.frames[-200:]
            phase = py_traceback.phase_of(rec.frames) if not rec.cpp else None
            if phase:
                attrs["phase"] = phase
        if len(rec.exceptions) > 1:
            attrs["exceptions"] = rec.exceptions
        oom = py_traceback.oom_attrs(text)
        gpu = None
        if oom:
            attrs.update(oom)
            if "gpu" in oom:
                gpu = str(oom["gpu"])
        for m in re.finditer(r"Signal (\d+) \((SIG\w+)\)|died with <Signals\.(SIG\w+)", text):
            attrs.setdefault("signal", m.group(2) or m.group(3))
        kind = "traceback"
        if rec.cpp and _CUDA_ERROR.search(rec.message):
            kind = "cuda-error"
        severity = Severity.CRITICAL if rec.exc_type == "Fatal Python error" else Severity.ERROR
        origin_line = line
        if first_no is not None and first_no != line.no:
            origin_line = self._line_no_to_line(line, first_no)
        self.emit(origin_line, kind, rec.message, severity, body, attrs=attrs, detail=text,
                  last_no=last_no or line.no, gpu=gpu)

    def _line_no_to_line(self, line: Line, first_no: int) -> Line:
        data = self.doc.data
        pos = line.offset
        for _ in range(line.no - first_no):
            pos = data.rfind(b"\n", 0, max(pos - 1, 0)) + 1
        return Line(first_no, pos, "")

    def cuda_error(self, line: Line, body: Body, t: str, multiline: bool) -> None:
        rec = py_traceback.ExcRecord(message=t, lines=[t], cpp=True)
        follow = self.follow(line, body, loose=True) if multiline else None
        if follow is not None:
            rec.lines.extend(py_traceback.read_cpp_tail(follow))
        last_no = self.done_with(follow) if follow is not None else None
        attrs: dict[str, Any] = {}
        m = re.search(r"error=(\d+)|cuda runtime error \((\d+)\)|Cuda failure (\d+)", t)
        if m:
            attrs["cuda_code"] = int(next(g for g in m.groups() if g))
        attrs.update(py_traceback.oom_attrs(t))
        self.emit(line, "cuda-error", t, Severity.ERROR, body, attrs=attrs, detail=rec.detail, last_no=last_no)

    def cpp_excerpt(self, line: Line, body: Body, t: str, multiline: bool) -> None:
        """A C++ stack (``Exception raised from …`` / ``frame #N:``) whose first line was not pasted."""
        follow = self.follow(line, body, loose=True) if multiline else None
        earlier: list[str] = []
        if t.startswith("frame #"):  # frames above this one that held no trigger word
            for prev in reversed(self._lines_before(line, body, 64)):
                if not prev.strip().startswith(("frame #", "Exception raised from ")):
                    break
                earlier.insert(0, prev.strip())
        lines = [*earlier, t, *(py_traceback.read_cpp_tail(follow) if follow is not None else [])]
        last_no = self.done_with(follow) if follow is not None else None
        kind, message, attrs = py_traceback.cpp_excerpt(lines)
        # The inferred head leads the record's text, so signatures read it as they would the real one.
        self.emit(line, kind, message, Severity.ERROR, body, attrs=attrs, detail="\n".join([message, *lines]),
                  last_no=last_no)

    def kernel_assert(self, line: Line, body: Body, t: str, m: re.Match[str]) -> None:
        """Device-side assertion lines: one per failing GPU thread; consecutive ones become one event."""
        key = f"{m.group('file')}:{m.group('line')}:{m.group('cond')}"
        p = self.pending_assert
        if p is not None and p["key"] == key and line.no == p["last"].no + 1:
            p["count"] += 1
            p["last"] = line
            return
        self.flush_assert()
        self.pending_assert = {"key": key, "line": line, "last": line, "body": body, "text": t, "count": 1,
                               "attrs": {"kernel": m.group("kernel").strip(), "assertion": m.group("cond"),
                                         "file": m.group("file")}}

    def flush_assert(self) -> None:
        p = self.pending_assert
        if p is None:
            return
        self.pending_assert = None
        attrs = dict(p["attrs"], count=p["count"])
        self.emit(p["line"], "cuda-error", p["text"], Severity.ERROR, p["body"], attrs=attrs, last_no=p["last"].no)

    def warning(self, line: Line, body: Body, t: str, multiline: bool) -> bool:
        m = _WARNING.match(t)
        if not m:
            return False
        msg = m.group("msg").strip()
        lines = [t]
        last_no = None
        if multiline:
            follow = self.follow(line, body)
            for _ in range(6):
                item = follow.peek()
                if item is None:
                    break
                s = item[1].text.strip()
                if s.startswith("warnings.warn(") or s.startswith("warnings.warn_explicit("):
                    follow.take()
                    lines.append(s)
                    break
                if msg or not s or follow.starts_new(item[1]) or record_starts(" " + s) == [1]:
                    break
                follow.take()
                lines.append(s)
            last_no = self.done_with(follow)
        message = t if msg else " ".join(lines[:2])
        if not self.once(message[:200]):
            return True
        attrs = {"category": m.group("cat")}
        if m.group("path"):
            attrs["file"] = m.group("path")
        self.emit(line, "warning", message, Severity.WARNING, body, attrs=attrs, detail="\n".join(lines),
                  last_no=last_no)
        return True

    def agent(self, line: Line, body: Body, t: str) -> bool:
        parsed = torchrun.agent_line(t)
        if parsed is None:
            entry = torchrun.report_entry(t) if "(pid:" in t else None
            if entry is None:
                return False
            attrs, stamp = entry
            self.emit(line, "torchrun", t, Severity.ERROR, body, attrs=attrs, stamp=stamp, pid=attrs.get("pid"),
                      host=attrs.get("host"))
            return True
        message, attrs = parsed
        severity = Severity.WARNING if attrs.get("sent") else Severity.ERROR
        if attrs.get("exitcode") == 0 or attrs.get("launch"):
            severity = Severity.INFO
        self.emit(line, "torchrun", message, severity, body, attrs=attrs, pid=attrs.get("pid"))
        return True

    def report(self, line: Line, body: Body, t: str) -> None:
        follow = self.follow(line, body)
        entries = torchrun.read_report(follow, root_cause=t.startswith("Root Cause"))
        last_no = self.done_with(follow)
        for lines, root in entries:
            parsed = torchrun.report_entry(" ".join(lines))
            if parsed is None:
                continue
            attrs, stamp = parsed
            attrs["root_cause"] = root
            message = f"worker failed: exitcode {attrs['exitcode']}"
            if "signal" in attrs:
                message += f" ({attrs['signal']})"
            if "rank" in attrs:
                message += f", rank {attrs['rank']}"
            message += f", pid {attrs['pid']}"
            self.emit(line, "torchrun", message, Severity.ERROR, body, attrs=attrs, detail="\n".join(lines),
                      last_no=last_no, stamp=stamp, pid=attrs["pid"], host=attrs.get("host"))

    def nccl(self, line: Line, body: Body, t: str, multiline: bool) -> bool:
        rec = nccl_debug.parse_nccl_line(t)
        if rec is None:
            return False
        attrs = rec.attrs
        if rec.level in ("WARN", "ERROR", "ABORT"):
            lines = [t]
            last_no = None
            if multiline:
                follow = self.follow(line, body)
                code = None
                while len(lines) < 64:
                    item = follow.peek()
                    if item is None:
                        break
                    nxt = nccl_debug.parse_nccl_line(item[1].text.strip())
                    if nxt is None or nxt.pid != rec.pid:
                        break
                    c = nccl_debug.chain_code(nxt)
                    if c is None:
                        break
                    follow.take()
                    lines.append(item[1].text.strip())
                    code = c
                last_no = self.done_with(follow)
                if code is not None:
                    attrs["code"] = code
                    attrs["result"] = nccl_debug.NCCL_RESULTS.get(code, str(code))
            self.emit(line, "nccl", rec.message, Severity.WARNING, body, attrs=attrs, detail="\n".join(lines),
                      last_no=last_no, pid=rec.pid, host=rec.host)
            return True
        if not rec.notable and (self.repeats[rec.message[:200]] >= MAX_REPEATS
                                or not self.notable(t)):
            return True  # chatter (or a notable line seen often enough): consumed, no event
        if "comm" in attrs:
            key = (rec.pid, str(attrs["comm"]))
            if key in self.nccl_comms:
                return True
            self.nccl_comms.add(key)
        elif not self.once(rec.message[:200]):
            return True
        self.emit(line, "nccl", rec.message, Severity.INFO, body, attrs=attrs, pid=rec.pid, host=rec.host,
                  rank=attrs.get("rank"), gpu=attrs.get("pci"))
        return True

    def nccl_tests(self, line: Line, body: Body, t: str) -> bool:
        parsed = nccl_debug.parse_nccl_tests(t)
        if parsed is None:
            return False
        message, attrs, error = parsed
        if "nthread" in attrs:  # the header: did the run print results after it?
            attrs.update(nccl_debug.nccl_tests_outcome(self.doc.data, line.offset + len(line.text.encode()),
                                                       attrs["nthread"] * attrs["ngpus"]))
        self.emit(line, "nccl", message, Severity.ERROR if error else Severity.INFO, body, attrs=attrs)
        return True

    # -- templates ------------------------------------------------------------------------------
    def mark(self) -> tuple[Any, ...]:
        """The state a template's parse is judged against (see :meth:`note_template`)."""
        return (self._n, len(self.taken), len(self.events), self.thinner.seen, self.last_progress,
                self.pending_assert)

    def note_template(self, tpl: Template, mark: tuple[Any, ...], start: int, no: int) -> None:
        """After a template's occurrence was parsed in full: is it still one that can be counted?"""
        n0, taken0, events0, seen0, progress0, pending0 = mark
        emitted = self._n - n0
        if (emitted > 1 or len(self.events) - events0 != emitted or len(self.taken) != taken0
                or self.thinner.seen != seen0 or self.last_progress is not progress0
                or self.pending_assert is not pending0):
            tpl.simple = False
            return
        tpl.last_parsed = start
        if not tpl.first_no:
            tpl.first_no = no
        if emitted:
            ev = self.events[-1][2]
            if ev.origin.nlines != 1 or ev.kind == "progress":
                tpl.simple = False
                return
            if tpl.first_event < 0:
                tpl.first_event = len(self.events) - 1
            tpl.last_event = len(self.events) - 1
            if ev.rank is not None:
                tpl.ranks.add(ev.rank)

    def close_templates(self, templates: Templates, literals: tuple[bytes, ...]) -> None:
        """Parse each template's skipped last occurrence, then put the counts on its first event."""
        for tpl, start, no in templates.pending_tail(self.doc.line_numberer()):
            if not tpl.simple:
                continue
            mark = self.mark()
            for line in self.doc.lines_at(start, no, literals):
                if line.no not in self.taken:
                    self.line(line)
            self.note_template(tpl, mark, start, no)
        for tpl in templates.by_key.values():
            if not tpl.skipped or tpl.first_event < 0:
                continue
            off, n, ev = self.events[tpl.first_event]
            last = self.events[tpl.last_event][2]
            attrs = dict(ev.attrs)
            evidence: dict[str, Any] = {"count": tpl.n, "first": ev.ts, "last": last.ts,
                                        "first_line": tpl.first_no, "last_line": max(tpl.last_no, last.origin.line),
                                        "ranks": sorted(tpl.ranks)}
            for k, v in evidence.items():
                if v is not None and v != []:
                    attrs["repeat_" + k if k in ev.attrs else k] = v
            new = replace(ev, attrs=MappingProxyType(attrs))
            if id(ev) in self.yearless:
                self.yearless[id(new)] = self.yearless.pop(id(ev))
            self.events[tpl.first_event] = (off, n, new)

    # -- end ------------------------------------------------------------------------------------
    def _unparsed(self, held: Any) -> tuple[Line, Body] | None:
        """The last progress line as (line, body) when it was held without being parsed (one judged
        from raw bytes is decoded now); None when it was parsed (an event is held instead)."""
        if isinstance(held, _Skipped):
            nl = self.doc.data.find(b"\n", held.seg)
            end = len(self.doc.data) if nl < 0 else nl
            text = self.doc.data[held.seg:end].decode("utf-8", "replace")
            line = Line(held.no or self.doc.line_numberer()(held.start), held.start, text)
            return line, split_body(clean(text), self.srun)
        return held if len(held) == 2 else None

    def line_time(self, offset: int) -> tuple[int | None, TsSource]:
        """The time of the line at ``offset``: its own stamp (a year-less one in the file's year), else
        the recorder's receipt time."""
        data = self.doc.data
        end = data.find(b"\n", offset, offset + 600)
        text = clean(data[offset:end if end >= 0 else offset + 600].decode("utf-8", "replace"))
        return timestamp(split_body(text, self.srun).stamp, self.ctx, offset)

    def _close_series(self, thinner: progress.Thinner, last: tuple[int, Any] | None) -> None:
        """A series' kept events, with its last line (parsed now when it was only held)."""
        held = self._unparsed(last[1]) if last is not None else None
        if held is not None:
            line, body = held
            t = body.text.strip()
            attrs = progress.parse_progress(t)
            last = None
            if attrs is not None:
                ev = self.emit(line, "progress", t, Severity.INFO, body, attrs=attrs, hold=True)
                last = (thinner.seen, (line.offset, self.last_n, ev))
        self.events.extend(thinner.kept(last))

    def finish(self) -> list[Event]:
        self.flush_assert()
        if not self.series or self.thinner not in self.series.values():  # lines the raw-bytes path thinned
            self._close_series(self.thinner, self.last_progress)
        for key, thinner in self.series.items():
            last = self.last_progress if thinner is self.thinner and self.last_progress is not None \
                and isinstance(self.last_progress[1], _Skipped) else self.series_last.get(key)
            self._close_series(thinner, last)
        ids = worker_identity.identify(self.doc.data, self.srun) if len(self.doc.data) <= rank_activity.MAX_BYTES \
            else None
        if ids is not None and ids.at:  # a rank named inside the message or by a role ("drafter 6:")
            self.events = [(off, n, _with_worker(ev, ids)) for off, n, ev in self.events]
        ranks = rank_activity.rank_activity(self.doc, self.ctx, self.line_time, ids)
        self.events.extend((e.origin.offset, 0, e) for e in ranks)
        self.events.sort(key=lambda item: (item[0], item[1]))
        out = [ev for _, _, ev in self.events]
        at = [i for i, ev in enumerate(out) if id(ev) in self.yearless]
        if at:
            placed = place_yearless([(out[i], self.yearless[id(out[i])]) for i in at], self.ctx)
            for i, ev in zip(at, placed, strict=True):
                out[i] = ev
        return out


def _with_worker(ev: Event, ids: worker_identity.Identities) -> Event:
    """``ev`` with the rank (or launcher host / pid) its line names, when it carries none (not a launcher's
    own line about a worker: its producer read what it says)."""
    if ev.rank is not None or (ev.kind == "torchrun" and ("local_rank" in ev.attrs or "rank" in ev.attrs)):
        return ev
    w = ids.at.get(ev.origin.offset)
    if w is None or (w.rank is None and w.host is None and w.pid is None):
        return ev
    attrs = ev.attrs
    if w.rank is not None and "rank" not in attrs:
        attrs = MappingProxyType({**attrs, "rank": w.rank})
    return replace(ev, rank=w.rank, host=ev.host or w.host, pid=ev.pid if ev.pid is not None else w.pid,
                   attrs=attrs)


class _Skipped(NamedTuple):
    """A progress line judged from raw bytes and not decoded: where it starts, its last bar segment,
    its line number (0 when not counted)."""

    start: int
    seg: int
    no: int


def _source_like(s: str) -> bool:
    """A line that can sit between frames of a pasted traceback: source code or caret markers."""
    if s.startswith(("[", "{", "#")) or s.endswith(":") and " " not in s:
        return False
    return "(" in s or "=" in s or set(s) <= set("^~ ")


def scan(doc: TextDocument, ctx: ParseContext, generic: bool = False) -> Iterator[Record]:
    """Every record in ``doc`` (see the module docstring), in file order."""
    state = _Scan(doc, ctx, generic)
    literals = TRIGGER_LITERALS + (_NOTABLE_GENERIC if generic else ())
    every = state.thinner.stride
    state.thinner.stride = 1  # the scan already keeps one progress line in ``every``
    data = doc.data
    templates = Templates(len(data))
    starts: Iterable[tuple[int, int]]
    if len(data) >= template_scan.MIN_BYTES:
        plan = template_scan.plan_for(literals + ANOMALY_LITERALS, limited=tuple(ctx.notable), tail=BAR_LITERALS,
                                      sampled=PROGRESS_LITERALS)
        starts = template_scan.visits(doc, templates, plan, limit=NOTABLE_LINES, every=every)
    else:
        starts = ((start, 0) for start in doc.candidate_starts(
            literals + ANOMALY_LITERALS, limited=ctx.notable, limit=NOTABLE_LINES, tail=BAR_LITERALS,
            sampled=PROGRESS_LITERALS, every=every))
    all_literals = literals + tuple(ctx.notable) + BAR_LITERALS
    number = doc.line_numberer()  # for lines whose number the scan did not give
    skip = state.skippable_progress
    size = len(data)
    for start, known_no in starts:
        if skip(data, start, known_no):
            continue
        nl = data.find(b"\n", start)
        end = size if nl < 0 else nl
        tpl = templates.lookup(data, start, end)
        if tpl is not None and templates.should_skip(tpl, data, start, end, known_no):
            continue
        no = known_no or number(start)
        mark = state.mark() if tpl is not None else ()
        for line in doc.lines_at(start, no, all_literals):
            if line.no not in state.taken:
                state.line(line)
        if tpl is not None:
            state.note_template(tpl, mark, start, no)
    state.close_templates(templates, all_literals)
    yield from state.finish()


# -- detection -----------------------------------------------------------------------------------

_STRONG = lazy_compile(
    r"Traceback \(most recent call last\)|^\s*File \"[^\"]+\", line \d+|\[(?:rank|default)\d+\]:|ProcessGroupNCCL|"
    r"terminate called|what\(\):|^frame #\d+:|Fatal Python error|^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception): |"
    r"ChildFailedError|exitcode|torch\.distributed|\{'(?:loss|eval_loss|train_runtime)'|"
    r"(?<![\d/])\d+/\d+ \[[\d:]+<[\d:?]*,|OVERFLOW!|Warning: |CUDA error|THCudaCheck|Assertion `|"
    r"\(\w+ (?:rank=\d+ )?pid=\d+\)|Exception raised from|^\s*\^+\s*$|CUDA out of memory|"
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] \[(?:INFO|WARNING|ERROR)\]|"
    r"it/s\]|s/it\]|tokens/s|tok/s|samples/s|Loss: |loss: |[Ss]teps?: \d+"
)
_NCCL_SHAPE = lazy_compile(r"^(?:\[[\d: -]+\] )?[\w.-]+:\d+:\d+ \[\d+\] .*NCCL (?:INFO|WARN)"
                           r"|^# (?:nThread|Using devices| ?Rank|Out of bounds|Avg bus)|^#\s*$")
_SLURM_SHAPE = lazy_compile(r"^slurmstepd(?:-[\w.-]+)?: |^srun: ")


def _bodies(head: list[str]) -> list[str]:
    labelled = srun_labelled(head)
    return [split_body(clean(h), labelled).text for h in head]


def detect_process_output(head: list[str]) -> float:
    # the line as well as its body: a logging header the body reader peels (DeepSpeed's
    # ``[2022-12-02 21:47:16,624] [INFO]``) is evidence too
    strong = sum(1 for h, b in zip(head, _bodies(head), strict=True) if _STRONG.search(b) or _STRONG.search(clean(h)))
    if strong == 0:
        return 0.0
    return min(0.6, 0.35 + 0.05 * strong)


def detect_nccl_debug(head: list[str]) -> float:
    bodies = [b for b in _bodies(head) if b.strip()]
    if not bodies:
        return 0.0
    hits = sum(1 for b in bodies if _NCCL_SHAPE.search(b))
    return 0.7 if hits >= max(1, len(bodies) * 0.5) else 0.0


def detect_slurm(head: list[str]) -> float:
    if any(_SLURM_SHAPE.search(clean(h)) for h in head):
        return 0.7
    if srun_labelled(head):
        return 0.65
    return 0.0


class StreamParser:
    """A registered name for :func:`scan` with its own detection rule and samples."""

    def __init__(self, name: str, detector: Callable[[list[str]], float], samples: tuple[str, ...],
                 tested_with: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.name = name
        self.samples = samples
        self.tested_with = dict(tested_with or {})
        self._detector = detector

    def detect(self, head: list[str]) -> float:
        return self._detector(head)

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        return scan(doc, ctx)


PARSER = StreamParser("process-output", detect_process_output, (
    # pytorch#117159-style rank-prefixed traceback (shape from the destroy-pg corpus case)
    "[rank7]: Traceback (most recent call last):\n"
    '[rank7]:   File "/u/user/elastic_ddp.py", line 38, in demo_basic\n'
    "[rank7]:     dist.destroy_process_group()\n"
    "[rank7]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
    "NCCLUtils.cpp:133, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
    "[rank7]: ncclUnhandledCudaError: Call to CUDA function failed.\n",
    # Lightning bar with a c10d record glued to it (pytorch#118369)
    "Epoch 0:   6%|██      | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6, v_num=95nc]"
    "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, "
    "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.\n",
    # HF Trainer loss dicts (LlamaFactory#9631)
    "{'loss': 0.8728, 'grad_norm': nan, 'learning_rate': 0.0, 'epoch': 0.01}\n"
    "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 2.6315789473684213e-07, 'epoch': 0.02}\n",
), tested_with={  # NCCL: the `NCCL version` in the lines; PyTorch, DeepSpeed: the case notes, the recorded samples
    "PyTorch": ("0.3", "1.0", "1.8", "2.0", "2.1", "2.11.0+cu130"),
    "NCCL": ("2.14.3", "2.20.5", "2.21.5"),
    "DeepSpeed": ("0.8.3",),
})
SLURM_PARSER = StreamParser("slurm", detect_slurm, (
    # K-Net#30
    "slurmstepd-gpu20-15: error: Detected 1 oom-kill event(s) in StepId=9411285.0. Some of your processes may "
    "have been killed by the cgroup out-of-memory handler.\n"
    "srun: error: gpu20-15: task 0: Out Of Memory\n"
    "slurmstepd-gpu20-15: error: *** STEP 9411285.0 ON gpu20-15 CANCELLED AT 2022-05-17T17:58:10 ***\n",
), tested_with={"NCCL": ("2.4.8",), "PyTorch": ("2.2",)})  # parlai3084's lines; segfault-faulthandler's note
NCCL_DEBUG_PARSER = StreamParser("nccl-debug", detect_nccl_debug, (
    # NVIDIA/nccl#1235-style WARN with its return-code chain
    "ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'\n"
    "ng30903:3063028:3066152 [3] NCCL INFO transport/p2p.cc:204 -> 1\n"
    "ng30903:3063028:3066152 [3] NCCL INFO proxy.cc:1303 -> 1\n",
), tested_with={"NCCL": ("2.8.2", "2.14.3")})  # nccl606's `NCCL version` line; nccl795's case note
