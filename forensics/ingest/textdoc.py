"""A text file held as bytes, read by lines and by byte offsets.

Parsers get a :class:`TextDocument` rather than a file object so that big logs are
never turned into millions of Python strings: ``candidate_lines`` scans the whole
buffer for literal anchors and decodes only the lines that hold one, and
``line_at``/``lines_from`` fetch raw context lazily by offset.

A big regular file is not read into memory: its ``data`` is a read-only mapping
(:class:`~forensics.ingest.filemap.FileMap`, ``mapped`` is true). Slicing it gives ``bytes``, and
``find``/``rfind``, ``re`` and ``memoryview`` work as on ``bytes``; it has no ``count``,
``startswith``, ``split``, ``decode`` or ``in`` for a multi-byte needle, so code that may see a
mapped document slices first (or uses :meth:`TextDocument.whole`). Whatever sweeps the file
(the literal scan, the line index, :meth:`TextDocument.lines`) gives the pages it passed back
(:meth:`TextDocument.release`), and line numbers come from a sparse
:class:`~forensics.ingest.lineindex.LineIndex`, so memory stays bounded whatever the file's size.
"""

from __future__ import annotations

import codecs
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import NamedTuple, TypeAlias

from forensics.ingest.filemap import FileMap
from forensics.ingest.lineindex import LineIndex
from forensics.ingest.literals import scratch_for
from forensics.lazy_re import lazy_compile

__all__ = ["MAX_LINE_BYTES", "Data", "Line", "TextDocument", "decode_bytes"]

#: A document's bytes: in memory, or a mapped file.
Data: TypeAlias = "bytes | FileMap"

#: Longest physical line handed to a parser; longer lines are cut (and counted).
MAX_LINE_BYTES = 1 << 20
#: Lines whose offsets :attr:`TextDocument.recent` keeps.
RECENT_SPANS = 3
#: Characters of each line :meth:`TextDocument.head` hands to format detection.
HEAD_LINE_CHARS = 64 << 10
#: Bytes read between two calls of :attr:`TextDocument.progress` (a few hundred per GB).
PROGRESS_STEP = 4 << 20
#: How far behind the reading position :meth:`TextDocument.lines` and :meth:`TextDocument.walk`
#: give a mapped document's pages back (look-backs within a record stay in memory).
RELEASE_LAG = 8 << 20
#: Most bytes :meth:`TextDocument.whole` copies out of a mapped document (today's one-file cap).
WHOLE_MAX_BYTES = 4 << 30
#: Part of a parse's progress that the literal scan of :meth:`TextDocument.candidate_starts` stands
#: for; reading the candidate lines it found is the rest.
SCAN_SHARE = 0.5


#: Longest run of digits a parser sees: Python refuses ``int()`` of more than 4,300 digits (and
#: is quadratic below that), so a garbled 5,000-digit number is cut to this many on decoding.
MAX_DIGITS = 1000
_DIGIT_RUN = lazy_compile(rf"\d{{{MAX_DIGITS + 1},}}")


def _cut_digit_runs(text: str) -> str:
    return _DIGIT_RUN.sub(lambda m: m.group(0)[:MAX_DIGITS], text)


class Line(NamedTuple):
    """One physical line: 1-based number, byte offset of its start, decoded text without EOL."""

    no: int
    offset: int
    text: str


def decode_bytes(raw: Data) -> tuple[Data, str]:
    """Normalise a file's bytes to UTF-8. Returns (utf8 bytes, encoding name found).

    UTF-16 (PowerShell 5.1 ``Out-File``) is recognised by its BOM or by NUL bytes in
    every other position (either parity: little or big endian); anything else is taken
    as UTF-8 with errors replaced later. A mapped file is returned as it is when it is
    UTF-8 without a BOM (``forensics/ingest/sources.py`` maps no other), else read into memory.
    """
    if isinstance(raw, FileMap):
        head = raw[:4096]
        if not head.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            from forensics.ingest.binary import utf16_parity

            if utf16_parity(head) is None:
                return raw, "utf-8"
        raw = raw[:]
    if raw.startswith(codecs.BOM_UTF8):
        return raw[len(codecs.BOM_UTF8) :], "utf-8-sig"
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return raw.decode("utf-16", errors="replace").encode("utf-8"), "utf-16"
    from forensics.ingest.binary import utf16_parity

    parity = utf16_parity(raw[:4096])
    if parity is not None:
        return raw.decode(parity, errors="replace").encode("utf-8"), parity
    return raw, "utf-8"


