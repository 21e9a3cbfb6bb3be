"""Turn what the user passed (files, directories, archives, bundles) into input files.

Nothing is extracted to disk: archive members are read into memory under size and
count caps, so path traversal and links out of the archive cannot happen; unsafe
names are refused with a warning. Gzip is unwrapped by content, never by name.

Progress: :func:`input_size` is the on-disk total, and :func:`expand_inputs` given a
:class:`~forensics.progress.Meter` credits each file's reading and unpacking to it; every
:class:`InputFile` says how many on-disk bytes its parse stands for (``share``).
"""

from __future__ import annotations

import io
import os
import stat
import zlib
from collections.abc import Iterator, Sequence
from contextlib import suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from forensics.errors import UsageError

if TYPE_CHECKING:
    from forensics.progress import Meter

__all__ = ["Limits", "InputFile", "expand_inputs", "input_size"]


@dataclass(frozen=True)
class Limits:
    max_file_bytes: int = 4 << 30  # one decompressed file
    max_total_bytes: int = 16 << 30  # everything read from one archive
    max_members: int = 20_000  # files in one archive or directory walk


@dataclass
class InputFile:
    """One file to analyze: its name as shown to the user and its raw bytes."""

    display: str
    raw: bytes
    mtime: float | None = None
    # Hints from a bundle manifest (recorded files): Event.source, host, boot time, zone name.
    source: str | None = None
    host: str | None = None
    boot_time_ns: int | None = None
    tz_name: str | None = None
    receipt_index: bytes | None = None
    warnings: list[str] = field(default_factory=list)
    #: On-disk bytes this file stands for in the progress count (an archive member: its part of the
    #: archive); ``None``: its own size.
    share: float | None = None

    @property
    def disk_share(self) -> float:
        return len(self.raw) if self.share is None else self.share


#: The meter that :func:`expand_inputs` credits while it runs (a context variable, so that bundle
#: directories, read through ``bundle.read_bundle_files``, credit it too).
_METER: ContextVar[Meter | None] = ContextVar("forensics_sources_meter", default=None)


def _reading(name: str, size: int) -> None:
    """A file of ``size`` bytes on disk is being read."""
    meter = _METER.get()
    if meter is not None:
        from forensics.progress import READ_SHARE

        meter.step(name, size * READ_SHARE)


def _unpacked(fraction: float) -> None:
    """That much of the file being read is read and unpacked."""
    meter = _METER.get()
    if meter is not None:
        meter.advance(fraction)


GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"


def _is_tar(raw: bytes) -> bool:
    return len(raw) > 262 and raw[257:262] == b"ustar"


def _gunzip(raw: bytes, name: str, limits: Limits) -> tuple[bytes, list[str]]:
    """Decompress gzip with a size cap; a truncated stream keeps what was readable."""
    out = io.BytesIO()
    warnings: list[str] = []
    d = zlib.decompressobj(wbits=31)
    try:
        pos = 0
        while pos < len(raw):
            chunk = d.decompress(raw[pos : pos + (1 << 20)], limits.max_file_bytes + 1 - out.tell())
            out.write(chunk)
            pos += 1 << 20
            if pos & ((16 << 20) - 1) == 0:
                _unpacked(pos / len(raw))
            if out.tell() > limits.max_file_bytes:
                warnings.append(f"{name}: decompressed size over {limits.max_file_bytes >> 20} MiB, cut there")
                break
            if d.eof and d.unused_data:  # concatenated gzip members
                raw, pos = d.unused_data, 0
                d = zlib.decompressobj(wbits=31)
        else:
            if not d.eof:
                warnings.append(f"{name}: gzip stream is truncated; analyzed the readable part")
    except zlib.error as exc:
        warnings.append(f"{name}: gzip stream is corrupt ({exc}); analyzed the readable part")
    return out.getvalue(), warnings


def _safe_member_name(name: str) -> bool:
    p = PurePosixPath(name.replace("\\", "/"))
    return not p.is_absolute() and ".." not in p.parts and not (len(name) > 1 and name[1] == ":")


