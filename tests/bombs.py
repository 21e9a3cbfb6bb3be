"""Compression bombs built in a few milliseconds: ``n`` MiB of zeros as a raw deflate stream
made of one independently compressed 1 MiB block repeated (``Z_FULL_FLUSH`` byte-aligns each
block and resets the dictionary, so copies of it decode one after another), wrapped as gzip or
as zip members. The CRCs are not those of the data: a reader that gets to the end calls the
stream corrupt, which is handled too; one that stops at its budget never gets there."""

from __future__ import annotations

import struct
import zlib

MIB = 1 << 20


def zeros_deflate(mib: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(b"\0" * MIB) + c.flush(zlib.Z_FULL_FLUSH)
    return block * mib + zlib.compressobj(9, zlib.DEFLATED, -15).flush()


def gzip_of_zeros(mib: int) -> bytes:
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + zeros_deflate(mib) + struct.pack("<II", 0, (mib * MIB) & 0xFFFFFFFF)


def zip_of(members: list[tuple[str, bytes, int, int]]) -> bytes:
    """A zip of (name, stored bytes, method 0/8, uncompressed size) members, sizes < 4 GiB (the CRC
    is right for stored members, 0 for deflated ones)."""
    out = bytearray()
    central = bytearray()
    for name, data, method, size in members:
        raw_name = name.encode()
        offset = len(out)
        crc = zlib.crc32(data) if method == 0 else 0
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(data), size,
                           len(raw_name), 0) + raw_name + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, len(data), size,
                               len(raw_name), 0, 0, 0, 0, 0, offset) + raw_name
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), len(out), 0)
    return bytes(out + central + end)


def zip_bomb(members: int, mib_each: int) -> bytes:
    blob = zeros_deflate(mib_each)
    return zip_of([(f"log{i}.txt", blob, 8, mib_each * MIB) for i in range(members)])


def stored_zip(members: list[tuple[str, bytes]]) -> bytes:
    return zip_of([(name, data, 0, len(data)) for name, data in members])