class TextDocument:
    """A whole text file (in memory or mapped), addressed by line number and byte offset."""

    __slots__ = ("_index", "_line_starts", "_next_report", "_progress", "_scanned", "data", "encoding", "path",
                 "recent", "truncated_lines")

    def __init__(self, data: Data, path: str, encoding: str = "utf-8") -> None:
        self.data: Data = data
        self.path = path
        self.encoding = encoding
        self.truncated_lines = 0
        #: (start, end) byte offsets of the lines decoded last, newest last: where a parser that
        #: raised was reading (it may have read a line or two ahead)
        self.recent: deque[tuple[int, int]] = deque(maxlen=RECENT_SPANS)
        self._line_starts: list[int] | None = None
        self._index: LineIndex | None = None
        self._progress: Callable[[float], None] | None = None
        self._next_report = sys.maxsize if not isinstance(data, FileMap) else 0
        self._scanned = False

    @classmethod
    def from_bytes(cls, raw: Data, path: str) -> TextDocument:
        data, encoding = decode_bytes(raw)
        return cls(data, path, encoding)

    def __len__(self) -> int:
        return len(self.data)

    # -- a mapped file ------------------------------------------------------------------------
    @property
    def mapped(self) -> bool:
        """True when :attr:`data` is a mapped file, not bytes in memory (see the module docstring)."""
        return isinstance(self.data, FileMap)

    def release(self, start: int, end: int) -> None:
        """Bytes ``start``–``end`` will not be read again soon: a mapped document gives their pages
        back (they are read again from the file if they are). Nothing for bytes in memory."""
        if isinstance(self.data, FileMap):
            self.data.release(start, end)

    def whole(self, limit: int = WHOLE_MAX_BYTES) -> bytes | None:
        """The document as one ``bytes``, for a reader of whole documents (JSON, XML, CSV): itself in
        memory, a copy of a mapped file; None when a mapped file is larger than ``limit``."""
        if isinstance(self.data, bytes):
            return self.data
        return self.data[:] if len(self.data) <= limit else None

    def walk(self, starts: Iterable[int]) -> Iterable[int]:
        """``starts`` (increasing offsets) to loop over while reading at each; a mapped document gives
        back the pages more than :data:`RELEASE_LAG` behind the loop as it goes."""
        if not isinstance(self.data, FileMap):
            return starts
        return self._walk(starts)

    def _walk(self, starts: Iterable[int]) -> Iterator[int]:
        behind = 0
        it = iter(starts)
        while batch := list(islice(it, 4096)):
            yield from batch
            upto = batch[-1] - RELEASE_LAG
            if upto > behind:
                self.release(behind, upto)
                behind = upto

    def adopt_block_counts(self, counts: list[int]) -> None:
        """The newlines of each :data:`~forensics.ingest.lineindex.BLOCK` of the document, counted by a reader
        that went through all of it: a mapped document's line index is made from them instead of a
        pass of its own."""
        if self.mapped and self._index is None:
            self._index = LineIndex(self.data, counts=counts)

    def _line_index(self) -> LineIndex:
        if self._index is None:
            self._index = LineIndex(self.data, self.release)
        return self._index

    # -- progress -----------------------------------------------------------------------------
    @property
    def progress(self) -> Callable[[float], None] | None:
        """Called with the fraction (0–1) of the parse done, every :data:`PROGRESS_STEP` bytes of
        lines read and every chunk of a literal scan; never per line. Set it for one parse, then
        back to ``None``."""
        return self._progress

    @progress.setter
    def progress(self, hook: Callable[[float], None] | None) -> None:
        self._progress = hook
        self._next_report = 0 if hook is not None or self.mapped else sys.maxsize
        self._scanned = False

    def note_read(self, offset: int) -> None:
        """Tell the progress hook, if its turn has come, that lines up to byte ``offset`` are read."""
        if offset >= self._next_report:
            self._report(offset)

    def _report(self, offset: int) -> None:
        """Tell the hook that lines up to byte ``offset`` are read (after a scan: its second half);
        a mapped document gives back the pages well behind ``offset``."""
        prev = self._next_report - PROGRESS_STEP  # the offset of the call before
        self._next_report = offset + PROGRESS_STEP
        if isinstance(self.data, FileMap):
            if offset > RELEASE_LAG:
                low = prev if 0 <= prev < offset else offset - PROGRESS_STEP
                self.data.release(max(0, low - RELEASE_LAG), offset - RELEASE_LAG)
        elif self._progress is None:
            self._next_report = sys.maxsize
        if self._progress is not None and len(self.data):
            base = SCAN_SHARE if self._scanned else 0.0
            self._progress(base + (1.0 - base) * min(1.0, offset / len(self.data)))

    def _report_scan(self, fraction: float) -> None:
        if self._progress is not None:
            self._progress(SCAN_SHARE * fraction)

    # -- decoding -----------------------------------------------------------------------------
    def _decode(self, start: int, end: int) -> str:
        self.recent.append((start, end))
        if end - start > MAX_LINE_BYTES:
            end = start + MAX_LINE_BYTES
            self.truncated_lines += 1
        if end > start and self.data[end - 1 : end] == b"\r":
            end -= 1
        text = self.data[start:end].decode("utf-8", errors="replace")
        if end - start > MAX_DIGITS:
            text = _cut_digit_runs(text)
        return text

    # -- sequential access --------------------------------------------------------------------
    def lines(self, start_offset: int = 0, start_no: int = 1) -> Iterator[Line]:
        """Every line from ``start_offset`` (which must be a line start) to the end."""
        data, pos, no = self.data, start_offset, start_no
        size = len(data)
        if isinstance(data, FileMap):  # pages are given back behind this loop, wherever it starts
            self._next_report = min(self._next_report, pos + PROGRESS_STEP)
        next_report = self._next_report
        while pos < size:
            nl = data.find(b"\n", pos)
            end = size if nl < 0 else nl
            yield Line(no, pos, self._decode(pos, end))
            pos = end + 1
            no += 1
            if pos >= next_report:
                self._report(pos)
                next_report = self._next_report

    def head(self, n: int = 40, width: int = HEAD_LINE_CHARS) -> list[str]:
        """The first ``n`` non-empty lines, for format detection, each cut to ``width`` characters
        (detectors' regexes never see a pathological line whole)."""
        out: list[str] = []
        for line in self.lines():
            if line.text.strip():
                out.append(line.text[:width])
                if len(out) >= n:
                    break
        return out

    # -- random access ------------------------------------------------------------------------
    def line_starts(self) -> list[int]:
        """Byte offsets of every line start (built once, on first use). For a mapped document that
        is gigabytes of ints: use :meth:`line_count`, :meth:`line_start` and :meth:`line_no_at`."""
        if self._line_starts is None and len(self.data) >= NUMPY_STARTS_MIN:
            self._line_starts = _numpy_line_starts(self.data)
        if self._line_starts is None:
            starts = [0]
            data, pos = self.data, 0
            find = data.find
            while True:
                nl = find(b"\n", pos)
                if nl < 0 or nl + 1 >= len(data):
                    break
                starts.append(nl + 1)
                pos = nl + 1
            self._line_starts = starts
        return self._line_starts

    def line_count(self) -> int:
        """How many lines :meth:`line_starts` lists (an empty document has one, empty)."""
        if self.mapped:
            return self._line_index().line_count()
        return len(self.line_starts())

    def line_start(self, no: int) -> int:
        """Byte offset of line ``no`` (1-based, at most :meth:`line_count`)."""
        if self.mapped:
            return self._line_index().line_start(no)
        return self.line_starts()[no - 1]

    def line_no_at(self, offset: int) -> int:
        """1-based number of the line holding byte ``offset``."""
        if self.mapped:
            return self._line_index().line_no_at(offset)
        from bisect import bisect_right

        return bisect_right(self.line_starts(), offset)

    def line_at(self, offset: int) -> Line:
        """The whole line that holds byte ``offset``."""
        start = self.data.rfind(b"\n", 0, offset) + 1
        nl = self.data.find(b"\n", offset)
        end = len(self.data) if nl < 0 else nl
        return Line(self.line_no_at(start), start, self._decode(start, end))

    def without(self, spans: Iterable[tuple[int, int]]) -> TextDocument:
        """A copy with the byte ranges ``spans`` blanked (spaces: offsets and line numbers stay); of a
        mapped document, a copy-on-write mapping that copies only the blanked pages."""
        if isinstance(self.data, FileMap):
            return TextDocument(self.data.blanked(spans), self.path, self.encoding)
        data = bytearray(self.data)
        for start, end in spans:
            data[start:end] = b" " * (end - start)
        return TextDocument(bytes(data), self.path, self.encoding)

    def lines_from(self, line: Line) -> Iterator[Line]:
        """The lines after ``line``."""
        nl = self.data.find(b"\n", line.offset)
        if nl < 0:
            return iter(())
        return self.lines(nl + 1, line.no + 1)

    def context(self, line_no: int, before: int = 3, after: int = 3) -> list[Line]:
        """Lines around ``line_no`` for showing raw evidence."""
        first = max(1, line_no - before)
        out: list[Line] = []
        for line in self.lines(self.line_start(first), first):
            if line.no > line_no + after:
                break
            out.append(line)
        return out

    # -- literal scanning ---------------------------------------------------------------------
    def candidate_lines(self, literals: Iterable[bytes], limited: Iterable[bytes] = (),
                        limit: int = 2000, tail: Iterable[bytes] = ()) -> Iterator[Line]:
        """Lines holding at least one of ``literals`` (or of ``limited``), in file order, each once.

        One whole-buffer pass finds every hit (a Hyperscan multi-literal database when the
        ``hyperscan`` package is importable, else one ``bytes.find`` sweep per literal that jumps
        to the next line after each hit); only the hit lines are decoded, and line numbers come
        from counting newlines between hits.

        Each of the ``limited`` literals (anchors supplied from outside, which may turn out to be
        chatter in some log, e.g. ``via P2P`` in an NCCL_DEBUG=INFO flood) contributes at most
        ``limit`` lines (Hyperscan path: when one is spent, every capped literal past half its
        budget is dropped with it): after that its hits are ignored, so no literal can turn a 1 GB
        log into millions of lines.

        The ``tail`` literals count only in the last ``\\r``-segment of a line: a rate such as
        ``it/s`` recurs in every redraw of a progress bar, and only the visible state matters.

        A line longer than :data:`MAX_LINE_BYTES` (a progress bar redrawn with ``\\r`` for hours
        never ends its line) is not cut at its head: each hit yields the window around it, from
        the last ``\\r`` before the hit to the next ``\\r`` or the line's end (around its first hit
        and every hit in its last ``MAX_LINE_BYTES``); ``Line.offset`` is then the window's start,
        so ``lines_from`` still continues at the next physical line.
        """
        plain = {lit for lit in literals if lit}
        tails = {lit for lit in tail if lit} - plain
        lits = sorted(plain | tails | {lit for lit in limited if lit})
        if not lits:
            return
        number = self.line_numberer()
        for start in self.walk(self.iter_candidate_starts(literals, limited, limit, tail)):
            yield from self.lines_at(start, number(start), lits)

    def candidate_starts(self, literals: Iterable[bytes], limited: Iterable[bytes] = (), limit: int = 2000,
                         tail: Iterable[bytes] = (), sampled: Iterable[bytes] = (), every: int = 1) -> list[int]:
        """The start offsets of the lines :meth:`candidate_lines` yields, sorted, nothing decoded.

        For a caller that thins what it reads; pair with :meth:`line_numberer` and :meth:`lines_at`.
        A line whose only hits are ``sampled`` literals (which may also be in ``literals`` or
        ``tail``) is kept about one in ``every`` (the last such line always): a 1 GB log of
        progress lines then costs a fraction of the callbacks and none of the decoding. Lines
        with any other hit are all kept. (A list of every start: for a big file, where tens of
        millions of lines may hit, loop over :meth:`iter_candidate_starts` instead.)
        """
        return list(self.iter_candidate_starts(literals, limited, limit, tail, sampled, every))

    def iter_candidate_starts(self, literals: Iterable[bytes], limited: Iterable[bytes] = (), limit: int = 2000,
                              tail: Iterable[bytes] = (), sampled: Iterable[bytes] = (),
                              every: int = 1) -> Iterator[int]:
        """:meth:`candidate_starts` as they are found, a scan chunk (16 MB) at a time, so memory
        holds one chunk's starts, not the file's; a mapped file's pages are given back as the scan
        passes them (the loop over the starts reads them again: give those back with :meth:`walk`)."""
        plain = {lit for lit in literals if lit}
        tails = {lit for lit in tail if lit} - plain
        samp = {lit for lit in sampled if lit}
        lits = sorted(plain | tails | samp | {lit for lit in limited if lit})
        if not lits:
            return
        capped = {lit for lit in limited if lit} - plain - tails - samp
        report = self._report_scan if self._progress is not None else None
        release = self.data.release if isinstance(self.data, FileMap) else None
        yield from _hit_line_starts(self.data, lits, capped, limit, tails, samp if every > 1 else set(), every,
                                    report, release)
        if report is not None:
            report(1.0)
            self._scanned = True

    def line_numberer(self) -> Callable[[int], int]:
        """``number(offset)``: the 1-based line number of ``offset``; offsets must not decrease
        between calls (newlines are counted incrementally, vectorised over long spans; a mapped
        document's from its :class:`~forensics.ingest.lineindex.LineIndex`)."""
        data = self.data
        if isinstance(data, FileMap):  # the index is made on the first call (often never: the scan gave numbers)
            return lambda offset: self._line_index().newlines_before(offset) + 1
        count = _newline_counter(data)
        state = [1, 0]  # line number at state[1]

        def number(offset: int) -> int:
            if offset < state[1]:
                return 1 + count(0, offset)
            state[0] += count(state[1], offset)
            state[1] = offset
            return state[0]

        return number

    def lines_at(self, start: int, line_no: int, literals: Iterable[bytes] = ()) -> list[Line]:
        """The line starting at ``start``; an over-long line as the windows around its ``literals`` hits."""
        data = self.data
        if start >= self._next_report:
            self._report(start)
        nl = data.find(b"\n", start)
        end = len(data) if nl < 0 else nl
        if end - start <= MAX_LINE_BYTES:
            return [Line(line_no, start, self._decode(start, end))]
        lits = sorted({lit for lit in literals if lit})
        return [Line(line_no, a, self._decode(a, b)) for a, b in _long_line_windows(data, start, end, lits)]


