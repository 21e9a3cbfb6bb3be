"""The TUI's plain-data parts: view model, event index and filter language, text charts."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from forensics.events import Event, Origin, Severity, TsSource
from forensics.findings import Finding, Role
from forensics.timeline.query import EventIndex, QueryError, parse_query, parse_time
from forensics.tui import demo
from forensics.tui.charts import braille, bucket, fmt_range, fmt_value, marker_row, span_mask, sparkline, time_axis
from forensics.tui.model import (
    as_ns,
    build_model,
    derived_spans,
    fmt_delta,
    fmt_duration,
    fmt_when,
    gap_ns,
    gpu_alias,
    names_gpu,
    ordered_findings,
)

S = 10**9


def _ev(ts: int | None, message: str, *, source: str = "stderr", severity: Severity = Severity.INFO,
        host: str | None = None, gpu: str | None = None, rank: int | None = None, kind: str = "log",
        line: int = 1, **attrs: object) -> Event:
    return Event(ts, TsSource.EXACT if ts is not None else TsSource.NONE, source, kind, message,
                 Origin("x.log", line), severity, host, gpu, rank, attrs=attrs)


@pytest.fixture(scope="module")
def incident_model():
    return build_model(demo.xid79_incident())


# -- view model ---------------------------------------------------------------------------------
def test_run_facts_come_from_recording_gpu_info_and_exit_events(incident_model) -> None:
    facts = incident_model.facts
    assert facts.command.startswith("torchrun --nproc-per-node 8")
    assert facts.status == "exit 1"
    assert facts.versions == {"driver": "550.90.07", "cuda": "12.4", "torch": "2.3.1", "nccl": "2.20.5"}
    assert facts.hosts == ["gpu-node-17"]
    assert facts.ranks == [0, 1, 2, 3, 4, 5, 7]
    # gpu-info names GPUs by index and bus id, the metrics by index: one GPU each, not two.
    assert [g.label for g in facts.gpus] == [str(i) for i in range(8)]
    six = facts.gpus[6]
    assert (six.bus, six.model, six.link) == ("0000:ba:00.0", "NVIDIA H100 80GB HBM3", "Gen5 x16")
    assert facts.duration_ns is not None and 900 * S < facts.duration_ns < 960 * S


def test_series_spans_and_present_metrics(incident_model) -> None:
    assert [s.gpu for s in incident_model.series] == [str(i) for i in range(8)]
    six = incident_model.series[6]
    util = six.values["util_gpu_pct"]
    assert np.isfinite(util).any() and six.ts[-1] < demo.T0 + 320 * S  # GPU 6 stopped answering at the Xid
    assert [m.column for m in incident_model.metrics][:4] == ["mem_used_mib", "util_gpu_pct", "power_w", "temp_c"]
    assert sorted({s.detector for s in incident_model.spans}) == ["margin", "stall"]
    stall = [s for s in incident_model.spans if s.detector == "stall"]
    assert len(stall) == 7 and all(s.end - s.start > 590 * S for s in stall)


def test_findings_are_ordered_root_cause_then_consequences_by_time_then_contributing() -> None:
    def f(sig: str, role: Role, ts: int | None, score: float = 0.5) -> Finding:
        return Finding(sig, sig, "x", score, [_ev(ts, sig)] if ts is not None else [], role)

    ordered = ordered_findings([f("c2", Role.CONTRIBUTING, 5, 0.2), f("q2", Role.CONSEQUENCE, 9),
                                f("c1", Role.CONTRIBUTING, 1, 0.9), f("root", Role.ROOT_CAUSE, 7),
                                f("q1", Role.CONSEQUENCE, 8), f("q0", Role.CONSEQUENCE, None)])
    assert [x.signature for x in ordered] == ["root", "q1", "q2", "q0", "c1", "c2"]


def test_gpu_aliases_unify_bus_id_spellings(incident_model) -> None:
    assert gpu_alias("PCI:0000:BA:00") == gpu_alias("00000000:BA:00.0") == gpu_alias("0000:ba:00.0") == "0000:ba:00"
    assert gpu_alias(" 6 ") == "6"
    six = incident_model.series[6]
    assert names_gpu(incident_model, six, ["0000:ba:00.0"])
    assert names_gpu(incident_model, six, ["6"])
    assert not names_gpu(incident_model, six, ["0000:18:00.0", "7"])


def test_derived_spans_read_several_attribute_spellings() -> None:
    t = 1_700_000_000 * S
    iso = datetime.fromtimestamp(1_700_000_100, UTC).isoformat().replace("+00:00", "Z")
    events = [
        _ev(t, "a", kind="derived", detector="stall", first_ts=t, last_ts=t + 60 * S),
        _ev(t, "b", kind="derived", detector="throttle", start=1_700_000_000.0, end=iso),
        _ev(t + 5 * S, "c", kind="derived", detector="margin"),  # a point span at its own time
        _ev(t, "not derived", kind="log", detector="stall"),
        _ev(None, "no time at all", kind="derived"),
    ]
    spans = derived_spans(events)
    assert [(s.detector, (s.end - s.start) // S) for s in spans] == [("stall", 60), ("throttle", 100), ("margin", 0)]
    assert as_ns("not a time") is None and as_ns(True) is None


def test_durations_read_at_a_glance() -> None:
    """The TUI words durations as every other face does (forensics.units.duration)."""
    assert fmt_duration(31_000) == "31 µs"
    assert fmt_duration(402 * 10**6) == "402 ms"
    assert fmt_duration(2.5 * S) == "2.5 s" and fmt_duration(12.5 * S) == "12 s" and fmt_duration(90 * S) == "90 s"
    assert fmt_duration(600 * S) == "10 min"
    assert fmt_duration(3 * 3600 * S + 5 * 60 * S) == "3.1 h"
    assert fmt_delta(-2 * S) == "-2 s" and fmt_delta(None) == "" and fmt_delta(0) == "same time"


def test_events_without_a_wall_time_show_their_uptime() -> None:
    placed = _ev(1_700_000_000 * S + 250 * 10**6, "a")
    a = Event(None, TsSource.NONE, "kmsg", "xid", "a", Origin("dmesg", 1), uptime_ns=1000_784_048_000)
    b = Event(None, TsSource.NONE, "kmsg", "xid", "b", Origin("dmesg", 9), uptime_ns=1001_607_145_000)
    assert fmt_when(placed) == "22:13:20.250"
    assert fmt_when(a) == "up 1000.784 " and len(fmt_when(a)) == 12
    assert gap_ns(a, b) == 823_097_000
    assert gap_ns(placed, a) is None and gap_ns(placed, placed) == 0


def test_model_of_an_empty_analysis_is_empty_not_an_error() -> None:
    model = build_model(demo.empty_analysis())
    assert model.findings == [] and model.series == [] and model.metrics == [] and model.span is None
    assert model.facts.gpus == [] and model.facts.command == ""


# -- filter language and index ------------------------------------------------------------------
def test_parse_query_fields_words_and_patterns() -> None:
    q = parse_query(r'host:node-a gpu:6,7 rank:0-3,9 src:kmsg kind:xid sev:warning Xid "fell off" /SeqNum=\d+ x/')
    assert q.fields == {"host": ["node-a"], "gpu": ["6", "7"], "source": ["kmsg"], "kind": ["xid"]}
    assert q.ranks == [(0, 3), (9, 9)]
    assert q.min_severity == Severity.WARNING
    assert q.words == ["Xid", "fell off"]
    assert q.patterns == [r"SeqNum=\d+ x"]
    assert parse_query("error: re:a.b").words == ["error:"] and parse_query("re:a.b").patterns == ["a.b"]
    assert parse_query("   ").empty


@pytest.mark.parametrize("text", ["sev:loud", "rank:x", "rank:", "/a(b/"])
def test_parse_query_explains_what_it_cannot_read(text: str) -> None:
    with pytest.raises(QueryError):
        parse_query(text)


@pytest.fixture()
def small_index() -> EventIndex:
    t = 1_700_000_000 * S
    events = [
        _ev(t, "boot ok " + "İ" * 100, source="kmsg", host="node-a", line=1),  # lower() makes this longer
        _ev(t + 1 * S, "NVRM: Xid (PCI:0000:ba:00): 79, GPU has fallen off the bus.", source="kmsg",
            severity=Severity.CRITICAL, host="node-a", gpu="0000:ba:00.0", kind="xid", line=2),
        _ev(t + 2 * S, "step 10 loss 2.3", source="stdout", host="node-a", rank=0, line=3),
        _ev(t + 3 * S, "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120)", severity=Severity.ERROR,
            host="node-b", rank=3, gpu="3", kind="c10d", line=4),
        _ev(t + 4 * S, "UserWarning: use_reentrant", severity=Severity.WARNING, host="node-b", rank=3, line=5),
        _ev(t + 5 * S, "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96121)", severity=Severity.ERROR,
            host="node-b", rank=12, gpu="4", kind="c10d", line=6),
        _ev(None, "error: no time", host="node-b", line=7),
    ]
    return EventIndex(events)


@pytest.mark.parametrize(("query", "rows"), [
    ("", [0, 1, 2, 3, 4, 5, 6]),
    ("host:node-a", [0, 1, 2]),
    ("host:node", [0, 1, 2, 3, 4, 5, 6]),  # no exact name: a substring match
    ("gpu:bb", []),
    ("gpu:ba", [1]),
    ("gpu:3,4", [3, 5]),
    ("rank:0-3", [2, 3, 4]),
    ("rank:12", [5]),
    ("source:kmsg", [0, 1]),
    ("kind:c10d sev:error", [3, 5]),
    ("sev:warning", [1, 3, 4, 5]),
    ("watchdog", [3, 5]),
    ("Watchdog host:node-b rank:12", [5]),
    ("watchdog WATCHDOG", []),  # smart case: an uppercase word matches case-sensitively
    ('"fallen off"', [1]),
    (r"/SeqNum=\d+1\)/", [5]),
    ("/^step \\d+/", [2]),
    ("/timeout.*SeqNum/", [3, 5]),
    ("/İ\\nNVRM/", []),  # a match across two messages is not a match of either
    ("step 10", [2]),  # found in the lowercased buffer: offsets stay right after a longer lowercase
    ('"error: no"', [6]),
])
def test_select(small_index: EventIndex, query: str, rows: list[int]) -> None:
    assert small_index.select(parse_query(query)).tolist() == rows


def test_next_error_and_time_jumps(small_index: EventIndex) -> None:
    view = np.arange(len(small_index), dtype=np.int64)
    assert small_index.next_error(view, 0) == 1
    assert small_index.next_error(view, 1) == 3
    assert small_index.next_error(view, 5) is None
    assert small_index.next_error(view, 5, backwards=True) == 3
    assert small_index.next_error(view, 1, backwards=True) is None
    filtered = small_index.select(parse_query("host:node-b"))  # rows 3, 4, 5, 6
    assert small_index.next_error(filtered, 0) == 2  # the second row of the view: event 5
    t = 1_700_000_000 * S
    assert small_index.row_at_time(view, t + 2 * S + 1) == 3
    assert small_index.row_at_time(view, t - S) == 0
    assert small_index.row_at_time(filtered, t + 4 * S) == 1
    assert small_index.row_at_time(np.zeros(0, dtype=np.int64), t) == 0


def test_parse_time_forms() -> None:
    start = int(datetime(2024, 5, 14, 23, 50, tzinfo=UTC).timestamp()) * S
    span = (start, start + 3600 * S)
    assert parse_time("+90s", span) == start + 90 * S
    assert parse_time("+1h30m", span) == start + 5400 * S
    assert parse_time("+5m", span) == start + 300 * S
    assert parse_time("23:55", span) == start + 300 * S
    assert parse_time("00:10:00.5", span) == start + 1200 * S + S // 2  # the run crossed midnight
    assert parse_time("2024-05-14T23:52:00Z", span) == start + 120 * S
    assert parse_time("2024-05-15T01:52:00+02:00", span) == start + 120 * S
    long_span = (start, start + 5 * 86400 * S)  # a clock time means on the day of the event being looked at
    looking_at = start + 3 * 86400 * S
    assert parse_time("23:55", long_span, day_of=looking_at) == start + 3 * 86400 * S + 300 * S
    assert parse_time("00:10", long_span, day_of=looking_at) == start + 2 * 86400 * S + 1200 * S
    for bad in ("", "soon", "25:00", "+x"):
        with pytest.raises(QueryError):
            parse_time(bad, span)
    with pytest.raises(QueryError):
        parse_time("12:00", None)


# -- charts -------------------------------------------------------------------------------------
def test_bucket_mean_min_max_and_gaps() -> None:
    ts = np.array([0, 1, 2, 3, 8, 9], dtype=np.int64)
    values = np.array([1.0, 3.0, 5.0, np.nan, 10.0, 20.0])
    mean, lo, hi = bucket(ts, values, 0, 9, 5)
    assert mean[0] == 2.0 and lo[0] == 1.0 and hi[0] == 3.0
    assert mean[1] == 5.0  # the NaN sample is ignored
    assert np.isnan(mean[2]) and np.isnan(mean[3])  # no samples: a gap, not a zero
    assert (lo[4], hi[4]) == (10.0, 20.0)


def test_sparkline_levels_and_gaps() -> None:
    ts = np.arange(8, dtype=np.int64)
    line = sparkline(ts, np.array([0, 1, 2, 3, 4, 5, 6, 8.0]), 0, 7, 8, 0.0, 8.0)
    assert line == "▁▂▃▄▅▅▆█"  # eight equal levels (forensics.units.sparkline); zero still draws "▁": there is data
    gap = sparkline(np.array([0, 7], dtype=np.int64), np.array([1.0, 1.0]), 0, 7, 8, 0.0, 1.0)
    assert gap == "█      █"
    # Samples every 3 columns are one line; a stop longer than 3 sampling intervals stays a gap.
    every3 = np.array([0, 3, 6, 9, 12, 27, 30], dtype=np.int64)
    joined = sparkline(every3, np.full(7, 1.0), 0, 31, 32, 0.0, 1.0)
    assert joined[:13] == "█" * 13 and joined[13:27] == " " * 14 and joined[27:31] == "████"


def test_braille_draws_a_continuous_line_and_leaves_gaps() -> None:
    ts = np.arange(0, 40, dtype=np.int64)
    values = np.where(ts < 20, 0.0, 100.0)
    rows = braille(ts, values, 0, 39, 20, 2, 0.0, 100.0)
    assert len(rows) == 2 and all(len(r) == 20 for r in rows)
    assert set(rows[1][:9]) <= {"⣀"} and set(rows[0][11:]) <= {"⠉"}  # low first half, high second half
    assert rows[0][10].strip() and rows[1][10].strip()  # the step is joined top to bottom
    sparse = braille(np.array([0, 39], dtype=np.int64), np.array([50.0, 50.0]), 0, 39, 20, 2, 0.0, 100.0)
    assert sparse[0][5:15].strip() == "" and sparse[1][5:15].strip() == ""
    # Samples sparser than the dots (one every 4 dot columns) still draw one unbroken line.
    every4 = np.arange(0, 40, 4, dtype=np.int64)
    line = braille(every4, np.full(len(every4), 100.0), 0, 39, 40, 1, 0.0, 100.0)[0]
    assert " " not in line[:18] and set(line[:18]) == {"⠉"}


def test_span_mask_marker_row_and_axis() -> None:
    assert span_mask([(10, 19)], 0, 99, 10).tolist() == [False, True] + [False] * 8
    assert span_mask([(500, 600)], 0, 99, 10).tolist() == [False] * 10
    assert marker_row([(0, "1"), (99, "2"), (55, "3"), (200, "x")], 0, 99, 10, fill="─") == "1────3───2"
    t0 = int(datetime(2024, 5, 14, 9, 0, tzinfo=UTC).timestamp()) * S
    axis = time_axis(t0, t0 + 900 * S, 40)
    assert axis.startswith("09:00:00") and axis.endswith("09:15:00") and "09:07:30" in axis
    assert fmt_value(81_559, "MiB") == "79.6 GiB" and fmt_value(2048, "MiB") == "2.0 GiB"
    assert fmt_value(55, "%") == "55%"
    assert fmt_range(0, 81_559, "MiB") == "0–79.6 GiB" and fmt_range(0, 700, "W") == "0–700 W"


@pytest.mark.slow
def test_a_recorded_bundle_gives_the_run_its_own_span_and_one_fact_per_gpu() -> None:
    from pathlib import Path

    from forensics.analysis import analyze

    bundle = Path(__file__).resolve().parent.parent / "samples" / "recorded" / "silent-stall-2gpu" / "bundle"
    analysis = analyze([str(bundle)])
    model = build_model(analysis)
    facts = model.facts
    assert len(facts.gpus) == len(model.series) == 2  # topology lines name no new GPU
    assert all(g.model.startswith("NVIDIA") for g in facts.gpus)
    recording = analysis.recordings[0]
    assert facts.run_span == (as_ns(recording["start"]), as_ns(recording["end"]))
    assert facts.command == recording["command"]
    assert model.span is not None and model.span[0] < facts.run_span[0]  # the kernel log reaches back further
    assert model.chart_span is not None and model.chart_span[0] <= facts.run_span[0]
    assert model.chart_span[0] >= min(int(s.ts[0]) for s in model.series) - 60 * S


def test_topology_records_without_identity_do_not_invent_gpus() -> None:
    from forensics.analysis import Analysis
    from forensics.findings import Confidence, Verdict
    from forensics.timeline.merge import Timeline

    events = [_ev(1, "gpu 0 info", kind="gpu-info", gpu="0", pci="0000:3b:00.0", name="NVIDIA A100-SXM4-80GB"),
              _ev(2, "topo", kind="gpu-info", gpu="0", link="NV12"),
              _ev(3, "topo", kind="gpu-info", gpu="5", link="NV12")]
    analysis = Analysis([], Timeline(events), [], Verdict(None, Confidence.LOW, ""))
    gpus = build_model(analysis).facts.gpus
    assert [(g.bus, g.model) for g in gpus] == [("0000:3b:00.0", "NVIDIA A100-SXM4-80GB")]
