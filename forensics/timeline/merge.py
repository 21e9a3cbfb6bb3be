"""One timeline from many sources and hosts: place every event in UTC and merge them in order.

Steps (:func:`build_timeline`):

0. **Year-less stamps** (syslog, journalctl ``short``, glog ``E0514``, vLLM ``INFO 10-03``) took
   their year from the file's date, which is the copy's date when a log was copied. Their events
   carry ``year_inferred``; when dated logs of the same host (or of no named host) exist, each
   such file moves by whole years to the year that puts it nearest the dated span
   (:func:`anchor_years`), so a copied ``train.log`` lines up with the 2024 ``dmesg -T`` beside it.
1. **Boot-relative stamps** (raw ``dmesg``, ``/dev/kmsg``) without a known boot time are placed
   through a *boot anchor* of the same host: an entry that carries both clocks (journal JSON's
   realtime + monotonic, a syslog line holding the kernel's ``[ 123.456]`` stamp, ``dmesg``
   printing raw and ctime together) or the same kernel record seen in two files, once with
   an uptime and once with a wall clock. When anchors disagree (several boots), the one that
   shares a record with the file wins, else the latest boot.
2. **Untimed events** take the time of their stamped neighbours in the same file (``inferred``).
3. **Clock offsets between hosts** are estimated from events every host logs at the same
   moment (forensics/timeline/clocksync.py: NCCL init of one communicator, the same collective's
   watchdog timeout, a rendezvous, a torchrun restart, a Slurm step launch, the same training
   step): matched by a key, the median of the differences against a reference host, with a
   robust uncertainty and the offset each kind of moment gives alone (:func:`estimate_offsets`). Offsets given by the
   user (``--offset HOST=+3.2s``) override the estimate. A host's events are shifted when the
   estimate rests on at least two pairs that agree and exceeds its uncertainty.
4. Everything is merged by time (unplaced events after the placed ones of their source, in
   file order), and the identity table (forensics/timeline/identity.py) fills ``gpu``/``rank`` where
   the logs join them.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, NamedTuple

from forensics.clock import YEAR_INFERRED, plausible_ns, shift_years
from forensics.events import Event, MetricSample, TsSource
from forensics.timeline.clocksync import ClockOffset, KindOffset, consistent, estimate, sync_key
from forensics.timeline.identity import IdentityTable, build_identity

__all__ = [
    "ClockOffset",
    "Timeline",
    "anchor_years",
    "boot_anchors",
    "build_timeline",
    "estimate_offsets",
    "place_boot_relative",
    "sync_key",
]

NS = 1_000_000_000
#: anchors closer than this belong to the same boot (ctime stamps have 1 s resolution)
_SAME_BOOT_NS = 10 * NS
#: an uptime this close to another file's uptime for the same message is the same record
_SAME_RECORD_NS = 2_000_000
#: event kinds that come from the kernel log (see parsers/producers/kernel_messages.py)
KERNEL_KINDS = frozenset({"xid", "nvrm", "aer", "pcie-link", "iommu", "oom-killer", "hung-task", "dxg", "kernel",
                          "boot"})


@dataclass
class Timeline:
    events: list[Event]
    metrics: list[MetricSample] = field(default_factory=list)
    #: per host: the estimated (or user-given) offset, its uncertainty and how many pairs it rests on
    clock_offsets: dict[str, ClockOffset] = field(default_factory=dict)
    #: the host the others were aligned to
    clock_reference: str | None = None
    #: per host: seconds actually added to its stamps
    offsets_applied: dict[str, float] = field(default_factory=dict)
    identity: IdentityTable = field(default_factory=IdentityTable)
    #: what the timeline inferred to place events, in words (years given to year-less stamps,
    #: boot anchors used); the clocks' offsets are in the fields above, not repeated here
    notes: list[str] = field(default_factory=list)
    #: hosts whose offset the user gave (``--offset``) rather than the timeline estimated
    clock_given: list[str] = field(default_factory=list)
    #: per host: what each kind of shared moment alone says of its offset (forensics/timeline/clocksync.py)
    clock_evidence: dict[str, list[KindOffset]] = field(default_factory=dict)
    #: a run still going (forensics/live): the moment it was observed until, which may lie after its
    #: last event (a silence is measured to here)
    observed_until: int | None = None

    @property
    def hosts(self) -> list[str]:
        return sorted({e.host for e in self.events if e.host} | {m.host for m in self.metrics if m.host})

    @property
    def span(self) -> tuple[int, int] | None:
        stamps = [e.ts for e in self.events if e.ts is not None]
        stamps += [m.ts for m in self.metrics if m.ts is not None]
        return (min(stamps), max(stamps)) if stamps else None


def _plausible(e: Event) -> Event:
    """``e`` with a stamp outside the clock's range (a garbled number: year 9999, a huge NVML
    ``t``) taken away, so no arithmetic or renderer downstream meets it."""
    if e.ts is None or plausible_ns(e.ts) is not None:
        return e
    return replace(e, ts=None)


def plausible_metrics(metrics: Sequence[MetricSample]) -> list[MetricSample]:
    """The samples whose stamps are in the clock's range (one without a stamp is kept)."""
    return [m for m in metrics if m.ts is None or plausible_ns(m.ts) is not None]


