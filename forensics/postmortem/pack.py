"""``forensics pack BUNDLE... -o case.tar.gz``: one archive to send to a vendor or a colleague.

Every file is copied with secrets redacted again — the recorder's files (env, argv, pip freeze:
:mod:`forensics.record.redact`) and the program's own output too, by the shared shapes of
:mod:`forensics.secrets`. ``--anonymize`` also replaces host names, user names, IPv4 addresses and
home paths by pseudonyms that are the same in every file (and in member names), so events still
line up across hosts. The receipt indexes (``*.idx``) are rewritten to the redacted logs' byte
offsets, gzip segments are redacted inside. ``REDACTIONS.txt`` lists kinds and counts, never values.
With ``--max-size`` the NVML series are downsampled (every file kept, peaks of memory kept) until
the archive fits.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import struct
import tarfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.errors import UsageError
from forensics.ingest.bundle import IDX_MAGIC
from forensics.ingest.reader import Budget, Limits, gunzip, loads_bounded
from forensics.postmortem.anonymize import Anonymizer, known_names
from forensics.postmortem.redact_blob import redact_blob, redact_name, redact_with_starts
from forensics.secret_values import FILE as VALUES_FILE
from forensics.secret_values import learn_bundle
from forensics.secrets import REDACTED

__all__ = ["Anonymizer", "PackResult", "downsample_nvml", "pack", "parse_size", "redact_bytes"]

ROOT = "case"
_RECEIPT = struct.Struct("<QQ")
_MAX_FILE = 1 << 30
_FACTS_CAP = 8 << 20
_MAX_FILES = 20_000


def parse_size(text: str) -> int:
    """``20M``, ``1.5G``, ``500k``, ``1048576`` → bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)(?:i?[bB])?\s*", text)
    if not m:
        raise UsageError(f"--max-size wants a size such as 20M or 1.5G, got {text!r}")
    return int(float(m[1]) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m[2].lower()])


def redact_bytes(raw: bytes, counts: Counter[str],
                 anon: Anonymizer | None = None) -> tuple[bytes, list[tuple[int, int]]]:
    """Redact UTF-8 text as a whole (bytes that are not UTF-8 survive as they were). Returns the new bytes
    and, per line, (old start offset, new start offset) for rewriting receipt indexes — empty when
    nothing changed."""
    return redact_with_starts(raw, counts, anon)


def _remap_index(idx: bytes, starts: list[tuple[int, int]]) -> bytes:
    """A receipt index whose end offsets point into the redacted stream: an offset inside a line maps
    to the same distance into the new line, capped at its end."""
    if not idx.startswith(IDX_MAGIC) or not starts:
        return idx
    from bisect import bisect_right

    olds = [o for o, _ in starts]
    body = memoryview(idx)[len(IDX_MAGIC):]
    usable = len(body) - len(body) % _RECEIPT.size
    out = bytearray(IDX_MAGIC)
    for end, ns in _RECEIPT.iter_unpack(body[:usable]):
        i = max(bisect_right(olds, end) - 1, 0)
        old_start, new_start = starts[i]
        nxt = starts[i + 1][1] if i + 1 < len(starts) else new_start
        new_end = min(new_start + (end - old_start), nxt) if i + 1 < len(starts) else new_start
        out += _RECEIPT.pack(new_end, ns)
    return bytes(out)


# -- NVML downsampling -------------------------------------------------------------------------
_DISCRETE = frozenset({"cr", "lg", "lw", "lgx", "lwx", "es", "ed", "rmp", "rmf", "rp"})


def downsample_nvml(raw: bytes, factor: int) -> bytes:
    """Keep about one tick in ``factor`` of an ``nvml.jsonl`` stream, each written as a keyframe (full
    state), with each GPU's memory the highest of the ticks it stands for; a tick where a discrete field
    changed (clock-event reasons, link, ECC, remapped rows) is always kept. Headers stay as they are."""
    if factor <= 1:
        return raw
    out: list[str] = []
    state: dict[str, dict[str, Any]] = {}
    peak: dict[str, float] = {}
    pending_t: int | None = None
    pending_p: Any = None
    count = 0

    def flush() -> None:
        nonlocal pending_t, pending_p, count
        if pending_t is None:
            return
        g = {}
        for gi, cols in state.items():
            row = dict(cols)
            if gi in peak:
                row["mu"] = peak[gi]
            g[gi] = row
        line: dict[str, Any] = {"t": pending_t, "k": 1, "g": g}
        if pending_p is not None:
            line["p"] = pending_p
        out.append(json.dumps(line, separators=(",", ":")))
        peak.clear()
        pending_t, pending_p, count = None, None, 0

    for text in raw.decode("utf-8", "replace").splitlines():
        try:
            obj = loads_bounded(text)
        except (ValueError, RecursionError):
            continue
        if not isinstance(obj, dict):
            continue
        if "format" in obj:
            flush()
            if isinstance(obj.get("interval_s"), int | float):
                obj["interval_s"] = round(obj["interval_s"] * factor, 3)
            obj["downsampled"] = factor
            out.append(json.dumps(obj, separators=(",", ":")))
            continue
        t = obj.get("t")
        if not isinstance(t, int):
            continue
        discrete = False
        for gi, delta in (obj.get("g") or {}).items():
            if not isinstance(delta, dict):
                continue
            cur = state.setdefault(str(gi), {})
            for k, v in delta.items():
                if k in _DISCRETE and cur.get(k) != v and k in cur:
                    discrete = True
                cur[k] = v
            mu = cur.get("mu")
            if isinstance(mu, int | float):
                peak[str(gi)] = max(peak.get(str(gi), mu), mu)
        pending_t = t
        if obj.get("p") is not None:
            pending_p = obj["p"]
        count += 1
        if discrete or count >= factor:
            flush()
    flush()
    return ("\n".join(out) + "\n").encode()