# -- multi-literal search -----------------------------------------------------------------------

_HS_CACHE: dict[tuple[tuple[bytes, ...], frozenset[bytes]], object] = {}
#: Below this size the per-literal sweep is as fast as building a Hyperscan database.
HS_MIN_BYTES = 256 << 10
#: Documents from this size on count newlines with numpy (~6 GB/s against ~1.6 GB/s).
NUMPY_COUNT_MIN = 256 << 20
#: Documents from this size on find their line starts with numpy (its import costs what ~30 MB of the loop do).
NUMPY_STARTS_MIN = 64 << 20
#: Set to False (tests, benchmarks) to force the pure-Python sweep.
USE_HYPERSCAN = True


def _hyperscan_available() -> bool:
    if not USE_HYPERSCAN:
        return False
    try:
        import hyperscan  # noqa: F401
    except ImportError:
        return False
    return True


def _hs_database(lits: tuple[bytes, ...], tails: frozenset[bytes] = frozenset()) -> object | None:
    """A compiled Hyperscan block-mode database for ``lits``, cached; None when unavailable.

    A literal in ``tails`` matches only where no ``\\r`` follows it on its line (reported at the
    line's end)."""
    if not USE_HYPERSCAN:
        return None
    key = (lits, tails)
    db = _HS_CACHE.pop(key, None)
    if db is not None:
        _HS_CACHE[key] = db  # the most recently used last: a long-lived process (forensics/live) keeps its sets
        return db
    try:
        import hyperscan
    except ImportError:
        return None
    try:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        exprs = [("".join(f"\\x{b:02x}" for b in lit) + (r"[^\r\n]*\r?(?:\n|$)" if lit in tails else "")).encode()
                 for lit in lits]
        db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=[0] * len(exprs))
    except Exception:  # an engine problem must never cost the analysis: fall back to find()
        return None
    if len(_HS_CACHE) > 16:
        del _HS_CACHE[next(iter(_HS_CACHE))]  # the least recently used
    _HS_CACHE[key] = db
    return db