def _from_tar(raw: bytes, display: str, limits: Limits, share: float) -> Iterator[InputFile]:
    import tarfile

    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:*") as tar:
            for count, member in enumerate(tar):
                if count >= limits.max_members:
                    yield InputFile(display, b"", warnings=[f"{display}: over {limits.max_members} members"])
                    return
                name = f"{display}!{member.name}"
                if not member.isfile():
                    continue  # directories, links and devices are never followed
                if not _safe_member_name(member.name):
                    yield InputFile(name, b"", warnings=[f"{name}: unsafe member path, skipped"])
                    continue
                total += member.size
                if member.size > limits.max_file_bytes or total > limits.max_total_bytes:
                    yield InputFile(name, b"", warnings=[f"{name}: over the archive size cap, skipped"])
                    continue
                fh = tar.extractfile(member)
                if fh is not None:
                    _unpacked(member.offset_data / len(raw))
                    yield from _classify(fh.read(), name, member.mtime, limits, depth=1,
                                         share=share * member.size / len(raw))
    except (tarfile.TarError, EOFError, OSError) as exc:
        yield InputFile(display, b"", warnings=[f"{display}: unreadable tar archive ({exc})"])


def _from_zip(raw: bytes, display: str, limits: Limits, share: float) -> Iterator[InputFile]:
    import zipfile

    total = 0
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            infos = zf.infolist()
            if len(infos) > limits.max_members:
                yield InputFile(display, b"", warnings=[f"{display}: over {limits.max_members} members"])
                return
            for info in infos:
                name = f"{display}!{info.filename}"
                if info.is_dir():
                    continue
                if not _safe_member_name(info.filename):
                    yield InputFile(name, b"", warnings=[f"{name}: unsafe member path, skipped"])
                    continue
                total += info.file_size
                if info.file_size > limits.max_file_bytes or total > limits.max_total_bytes:
                    yield InputFile(name, b"", warnings=[f"{name}: over the archive size cap, skipped"])
                    continue
                mtime = None
                try:
                    import datetime as _dt

                    mtime = _dt.datetime(*info.date_time).timestamp()
                except ValueError:
                    pass
                _unpacked(info.header_offset / len(raw))
                yield from _classify(zf.read(info), name, mtime, limits, depth=1,
                                     share=share * info.compress_size / len(raw))
    except (zipfile.BadZipFile, zlib.error, OSError, NotImplementedError, RuntimeError) as exc:
        yield InputFile(display, b"", warnings=[f"{display}: unreadable zip archive ({exc})"])


def _bundle_members(members: Iterator[InputFile]) -> list[InputFile]:
    """An archive's members, with those of a packed bundle tagged as a bundle directory's are."""
    from forensics import bundle

    return bundle.tag_members(list(members))


def _classify(raw: bytes, display: str, mtime: float | None, limits: Limits, depth: int,
              share: float) -> Iterator[InputFile]:
    """Unwrap containers by their content; yield plain files (``share``: the on-disk bytes ``raw``
    stands for, split among an archive's members)."""
    if raw.startswith(GZIP_MAGIC):
        raw, warnings = _gunzip(raw, display, limits)
        if _is_tar(raw) and depth < 2:
            yield from _bundle_members(_from_tar(raw, display, limits, share))
            return
        if depth == 0:
            _unpacked(1.0)
        yield InputFile(display, raw, mtime, warnings=warnings, share=share)
        return
    if raw.startswith(ZIP_MAGIC) and depth < 2:
        yield from _bundle_members(_from_zip(raw, display, limits, share))
        return
    if _is_tar(raw) and depth < 2:
        yield from _bundle_members(_from_tar(raw, display, limits, share))
        return
    if depth == 0:
        _unpacked(1.0)  # an archive's members are all read before the first is parsed; a plain file is read
    if raw.startswith(b"ElfFile\x00"):  # binary .evtx: its records as XML text (kind windows-evtx)
        from forensics.parsers.windows_evtx import evtx_to_xml

        xml, evtx_warnings = evtx_to_xml(raw)
        yield InputFile(display, xml, mtime, warnings=[f"{display}: {w}" for w in evtx_warnings], share=share)
        return
    yield InputFile(display, raw, mtime, share=share)


def _read_file(path: Path, display: str, limits: Limits) -> Iterator[InputFile]:
    try:
        st = path.stat()
        if st.st_size > limits.max_file_bytes:
            too_big = f"{display}: larger than {limits.max_file_bytes >> 20} MiB, skipped"
            yield InputFile(display, b"", warnings=[too_big])
            return
        _reading(display, st.st_size)
        raw = path.read_bytes()
    except OSError as exc:
        yield InputFile(display, b"", warnings=[f"{display}: cannot read ({exc.strerror or exc})"])
        return
    yield from _classify(raw, display, st.st_mtime, limits, depth=0, share=len(raw))


