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
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.errors import UsageError
from forensics.ingest.bundle import IDX_MAGIC
from forensics.ingest.reader import Budget, Limits, gunzip, loads_bounded
from forensics.lazy_re import lazy_compile
from forensics.secrets import REDACTED, has_secret, mask_text, redact_text

__all__ = ["Anonymizer", "PackResult", "downsample_nvml", "pack", "parse_size", "redact_bytes"]

ROOT = "case"
_RECEIPT = struct.Struct("<QQ")
_MAX_FILE = 1 << 30
_FACTS_CAP = 8 << 20
_MAX_FILES = 20_000
_IPV4 = lazy_compile(r"(?<![\d.])(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}(?![\d.])")
_HOME = lazy_compile(r"(?P<pre>/home/|/Users/|/u/|C:\\\\?Users\\\\?)(?P<user>[A-Za-z0-9._-]+)")
_KEEP_IPS = frozenset({"0.0.0.0", "127.0.0.1", "255.255.255.255"})


def parse_size(text: str) -> int:
    """``20M``, ``1.5G``, ``500k``, ``1048576`` → bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)(?:i?[bB])?\s*", text)
    if not m:
        raise UsageError(f"--max-size wants a size such as 20M or 1.5G, got {text!r}")
    return int(float(m[1]) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m[2].lower()])


def _words(names: dict[str, str], after: str) -> re.Pattern[str] | None:
    """One regex for whole-word occurrences of ``names`` (longest first)."""
    if not names:
        return None
    ordered = sorted(names, key=len, reverse=True)
    return re.compile(r"(?<![A-Za-z0-9_-])(?:" + "|".join(map(re.escape, ordered)) + ")" + after)


class Anonymizer:
    """Consistent pseudonyms for host names, user names and IPv4 addresses across every file."""

    def __init__(self, hosts: set[str], users: set[str]) -> None:
        self.hosts = {h: f"host-{i:02d}" for i, h in enumerate(sorted(h for h in hosts if len(h) >= 2), 1)}
        self.users = {u: f"user{i}" for i, u in enumerate(sorted(u for u in users if len(u) >= 2), 1)}
        self.ips: dict[str, str] = {}
        self._host_re = _words(self.hosts, r"(?![A-Za-z0-9_])")
        self._user_re = _words(self.users, r"(?![A-Za-z0-9_-])")

    def _ip(self, m: re.Match[str]) -> str:
        ip = m.group(0)
        if ip in _KEEP_IPS:
            return ip
        if ip not in self.ips:
            n = len(self.ips) + 1
            self.ips[ip] = f"192.0.2.{n}" if n < 255 else f"198.51.100.{n % 254 + 1}"  # documentation ranges
        return self.ips[ip]

    def apply(self, text: str, counts: Counter[str]) -> str:
        def count(kind: str, repl: str) -> str:
            counts[kind] += 1
            return repl

        text = _HOME.sub(lambda m: count("home-path", m["pre"] + self.users.get(m["user"], "user")), text)
        if self._host_re is not None:
            text = self._host_re.sub(lambda m: count("hostname", self.hosts[m.group(0)]), text)
        if self._user_re is not None:
            text = self._user_re.sub(lambda m: count("user-name", self.users[m.group(0)]), text)
        def ip(m: re.Match[str]) -> str:
            new = self._ip(m)
            if new != m.group(0):
                counts["ip-address"] += 1
            return new

        return _IPV4.sub(ip, text)


def _redact_line(line: str, counts: Counter[str], anon: Anonymizer | None) -> str:
    line = redact_text(line, counts)[0]
    return anon.apply(line, counts) if anon is not None else line


def redact_bytes(raw: bytes, counts: Counter[str],
                 anon: Anonymizer | None = None) -> tuple[bytes, list[tuple[int, int]]]:
    """Redact text line by line (bytes that are not UTF-8 survive as they were). Returns the new bytes
    and, per line, (old start offset, new start offset) for rewriting receipt indexes — empty when
    nothing changed (the common case for a big log: one search over the whole text decides)."""
    if anon is None and not has_secret(raw.decode("utf-8", "surrogateescape")):
        return raw, []
    out = io.BytesIO()
    starts: list[tuple[int, int]] = []
    pos = 0
    for piece in raw.splitlines(keepends=True):
        starts.append((pos, out.tell()))
        text = piece.decode("utf-8", "surrogateescape")
        new = _redact_line(text, counts, anon)
        out.write(new.encode("utf-8", "surrogateescape"))
        pos += len(piece)
    starts.append((pos, out.tell()))
    return out.getvalue(), starts


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


def _known_names(files: list[Source]) -> tuple[set[str], set[str]]:
    from forensics.ingest.reader import load_json, read_file

    hosts: set[str] = set()
    users: set[str] = set()
    for src in files:
        base = src.name.rsplit("/", 1)[-1]
        if base not in ("manifest.json", "system.json", "env.json", "nvml.jsonl"):
            continue
        try:
            raw = read_file(src.path, 1 << 20 if base == "nvml.jsonl" else _FACTS_CAP, follow=src.named,
                            named=src.named).data
        except OSError:
            continue
        data = load_json(raw.split(b"\n", 1)[0] if base == "nvml.jsonl" else raw)
        if not isinstance(data, dict):
            continue
        for key in ("host", "hostname", "HOSTNAME"):
            if isinstance(data.get(key), str):
                hosts.add(data[key].split(".")[0])
                hosts.add(data[key])
        for key in ("USER", "LOGNAME", "USERNAME", "SUDO_USER"):
            if isinstance(data.get(key), str):
                users.add(data[key])
        for value in (data.get("cwd"), data.get("HOME")):
            if isinstance(value, str) and (m := _HOME.search(value)):
                users.add(m["user"])
    users -= {"root"}
    return hosts, users


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


def _prepare(files: list[Source], anon: Anonymizer | None, counts: Counter[str],
             notes: list[str] | None = None) -> list[Member]:
    notes = notes if notes is not None else []
    limits = Limits()
    budget = Budget(limits)
    inodes = _inodes(files)
    members: list[Member] = []
    starts_of: dict[str, list[tuple[int, int]]] = {}
    idx_later: list[Member] = []
    for src in files:
        name = src.name
        new_name = anon.apply(name, Counter()) if anon is not None else name
        try:
            raw, mtime = _read(src, inodes)
        except _LeftOut as why:
            notes.append(f"{new_name}: left out: {why}")
            continue
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
            body, _ = redact_bytes(inner, counts, anon)
            members.append(Member(new_name, body, mtime, kind))
            continue
        if kind == "binary":
            members.append(Member(new_name, _redact_binary(raw, counts), mtime, kind))
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


def _redact_binary(raw: bytes, counts: Counter[str]) -> bytes:
    """Secrets inside a binary file (a flight-recorder pickle) replaced by as many ``*`` — the length
    stays, so length-prefixed strings stay valid."""
    masked, local = mask_text(raw.decode("latin-1"))
    if not local:
        return raw
    counts.update(local)
    return masked.encode("latin-1")


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
                  f"host names: {len(anon.hosts)}", f"user names: {len(anon.users)}",
                  f"IPv4 addresses: {len(anon.ips)}"]
    if factor > 1:
        lines += ["", f"NVML series (nvml*.jsonl) downsampled 1:{factor} to fit --max-size "
                      "(each kept tick is a full keyframe; memory is the peak of the ticks it stands for)."]
    return "\n".join(lines) + "\n"


def pack(paths: list[str], out: Path, anonymize: bool = False, max_size: int | None = None) -> PackResult:
    """Write the redacted archive; returns what was written."""
    files = _collect(paths)
    if not files:
        raise UsageError("nothing to pack")
    anon = Anonymizer(*_known_names(files)) if anonymize else None
    counts: Counter[str] = Counter()
    notes: list[str] = []
    members = _prepare(files, anon, counts, notes)
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