Report = Callable[[float], None]
Release = Callable[[int, int], None]


def _part(report: Report | None, start: float, share: float) -> Report | None:
    """``report`` for one part of a scan: its 0–1 mapped onto ``start .. start + share``."""
    if report is None:
        return None
    return lambda fraction: report(start + share * fraction)


def _hit_line_starts(data: Data, lits: list[bytes], capped: set[bytes], limit: int, tails: set[bytes],
                     sampled: set[bytes] = frozenset(), every: int = 1,  # type: ignore[assignment]
                     report: Report | None = None, release: Release | None = None) -> Iterator[int]:
    """Increasing start offsets of the lines that hold any of ``lits`` (``capped`` ones: first ``limit``
    lines; ``tails``: only after the line's last ``\\r``; lines hit only by ``sampled``: one in ``every``).
    ``report`` hears the fraction of the scan done, a few times per pass; ``release(a, b)`` is told of
    every stretch the scan has finished with (a mapped file gives its pages back). The Hyperscan path
    yields chunk by chunk, so a caller that does not keep them all holds a chunk's worth at a time."""
    frozen = frozenset(tails)
    if len(data) >= HS_MIN_BYTES and _hyperscan_available():  # scanned in chunks: no 4 GiB limit
        yield from _hs_line_starts(data, lits, capped, limit, frozen, frozenset(sampled), every, report, release)
        return
    if not sampled:
        yield from sorted(set(_hit_line_starts_find(data, lits, capped, limit, {}, tails, report, release)))
        return
    plain = [lit for lit in lits if lit not in sampled]
    share = len(plain) / len(lits)
    others = set(_hit_line_starts_find(data, plain, capped, limit, {}, tails, _part(report, 0.0, share), release))
    only = sorted(set(_hit_line_starts_find(data, sorted(sampled), set(), limit, {}, tails,
                                            _part(report, share, 1.0 - share), release)) - others)
    keep = set(only[::every])
    if only:
        keep.add(only[-1])
    yield from sorted(others | keep)