def place_boot_relative(events: Sequence[Event], boot_time_ns: int | None) -> list[Event]:
    """Give boot-relative events a UTC time when the boot time is known (and take away stamps
    outside the clock's range, see :func:`forensics.clock.plausible_ns`)."""
    events = [_plausible(e) for e in events]
    if boot_time_ns is None:
        return events
    out = []
    for e in events:
        if e.ts is None and e.uptime_ns is not None:
            ts = plausible_ns(boot_time_ns + e.uptime_ns)
            if ts is not None:
                e = replace(e, ts=ts, ts_source=TsSource.BOOT_RELATIVE)
        out.append(e)
    return out


# -- years of year-less stamps -------------------------------------------------------------------
#: a year-less file moves to another year only when that puts it at most this far from the dated logs
YEAR_ANCHOR_GAP_NS = 31 * 86_400 * NS
#: how many years back a year-less file may move (copies of old logs)
MAX_YEARS_BACK = 10
#: time stamps that date an event on their own (a receipt time is the recorder's clock)
_DATED_SOURCES = (TsSource.EXACT, TsSource.LOCAL, TsSource.BOOT_RELATIVE, TsSource.RECEIPT)


def _year_less(e: Event) -> bool:
    return e.ts is not None and bool(e.attrs.get(YEAR_INFERRED))


def _dated_spans(per_source: Sequence[Sequence[Event]], metrics: Iterable[MetricSample]) -> dict[
        str | None, tuple[int, int]]:
    """Per host (``None``: no host named), the span of the events and samples whose stamps date them."""
    spans: dict[str | None, tuple[int, int]] = {}

    def add(host: str | None, ts: int) -> None:
        lo, hi = spans.get(host, (ts, ts))
        spans[host] = (min(lo, ts), max(hi, ts))

    for evs in per_source:
        for e in evs:
            if e.ts is not None and e.ts_source in _DATED_SOURCES and not e.attrs.get(YEAR_INFERRED):
                add(e.host, e.ts)
    for m in metrics:
        if m.ts is not None and m.ts_source in _DATED_SOURCES:
            add(m.host, m.ts)
    return spans


def _reference(spans: Mapping[str | None, tuple[int, int]], hosts: set[str | None]) -> tuple[int, int] | None:
    """The dated span a year-less file is compared with: its own hosts' and the unnamed logs'; for
    a file that names no host, every dated log."""
    keys = set(spans) if hosts <= {None} else (hosts | {None}) & set(spans)
    if not keys:
        return None
    return min(spans[k][0] for k in keys), max(spans[k][1] for k in keys)


def _gap(lo: int, hi: int, ref: tuple[int, int]) -> int:
    return max(0, ref[0] - hi, lo - ref[1])


