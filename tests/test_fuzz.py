"""Fuzzing in the normal suite: a short seeded run of tests/fuzz.py (the long one is a
documented command, figure in docs/hardening.md) and hypothesis properties — any bytes into
any parser, any stamp into the clock and the renderers: no exception out."""

from __future__ import annotations

import contextlib
import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from forensics.parsers.common.base import ParseContext
from forensics.parsers.registry import PARSERS
from fuzz import run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.clock import (
    MAX_TS_NS,
    MIN_TS_NS,
    parse_ctime,
    parse_iso,
    plausible_ns,
    uptime_ns,
    wall_to_ns,
)
from forensics.errors import UsageError
from forensics.ingest.sources import expand_inputs
from forensics.ingest.textdoc import TextDocument
from forensics.timeline.filters import parse_bound
from forensics.units import iso

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
def test_a_short_seeded_fuzz_run_finds_no_crash_and_no_hang() -> None:
    result = run(inputs=40, seed=2, hang_s=60)
    assert result.inputs == 40
    assert not result.crashes, result.crashes[0][1]
    assert not result.hangs


def _mutated(parser_samples: tuple[str, ...]) -> st.SearchStrategy[bytes]:
    sample = st.sampled_from([s.encode() for s in parser_samples] or [b""])
    return st.one_of(
        st.binary(max_size=2000),
        st.tuples(sample, st.integers(0, 4000), st.binary(max_size=64)).map(
            lambda t: t[0][: t[1]] + t[2] + t[0][t[1]:]),
        st.tuples(sample, st.sampled_from(["9" * 5000, "4294967296", "-1", "1e308", "9999-12-31T23:59:59-14:00",
                                           "[" * 5000, '{"a":' * 3000])).map(
            lambda t: t[0].replace(b"1", t[1].encode(), 1)),
    )


@pytest.mark.parametrize("parser", PARSERS, ids=[p.name for p in PARSERS])
def test_any_bytes_into_any_parser_raise_nothing(parser: object) -> None:
    @FAST
    @given(_mutated(parser.samples))  # type: ignore[attr-defined]
    def prop(data: bytes) -> None:
        doc = TextDocument.from_bytes(data, "fuzz.log")
        ctx = ParseContext(path="fuzz.log", source="file:fuzz.log", year=2025)
        parser.detect(doc.head())  # type: ignore[attr-defined]
        list(parser.parse(doc, ctx))  # type: ignore[attr-defined]

    prop()


@FAST
@given(st.integers(0, 9999), st.integers(0, 13), st.integers(0, 32), st.integers(0, 25), st.integers(0, 61),
       st.sampled_from(["", "Z", "+14:00", "-14:00", "+0530", "+99", ".999999999Z"]))
def test_iso_stamps_of_any_year_parse_or_are_refused(year: int, month: int, day: int, hour: int, minute: int,
                                                     off: str) -> None:
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:00{off}"
    for tz in (None, timezone(timedelta(hours=-12))):
        got = parse_iso(text, tz)
        assert got is None or MIN_TS_NS <= got[0] < MAX_TS_NS
        assert iso(got[0] if got else None) is None or got is not None


@FAST
@given(st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True)))
def test_epoch_values_in_s_ms_ns_negative_or_huge_never_crash(value: float) -> None:
    for scale in (1, 1_000, 1_000_000_000):
        try:
            ns = value * scale
        except OverflowError:
            continue
        ts = plausible_ns(ns if not isinstance(ns, float) or math.isfinite(ns) else None)
        assert ts is None or MIN_TS_NS <= ts < MAX_TS_NS
        iso(ts)
    if isinstance(value, int):
        iso(value)  # the renderer itself never raises, even on stamps the clock would refuse


@FAST
@given(st.text(max_size=200))
def test_clock_parsers_take_any_text(text: str) -> None:
    uptime_ns(text)
    parse_ctime(text)
    parse_iso(text)
    if len(text) < 60:  # what people type after --since: a time, or one clear usage error
        with contextlib.suppress(UsageError):
            parse_bound(text, "--since")


@FAST
@given(st.integers(-10**6, 10**6), st.integers(-5, 20), st.integers(-5, 40))
def test_wall_clock_of_any_fields_is_none_or_in_range(year: int, month: int, day: int) -> None:
    got = wall_to_ns(year, month, day, 0, 0, 0, 0, None)
    assert got is None or MIN_TS_NS <= got[0] < MAX_TS_NS
    if got is not None:
        assert datetime.fromtimestamp(got[0] / 1e9, UTC).year == year


@settings(max_examples=30, deadline=None)
@given(st.binary(max_size=4096), st.sampled_from(["x.log", "x.gz", "x.zip", "x.tar", "x.evtx"]))
def test_the_sources_layer_takes_any_bytes(tmp_path_factory: pytest.TempPathFactory, data: bytes, name: str) -> None:
    for raw in (data, b"\x1f\x8b\x08" + data, b"PK\x03\x04" + data, b"ElfFile\x00" + data):
        path = Path(tmp_path_factory.mktemp("src")) / name
        path.write_bytes(raw)
        list(expand_inputs([str(path)]))


def test_a_hang_inside_a_guarded_detector_is_still_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    """``parsers.detect`` and ``parse_guard`` catch ``Exception`` (a detector bug must not stop an
    analysis); the fuzzer's hang is a BaseException, so they cannot swallow it: a detector that sleeps
    past the alarm is reported as a hang (an Exception here reported "0 hangs" for a 143 s input)."""
    import time

    import fuzz
    from forensics.parsers.registry import PARSERS

    target = next(p for p in PARSERS if p.name == "nvidia-smi-q")

    def stuck(head: list[str]) -> float:
        time.sleep(30)
        return 0.0

    monkeypatch.setattr(target, "detect", stuck)
    assert issubclass(fuzz.Hang, BaseException) and not issubclass(fuzz.Hang, Exception)
    result = fuzz.run(inputs=1, seed=5, hang_s=1.0)
    assert result.inputs == 1 and len(result.hangs) == 1 and not result.crashes


def test_a_short_fuzz_of_each_bundle_command_finds_nothing() -> None:
    """A few fuzzed bundles through report, diff and pack (the long runs: docs/hardening.md)."""
    from fuzz import run_bundles

    for command in ("report", "diff", "pack"):
        result = run_bundles(command, inputs=4, seed=3, hang_s=120)
        assert result.inputs == 4
        assert not result.crashes, result.crashes[0][1][-3000:]
        assert not result.hangs
