"""The one bounded reader: every file a command opens (``analyze``, ``report``, ``diff``, ``pack``,
``fleet``, ``open``) is opened and read here.

- **Regular files only, unless the user named the path.** A file found inside a folder or a bundle
  (``manifest.json``, ``host/*.json``, ``nvml.jsonl``) that is a FIFO, a device or a socket — or a
  link to one, such as ``/dev/zero`` — is refused with :class:`NotRegular`, never read: anyone who can
  write one folder of a shared incidents directory must not be able to stop a run. A path the user
  named (``dmesg | …`` through ``<(…)``, ``/dev/kmsg``) is read up to :attr:`Limits.max_special_bytes`.
- **Never waiting on the open.** Files are opened ``O_NONBLOCK`` (a FIFO without a writer opens at
  once), then checked with ``fstat`` on the opened descriptor — what was checked is what is read,
  whatever the path points at a moment later. ``follow=False`` adds ``O_NOFOLLOW``.
- **Size caps,** never trusting ``st_size`` (``/proc`` files and devices report 0; a log grows).
- **One decompression budget and bomb ratio** (:class:`Limits`, :class:`Budget`, :func:`gunzip`)
  for every gzip stream and archive member, whichever command reads it.
- **JSON with bounds** (:func:`load_json`): a file nested deeper than :data:`MAX_JSON_DEPTH` is not
  JSON here (the recursion a deep document costs every later walk over it is never paid).
"""

from __future__ import annotations

import io
import json
import os
import stat
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "Budget", "Limits", "NotRegular", "Read", "describe_mode", "gunzip", "load_json",
           "loads_bounded", "open_checked", "read_fd", "read_file", "read_json"]

_STEP = 1 << 20
#: JSON nesting that a reader accepts: the recorder writes 4 levels, a hand-edited file a few more.
MAX_JSON_DEPTH = 64


@dataclass(frozen=True)
class Limits:
    max_file_bytes: int = 4 << 30  # one decompressed file
    max_total_bytes: int = 16 << 30  # decompressed bytes in one analysis, all archives and levels together
    max_members: int = 20_000  # files in one archive or directory walk
    max_depth: int = 3  # archives inside archives (a zip in a tar.gz is 2)
    #: A member or gzip stream that expands more than this many times, once past
    #: ``ratio_check_bytes``, is a compression bomb (text logs compress 5-30x; zeros 1000x).
    max_ratio: int = 200
    ratio_check_bytes: int = 64 << 20
    #: Devices, FIFOs and /proc files (whose ``st_size`` says nothing) are read up to this.
    max_special_bytes: int = 64 << 20


class Budget:
    """The decompressed bytes one analysis may still unpack: one budget for every archive and
    every nesting level (a zip of zips of zips no longer gets a fresh 16 GiB at each level)."""

    def __init__(self, limits: Limits) -> None:
        self.left = limits.max_total_bytes
        self.total = limits.max_total_bytes
        self.spent_note = False

    def take(self, n: int) -> bool:
        """Spend ``n`` bytes; False (nothing spent) when they are not left."""
        if n > self.left:
            return False
        self.left -= n
        return True

    def over(self, name: str) -> str:
        return f"{name}: over the analysis's decompression budget ({self.total >> 20} MiB in all), skipped"


def describe_mode(mode: int) -> str:
    """What a file of ``st_mode`` is, for a sentence (``a FIFO``, ``a character device`` …)."""
    for test, what in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return what
    return "not a regular file"


class NotRegular(OSError):
    """A file found inside a folder, a bundle or an archive that is not a regular file (it is never read)."""

    def __init__(self, path: str | os.PathLike[str], mode: int) -> None:
        self.what = describe_mode(mode)
        super().__init__(f"not a regular file ({self.what}); not read")
        self.filename = str(path)
        self.strerror = f"not a regular file ({self.what}); not read"


