"""Make a multi-host job out of one recorded bundle: each rank's lines go to their own host's copy,
whose clock is shifted.

A recorded bundle (``samples/recorded/``) holds one host's view of a job; the device cannot record
two hosts. :func:`split_bundle` writes one bundle per host: the manifest's host renamed and every
stamp it holds moved by the host's clock error; ``stderr.log``'s ``[rankN]:`` lines kept only on
that rank's host (lines without a rank prefix, the launcher's and the crash dumps', stay on every
host); the printed stamps in the text (glog ``E1129 17:41:01.900702307``, torchrun's
``2026-11-29_17:42:08``) and the receipt index (``*.idx``) moved by the same amount; NVML samples'
``t`` and the flight-recorder dumps' ``*_ns`` fields too. Kernel records are boot-relative, so the
shifted ``boot_time_ns`` moves them.
"""

from __future__ import annotations

import json
import pickle
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from forensics.ingest.bundle import pack_receipt, receipt_lookup

NS = 1_000_000_000
_RANK = re.compile(rb"^\[rank(\d+)\]:")
_GLOG = re.compile(rb"(?<![\w.])([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+)")
_TORCHRUN = re.compile(rb"(\d{4})-(\d\d)-(\d\d)_(\d\d):(\d\d):(\d\d)")
_MANIFEST_NS = ("start_ns", "end_ns", "boot_time_ns", "heartbeat_ns")


def _shift_text(line: bytes, year: int, shift_ns: int) -> bytes:
    def glog(m: re.Match[bytes]) -> bytes:
        frac = m.group(7)
        t = datetime(year, int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)), int(m.group(6)),
                     tzinfo=UTC)
        ns = int(frac.ljust(9, b"0")[:9]) + shift_ns
        t += timedelta(seconds=ns // NS)
        new_frac = str(ns % NS).rjust(9, "0")[:len(frac)]
        return m.group(1) + t.strftime("%m%d %H:%M:%S").encode() + b"." + new_frac.encode()

    def torchrun(m: re.Match[bytes]) -> bytes:
        y, mo, d, hh, mm, ss = (int(g) for g in m.groups())
        t = datetime(y, mo, d, hh, mm, ss, tzinfo=UTC) + timedelta(seconds=shift_ns // NS)
        return t.strftime("%Y-%m-%d_%H:%M:%S").encode()

    return _TORCHRUN.sub(torchrun, _GLOG.sub(glog, line))


def _stream(src: Path, dst: Path, name: str, keep: set[int] | None, year: int, shift_ns: int) -> None:
    raw = (src / f"{name}.log").read_bytes()
    at = receipt_lookup((src / f"{name}.idx").read_bytes() if (src / f"{name}.idx").exists() else None)
    out: list[bytes] = []
    index: list[bytes] = []
    offset = 0
    for line in raw.splitlines(keepends=True):
        m = _RANK.match(line)
        mine = keep is None or m is None or int(m.group(1)) in keep
        if mine:
            new = _shift_text(line, year, shift_ns)
            out.append(new)
            ts = at(offset) if at else None
            if ts is not None:
                index.append(pack_receipt(sum(len(x) for x in out), ts + shift_ns))
        offset += len(line)
    (dst / f"{name}.log").write_bytes(b"".join(out))
    if at is not None:
        (dst / f"{name}.idx").write_bytes(b"GFRIDX1\n" + b"".join(index))


def _shift_ns_fields(obj: Any, shift_ns: int) -> Any:
    if isinstance(obj, dict):
        return {k: (v + shift_ns if isinstance(k, str) and k.endswith("_ns") and isinstance(v, int) and v > 10**17
                    else _shift_ns_fields(v, shift_ns)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_shift_ns_fields(v, shift_ns) for v in obj]
    return obj


def _nvml(path: Path, host: str, shift_ns: int) -> None:
    lines = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if "format" in rec:
            rec["host"] = host
        elif isinstance(rec.get("t"), int):
            rec["t"] += shift_ns // 1_000_000
        lines.append(json.dumps(rec, separators=(",", ":")))
    path.write_text("\n".join(lines) + "\n")


def split_bundle(src: Path, dst_root: Path, hosts: dict[str, tuple[set[int], float]]) -> list[Path]:
    """One bundle per host under ``dst_root``: ``hosts`` maps a host name to (its ranks, its clock's
    error in seconds: how far ahead of true time its stamps are)."""
    manifest = json.loads((src / "manifest.json").read_text())
    year = datetime.fromtimestamp(manifest["start_ns"] / NS, UTC).year
    out = []
    for host, (ranks, shift_s) in hosts.items():
        shift_ns = round(shift_s * NS)
        dst = dst_root / host
        shutil.copytree(src, dst)
        m = dict(manifest, host=host)
        for key in _MANIFEST_NS:
            if isinstance(m.get(key), int):
                m[key] += shift_ns
        for key, key_ns in (("start", "start_ns"), ("end", "end_ns"), ("heartbeat", "heartbeat_ns")):
            if isinstance(m.get(key_ns), int):
                m[key] = datetime.fromtimestamp(m[key_ns] / NS, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if isinstance(m.get("boot_time"), dict):
            m["boot_time"] = {k: v + shift_ns if isinstance(v, int) else v for k, v in m["boot_time"].items()}
        (dst / "manifest.json").write_text(json.dumps(m, indent=1))
        for name in ("stdout", "stderr"):
            if (src / f"{name}.log").exists():
                _stream(src, dst, name, ranks, year, shift_ns)
        for name in ("nvml.jsonl", "nvml-events.jsonl"):
            if (dst / name).exists():
                _nvml(dst / name, host, shift_ns)
        for dump in sorted((dst / "torch").glob("flight-recorder-rank-*")) if (dst / "torch").is_dir() else []:
            if int(dump.name.rsplit("-", 1)[1]) not in ranks:
                dump.unlink()
                continue
            with dump.open("rb") as fh:
                data = pickle.load(fh)  # our own recorded sample, not untrusted input
            dump.write_bytes(pickle.dumps(_shift_ns_fields(data, shift_ns)))
        out.append(dst)
    return out
