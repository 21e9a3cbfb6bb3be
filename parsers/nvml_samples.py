"""``nvml.jsonl`` (and its rotated ``nvml.NNNN.jsonl.gz`` segments) from a recorder bundle.

Each segment opens with a header naming the columns and GPUs; keyframe lines carry
every field, the lines between only what changed (docs/bundle-format.md). The parser
rebuilds each GPU's state and emits a :class:`MetricSample` with ARCHITECTURE.md's
column names — not for every 10 Hz tick, which would be millions of objects for a
long run, but once a second per GPU, at once when a discrete field changes (clock
event reasons, PCIe link, ECC, remapped rows, replays) or memory use moves by more than
1 % of capacity, and for the last tick of the file (the state just before the end).

The compute processes (``"p"``: ``[pid, used MiB]`` per GPU, once a second) become one
``gpu-process`` event per process and GPU at the end of the file: its peak and last footprint and
its plateaus (footprints read twice in a row) and since when it has not changed (``frozen_since``), so
a detector can see workers that started alike and then grew apart (detectors/stunted.py). With the
per-process utilization (``"pu"``: SM % once a second; a listed process absent from it read 0) it also
carries ``sm_mean``, ``sm_peak``, ``sm_last`` (the last readings' mean) and ``idle_since`` (since when
every reading has been 0): an idle process on a busy GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from forensics.parsers.common.base import ParseContext, Record, json_objects

from forensics.events import Event, MetricSample, Origin, TsSource
from forensics.ingest.textdoc import TextDocument

FORMAT = "gpu-forensics-nvml"
DISCRETE = frozenset({"clock_reasons", "pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max", "pcie_replay",
                      "ecc_sbe_volatile", "ecc_dbe_volatile", "remapped_pending", "remapped_failure"})
EVERY_NS = 1_000_000_000
#: Per-process utilization readings averaged into ``sm_last``.
UTIL_TAIL = 5

_SAMPLE = (
    '{"format":"gpu-forensics-nvml","version":1,"time":"unix-ms","columns":{"mu":"mem_used_mib",'
    '"mt":"mem_total_mib","ug":"util_gpu_pct","pw":"power_w","tc":"temp_c","cr":"clock_reasons","lg":"pcie_gen",'
    '"lgx":"pcie_gen_max"},"interval_s":0.1,"host":"gpu-node-07","gpus":[{"i":0,"pci":"0000:3b:00.0",'
    '"name":"NVIDIA H200","uuid":"GPU-5d1c"},{"i":1,"pci":"0000:5d:00.0","name":"NVIDIA H200","uuid":"GPU-77e0"}],'
    '"segment":1}\n'
    '{"t":1740909600000,"k":1,"g":{"0":{"mu":1200,"mt":143771,"ug":0,"pw":118.2,"tc":31,"cr":1,"lg":5,"lgx":5},'
    '"1":{"mu":1180,"mt":143771,"ug":0,"pw":117.9,"tc":30,"cr":1,"lg":5,"lgx":5}}}\n'
    '{"t":1740909600100,"g":{"0":{"mu":70312,"ug":100,"pw":612.4,"cr":0},"1":{"mu":70290,"ug":99,"pw":598.0,"cr":0}}}\n'
    '{"t":1740909600200}\n'
    '{"t":1740909600300,"g":{"1":{"lg":1,"pw":240.5}}}\n'
    '{"t":1740909601400,"g":{"0":{"pw":640.1,"tc":44},"1":{"pw":230.0}}}\n'
)


class NvmlSamplesParser:
    name = "nvml-samples"
    samples = (_SAMPLE,)
    #: producer versions its real samples hold (the recorded samples (their README))
    tested_with = {"NVIDIA driver": ("580.159", "580.159.04")}

    def detect(self, head: list[str]) -> float:
        return 1.0 if head and head[0].startswith('{"format":"gpu-forensics-nvml",') else 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        decoder = NvmlDecoder(ctx.host)
        yield from decoder.feed(doc, ctx)
        yield from decoder.flush(ctx)
        yield from decoder.process_events(ctx.source)


class NvmlDecoder:
    """The state of reading one ``nvml.jsonl`` (columns, each GPU's values, the processes' footprints),
    fed one document after another: the parser feeds it the whole file once; the live watcher
    (forensics/live) feeds it what was appended since its last read, so both emit the same samples."""

    def __init__(self, host: str | None = None) -> None:
        self.columns: dict[str, str] = {}
        self.gpu_names: dict[str, str] = {}
        self.host = host
        self.state: dict[str, dict[str, float]] = {}
        self.last_emit: dict[str, int] = {}
        self.pending: dict[str, tuple[int, Origin]] = {}
        self.processes: dict[tuple[str, int], _Footprint] = {}
        self.running: dict[str, set[int]] = {}  # GPU -> the pids of its last process list

    def feed(self, doc: TextDocument, ctx: ParseContext) -> Iterator[MetricSample]:
        """Samples of ``doc``'s lines; the last tick of a GPU not yet due waits in ``pending``."""
        columns, gpu_names, state = self.columns, self.gpu_names, self.state
        last_emit, pending, processes = self.last_emit, self.pending, self.processes
        for line, obj in json_objects(doc, ctx):
            if obj.get("format") == FORMAT:
                columns.clear()
                columns.update({str(k): str(v) for k, v in (obj.get("columns") or {}).items()})
                for g in obj.get("gpus") or []:
                    if isinstance(g, dict) and "i" in g:
                        gpu_names[str(g["i"])] = str(g.get("pci") or g["i"])
                self.host = obj.get("host") if isinstance(obj.get("host"), str) else self.host
                continue
            t = obj.get("t")
            if not isinstance(t, int):
                continue
            ts = t * 1_000_000
            if isinstance(obj.get("p"), dict):
                _read_processes(obj["p"], ts, ctx.origin(line), processes, self.running)
            if isinstance(obj.get("pu"), dict):
                _read_utilization(obj["pu"], ts, processes, self.running)
            changes: dict[str, Any] = obj["g"] if isinstance(obj.get("g"), dict) else {}
            for gi in gpu_names:
                cur = state.setdefault(gi, {})
                delta: dict[str, Any] = changes[gi] if isinstance(changes.get(gi), dict) else {}
                notable = bool(obj.get("k"))
                for key, value in delta.items():
                    col = columns.get(key)
                    if col is None:
                        continue
                    old = cur.get(col)
                    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
                        cur.pop(col, None)
                    else:
                        cur[col] = float(value)
                    new = cur.get(col)
                    if col in DISCRETE and new != old:
                        notable = True
                    if col == "mem_used_mib" and new is not None and old is not None \
                            and abs(new - old) > 0.01 * cur.get("mem_total_mib", 0.0):
                        notable = True
                if notable or ts - last_emit.get(gi, -EVERY_NS) >= EVERY_NS:
                    yield self._sample(ts, gi, cur, ctx, ctx.origin(line))
                    last_emit[gi] = ts
                    pending.pop(gi, None)
                else:
                    pending[gi] = (ts, ctx.origin(line))

    def flush(self, ctx: ParseContext) -> Iterator[MetricSample]:
        """The last tick of each GPU that was not emitted yet (the state just before the end)."""
        for gi, (ts, origin) in self.pending.items():
            yield self._sample(ts, gi, self.state.get(gi, {}), ctx, origin)
            self.last_emit[gi] = ts
        self.pending.clear()

    def process_events(self, source: str) -> list[Event]:
        """One ``gpu-process`` event per process and GPU seen so far."""
        return [fp.event(pid, self.gpu_names.get(gi, gi), self.host, source)
                for (gi, pid), fp in self.processes.items()]

    def _sample(self, ts: int, gi: str, values: dict[str, float], ctx: ParseContext, origin: Origin) -> MetricSample:
        return MetricSample(ts=ts, ts_source=TsSource.EXACT, gpu=self.gpu_names.get(gi, gi), values=dict(values),
                            origin=origin, host=self.host, source=ctx.source if ctx.source else "nvml")


