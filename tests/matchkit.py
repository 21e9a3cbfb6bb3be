"""Small builders for the matcher tests: events, metric samples, fixture signatures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forensics.events import Event, MetricSample, Origin, TsSource
from forensics.findings import Finding, Verdict
from forensics.match import diagnose
from forensics.match.loader import load_file, signature_files
from forensics.match.schema import Signature
from forensics.timeline.merge import Timeline

FIXTURES = Path(__file__).parent / "data" / "signatures"
T0 = 1_700_000_000 * 10**9  # 2023-11-14T22:13:20Z
S = 10**9


def fixture_signatures(*ids: str) -> list[Signature]:
    sigs = [load_file(p) for p in signature_files(FIXTURES)]
    return [s for s in sigs if not ids or s.id in ids]


_line = iter(range(1, 10**9))


def ev(message: str, *, kind: str = "log", t: float | None = None, path: str = "app.log", line: int | None = None,
       host: str | None = None, gpu: str | None = None, rank: int | None = None, pid: int | None = None,
       source: str = "file:app.log", detail: str = "", **attrs: Any) -> Event:
    """One event; ``t`` is seconds after T0 (None: no time)."""
    return Event(
        ts=None if t is None else T0 + int(t * S),
        ts_source=TsSource.NONE if t is None else TsSource.EXACT,
        source=source,
        kind=kind,
        message=message,
        origin=Origin(path, line if line is not None else next(_line)),
        host=host, gpu=gpu, rank=rank, pid=pid, attrs=attrs, detail=detail,
    )


def sample(gpu: str, t: float | None, path: str = "nvml.jsonl", host: str | None = "node1", line: int = 1,
           **values: float) -> MetricSample:
    return MetricSample(ts=None if t is None else T0 + int(t * S),
                        ts_source=TsSource.NONE if t is None else TsSource.EXACT,
                        gpu=gpu, values=values, origin=Origin(path, line), host=host, source="nvml")


def timeline(events: list[Event], metrics: list[MetricSample] | None = None) -> Timeline:
    key = [(e.ts if e.ts is not None else 1 << 62, i) for i, e in enumerate(events)]
    ordered = [events[i] for _, i in sorted(key)]
    return Timeline(ordered, sorted(metrics or [], key=lambda m: m.ts if m.ts is not None else 1 << 62))


def run(events: list[Event], sigs: list[Signature] | None = None,
        metrics: list[MetricSample] | None = None) -> tuple[list[Finding], Verdict]:
    return diagnose(timeline(events, metrics), sigs if sigs is not None else fixture_signatures())


def by_id(findings: list[Finding]) -> dict[str, Finding]:
    return {f.signature: f for f in findings}
