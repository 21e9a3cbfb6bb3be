"""Turning the many ways logs write time into UTC nanoseconds.

Every event carries ``ts`` (UTC ns) and ``ts_source`` (how it was obtained). The shapes
handled here, all with exact formats (slicing, ``int()``, precompiled regexes; ``dateutil``
only for rare one-off strings such as journal headers):

- ISO 8601 / RFC 3339 with ``.`` or ``,`` decimals, up to ns, offsets ``Z``, ``+01``,
  ``+0100``, ``+01:00`` (:func:`parse_iso`);
- kernel uptime stamps ``1234.567890`` (:func:`uptime_ns`);
- ``dmesg -T`` ctime ``Fri Mar  3 04:27:08 2023`` (:func:`parse_ctime`);
- syslog / journalctl wall clocks without a year, in any common locale's month names
  (:func:`month_number`, :class:`YearlessClock`); events so placed carry the attr
  :data:`YEAR_INFERRED`, and :func:`shift_years` moves them when other logs date them better.

Local wall-clock times are converted with the zone when it is known (``exact``); when it is
not, they are taken as UTC and marked ``local`` so that nobody mistakes them for exact.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, tzinfo
from functools import lru_cache

from forensics.events import TsSource
from forensics.lazy_re import lazy_compile

__all__ = [
    "MONTHS",
    "NS",
    "YEAR_INFERRED",
    "YearlessClock",
    "MAX_TS_NS",
    "MAX_UPTIME_NS",
    "MIN_TS_NS",
    "epoch_ns",
    "plausible_ns",
    "month_number",
    "parse_ctime",
    "parse_fraction_ns",
    "parse_iso",
    "shift_years",
    "uptime_ns",
    "wall_to_ns",
]

NS = 1_000_000_000
_DAY_S = 86_400
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
#: Stamps outside [MIN_TS_NS, MAX_TS_NS) (years 1000-8999) are garbled numbers, not times: the
#: parsing functions here refuse them (``None``) and the timeline drops such a stamp from an
#: event, so nothing downstream (offsets, year shifts, ``datetime`` in the renderers) can be
#: pushed past ``datetime``'s years 1-9999 by a year-9999 stamp or a huge boot offset.
MIN_TS_NS = (date(1000, 1, 1).toordinal() - _EPOCH_ORDINAL) * 86_400 * NS
MAX_TS_NS = (date(9000, 1, 1).toordinal() - _EPOCH_ORDINAL) * 86_400 * NS
#: A kernel uptime longer than this (100 years) is not an uptime.
MAX_UPTIME_NS = 100 * 366 * 86_400 * NS
#: Event attr (``True``) on an event whose stamp printed no year (syslog, journalctl ``short``,
#: dmesg -H, glog ``E0514``, vLLM ``INFO 10-03``): its year came from the file's date or the
#: bundle, so the timeline may move it to the year of the dated logs beside it.
YEAR_INFERRED = "year_inferred"

# --------------------------------------------------------------------------------------------
# Month names. journalctl and dmesg -T print ``%b`` in the user's locale; these are glibc's
# abbreviated (and a few full / genitive) month names, lower case, trailing dots removed.
_MONTH_TABLE: dict[int, tuple[str, ...]] = {
    1: ("jan", "january", "janv", "janvier", "januar", "ene", "enero", "gen", "gennaio", "sty", "stycznia",
        "styczeń", "янв", "января", "январь", "січ", "led", "oca", "tammi", "tammikuu", "jän", "ιαν", "januari"),
    2: ("feb", "february", "févr", "fevr", "février", "februar", "fev", "fevereiro", "febrero", "febbraio", "lut",
        "lutego", "luty", "фев", "февраля", "февраль", "лют", "úno", "şub", "helmi", "helmikuu", "febr", "φεβ",
        "februari"),
    3: ("mar", "march", "mars", "mär", "märz", "mrz", "marzo", "março", "mrt", "maart", "marca", "marzec", "мар",
        "марта", "март", "бер", "bře", "maalis", "maaliskuu", "márc", "μαρ"),
    4: ("apr", "april", "avr", "avril", "abr", "abril", "aprile", "kwi", "kwietnia", "kwiecień", "апр", "апреля",
        "апрель", "кві", "dub", "nis", "huhti", "huhtikuu", "ápr", "απρ"),
    5: ("may", "mai", "maj", "mayo", "maggio", "mag", "mei", "maja", "мая", "май", "тра", "kvě", "touko",
        "toukokuu", "máj", "μαΐ", "μαϊ", "mayıs"),
    6: ("jun", "june", "juin", "juni", "junio", "giugno", "giu", "junho", "cze", "czerwca", "czerwiec", "июн",
        "июня", "июнь", "чер", "čvn", "haz", "kesä", "kesäkuu", "jún", "ιουν"),
    7: ("jul", "july", "juil", "juillet", "juli", "julio", "luglio", "lug", "julho", "lip", "lipca", "lipiec",
        "июл", "июля", "июль", "лип", "čvc", "tem", "heinä", "heinäkuu", "júl", "ιουλ"),
    8: ("aug", "august", "août", "aout", "ago", "agosto", "sie", "sierpnia", "sierpień", "авг", "августа", "август",
        "сер", "srp", "ağu", "elo", "elokuu", "αυγ", "augustus"),
    9: ("sep", "sept", "september", "septembre", "set", "settembre", "setembro", "septiembre", "wrz", "września",
        "wrzesień", "сен", "сент", "сентября", "сентябрь", "вер", "zář", "eyl", "syys", "syyskuu", "szept", "σεπ"),
    10: ("oct", "october", "octobre", "okt", "oktober", "ott", "ottobre", "out", "outubro", "octubre", "paź",
         "października", "październik", "окт", "октября", "октябрь", "жов", "říj", "eki", "loka", "lokakuu", "οκτ"),
    11: ("nov", "november", "novembre", "noviembre", "novembro", "lis", "listopada", "listopad", "ноя", "нояб",
         "ноября", "ноябрь", "кас", "kas", "marras", "marraskuu", "νοε"),
    12: ("dec", "december", "déc", "décembre", "dez", "dezember", "dic", "dicembre", "diciembre", "dezembro",
         "des", "desember", "gru", "grudnia", "grudzień", "дек", "декабря", "декабрь", "гру", "pro", "ara",
         "joulu", "joulukuu", "δεκ"),
}
#: lower-case month token (no trailing dot) -> month number 1-12
MONTHS: dict[str, int] = {name: month for month, names in _MONTH_TABLE.items() for name in names}
_CJK_MONTH_RE = lazy_compile(r"^\s*(\d{1,2})\s*[月월]$")


def month_number(token: str) -> int | None:
    """The month (1-12) a ``%b`` token names in any common locale (``Mar``, ``mär``, ``фев``,
    ``févr.``, ``jan.``, `` 3月``), or ``None``."""
    key = token.strip().lower().rstrip(".")
    found = MONTHS.get(key)
    if found is not None:
        return found
    m = _CJK_MONTH_RE.match(token)
    if m:
        n = int(m.group(1))
        return n if 1 <= n <= 12 else None
    # "sept." / "Okt." / "März" are handled above; a longer spelling of a known stem is accepted.
    for cut in (4, 3):
        if len(key) > cut:
            found = MONTHS.get(key[:cut])
            if found is not None:
                return found
    return None


# --------------------------------------------------------------------------------------------
# Calendar arithmetic without datetime objects on the hot path.
@lru_cache(maxsize=4096)
def _epoch_day(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 (raises ValueError for impossible dates such as Feb 30)."""
    return date(year, month, day).toordinal() - _EPOCH_ORDINAL


