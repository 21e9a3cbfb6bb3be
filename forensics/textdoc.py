"""A text file held as bytes, read by lines and by byte offsets.

Parsers get a :class:`TextDocument` rather than a file object so that big logs are
never turned into millions of Python strings: ``candidate_lines`` scans the whole
buffer for literal anchors and decodes only the lines that hold one, and
``line_at``/``lines_from`` fetch raw context lazily by offset.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
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

        One whole-buffer ``find`` pass per literal; only the hit lines are decoded.
        """
        data = self.data
        hits: set[int] = set()
        for lit in set(literals):
            if not lit:
                continue
            pos = data.find(lit)
            while pos >= 0:
                start = data.rfind(b"\n", 0, pos) + 1
                hits.add(start)
                nl = data.find(b"\n", pos)
                if nl < 0:
                    break
                pos = data.find(lit, nl + 1)
        if not hits:
            return
        line_no = 1
        last = 0
        for start in sorted(hits):
            line_no += data.count(b"\n", last, start)
            last = start
            nl = data.find(b"\n", start)
            end = len(data) if nl < 0 else nl
            yield Line(line_no, start, self._decode(start, end))
