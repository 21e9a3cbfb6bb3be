"""The watcher's loop: read what is new, evaluate when it matters, tell each incident once.

Every ``tick`` the engine reads what the followed files appended. The full analysis (a few tens to
a few hundred ms) runs only when something asks for it:

* an error-level event arrived (an Xid, a driver message, a lost GPU, NVML unresponsive, a
  traceback, a CUDA or NCCL error, an OOM kill, a launcher reporting a dead worker) — at once;
* a throughput reading fell to 60 % of its stream's median — at once;
* a progress stream has been silent for its stall threshold (``--stall-after``: by default
  max(60 s, 5 × its median step interval)) — at that moment;
* a GPU sits idle while a peer is busy, or spins — every ``SUSPECT_EVAL_S`` while it lasts;
* otherwise every ``IDLE_EVAL_S`` when new data came (a stall's recovery, what no trigger knows).

The detectors are given the stall threshold less ``MARGIN_S`` (the loop's cadence), so a stall is
told by ``--stall-after`` (``forensics.match.detectors.live_stall_thresholds``).

The watcher keeps to ``cpu_budget`` (a share of one core, measured over the last minute): above
it, evaluations that nothing urgent asked for wait, and the loop sleeps longer.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from forensics.events import Event
from forensics.live.alerts import Alert, Incidents
from forensics.live.channels import Channels
from forensics.live.engine import Evaluation, LiveEngine, PollResult, rss_mib

__all__ = ["WatchOptions", "Watcher", "lower_priority", "say"]

MARGIN_S = 2.0
FULL_READ_S = 2.0  # with watchfiles: read at least this often even when it saw no change
SUSPECT_EVAL_S = 5.0
IDLE_EVAL_S = 30.0
DROP_RATIO = 0.6
_RATES = ("tokens_s", "samples_s", "it_s", "s_it")


@dataclass
class WatchOptions:
    stall_after: float | None = None  # seconds; None: max(60 s, 5 x the median step interval)
    pause_max: float = 1800.0
    tick: float = 0.5
    idle_eval_s: float = IDLE_EVAL_S
    suspect_eval_s: float = SUSPECT_EVAL_S
    cpu_budget: float = 0.05
    duration: float | None = None  # stop after this many seconds (tests, benchmarks)
    exit_when_done: bool = False  # stop once every followed bundle is no longer running
    use_watchfiles: bool = True  # (the recorder's watcher polls: a recording's files change all the time)

    @property
    def stall_min_s(self) -> float:
        return self.stall_after if self.stall_after is not None else 60.0

    @property
    def stall_steps(self) -> int:
        return 0 if self.stall_after is not None else 5


@dataclass
class _Stream:
    last_ts: int
    intervals: deque[int] = field(default_factory=lambda: deque(maxlen=64))
    rates: deque[float] = field(default_factory=lambda: deque(maxlen=256))
    told_at: int | None = None  # the last_ts an evaluation for its silence was made at
    low_run: int = 0  # readings in a row at or below DROP_RATIO of the median


def lower_priority() -> None:
    """Run below the training job: nice 10 (the job's own processes keep the CPU they need)."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)


class Watcher:
    def __init__(self, engine: LiveEngine, channels: Channels, options: WatchOptions | None = None,
                 incidents: Incidents | None = None) -> None:
        self.engine = engine
        self.channels = channels
        self.options = options or WatchOptions()
        self.incidents = incidents or Incidents()
        self.alerts: list[Alert] = []
        self.last: Evaluation | None = None
        self._streams: dict[tuple[object, ...], _Stream] = {}
        self._last_eval = 0.0
        self._data_since_eval = False
        self._gpu_suspect_since: int | None = None
        self._last_progress_ts = 0
        self._cpu_window: deque[tuple[float, float]] = deque()
        self.eval_cpu_s = 0.0
        self.steps = 0
        self.started = time.monotonic()
        self.peak_rss = 0.0
        from forensics.ingest import textdoc
        from forensics.match.detectors import live_stall_thresholds

        # The same few thousand anchors are searched in a small document every read: one Hyperscan
        # database, compiled once, beats a find() per literal at any size here.
        textdoc.HS_MIN_BYTES = 0
        live_stall_thresholds(max(1.0, self.options.stall_min_s - MARGIN_S), self.options.stall_steps)

    # -- the triggers --------------------------------------------------------------------------------
    def _track(self, res: PollResult) -> tuple[bool, list[str]]:
        """Update the progress streams and GPU state; (evaluate now?, why)."""
        why: list[str] = []
        for e in res.events:
            if e.kind != "progress" or e.ts is None:
                continue
            self._last_progress_ts = max(self._last_progress_ts, e.ts)
            key = (e.origin.path, e.rank if e.rank is not None else e.attrs.get("rank"), e.attrs.get("desc"))
            s = self._streams.get(key)
            if s is None:
                s = self._streams[key] = _Stream(e.ts)
            elif e.ts > s.last_ts:
                s.intervals.append(e.ts - s.last_ts)
                s.last_ts = e.ts
            rate = _rate(e)
            if rate is not None:
                low = len(s.rates) >= 5 and rate <= DROP_RATIO * statistics.median(list(s.rates)[1:])
                s.low_run = s.low_run + 1 if low else 0
                if 1 <= s.low_run <= 4:  # the first readings after a fall: the detector wants three
                    why.append("throughput fell")
                s.rates.append(rate)
        if res.urgent:
            why.append(f"{res.urgent[0].kind} event")
        return bool(why), why

    def _stall_due(self, now_ns: int) -> bool:
        due = False
        for s in self._streams.values():
            if s.told_at == s.last_ts:
                continue
            step = statistics.median(s.intervals) if len(s.intervals) >= 4 else 0
            threshold = max(self.options.stall_min_s * 1e9, self.options.stall_steps * step) - MARGIN_S * 1e9
            if now_ns - s.last_ts >= threshold:
                s.told_at = s.last_ts
                due = True
        return due

    def _gpu_suspect(self, events: list[Event]) -> None:
        """A GPU idle while a peer works (or the reverse ends): from the newest samples of the store."""
        frames: dict[str, dict[str, dict[str, float]]] = {}
        for src in self.engine.store.sources.values():
            for gpu, samples in src.metrics.items():
                if samples:
                    m = samples[-1]
                    frames.setdefault(m.host or "", {})[gpu] = dict(m.values)
        suspect = False
        for gpus in frames.values():
            busy = [g for g, v in gpus.items() if v.get("util_gpu_pct", 0) >= 80]
            idle = [g for g, v in gpus.items() if v.get("util_gpu_pct", 100) <= 5 and v.get("mem_used_mib", 0) >= 1024]
            spin = [g for g, v in gpus.items() if v.get("util_gpu_pct", 0) >= 90 and v.get("power_limit_w")
                    and v.get("power_w", 1e9) <= 0.3 * v["power_limit_w"]]
            suspect |= bool(busy and idle) or len(spin) >= 2
        now = self.engine.now_ns()
        if suspect and self._gpu_suspect_since is None:
            self._gpu_suspect_since = now
        elif not suspect:
            self._gpu_suspect_since = None

    def _paused(self) -> bool:
        """The newest line says the run saves or evaluates, no progress came since, not for too long."""
        p = self.engine.pauses
        return (p.last_ts is not None and p.last_ts >= self._last_progress_ts
                and self.engine.now_ns() - p.last_ts < self.options.pause_max * 1e9)

    # -- the budget ----------------------------------------------------------------------------------
    def _over_budget(self) -> bool:
        now, cpu = time.monotonic(), time.process_time()
        self._cpu_window.append((now, cpu))
        while len(self._cpu_window) > 2 and now - self._cpu_window[0][0] > 60:
            self._cpu_window.popleft()
        t0, c0 = self._cpu_window[0]
        return now - t0 >= 10 and (cpu - c0) / (now - t0) > self.options.cpu_budget

    # -- one step ------------------------------------------------------------------------------------
    def step(self, final: bool = False, read: bool = True) -> list[Alert]:
        """Read (unless nothing changed: ``read`` False), and evaluate if something asks for it; returns
        the alerts raised."""
        self.steps += 1
        res = self.engine.flush() if final else self.engine.poll() if read else PollResult()
        if res.bytes_read or res.samples or res.events:
            self._data_since_eval = True
        now_mono = time.monotonic()
        urgent, _ = self._track(res)
        if res.samples:
            self._gpu_suspect(res.events)
        now_ns = self.engine.now_ns()
        due = final or urgent or self._stall_due(now_ns)
        if not due and self._gpu_suspect_since is not None:
            held = now_ns - self._gpu_suspect_since >= (self.options.stall_min_s - MARGIN_S) * 1e9
            due = held and now_mono - self._last_eval >= self.options.suspect_eval_s
        if not due and self._data_since_eval and now_mono - self._last_eval >= self.options.idle_eval_s:
            due = not self._over_budget()
        if not due:
            return []
        return self.evaluate()

    def evaluate(self) -> list[Alert]:
        ev = self.engine.evaluate()
        self.last = ev
        self.eval_cpu_s += ev.cpu_s
        self._last_eval = time.monotonic()
        self._data_since_eval = False
        alerts = self.incidents.update(ev.verdict, ev.at_ns, hold=self._paused())
        if alerts:
            self.channels.send(alerts)
            self.alerts += alerts
        self.peak_rss = max(self.peak_rss, rss_mib())
        return alerts

    # -- the loop ------------------------------------------------------------------------------------
    def run(self, stop: threading.Event, end: threading.Event | None = None,
            on_step: Callable[[], None] | None = None) -> None:
        """Until ``stop`` (leave at once) or ``end`` (the run ended: read the rest, evaluate, leave), or
        ``duration`` passed, or (``exit_when_done``) every followed bundle stopped running. Whoever
        sets ``stop`` or ``end`` calls :meth:`wake` too."""
        from forensics.live.follow import Wakeup

        wake = self._wake = Wakeup(self.engine.roots, use_watchfiles=self.options.use_watchfiles)
        last_read = 0.0
        try:
            while not stop.is_set():
                if end is not None and end.is_set():
                    self.step(final=True)
                    return
                now = time.monotonic()
                read = wake.changed() or now - last_read >= FULL_READ_S
                if read:
                    last_read = now
                self.step(read=read)
                if on_step is not None:
                    on_step()
                if self.options.duration is not None and time.monotonic() - self.started >= self.options.duration:
                    self.step(final=True)
                    return
                if self.options.exit_when_done and self.engine.manifests and all(
                        m.get("status") != "running" for m in self.engine.manifests.values()):
                    self.step(final=True)
                    return
                if not stop.is_set() and not (end is not None and end.is_set()):
                    wake.wait(self.options.tick * (4 if self._over_budget() else 1))
        finally:
            wake.close()

    def wake(self) -> None:
        """Wake the loop now (after setting its ``stop`` or ``end``)."""
        w = getattr(self, "_wake", None)
        if w is not None:
            w.poke()

    def stats(self) -> dict[str, Any]:
        wall = time.monotonic() - self.started
        return {"wall_s": round(wall, 3), "cpu_s": round(time.process_time(), 3),
                "evaluations": self.engine.evaluations, "eval_cpu_s": round(self.eval_cpu_s, 3),
                "lines": self.engine.lines_read, "bytes": self.engine.bytes_read, "alerts": len(self.alerts),
                "alerts_suppressed": sum(1 for a in self.alerts if a.suppressed), "kept": self.engine.store.size,
                "dropped": self.engine.store.dropped, "rss_mib": round(max(self.peak_rss, rss_mib()), 1),
                "deliveries_failed": sum(1 for d in self.channels.deliveries if d.ok is False),
                "deliveries_dropped": self.channels.dropped, "steps": self.steps}


def _rate(e: Event) -> float | None:
    for key in _RATES:
        v = e.attrs.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and v == v and v > 0:
            return 1.0 / float(v) if key == "s_it" else float(v)
    return None


def say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"forensics watch: {text}\n")
        sys.stderr.flush()


