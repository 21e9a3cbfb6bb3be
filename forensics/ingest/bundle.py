"""The on-disk bundle that ``forensics record`` writes, seen from the reading side.

A bundle is a directory with ``manifest.json`` whose ``format`` is
``gpu-forensics-bundle``. The full layout is documented in docs/bundle-format.md.
Readers are gated on the manifest's ``version``: a newer major version than
:data:`VERSION` is still read, with a warning, as far as the files are understood.

This module also owns the receipt index format (``stdout.idx``/``stderr.idx``): an
8-byte magic, then 16-byte little-endian records ``(end_offset: u64, utc_ns: u64)``,
meaning "the stream's bytes before ``end_offset`` had been received by ``utc_ns``".
A torn last record (crash mid-write) is ignored.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forensics.ingest.sources import InputFile, Limits

__all__ = [
    "FORMAT",
    "IDX_MAGIC",
    "MANIFEST",
    "VERSION",
    "is_bundle",
    "pack_receipt",
    "read_bundle_files",
    "read_manifest",
    "receipt_lookup",
    "source_of",
    "tag_members",
]

FORMAT = "gpu-forensics-bundle"
VERSION = 1
MANIFEST = "manifest.json"
IDX_MAGIC = b"GFRIDX1\n"
_RECEIPT = struct.Struct("<QQ")

#: bundle file (relative path) -> Event.source of what it holds
_SOURCES = {
    "stdout.log": "stdout",
    "stderr.log": "stderr",
    "kmsg.log": "kmsg",
    "journal.jsonl": "journal",
    "dmesg.txt": "kmsg",
    "nvml-events.jsonl": "nvml",
    "host-events.xml": "winevent",  # the Windows host's System log (WSL2 / native Windows recordings)
    "manifest.json": "recorder",
    "recorder.log": "recorder",
}
#: files that are indexes or recorder state, not evidence to parse
_SKIP_SUFFIXES = (".idx", ".tmp")
_SKIP_NAMES = frozenset({"heartbeat", ".forensics-reserve",  # the recorder's ballast (record/degrade.py)
                         "live.jsonl", "live.log"})  # the live watcher's alerts and its own messages (forensics/live)


def pack_receipt(end_offset: int, utc_ns: int) -> bytes:
    return _RECEIPT.pack(end_offset, utc_ns)


def receipt_lookup(raw: bytes | None) -> Callable[[int], int | None] | None:
    """``offset -> utc_ns`` from a receipt index: the time by which the byte at
    ``offset`` had been received; ``None`` for bytes after the last record."""
    if not raw or not raw.startswith(IDX_MAGIC):
        return None
    body = memoryview(raw)[len(IDX_MAGIC):]
    usable = len(body) - len(body) % _RECEIPT.size
    ends: list[int] = []
    times: list[int] = []
    for end, ns in _RECEIPT.iter_unpack(body[:usable]):
        if ends and end < ends[-1]:
            continue  # never seen from the recorder; a damaged file must not break bisect
        ends.append(end)
        times.append(ns)
    if not ends:
        return None

    def at(offset: int) -> int | None:
        i = bisect_right(ends, offset)
        return times[i] if i < len(times) else None

    return at


#: A manifest is a few KiB; one larger than this is not one (read through the bounded reader).
MANIFEST_CAP = 8 << 20
#: A receipt index is 16 bytes a write; this is hours of a chatty run.
_IDX_CAP = 256 << 20


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest of bundle directory ``path``, or ``None`` when it is not a bundle (a
    ``manifest.json`` that is a FIFO, a device or a link to one, larger than :data:`MANIFEST_CAP`,
    nested deeper than JSON allows here, or not JSON, is not a manifest)."""
    from forensics.ingest.reader import read_json

    data = read_json(path / MANIFEST, MANIFEST_CAP)
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def is_bundle(path: Path) -> bool:
    return read_manifest(path) is not None


