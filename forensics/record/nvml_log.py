"""``nvml.jsonl``: NVML samples as compact, self-describing JSON lines.

Each segment starts with a header (format, version, the key → column table, the GPUs);
then one line per tick. A *keyframe* line (``"k": 1``) carries every field of every
GPU (``null`` = N/A); the lines between keyframes carry only the fields that changed
since the previous tick (``{"t": 1730000000123}`` alone means "sampled, nothing
changed"). A keyframe is written at the start of each segment and every
``KEYFRAME_S`` seconds, so any segment reads on its own.

When the live ``nvml.jsonl`` passes ``ROTATE_BYTES`` it is renamed to
``nvml.NNNN.jsonl`` and compressed to ``nvml.NNNN.jsonl.gz`` in the background (write
``.gz.tmp``, fsync, rename, then delete the plain file), so the live file stays
readable with ``tail`` and a crash at any point leaves every sample readable.
docs/bundle-format.md has the figures (bytes per GPU-hour).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from forensics.record.nvml import COLUMNS
from forensics.record.writer import AppendFile

__all__ = ["FORMAT", "KEYFRAME_S", "ROTATE_BYTES", "NvmlLog"]

FORMAT = "gpu-forensics-nvml"
KEYFRAME_S = 60.0
ROTATE_BYTES = 2 << 20
LIVE = "nvml.jsonl"

Values = dict[str, float | int | None]


def _dumps(obj: Any) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


class NvmlLog:
    """Writes ticks to ``<bundle>/nvml.jsonl`` with deltas, keyframes and rotation."""

    def __init__(self, bundle: Path, header: dict[str, Any], rotate_bytes: int = ROTATE_BYTES,
                 on_error: Any = None) -> None:
        self.bundle = bundle
        self.on_error = on_error  # given to each live file (AppendFile.on_error)
        self.header = {"format": FORMAT, "version": 1, "time": "unix-ms", "columns": COLUMNS, **header}
        self.rotate_bytes = rotate_bytes
        self.segment = self._next_segment()
        self._last: dict[int, Values] = {}
        self._last_procs: dict[int, list[list[int]] | None] = {}
        self._last_key_ns = 0
        self._compressors: list[threading.Thread] = []
        self._force_key = True
        self.file = self._open_live()

    def _next_segment(self) -> int:
        nums = [int(p.name.split(".")[1]) for p in self.bundle.glob("nvml.[0-9]*.jsonl*")
                if p.name.split(".")[1].isdigit()]
        return max(nums, default=0) + 1

    def _open_live(self) -> AppendFile:
        f = AppendFile(self.bundle / LIVE)
        f.on_error = self.on_error
        if f.size == 0:
            f.write(_dumps({**self.header, "segment": self.segment}))
        else:
            # A replaced sampler continues the file: end any half line, restate the header.
            f.write(b"\n" + _dumps({**self.header, "segment": self.segment, "continued": True}))
        self._force_key = True
        return f

    def write_tick(self, t_ns: int, values: dict[int, Values], procs: dict[int, list[list[int]] | None],
                   putil: dict[int, list[list[int]] | None] | None = None) -> None:
        keyframe = self._force_key or t_ns - self._last_key_ns >= KEYFRAME_S * 1e9
        self._force_key = False
        line: dict[str, Any] = {"t": t_ns // 1_000_000}
        gpus: dict[str, Values] = {}
        for gpu, vals in values.items():
            prev = self._last.setdefault(gpu, {})
            if keyframe:
                prev.update(vals)
                gpus[str(gpu)] = dict(prev)
            else:
                changed = {k: v for k, v in vals.items() if prev.get(k, ...) != v}
                if changed:
                    prev.update(changed)
                    gpus[str(gpu)] = changed
        if keyframe:
            line["k"] = 1
            self._last_key_ns = t_ns
        if gpus:
            line["g"] = gpus
        if keyframe:
            procs = {**self._last_procs, **procs}
        changed_procs = {str(g): p for g, p in procs.items() if keyframe or self._last_procs.get(g, ...) != p}
        if changed_procs:
            line["p"] = changed_procs
            self._last_procs.update(procs)
        utils = {str(g): u for g, u in (putil or {}).items() if u is not None}
        if utils:  # per-process SM/memory %, every reading: an idle process is one that reads 0 (or is absent)
            line["pu"] = utils
        self.file.write(_dumps(line))
        if self.file.size >= self.rotate_bytes:
            self.rotate()

    def rotate(self) -> None:
        old = self.file
        old.close()
        rotated = self.bundle / f"nvml.{self.segment:04d}.jsonl"
        try:
            os.replace(old.path, rotated)
        except OSError:
            self.file = self._open_live()
            return
        self.segment += 1
        self.file = self._open_live()
        t = threading.Thread(target=_compress, args=(rotated,), name="nvml-gzip", daemon=True)
        t.start()
        self._compressors.append(t)

    def fsync(self) -> None:
        self.file.fsync()

    def close(self, wait_s: float = 5.0) -> None:
        self.file.close()
        deadline = time.monotonic() + wait_s
        for t in self._compressors:
            t.join(max(0.0, deadline - time.monotonic()))


def _compress(path: Path) -> None:
    gz = path.with_name(path.name + ".gz")
    tmp = gz.with_name(gz.name + ".tmp")
    try:
        with open(path, "rb") as src, open(tmp, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, gz)
        os.unlink(path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