def plausible_ns(ts: int | float | None) -> int | None:
    """``ts`` (UTC ns) when it lies in [:data:`MIN_TS_NS`, :data:`MAX_TS_NS`), else ``None``
    (also for ``nan``, ``inf`` and non-numbers)."""
    if ts is None or isinstance(ts, bool):
        return None
    try:
        value = int(ts)
    except (ValueError, OverflowError, TypeError):  # nan, inf
        return None
    return value if MIN_TS_NS <= value < MAX_TS_NS else None


def epoch_ns(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0,
             nanos: int = 0) -> int:
    """UTC nanoseconds of a UTC calendar time. Raises ValueError when the date is impossible."""
    if not (0 <= hour < 24 and 0 <= minute < 60 and 0 <= second <= 60 and 0 <= nanos < NS):
        raise ValueError("time of day out of range")
    return ((_epoch_day(year, month, day) * _DAY_S) + hour * 3600 + minute * 60 + second) * NS + nanos


@lru_cache(maxsize=4096)
def _shifted_day(day: int, years: int) -> int | None:
    d = date.fromordinal(day + _EPOCH_ORDINAL)
    try:
        return _epoch_day(d.year + years, d.month, d.day)
    except ValueError:
        return None


def shift_years(ts: int, years: int) -> int | None:
    """``ts`` (UTC ns) moved by whole calendar years: the same month, day and time of day.
    ``None`` when that day does not exist in the target year (29 February) or lies outside
    the calendar."""
    if years == 0:
        return ts
    day, rest = divmod(ts, _DAY_S * NS)
    try:
        shifted = _shifted_day(day, years)
    except (ValueError, OverflowError):
        return None
    return None if shifted is None else plausible_ns(shifted * _DAY_S * NS + rest)