def source_of(rel: str) -> str | None:
    """The Event.source for a bundle file (``None``: not a file to analyze)."""
    name = rel.rsplit("/", 1)[-1]
    if name in _SKIP_NAMES or name.endswith(_SKIP_SUFFIXES):
        return None
    if rel.startswith("torch/"):
        return "torch"  # flight-recorder pickles too: read as plain data, never unpickled
    if rel.startswith("host/"):
        # The recorder's own JSON facts (command, environment, versions, NVML inventory) and
        # pip freeze are for people and the TUI; fed to the catch-all text parser they would
        # turn a command line that mentions an error into evidence. So are the Windows snapshot's
        # CIM property listings (windows-*.txt, read into windows-gpus.json and system.json).
        # Tool output is parsed.
        facts = name.endswith(".json") or name == "pip-freeze.txt" or name.startswith("windows-")
        return None if facts else "host"
    if name == "nvml.jsonl" or (name.startswith("nvml.") and ".jsonl" in name):
        return "nvml"
    return _SOURCES.get(rel, "recorder")


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _manifest_hints(manifest: dict[str, Any]) -> tuple[str | None, int | None, str | None]:
    host = manifest.get("host") if isinstance(manifest.get("host"), str) else None
    tz_name = manifest.get("tz_name") if isinstance(manifest.get("tz_name"), str) else None
    return host, _int_or_none(manifest.get("boot_time_ns")), tz_name


def _tag(item: InputFile, rel: str, manifest: dict[str, Any], sibling: Callable[[str], bytes | None]) -> bool:
    """Tag one bundle file in place from its path inside the bundle; ``False`` when it is not
    a file to analyze. ``sibling(rel)`` returns another file of the same bundle, if there."""
    source = source_of(rel)
    if source is None or (not item.raw and not item.warnings):
        return False  # not evidence, or an empty file (a source that had nothing to say)
    if rel == "recording-degraded.json" and manifest.get("degraded"):
        return False  # the manifest says the same (the marker is for when it could not be written)
    if source == "nvml" and not rel.endswith(".gz") and sibling(rel + ".gz") is not None:
        return False  # a segment compressed just before a crash: the .gz holds the same lines
    host, boot, tz_name = _manifest_hints(manifest)
    item.source = source
    item.host = item.host or host
    item.boot_time_ns = boot
    item.tz_name = tz_name
    if source in ("stdout", "stderr"):
        item.receipt_index = sibling(f"{source}.idx")
    return True


def _version_warning(where: str, manifest: dict[str, Any]) -> str | None:
    version = manifest.get("version")
    if isinstance(version, int) and version > VERSION:
        return f"{where}: bundle format version {version} is newer than this reader ({VERSION}); reading what is known"
    return None


def read_bundle_files(path: Path, limits: Limits) -> Iterator[InputFile]:
    """Every file of the bundle, tagged with what the manifest says about it."""
    from forensics.ingest.sources import _walk

    manifest = read_manifest(path) or {}
    warning = _version_warning(str(path), manifest)
    from forensics.secret_values import learn_bundle

    learn_bundle(path)  # what the recorder classed as secret is redacted in everything shown from here on

    def sibling(rel: str) -> bytes | None:
        from forensics.ingest.reader import read_file

        try:
            return read_file(path / rel, _IDX_CAP, follow=False).data
        except OSError:
            return None

    for item in _walk(path, limits):
        try:
            rel = Path(item.display).relative_to(path).as_posix()
        except ValueError:
            rel = Path(item.display).name
        if _tag(item, rel, manifest, sibling):
            if warning and rel == MANIFEST:
                item.warnings.append(warning)
            yield item


def tag_members(files: list[InputFile]) -> list[InputFile]:
    """Members of an archive (``archive!dir/file``) that belong to a packed bundle, tagged as
    :func:`read_bundle_files` tags a bundle directory (other members pass through unchanged).
    For ``forensics/ingest/sources.py`` to call on the members of one archive."""
    from forensics.ingest.reader import load_json

    manifests: dict[str, dict[str, Any]] = {}
    for f in files:
        head, sep, inner = f.display.rpartition("!")
        if sep and inner.rsplit("/", 1)[-1] == MANIFEST:
            data = load_json(f.raw[:MANIFEST_CAP + 1])  # (an archive member: bytes, never mapped)
            if isinstance(data, dict) and data.get("format") == FORMAT:
                manifests[f.display[: len(f.display) - len(MANIFEST)]] = data
    if not manifests:
        return files
    by_display = {f.display: f for f in files}
    out: list[InputFile] = []
    for f in files:
        prefix = next((p for p in manifests if f.display.startswith(p)), None)
        if prefix is None:
            out.append(f)
            continue

        def sibling(rel: str, prefix: str = prefix) -> bytes | None:
            other = by_display.get(prefix + rel)
            return other.raw[:] if other is not None else None

        if _tag(f, f.display[len(prefix):], manifests[prefix], sibling):
            warning = _version_warning(prefix.rstrip("/"), manifests[prefix]) if f.display.endswith(MANIFEST) else None
            if warning:
                f.warnings.append(warning)
            out.append(f)
    return out
