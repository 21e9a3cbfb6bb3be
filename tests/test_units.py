"""One wording for sizes, durations, times and sparklines (forensics/units.py), whatever the face."""

from __future__ import annotations

import math

import pytest

from forensics import units
from forensics.events import Event, Origin, TsSource


@pytest.mark.parametrize(("value", "text"), [
    (256, "256 MiB"), (1023, "1,023 MiB"), (1023.6, "1.0 GiB"), (1024, "1.0 GiB"), (2048, "2.0 GiB"),
    (81_559, "79.6 GiB"), (143_771, "140.4 GiB"), (-86, "-86 MiB"), (-2048, "-2.0 GiB"), (0, "0 MiB"),
])
def test_sizes_switch_to_gib_at_one_gib(value: float, text: str) -> None:
    assert units.mib(value) == text


def test_a_missing_size_reads_as_the_callers_placeholder() -> None:
    assert [units.mib(v) for v in (None, math.nan, True, "12")] == ["–"] * 4
    assert units.mib(None, "") == ""


def test_one_size_reads_the_same_in_every_face() -> None:
    """2,048 MiB was "2.0 GiB" in the TUI and "2,048 MiB" in Markdown and HTML."""
    from forensics.postmortem import diff, html_report, markdown
    from forensics.tui.charts import fmt_value
    from forensics.tui.model import facts_sentence

    assert markdown._mib(2048) == html_report._mib(2048) == diff._mib(-2048) == fmt_value(2048, "MiB") == "2.0 GiB"
    assert facts_sentence({"oom": "cuda", "tried_mib": 2048, "free_mib": 512, "total_mib": 81_559}) == \
        "CUDA out of memory — tried 2.0 GiB, 512 MiB free of 79.6 GiB"


def test_file_sizes_and_rates_are_decimal() -> None:
    assert [units.si_bytes(n) for n in (999, 12_345, 1_500_000, 2.5e9)] == ["999 B", "12 kB", "1.5 MB", "2.5 GB"]


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0 µs"), (31e-6, "31 µs"), (0.402, "402 ms"), (0.9996, "1 s"), (2.5, "2.5 s"), (3, "3 s"),
    (12.5, "12 s"), (90, "90 s"), (119.4, "119 s"), (119.6, "2 min"), (600, "10 min"), (602, "10 min"),
    (9354.8, "2.6 h"), (3 * 86400 + 43200, "3.5 d"), (-90, "90 s"),
])
def test_durations_in_the_largest_unit_that_stays_short(seconds: float, text: str) -> None:
    assert units.duration(seconds) == text


def test_ninety_seconds_read_the_same_in_the_tui_the_detectors_and_the_reports() -> None:
    """90 s was "1 min 30 s" in the TUI and "90 s" in the findings."""
    from forensics.match.detectors.common import fmt_duration as detector_duration
    from forensics.tui.model import fmt_delta, fmt_duration

    ns = 90 * 10**9
    assert fmt_duration(ns) == detector_duration(ns) == units.duration_ns(ns) == "90 s"
    assert fmt_delta(ns) == units.fmt_dt(90) == "+90 s"


def test_dt_from_the_root_cause_is_to_the_second() -> None:
    assert [units.fmt_dt(s) for s in (0.0, -0.2, 0.7, -3, 45, 600, 9354.8)] == \
        ["+0 s", "+0 s", "+1 s", "-3 s", "+45 s", "+10 min", "+2.6 h"]
    assert units.fmt_dt(None) == ""


def _event(ts: int | None, source: TsSource) -> Event:
    return Event(ts=ts, ts_source=source, source="kmsg", kind="log", message="x", origin=Origin("f", 1))


def test_times() -> None:
    ts = 1_714_565_100_123_456_789  # 2024-05-01 12:05:00.123456789 UTC
    assert units.iso(ts) == "2024-05-01T12:05:00.123457Z" and units.iso(None) is None
    assert units.iso(10**30) is None  # refused by the clock layer; never a crash here
    assert units.stamp_ms(ts) == "2024-05-01 12:05:00.123Z" and units.stamp_ms(None) == "(no time)"
    assert units.stamp(ts) == "2024-05-01 12:05:00 UTC" and units.stamp(ts, local=True) == "2024-05-01 12:05:00 (local)"
    assert units.clock_ms(ts) == "12:05:00.123" and units.clock_ms(None) == "--:--:--.---"
    assert units.when(_event(ts, TsSource.EXACT)) == "2024-05-01 12:05:00Z"
    assert units.when(_event(ts, TsSource.INFERRED)) == "≈2024-05-01 12:05:00Z"
    assert units.when(_event(ts, TsSource.LOCAL)) == "2024-05-01 12:05:00 (local)"
    assert units.when(_event(None, TsSource.NONE)) == "(no time)"


def test_sparklines_have_eight_equal_levels_and_gaps() -> None:
    assert units.sparkline(range(8), 0, 7) == "▁▂▃▄▅▆▇█"
    assert units.sparkline([1.0, math.nan, 3.0], 1.0, 3.0) == "▁ █"
    assert units.sparkline([5.0, 5.0], 5.0, 5.0) == "██"  # an empty range: all at the top
    assert units.sparkline([-10.0, 99.0], 0.0, 1.0) == "▁█"  # clamped


def test_the_report_and_the_tui_draw_one_sparkline() -> None:
    import numpy as np

    from forensics.tui.charts import sparkline as tui_sparkline

    values = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    ts = np.arange(8, dtype=np.int64)
    assert tui_sparkline(ts, np.array(values), 0, 7, 8, 0.0, 7.0) == units.sparkline(values, 0.0, 7.0)