def open_checked(path: str | os.PathLike[str], *, named: bool = False,
                 follow: bool = True) -> tuple[int, os.stat_result]:
    """A descriptor of ``path`` opened for reading without waiting (``O_NONBLOCK``), and the ``fstat``
    of what was opened. Raises :class:`NotRegular` for anything but a regular file unless ``named``
    (the user typed this path), ``IsADirectoryError`` for a directory, ``OSError`` when it cannot be
    opened (``follow=False``: a symbolic link is ``ELOOP``)."""
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)  # Windows: no newline changes
    if sys.platform != "win32":
        flags |= os.O_NONBLOCK | os.O_NOCTTY
        if not follow:
            flags |= os.O_NOFOLLOW
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "is a directory", str(path))
        if not stat.S_ISREG(st.st_mode):
            if not named:
                raise NotRegular(path, st.st_mode)
            if stat.S_ISFIFO(st.st_mode) and sys.platform != "win32":
                os.set_blocking(fd, True)  # the user named a pipe: its writer is theirs
        elif sys.platform != "win32":
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_fd(fd: int, cap: int, size_hint: int = 0) -> tuple[bytes, bool]:
    """At most ``cap`` bytes from ``fd`` (and whether there was more). ``size_hint`` (a regular file's
    ``st_size``) reads it with one call into one buffer; the size is never trusted beyond that. A
    device that has nothing to give now (``EAGAIN``) has given what it has."""
    chunks: list[bytes] = []
    size = 0
    try:
        if size_hint > 0:  # its size in one call, and one byte more: did it grow since its stat?
            chunks.append(os.read(fd, min(size_hint, cap) + 1))
            size = len(chunks[0])
        while size <= cap:
            chunk = os.read(fd, min(_STEP * 4, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except BlockingIOError:
        pass
    raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return (raw[:cap], True) if len(raw) > cap else (raw, False)


@dataclass(frozen=True)
class Read:
    """What :func:`read_file` read: the bytes, whether the file had more than the cap, and its ``fstat``."""

    data: bytes
    cut: bool
    stat: os.stat_result


def read_file(path: str | os.PathLike[str], cap: int, *, named: bool = False, follow: bool = True,
              special_cap: int | None = None) -> Read:
    """Up to ``cap`` bytes of ``path`` (a special file the user named: up to ``special_cap``, default
    ``cap``). Raises ``OSError`` (:class:`NotRegular` included) as :func:`open_checked` does."""
    fd, st = open_checked(path, named=named, follow=follow)
    try:
        regular = stat.S_ISREG(st.st_mode)
        limit = cap if regular or special_cap is None else special_cap
        data, cut = read_fd(fd, limit, st.st_size if regular else 0)
    finally:
        os.close(fd)
    return Read(data, cut, st)


def _depth_ok(value: Any, limit: int) -> bool:
    """Whether ``value`` (parsed JSON) nests at most ``limit`` containers deep (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return False
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return True


def load_json(raw: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``raw`` parsed as JSON, or ``None`` when it is not JSON, not UTF-8, or nested deeper than
    ``max_depth`` (8 MB of ``[`` is a RecursionError in the parser; 900 levels would be one in every
    later walk over the value)."""
    if isinstance(raw, bytes | bytearray):
        start = bytes(raw[:max_depth + 1024]).lstrip()
        if start[: max_depth + 1].count(b"[") + start[: max_depth + 1].count(b"{") > max_depth:
            return None  # cheaply refused before the parser recurses
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None
    return value if _depth_ok(value, max_depth) else None


def loads_bounded(raw: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """:func:`json.loads` that raises ``ValueError`` for a document nested deeper than ``max_depth`` (for
    parsers: a deep but parseable value would cost a RecursionError in every later walk over it)."""
    value = json.loads(raw)
    if not _depth_ok(value, max_depth):
        raise ValueError(f"nested deeper than {max_depth} levels")
    return value


def read_json(path: str | os.PathLike[str], cap: int = 16 << 20, *, named: bool = False) -> Any:
    """:func:`load_json` of a regular file of at most ``cap`` bytes; ``None`` when it is not one, is
    larger, cannot be read or is not JSON."""
    try:
        got = read_file(path, cap, named=named)
    except OSError:
        return None
    return None if got.cut else load_json(got.data)


def gunzip(raw: bytes, name: str, limits: Limits, budget: Budget,
           progress: Callable[[float], None] | None = None) -> tuple[bytes, list[str], str]:
    """Decompress gzip in 1 MiB steps under the file cap, ``budget`` and the bomb ratio. Returns the
    bytes, the warnings and how the stream ended: ``whole``; ``cut`` (truncated or corrupt: what was
    readable is kept — a crash-cut rotated log — and said); ``over`` (a cap, the budget or the bomb
    ratio stopped it: the first part is returned, most callers leave it out)."""
    out = io.BytesIO()
    warnings: list[str] = []
    ending = "whole"
    d = zlib.decompressobj(wbits=31)
    pos = consumed = 0  # consumed: compressed bytes fed, over all concatenated members
    total = len(raw)
    try:
        while True:
            if d.unconsumed_tail:
                data = d.unconsumed_tail
            elif pos < len(raw):
                data = raw[pos : pos + _STEP]
                pos += len(data)
                consumed += len(data)
            else:
                if not d.eof:
                    ending = "cut"
                    warnings.append(f"{name}: gzip stream is truncated; kept the readable part "
                                    f"({out.tell():,} bytes)")
                break
            chunk = d.decompress(data, _STEP * 16)
            if not budget.take(len(chunk)):
                ending = "over"
                warnings.append(budget.over(name))
                break
            out.write(chunk)
            if progress is not None and consumed & ((16 << 20) - 1) == 0:
                progress(min(1.0, consumed / max(1, total)))
            if out.tell() > limits.max_file_bytes:
                ending = "over"
                warnings.append(f"{name}: decompressed size over {limits.max_file_bytes >> 20} MiB, cut there")
                break
            if out.tell() > limits.ratio_check_bytes and out.tell() > limits.max_ratio * consumed:
                ending = "over"
                warnings.append(f"{name}: expands more than {limits.max_ratio}:1 (a compression bomb?); "
                                f"kept the first {out.tell() >> 20} MiB")
                break
            if d.eof:
                rest = d.unused_data + raw[pos:]
                if not rest.strip(b"\0"):  # trailing padding after the last member
                    break
                raw, pos = rest, 0  # concatenated gzip members
                d = zlib.decompressobj(wbits=31)
    except zlib.error as exc:
        ending = "cut"
        warnings.append(f"{name}: gzip stream is corrupt ({exc}); kept the readable part ({out.tell():,} bytes)")
    return out.getvalue(), warnings, ending