# -- packing -----------------------------------------------------------------------------------
@dataclass
class Member:
    name: str
    raw: bytes
    mtime: float
    kind: str = "text"  # text, idx, gz, nvml, nvml-gz, binary


@dataclass
class PackResult:
    path: Path
    size: int
    files: int
    counts: Counter[str] = field(default_factory=Counter)
    downsampled: int = 1
    over_cap: bool = False
    notes: list[str] = field(default_factory=list)  # files left out or cut, and why

    def summary(self) -> str:
        total = sum(self.counts.values())
        text = (f"forensics: wrote {self.path} ({self.size:,} bytes, {self.files} files; "
                f"{total} redaction(s), see REDACTIONS.txt")
        if self.downsampled > 1:
            text += f"; NVML series downsampled 1:{self.downsampled}"
        text += ")"
        if self.over_cap:
            text += "\nforensics: warning: still over --max-size after downsampling the NVML series"
        for note in self.notes[:10]:
            text += f"\nforensics: warning: {note}"
        if len(self.notes) > 10:
            text += f"\nforensics: warning: {len(self.notes) - 10} more in REDACTIONS.txt"
        return text


def _unique(p: Path, used: set[str]) -> str:
    """The directory's name in the archive: its own, else with its parent's (``run-a/bundle``), else
    numbered."""
    full = p.resolve()
    for name in (member_name(full.name), f"{member_name(full.parent.name)}/{member_name(full.name)}"):
        if name and name not in used:
            used.add(name)
            return name
    n = 2
    while f"{member_name(full.name)}-{n}" in used:
        n += 1
    used.add(f"{member_name(full.name)}-{n}")
    return f"{member_name(full.name)}-{n}"


_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f\\\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def member_name(part: str) -> str:
    """One path component as a member name: backslashes (a separator to Windows tools), control
    characters, newlines, bidi controls and bytes that are not UTF-8 each an ``_``; ``.``/``..`` and an
    empty name are never one."""
    name = _UNSAFE_NAME.sub("_", part)
    return name if name not in ("", ".", "..") else name.replace(".", "_") or "_"


@dataclass
class Source:
    """One file to pack: its member name, its path, and whether the user named it (a named file may be
    any file; one found in a folder must be a regular file, not a link)."""

    name: str
    path: Path
    named: bool = False


def _collect(paths: list[str]) -> list[Source]:
    """Every file behind ``paths``; a bundle keeps its directory name."""
    out: list[Source] = []
    used: set[str] = set()
    for arg in paths:
        p = Path(arg)
        if not p.exists():
            raise UsageError(f"no such file or directory: {arg}")
        if not p.is_dir():
            name = f"logs/{member_name(p.name)}"
            if name in used:
                name = f"logs/{len(used)}-{member_name(p.name)}"
            used.add(name)
            out.append(Source(name, p, named=True))
            continue
        base = _unique(p, used)
        for dirpath, dirnames, filenames in os.walk(p, followlinks=False):
            dirnames.sort()
            for fn in sorted(filenames):
                f = Path(dirpath) / fn
                if f.is_symlink() or not f.is_file() or fn.endswith(".tmp"):
                    continue
                rel = "/".join(member_name(part) for part in f.relative_to(p).parts)
                out.append(Source(f"{base}/{rel}", f))
                if len(out) > _MAX_FILES:
                    raise UsageError(f"more than {_MAX_FILES} files to pack")
    return out


