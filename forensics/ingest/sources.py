"""Turn what the user passed (files, directories, archives, bundles) into input files.

Nothing is extracted to disk: archive members are read into memory under size and
count caps, so path traversal and links out of the archive cannot happen; unsafe
names are refused with a warning. Gzip is unwrapped by content, never by name.

A plain regular file of :data:`~forensics.ingest.filemap.MAP_MIN_BYTES` or more is not read: its
``raw`` is a read-only mapping (:class:`~forensics.ingest.filemap.FileMap`), whatever its size (the
one-file cap is for what must be held in memory: decompressed data, archive members, standard
input, UTF-16 and BOM files, which are decoded, and pickles). Its first bytes decide: a
container or one of those is read as before.

Progress: :func:`input_size` is the on-disk total, and :func:`expand_inputs` given a
:class:`~forensics.ingest.meter.Meter` credits each file's reading and unpacking to it; every
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
from forensics.ingest import preload
from forensics.ingest.filemap import MAP_MIN_BYTES, FileMap
from forensics.ingest.reader import Budget, Limits, gunzip, open_checked, read_fd

if TYPE_CHECKING:
    import tarfile
    import zipfile

    from forensics.ingest.meter import Meter

__all__ = ["Budget", "Limits", "InputFile", "expand_inputs", "input_size"]  # Budget, Limits: from reader


@dataclass
class InputFile:
    """One file to analyze: its name as shown to the user and its raw bytes (a big plain file:
    mapped, not read)."""

    display: str
    raw: bytes | FileMap
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
    #: Found by walking a folder the user named (not named itself, not a bundle's file): read only when
    #: it is a log (``forensics.analysis`` decides, by its name and what its content detects as).
    walked: bool = False
    #: Not a file but a note about the inputs (files skipped in a folder): its warnings only.
    notice: bool = False

    @property
    def disk_share(self) -> float:
        return len(self.raw) if self.share is None else self.share


#: The meter that :func:`expand_inputs` credits while it runs (a context variable, so that bundle
#: directories, read through ``bundle.read_bundle_files``, credit it too).
_METER: ContextVar[Meter | None] = ContextVar("forensics_sources_meter", default=None)
#: The decompression budget of the analysis :func:`expand_inputs` is reading.
_BUDGET: ContextVar[Budget | None] = ContextVar("forensics_sources_budget", default=None)


def _budget(limits: Limits) -> Budget:
    budget = _BUDGET.get()
    if budget is None:  # a caller outside expand_inputs (a bundle read on its own)
        budget = Budget(limits)
        _BUDGET.set(budget)
    return budget


def _reading(name: str, size: int) -> None:
    """A file of ``size`` bytes on disk is being read."""
    meter = _METER.get()
    if meter is not None:
        from forensics.ingest.meter import READ_SHARE

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
    """Decompress gzip under the file cap, the analysis's budget and the bomb ratio
    (:func:`forensics.ingest.reader.gunzip`); a truncated or corrupt stream keeps what was readable."""
    out, warnings, _ending = gunzip(raw, name, limits, _budget(limits), _unpacked)
    return out, warnings


def _safe_member_name(name: str) -> bool:
    p = PurePosixPath(name.replace("\\", "/"))
    return not p.is_absolute() and ".." not in p.parts and not (len(name) > 1 and name[1] == ":")


def _kind_of_tar_member(member: tarfile.TarInfo) -> str | None:
    """What a non-regular tar member is, for the line that says it was skipped (None: a directory)."""
    if member.isdir():
        return None
    if member.issym():
        return "symbolic link"
    if member.islnk():
        return "hard link"
    if member.ischr() or member.isblk():
        return "device"
    if member.isfifo():
        return "FIFO"
    return "special"


def _from_tar(raw: bytes, display: str, limits: Limits, share: float, depth: int) -> Iterator[InputFile]:
    import tarfile

    budget = _budget(limits)
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:*") as tar:
            members = []
            for count, member in enumerate(tar):
                if count >= limits.max_members:
                    yield InputFile(display, b"", warnings=[f"{display}: over {limits.max_members} members, "
                                                            "the rest skipped"])
                    break
                members.append(member)
            names = [m.name for m in members if m.isfile()]
            items = _tar_members(tar, members, raw, display, limits, share, depth, budget)
            yield from _members(items, names)
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        yield InputFile(display, b"", warnings=[f"{display}: unreadable tar archive ({exc})"])


def _tar_members(tar: tarfile.TarFile, members: list[tarfile.TarInfo], raw: bytes, display: str, limits: Limits,
                 share: float, depth: int, budget: Budget) -> Iterator[InputFile]:
    skipped: dict[str, int] = {}
    for member in members:
        name = f"{display}!{member.name}"
        if not member.isfile():
            kind = _kind_of_tar_member(member)
            if kind is not None:  # links and devices are never followed
                skipped[kind] = skipped.get(kind, 0) + 1
            continue
        if not _safe_member_name(member.name):
            yield InputFile(name, b"", warnings=[f"{name}: unsafe member path, skipped"])
            continue
        if member.size > limits.max_file_bytes:
            yield InputFile(name, b"", warnings=[f"{name}: over the archive size cap, skipped"])
            continue
        if not budget.take(member.size):
            yield InputFile(name, b"", warnings=[budget.over(name)])
            continue
        fh = tar.extractfile(member)
        if fh is not None:
            _unpacked(member.offset_data / len(raw))
            yield from _classify(fh.read(), name, member.mtime, limits, depth=depth + 1,
                                 share=share * member.size / len(raw))
    if skipped:
        what = ", ".join(f"{n} {kind} member{'s' if n > 1 else ''}" for kind, n in skipped.items())
        yield InputFile(display, b"", warnings=[f"{display}: {what} skipped (never followed)"])


def _zip_mode(info: zipfile.ZipInfo) -> int:
    return (info.external_attr >> 16) & 0xFFFF if info.create_system == 3 else 0


def _from_zip(raw: bytes, display: str, limits: Limits, share: float, depth: int) -> Iterator[InputFile]:
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            infos = zf.infolist()
            if len(infos) > limits.max_members:
                yield InputFile(display, b"", warnings=[f"{display}: over {limits.max_members} members"])
                return
            names = [i.filename for i in infos if not i.is_dir()]
            yield from _members(_zip_members(zf, infos, raw, display, limits, share, depth), names)
    except (zipfile.BadZipFile, zlib.error, OSError, NotImplementedError, RuntimeError, ValueError, EOFError,
            OverflowError) as exc:  # ValueError: a negative seek from a bad central directory
        yield InputFile(display, b"", warnings=[f"{display}: unreadable zip archive ({exc})"])


def _zip_members(zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo], raw: bytes, display: str, limits: Limits,
                 share: float, depth: int) -> Iterator[InputFile]:
    import datetime as _dt
    import zipfile

    budget = _budget(limits)
    skipped: dict[str, int] = {}
    for info in infos:
        name = f"{display}!{info.filename}"
        if info.is_dir():
            continue
        mode = _zip_mode(info)
        if stat.S_IFMT(mode) and not stat.S_ISREG(mode):  # writers often leave the type bits 0
            kind = "symbolic link" if stat.S_ISLNK(mode) else "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(
                mode) else "special"
            skipped[kind] = skipped.get(kind, 0) + 1
            continue
        if not _safe_member_name(info.filename):
            yield InputFile(name, b"", warnings=[f"{name}: unsafe member path, skipped"])
            continue
        if info.file_size > limits.max_file_bytes:
            yield InputFile(name, b"", warnings=[f"{name}: over the archive size cap, skipped"])
            continue
        if info.file_size > limits.ratio_check_bytes and info.file_size > limits.max_ratio * max(1, info.compress_size):
            yield InputFile(name, b"", warnings=[
                f"{name}: would expand {info.file_size // max(1, info.compress_size)}:1 to "
                f"{info.file_size >> 20} MiB (a compression bomb?), skipped"])
            continue
        if not budget.take(info.file_size):  # the reader never returns more than the declared size
            yield InputFile(name, b"", warnings=[budget.over(name)])
            continue
        mtime = None
        with suppress(ValueError, OverflowError, OSError):
            mtime = _dt.datetime(*info.date_time).timestamp()
        _unpacked(min(1.0, max(0, info.header_offset) / len(raw)))
        try:
            data = zf.read(info)
        except (zipfile.BadZipFile, zlib.error, OSError, NotImplementedError, RuntimeError, ValueError, EOFError,
                OverflowError) as exc:  # ValueError: a negative seek from a bad central directory
            budget.left += info.file_size
            yield InputFile(name, b"", warnings=[f"{name}: unreadable zip member ({exc})"])
            continue
        yield from _classify(data, name, mtime, limits, depth=depth + 1,
                             share=share * info.compress_size / len(raw))
    if skipped:
        what = ", ".join(f"{n} {kind} member{'s' if n > 1 else ''}" for kind, n in skipped.items())
        yield InputFile(display, b"", warnings=[f"{display}: {what} skipped (never followed)"])


def _members(items: Iterator[InputFile], names: list[str]) -> Iterator[InputFile]:
    """An archive's members as they are read, one at a time; those of a packed bundle (a member
    named ``manifest.json``: its streams need their siblings) are read together and tagged as a
    bundle directory's are."""
    from forensics.ingest import bundle

    if not any(n.rsplit("/", 1)[-1] == bundle.MANIFEST for n in names):
        yield from items
        return
    yield from bundle.tag_members(list(items))


