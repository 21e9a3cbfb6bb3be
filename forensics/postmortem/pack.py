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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.errors import UsageError
from forensics.ingest.bundle import IDX_MAGIC
from forensics.postmortem.anonymize import Anonymizer, known_names
from forensics.postmortem.redact_blob import redact_blob, redact_name, redact_with_starts
from forensics.secret_values import FILE as VALUES_FILE
from forensics.secret_values import learn_bundle
from forensics.secrets import REDACTED

__all__ = ["Anonymizer", "PackResult", "downsample_nvml", "pack", "parse_size", "redact_bytes"]

ROOT = "case"
_RECEIPT = struct.Struct("<QQ")
_MAX_FILE = 1 << 30
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
            obj = json.loads(text)
        except ValueError:
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

    def summary(self) -> str:
        total = sum(self.counts.values())
        text = (f"forensics: wrote {self.path} ({self.size:,} bytes, {self.files} files; "
                f"{total} redaction(s), see REDACTIONS.txt")
        if self.downsampled > 1:
            text += f"; NVML series downsampled 1:{self.downsampled}"
        text += ")"
        if self.over_cap:
            text += "\nforensics: warning: still over --max-size after downsampling the NVML series"
        return text


def _unique(p: Path, used: set[str]) -> str:
    """The directory's name in the archive: its own, else with its parent's (``run-a/bundle``), else
    numbered."""
    full = p.resolve()
    for name in (full.name, f"{full.parent.name}/{full.name}"):
        if name and name not in used:
            used.add(name)
            return name
    n = 2
    while f"{full.name}-{n}" in used:
        n += 1
    used.add(f"{full.name}-{n}")
    return f"{full.name}-{n}"


def _collect(paths: list[str]) -> list[tuple[str, Path]]:
    """(archive name, file) for every file behind ``paths``; a bundle keeps its directory name."""
    out: list[tuple[str, Path]] = []
    used: set[str] = set()
    for arg in paths:
        p = Path(arg)
        if not p.exists():
            raise UsageError(f"no such file or directory: {arg}")
        if p.is_file():
            name = f"logs/{p.name}"
            if name in used:
                name = f"logs/{len(used)}-{p.name}"
            used.add(name)
            out.append((name, p))
            continue
        base = _unique(p, used)
        for dirpath, dirnames, filenames in os.walk(p, followlinks=False):
            dirnames.sort()
            for fn in sorted(filenames):
                f = Path(dirpath) / fn
                if f.is_symlink() or not f.is_file() or fn.endswith(".tmp"):
                    continue
                out.append((f"{base}/{f.relative_to(p).as_posix()}", f))
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
        data = json.loads(raw)
    except ValueError:
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
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


def _prepare(files: list[tuple[str, Path]], anon: Anonymizer | None, counts: Counter[str]) -> list[Member]:
    members: list[Member] = []
    starts_of: dict[str, list[tuple[int, int]]] = {}
    idx_later: list[Member] = []
    for name, path in files:
        st = path.stat()
        if st.st_size > _MAX_FILE:
            raise UsageError(f"{path}: larger than {_MAX_FILE >> 20} MiB; not packed")
        raw = path.read_bytes()
        kind = _kind(name, raw)
        new_name = redact_name(name, counts, anon)
        if kind == "idx":
            idx_later.append(Member(new_name, raw, st.st_mtime, kind))
            continue
        if kind in ("gz", "nvml-gz"):
            try:
                inner = gzip.decompress(raw)
            except (OSError, EOFError):
                inner = b""
            members.append(Member(new_name, redact_blob(new_name, inner, counts, anon), st.st_mtime, kind))
            continue
        if kind == "binary":
            members.append(Member(new_name, redact_blob(new_name, raw, counts, anon), st.st_mtime, kind))
            continue
        if name.endswith(".json"):
            raw = _redact_json_file(name, raw, counts)
        body, starts = redact_bytes(raw, counts, anon)
        starts_of[new_name] = starts
        members.append(Member(new_name, body, st.st_mtime, kind))
    for m in idx_later:
        log = m.name[: -len(".idx")] + ".log"
        log_starts = starts_of.get(log)
        members.append(Member(m.name, _remap_index(m.raw, log_starts) if log_starts else m.raw, m.mtime, "idx"))
    return members


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


def _redactions_text(counts: Counter[str], anon: Anonymizer | None, factor: int, files: int) -> str:
    lines = ["Redactions made by `forensics pack` (kinds and counts; the values are never listed).", "",
             f"files: {files}"]
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


def pack(paths: list[str], out: Path, anonymize: bool = False, max_size: int | None = None) -> PackResult:
    """Write the redacted archive; returns what was written."""
    files = _collect(paths)
    if not files:
        raise UsageError("nothing to pack")
    for _name, path in files:  # the values each bundle's recorder classed as secret (keyed hashes)
        if path.name == VALUES_FILE and path.parent.name == "host":
            learn_bundle(path.parent.parent)
    files = [(n, p) for n, p in files if not (p.name == VALUES_FILE and p.parent.name == "host")]
    anon = Anonymizer(*known_names(files)) if anonymize else None
    counts: Counter[str] = Counter()
    members = _prepare(files, anon, counts)
    factor = 1
    data = _build(members, _redactions_text(counts, anon, factor, len(members)), factor)
    has_nvml = any(m.kind in ("nvml", "nvml-gz") for m in members)
    while max_size is not None and len(data) > max_size and has_nvml and factor < 1024:
        smaller = _build(members, _redactions_text(counts, anon, factor * 4, len(members)), factor * 4)
        if len(smaller) >= len(data) - 256:
            break  # the NVML series no longer weigh anything: coarser samples would only lose detail
        data, factor = smaller, factor * 4
    try:
        out.write_bytes(data)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    return PackResult(out, len(data), len(members) + 1, counts, factor,
                      over_cap=max_size is not None and len(data) > max_size)