class _Footprint:
    """One process's memory on one GPU over the recording (readings once a second), and its utilization
    when the recorder sampled it (``pu``)."""

    __slots__ = ("first", "frozen", "idle", "last", "peak", "peak_origin", "plateaus", "readings", "sm_last_ts",
                 "sm_n", "sm_peak", "sm_sum", "sm_tail")

    def __init__(self, ts: int, mib: float) -> None:
        self.first: tuple[int, float] = (ts, mib)
        self.last: tuple[int, float] = (ts, mib)
        self.peak: tuple[int, float] = (ts, mib)
        self.peak_origin: Origin | None = None
        self.plateaus: list[float] = []  # footprints read twice in a row, in order
        self.readings = 0
        self.frozen = ts  # since when the footprint has been what it is now
        self.sm_n = 0
        self.sm_sum = 0.0
        self.sm_peak = 0.0
        self.sm_tail: list[float] = []  # the last readings
        self.idle: int | None = None  # since when every reading has been 0 (None: the last one was not)
        self.sm_last_ts = ts  # the last utilization reading (memory is written only when it changes)

    def add(self, ts: int, mib: float, origin: Origin) -> None:
        if self.readings and mib == self.last[1] and (not self.plateaus or self.plateaus[-1] != mib) \
                and len(self.plateaus) < 64:
            self.plateaus.append(mib)
        if mib > self.peak[1] or self.peak_origin is None:
            self.peak, self.peak_origin = (ts, mib), origin
        if self.readings and mib != self.last[1]:
            self.frozen = ts
        self.last = (ts, mib)
        self.readings += 1

    def add_util(self, ts: int, sm: float) -> None:
        self.sm_n += 1
        self.sm_sum += sm
        self.sm_peak = max(self.sm_peak, sm)
        self.sm_tail = (self.sm_tail + [sm])[-UTIL_TAIL:]
        self.sm_last_ts = ts
        if sm > 0:
            self.idle = None
        elif self.idle is None:
            self.idle = ts

    def event(self, pid: int, gpu: str, host: str | None, source: str) -> Event:
        ts, peak = self.peak
        assert self.peak_origin is not None  # set by the first add()
        attrs: dict[str, Any] = {"pid": pid, "peak_mib": peak, "plateaus": tuple(self.plateaus),
                                 "last_mib": self.last[1], "first_ts": self.first[0], "last_ts": self.last[0],
                                 "readings": self.readings, "frozen_since": self.frozen}
        if self.sm_n:
            attrs.update(sm_mean=round(self.sm_sum / self.sm_n, 1), sm_peak=self.sm_peak,
                         sm_last=round(sum(self.sm_tail) / len(self.sm_tail), 1), util_readings=self.sm_n,
                         idle_since=self.idle, util_last_ts=self.sm_last_ts)
        return Event(ts=ts, ts_source=TsSource.EXACT, source=source or "nvml",
                     kind="gpu-process", message=f"pid {pid} on GPU {gpu}: peak {peak:,.0f} MiB",
                     origin=self.peak_origin, host=host, gpu=gpu, pid=pid, attrs=attrs)