def _years(lo: int, hi: int) -> str:
    a, b = (datetime.fromtimestamp(t / NS, UTC).year for t in (lo, hi))
    return str(a) if a == b else f"{a}–{b}"


def _best_shift(evs: Sequence[Event], lo: int, hi: int, ref: tuple[int, int]) -> tuple[int, list[Event]] | None:
    """The whole-year shift (0 or back) that puts ``evs``' year-less stamps nearest ``ref``, with the
    moved events; ``None`` when staying is as near or no year is within reach."""
    here = _gap(lo, hi, ref)
    tried: list[tuple[int, int]] = []
    for k in range(-1, -MAX_YEARS_BACK - 1, -1):
        a, b = shift_years(lo, k), shift_years(hi, k)
        if a is None or b is None:
            continue
        gap = _gap(a, b, ref)
        if gap < here and gap <= YEAR_ANCHOR_GAP_NS:
            tried.append((gap, -k))
    for _, back in sorted(tried):
        moved: list[Event] = []
        for e in evs:
            if _year_less(e):
                assert e.ts is not None
                ts = shift_years(e.ts, -back)
                if ts is None:  # a 29 February stamp rules out a common year
                    break
                e = replace(e, ts=ts)
            moved.append(e)
        else:
            return -back, moved
    return None


def anchor_years(per_source: Sequence[Sequence[Event]], names: Sequence[str] = (),
                 metrics: Iterable[MetricSample] = (), notes: list[str] | None = None) -> list[list[Event]]:
    """Move each file's year-less events (attr ``year_inferred``) by whole years to the year that
    puts them nearest the dated logs of the same host (or of no named host), when one brings
    them within :data:`YEAR_ANCHOR_GAP_NS`; only backwards, since a log cannot describe the
    future of its file's date. ``ts_source`` is kept; what was done goes to ``notes``."""
    out = [list(evs) for evs in per_source]
    pending = [i for i, evs in enumerate(out) if any(_year_less(e) for e in evs)]
    if not pending:
        return out
    spans = _dated_spans(out, metrics)
    for i in pending:
        evs = out[i]
        name = names[i] if i < len(names) else f"source {i}"
        stamps = [e.ts for e in evs if _year_less(e) and e.ts is not None]
        lo, hi = min(stamps), max(stamps)
        ref = _reference(spans, {e.host for e in evs if _year_less(e)})
        what = f"{name}: {len(stamps)} stamp(s) without a year"
        if ref is None:
            text = f"{what}: {_years(lo, hi)} taken from the file's date"
        else:
            best = _best_shift(evs, lo, hi, ref)
            if best is not None:
                k, out[i] = best
                moved = [e.ts for e in out[i] if _year_less(e) and e.ts is not None]
                text = (f"{what}: put in {_years(min(moved), max(moved))} beside the dated logs (the file's "
                        f"date gave {_years(lo, hi)})")
            elif _gap(lo, hi, ref) <= YEAR_ANCHOR_GAP_NS:
                text = f"{what}: {_years(lo, hi)} from the file's date, as the dated logs"
            else:
                text = (f"{what}: {_years(lo, hi)} kept from the file's date (no year puts them near the "
                        f"dated logs)")
        if notes is not None:
            notes.append(text)
    return out


# -- boot anchors ------------------------------------------------------------------------------
class _Anchor(NamedTuple):
    host: str | None
    boot_ns: int
    uptime_ns: int
    key: str


def _message_key(e: Event) -> str:
    return " ".join(e.message.split())


def _absolute(e: Event) -> bool:
    return e.ts is not None and e.ts_source in (TsSource.EXACT, TsSource.LOCAL)


