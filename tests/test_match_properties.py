"""Whatever events and samples arrive, the engine answers and never raises."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from matchkit import T0, timeline

from forensics.events import Event, MetricSample, Origin, TsSource
from forensics.match import diagnose, load_signatures

SIGS = load_signatures()
KINDS = st.sampled_from(["log", "xid", "c10d", "progress", "traceback", "torchrun", "recorder", "derived", "nccl"])
ATTR_VALUES = st.one_of(st.none(), st.integers(-10**12, 10**12), st.floats(allow_nan=True), st.text(max_size=8),
                        st.lists(st.integers(), max_size=3), st.booleans())
ATTRS = st.dictionaries(st.sampled_from(["rank", "seq", "op_type", "numel_in", "pg", "last_enqueued", "timeout_ms",
                                         "step", "tokens_s", "it_s", "s_it", "exit_code", "xid", "pid", "reason",
                                         "tried_mib", "total_mib", "free_mib"]), ATTR_VALUES, max_size=6)
WORDS = st.sampled_from(["Xid", "79", "fallen off the bus", "CUDA out of memory", "Tried to allocate 1 GiB",
                         "Watchdog caught collective operation timeout", "exitcode: -9", "Killed", "NVML", "timeout",
                         "[spinning-collective]", "nan", "\n", " ", "(", "\\"])


@st.composite
def events(draw: st.DrawFn) -> Event:
    ts = draw(st.one_of(st.none(), st.integers(0, 10**6)))
    text = "".join(draw(st.lists(st.one_of(WORDS, st.text(max_size=10)), max_size=8)))
    return Event(ts=None if ts is None else T0 + ts * 10**9, ts_source=TsSource.EXACT, source="file:x",
                 kind=draw(KINDS), message=text.split("\n")[0], detail=text, origin=Origin("x.log", draw(
                     st.integers(1, 50))), host=draw(st.sampled_from([None, "a", "b"])),
                 rank=draw(st.one_of(st.none(), st.integers(0, 7))), attrs=draw(ATTRS))


@st.composite
def samples(draw: st.DrawFn) -> MetricSample:
    keys = ["util_gpu_pct", "power_w", "power_limit_w", "mem_used_mib", "mem_total_mib", "clock_reasons",
            "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max"]
    number = st.one_of(st.floats(-1e6, 1e6), st.just(float("nan")))
    values = draw(st.dictionaries(st.sampled_from(keys), number, max_size=10))
    ts = draw(st.one_of(st.none(), st.integers(0, 600)))
    return MetricSample(ts=None if ts is None else T0 + ts * 10**9, ts_source=TsSource.EXACT,
                        gpu=draw(st.sampled_from(["0", "1", "2"])), values=values, origin=Origin("m.jsonl", 1),
                        host=draw(st.sampled_from([None, "a"])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(events(), max_size=25), st.lists(samples(), max_size=40))
@pytest.mark.slow
def test_any_timeline_gets_a_verdict(evs: list[Event], ms: list[MetricSample]) -> None:
    findings, verdict = diagnose(timeline(evs, ms), SIGS)
    assert verdict.root_cause is None or verdict.root_cause in findings
    assert all(0.0 <= f.score <= 1.0 for f in findings)
    assert not [w for w in verdict.warnings if w.startswith("detector ")], verdict.warnings
