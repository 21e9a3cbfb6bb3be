"""A text file held as bytes, read by lines and by byte offsets.

Parsers get a :class:`TextDocument` rather than a file object so that big logs are
never turned into millions of Python strings: ``candidate_lines`` scans the whole
buffer for literal anchors and decodes only the lines that hold one, and
``line_at``/``lines_from`` fetch raw context lazily by offset.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

__all__ = ["MAX_LINE_BYTES", "Line", "TextDocument", "decode_bytes"]

#: Longest physical line handed to a parser; longer lines are cut (and counted).
MAX_LINE_BYTES = 1 << 20


class Line(NamedTuple):
    """One physical line: 1-based number, byte offset of its start, decoded text without EOL."""

    no: int
    offset: int
    text: str


def decode_bytes(raw: bytes) -> tuple[bytes, str]:
    """Normalise a file's bytes to UTF-8. Returns (utf8 bytes, encoding name found).

    UTF-16 (PowerShell 5.1 ``Out-File``) is recognised by its BOM or by NUL bytes in
    every other position; anything else is taken as UTF-8 with errors replaced later.
    """
    if raw.startswith(codecs.BOM_UTF8):
        return raw[len(codecs.BOM_UTF8) :], "utf-8-sig"
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return raw.decode("utf-16", errors="replace").encode("utf-8"), "utf-16"
    head = raw[:4096]
    if len(head) >= 16 and head[1::2].count(0) > len(head) * 0.4 and head[0::2].count(0) < len(head) * 0.05:
        return raw.decode("utf-16-le", errors="replace").encode("utf-8"), "utf-16-le"
    return raw, "utf-8"


class TextDocument:
    """A whole text file in memory, addressed by line number and byte offset."""

    __slots__ = ("_line_starts", "data", "encoding", "path", "truncated_lines")

    def __init__(self, data: bytes, path: str, encoding: str = "utf-8") -> None:
        self.data = data
        self.path = path
        self.encoding = encoding
        self.truncated_lines = 0
        self._line_starts: list[int] | None = None

    @classmethod
    def from_bytes(cls, raw: bytes, path: str) -> TextDocument:
        data, encoding = decode_bytes(raw)
        return cls(data, path, encoding)

    def __len__(self) -> int:
        return len(self.data)

    # -- decoding -----------------------------------------------------------------------------
    def _decode(self, start: int, end: int) -> str:
        if end - start > MAX_LINE_BYTES:
            end = start + MAX_LINE_BYTES
            self.truncated_lines += 1
        if end > start and self.data[end - 1 : end] == b"\r":
            end -= 1
        return self.data[start:end].decode("utf-8", errors="replace")

    # -- sequential access --------------------------------------------------------------------
    def lines(self, start_offset: int = 0, start_no: int = 1) -> Iterator[Line]:
        """Every line from ``start_offset`` (which must be a line start) to the end."""
        data, pos, no = self.data, start_offset, start_no
        size = len(data)
        while pos < size:
            nl = data.find(b"\n", pos)
            end = size if nl < 0 else nl
            yield Line(no, pos, self._decode(pos, end))
            pos = end + 1
            no += 1

    def head(self, n: int = 40) -> list[str]:
        """The first ``n`` non-empty lines, for format detection."""
        out: list[str] = []
        for line in self.lines():
            if line.text.strip():
                out.append(line.text)
                if len(out) >= n:
                    break
        return out

    # -- random access ------------------------------------------------------------------------
    def line_starts(self) -> list[int]:
        """Byte offsets of every line start (built once, on first use)."""
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

    def line_no_at(self, offset: int) -> int:
        """1-based number of the line holding byte ``offset``."""
        from bisect import bisect_right

        return bisect_right(self.line_starts(), offset)

    def line_at(self, offset: int) -> Line:
        """The whole line that holds byte ``offset``."""
        start = self.data.rfind(b"\n", 0, offset) + 1
        nl = self.data.find(b"\n", offset)
        end = len(self.data) if nl < 0 else nl
        return Line(self.line_no_at(start), start, self._decode(start, end))

    def lines_from(self, line: Line) -> Iterator[Line]:
        """The lines after ``line``."""
        nl = self.data.find(b"\n", line.offset)
        if nl < 0:
            return iter(())
        return self.lines(nl + 1, line.no + 1)

    def context(self, line_no: int, before: int = 3, after: int = 3) -> list[Line]:
        """Lines around ``line_no`` for showing raw evidence."""
        starts = self.line_starts()
        first = max(1, line_no - before)
        out: list[Line] = []
        for line in self.lines(starts[first - 1], first):
            if line.no > line_no + after:
                break
            out.append(line)
        return out

    # -- literal scanning ---------------------------------------------------------------------
    def candidate_lines(self, literals: Iterable[bytes]) -> Iterator[Line]:
        """Lines holding at least one of ``literals``, in file order, each once.

        One whole-buffer pass finds every hit (a Hyperscan multi-literal database when the
        ``hyperscan`` package is importable, else one ``bytes.find`` sweep per literal that jumps
        to the next line after each hit); only the hit lines are decoded, and line numbers come
        from counting newlines between hits.

        A line longer than :data:`MAX_LINE_BYTES` (a progress bar redrawn with ``\\r`` for hours
        never ends its line) is not cut at its head: each hit yields the window around it, from
        the last ``\\r`` before the hit (at most ``MAX_LINE_BYTES`` back) to the line's end or
        ``MAX_LINE_BYTES`` on; ``Line.offset`` is then the window's start, so ``lines_from``
        still continues at the next physical line.
        """
        lits = sorted({lit for lit in literals if lit})
        if not lits:
            return
        data = self.data
        starts = _hit_line_starts(data, lits)
        if not starts:
            return
        count = _newline_counter(data)
        line_no = 1
        last = 0
        size = len(data)
        for start in starts:
            line_no += count(last, start)
            last = start
            nl = data.find(b"\n", start)
            end = size if nl < 0 else nl
            if end - start <= MAX_LINE_BYTES:
                yield Line(line_no, start, self._decode(start, end))
                continue
            for w_start, w_end in _long_line_windows(data, start, end, lits):
                yield Line(line_no, w_start, self._decode(w_start, w_end))


# -- multi-literal search -----------------------------------------------------------------------

_HS_CACHE: dict[tuple[bytes, ...], object] = {}
#: Below this size the per-literal sweep is as fast as building a Hyperscan database.
HS_MIN_BYTES = 1 << 20
#: Set to False (tests, benchmarks) to force the pure-Python sweep.
USE_HYPERSCAN = True


def _hs_database(lits: tuple[bytes, ...]) -> object | None:
    """A compiled Hyperscan block-mode database for ``lits``, cached; None when unavailable."""
    if not USE_HYPERSCAN:
        return None
    db = _HS_CACHE.get(lits)
    if db is not None:
        return db
    try:
        import hyperscan
    except ImportError:
        return None
    try:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        exprs = ["".join(f"\\x{b:02x}" for b in lit).encode() for lit in lits]
        db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=[0] * len(exprs))
    except Exception:  # an engine problem must never cost the analysis: fall back to find()
        return None
    if len(_HS_CACHE) > 16:
        _HS_CACHE.clear()
    _HS_CACHE[lits] = db
    return db


def _hit_line_starts(data: bytes, lits: list[bytes]) -> list[int]:
    """Sorted start offsets of the lines that hold any of ``lits``."""
    if len(data) >= HS_MIN_BYTES and len(data) < (1 << 32) - 1:
        db = _hs_database(tuple(lits))
        if db is not None:
            return _hs_line_starts(db, data)
    hits: set[int] = set()
    find, rfind = data.find, data.rfind
    for lit in lits:
        pos = find(lit)
        while pos >= 0:
            start = rfind(b"\n", 0, pos) + 1
            hits.add(start)
            nl = find(b"\n", pos)
            if nl < 0:
                break
            pos = find(lit, nl + 1)
    return sorted(hits)


def _hs_line_starts(db: object, data: bytes) -> list[int]:
    starts: list[int] = []
    line_end = -1
    find, rfind = data.find, data.rfind

    def on_match(_id: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
        nonlocal line_end
        if to <= line_end:
            return  # another hit on a line already listed
        pos = to - 1
        start = rfind(b"\n", 0, pos) + 1
        if starts and start == starts[-1]:
            return
        starts.append(start)
        nl = find(b"\n", pos)
        line_end = len(data) if nl < 0 else nl

    db.scan(data, match_event_handler=on_match)  # type: ignore[attr-defined]
    return starts


def _newline_counter(data: bytes) -> Callable[[int, int], int]:
    """``count(a, b)``: newlines in ``data[a:b]``; numpy's vectorised compare for big spans."""
    if len(data) < (64 << 20):
        return lambda a, b: data.count(b"\n", a, b)
    try:
        import numpy as np
    except ImportError:
        return lambda a, b: data.count(b"\n", a, b)
    arr = np.frombuffer(data, dtype=np.uint8)
    chunk = 1 << 22

    def count(a: int, b: int) -> int:
        if b - a < (1 << 20):
            return data.count(b"\n", a, b)
        n = 0
        for i in range(a, b, chunk):
            n += int(np.count_nonzero(arr[i : min(i + chunk, b)] == 10))
        return n

    return count


def _long_line_windows(data: bytes, start: int, end: int, lits: list[bytes]) -> list[tuple[int, int]]:
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
    return windows[:64]


def _hits_in(data: bytes, a: int, b: int, lits: list[bytes]) -> list[int]:
    """Sorted offsets in ``data[a:b]`` where some literal starts (ends, for Hyperscan) — positions only."""
    db = _hs_database(tuple(lits))
    if db is not None:
        found: list[int] = []
        db.scan(memoryview(data)[a:b], match_event_handler=lambda _i, _f, to, _fl, _c: found.append(a + to - 1))  # type: ignore[attr-defined]
        return sorted(set(found))
    out: set[int] = set()
    for lit in lits:
        pos = data.find(lit, a, b)
        while pos >= 0:
            out.add(pos)
            pos = data.find(lit, pos + 1, b)
    return sorted(out)