def _classify(raw: bytes, display: str, mtime: float | None, limits: Limits, depth: int,
              share: float) -> Iterator[InputFile]:
    """Unwrap containers by their content; yield plain files (``share``: the on-disk bytes ``raw``
    stands for, split among an archive's members). ``depth``: archives around ``raw``."""
    nested = depth >= 1
    if raw.startswith(GZIP_MAGIC):
        raw, warnings = _gunzip(raw, display, limits)
        if _is_tar(raw):
            if warnings:  # a .tar.gz cut at the bomb ratio or truncated: said, whatever its members say
                yield InputFile(display, b"", warnings=warnings, notice=True)
            if depth >= limits.max_depth:
                yield InputFile(display, b"", warnings=[_too_deep(display, limits)])
                return
            yield from _from_tar(raw, display, limits, share, depth)
            return
        if not nested:
            _unpacked(1.0)
        yield InputFile(display, raw, mtime, warnings=warnings, share=share)
        return
    if raw.startswith(ZIP_MAGIC) or _is_tar(raw):
        if depth >= limits.max_depth:
            yield InputFile(display, b"", warnings=[_too_deep(display, limits)])
            return
        reader = _from_zip if raw.startswith(ZIP_MAGIC) else _from_tar
        yield from reader(raw, display, limits, share, depth)
        return
    if not nested:
        _unpacked(1.0)  # a plain file is read
    if raw.startswith(b"ElfFile\x00"):  # binary .evtx: its records as XML text (kind windows-evtx)
        from forensics.ingest.evtx import evtx_to_xml

        xml, evtx_warnings = evtx_to_xml(raw)
        yield InputFile(display, xml, mtime, warnings=[f"{display}: {w}" for w in evtx_warnings], share=share)
        return
    yield InputFile(display, raw, mtime, share=share)


