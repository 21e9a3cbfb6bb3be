"""Redaction of one file's bytes for ``pack``, whatever it holds: the one place ``pack`` redacts through.

Secrets are found by :func:`forensics.secrets.find_secrets` (shapes, private-key blocks, and the values the
recorder classed as secret) and replaced; with an :class:`~forensics.postmortem.anonymize.Anonymizer`
its pseudonyms are applied in the same pass. What a file holds decides how it is read:

* **text** (UTF-8, bytes that are not UTF-8 kept as they were): redacted as a whole, so a block that spans
  lines (a PEM key, a value wrapped onto two lines) is one secret; the line starts are mapped for the
  receipt indexes;
* **UTF-16** (a BOM, or NULs at every other byte): decoded, redacted, encoded back the same way;
* **gzip**, **zip**, **tar**: opened in memory and each member redacted by these same rules (nested
  archives too, to :data:`MAX_DEPTH`), member names included, then packed again;
* **binary** (a flight-recorder pickle): secrets masked with as many ``*`` in its ASCII/UTF-8 strings and
  in its UTF-16 strings, so lengths and offsets stay.

``limit`` bounds the bytes any one decompressed member may have (``pack``'s own bounds on what it reads
stay in ``pack.py``).
"""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
from collections import Counter

from forensics.postmortem.anonymize import Anonymizer, Edit, apply_edits
from forensics.secrets import REDACTED, Span, find_secrets

__all__ = ["MAX_DEPTH", "Edit", "redact_blob", "redact_name", "redact_text_edits", "redact_with_starts"]

MAX_DEPTH = 3
LIMIT = 1 << 30


def redact_text_edits(text: str, anon: Anonymizer | None, hide: str | None = REDACTED) -> list[Edit]:
    """The changes to make to ``text``: its secrets (``hide``; ``None``: as many ``*``), then pseudonyms
    where they do not overlap a secret."""
    secrets: list[Span] = find_secrets(text)
    edits: list[Edit] = [(s, e, hide if hide is not None else "*" * (e - s), k) for s, e, k in secrets]
    if anon is not None:
        taken = [(s, e) for s, e, _ in secrets]
        i = 0
        for s, e, repl, kind in anon.edits(text):
            while i < len(taken) and taken[i][1] <= s:
                i += 1
            if i < len(taken) and taken[i][0] < e:
                continue
            edits.append((s, e, repl, kind))
        edits.sort(key=lambda x: x[0])
    return edits


def redact_name(name: str, counts: Counter[str], anon: Anonymizer | None) -> str:
    """A member's name with secrets and (with ``anon``) names replaced; ``/`` kept as the separator."""
    return "/".join(apply_edits(part, redact_text_edits(part, anon), counts) for part in name.split("/"))


def redact_with_starts(raw: bytes, counts: Counter[str], anon: Anonymizer | None = None
                       ) -> tuple[bytes, list[tuple[int, int]]]:
    """UTF-8 text redacted as a whole. Returns the new bytes and, per line, (old start offset, new start
    offset) for rewriting receipt indexes — empty when nothing changed."""
    text = raw.decode("utf-8", "surrogateescape")
    edits = redact_text_edits(text, anon)
    if not edits:
        return raw, []
    new = apply_edits(text, edits, counts)
    return new.encode("utf-8", "surrogateescape"), _line_starts(text, edits, new)


def _line_starts(old: str, edits: list[Edit], new: str) -> list[tuple[int, int]]:
    """(old byte offset, new byte offset) of every line start of ``old`` and of its end."""
    enc = "utf-8"
    starts_c = [0] + [i + 1 for i, ch in enumerate(old) if ch == "\n"]
    if starts_c[-1] != len(old):
        starts_c.append(len(old))
    # old char -> new char
    mapped: list[int] = []
    delta = 0
    j = 0
    for o in starts_c:
        while j < len(edits) and edits[j][1] <= o:
            delta += len(edits[j][2]) - (edits[j][1] - edits[j][0])
            j += 1
        if j < len(edits) and edits[j][0] < o:  # inside an edit: its start in the new text
            mapped.append(edits[j][0] + delta)
        else:
            mapped.append(o + delta)
    out: list[tuple[int, int]] = []
    ob = nb = 0
    prev_o = prev_n = 0
    for o, n in zip(starts_c, mapped, strict=True):
        ob += len(old[prev_o:o].encode(enc, "surrogateescape"))
        nb += len(new[prev_n:max(n, prev_n)].encode(enc, "surrogateescape"))
        prev_o, prev_n = o, max(n, prev_n)
        out.append((ob, nb))
    return out


