"""Line numbers of a mapped document without a list of every line start.

A 20 GB log has some 200 million lines; their starts as Python ints would take several GB. A
:class:`LineIndex` keeps one count per :data:`BLOCK` bytes instead (the newlines before each block,
~40 KB per GB) and finds a line by counting the newlines inside one block: a line number or a line
start costs one block's count (a few microseconds), whatever the size of the file.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

__all__ = ["BLOCK", "Buffer", "LineIndex"]

#: Bytes per counted block (tests shrink it; it must divide :data:`_CHUNK`).
BLOCK = 1 << 16
#: Bytes counted per step while the index is built (then released).
_CHUNK = 16 << 20


class Buffer(Protocol):
    """What the index reads: ``bytes`` or a :class:`~forensics.ingest.filemap.FileMap`."""

    def __len__(self) -> int: ...
    def __getitem__(self, key: slice, /) -> bytes: ...
    def find(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...


class LineIndex:
    """Newlines before every :data:`BLOCK`-th byte of ``data``."""

    def __init__(self, data: Buffer, release: Callable[[int, int], None] | None = None,
                 counts: Iterable[int] | None = None) -> None:
        """Counted in one pass over ``data`` (its pages given back through ``release``), or from
        ``counts``: the newlines in each of its blocks, counted by someone who read it anyway."""
        self.data = data
        self.block = BLOCK
        self.size = len(data)
        if counts is None:
            counts = self._counted(data, release)
        cum = array("q", [0])
        total = 0
        for n in counts:
            total += n
            cum.append(total)
        #: cum[k]: newlines in data[: k * block]; the last entry is every newline of the file
        self.cum = cum
        self.newlines = total

    def _counted(self, data: Buffer, release: Callable[[int, int], None] | None) -> Iterator[int]:
        chunk = max(self.block, _CHUNK - _CHUNK % self.block)
        for a in range(0, self.size, chunk):
            b = min(self.size, a + chunk)
            yield from _block_counts(data, a, b, self.block)
            if release is not None:
                release(a, b)

    def newlines_before(self, offset: int) -> int:
        """Newlines in ``data[:offset]``."""
        offset = min(max(offset, 0), self.size)
        k = offset // self.block
        base = k * self.block
        if base >= self.size:
            return self.newlines
        return self.cum[k] + self.data[base:offset].count(b"\n")

    def line_count(self) -> int:
        """Lines as :meth:`TextDocument.line_starts` counts them (a final newline starts no line)."""
        ends_nl = self.size > 0 and self.data[self.size - 1 :] == b"\n"
        return self.newlines if ends_nl else self.newlines + 1

    def line_no_at(self, offset: int) -> int:
        """1-based number of the line holding byte ``offset`` (past the end: the last line)."""
        return min(self.newlines_before(offset) + 1, self.line_count())

    def line_start(self, no: int) -> int:
        """Byte offset where line ``no`` (1-based, at most :meth:`line_count`) starts."""
        if no <= 1:
            return 0
        nth = no - 1  # the newline that ends line no-1
        k = bisect_left(self.cum, nth) - 1  # cum[k] < nth <= cum[k + 1]: it is in block k
        k = max(0, min(k, len(self.cum) - 2))
        pos = k * self.block
        left = nth - self.cum[k]
        end = min(self.size, pos + self.block)
        while left > 0:
            nl = self.data.find(b"\n", pos, end)
            if nl < 0:
                return self.size
            pos = nl + 1
            left -= 1
        return pos


def _block_counts(data: Buffer, a: int, b: int, block: int) -> list[int]:
    """Newlines in each ``block`` of ``data[a:b]`` (``a`` on a block boundary)."""
    try:
        import numpy as np
    except ImportError:
        piece = data[a:b]
        return [piece.count(b"\n", i, i + block) for i in range(0, b - a, block)]
    arr = np.frombuffer(data, dtype=np.uint8, count=b - a, offset=a)  # type: ignore[call-overload]
    whole = (b - a) // block * block
    out: list[int] = np.count_nonzero(arr[:whole].reshape(-1, block) == 10, axis=1).tolist() if whole else []
    if whole < b - a:
        out.append(int(np.count_nonzero(arr[whole:] == 10)))
    return out