def _too_deep(display: str, limits: Limits) -> str:
    return f"{display}: an archive nested more than {limits.max_depth} deep, skipped"


#: Bytes of a big file's start that decide whether it is mapped (a tar header is in its first 512).
_PEEK = 4096


def _held_in_memory(head: bytes) -> bool:
    """A file starting with ``head`` is read into memory, never mapped: a container (gzip, zip,
    tar, evtx), a pickle, or text that is decoded (a BOM, UTF-16)."""
    import codecs

    from forensics.ingest.binary import utf16_parity
    from forensics.ingest.safe_pickle import is_pickle

    return (head.startswith((GZIP_MAGIC, ZIP_MAGIC, b"ElfFile\x00", codecs.BOM_UTF8, codecs.BOM_UTF16_LE,
                             codecs.BOM_UTF16_BE)) or _is_tar(head) or is_pickle(head)
            or utf16_parity(head) is not None)


def _mapped(fd: int, size: int) -> FileMap | None:
    """The open regular file ``fd`` of ``size`` bytes mapped, when it is a plain file (see
    :func:`_held_in_memory`); None to read it into memory. The map holds its own descriptor."""
    from forensics.ingest.filemap import map_file

    try:
        os.lseek(fd, 0, os.SEEK_SET)
        head = os.read(fd, _PEEK)
        os.lseek(fd, 0, os.SEEK_SET)
        if _held_in_memory(head):
            return None
        file = os.fdopen(os.dup(fd), "rb")
    except OSError:
        return None
    try:
        return map_file(file, size)
    except (OSError, ValueError):  # shrunk since its stat (the map would pass its end), or not mappable
        file.close()
        return None


def _mappable(path: str, size: int) -> bool:
    """Whether a regular file of ``size`` bytes at ``path`` would be mapped (for the progress total)."""
    if size < MAP_MIN_BYTES:
        return False
    try:
        fd, _st = open_checked(path)
    except OSError:
        return False
    try:
        return not _held_in_memory(os.read(fd, _PEEK))
    except OSError:
        return False
    finally:
        os.close(fd)


