"""Which events hold which signature literal, found in one pass over all event texts.

Every evidence item's literals are looked up here instead of testing each literal
against each event: the texts are joined into one buffer and scanned once by a
Hyperscan multi-literal database (when the ``hyperscan`` package works), else by one
``find`` sweep per literal over the lower-cased buffer. Matching is case-insensitive,
a superset: the selectors then check the exact (case-sensitive unless ``flags = "i"``)
literal on the few events found.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import Any

from forensics.ingest.literals import hyperscan_database, scratch_for

__all__ = ["USE_HYPERSCAN", "LiteralIndex"]

#: Set to False (tests, benchmarks) to force the pure-Python sweep.
USE_HYPERSCAN = True
_SEPARATOR = b"\n\x00\n"


class LiteralIndex:
    """Event positions per literal (lower-cased key), for a fixed list of texts."""

    def __init__(self, texts: Sequence[str], literals: Iterable[str]) -> None:
        self.literals = sorted({lit.lower() for lit in literals if lit})
        self._hits: dict[str, list[int]] = {}
        if not self.literals or not texts:
            return
        parts = [t.lower().encode("utf-8", "replace") for t in texts]
        starts: list[int] = []
        pos = 0
        for p in parts:
            starts.append(pos)
            pos += len(p) + len(_SEPARATOR)
        buf = _SEPARATOR.join(parts)
        found = _scan_hyperscan(buf, starts, self.literals) if USE_HYPERSCAN else None
        if found is None:
            found = _scan_find(buf, starts, self.literals)
        self._hits = {lit: sorted(found[i]) for i, lit in enumerate(self.literals) if found[i]}

    def positions(self, literals: Iterable[str]) -> list[int]:
        """Sorted positions of the events that hold any of ``literals`` (ignoring case)."""
        out: set[int] = set()
        for lit in literals:
            out.update(self._hits.get(lit.lower(), ()))
        return sorted(out)


def _scan_find(buf: bytes, starts: list[int], literals: list[str]) -> list[set[int]]:
    found: list[set[int]] = []
    n = len(starts)
    for lit in literals:
        needle = lit.encode("utf-8", "replace")
        hits: set[int] = set()
        pos = buf.find(needle)
        while pos >= 0:
            idx = bisect_right(starts, pos) - 1
            hits.add(idx)
            if idx + 1 >= n:
                break
            pos = buf.find(needle, starts[idx + 1])
        found.append(hits)
    return found


def _scan_hyperscan(buf: bytes, starts: list[int], literals: list[str]) -> list[set[int]] | None:
    """One Hyperscan pass; None when the engine is missing or fails (the caller falls back)."""
    if len(buf) >= (1 << 32) - 1:
        return None
    db: Any = hyperscan_database(tuple(literals), caseless=True)
    if db is None:
        return None
    found: list[set[int]] = [set() for _ in literals]

    def on_match(i: int, _from: int, to: int, _flags: int, _ctx: object) -> bool:
        found[i].add(bisect_right(starts, to - 1) - 1)
        return False

    try:
        db.scan(buf, match_event_handler=on_match, scratch=scratch_for(db))
    except Exception:
        return None
    return found