#: Bytes scanned per Hyperscan call; a capped literal's resume rescans at most this much.
_HS_CHUNK = 16 << 20
#: Line starts held back while the last line dropped by sampling may still be the file's last (it is
#: always kept); past this many, it is let through as if kept (a stream never holds more).
HOLD_MAX = 1 << 18


class _Stop(Exception):
    """A capped literal used up its lines: rescan the rest without it."""


def _hs_line_starts(data: Data, lits: list[bytes], capped: set[bytes], limit: int,
                    tails: frozenset[bytes], sampled: frozenset[bytes] = frozenset(), every: int = 1,
                    report: Report | None = None, release: Release | None = None) -> Iterator[int]:
    """Two Hyperscan passes, chunk by chunk: the uncapped literals (one database, compiled once per
    literal set and cached), then the capped ones (plain literals, cheap to recompile when one is
    spent); each chunk's starts of both, merged, are yielded before the next chunk is scanned.

    The last line a sampling pass dropped is always listed, and it is only known to be the last at
    the end: the starts after it are held back (at most :data:`HOLD_MAX`) until a later line is
    dropped or the file ends."""
    free = [lit for lit in lits if lit not in capped]
    limited = [lit for lit in lits if lit in capped]
    passes = []
    if free:
        passes.append(_HsPass(data, free, set(), limit, tails, sampled, every))
    if limited:
        passes.append(_HsPass(data, limited, capped, limit, frozenset()))
    sampler = passes[0] if free and sampled and every > 1 else None
    size = len(data)
    last = -1
    pending = -1  # the last dropped line, while it may be the last one
    seen = -1  # the last dropped line known (pending, or let through)
    held: list[int] = []
    chunk_start = 0
    while chunk_start < size:
        chunk_end = min(size, chunk_start + _HS_CHUNK)
        found: set[int] = set()
        for one in passes:
            found.update(one.scan(chunk_start, chunk_end))
        if release is not None:
            release(chunk_start, chunk_end)
        if report is not None:
            report(chunk_end / size)
        chunk_start = chunk_end
        starts = [start for start in sorted(found) if start > last]
        if starts:
            last = starts[-1]
        dropped = sampler.last_dropped if sampler is not None else -1
        if dropped != seen:  # a later line was dropped: the one before is not the last
            seen = dropped
            yield from held
            yield from (start for start in starts if start < dropped)
            held = [start for start in starts if start >= dropped]  # (a dropped line another literal listed)
            pending = dropped
        elif pending >= 0:
            held += starts
        else:
            yield from starts
        if len(held) > HOLD_MAX:
            yield from _with_pending(pending, held)
            held, pending = [], -1  # let through; a later drop holds again
        if not any(one.active for one in passes):
            break
    yield from _with_pending(pending, held)