@lru_cache(maxsize=8192)
def _utcoffset_s(tz: tzinfo, year: int, month: int, day: int, hour: int) -> int:
    off = datetime(year, month, day, hour, tzinfo=tz).utcoffset()
    return int(off.total_seconds()) if off is not None else 0


def wall_to_ns(year: int, month: int, day: int, hour: int, minute: int, second: int, nanos: int,
               tz: tzinfo | None) -> tuple[int, TsSource] | None:
    """A local wall-clock time in UTC ns: exact with ``tz``, else taken as UTC and marked local.
    ``None`` when the fields do not make a real date."""
    try:
        ns = epoch_ns(year, month, day, hour, minute, second, nanos)
        if plausible_ns(ns) is None:
            return None
        if tz is None:
            return ns, TsSource.LOCAL
        exact = plausible_ns(ns - _utcoffset_s(tz, year, month, day, hour) * NS)
        return None if exact is None else (exact, TsSource.EXACT)
    except (ValueError, OverflowError):
        return None


def parse_fraction_ns(frac: str) -> int:
    """Decimal fraction digits (``"5"``, ``"678628"``, ``"28885631"``) as nanoseconds."""
    if not frac:
        return 0
    return int(frac[:9].ljust(9, "0"))


def uptime_ns(text: str) -> int | None:
    """A kernel stamp ``"  1234.567890"`` (seconds since boot) as ns, exactly (no float)."""
    secs, _, frac = text.strip().partition(".")
    if not (secs.isascii() and secs.isdigit()) or (frac and not (frac.isascii() and frac.isdigit())):
        return None
    if len(secs) > 12:  # over 30,000 years (and int() refuses > 4300 digits)
        return None
    ns = int(secs) * NS + (int(frac[:9].ljust(9, "0")) if frac else 0)
    return ns if ns < MAX_UPTIME_NS else None


# --------------------------------------------------------------------------------------------
_ISO_RE = lazy_compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d)(?::(\d\d)(?:[.,](\d{1,12}))?)?\s?"
    r"(Z|z|UTC|[+-]\d\d(?::?\d\d)?)?"
)


def parse_iso(text: str, tz: tzinfo | None = None) -> tuple[int, TsSource] | None:
    """An ISO 8601 / RFC 3339 stamp at the start of ``text`` in UTC ns.

    With an offset (``Z``, ``+02:00``, ``+0100``) the result is exact; without one it is a
    local time, converted with ``tz`` when given (exact) or taken as UTC (local).
    """
    m = _ISO_RE.match(text)
    if not m:
        return None
    y, mo, d, hh, mi, ss, frac, off = m.groups()
    nanos = parse_fraction_ns(frac or "")
    if off is None:
        return wall_to_ns(int(y), int(mo), int(d), int(hh), int(mi), int(ss or 0), nanos, tz)
    try:
        ns = epoch_ns(int(y), int(mo), int(d), int(hh), int(mi), int(ss or 0), nanos)
    except ValueError:
        return None
    if off not in ("Z", "z", "UTC"):
        sign = -1 if off[0] == "-" else 1
        digits = off[1:].replace(":", "")
        minutes = int(digits[:2]) * 60 + (int(digits[2:4]) if len(digits) >= 4 else 0)
        ns -= sign * minutes * 60 * NS
    exact = plausible_ns(ns)
    return None if exact is None else (exact, TsSource.EXACT)


