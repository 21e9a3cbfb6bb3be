"""A fleet of bundles replayed from real recordings: each copy of a recorded bundle gets another host name,
other GPUs (PCI bus id, UUID, serial) and another time, while every log line stays the recorded one.

What is rewritten, consistently in every file of the copy:

- the host name: ``manifest.json``, the ``nvml*.jsonl`` headers and the ``host/*.json`` snapshots;
- each GPU's bus id (in every spelling, ``0000:00:06.0``, ``00000000:00:06.0``, ``PCI:0000:00:06``), UUID
  and serial, everywhere they appear (logs included: the same GPU must keep one address), each replaced
  by a string of the same length so the byte offsets of the receipt indexes (``*.idx``) stay right;
- time, shifted by one whole number of seconds: the manifest's ``*_ns`` fields and ISO stamps, the
  receipts of ``*.idx``, NVML sample and event times, ``heartbeat``, ``YYYY-MM-DD HH:MM:SS`` stamps in
  the logs (same width), the ``*_ns`` fields of PyTorch flight-recorder dumps, nvidia-smi's timestamp.

Used by the fleet tests and ``bench/bench_fleet.py``: ``python -m forensics.fleet.replay OUT N``.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import re
import struct
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forensics.ingest.bundle import IDX_MAGIC
from forensics.lazy_re import lazy_compile

__all__ = ["Placed", "replay_fleet", "samples"]

#: bus ids of the eight GPUs of a typical 8-GPU server (HGX H100/H200 boards)
SLOTS = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
_RECEIPT = struct.Struct("<QQ")
_STAMP = lazy_compile(rb"(\d{4}-\d{2}-\d{2})([ _T])(\d{2}:\d{2}:\d{2})")
_GLOG = lazy_compile(rb"(?<![0-9A-Za-z])([IWEF])(\d{4}) (\d{2}:\d{2}:\d{2})")  # glog/c10d: E1129 17:41:01.900
_NVML_T = lazy_compile(rb'"t":(\d+)')
_SMI_TS = lazy_compile(rb"<timestamp>([^<]+)</timestamp>")
_TEXT_SUFFIXES = (".log", ".jsonl", ".json", ".xml", ".txt")


@dataclass
class Placed:
    """One replayed bundle: where it is, what it replays, and the host and GPUs it was given."""

    path: str
    sample: str
    host: str
    start_ns: int
    gpus: list[dict[str, Any]] = field(default_factory=list)  # {old_pci, pci, uuid, serial, slot}


def samples(root: str | Path) -> list[Path]:
    """The recorded samples under ``root`` (folders with ``bundle/`` and ``expected.toml``), sorted."""
    return sorted(p for p in Path(root).iterdir() if (p / "bundle" / "manifest.json").is_file()
                  and (p / "expected.toml").is_file())


def _gpu_pool(rng: random.Random, n_hosts: int) -> dict[tuple[int, int], dict[str, str]]:
    """Fixed identities of every (host, slot): a GPU keeps its serial and UUID across incidents."""
    pool = {}
    for h in range(n_hosts):
        for s, bus in enumerate(SLOTS):
            hexes = "".join(rng.choice("0123456789abcdef") for _ in range(32))
            uuid = f"GPU-{hexes[:8]}-{hexes[8:12]}-{hexes[12:16]}-{hexes[16:20]}-{hexes[20:]}"
            pool[(h, s)] = {"bus": bus, "uuid": uuid, "serial": str(1650000000000 + rng.randrange(10**10))}
    return pool


def _shift_iso(text: str, shift_ns: int) -> str:
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        return text
    moved = datetime.fromtimestamp(stamp.timestamp() + shift_ns / 1e9, UTC)
    return moved.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _manifest(raw: bytes, host: str, shift_ns: int) -> bytes:
    data = json.loads(raw)
    data["host"] = host

    def walk(obj: Any) -> Any:
        if isinstance(obj, dict):
            for k, v in obj.items():
                if isinstance(v, int) and not isinstance(v, bool) and (k.endswith("_ns") or k in (
                        "monotonic", "boottime", "btime")) and v > 10**17:
                    obj[k] = v + shift_ns
                elif k in ("start", "end", "heartbeat") and isinstance(v, str):
                    obj[k] = _shift_iso(v, shift_ns)
                else:
                    walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)
        return obj

    return json.dumps(walk(data), indent=2).encode()


def _shift_idx(raw: bytes, shift_ns: int) -> bytes:
    if not raw.startswith(IDX_MAGIC):
        return raw
    body = raw[len(IDX_MAGIC):]
    usable = len(body) - len(body) % _RECEIPT.size
    out = bytearray(IDX_MAGIC)
    for end, ns in _RECEIPT.iter_unpack(body[:usable]):
        out += _RECEIPT.pack(end, ns + shift_ns)
    return bytes(out + body[usable:])


def _shift_text(raw: bytes, shift_s: int, year: int) -> bytes:
    """Same-width ``YYYY-MM-DD[ _T]HH:MM:SS`` and glog ``E1129 17:41:01`` stamps (of ``year``) moved by
    ``shift_s`` seconds."""
    def move(m: re.Match[bytes]) -> bytes:
        try:
            stamp = datetime.strptime(f"{m.group(1).decode()} {m.group(3).decode()}", "%Y-%m-%d %H:%M:%S")
        except ValueError:
            return m.group(0)
        moved = datetime.fromtimestamp(stamp.replace(tzinfo=UTC).timestamp() + shift_s, UTC)
        return moved.strftime("%Y-%m-%d").encode() + m.group(2) + moved.strftime("%H:%M:%S").encode()

    def move_glog(m: re.Match[bytes]) -> bytes:
        try:
            stamp = datetime.strptime(f"{year}{m.group(2).decode()} {m.group(3).decode()}", "%Y%m%d %H:%M:%S")
        except ValueError:
            return m.group(0)
        moved = datetime.fromtimestamp(stamp.replace(tzinfo=UTC).timestamp() + shift_s, UTC)
        return m.group(1) + moved.strftime("%m%d %H:%M:%S").encode()

    return _GLOG.sub(move_glog, _STAMP.sub(move, raw))


def _shift_nvml(raw: bytes, shift_ns: int) -> bytes:
    def move(m: re.Match[bytes]) -> bytes:
        t = int(m.group(1))
        return b'"t":' + str(t + (shift_ns // 10**6 if t < 10**15 else shift_ns)).encode()

    return _NVML_T.sub(move, raw)


def _shift_smi(raw: bytes, shift_s: int) -> bytes:
    def move(m: re.Match[bytes]) -> bytes:
        try:
            stamp = datetime.strptime(m.group(1).decode(), "%a %b %d %H:%M:%S %Y")
        except ValueError:
            return m.group(0)
        moved = datetime.fromtimestamp(stamp.replace(tzinfo=UTC).timestamp() + shift_s, UTC)
        return b"<timestamp>" + moved.strftime("%a %b %d %H:%M:%S %Y").encode() + b"</timestamp>"

    return _SMI_TS.sub(move, raw)


def _shift_pickle(raw: bytes, shift_ns: int) -> bytes:
    try:
        data = pickle.loads(raw)  # noqa: S301 - our own recorded sample files, never user input
    except Exception:
        return raw

    def walk(obj: Any) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                if isinstance(v, int) and not isinstance(v, bool) and str(k).endswith("_ns") and v > 10**17:
                    obj[k] = v + shift_ns
                else:
                    walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    walk(data)
    return pickle.dumps(data)


def _identity_rewrites(old_gpus: list[dict[str, Any]], new: list[dict[str, str]]) -> list[tuple[re.Pattern[bytes],
                                                                                                    bytes]]:
    subs: list[tuple[re.Pattern[bytes], bytes]] = []
    for old, ident in zip(old_gpus, new, strict=True):
        m = re.fullmatch(r"([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", str(old.get("pci", "")))
        if m:
            bus, dev = m.group(2), m.group(3)
            subs.append((re.compile(rb"(?i)(?<![0-9a-f])((?:0000|00000000):)" + f"{bus}:{dev}".encode()
                                    + rb"(?=[.:]|\b)"), rb"\g<1>" + f"{ident['bus']}:00".encode()))
        for key in ("uuid", "serial"):
            value = str(old.get(key) or "")
            if len(value) >= 8:
                replacement = ident[key][: len(value)].ljust(len(value), "0")
                subs.append((re.compile(re.escape(value.encode())), replacement.encode()))
    return subs


def _copy_bundle(src: Path, dst: Path, host: str, old_host: str, shift_s: int,
                 subs: list[tuple[re.Pattern[bytes], bytes]]) -> None:
    shift_ns = shift_s * 10**9
    manifest = json.loads((src / "manifest.json").read_bytes())
    start, end = manifest.get("start_ns"), manifest.get("heartbeat_ns") or manifest.get("end_ns")
    year = datetime.fromtimestamp(start / 1e9, UTC).year if isinstance(start, int) else 2026
    # files dated as the recorder left them (a year-less stamp takes its year from the file's date)
    mtime_ns = (end if isinstance(end, int) else start if isinstance(start, int) else 0) + shift_ns
    host_token = json.dumps(old_host).encode()
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        target = dst / rel
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        raw = path.read_bytes()
        name = path.name
        if name == "manifest.json":
            raw = _manifest(raw, host, shift_ns)
        elif name.endswith(".idx"):
            raw = _shift_idx(raw, shift_ns)
        elif name == "heartbeat":
            parts = raw.decode().split()
            if len(parts) == 2 and parts[1].isdigit():
                raw = f"{_shift_iso(parts[0], shift_ns)} {int(parts[1]) + shift_ns}\n".encode()
        elif rel.parts[0] == "torch" and not name.endswith(_TEXT_SUFFIXES):
            raw = _shift_pickle(raw, shift_ns)
        if name.endswith(_TEXT_SUFFIXES) and name != "manifest.json":
            for pattern, replacement in subs:
                raw = pattern.sub(replacement, raw)
            if name.endswith((".json", ".jsonl")):
                raw = raw.replace(host_token, json.dumps(host).encode())
            if name.startswith("nvml"):
                raw = _shift_nvml(raw, shift_ns)
            elif name.endswith(".xml"):
                raw = _shift_smi(raw, shift_s)
            elif name.endswith(".log"):
                raw = _shift_text(raw, shift_s, year)
        target.write_bytes(raw)
        if mtime_ns > 0:
            os.utime(target, ns=(mtime_ns, mtime_ns))


def replay_fleet(sample_root: str | Path, out: str | Path, n: int, seed: int = 12, days: int = 7,
                 hosts: int | None = None, hot_sample: str = "device-assert-h200",
                 start: str = "2026-11-23T00:00:00Z") -> list[Placed]:
    """Write ``n`` bundles under ``out`` (``out/<host>/<sample>-<i>``), cycling through the samples, on
    ``hosts`` hosts of 8 GPUs over ``days`` days from ``start``. Two of every three replays of ``hot_sample``
    land on one fixed GPU (host 0, slot 3): the GPU that keeps coming back. Returns what was placed where."""
    rng = random.Random(seed)
    found = samples(sample_root)
    if not found:
        raise ValueError(f"no recorded samples under {sample_root}")
    n_hosts = hosts or max(2, n // 8)
    pool = _gpu_pool(rng, n_hosts)
    base = int(datetime.fromisoformat(start).timestamp())
    out = Path(out)
    placed: list[Placed] = []
    hot_seen = 0
    for i in range(n):
        sample = found[i % len(found)]
        bundle = sample / "bundle"
        manifest = json.loads((bundle / "manifest.json").read_bytes())
        gpus_doc = json.loads((bundle / "host" / "gpus.json").read_bytes()) if (
            bundle / "host" / "gpus.json").is_file() else {}
        old = sorted(gpus_doc.get("gpus", []), key=lambda g: str(g.get("pci")))
        h = rng.randrange(n_hosts)
        first = rng.randrange(len(SLOTS) - len(old) + 1) if old else 0
        if sample.name == hot_sample:
            hot_seen += 1
            if hot_seen % 3 != 0:
                h, first = 0, 3
        host = f"node-{h:03d}"
        idents = [pool[(h, first + k)] for k in range(len(old))]
        target_s = base + rng.randrange(days * 86400)
        shift_s = target_s - int(manifest["start_ns"]) // 10**9
        dst = out / host / f"{sample.name}-{i:05d}"
        _copy_bundle(bundle, dst, host, str(manifest.get("host", "")), shift_s, _identity_rewrites(old, idents))
        placed.append(Placed(str(dst), sample.name, host, int(manifest["start_ns"]) + shift_s * 10**9, [
            {"old_pci": g.get("pci"), "pci": f"0000:{ident['bus']}:00.0", "uuid": ident["uuid"],
             "serial": ident["serial"][: len(str(g.get("serial", "")))] or ident["serial"], "slot": first + k}
            for k, (g, ident) in enumerate(zip(old, idents, strict=True))]))
    return placed


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) < 2 or not args[1].isdigit():
        sys.stderr.write("usage: python -m forensics.fleet.replay OUT N [SAMPLES_DIR]\n")
        return 2
    root = args[2] if len(args) > 2 else str(Path(__file__).resolve().parents[2] / "samples" / "recorded")
    placed = replay_fleet(root, args[0], int(args[1]))
    sys.stderr.write(f"wrote {len(placed)} bundles under {args[0]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
