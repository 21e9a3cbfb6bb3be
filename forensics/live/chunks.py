"""Parse what a followed file appended, with the analysis' own parsers.

Each file keeps the parser detected on its first lines and is fed its new lines (whole lines,
from :mod:`forensics.live.follow`). The events carry the file's own line numbers and byte
offsets, and the times ``analyze`` would give them (their stamps, else the recorder's receipt
index, else — for a loose file being written now — the moment they were read).

**Thinning.** A training log repeats itself: at 1,000 lines a second, parsing every line costs a
fifth of a core. A line's *template* is its bytes with the digits deleted (as in
``parsers/common/templates.py``). A line whose template was seen ``ROUTINE_AFTER`` times, that holds
no alarm literal (the stream parser's triggers and anomalies, the signatures' and catalogues'
anchors), is *routine*: of those, one per template per ``SAMPLE_S`` is parsed (the freshest), the
rest only counted. A novel or alarming line opens a *burst*: it, the two lines before and the
``BURST_LINES`` after are all parsed, so a traceback or a NCCL error report is read whole. A burst
still open at the end of a read waits for the next read (at most ``CARRY_S``), so a record cut by
the read is parsed once, complete. A read with nothing but routine samples waits up to
``ROUTINE_PARSE_S`` for the next (each parse has a fixed cost: the anchors' search is set up).

**NVML samples** go through :class:`forensics.parsers.nvml_samples.NvmlDecoder`, which keeps each
GPU's state between reads (the file holds deltas).
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import accumulate
from pathlib import Path
from typing import Any

from forensics.events import Event, MetricSample, Origin
from forensics.ingest.bundle import IDX_MAGIC
from forensics.ingest.literals import hyperscan_database
from forensics.ingest.textdoc import Line, TextDocument
from forensics.parsers.common.base import ParseContext

__all__ = ["FileParser", "FileTags", "ReceiptIndex"]

ROUTINE_AFTER = 8
SAMPLE_S = 1.0
BURST_LINES = 64
CARRY_S = 1.5
ROUTINE_PARSE_S = 2.0  # routine samples alone are parsed at most this often
MAX_TEMPLATES = 20_000
MAX_CARRY_LINES = 2_000
STREAM_KINDS = frozenset({"process-output", "text", "slurm", "nccl-debug"})
_DIGITS = bytes(range(48, 58))
#: a rank's label at the start of a line, as forensics/live/rank_labels.py reads it
_RANK_LABEL = re.compile(rb"^\[(?:rank|default) ?\d{1,5}\](?=:| )", re.M)
_RANK_NUMBER = re.compile(rb"\d+")
_RECEIPT = struct.Struct("<QQ")


@dataclass
class FileTags:
    """What is known of a file beyond its bytes (a bundle's manifest says most of it)."""

    display: str
    source: str | None = None  # Event.source; None: ``file:<name>``
    host: str | None = None
    boot_time_ns: int | None = None
    tz_name: str | None = None
    index: Path | None = None  # the receipt index (stdout.idx) of a recorded stream
    read_time_receipts: bool = False  # a loose file written now: untimed lines get the time they were read


class ReceiptIndex:
    """A recorded stream's receipt index, read as it grows (records whose end is far behind the
    parse position are let go: memory stays bounded over a long run)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.ends: list[int] = []
        self.times: list[int] = []
        self._rest = b""

    def update(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(1 << 22)
        except OSError:
            return
        if not data:
            return
        if self.offset == 0:
            if not data.startswith(IDX_MAGIC):
                return
            data = data[len(IDX_MAGIC):]
            self.offset = len(IDX_MAGIC)
        self.offset += len(data)
        data = self._rest + data
        usable = len(data) - len(data) % _RECEIPT.size
        self._rest = data[usable:]
        for end, ns in _RECEIPT.iter_unpack(data[:usable]):
            if self.ends and end < self.ends[-1]:
                continue
            self.ends.append(end)
            self.times.append(ns)

    def at(self, offset: int) -> int | None:
        i = bisect_right(self.ends, offset)
        return self.times[i] if i < len(self.times) else None

    def forget_before(self, offset: int) -> None:
        i = bisect_right(self.ends, offset) - 1
        if i > 1024:
            del self.ends[:i], self.times[:i]


class _Line:
    __slots__ = ("data", "line_no", "offset", "read_ns")

    def __init__(self, data: bytes, offset: int, line_no: int, read_ns: int) -> None:
        self.data, self.offset, self.line_no, self.read_ns = data, offset, line_no, read_ns


class _Chunk:
    """A read's lines as parallel lists (no object per line until one is kept)."""

    def __init__(self, data: bytes, offset: int, line_no: int, read_ns: int) -> None:
        self.data = data
        parts = data.split(b"\n")
        self.last_open = bool(parts) and parts[-1] != b""  # an unfinished last line (handed out at the end)
        if parts and parts[-1] == b"":
            parts.pop()
        self.lines = parts
        self.offsets = list(accumulate((len(p) + 1 for p in parts), initial=offset))[:-1]
        self.line_no = line_no
        self.read_ns = read_ns

    def __len__(self) -> int:
        return len(self.lines)

    def line(self, i: int) -> _Line:
        nl = b"" if self.last_open and i == len(self.lines) - 1 else b"\n"
        return _Line(self.lines[i] + nl, self.offsets[i], self.line_no + i, self.read_ns)


class _Thinner:
    """Which lines of a stream to parse (the module's docstring, *Thinning*)."""

    def __init__(self, alarm: Callable[[bytes], bool], digit_alarm: Callable[[bytes], bool]) -> None:
        self.alarm = alarm
        self.digit_alarm = digit_alarm
        self.seen: dict[bytes, list[Any]] = {}  # template -> [count, alarming, last kept (s)]
        self.counted = 0  # lines only counted

    def keep(self, chunk: _Chunk, now: float) -> tuple[list[int], int, bool]:
        """Indices of the lines to parse, the index where a burst still open begins (len: none), and
        whether any of them is more than a routine line's sample."""
        lines = chunk.lines
        n = len(lines)
        # a line's template: digits deleted, a leading [label] kept whole (so each rank is sampled)
        keys = [(ln[:ln.find(b"]", 0, 24) + 1] if ln[:1] == b"[" else b"") + ln.translate(None, _DIGITS)
                for ln in lines]
        keep = bytearray(n)
        seen = self.seen
        routine: dict[bytes, int] = {}
        burst_until = -1
        last_burst_start = n
        digits = self.digit_alarm(chunk.data)  # rare: a literal whose digits make it an alarm
        for i, key in enumerate(keys):
            info = seen.get(key)
            if info is not None and info[0] >= ROUTINE_AFTER and not info[1] \
                    and not (digits and self.digit_alarm(lines[i])):
                info[0] += 1
                if i <= burst_until:
                    keep[i] = 1
                else:
                    routine[key] = i  # the freshest of each routine template
                continue
            if info is None:
                info = seen[key] = [0, self.alarm(lines[i]), 0.0]
            info[0] += 1
            if i > burst_until:
                last_burst_start = max(0, i - 2)
            keep[max(0, i - 2): i + 1] = b"\x01" * (i + 1 - max(0, i - 2))
            burst_until = i + BURST_LINES
        bursts = any(keep)
        for key, i in routine.items():
            info = seen[key]
            if now - info[2] >= SAMPLE_S:
                keep[i] = 1
                info[2] = now
        if len(seen) > MAX_TEMPLATES:  # one-off lines go first
            for key in [k for k, v in seen.items() if v[0] <= 1][: len(seen) - MAX_TEMPLATES // 2]:
                del seen[key]
        kept = [i for i in range(n) if keep[i]]
        self.counted += n - len(kept)
        open_from = last_burst_start if burst_until >= n else n
        return kept, open_from, bursts


def _alarm_matchers(notable: tuple[bytes, ...]) -> tuple[Callable[[bytes], bool], Callable[[bytes], bool]]:
    """(any alarm literal in a line, any alarm literal that holds a digit in a line)."""
    from forensics.parsers.process_output import ANOMALY_LITERALS, PROGRESS_LITERALS, TRIGGER_LITERALS

    routine = set(PROGRESS_LITERALS)  # a progress line is what repeats: its anomalies are ANOMALY_LITERALS
    words = tuple(sorted({w for w in (*TRIGGER_LITERALS, *ANOMALY_LITERALS, *notable) if w and w not in routine}))
    digits = tuple(w for w in words if any(48 <= b <= 57 for b in w))
    return _matcher(words), _matcher(digits)


def _matcher(words: tuple[bytes, ...]) -> Callable[[bytes], bool]:
    if not words:
        return lambda data: False
    texts = tuple(sorted({w.decode("utf-8", "replace") for w in words}, key=lambda w: (-len(w), w)))
    db: Any = hyperscan_database(texts)
    if db is None:
        import re

        search = re.compile(b"|".join(re.escape(w) for w in words)).search
        return lambda data: search(data) is not None

    def stop(*_: object) -> bool:
        return True

    def holds(data: bytes) -> bool:
        try:
            db.scan(data, match_event_handler=stop)
        except Exception:  # noqa: BLE001 - ScanTerminated: a literal is there
            return True
        return False

    return holds


class _Mapped:
    """Where each line of a document built from some of a file's lines lies in the file."""

    def __init__(self, lines: list[_Line]) -> None:
        self.starts: list[int] = []
        self.offsets: list[int] = []
        self.line_nos: list[int] = []
        self.read_ns: list[int] = []
        pos = 0
        parts = []
        for ln in lines:
            self.starts.append(pos)
            self.offsets.append(ln.offset)
            self.line_nos.append(ln.line_no)
            self.read_ns.append(ln.read_ns)
            parts.append(ln.data)
            pos += len(ln.data)
        self.data = b"".join(parts)

    def index(self, doc_offset: int) -> int:
        return max(0, bisect_right(self.starts, doc_offset) - 1)

    def offset(self, doc_offset: int) -> int:
        i = self.index(doc_offset)
        return self.offsets[i] + doc_offset - self.starts[i]

    def origin(self, o: Origin, display: str) -> Origin:
        i = self.index(o.offset)
        return Origin(display, self.line_nos[i] + (o.line - (i + 1)), self.offsets[i] + o.offset - self.starts[i],
                      o.nlines)


class FileParser:
    """One followed file: detection once, then each read's lines parsed into events and samples."""

    def __init__(self, tags: FileTags, notable: tuple[bytes, ...], year: int | None = None) -> None:
        self.tags = tags
        self.notable = notable
        self.year = year
        self.parser: Any = None
        self.parser_name = ""
        self.line_no = 1  # the next line's number
        self.offset = 0  # the next line's byte offset
        self.generation = 0
        self.receipts = ReceiptIndex(tags.index) if tags.index is not None else None
        self.thinner: _Thinner | None = None
        self.nvml: Any = None
        self.presentation = False
        self._carry: list[_Line] = []
        self._carry_since = 0.0
        self._routine: list[_Line] = []  # routine samples waiting for their parse (ROUTINE_PARSE_S)
        self._routine_since = 0.0
        self.self_stamped: bool | None = None  # a loose file's lines carry their own stamps
        self.ranks: Any = None  # RankActivity over every line read (a stream), not only those parsed
        self._rank_ts: dict[int, tuple[int | None, Any]] = {}  # a rank's last offset -> its time
        self.lines_read = 0
        self.errors = 0

    # -- the public step ---------------------------------------------------------------------------
    def feed(self, data: bytes, start: int, now: float | None = None,
             final: bool = False) -> tuple[list[Event], list[MetricSample]]:
        """Parse the whole lines ``data`` that begin at byte ``start`` of the file (a new generation of
        a rotated file starts again at line 1 when ``start`` goes back)."""
        now = time.monotonic() if now is None else now
        if start < self.offset:  # rotated or truncated: numbering starts again
            self.line_no, self.generation = 1, self.generation + 1
            self._carry = []
        self.offset = start
        if self.parser is None:
            if not data:
                return [], []
            self._detect(data)
        if self.thinner is not None:
            chunk = _Chunk(data, start, self.line_no, time.time_ns())
            self.line_no += len(chunk)
            self.offset += len(data)
            self.lines_read += len(chunk)
            return self._feed_stream(chunk, now, final)
        lines = self._split(data)
        if self.nvml is not None:
            return self._feed_nvml(lines)
        return self._parse(lines)  # a format read whole (kernel log, NVML events, JSON files)

    def _split(self, data: bytes) -> list[_Line]:
        out: list[_Line] = []
        pos = 0
        read_ns = time.time_ns()
        while pos < len(data):
            nl = data.find(b"\n", pos)
            end = len(data) if nl < 0 else nl + 1
            out.append(_Line(data[pos:end], self.offset + pos, self.line_no, read_ns))
            self.line_no += 1
            pos = end
        self.offset += len(data)
        self.lines_read += len(out)
        return out

    def _detect(self, data: bytes) -> None:
        from forensics.parsers.registry import detect

        lines = data[: 1 << 18].split(b"\n")[:200]
        head = [ln[:4096].decode("utf-8", "replace").rstrip("\r") for ln in lines[:60]]
        parser, _ = detect([h for h in head if h.strip()][:40])
        self.parser, self.parser_name = parser, parser.name
        if parser.name == "nvml-samples":
            from forensics.parsers.nvml_samples import NvmlDecoder

            self.nvml = NvmlDecoder(self.tags.host)
        elif parser.name in STREAM_KINDS:
            from forensics.live.rank_labels import RankActivity

            self.thinner = _Thinner(*_alarm_matchers(self.notable))
            self.ranks = RankActivity()
            from forensics.parsers.common.presentation import learn

            sample = TextDocument(b"\n".join(lines), self.tags.display)
            self.presentation = len(lines) >= 20 and learn(sample) is not None

    # -- streams -----------------------------------------------------------------------------------
    def _feed_stream(self, chunk: _Chunk, now: float, final: bool) -> tuple[list[Event], list[MetricSample]]:
        assert self.thinner is not None
        if len(chunk):
            self._rank_lines(chunk)
        kept_idx, open_from, bursts = self.thinner.keep(chunk, now) if len(chunk) else ([], 0, False)
        kept = [chunk.line(i) for i in kept_idx]
        if not bursts and not self._carry and not final:  # only routine samples: they wait a little
            if not self._routine:
                self._routine_since = now
            self._routine += kept
            if now - self._routine_since < ROUTINE_PARSE_S and len(self._routine) < MAX_CARRY_LINES:
                return [], []
            kept, self._routine = self._routine, []
            return self._parse(kept)
        kept, self._routine = self._routine + kept, []
        todo = self._carry + kept
        if not len(chunk) and self._carry and (final or now - self._carry_since >= CARRY_S):
            self._carry = []
            return self._parse(todo)
        if final or open_from >= len(chunk):
            self._carry = []
            return self._parse(todo)
        # a burst runs to the end of what was read: parse up to its start, keep the rest for next time
        first_open = chunk.offsets[open_from]
        now_part = [ln for ln in todo if ln.offset < first_open]
        rest = [ln for ln in todo if ln.offset >= first_open]
        if len(rest) > MAX_CARRY_LINES or (self._carry and now - self._carry_since >= CARRY_S):
            self._carry = []
            return self._parse(todo)
        if not self._carry:
            self._carry_since = now
        self._carry = rest
        return self._parse(now_part) if now_part else ([], [])

    def flush(self) -> tuple[list[Event], list[MetricSample]]:
        """What waits (an open burst, routine samples)."""
        todo = sorted(self._carry + self._routine, key=lambda ln: ln.offset)
        self._carry, self._routine = [], []
        return self._parse(todo) if todo else ([], [])

    # -- NVML ----------------------------------------------------------------------------------------
    def _feed_nvml(self, lines: list[_Line]) -> tuple[list[Event], list[MetricSample]]:
        if not lines:
            return [], []
        first = lines[0]
        doc = TextDocument(b"".join(ln.data for ln in lines), self.tags.display)
        ctx = _Shifted(path=self.tags.display, source=self.tags.source or "nvml", host=self.tags.host,
                       base_line=first.line_no - 1, base_offset=first.offset)
        try:
            samples = list(self.nvml.feed(doc, ctx))
        except Exception:  # noqa: BLE001 - a bad record costs this read, never the watcher
            self.errors += 1
            return [], []
        return [], samples

    def _rank_lines(self, chunk: _Chunk) -> None:
        """Which ranks wrote (``rank-activity``): from every line read, before thinning. Per label one
        count and one search from the end of the read (bytes methods, no pass per line)."""
        data = chunk.data
        if self.ranks is None or (data.find(b"[rank") < 0 and data.find(b"[default") < 0):
            return
        from forensics.events import TsSource

        if self.receipts is not None:
            self.receipts.update()
        for label in set(_RANK_LABEL.findall(data)):
            rank = int(_RANK_NUMBER.search(label).group(0))  # type: ignore[union-attr]
            at_end = data.rfind(b"\n" + label)
            last = at_end + 1 if at_end >= 0 else 0  # not after a newline: the read's first line
            i = max(0, bisect_right(chunk.offsets, chunk.offsets[0] + last) - 1)
            entry = self.ranks.seen.get(rank)
            if entry is None:
                first = 0 if data.startswith(label) else data.find(b"\n" + label) + 1
                j = max(0, bisect_right(chunk.offsets, chunk.offsets[0] + first) - 1)
                self.ranks.feed(chunk.lines[j] + b"\n", chunk.offsets[j], lambda _off, j=j: chunk.line_no + j)
                entry = self.ranks.seen.get(rank)
                if entry is None:
                    continue
                entry[0] -= 1
            entry[0] += data.count(b"\n" + label) + (1 if data.startswith(label) else 0)
            entry[1], entry[2] = chunk.offsets[i], chunk.line_no + i
            ts = self.receipts.at(entry[1]) if self.receipts is not None else chunk.read_ns
            self._rank_ts[entry[1]] = (ts, TsSource.RECEIPT if ts is not None else TsSource.NONE)
        live = {e[1] for e in self.ranks.seen.values()}
        for off in [o for o in self._rank_ts if o not in live]:
            del self._rank_ts[off]

    def fixed_events(self) -> list[Event]:
        """Events about the whole file so far, remade on every read: each process's GPU footprint (an NVML
        file), which ranks wrote and where each one's last line is (a stream)."""
        if self.nvml is not None:
            return list(self.nvml.process_events(self.tags.source or "nvml"))
        if self.ranks is not None and len(self.ranks.seen) >= 2:
            name = os.path.basename(self.tags.display)
            ctx = ParseContext(path=self.tags.display, source=self.tags.source or f"file:{name}", host=self.tags.host)
            return list(self.ranks.events(ctx, None, lambda off: self._rank_ts.get(off, (None, "none"))))
        return []

    # -- the parse itself ----------------------------------------------------------------------------
    def _context(self, mapped: _Mapped) -> Any:
        from forensics.analysis import _zone
        from forensics.parsers.registry import detect

        receipt: Callable[[int], int | None] | None = None
        if self.receipts is not None:
            self.receipts.update()
            receipts = self.receipts

            def receipt(off: int) -> int | None:
                return receipts.at(mapped.offset(off))
        elif self.tags.read_time_receipts and self.self_stamped is not True:
            def receipt(off: int) -> int | None:
                return mapped.read_ns[mapped.index(off)]
        name = os.path.basename(self.tags.display)
        return ParseContext(path=self.tags.display, source=self.tags.source or f"file:{name}", host=self.tags.host,
                            year=self.year, mtime_ns=None, tz=_zone(self.tags.tz_name),
                            boot_time_ns=self.tags.boot_time_ns, receipt_ts=receipt, notable=self.notable,
                            detect=detect)

    def _parse(self, lines: list[_Line]) -> tuple[list[Event], list[MetricSample]]:
        if not lines:
            return [], []
        from forensics.parsers.common.guard import parse_guarded
        from forensics.timeline.merge import place_boot_relative, plausible_metrics

        mapped = _Mapped(lines)
        doc = TextDocument(mapped.data, self.tags.display)
        ctx = self._context(mapped)
        work, shown = doc, None
        if self.presentation:
            from forensics.parsers.common.presentation import learn

            shown = learn(doc)
            work = shown.doc if shown is not None else doc
        try:
            parsed = parse_guarded(self.parser, work, ctx)
        except Exception:  # noqa: BLE001 - never the watcher's end
            self.errors += 1
            return [], []
        events, metrics = parsed.events, parsed.metrics
        if shown is not None:
            events, metrics = shown.restore(events), shown.restore(metrics)
        if self.tags.read_time_receipts and self.self_stamped is None and events:
            self.self_stamped = any(str(e.ts_source) not in ("receipt", "none", "inferred") for e in events)
        display = self.tags.display
        events = [replace(e, origin=mapped.origin(e.origin, display)) for e in events if e.kind != "rank-activity"]
        metrics = [replace(m, origin=mapped.origin(m.origin, display)) for m in metrics]
        events = place_boot_relative(events, self.tags.boot_time_ns)
        if self.receipts is not None:
            self.receipts.forget_before(lines[0].offset - (1 << 20))
        return events, plausible_metrics(metrics)


@dataclass
class _Shifted(ParseContext):
    """A parse context whose origins are the file's own: the document is a piece of it."""

    base_line: int = 0
    base_offset: int = 0

    def origin(self, line: Line, nlines: int = 1) -> Origin:
        return Origin(self.path, line.no + self.base_line, line.offset + self.base_offset, nlines)


def file_year(path: Path) -> int | None:
    """The year of a loose file's modification time (year-less stamps, as ``analyze`` gives them)."""
    from datetime import UTC, datetime

    with contextlib.suppress(OSError):
        return datetime.fromtimestamp(path.stat().st_mtime, UTC).year
    return None
