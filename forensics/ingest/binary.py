"""Is this file a log at all? Binary detection by magic numbers and by byte ratios.

``analyze /bin/ls`` once went through as UTF-16 text, while a short BOM-less UTF-16 file was
rejected as binary: the old test counted NUL bytes absolutely. Here, in order:

1. a known magic number (executables, images, databases, compressed formats we do not read)
   names the kind;
2. UTF-16 with a BOM, or without one when NULs fall on one parity of byte positions only
   (ASCII text in UTF-16: every other byte is 0), is text;
3. otherwise the first :data:`SAMPLE` bytes are judged by ratio: runs of NUL bytes are set
   aside (a log the kernel padded with zeros after a power loss is still a log) and what is
   left must be mostly printable — at most :data:`MAX_CONTROL` of it control bytes other than
   tab, newline, CR, form feed, backspace and ESC (ANSI colours).
"""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING

from forensics.lazy_re import lazy_compile

if TYPE_CHECKING:
    from forensics.ingest.textdoc import Data

__all__ = ["MAX_CONTROL", "SAMPLE", "binary_kind", "utf16_parity"]

#: Bytes of the file's start that are judged.
SAMPLE = 64 << 10
#: Share of control bytes (NUL runs aside) above which a file is binary; random bytes have ~10 %.
MAX_CONTROL = 0.03

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x7fELF", "an ELF executable or core dump"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive (not read: extract it first)"),
    (b"Rar!\x1a\x07", "a RAR archive (not read: extract it first)"),
    (b"\xfd7zXZ\x00", "xz-compressed (not read: decompress it first)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed (not read: decompress it first)"),
    (b"\x04\x22\x4d\x18", "lz4-compressed (not read: decompress it first)"),
    (b"PK\x03\x04", "a zip archive that could not be read"),
    (b"PK\x05\x06", "an empty zip archive"),
    (b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
    (b"\xce\xfa\xed\xfe", "a Mach-O executable"),
    (b"\xca\xfe\xba\xbe", "a Mach-O universal binary or Java class"),
    (b"\x00asm", "a WebAssembly module"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"\x93NUMPY", "a NumPy array"),
    (b"PAR1", "a Parquet file"),
    (b"%PDF-", "a PDF document"),
    (b"\xd4\xc3\xb2\xa1", "a pcap capture"),
    (b"\x0a\x0d\x0d\x0a", "a pcapng capture"),
    (b"MSCF\x00\x00\x00\x00", "a Windows cabinet file"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an OLE2 document"),
)
_BZIP2 = lazy_compile(rb"BZh[1-9]1AY&SY")
_NUL_RUN = lazy_compile(rb"\x00{8,}")
_NOT_NUL = lazy_compile(rb"[^\x00]")
#: Control bytes that text holds: \b \t \n \v \f \r and ESC.
_TEXT_CONTROLS = frozenset(b"\b\t\n\v\f\r\x1b")
_DELETE_CONTROL = bytes(b for b in range(256) if (b < 0x20 or b == 0x7F) and b not in _TEXT_CONTROLS)


def _pe(raw: Data) -> bool:
    if raw[:2] != b"MZ" or len(raw) < 0x40:
        return False
    offset = int.from_bytes(raw[0x3C:0x40], "little")
    return raw[offset : offset + 4] == b"PE\x00\x00" or b"This program cannot be run in DOS mode" in raw[:512]


def utf16_parity(head: bytes) -> str | None:
    """``"utf-16-le"`` / ``"utf-16-be"`` when ``head`` has NULs on one parity of byte positions
    only (UTF-16 text without a BOM), else ``None``."""
    if len(head) < 16:
        return None
    half = len(head) // 2
    even, odd = head[0::2].count(0), head[1::2].count(0)
    if odd >= 0.4 * half and even <= 0.05 * half:
        return "utf-16-le"
    if even >= 0.4 * half and odd <= 0.05 * half:
        return "utf-16-be"
    return None


def binary_kind(raw: Data) -> str | None:
    """What ``raw`` is when it is not text (``"an ELF executable or core dump"``, ``"binary
    data"``, ``"only NUL bytes"`` …), or ``None`` for text (UTF-8, Latin-1, UTF-16). Reads its
    first :data:`SAMPLE` bytes, and past them only when they are all NUL."""
    if not raw:
        return None
    head = raw[:SAMPLE]
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if _pe(raw):
        return "a Windows executable (PE)"
    if _BZIP2.match(head):
        return "bzip2-compressed (not read: decompress it first)"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF8)):
        return None
    if utf16_parity(head[:4096]) is not None:
        return None
    rest = _NUL_RUN.sub(b"", head)
    if not rest.strip(b"\0"):  # the sample is all NUL: judge what follows the zeros, if anything does
        first = _NOT_NUL.search(raw)
        if first is None:
            return "only NUL bytes"
        rest = _NUL_RUN.sub(b"", raw[first.start() : first.start() + SAMPLE])
    controls = len(rest) - len(rest.translate(None, _DELETE_CONTROL))
    if controls > MAX_CONTROL * len(rest):
        return "binary data"
    return None
