"""``forensics.analyze``: the library's front door (README, *Python API*).

It takes what a person types in a notebook — one path or several, ``since="30m"``, ``ranks="0-3"``,
``tz="Europe/Berlin"`` — turns it into an :class:`~forensics.analysis.Options` and calls the same
façade the command line calls, so the answer is the one ``forensics analyze`` gives.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from datetime import tzinfo
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forensics.analysis import Analysis, Options
    from forensics.ingest.meter import Progress

__all__ = ["analyze", "options"]

PathLike = str | os.PathLike[str]


def options(base: Options | None = None, *, since: str | None = None, until: str | None = None,
            hosts: Iterable[str] | str = (), ranks: Iterable[int | str] | int | str = (),
            tz: tzinfo | str | None = None, **fields: Any) -> Options:
    """An :class:`~forensics.analysis.Options` from keywords: its fields (``max_evidence``,
    ``signature_dirs``, ``offsets``, ``limits`` …), ``tz`` as a zone or its IANA name, and the timeline
    filters of ``forensics analyze`` (``since``/``until``: ``'2026-11-30 14:00'``, ``'30m'``; ``hosts``;
    ``ranks``: ``3``, ``[0, 1]`` or ``'0-3,7'``). Raises :class:`~forensics.errors.UsageError` for a
    value it cannot read, :class:`TypeError` for a keyword it does not know."""
    from forensics.analysis import Options

    known = {f.name for f in dataclasses.fields(Options)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise TypeError(f"unknown option {unknown[0]!r}; options are: "
                        f"{', '.join(sorted(known | {'since', 'until', 'hosts', 'ranks'}))}")
    limit = fields.get("max_evidence", 1)
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        from forensics.errors import UsageError

        raise UsageError(f"max_evidence: a number of events, 1 or more, or None for all (got {limit!r})")
    zone = _zone(tz) if isinstance(tz, str) else tz
    if tz is not None:
        fields["tz"] = zone
    if "signature_dirs" in fields:
        from pathlib import Path

        fields["signature_dirs"] = [Path(d) for d in fields["signature_dirs"]]
    chosen = dataclasses.replace(base or Options(), **fields)
    host_list = [hosts] if isinstance(hosts, str) else list(hosts)
    rank_list = [ranks] if isinstance(ranks, int | str) else list(ranks)
    if since or until or host_list or rank_list:
        from forensics.timeline.filters import TimelineFilter, parse_bound, parse_ranks

        chosen.timeline_filter = TimelineFilter(
            since=parse_bound(since, "since", zone) if since else None,
            until=parse_bound(until, "until", zone) if until else None,
            hosts=frozenset(h.strip() for item in host_list for h in str(item).split(",") if h.strip()),
            ranks=parse_ranks([str(r) for r in rank_list]))
    return chosen


def _zone(name: str) -> tzinfo:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from forensics.errors import UsageError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"tz: unknown time zone {name!r} (use an IANA name such as Europe/Berlin or UTC)") from None


def analyze(paths: PathLike | Iterable[PathLike], base: Options | None = None, /, *,
            on_progress: Callable[[Progress], None] | None = None, **option_fields: Any) -> Analysis:
    """Analyze bundles, log files, directories or archives, as ``forensics analyze`` does.

    ``paths`` is one path or several (read together as one job); keywords are those of :func:`options`
    (``max_evidence=None`` keeps every evidence line, like ``--all``). ``on_progress`` hears the input
    bytes read (:class:`~forensics.ingest.meter.Progress`) a few times a second. Returns an
    :class:`~forensics.analysis.Analysis`: ``.verdict``, ``.findings``, ``.events_frame()``,
    ``.metrics_frame()``, ``.to_json_dict()``. Raises :class:`~forensics.errors.ForensicsError` (one
    line that says why) for a missing path or a bad option."""
    from forensics.analysis import analyze as run

    listed = [os.fspath(paths)] if isinstance(paths, str | os.PathLike) else [os.fspath(p) for p in paths]
    if not listed:
        from forensics.errors import UsageError

        raise UsageError("analyze: give at least one path")
    chosen = options(base, **option_fields) if option_fields or base is None else base
    return run(listed, chosen, on_progress=on_progress)