def boot_anchors(per_source: Sequence[Sequence[Event]]) -> list[_Anchor]:
    """Boot times revealed by the sources: entries carrying both clocks, and the same kernel
    record seen in one file with an uptime and in another with a wall clock."""
    anchors: list[_Anchor] = []
    for evs in per_source:
        for e in evs:
            if e.uptime_ns is None:
                continue
            boot = e.attrs.get("boot_time_ns")
            if isinstance(boot, int):
                anchors.append(_Anchor(e.host, boot, e.uptime_ns, _message_key(e)))
            elif _absolute(e) and e.ts is not None:
                anchors.append(_Anchor(e.host, e.ts - e.uptime_ns, e.uptime_ns, _message_key(e)))
    # the same record in a boot-relative file and in a wall-clock file (dmesg and dmesg -T)
    walls: dict[tuple[str | None, str], list[int]] = defaultdict(list)
    uptimes: dict[tuple[str | None, str], list[int]] = defaultdict(list)
    for evs in per_source:
        for e in evs:
            if e.ts is None and e.uptime_ns is not None:
                uptimes[(e.host, _message_key(e))].append(e.uptime_ns)
            elif e.uptime_ns is None and _absolute(e) and e.ts is not None and e.kind in KERNEL_KINDS:
                walls[(e.host, _message_key(e))].append(e.ts)
    for key, ups in uptimes.items():
        ts = walls.get(key)
        if ts and len(ups) == 1 and len(ts) == 1:  # unique on both sides, else ambiguous
            anchors.append(_Anchor(key[0], ts[0] - ups[0], ups[0], key[1]))
    return anchors


def _choose_boot(anchors: list[_Anchor], records: set[tuple[str, int]]) -> tuple[int, str] | None:
    """The boot time for a file whose (message, uptime) records are ``records``."""
    if not anchors:
        return None
    same_record = [a.boot_ns for a in anchors
                   if any(abs(a.uptime_ns - up) <= _SAME_RECORD_NS for k, up in records if k == a.key)]
    if same_record:
        return int(statistics.median(same_record)), "a record both files hold"
    boots = sorted(a.boot_ns for a in anchors)
    clusters: list[list[int]] = [[boots[0]]]
    for b in boots[1:]:
        if b - clusters[-1][-1] > _SAME_BOOT_NS:
            clusters.append([b])
        else:
            clusters[-1].append(b)
    why = "the host's boot time" if len(clusters) == 1 else "the latest of several boots"
    return int(statistics.median(clusters[-1])), why


def _place_with_anchors(per_source: list[list[Event]], names: Sequence[str], notes: list[str]) -> list[list[Event]]:
    pending = [i for i, evs in enumerate(per_source) if any(e.ts is None and e.uptime_ns is not None for e in evs)]
    if not pending:
        return per_source
    anchors = boot_anchors(per_source)
    if not anchors:
        return per_source
    by_host: dict[str | None, list[_Anchor]] = defaultdict(list)
    for a in anchors:
        by_host[a.host].append(a)
    named = [h for h in by_host if h is not None]
    out = list(per_source)
    for i in pending:
        evs = per_source[i]
        hosts = {e.host for e in evs if e.ts is None and e.uptime_ns is not None}
        host = next(iter(hosts)) if len(hosts) == 1 else None
        cands = by_host.get(host, [])
        if host is None and not cands and len(named) == 1:
            cands = by_host[named[0]]
        records = {(_message_key(e), e.uptime_ns) for e in evs if e.uptime_ns is not None}
        chosen = _choose_boot(cands, records)
        if chosen is None:
            continue
        boot, why = chosen
        out[i] = place_boot_relative(evs, boot)
        notes.append(f"{names[i] if i < len(names) else f'source {i}'}: boot-relative stamps placed from {why}")
    return out


# -- untimed events ------------------------------------------------------------------------------
def _infer_untimed(events: list[Event]) -> list[Event]:
    """Within one source (file order), give untimed events their previous neighbour's time."""
    if not any(e.ts is not None for e in events):
        return events
    out: list[Event] = []
    last: int | None = None
    pending: list[Event] = []
    for e in events:
        if e.ts is None:
            if last is None:
                pending.append(e)
            else:
                out.append(replace(e, ts=last, ts_source=TsSource.INFERRED))
            continue
        if pending:
            out.extend(replace(p, ts=e.ts, ts_source=TsSource.INFERRED) for p in pending)
            pending = []
        last = e.ts
        out.append(e)
    out.extend(pending)
    return out


