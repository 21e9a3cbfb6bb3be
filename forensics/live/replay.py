"""Replay a recorded bundle (or loose logs) as if the run were happening now — for the tests and
``bench/bench_live.py``.

:class:`BundleReplay` writes a copy of a real bundle the way the recorder wrote it: the manifest
first (``running``, a heartbeat every second), then each stream's bytes at the moment the receipt
index says they arrived, each NVML tick at its ``t``, each kernel record at its stamp, the host
snapshot at the start, flight-recorder dumps and the final manifest at the end. Every time in the
files is moved by one constant so the run starts now; ``speed`` > 1 writes faster than real time
while the times in the files keep their real spacing (the watcher is then told ``--time-scale``:
its clock runs at the same pace), which is how a 24-hour run is replayed in minutes, *said so* in
every figure that uses it. ``loops`` > 1 plays the run again after itself, times and step numbers
moved on, for long healthy runs.

:class:`LogReplay` writes loose log files line by line at the pace of their own stamps (gaps
capped at ``max_gap_s``), ``lines_per_s`` when they have none.

Both note when each line named in ``marks`` was written (``written``): the moment of the fault for
a latency measurement.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forensics.ingest.bundle import IDX_MAGIC, MANIFEST, pack_receipt

__all__ = ["BundleReplay", "LogReplay"]

_GLOG = re.compile(rb"(?<![\w.])(?P<lvl>[IWEF])(?P<mo>[01]\d)(?P<d>[0-3]\d) "
                   rb"(?P<h>[0-2]\d):(?P<mi>[0-5]\d):(?P<s>[0-5]\d)(?=[.\s])")
_STEP = re.compile(rb"\b(step|iteration|iter|Step)( ?[:=]? ?)(\d+)")
_T_MS = re.compile(rb'"t":(\d+)')
_T_NS = re.compile(rb'"(t|since)": ?(\d+)')
_KMSG = re.compile(rb"^(\d+),(\d+),(\d+),")


@dataclass
class _Item:
    t: int  # original time, ns
    rel: str
    data: bytes
    line: int  # original line number of its first line
    nlines: int
    stream: bool = False  # a recorded stream: an index record goes with it


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


class BundleReplay:
    def __init__(self, src: Path, out_dir: Path, speed: float = 1.0, loops: int = 1,
                 marks: Iterable[tuple[str, int]] = (), rotate_bytes: int = 2 << 20, finish: bool = True) -> None:
        self.src = src
        self.speed = speed
        self.loops = loops
        self.marks = set(marks)
        self.rotate_bytes = rotate_bytes
        self.finish = finish
        self.manifest: dict[str, Any] = json.loads((src / MANIFEST).read_text())
        self.start = int(self.manifest["start_ns"])
        self._year = time.gmtime(self.start / 1e9).tm_year  # glog stamps carry no year
        self.written: dict[tuple[str, int], int] = {}
        out_dir.mkdir(parents=True, exist_ok=True)
        self.dst = out_dir / src.name if src.name != "bundle" else out_dir / f"replay-{src.parent.name}"
        self.items = self._items()
        self._steps = self._count_steps()
        self.end = max([self.start, *(i.t for i in self.items)])
        self.duration = self.end - self.start + 1_000_000_000
        self._sizes: dict[str, int] = {}
        self._segment = 0

    # -- what to write --------------------------------------------------------------------------------
    def _items(self) -> list[_Item]:
        items: list[_Item] = []
        for name in ("stdout", "stderr"):
            items += self._stream(name)
        items += self._nvml()
        items += self._jsonl_ns("nvml-events.jsonl")
        items += self._kmsg()
        items.sort(key=lambda i: i.t)
        return items

    def _stream(self, name: str) -> list[_Item]:
        log, idx = self.src / f"{name}.log", self.src / f"{name}.idx"
        if not log.exists():
            return []
        data = log.read_bytes()
        raw = idx.read_bytes() if idx.exists() else b""
        body = raw[len(IDX_MAGIC):] if raw.startswith(IDX_MAGIC) else b""
        recs = [(int.from_bytes(body[i:i + 8], "little"), int.from_bytes(body[i + 8:i + 16], "little"))
                for i in range(0, len(body) - len(body) % 16, 16)]
        ends = [e for e, _ in recs]
        out: list[_Item] = []
        pos, line_no = 0, 1
        last_t = self.start
        for ln in _lines(data):
            i = bisect_right(ends, pos)
            t = recs[i][1] if i < len(recs) else last_t
            last_t = t
            if out and out[-1].t == t and out[-1].rel == f"{name}.log":
                out[-1].data += ln
                out[-1].nlines += 1
            else:
                out.append(_Item(t, f"{name}.log", ln, line_no, 1, stream=True))
            pos += len(ln)
            line_no += 1
        return out

    def _nvml(self) -> list[_Item]:
        parts = sorted(self.src.glob("nvml.*.jsonl.gz")) + [self.src / "nvml.jsonl"]
        out: list[_Item] = []
        line_no = 1
        for part in parts:
            if not part.exists():
                continue
            data = gzip.decompress(part.read_bytes()) if part.suffix == ".gz" else part.read_bytes()
            last = self.start
            for ln in _lines(data):
                m = _T_MS.search(ln)
                t = int(m.group(1)) * 1_000_000 if m else last
                last = t
                out.append(_Item(t, "nvml.jsonl", ln, line_no, 1))
                line_no += 1
        return out

    def _jsonl_ns(self, rel: str) -> list[_Item]:
        path = self.src / rel
        if not path.exists():
            return []
        out: list[_Item] = []
        last = self.start
        for n, ln in enumerate(_lines(path.read_bytes()), 1):
            m = _T_NS.search(ln)
            t = int(m.group(2)) if m and m.group(1) == b"t" else last
            last = t
            out.append(_Item(t, rel, ln, n, 1))
        return out

    def _kmsg(self) -> list[_Item]:
        path = self.src / "kmsg.log"
        boot = self.manifest.get("boot_time_ns")
        if not path.exists() or not isinstance(boot, int):
            return []
        out: list[_Item] = []
        last = self.start
        for n, ln in enumerate(_lines(path.read_bytes()), 1):
            m = _KMSG.match(ln)
            t = max(self.start, boot + int(m.group(3)) * 1000) if m else last
            last = t
            out.append(_Item(t, "kmsg.log", ln, n, 1))
        return out

    # -- rewriting ------------------------------------------------------------------------------------
    def _rewrite(self, item: _Item, loop: int, delta: int) -> bytes:
        data = item.data
        if item.rel == "nvml.jsonl":
            if data.startswith(b'{"format"'):
                return data if loop == 0 and item.line == 1 else b""
            return _T_MS.sub(lambda m: b'"t":%d' % (int(m.group(1)) + delta // 1_000_000), data)
        if item.rel == "nvml-events.jsonl":
            if data.startswith(b'{"format"'):
                return data if loop == 0 else b""
            return _T_NS.sub(lambda m: b'"%s": %d' % (m.group(1), int(m.group(2)) + delta), data)
        if item.rel == "kmsg.log":
            shift = loop * self.duration // 1000
            count = 10**6 * loop
            return _KMSG.sub(lambda m: b"%s,%d,%d," % (m.group(1), int(m.group(2)) + count, int(m.group(3)) + shift),
                             data)
        if item.stream:
            data = _GLOG.sub(lambda m: _glog_shifted(m, self._year, delta), data)
        if loop and item.stream:
            steps = self._steps.get(item.rel, 0)
            return _STEP.sub(lambda m: m.group(1) + m.group(2) + str(int(m.group(3)) + loop * steps).encode(), data)
        return data

    def _count_steps(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for i in self.items:
            if i.stream:
                for m in _STEP.finditer(i.data):
                    out[i.rel] = max(out.get(i.rel, 0), int(m.group(3)) + 1)
        return out

    # -- writing --------------------------------------------------------------------------------------
    def _manifest(self, delta: int, now_virtual: int, final: bool = False) -> None:
        m = dict(self.manifest)
        m.update(start_ns=self.start + delta, heartbeat_ns=now_virtual, recorder_pid=os.getpid())
        if isinstance(m.get("boot_time_ns"), int):
            m["boot_time_ns"] += delta
        for k in ("start", "heartbeat"):
            m[k] = _iso(m[f"{k}_ns"])
        if final:
            end = self.manifest.get("end_ns")
            m["end_ns"] = (end if isinstance(end, int) else self.end) + delta + (self.loops - 1) * self.duration
            m["end"] = _iso(m["end_ns"])
        else:
            m.update(status="running", end=None, end_ns=None, exit_code=None, signal=None, signal_name=None)
        tmp = self.dst / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(m, indent=1))
        os.replace(tmp, self.dst / MANIFEST)
        with open(self.dst / "heartbeat", "w") as fh:
            fh.write(f"{_iso(now_virtual)} {now_virtual}\n")

    def _append(self, rel: str, data: bytes) -> int:
        path = self.dst / rel
        if rel == "nvml.jsonl" and self._sizes.get(rel, 0) > self.rotate_bytes:  # the sampler's rotation
            self._segment += 1
            os.replace(path, self.dst / f"nvml.{self._segment:04d}.jsonl")
            self._sizes[rel] = 0
            header = next(i.data for i in self.items if i.rel == "nvml.jsonl")
            data = header + data
        with open(path, "ab") as fh:
            fh.write(data)
        self._sizes[rel] = self._sizes.get(rel, 0) + len(data)
        return self._sizes[rel]

    def _begin(self, t0: int) -> int:
        if self.dst.exists():
            shutil.rmtree(self.dst)
        self.dst.mkdir(parents=True)
        delta = t0 - self.start
        self._manifest(delta, t0)
        for name in ("stdout", "stderr"):
            if (self.src / f"{name}.log").exists():
                (self.dst / f"{name}.idx").write_bytes(IDX_MAGIC)
        if (self.src / "host").is_dir():
            shutil.copytree(self.src / "host", self.dst / "host")
        return delta

    def _write(self, item: _Item, loop: int, d: int) -> None:
        data = self._rewrite(item, loop, d)
        if not data:
            return
        size = self._append(item.rel, data)
        if item.stream:
            with open(self.dst / item.rel.replace(".log", ".idx"), "ab") as fh:
                fh.write(pack_receipt(size, item.t + d))
        for n in range(item.line, item.line + item.nlines):
            if (item.rel, n) in self.marks and loop == 0:
                self.written[(item.rel, n)] = time.time_ns()

    def _end(self, delta: int, now_virtual: int) -> None:
        if self.finish:
            if (self.src / "torch").is_dir():
                shutil.copytree(self.src / "torch", self.dst / "torch", dirs_exist_ok=True)
                for dump in (self.dst / "torch").rglob("*"):
                    if dump.is_file():
                        _shift_flight_recorder(dump, delta)
            self._manifest(delta, now_virtual, final=True)

    def run(self, stop: threading.Event | None = None) -> Path:
        """Write the bundle at its pace; returns its path. ``stop`` ends it early (no final manifest)."""
        stop = stop or threading.Event()
        t0_wall = time.time_ns()
        delta = self._begin(t0_wall)
        last_beat = 0.0
        for loop in range(self.loops):
            d = delta + loop * self.duration
            for item in self.items:
                due = t0_wall + (item.t + d - t0_wall) / self.speed
                while True:
                    if stop.is_set():
                        return self.dst
                    wait = (due - time.time_ns()) / 1e9
                    if time.monotonic() - last_beat >= 0.5:
                        self._manifest(delta, t0_wall + int((time.time_ns() - t0_wall) * self.speed))
                        last_beat = time.monotonic()
                    if wait <= 0:
                        break
                    time.sleep(min(wait, 0.2))
                self._write(item, loop, d)
        self._end(delta, t0_wall + int((time.time_ns() - t0_wall) * self.speed))
        return self.dst

    def run_fast(self, slices: int, on_slice: Callable[[int], None]) -> Path:
        """Write the bundle in ``slices`` time slices without waiting, the heartbeat at each slice's end,
        and call ``on_slice(virtual ns)`` after each (tests: the state at each moment of the run)."""
        t0 = time.time_ns()  # (the slices lie ahead of the wall clock: the heartbeat is never stale)
        delta = self._begin(t0)
        span = max(1, self.end - self.start)
        i = 0
        for k in range(1, slices + 1):
            until = self.start + span * k // slices
            while i < len(self.items) and self.items[i].t <= until:
                self._write(self.items[i], 0, delta)
                i += 1
            self._manifest(delta, until + delta)
            on_slice(until + delta)
        self._end(delta, self.end + delta)
        on_slice(self.end + delta)
        return self.dst


def _glog_shifted(m: re.Match[bytes], year: int, delta: int) -> bytes:
    """A glog stamp (``E1129 17:41:01.900702307``: PyTorch's C++ and launcher lines) moved by ``delta``
    ns, as the receipts are, so a line's own stamp and its receipt still agree."""
    import datetime as dt

    try:
        when = dt.datetime(year, int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]))
    except ValueError:
        return m.group(0)
    when += dt.timedelta(microseconds=delta // 1000)
    return m["lvl"] + when.strftime("%m%d %H:%M:%S").encode()


def _shift_flight_recorder(path: Path, delta: int) -> None:
    """A flight-recorder dump's ``*_ns`` times moved by ``delta``, as every other file's are (read
    with the safe pickle walker, written back as a plain pickle; anything else is left as it is)."""
    import pickle

    from forensics.ingest.safe_pickle import PickleError, is_pickle, load_plain

    raw = path.read_bytes()
    if not is_pickle(raw):
        return
    try:
        dump = load_plain(raw)
    except (PickleError, RecursionError):
        return

    def shift(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: (v + delta if isinstance(k, str) and k.endswith("_ns") and isinstance(v, int)
                        and not isinstance(v, bool) else shift(v)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(shift(v) for v in value)
        return value

    path.write_bytes(pickle.dumps(shift(dump), protocol=4))


def _iso(ns: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LogReplay:
    """Loose log files written line by line at the pace of their own stamps."""

    def __init__(self, files: list[Path], out_dir: Path, speed: float = 1.0, max_gap_s: float = 2.0,
                 lines_per_s: float = 50.0, marks: Iterable[tuple[str, int]] = ()) -> None:
        self.files = files
        self.out_dir = out_dir
        self.speed = speed
        self.max_gap_s = max_gap_s
        self.lines_per_s = lines_per_s
        self.marks = set(marks)
        self.written: dict[tuple[str, int], int] = {}

    def _schedule(self) -> list[tuple[float, str, int, bytes]]:
        """(wall offset s, file name, line number, line) in the order to write."""
        from forensics.analysis import analyze

        out: list[tuple[float, str, int, bytes]] = []
        for f in self.files:
            stamps: dict[int, int] = {}
            try:
                a = analyze([str(f)])
                for e in a.timeline.events:
                    if e.ts is not None and str(e.ts_source) in ("exact", "local", "boot-relative"):
                        stamps.setdefault(e.origin.line, e.ts)
            except Exception:  # noqa: BLE001 - a file the analysis cannot read is paced by lines
                stamps = {}
            at, prev_ts = 0.0, None
            for n, ln in enumerate(_lines(f.read_bytes()), 1):
                ts = stamps.get(n)
                if ts is not None and prev_ts is not None:
                    at += min(max(0.0, (ts - prev_ts) / 1e9 / self.speed), self.max_gap_s)
                elif ts is None:
                    at += 1.0 / self.lines_per_s
                if ts is not None:
                    prev_ts = ts
                out.append((at, f.name, n, ln))
        out.sort(key=lambda x: x[0])
        return out

    def run(self, stop: threading.Event | None = None) -> float:
        """Write every line at its moment; returns the seconds it took."""
        stop = stop or threading.Event()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        plan = self._schedule()
        start = time.monotonic()
        handles: dict[str, Any] = {}
        try:
            for at, name, n, ln in plan:
                while (wait := start + at - time.monotonic()) > 0:
                    if stop.wait(min(wait, 0.2)):
                        return time.monotonic() - start
                fh = handles.get(name)
                if fh is None:
                    fh = handles[name] = open(self.out_dir / name, "ab")  # noqa: SIM115 - kept open for the run
                fh.write(ln)
                fh.flush()
                if (name, n) in self.marks:
                    self.written[(name, n)] = time.time_ns()
        finally:
            for fh in handles.values():
                fh.close()
        return time.monotonic() - start
