"""A big log file mapped read-only, whose pages are given back once they are read.

A log of many gigabytes is never copied into memory: :class:`FileMap` is an ``mmap`` of the file
(``bytes``-like: slicing gives ``bytes``, ``find``/``rfind``, ``re``, ``memoryview`` and
``numpy.frombuffer`` work on it) and :meth:`FileMap.release` tells the kernel that a stretch just
read will not be needed soon. The mapping is of a file, read-only and never written, so a released
page costs nothing to get back: it leaves the process's resident set and is read again from the page
cache (or the disk) if anything looks at it later. Releasing is therefore always safe, only ever a
question of speed, which is why the literal scan, the newline counts and sequential reading call it
on every stretch they pass.

A blanked copy (:meth:`FileMap.blanked`, what ``TextDocument.without`` needs when a parser choked on a
record) is a private copy-on-write mapping of the same file: only the pages that hold the blanked
bytes are copied, and those pages are never released (releasing a written private page would
bring back the file's bytes).

Limits: where ``mmap.madvise`` is missing (Windows), :meth:`~FileMap.release` does nothing and the
resident set grows with what was read (the system trims a mapped file's pages under memory
pressure). A file truncated while it is mapped makes a read past its new end fail with ``SIGBUS``
(the process dies): a log being rotated by ``copytruncate`` during an analysis can do that. The
command line forks first when it will map a file, so that the user is told which file shrank
(``forensics/ingest/map_guard.py``); a caller of the library is not.
"""

from __future__ import annotations

import mmap
import os
from bisect import bisect_left
from collections.abc import Iterable
from typing import IO

__all__ = ["MAP_MIN_BYTES", "FileMap", "map_file", "open_map"]

#: Regular files from this size on are mapped instead of read (the same size past which
#: ``presentation.learn`` no longer peels a file, so a mapped file is never peeled).
MAP_MIN_BYTES = 256 << 20
#: ``madvise`` wants page-aligned starts.
_PAGE = mmap.PAGESIZE
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)


class FileMap(mmap.mmap):
    """An ``mmap`` of one file that can give back pages it has read (see the module docstring)."""

    _file: IO[bytes]
    _pinned: list[tuple[int, int]]  # page-aligned (start, end) spans written in a private copy
    _blanks: list[tuple[int, int]]  # the byte spans blanked, for a copy of this copy

    def release(self, start: int, end: int) -> None:
        """Drop the pages of ``[start, end)`` from the resident set (they stay readable)."""
        if _DONTNEED is None:
            return
        start = max(0, start - start % _PAGE)
        end = min(end, len(self))
        if end <= start:
            return
        advise = getattr(self, "madvise", None)  # not on Windows (nor is _DONTNEED)
        if advise is None:
            return
        for a, b in _unpinned(start, end, self._pinned):
            try:
                advise(_DONTNEED, a, b - a)
            except (OSError, ValueError):  # an odd platform refusing the hint costs memory, not the analysis
                return

    def close(self) -> None:
        super().close()
        self._file.close()

    def __del__(self) -> None:
        """The map owns its file: closed with it, not left to the collector (a ResourceWarning)."""
        file = getattr(self, "_file", None)
        if file is not None:
            file.close()

    def blanked(self, spans: Iterable[tuple[int, int]]) -> FileMap:
        """A private copy with the byte ranges ``spans`` turned into spaces (offsets stay); it holds its
        own descriptor of the file, so either map may be closed first."""
        copy = _open_map(os.fdopen(os.dup(self._file.fileno()), "rb"), len(self), mmap.ACCESS_COPY)
        for start, end in [*self._blanks, *spans]:
            start, end = max(0, start), min(end, len(self))
            if end > start:
                copy[start:end] = b" " * (end - start)
                copy._blanks.append((start, end))
        copy._pinned = _merged(copy._blanks)
        return copy


def _unpinned(start: int, end: int, pinned: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``[start, end)`` (``start`` page-aligned) less the pinned pages, in pieces that start on a page.
    A piece's length is rounded up to whole pages by ``madvise``; a piece that stops at a pin stops
    on the pin's first page, so the rounding never reaches into it."""
    out: list[tuple[int, int]] = []
    pos = start
    for a, b in pinned[max(0, bisect_left(pinned, (start, start)) - 1):]:
        if a >= end:
            break
        if b <= pos:
            continue
        if a > pos:
            out.append((pos, a))
        pos = max(pos, b)
    if pos < end:
        out.append((pos, end))
    return out


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Byte spans as sorted, disjoint spans of whole pages."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        a, b = a - a % _PAGE, b + (-b) % _PAGE
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _open_map(file: IO[bytes], length: int, access: int) -> FileMap:
    fm = FileMap(file.fileno(), length, access=access)
    fm._file = file
    fm._pinned = []
    fm._blanks = []
    return fm


def map_file(file: IO[bytes], length: int) -> FileMap:
    """The first ``length`` bytes of the open ``file``, mapped read-only; the map keeps ``file`` open
    (it is closed when the map is collected). ``length`` must be positive."""
    return _open_map(file, length, mmap.ACCESS_READ)


def open_map(path: str | os.PathLike[str], length: int) -> FileMap:
    """:func:`map_file` of ``path`` opened for reading."""
    file = open(path, "rb")  # noqa: SIM115 - the map owns it from here
    try:
        return map_file(file, length)
    except BaseException:
        file.close()
        raise