def _is_utf16(raw: bytes) -> str | None:
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "utf-16"
    head = raw[:4096]
    if len(head) >= 8 and head[1::2].count(0) > 0.9 * (len(head) // 2) and head[0::2].count(0) < len(head) // 8:
        return "utf-16-le"
    return None


def _mask_view(text: str, counts: Counter[str]) -> str:
    return apply_edits(text, redact_text_edits(text, None, hide=None), counts)


def _redact_binary(raw: bytes, counts: Counter[str]) -> bytes:
    """Secrets masked with ``*``: in the ASCII/UTF-8 view and in both UTF-16LE alignments."""
    out = bytearray(_mask_view(raw.decode("latin-1"), counts).encode("latin-1"))
    for align in (0, 1):
        body = bytes(out[align:])
        body = body[: len(body) - len(body) % 2]
        view = body.decode("utf-16-le", "surrogatepass")
        masked = _mask_view(view, counts)
        if masked != view:
            out[align:align + len(body)] = masked.encode("utf-16-le", "surrogatepass")
    return bytes(out)


def redact_blob(name: str, raw: bytes, counts: Counter[str], anon: Anonymizer | None = None,
                depth: int = 0, limit: int = LIMIT) -> bytes:
    """``raw`` with every secret (and, with ``anon``, every name) replaced, read as what it holds."""
    if raw[:2] == b"\x1f\x8b" and depth < MAX_DEPTH:
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as gz:
                inner = gz.read(limit + 1)
        except (OSError, EOFError):
            return _redact_binary(raw, counts)
        if len(inner) > limit:
            return _redact_binary(raw, counts)
        return gzip.compress(redact_blob(name, inner, counts, anon, depth + 1, limit), mtime=0)
    if raw[:4] == b"PK\x03\x04" and depth < MAX_DEPTH:
        try:
            return _redact_zip(raw, counts, anon, depth, limit)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError):
            return _redact_binary(raw, counts)
    if len(raw) > 262 and raw[257:262] == b"ustar" and depth < MAX_DEPTH:
        try:
            return _redact_tar(raw, counts, anon, depth, limit)
        except (tarfile.TarError, OSError, EOFError, ValueError):
            return _redact_binary(raw, counts)
    enc = _is_utf16(raw)
    if enc is not None:
        try:
            text = raw.decode(enc)
        except UnicodeDecodeError:
            return _redact_binary(raw, counts)
        bom = raw[:2] if enc == "utf-16" else b""
        new = apply_edits(text, redact_text_edits(text, anon), counts)
        body = new.encode("utf-16-le" if bom in (b"\xff\xfe", b"") else "utf-16-be")
        return bom + body
    if b"\x00" in raw[:8192]:
        return _redact_binary(raw, counts)
    return redact_with_starts(raw, counts, anon)[0]


def _redact_zip(raw: bytes, counts: Counter[str], anon: Anonymizer | None, depth: int, limit: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            if info.is_dir() or info.file_size > limit:
                continue
            data = zin.read(info)
            new = redact_name(info.filename, counts, anon)
            zout.writestr(zipfile.ZipInfo(new, date_time=info.date_time),
                          redact_blob(new, data, counts, anon, depth + 1, limit))
    return out.getvalue()


def _redact_tar(raw: bytes, counts: Counter[str], anon: Anonymizer | None, depth: int, limit: int) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tin, tarfile.open(fileobj=out, mode="w:") as tout:
        for member in tin:
            if not member.isfile() or member.size > limit:
                continue
            fh = tin.extractfile(member)
            if fh is None:
                continue
            data = redact_blob(member.name, fh.read(), counts, anon, depth + 1, limit)
            info = tarfile.TarInfo(redact_name(member.name, counts, anon))
            info.size, info.mtime, info.mode = len(data), member.mtime, 0o644
            tout.addfile(info, io.BytesIO(data))
    return out.getvalue()
