"""Evidence selectors: which events of the timeline one ``[[evidence]]`` table picks.

Order of tests, cheapest first: the events holding one of the evidence's literals
(from one multi-literal pass over all events, :mod:`.literal_index`) → kind and
source → the exact literal → attrs → the regex, run with the ``regex`` module and
a timeout. Regexes are compiled once by the loader.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from forensics.catalogs import matching as catalog_matching
from forensics.events import Event
from forensics.match.literal_index import LiteralIndex
from forensics.match.schema import Evidence, Signature

__all__ = ["MAX_REGEX_TEXT", "RECORDER_OWN_KINDS", "REGEX_TIMEOUT_S", "EventIndex"]

#: Seconds one regex may run on one event before it counts as no match (and a warning).
REGEX_TIMEOUT_S = 0.2
#: Characters of an event's text a regex sees (a flood of assert lines can make one huge record).
MAX_REGEX_TEXT = 256 * 1024


def _same_value(actual: Any, wanted: Any) -> bool:
    if actual == wanted:
        return True
    # TOML gives ints and strings; parsers may give either ("79" vs 79, "-9" vs -9).
    return actual is not None and not isinstance(actual, bool | dict | list) and str(actual) == str(wanted)


class EventIndex:
    """The events of one analysis, indexed for the selectors.

    ``events`` is in timeline order; evidence results are lists of positions in it.
    """

    def __init__(self, events: Sequence[Event], signatures: Iterable[Signature] = ()) -> None:
        self.events = list(events)
        self.warnings: list[str] = []
        self._texts: list[str] = [e.text for e in self.events]
        self._by_kind: dict[str, list[int]] = defaultdict(list)
        for i, e in enumerate(self.events):
            self._by_kind[e.kind].append(i)
        self._catalog_keys = tuple(catalog_matching.keys())
        self._literals = LiteralIndex(self._texts, [*(lit for sig in signatures for ev in sig.evidence
                                                      for lit in ev.literals), *self._catalog_keys])
        self._cache: dict[int, list[int]] = {}
        self._timed_out: set[tuple[str, str]] = set()
        self._catalog_hits: dict[int, tuple[catalog_matching.Hit, ...]] | None = None

    @property
    def catalog_hits(self) -> dict[int, tuple[catalog_matching.Hit, ...]]:
        """Position -> the catalogued producer messages the event holds, the deciding one first
        (docs/catalogs.md); computed once."""
        if self._catalog_hits is None:
            candidates = {k.lower(): self._literals.positions((k,)) for k in self._catalog_keys}
            hits = catalog_matching.match_texts(self._texts, candidates)
            self._catalog_hits = {p: h for p, h in hits.items() if self.events[p].kind not in _NOT_PRODUCER_TEXT}
        return self._catalog_hits

    def catalog_positions(self, signature: str) -> list[int]:
        """Positions of the events that hold a catalogued message that is evidence of ``signature``."""
        return sorted(p for p, hits in self.catalog_hits.items() if any(h.message.signature == signature
                                                                       for h in hits))

    def of_kind(self, kind: str) -> list[int]:
        """Positions of the events of one kind, in timeline order."""
        return list(self._by_kind.get(kind, ()))

    def _candidates(self, ev: Evidence) -> list[int]:
        if ev.literals:
            positions = self._literals.positions(ev.literals)
            if ev.kinds:
                kinds = set(ev.kinds)
                positions = [p for p in positions if self.events[p].kind in kinds]
            return positions
        if ev.kinds:
            return sorted(p for k in ev.kinds for p in self._by_kind.get(k, ()))
        return list(range(len(self.events)))

    def _attrs_ok(self, ev: Evidence, e: Event) -> bool:
        for key, wanted in ev.attrs:
            actual = e.attrs.get(key) if key in e.attrs else getattr(e, key, None) if key in _EVENT_FIELDS else None
            if not any(_same_value(actual, w) for w in wanted):
                return False
        return True

    def _regex_ok(self, ev: Evidence, i: int, sig_id: str) -> bool:
        assert ev.pattern is not None
        text = self._texts[i]
        if len(text) > MAX_REGEX_TEXT:
            text = text[:MAX_REGEX_TEXT]
        key = (sig_id, ev.name)
        if key in self._timed_out:  # capped: one timeout per (signature, evidence) and analysis, not 300
            return False
        try:
            return ev.pattern.search(text, timeout=REGEX_TIMEOUT_S) is not None
        except TimeoutError:
            self._timed_out.add(key)
            self.warnings.append(
                f"signature {sig_id}: regex of evidence {ev.name!r} ran over {REGEX_TIMEOUT_S} s on "
                f"{self.events[i].origin}; it is skipped for the rest of this analysis")
            return False

    def select(self, ev: Evidence, sig_id: str = "") -> list[int]:
        """Positions of the events ``ev`` selects, in timeline order."""
        cached = self._cache.get(id(ev))
        if cached is not None:
            return cached
        out: list[int] = []
        events, texts = self.events, self._texts
        lits = ev.literals
        low_lits = tuple(lit.lower() for lit in lits) if ev.ignore_case else ()
        for i in self._candidates(ev):
            e = events[i]
            if e.kind in RECORDER_OWN_KINDS and (ev.role == "anchor" or e.kind not in ev.kinds):
                continue
            if ev.sources and not e.source.startswith(ev.sources):
                continue
            if lits:
                if ev.ignore_case:
                    low = texts[i].lower()
                    if not any(lit in low for lit in low_lits):
                        continue
                elif not any(lit in texts[i] for lit in lits):
                    continue
            if ev.attrs and not self._attrs_ok(ev, e):
                continue
            if ev.pattern is not None and not self._regex_ok(ev, i, sig_id):
                continue
            out.append(i)
        self._cache[id(ev)] = out
        return out


_EVENT_FIELDS = frozenset({"host", "gpu", "rank", "pid", "kind", "source", "severity"})
#: Events whose text is the tool's own words or a manifest, not a producer's line: never read for catalogues.
_NOT_PRODUCER_TEXT = frozenset({"recording", "recorder", "derived", "progress", "exit", "gpu-info", "pci-tree",
                                "pcie-path", "rank-activity", "gpu-process"})
#: The recorder's own records: a bundle's manifest (its message quotes the child's command line, which
#: may hold any words). Never an anchor; other evidence sees them only when its ``kinds`` names them.
RECORDER_OWN_KINDS = frozenset({"recording"})