def _with_pending(pending: int, held: list[int]) -> list[int]:
    """The held starts with the pending dropped line first (unless it is there already, or none)."""
    if pending < 0 or (held and held[0] == pending):
        return held
    return [pending, *held]


class _HsPass:
    """One Hyperscan pass over ``data``, a chunk at a time (:meth:`scan`), with the state that runs
    across chunks: each capped literal's count, the literals still active, the sampling counter.

    When a capped literal exceeds ``limit`` the scan stops and resumes at that line with a
    database that no longer holds it; the resume rescans only the rest of the current chunk, so
    a flood costs ``limit`` callbacks and a few chunk rescans, not millions of callbacks.
    A line first hit by a ``sampled`` literal is listed one time in ``every`` unless another
    literal hits it too (hits come in order of their end on the line); :attr:`last_dropped` is the
    start of the last line it did not list.
    """

    def __init__(self, data: Data, lits: list[bytes], capped: set[bytes], limit: int, tails: frozenset[bytes],
                 sampled: frozenset[bytes] = frozenset(), every: int = 1) -> None:
        self.data = data
        self.view = memoryview(data)
        self.limit = limit
        self.tails = tails
        self.sampled = sampled
        self.every = every
        self.overlap = max(len(lit) for lit in lits) - 1
        self.active = list(lits)
        self.counts: dict[bytes, int] = dict.fromkeys(capped, 0)
        self.capped = capped
        self.line_end = -1
        self.n_sampled = 0
        self.dropped_end = -1
        self.last_dropped = -1
        #: after a database failed to compile: the rest of the file's starts, from the find() sweep
        self.fallback: list[int] | None = None

    def scan(self, chunk_start: int, chunk_end: int) -> list[int]:
        """Line starts of the hits in ``data[chunk_start:chunk_end]`` (and the literals that cross its end)."""
        if self.fallback is not None or not self.active:
            return []
        data, view, size = self.data, self.view, len(self.data)
        find, rfind = data.find, data.rfind
        sampled, every, limit, counts = self.sampled, self.every, self.limit, self.counts
        line_end, n_sampled, dropped_end, last_dropped = self.line_end, self.n_sampled, self.dropped_end, \
            self.last_dropped
        starts: list[int] = []
        base = chunk_start
        active = self.active
        while active:
            db = _hs_database(tuple(active), self.tails)
            if db is None:
                self.fallback = _hit_line_starts_find(data, active, self.capped, limit, counts, self.tails)
                active = []
                starts.extend(self.fallback)
                break
            local = active
            resume = -1
            scan_base = base

            def on_match(i: int, _from: int, to: int, _flags: int, _ctx: object, local: list[bytes] = local,
                         scan_base: int = scan_base) -> bool:
                nonlocal line_end, resume, n_sampled, dropped_end, last_dropped
                lit = local[i]
                pos = scan_base + to - 1
                if lit in counts:
                    counts[lit] += 1
                    if counts[lit] > limit:
                        resume = rfind(b"\n", 0, pos) + 1
                        return True
                if pos <= line_end:
                    return False  # another hit on a line already listed
                if lit in sampled:
                    if pos <= dropped_end:
                        return False
                    n_sampled += 1
                    if n_sampled % every:
                        last_dropped = rfind(b"\n", 0, pos) + 1
                        nl = find(b"\n", pos)
                        dropped_end = size if nl < 0 else nl
                        return False
                start = rfind(b"\n", 0, pos) + 1
                starts.append(start)
                nl = find(b"\n", pos)
                line_end = size if nl < 0 else nl
                return False

            try:
                db.scan(view[base:min(size, chunk_end + self.overlap)], match_event_handler=on_match,  # type: ignore[attr-defined]
                        scratch=scratch_for(db))
            except Exception as exc:  # hyperscan.ScanTerminated: a capped literal is spent
                if resume < 0:
                    raise _Stop from exc
            if resume < 0:
                break
            # Anchors that flood tend to flood together (``via P2P``, ``P2P/IPC``): drop every capped
            # literal already past half its budget, so one rebuild covers them all.
            active = [lit for lit in active if counts.get(lit, 0) <= limit // 2]
            base = max(resume, chunk_start)
        self.active = active
        self.line_end, self.n_sampled, self.dropped_end, self.last_dropped = line_end, n_sampled, dropped_end, \
            last_dropped
        return starts


def _hit_line_starts_find(data: Data, lits: list[bytes], capped: set[bytes], limit: int,
                          counts: dict[bytes, int], tails: set[bytes] | frozenset[bytes],
                          report: Report | None = None, release: Release | None = None) -> list[int]:
    """The pure-Python sweep: one ``find`` pass per literal, jumping to the next line after each hit."""
    hits: list[int] = []
    find, rfind = data.find, data.rfind
    for done, lit in enumerate(lits):
        if report is not None and done:
            report(done / len(lits))
        budget = limit - counts.get(lit, 0) if lit in capped else -1
        is_tail = lit in tails
        pos = find(lit)
        while pos >= 0 and budget != 0:
            nl = find(b"\n", pos)
            if is_tail:
                end = len(data) if nl < 0 else nl
                r = data.rfind(b"\r", pos, end - 1 if end > pos and data[end - 1 : end] == b"\r" else end)
                if r >= 0:  # not in the line's last bar segment: look again after its last \r
                    pos = find(lit, r + 1)
                    continue
            hits.append(rfind(b"\n", 0, pos) + 1)
            budget -= 1
            if nl < 0:
                break
            pos = find(lit, nl + 1)
        if release is not None:
            release(0, len(data))
    return hits


def _numpy_line_starts(data: Data) -> list[int] | None:
    """:meth:`TextDocument.line_starts` vectorised (a 1 GB log has ~10 M lines); None without numpy."""
    try:
        import numpy as np
    except ImportError:
        return None
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10) + 1
    if len(ends) and int(ends[-1]) >= len(data):
        ends = ends[:-1]
    return [0, *ends.tolist()]