_CTIME_RE = lazy_compile(r"(?<!\S)(?:\S+\s+)?(\S+)\s+(\d{1,2})\s+(\d{1,2}):(\d\d):(\d\d)(?:[.,](\d{1,9}))?\s+(\d{4})$")


def parse_ctime(text: str, tz: tzinfo | None = None) -> tuple[int, TsSource] | None:
    """``Fri Mar  3 04:27:08 2023`` (``dmesg -T``, nvidia-smi, any locale's month names)."""
    m = _CTIME_RE.match(text.strip())
    if not m:
        return None
    mon, day, hh, mi, ss, frac, year = m.groups()
    month = month_number(mon)
    if month is None:
        return None
    return wall_to_ns(int(year), month, int(day), int(hh), int(mi), int(ss), parse_fraction_ns(frac or ""), tz)


_HALF_YEAR_DAYS = 183


class YearlessClock:
    """Years for a file's year-less wall-clock stamps (syslog, journalctl ``short``).

    Stamps are added in file order and resolved once the file is read:

    - a jump back by more than half a year (``Dec 31`` then ``Jan 1``) starts the next year
      (a jump forward, however long, is a quiet stretch of the same year: grep'd logs skip months);
    - the *last* stamp is placed in ``year`` (the file's modification year, from which the
      log was written up to), earlier ones counted back across the rollovers seen;
    - if the newest stamp would then lie in the future of ``reference_ns`` (the file's
      modification time; by default now, capped at the end of ``year``) the whole file moves
      back one year, since a log cannot describe the future.
    """

    __slots__ = ("_items", "_era", "_last_doy", "reference_ns", "tz", "year", "first_year")

    def __init__(self, year: int | None, tz: tzinfo | None = None, reference_ns: int | None = None) -> None:
        self.year = year
        self.tz = tz
        self.reference_ns = reference_ns
        #: a year known for the first stamp (journal header) overrides ``year``
        self.first_year: int | None = None
        self._items: list[tuple[int, int, int, int, int, int, int]] = []
        self._era = 0
        self._last_doy: int | None = None

    def __len__(self) -> int:
        return len(self._items)

    def add(self, month: int, day: int, hour: int, minute: int, second: int, nanos: int = 0) -> int:
        """Record one stamp; returns its index for :meth:`resolve`."""
        doy = (month - 1) * 31 + day
        if self._last_doy is not None and doy < self._last_doy - _HALF_YEAR_DAYS:
            self._era += 1
        self._last_doy = doy
        self._items.append((self._era, month, day, hour, minute, second, nanos))
        return len(self._items) - 1

    def _base_year(self) -> int:
        """The year of era 0."""
        if self.first_year is not None:
            return self.first_year - (self._items[0][0] if self._items else 0)
        last_era = self._items[-1][0] if self._items else 0
        now_ns = time.time_ns()
        year = self.year if self.year is not None else datetime.fromtimestamp(now_ns / NS, UTC).year
        base = year - last_era
        reference = self.reference_ns
        if reference is None:
            end_of_year = epoch_ns(year + 1, 1, 1) if year < 9999 else now_ns
            reference = min(now_ns, end_of_year)
        newest = self._newest(base)
        if newest is not None and newest > reference + 2 * _DAY_S * NS:
            base -= 1
        return base

    def _newest(self, base: int) -> int | None:
        newest: int | None = None
        for era, mo, d, hh, mi, ss, ns in self._items:
            r = wall_to_ns(base + era, mo, d, hh, mi, ss, ns, self.tz)
            if r is not None and (newest is None or r[0] > newest):
                newest = r[0]
        return newest

    def resolve(self) -> list[tuple[int, TsSource] | None]:
        """UTC ns and how it was obtained, per added stamp (``None`` for an impossible date)."""
        if not self._items:
            return []
        base = self._base_year()
        return [wall_to_ns(base + era, mo, d, hh, mi, ss, ns, self.tz) for era, mo, d, hh, mi, ss, ns in self._items]
