"""forensics/clock.py: every time shape the kernel-log parsers meet, and year-less stamps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.clock import (
    MONTHS,
    NS,
    YearlessClock,
    epoch_ns,
    month_number,
    parse_ctime,
    parse_fraction_ns,
    parse_iso,
    shift_years,
    uptime_ns,
    wall_to_ns,
)
from forensics.events import TsSource


def ns(*args: int, tz: timezone | ZoneInfo = UTC, nanos: int = 0) -> int:
    dt = datetime(*args, tzinfo=tz)  # type: ignore[misc]
    return int(dt.timestamp()) * NS + nanos


# -- month names ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("token", "month"),
    [
        ("Jan", 1), ("jan", 1), ("JAN", 1), ("jan.", 1), ("janv.", 1), ("Jänner", 1), ("Feb", 2), ("févr.", 2),
        ("фев", 2), ("lut", 2), ("Mar", 3), ("mar", 3), ("Mär", 3), ("März", 3), ("mrt", 3), ("kwi", 4),
        ("апр", 4), ("abr", 4), ("May", 5), ("mai", 5), ("мая", 5), ("maj", 5), ("Jun", 6), ("juin", 6),
        ("juil.", 7), ("Jul", 7), ("aug", 8), ("ago", 8), ("août", 8), ("sie", 8), ("Sep", 9), ("Sept.", 9),
        ("set", 9), ("Okt", 10), ("ott", 10), ("out", 10), ("окт", 10), ("paź", 10), ("Nov", 11), ("lis", 11),
        ("Dez", 12), ("dic", 12), ("déc.", 12), ("des", 12), ("gru", 12), ("дек", 12), (" 3月", 3), ("12月", 12),
        ("13月", None), ("kernel", None), ("", None), ("x", None),
    ],
)
def test_month_names_in_common_locales(token: str, month: int | None) -> None:
    assert month_number(token) == month


def test_month_table_has_no_conflicting_names() -> None:
    assert set(MONTHS.values()) == set(range(1, 13))
    assert all(name == name.lower() and not name.endswith(".") for name in MONTHS)


# -- fractions and uptimes -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("frac", "expected"),
    [("", 0), ("5", 500_000_000), ("678628", 678_628_000), ("28885631", 288_856_310), ("288830314", 288_830_314),
     ("1234567891234", 123_456_789)],
)
def test_fraction_digits_become_nanoseconds(frac: str, expected: int) -> None:
    assert parse_fraction_ns(frac) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("    3.011519", 3_011_519_000), ("1843.308145", 1_843_308_145_000), ("17798674.374045", 17_798_674_374_045_000),
     ("0.000000", 0), ("12", 12 * NS), ("12.", 12 * NS), ("abc", None), ("1.2.3", None), ("-1.0", None), ("", None)],
)
def test_uptime_stamps_are_exact(text: str, expected: int | None) -> None:
    assert uptime_ns(text) == expected


# -- ISO 8601 --------------------------------------------------------------------------------------
def test_iso_with_comma_decimal_and_offset_is_exact() -> None:
    # ert7797: dmesg --time-format iso
    assert parse_iso("2024-04-29T14:55:41,678628+02:00") == (ns(2024, 4, 29, 12, 55, 41, nanos=678_628_000),
                                                             TsSource.EXACT)


def test_iso_keeps_nanoseconds_and_a_dropped_trailing_zero() -> None:
    # talos1118: RFC 3339 with ns; ".28885631Z" has lost its trailing zero
    assert parse_iso("2026-04-22T21:27:51.288830314Z") == (ns(2026, 4, 22, 21, 27, 51, nanos=288_830_314),
                                                           TsSource.EXACT)
    assert parse_iso("2026-04-22T21:27:51.28885631Z")[0] == ns(2026, 4, 22, 21, 27, 51, nanos=288_856_310)  # type: ignore[index]


@pytest.mark.parametrize("offset", ["+0100", "+01:00", "+01"])
def test_iso_offset_spellings(offset: str) -> None:
    assert parse_iso(f"2024-03-11T10:37:00{offset} host kernel: x") == (ns(2024, 3, 11, 9, 37, 0), TsSource.EXACT)


def test_iso_negative_half_hour_offset() -> None:
    assert parse_iso("2024-03-11T10:37:00-05:30")[0] == ns(2024, 3, 11, 16, 7, 0)  # type: ignore[index]


def test_iso_without_offset_is_local_unless_zone_given() -> None:
    assert parse_iso("2024-03-11 10:37:00.5") == (ns(2024, 3, 11, 10, 37, 0, nanos=500_000_000), TsSource.LOCAL)
    berlin = ZoneInfo("Europe/Berlin")
    assert parse_iso("2024-03-11T10:37:00", berlin) == (ns(2024, 3, 11, 9, 37, 0), TsSource.EXACT)
    assert parse_iso("2024-07-11T10:37:00", berlin) == (ns(2024, 7, 11, 8, 37, 0), TsSource.EXACT)  # summer time


@pytest.mark.parametrize("text", ["2024-02-30T10:00:00Z", "2024-13-01T00:00:00Z", "2024-01-01T25:00:00Z", "nope", ""])
def test_iso_rejects_impossible_or_foreign_text(text: str) -> None:
    assert parse_iso(text) is None


# -- ctime (dmesg -T) -----------------------------------------------------------------------------
def test_ctime_is_local_wall_clock() -> None:
    assert parse_ctime("Fri Mar  3 04:27:08 2023") == (ns(2023, 3, 3, 4, 27, 8), TsSource.LOCAL)
    assert parse_ctime("Mon Aug  5 03:54:13 2024", ZoneInfo("America/New_York")) == (ns(2024, 8, 5, 7, 54, 13),
                                                                                      TsSource.EXACT)


def test_ctime_with_localized_names() -> None:
    assert parse_ctime("Пт фев  3 04:27:08 2023") == (ns(2023, 2, 3, 4, 27, 8), TsSource.LOCAL)


@pytest.mark.parametrize("text", ["Fri Foo  3 04:27:08 2023", "Fri Feb 30 04:27:08 2023", "04:27:08", ""])
def test_ctime_rejects_bad_dates(text: str) -> None:
    assert parse_ctime(text) is None


# -- wall clocks ---------------------------------------------------------------------------------
def test_wall_clock_conversion_with_and_without_zone() -> None:
    assert wall_to_ns(2024, 1, 1, 0, 0, 0, 0, None) == (ns(2024, 1, 1), TsSource.LOCAL)
    assert wall_to_ns(2024, 1, 1, 0, 0, 0, 0, ZoneInfo("Asia/Tokyo")) == (ns(2023, 12, 31, 15), TsSource.EXACT)
    assert wall_to_ns(2023, 2, 29, 0, 0, 0, 0, None) is None
    assert wall_to_ns(2024, 2, 29, 0, 0, 0, 0, None) == (ns(2024, 2, 29), TsSource.LOCAL)


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1)))
def test_epoch_arithmetic_matches_datetime(dt: datetime) -> None:
    expected = (dt.replace(tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000
    got = epoch_ns(dt.year, dt.month, dt.day, dt.hour, dt.minute, dt.second, dt.microsecond * 1000)
    assert got == expected


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1)), st.integers(-20, 20),
       st.integers(0, 999))
def test_shift_years_keeps_the_calendar_day_and_time(dt: datetime, years: int, extra_ns: int) -> None:
    ts = epoch_ns(dt.year, dt.month, dt.day, dt.hour, dt.minute, dt.second, dt.microsecond * 1000 + extra_ns)
    try:
        target = dt.replace(year=dt.year + years)
    except ValueError:  # 29 February in a common year
        assert shift_years(ts, years) is None
        return
    expected = epoch_ns(target.year, target.month, target.day, target.hour, target.minute, target.second,
                        target.microsecond * 1000 + extra_ns)
    assert shift_years(ts, years) == expected


def test_shift_years_outside_the_calendar_is_none() -> None:
    assert shift_years(epoch_ns(2024, 5, 1), -3000) is None
    assert shift_years(epoch_ns(9999, 5, 1), 1) is None
    assert shift_years(epoch_ns(2024, 5, 1), 0) == epoch_ns(2024, 5, 1)


# -- year-less stamps ----------------------------------------------------------------------------
def test_yearless_stamps_take_the_given_year() -> None:
    clock = YearlessClock(2025)
    i = clock.add(8, 16, 23, 1, 35)
    assert clock.resolve()[i] == (ns(2025, 8, 16, 23, 1, 35), TsSource.LOCAL)


def test_december_to_january_rolls_the_year_and_the_last_stamp_is_in_the_file_year() -> None:
    clock = YearlessClock(2025, reference_ns=ns(2025, 1, 2))
    dec = clock.add(12, 31, 23, 59, 59)
    jan = clock.add(1, 1, 0, 0, 1)
    out = clock.resolve()
    assert out[dec] == (ns(2024, 12, 31, 23, 59, 59), TsSource.LOCAL)
    assert out[jan] == (ns(2025, 1, 1, 0, 0, 1), TsSource.LOCAL)


def test_two_rollovers() -> None:
    clock = YearlessClock(2026, reference_ns=ns(2026, 6, 1))
    idx = [clock.add(11, 1, 0, 0, 0), clock.add(2, 1, 0, 0, 0), clock.add(12, 1, 0, 0, 0), clock.add(3, 1, 0, 0, 0)]
    years = [datetime.fromtimestamp(clock.resolve()[i][0] / NS, UTC).year for i in idx]  # type: ignore[index]
    assert years == [2024, 2025, 2025, 2026]


def test_a_stamp_in_the_future_of_the_file_moves_back_a_year() -> None:
    # written in January 2025 (mtime), the log only holds December lines: they are from 2024
    clock = YearlessClock(2025, reference_ns=ns(2025, 1, 3))
    i = clock.add(12, 30, 10, 0, 0)
    assert clock.resolve()[i][0] == ns(2024, 12, 30, 10, 0, 0)  # type: ignore[index]


def test_without_a_year_now_is_the_reference() -> None:
    clock = YearlessClock(None)
    i = clock.add(1, 1, 0, 0, 0)
    placed = clock.resolve()[i]
    assert placed is not None
    assert placed[0] <= datetime.now(UTC).timestamp() * NS + 2 * 86400 * NS


def test_journal_header_year_wins() -> None:
    clock = YearlessClock(2030)
    clock.first_year = 2021
    a = clock.add(12, 31, 0, 0, 0)
    b = clock.add(1, 1, 0, 0, 0)
    out = clock.resolve()
    assert out[a][0] == ns(2021, 12, 31) and out[b][0] == ns(2022, 1, 1)  # type: ignore[index]


def test_yearless_with_zone_is_exact() -> None:
    clock = YearlessClock(2024, ZoneInfo("Europe/Moscow"), reference_ns=ns(2025, 1, 1))
    i = clock.add(2, 12, 0, 48, 2)
    assert clock.resolve()[i] == (ns(2024, 2, 11, 21, 48, 2), TsSource.EXACT)


def test_impossible_yearless_date_resolves_to_none() -> None:
    clock = YearlessClock(2023, reference_ns=ns(2024, 1, 1))
    i = clock.add(2, 29, 0, 0, 0)
    assert clock.resolve()[i] is None


def test_empty_clock() -> None:
    assert YearlessClock(2024).resolve() == []


# -- nothing raises ------------------------------------------------------------------------------
@settings(max_examples=300)
@given(st.text(max_size=80))
@pytest.mark.slow
def test_parsers_of_time_never_raise(text: str) -> None:
    parse_iso(text)
    parse_ctime(text)
    month_number(text)
    uptime_ns(text)
    parse_fraction_ns("".join(c for c in text if c.isdigit() and c.isascii()))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 12), st.integers(1, 31), st.integers(0, 23), st.integers(0, 59),
                          st.integers(0, 59)), max_size=30),
       st.one_of(st.none(), st.integers(1971, 2100)))
def test_yearless_clock_never_raises(stamps: list[tuple[int, int, int, int, int]], year: int | None) -> None:
    clock = YearlessClock(year)
    for s in stamps:
        clock.add(*s)
    out = clock.resolve()
    assert len(out) == len(stamps)