def _load(path: Path, display: str, limits: Limits, named: bool) -> tuple[bytes | FileMap, float, str | None]:
    """The bytes (or the map) of ``path`` read through the bounded reader, its mtime, and a note when it
    was cut. Raises ``OSError`` (:class:`~forensics.ingest.reader.NotRegular` for a FIFO, device or
    socket found in a folder), and a too-big note as ``ValueError``."""
    fd, st = open_checked(path, named=named, follow=named)
    try:
        special = not stat.S_ISREG(st.st_mode)  # a device, FIFO or socket: st_size says nothing
        if not special and st.st_size >= MAP_MIN_BYTES:
            mapped = _mapped(fd, st.st_size)
            if mapped is not None:
                _reading(display, st.st_size)
                _unpacked(1.0)
                return mapped, st.st_mtime, None
        if not special and st.st_size > limits.max_file_bytes:
            raise ValueError(f"{display}: larger than {limits.max_file_bytes >> 20} MiB, skipped")
        _reading(display, st.st_size)
        if not special and st.st_size >= preload.NUMPY_FROM_BYTES:
            preload.numpy_while_reading()
        cap = limits.max_special_bytes if special or st.st_size == 0 else limits.max_file_bytes
        raw, cut = read_fd(fd, cap, 0 if special else st.st_size)
    finally:
        os.close(fd)
    if not cut:
        return raw, st.st_mtime, None
    what = "a device or FIFO" if special else "a file that kept growing past its size"
    return raw, st.st_mtime, f"{display}: {what}; read its first {cap >> 20} MiB"


def _read_file(path: Path, display: str, limits: Limits, named: bool = True) -> Iterator[InputFile]:
    """One file through the bounded reader (``named``: the user typed this path, so a FIFO or a
    device is read too; a file found in a folder must be a regular one)."""
    try:
        raw, mtime, note = _load(path, display, limits, named)
    except ValueError as exc:
        yield InputFile(display, b"", warnings=[str(exc)])
        return
    except OSError as exc:
        yield InputFile(display, b"", warnings=[f"{display}: cannot read ({exc.strerror or exc})"])
        return
    if isinstance(raw, FileMap):
        yield InputFile(display, raw, mtime, share=len(raw))
        return
    for item in _classify(raw, display, mtime, limits, depth=0, share=len(raw)):
        if note:
            item.warnings.insert(0, note)
        yield item


def _walk(root: Path, limits: Limits, bundles: bool = True, logs_only: bool = False) -> Iterator[InputFile]:
    """Files under ``root`` in sorted order; bundle directories inside it are read as bundles.
    Only regular files are read (links, FIFOs, devices and sockets are counted, never opened)."""
    from forensics.ingest import bundle

    count = 0
    special: dict[str, int] = {}
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
            try:
                mode = path.lstat().st_mode
            except OSError:
                continue
            if not stat.S_ISREG(mode):
                what = _describe(mode)
                special[what] = special.get(what, 0) + 1
                continue
            for item in _read_file(path, display, limits, named=False):
                item.walked = logs_only
                yield item
    if special:
        what = ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in special.items())
        yield InputFile(str(root), b"", warnings=[f"{root}: skipped {what} (only regular files are read "
                                                  "in a folder; name one to read it)"], notice=True)


def _describe(mode: int) -> str:
    from forensics.ingest.reader import describe_mode

    return describe_mode(mode).removeprefix("a ")


def input_size(paths: Sequence[str], limits: Limits | None = None) -> int:
    """Bytes on disk of the regular files behind ``paths`` (what :func:`expand_inputs` reads, within
    ``limits``); a path that is missing or unreadable counts nothing. One ``stat`` per file."""
    limits = limits or Limits()
    total = count = 0
    for arg in paths:
        try:
            if not os.path.isdir(arg):
                size = os.stat(arg).st_size
                total += size if size <= limits.max_file_bytes or _mappable(arg, size) else 0
                continue
            for dirpath, _dirnames, filenames in os.walk(arg, followlinks=False):
                for fn in filenames:
                    count += 1
                    if count > limits.max_members:
                        return total
                    path = os.path.join(dirpath, fn)
                    st = os.lstat(path)
                    if stat.S_ISREG(st.st_mode) and (st.st_size <= limits.max_file_bytes
                                                     or _mappable(path, st.st_size)):
                        total += st.st_size
        except OSError:
            continue
    return total


def expand_inputs(paths: Sequence[str], limits: Limits | None = None,
                  meter: Meter | None = None) -> Iterator[InputFile]:
    """Every input file behind ``paths``, in the order given (directories sorted). ``meter`` is
    credited as files are read (see :func:`input_size` for its total)."""
    limits = limits or Limits()
    budget = _BUDGET.set(Budget(limits))
    token = _METER.set(meter)
    try:
        yield from _expand(paths, limits)
    finally:
        with suppress(ValueError):  # closed from another context (an abandoned generator collected elsewhere)
            _METER.reset(token)
        with suppress(ValueError):
            _BUDGET.reset(budget)


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
            from forensics.ingest import bundle

            if bundle.is_bundle(path):
                yield from bundle.read_bundle_files(path, limits)
            else:
                yield from _walk(path, limits, logs_only=True)
        else:
            yield from _read_file(path, arg, limits)