# -- clock offsets between hosts (forensics/timeline/clocksync.py) ------------------------------------------
def estimate_offsets(events: Iterable[Event]) -> tuple[str | None, dict[str, ClockOffset]]:
    """(reference host, per-host offsets) from events that every host logs at the same moment."""
    est = estimate(events)
    return est.reference, est.offsets


def _file_host(events: list[Event]) -> list[Event]:
    """In a job of several hosts, a file whose host-naming lines all name one host (NCCL's
    ``host:pid:tid`` prefix, syslog's host field) is that host's log: its other events get the
    host, so that they can be aligned with that host's clock. When the named lines carry ranks
    (NCCL ``Init COMPLETE``), only events of those ranks or of none are taken: a pasted log of
    several nodes keeps its others."""
    hosts = {e.host for e in events if e.host}
    if len(hosts) != 1 or all(e.host for e in events):
        return events
    host = next(iter(hosts))
    ranks = {e.rank for e in events if e.host and e.rank is not None}
    return [replace(e, host=host) if e.host is None and (e.rank is None or not ranks or e.rank in ranks) else e
            for e in events]


def _shift(items: list[Any], shifts: Mapping[str, int]) -> list[Any]:
    out = []
    for x in items:
        if x.host in shifts and x.ts is not None:
            x = replace(x, ts=x.ts + shifts[x.host])
        out.append(x)
    return out


# -- the whole timeline ----------------------------------------------------------------------------
def build_timeline(per_source: Iterable[tuple[list[Event], list[MetricSample]]],
                   offsets: Mapping[str, float] | None = None, names: Sequence[str] = ()) -> Timeline:
    """Merge per-source event lists (each in file order) into one ordered timeline.

    ``offsets``: user-given seconds to add per host (override the estimate); ``names`` the
    sources' display names, for the notes.
    """
    sources = [(list(evs), list(ms)) for evs, ms in per_source]
    notes: list[str] = []
    metrics = [m for _, ms in sources for m in ms]
    dated = anchor_years([evs for evs, _ in sources], names, metrics, notes)
    placed = _place_with_anchors(dated, names, notes)
    inferred = [_infer_untimed(evs) for evs in placed]
    if len({e.host for evs in inferred for e in evs if e.host}) > 1:  # several hosts: whose lines are whose
        inferred = [_file_host(evs) for evs in inferred]

    est = estimate(e for evs in inferred for e in evs)
    ref, estimated = est.reference, est.offsets
    clock_offsets = dict(estimated)
    given = dict(offsets or {})
    ref_shift = given.get(ref, 0.0) if ref else 0.0
    applied: dict[str, float] = {}
    for host, off in estimated.items():
        if host in given or host == ref:
            continue
        if consistent(off):
            applied[host] = off.offset_s + ref_shift
    for host, value in given.items():
        applied[host] = value
        clock_offsets[host] = ClockOffset(value, 0.0, 0)
    if applied:
        shifts = {h: round(v * NS) for h, v in applied.items() if v}
        inferred = [_shift(evs, shifts) for evs in inferred]
        metrics = _shift(metrics, shifts)

    keyed: list[tuple[int, int, int, Event]] = []
    for source_no, evs in enumerate(inferred):
        for i, e in enumerate(evs):
            # Placed events by time; unplaced ones after all placed ones, in file order.
            keyed.append((e.ts if e.ts is not None else 1 << 62, source_no, i, e))
    keyed.sort(key=lambda t: (t[0], t[1], t[2]))
    metrics.sort(key=lambda m: (m.ts if m.ts is not None else 1 << 62))
    events = [t[3] for t in keyed]
    identity = build_identity(events, metrics)
    if identity.rows:
        events = [identity.fill(e) for e in events]
    return Timeline(events, metrics, clock_offsets, ref, applied, identity, notes, sorted(given),
                    {h: k for h, k in est.by_kind.items() if h not in given})