def _kind(name: str, raw: bytes) -> str:
    base = name.rsplit("/", 1)[-1]
    if base.endswith(".idx"):
        return "idx"
    if base.startswith("nvml.") and ".jsonl" in base:
        return "nvml-gz" if raw[:2] == b"\x1f\x8b" else "nvml"
    if raw[:2] == b"\x1f\x8b":
        return "gz"
    if b"\x00" in raw[:8192]:
        return "binary"
    return "text"


def _redact_json_file(name: str, raw: bytes, counts: Counter[str]) -> bytes:
    """The recorder's own name-based rules again on env/command/manifest (older bundles, hand edits)."""
    from forensics.record.redact import redact_argv, redact_env

    base = name.rsplit("/", 1)[-1]
    try:
        data = loads_bounded(raw)  # (a document nested deeper than 64 is left as it is, unparsed)
    except (ValueError, RecursionError):
        return raw
    if not isinstance(data, dict):
        return raw
    before = json.dumps(data, sort_keys=True)
    if base == "env.json":
        red = redact_env({str(k): str(v) for k, v in data.items()})
        counts["secret-variable"] += sum(1 for k in red if red[k] == REDACTED and data.get(k) != REDACTED)
        data = red
    elif base in ("command.json", "manifest.json"):
        key = "argv" if base == "command.json" else "command"
        if isinstance(data.get(key), list):
            red_argv = redact_argv([str(a) for a in data[key]])
            counts["secret-argument"] += sum(1 for a, b in zip(data[key], red_argv, strict=True) if str(a) != b)
            data[key] = red_argv
    if json.dumps(data, sort_keys=True) == before:
        return raw
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate the file escaped: escaped again
        return (json.dumps(data, indent=2) + "\n").encode()


def _inodes(files: list[Source]) -> Counter[tuple[int, int]]:
    """How many of the files to pack are each (device, inode): a file with more links than that has
    a name outside what is packed."""
    seen: Counter[tuple[int, int]] = Counter()
    for src in files:
        with suppress(OSError):
            st = src.path.lstat()
            seen[(st.st_dev, st.st_ino)] += 1
    return seen


def _read(src: Source, inodes: Counter[tuple[int, int]]) -> tuple[bytes, float]:
    """The bytes of one file through the bounded reader: opened ``O_NOFOLLOW`` and checked on the
    opened descriptor (a regular file, not a hard link to a file outside the bundle). Raises
    ``_LeftOut`` with the reason."""
    from forensics.ingest.reader import read_file

    try:
        got = read_file(src.path, _MAX_FILE, named=src.named, follow=src.named,
                        special_cap=Limits().max_special_bytes)
    except OSError as exc:
        raise _LeftOut(f"cannot be read ({exc.strerror or exc})") from None
    st = got.stat
    if not src.named and st.st_nlink > inodes.get((st.st_dev, st.st_ino), 0):
        raise _LeftOut("a hard link to a file outside what is packed")
    if got.cut:
        raise _LeftOut(f"larger than {_MAX_FILE >> 20} MiB")
    return got.data, st.st_mtime


class _LeftOut(Exception):
    """A file not packed, and why (a line in REDACTIONS.txt and the summary)."""


@dataclass
class _Read:
    """One file read for packing: its source, its bytes and its modification time."""

    src: Source
    raw: bytes
    mtime: float


def _read_all(files: list[Source], notes: list[str]) -> list[_Read]:
    """Every file read once, through the bounded reader (a pipe the user named can be read only once);
    a file that cannot be packed is a note, never the end of the pack."""
    inodes = _inodes(files)
    out: list[_Read] = []
    for src in files:
        try:
            raw, mtime = _read(src, inodes)
        except _LeftOut as why:
            notes.append(f"{src.name}: left out: {why}")
            continue
        out.append(_Read(src, raw, mtime))
    return out


def _prepare(files: list[_Read], anon: Anonymizer | None, counts: Counter[str],
             notes: list[str] | None = None) -> list[Member]:
    notes = notes if notes is not None else []
    limits = Limits()
    budget = Budget(limits)
    members: list[Member] = []
    starts_of: dict[str, list[tuple[int, int]]] = {}
    idx_later: list[Member] = []
    for got in files:
        name, raw, mtime = got.src.name, got.raw, got.mtime
        new_name = redact_name(name, counts, anon)
        kind = _kind(name, raw)
        if kind == "idx":
            idx_later.append(Member(new_name, raw, mtime, kind))
            continue
        if kind in ("gz", "nvml-gz"):
            inner, warnings, ending = gunzip(raw, new_name, limits, budget)
            if ending == "over":  # a bomb or over the caps: this member out, never the whole pack
                notes.append(f"{new_name}: left out: " + "; ".join(w.removeprefix(f"{new_name}: ") for w in warnings))
                continue
            notes += warnings  # a crash-cut segment: kept as far as it decompresses, and said
            members.append(Member(new_name, _blob(new_name, inner, counts, anon, budget), mtime, kind))
            continue
        if kind == "binary":
            members.append(Member(new_name, _blob(new_name, raw, counts, anon, budget), mtime, kind))
            continue
        if name.endswith(".json"):
            raw = _redact_json_file(name, raw, counts)
        body, starts = redact_bytes(raw, counts, anon)
        starts_of[new_name] = starts
        members.append(Member(new_name, body, mtime, kind))
    for m in idx_later:
        log = m.name[: -len(".idx")] + ".log"
        log_starts = starts_of.get(log)
        members.append(Member(m.name, _remap_index(m.raw, log_starts) if log_starts else m.raw, m.mtime, "idx"))
    return members