def _read_processes(per_gpu: dict[str, Any], ts: int, origin: Origin,
                    processes: dict[tuple[str, int], _Footprint], running: dict[str, set[int]]) -> None:
    for gi, rows in per_gpu.items():
        if not isinstance(rows, list):
            continue
        running[str(gi)] = set()
        for row in rows:
            if not (isinstance(row, list) and len(row) == 2 and all(isinstance(x, int) for x in row)):
                continue
            pid, mib = row
            fp = processes.setdefault((str(gi), pid), _Footprint(ts, float(mib)))
            fp.add(ts, float(mib), origin)
            running[str(gi)].add(pid)


def _read_utilization(per_gpu: dict[str, Any], ts: int, processes: dict[tuple[str, int], _Footprint],
                      running: dict[str, set[int]]) -> None:
    """One per-process utilization reading: every process of the GPU's list gets one, 0 when absent."""
    for gi, rows in per_gpu.items():
        if not isinstance(rows, list):
            continue
        sm = {row[0]: float(row[1]) for row in rows
              if isinstance(row, list) and len(row) >= 2 and all(isinstance(x, int | float) for x in row[:2])}
        for pid in running.get(str(gi), set()) | set(sm):
            fp = processes.get((str(gi), int(pid)))
            if fp is not None:
                fp.add_util(ts, sm.get(pid, 0.0))


PARSER = NvmlSamplesParser()
