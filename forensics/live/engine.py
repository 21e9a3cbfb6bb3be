"""The incremental analysis: the files of a run followed as they grow, the verdict on demand.

:class:`LiveEngine` follows a bundle being written (or log files, or directories of them), parses
only what each file appended (:mod:`.chunks`), keeps a bounded store of the events and samples
(:mod:`.store`) and, when asked, builds one timeline from the store and runs the analysis' own
detectors, signatures, catalogues, verdict and blame over it (``forensics.match.diagnose``) — so
a verdict here is the one ``analyze`` would give on what the files held at that moment (within
what the store keeps: ``docs/live.md``, *Bounds*).

Time: the end of the observation is the *data clock* — the newest time any source reached (the
bundle's heartbeat, an event, a sample) plus the time that passed since it was read (times
``time_scale`` for an accelerated replay) — so a silence is measured up to now, and a replayed log
is measured on its own clock.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.events import Event, MetricSample
from forensics.findings import Finding, Verdict
from forensics.ingest.bundle import MANIFEST, read_manifest, source_of
from forensics.live.chunks import FileParser, FileTags, file_year
from forensics.live.follow import FollowedFile, Tree
from forensics.live.store import Store
from forensics.timeline.merge import Timeline

__all__ = ["Evaluation", "LiveEngine", "PollResult"]

#: the data clock never jumps further ahead than this at once (seconds of the data's time)
MAX_JUMP_S = 300.0
#: how often directories are searched for new files (seconds)
RESCAN_S = 2.0
#: files read whole once they stop changing (tool outputs, flight-recorder dumps), not followed
_WHOLE_PREFIXES = ("host/", "torch/")
_SKIP_SUFFIXES = (".gz", ".zip", ".tgz", ".tar", ".bz2", ".xz", ".zst", ".pyc", ".idx", ".tmp", ".swp")
#: kinds and attrs of a new event that ask for an evaluation at once (an error, not a routine line)
URGENT_KINDS = frozenset({"xid", "ecc", "gpu-lost", "oom-killer", "hung-task", "traceback", "cuda-error", "c10d",
                          "nccl", "torchrun", "exit", "aer", "iommu", "nvrm", "bugcheck", "dxg", "stack", "slurm"})


@dataclass
class PollResult:
    bytes_read: int = 0
    lines: int = 0
    events: list[Event] = field(default_factory=list)  # new events (progress included)
    samples: int = 0
    urgent: list[Event] = field(default_factory=list)  # events that warrant an evaluation now
    pause_marker: bool = False  # a line said the run saves a checkpoint or evaluates


@dataclass
class Evaluation:
    at_ns: int  # the end of the observation
    timeline: Timeline
    findings: list[Finding]
    verdict: Verdict
    cpu_s: float


def _urgent(e: Event) -> bool:
    from forensics.events import Severity

    if e.kind == "recorder":
        return str(e.attrs.get("reason", "")).startswith("nvml-unresponsive")
    if e.kind in ("progress", "derived", "gpu-info", "recording", "pcie-link"):
        return False
    return e.kind in URGENT_KINDS and e.severity >= Severity.WARNING or e.severity >= Severity.ERROR


class LiveEngine:
    """Follow ``roots`` (a bundle directory, log files, directories of logs) and diagnose on demand."""

    def __init__(self, roots: list[Path], signature_dirs: list[Path] | None = None, time_scale: float = 1.0,
                 from_end: bool = False, mono: Callable[[], float] = time.monotonic) -> None:
        from forensics import match

        self.mono = mono  # seconds, for every "how long since" (a test runs a replay on a virtual clock)
        self.roots = roots
        self.time_scale = time_scale
        self.signatures = match.load_signatures(signature_dirs or [])
        self.notable = match.notable_literals(self.signatures)
        self.bundles = {r for r in roots if r.is_dir() and read_manifest(r) is not None}
        self.manifests: dict[Path, dict[str, Any]] = {}
        self._manifest_seen: dict[Path, tuple[float, int]] = {}
        self._manifest_key: dict[Path, str] = {}
        self.tree = Tree(roots, self._wanted, from_end=from_end)
        self.parsers: dict[Path, FileParser] = {}
        self.whole: dict[Path, tuple[int, float]] = {}  # path -> (size, mtime) when it was read
        self._pending_whole: dict[Path, tuple[int, float]] = {}
        self.store = Store()
        self.clock_ns: int | None = None
        self._clock_mono = mono()
        self.bytes_read = 0
        self.lines_read = 0
        self.evaluations = 0
        self._last_scan = 0.0
        from forensics.live.pauses import PauseMarkers

        self.pauses = PauseMarkers()

    # -- which files -----------------------------------------------------------------------------
    def _wanted(self, root: Path, rel: str) -> bool:
        name = rel.rsplit("/", 1)[-1]
        if name.startswith(".") or name.endswith(_SKIP_SUFFIXES) or name in ("live.jsonl", "heartbeat"):
            return False
        path = root / rel
        bundle = self._bundle_of(path)
        if bundle is None and (path.parent / MANIFEST).is_file() and read_manifest(path.parent) is not None:
            bundle = path.parent  # a bundle inside a directory followed (a new run under forensics-runs/)
            self.bundles.add(bundle)
        if bundle is not None:
            inner = path.relative_to(bundle).as_posix()
            return inner != MANIFEST and source_of(inner) is not None
        return True

    def _bundle_of(self, path: Path) -> Path | None:
        for b in self.bundles:
            if path.is_relative_to(b):
                return b
        return None

    def _tags(self, path: Path) -> FileTags:
        bundle = self._bundle_of(path)
        if bundle is None:
            return FileTags(str(path), read_time_receipts=True)
        manifest = self.manifests.get(bundle) or read_manifest(bundle) or {}
        rel = path.relative_to(bundle).as_posix()
        source = source_of(rel)
        host = manifest.get("host") if isinstance(manifest.get("host"), str) else None
        boot = manifest.get("boot_time_ns") if isinstance(manifest.get("boot_time_ns"), int) else None
        tz = manifest.get("tz_name") if isinstance(manifest.get("tz_name"), str) else None
        index = bundle / f"{source}.idx" if source in ("stdout", "stderr") else None
        return FileTags(str(path), source=source, host=host, boot_time_ns=boot, tz_name=tz, index=index)

    # -- the data clock ----------------------------------------------------------------------------
    def _advance(self, ts: int | None) -> None:
        """A time the data reached moves the clock on; one far ahead of it (a stamp in another zone read
        as UTC, a garbled year) does not: at most ``MAX_JUMP_S`` (of the data's time) at once."""
        if ts is None:
            return
        if self.clock_ns is None:
            self.clock_ns, self._clock_mono = ts, self.mono()
            return
        now = self.now_ns()
        if now < ts <= now + MAX_JUMP_S * 1e9 * max(1.0, self.time_scale):
            self.clock_ns, self._clock_mono = ts, self.mono()

    def now_ns(self) -> int:
        """The end of the observation (module docstring, *Time*)."""
        if self.clock_ns is None:
            return time.time_ns()
        return self.clock_ns + int((self.mono() - self._clock_mono) * self.time_scale * 1e9)

    # -- reading -----------------------------------------------------------------------------------
    def poll(self, final: bool = False) -> PollResult:
        """Read what every followed file appended; parse it into the store."""
        out = PollResult()
        for bundle in self.bundles:
            self._read_manifest(bundle, out)
        final = final or self.ended  # the run is over: what waits for the rest of a record is all there
        now = self.mono()
        rescan = final or now - self._last_scan >= RESCAN_S
        if rescan:
            self._last_scan = now
        for f in self.tree.scan(rescan):
            if self._whole_file(f.path):
                self._read_whole(f.path, out, final)
                continue
            self._read_followed(f, out, final)
        for path, parser in self.parsers.items():
            fixed = parser.fixed_events()
            if fixed:
                self.store.source(str(path)).fixed = fixed
        self.bytes_read += out.bytes_read
        self.lines_read += out.lines
        return out

    def _whole_file(self, path: Path) -> bool:
        bundle = self._bundle_of(path)
        return bundle is not None and path.relative_to(bundle).as_posix().startswith(_WHOLE_PREFIXES)

    def _read_followed(self, f: FollowedFile, out: PollResult, final: bool) -> None:
        parser = self.parsers.get(f.path)
        if parser is None:
            parser = self.parsers[f.path] = FileParser(self._tags(f.path), self.notable, file_year(f.path))
        start, data = f.read(now=self.mono(), final=final)
        events: list[Event] = []
        metrics: list[MetricSample] = []
        if data:
            out.bytes_read += len(data)
            out.lines += data.count(b"\n")
            if parser.thinner is not None or parser.parser is None:
                out.pause_marker |= self.pauses.scan(data, self.now_ns())
            events, metrics = parser.feed(data, start, now=self.mono(), final=final)
        elif parser.parser is not None:  # nothing new: a burst left open may be due now
            events, metrics = parser.feed(b"", parser.offset, now=self.mono(), final=final)
        self._take(str(f.path), events, metrics, out)

    def _take(self, name: str, events: list[Event], metrics: list[MetricSample], out: PollResult) -> None:
        if not events and not metrics:
            return
        self.store.add(name, events, metrics)
        out.events += events
        out.samples += len(metrics)
        out.urgent += [e for e in events if _urgent(e)]
        for e in events:
            self._advance(e.ts)
        if metrics:
            self._advance(max((m.ts for m in metrics if m.ts is not None), default=None))

    def _read_whole(self, path: Path, out: PollResult, final: bool) -> None:
        """A tool's output or a dump: parsed whole once it stopped changing for one poll."""
        try:
            st = path.stat()
        except OSError:
            return
        key = (st.st_size, st.st_mtime)
        if self.whole.get(path) == key:
            return
        if self._pending_whole.get(path) != key and not final:
            self._pending_whole[path] = key
            return
        self.whole[path] = key
        from forensics.analysis import Options, parse_input
        from forensics.ingest.sources import InputFile

        tags = self._tags(path)
        try:
            raw = path.read_bytes()[: 64 << 20]
        except OSError:
            return
        item = InputFile(str(path), raw, st.st_mtime, source=tags.source, host=tags.host,
                         boot_time_ns=tags.boot_time_ns, tz_name=tags.tz_name)
        try:
            _, events, metrics = parse_input(item, Options(), self.notable)
        except Exception:  # noqa: BLE001 - a file that cannot be read costs its evidence only
            return
        self.store.replace(str(path), events)
        self.store.source(str(path)).metrics.clear()
        self._take_metrics_only(str(path), metrics)
        out.urgent += [e for e in events if _urgent(e)]

    def _take_metrics_only(self, name: str, metrics: list[MetricSample]) -> None:
        if metrics:
            self.store.add(name, [], metrics)

    def _read_manifest(self, bundle: Path, out: PollResult) -> None:
        path = bundle / MANIFEST
        try:
            st = path.stat()
        except OSError:
            return
        seen = (st.st_mtime, st.st_size)
        if self._manifest_seen.get(bundle) == seen:
            return
        self._manifest_seen[bundle] = seen
        data = read_manifest(bundle)
        if data is None:
            return
        self.manifests[bundle] = data
        beat = data.get("heartbeat_ns")
        if isinstance(beat, int):
            self._advance(beat)
        key = json.dumps({k: v for k, v in data.items() if not k.startswith("heartbeat")}, sort_keys=True,
                         default=str)
        if self._manifest_key.get(bundle) == key:
            return
        self._manifest_key[bundle] = key
        from forensics.analysis import Options, parse_input
        from forensics.ingest.sources import InputFile

        raw = json.dumps(data, indent=1).encode()
        item = InputFile(str(path), raw, st.st_mtime, source="recorder", host=data.get("host"))
        try:
            _, events, _ = parse_input(item, Options(), self.notable)
        except Exception:  # noqa: BLE001
            return
        self.store.replace(str(path), events)
        out.urgent += [e for e in events if _urgent(e)]

    @property
    def ended(self) -> bool:
        """Every bundle followed says its run is over (its files hold all there will be)."""
        return bool(self.bundles) and all(self.manifests.get(b, {}).get("status", "running") != "running"
                                          for b in self.bundles)

    def status(self, bundle: Path | None = None) -> str | None:
        """The manifest's status of the (first) bundle followed."""
        for b, data in self.manifests.items():
            if bundle is None or b == bundle:
                status = data.get("status")
                return str(status) if status is not None else None
        return None

    # -- the verdict -------------------------------------------------------------------------------
    def evaluate(self) -> Evaluation:
        """The analysis' verdict over what the store holds, observed until now (the data clock)."""
        from forensics import match
        from forensics.timeline.merge import build_timeline

        cpu = time.process_time()
        per_source, names = self.store.timeline_input()
        timeline = build_timeline(per_source, names=names)
        at = self.now_ns()
        # a run still going is observed until now; one that ended, until its end (no silence after it)
        timeline.observed_until = None if self.ended else at
        findings, verdict = match.diagnose(timeline, self.signatures)
        self.evaluations += 1
        return Evaluation(at, timeline, findings, verdict, time.process_time() - cpu)

    def flush(self) -> PollResult:
        """At the end: what waits in every parser (an open burst, a last line without its end)."""
        out = self.poll(final=True)
        for path, parser in self.parsers.items():
            events, metrics = parser.flush()
            self._take(str(path), events, metrics, out)
        return out

    def close(self) -> None:
        self.tree.close()


def rss_mib() -> float:
    """This process's resident memory (Linux: /proc; elsewhere the peak from getrusage)."""
    try:
        with open(f"/proc/{os.getpid()}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