def _blob(name: str, raw: bytes, counts: Counter[str], anon: Anonymizer | None, budget: Budget) -> bytes:
    """A binary or decompressed member redacted as what it holds; archives nested inside may unpack
    no more than the pack's decompression budget has left."""
    return redact_blob(name, raw, counts, anon, limit=max(min(budget.left, _MAX_FILE), 0))


def _build(members: list[Member], redactions: str, factor: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        def add(name: str, data: bytes, mtime: float) -> None:
            info = tarfile.TarInfo(f"{ROOT}/{name}")
            info.size = len(data)
            info.mtime = int(mtime)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))

        add("REDACTIONS.txt", redactions.encode(), time.time())
        for m in members:
            data = m.raw
            if m.kind in ("nvml", "nvml-gz"):
                data = downsample_nvml(data, factor)
            if m.kind in ("gz", "nvml-gz"):
                data = gzip.compress(data, mtime=int(m.mtime))
            add(m.name, data, m.mtime)
    return buf.getvalue()


def _redactions_text(counts: Counter[str], anon: Anonymizer | None, factor: int, files: int,
                     notes: list[str] | None = None) -> str:
    lines = ["Redactions made by `forensics pack` (kinds and counts; the values are never listed).", "",
             f"files: {files}"]
    if notes:
        lines += ["", "files left out or cut (the rest of the pack is whole):", *[f"- {n}" for n in notes], ""]
    if any(counts.values()):
        lines += [f"{kind}: {n}" for kind, n in sorted(counts.items()) if n]
    else:
        lines.append("no secret-shaped value was found")
    if anon is not None:
        lines += ["", "anonymized (consistent pseudonyms in every file and member name):",
                  f"host names: {len(anon.hosts) + len(anon.domains)}", f"user names: {len(anon.users)}",
                  f"e-mail addresses: {len(anon.emails)}", f"IP addresses: {len(anon.ips) + len(anon.ips6)}",
                  f"MAC addresses: {len(anon.macs)}"]
    if factor > 1:
        lines += ["", f"NVML series (nvml*.jsonl) downsampled 1:{factor} to fit --max-size "
                      "(each kept tick is a full keyframe; memory is the peak of the ticks it stands for)."]
    return "\n".join(lines) + "\n"


def _secret_values_files(files: list[Source]) -> Iterator[Source]:
    for src in files:
        if src.path.name == VALUES_FILE and src.path.parent.name == "host":
            yield src


def pack(paths: list[str], out: Path, anonymize: bool = False, max_size: int | None = None) -> PackResult:
    """Write the redacted archive; returns what was written."""
    files = _collect(paths)
    if not files:
        raise UsageError("nothing to pack")
    values = list(_secret_values_files(files))
    for src in values:  # the values each bundle's recorder classed as secret (keyed hashes)
        learn_bundle(src.path.parent.parent)
    files = [src for src in files if src not in values]
    notes: list[str] = []
    read = _read_all(files, notes)
    anon = Anonymizer(*known_names((r.src.name, r.raw) for r in read)) if anonymize else None
    if anon is not None:  # names of files left out are pseudonymous too
        notes = [anon.apply(n, Counter()) for n in notes]
    counts: Counter[str] = Counter()
    members = _prepare(read, anon, counts, notes)
    if not members:
        raise UsageError("nothing to pack: " + "; ".join(notes[:3]))
    factor = 1
    data = _build(members, _redactions_text(counts, anon, factor, len(members), notes), factor)
    has_nvml = any(m.kind in ("nvml", "nvml-gz") for m in members)
    while max_size is not None and len(data) > max_size and has_nvml and factor < 1024:
        smaller = _build(members, _redactions_text(counts, anon, factor * 4, len(members), notes), factor * 4)
        if len(smaller) >= len(data) - 256:
            break  # the NVML series no longer weigh anything: coarser samples would only lose detail
        data, factor = smaller, factor * 4
    try:
        out.write_bytes(data)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    return PackResult(out, len(data), len(members) + 1, counts, factor,
                      over_cap=max_size is not None and len(data) > max_size, notes=notes)