def _walk(root: Path, limits: Limits, bundles: bool = True) -> Iterator[InputFile]:
    """Files under ``root`` in sorted order; bundle directories inside it are read as bundles."""
    from forensics import bundle

    count = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        if bundles:
            nested = [d for d in dirnames if bundle.is_bundle(Path(dirpath) / d)]
            for d in nested:
                dirnames.remove(d)
                yield from bundle.read_bundle_files(Path(dirpath) / d, limits)
        for fn in sorted(filenames):
            count += 1
            path = Path(dirpath) / fn
            display = str(path)
            if count > limits.max_members:
                yield InputFile(str(root), b"", warnings=[f"{root}: over {limits.max_members} files, rest skipped"])
                return
            if path.is_symlink() or not path.is_file():
                continue
            yield from _read_file(path, display, limits)


def input_size(paths: Sequence[str], limits: Limits | None = None) -> int:
    """Bytes on disk of the regular files behind ``paths`` (what :func:`expand_inputs` reads, within
    ``limits``); a path that is missing or unreadable counts nothing. One ``stat`` per file."""
    limits = limits or Limits()
    total = count = 0
    for arg in paths:
        try:
            if not os.path.isdir(arg):
                size = os.stat(arg).st_size
                total += size if size <= limits.max_file_bytes else 0
                continue
            for dirpath, _dirnames, filenames in os.walk(arg, followlinks=False):
                for fn in filenames:
                    count += 1
                    if count > limits.max_members:
                        return total
                    st = os.lstat(os.path.join(dirpath, fn))
                    if stat.S_ISREG(st.st_mode) and st.st_size <= limits.max_file_bytes:
                        total += st.st_size
        except OSError:
            continue
    return total


def expand_inputs(paths: Sequence[str], limits: Limits | None = None,
                  meter: Meter | None = None) -> Iterator[InputFile]:
    """Every input file behind ``paths``, in the order given (directories sorted). ``meter`` is
    credited as files are read (see :func:`input_size` for its total)."""
    if meter is None:
        yield from _expand(paths, limits or Limits())
        return
    token = _METER.set(meter)
    try:
        yield from _expand(paths, limits or Limits())
    finally:
        with suppress(ValueError):  # closed from another context (an abandoned generator collected elsewhere)
            _METER.reset(token)


STDIN = "-"
STDIN_DISPLAY = "<stdin>"


def _read_stdin(limits: Limits) -> Iterator[InputFile]:
    """``-``: standard input (``dmesg | forensics analyze -``), read up to the one-file cap; more is cut
    with a warning (a pipe has no size to check first). Archives and gzip are unwrapped as for files."""
    import sys
    import time

    stream = sys.stdin.buffer if sys.stdin is not None else None
    if stream is None:
        yield InputFile(STDIN_DISPLAY, b"", warnings=[f"{STDIN_DISPLAY}: standard input is closed"])
        return
    if stream.isatty():
        raise UsageError("'-' reads standard input, but it is a terminal: pipe a log in "
                         "(e.g. dmesg | forensics analyze -)")
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= limits.max_file_bytes:
            chunk = stream.read(min(1 << 20, limits.max_file_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        yield InputFile(STDIN_DISPLAY, b"", warnings=[f"{STDIN_DISPLAY}: cannot read ({exc.strerror or exc})"])
        return
    raw = b"".join(chunks)
    warnings = []
    if len(raw) > limits.max_file_bytes:
        raw = raw[: limits.max_file_bytes]
        warnings.append(f"{STDIN_DISPLAY}: more than {limits.max_file_bytes >> 20} MiB, analyzed the first "
                        f"{limits.max_file_bytes >> 20} MiB")
    _reading(STDIN_DISPLAY, len(raw))
    for item in _classify(raw, STDIN_DISPLAY, time.time(), limits, depth=0, share=len(raw)):
        item.warnings = warnings + item.warnings
        yield item


def _expand(paths: Sequence[str], limits: Limits) -> Iterator[InputFile]:
    for arg in paths:
        if arg == STDIN:
            yield from _read_stdin(limits)
            continue
        path = Path(arg)
        if not path.exists():
            raise UsageError(f"no such file or directory: {arg}")
        if path.is_dir():
            from forensics import bundle

            if bundle.is_bundle(path):
                yield from bundle.read_bundle_files(path, limits)
            else:
                yield from _walk(path, limits)
        else:
            yield from _read_file(path, arg, limits)
