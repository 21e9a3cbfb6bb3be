"""The incremental analysis against ``analyze``: every shipped recording written slice by slice (a virtual
clock, no waiting) while the engine reads it; at each slice the verdict an alert would carry, at the end
the verdict ``analyze`` gives. No alert on the healthy recordings."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from forensics.analysis import analyze
from forensics.live.alerts import Incidents
from forensics.live.engine import LiveEngine
from forensics.live.replay import BundleReplay
from forensics.live.store import SourceStore
from forensics.match.detectors import live_stall_thresholds

pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "recorded"
CASES = sorted(p.name for p in SAMPLES.iterdir() if (p / "bundle").is_dir())


def _expected(name: str) -> str | None:
    want = tomllib.loads((SAMPLES / name / "expected.toml").read_text()).get("root_cause", "none")
    return None if want == "none" else str(want)


def replay_with_engine(src: Path, out: Path, slices: int = 40) -> tuple[LiveEngine, list[tuple[float, str, str]]]:
    """Write ``src`` slice by slice; after each, the engine reads and the incidents are updated."""
    clock = [0.0]
    replay = BundleReplay(src, out)
    engine: list[LiveEngine] = []
    incidents = Incidents()
    told: list[tuple[float, str, str]] = []
    span = (replay.end - replay.start) / 1e9

    def at(_virtual_ns: int) -> None:
        clock[0] += span / slices
        if not engine:
            engine.append(LiveEngine([replay.dst], mono=lambda: clock[0]))
        engine[0].poll()
        ev = engine[0].evaluate()
        told.extend((clock[0], a.kind, a.signature) for a in incidents.update(ev.verdict, ev.at_ns, now=clock[0]))

    replay.run_fast(slices, at)
    clock[0] += 60
    engine[0].flush()  # the watcher's last look, once the recorder said the run ended
    ev = engine[0].evaluate()
    told.extend((clock[0], a.kind, a.signature) for a in incidents.update(ev.verdict, ev.at_ns, now=clock[0]))
    return engine[0], told


@pytest.fixture
def live_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The watcher process's stall thresholds, put back after the test."""
    from forensics.match.detectors import frames, gpu_metrics, odd_one_out, progress

    for module, names in ((progress, ("MIN_STALL_NS", "STALL_STEPS")), (odd_one_out, ("MIN_SILENT_NS", "SILENT_STEPS")),
                          (gpu_metrics, ("MIN_STALL_NS",)), (frames, ("SPARSE_FRAMES",))):
        for name in names:
            monkeypatch.setattr(module, name, getattr(module, name))
    live_stall_thresholds(58, 5)


@pytest.mark.parametrize("name", CASES)
def test_the_live_verdict_is_the_one_analyze_gives(tmp_path: Path, name: str, live_thresholds: None) -> None:
    engine, told = replay_with_engine(SAMPLES / name / "bundle", tmp_path)
    end = engine.evaluate().verdict
    ref = analyze([str(SAMPLES / name / "bundle")]).verdict
    assert end.root_cause_id == ref.root_cause_id == _expected(name)
    assert (end.blame.culprits if end.blame else None) == (ref.blame.culprits if ref.blame else None)
    new = [sig for _, kind, sig in told if kind == "new"]
    if _expected(name) is None:
        assert told == [], told  # no false alert on a healthy recording
    else:
        assert _expected(name) in new, told  # told while the run was going


def test_the_store_stays_bounded_over_a_day() -> None:
    from forensics.events import Event, MetricSample, Origin, TsSource

    store = SourceStore("train.log")
    t0 = 1_790_000_000 * 10**9
    for i in range(86_400):  # one progress line and one sample of each of 8 GPUs per second, 24 h
        ts = t0 + i * 10**9
        e = Event(ts=ts, ts_source=TsSource.RECEIPT, source="stdout", kind="progress", message=f"step {i}",
                  origin=Origin("train.log", i + 1, i * 60), attrs={"step": i, "tokens_s": 21500.0})
        ms = [MetricSample(ts=ts, ts_source=TsSource.EXACT, gpu=str(g), values={"util_gpu_pct": 100.0},
                           origin=Origin("nvml.jsonl", i + 1)) for g in range(8)]
        store.add(i, [e], ms)
    assert store.size < 60_000, store.size
    events, metrics = store.timeline_input()
    assert events[-1].attrs["step"] == 86_399 and metrics[-1].ts == t0 + 86_399 * 10**9
    assert events[0].attrs["step"] == 0  # the start is kept, thinned