def _newline_counter(data: bytes) -> Callable[[int, int], int]:
    """``count(a, b)``: newlines in ``data[a:b]``; numpy's vectorised compare for big spans of big
    documents (importing numpy costs about what it saves on a 200 MB file)."""
    if len(data) < NUMPY_COUNT_MIN:
        return lambda a, b: data.count(b"\n", a, b)
    try:
        import numpy as np
    except ImportError:
        return lambda a, b: data.count(b"\n", a, b)
    arr = np.frombuffer(data, dtype=np.uint8)
    chunk = 1 << 22

    def count(a: int, b: int) -> int:
        if b - a < (32 << 10):
            return data.count(b"\n", a, b)
        n = 0
        for i in range(a, b, chunk):
            n += int(np.count_nonzero(arr[i : min(i + chunk, b)] == 10))
        return n

    return count


def _long_line_windows(data: Data, start: int, end: int, lits: list[bytes]) -> list[tuple[int, int]]:
    """Windows of an over-long line: around its first hit and around each hit in its last 1 MiB.

    A window runs from the ``\\r`` before the hit to the ``\\r`` after it (or the line's end), so a
    record glued after a progress bar comes out whole; windows are at most ``MAX_LINE_BYTES``.
    """
    head_end = min(end, start + MAX_LINE_BYTES)
    hits = _hits_in(data, start, head_end, lits)[:1]
    hits += _hits_in(data, max(head_end, end - MAX_LINE_BYTES), end, lits)
    windows: list[tuple[int, int]] = []
    for pos in hits:
        if windows and pos < windows[-1][1]:
            continue
        w_start = max(data.rfind(b"\r", start, pos) + 1, pos - MAX_LINE_BYTES // 2, start)
        nxt = data.find(b"\r", pos, end)
        w_end = min(end if nxt < 0 else nxt, w_start + MAX_LINE_BYTES)
        windows.append((w_start, w_end))
    # A bar redrawn in every segment hits everywhere: keep the first window and the last ones, where a
    # record glued after the bar sits.
    return windows[:1] + windows[1:][-63:]


def _hits_in(data: Data, a: int, b: int, lits: list[bytes]) -> list[int]:
    """Sorted offsets in ``data[a:b]`` where some literal starts (ends, for Hyperscan) — positions only."""
    db = _hs_database(tuple(lits))
    if db is not None:
        found: list[int] = []
        db.scan(memoryview(data)[a:b], match_event_handler=lambda _i, _f, to, _fl, _c: found.append(a + to - 1),  # type: ignore[attr-defined]
                scratch=scratch_for(db))
        return sorted(set(found))
    out: set[int] = set()
    for lit in lits:
        pos = data.find(lit, a, b)
        while pos >= 0:
            out.add(pos)
            pos = data.find(lit, pos + 1, b)
    return sorted(out)
