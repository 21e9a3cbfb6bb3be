"""Which event holds which catalogued message: one literal pass over all event texts, then a check.

Each matchable message is looked for by its longest fixed piece (one multi-literal pass over all events,
:class:`~forensics.match.literal_index.LiteralIndex`'s engine); an event that holds it is checked line by
line for all the message's pieces in order (:func:`~forensics.catalogs.text.find_in_order`). A short message
(fewer than :data:`~forensics.catalogs.text.MARKED_BELOW` fixed characters) counts only on a line that also
holds one of its catalogue's markers, unless it holds a programmer's name (``CUDA_ERROR_…``).

Of one producer's messages on a line only the most specific (most fixed characters) is kept: NCCL's
"Call to {} failed" is the start of both its InfiniBand wrapper's message and its system-call check's
"Call to {} failed: {}", and only the longer one says which it was. One line may also hold two producers'
messages, one wrapped in the other (PyTorch's "Unexpected error from
cudaGetDeviceCount() … Error 802: system not yet initialized" holds CUDA's). An event keeps every message it
holds; the first, the one that decides, is one that names a signature, else the one of the producer lowest
in the stack (:data:`STACK`: the driver under CUDA under NCCL under XLA under PyTorch under the frameworks and the
launchers, so the wrapped cause beats its wrapper), else the longest.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from forensics.catalogs.model import Catalog, Message, MessageClass, all_classes, shipped
from forensics.catalogs.text import find_in_order

__all__ = ["MAX_TEXT", "STACK", "Hit", "keys", "match_texts", "notable_literals"]

#: Characters of one event's text that are checked (a flood of assert lines can make one huge record).
MAX_TEXT = 64 * 1024
_RANK = {"error": 2, "warning": 1, "info": 0}
#: Producers from the bottom of the stack up: of two messages on one line, the lower one is the cause.
STACK = ("nvrm", "dxgkrnl", "windows", "dcgm", "nvml", "cuda", "nccl", "xla", "pytorch", "deepspeed", "megatron",
         "accelerate", "ray", "openmpi", "slurm")


@dataclass(frozen=True, slots=True)
class Hit:
    """One event's catalogued message, with its class and catalogue."""

    message: Message
    cls: MessageClass | None
    catalog: Catalog

    @property
    def severity(self) -> str:
        return self.message.severity

    def describe(self) -> str:
        """``NCCL: an NCCL network error (nccl.net-ib.completion-error)``."""
        what = self.cls.title if self.cls is not None else f"a {self.message.severity}-level message"
        return f"{self.catalog.title}: {what} ({self.message.id})"


def notable_literals(severities: tuple[str, ...] = ("error",),
                     catalogs: Sequence[Catalog] | None = None) -> tuple[str, ...]:
    """The key literals of the matchable messages of these severities: a line holding one is worth an event."""
    seen: dict[str, None] = {}
    for cat in shipped() if catalogs is None else catalogs:
        for m in (*cat.messages, *cat.alternates):
            if m.severity in severities and m.matchable and m.key:
                seen.setdefault(m.key, None)
    return tuple(seen)


def _by_key(catalogs: Sequence[Catalog]) -> dict[str, list[tuple[Message, Catalog]]]:
    keys: dict[str, list[tuple[Message, Catalog]]] = defaultdict(list)
    for cat in catalogs:
        for m in (*cat.messages, *cat.alternates):
            if m.matchable and m.key and m.severity != "info":
                keys[m.key].append((m, cat))
    return keys


_KEYS_CACHE: dict[tuple[str, ...], dict[str, list[tuple[Message, Catalog]]]] = {}


def keys(catalogs: Sequence[Catalog] | None = None) -> dict[str, list[tuple[Message, Catalog]]]:
    """Key literal -> the messages looked for by it (computed once per set of catalogues)."""
    cats = shipped() if catalogs is None else tuple(catalogs)
    ident = tuple(f"{c.producer}@{c.commit}:{len(c.messages)}" for c in cats)
    found = _KEYS_CACHE.get(ident)
    if found is None:
        found = _KEYS_CACHE[ident] = _by_key(cats)
    return found


def _holds(m: Message, cat: Catalog, text: str) -> bool:
    """Whether ``text`` holds the message: its pieces in order on one line (a short one beside a marker)."""
    key = m.key
    start = text.find(key)
    while start >= 0:
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", start)
        line = text[line_start:line_end if line_end >= 0 else len(text)]
        span = find_in_order(m.pieces, line)
        if span is not None and (m.distinctive or any(marker in line for marker in cat.markers)):
            return True
        if line_end < 0:
            return False
        start = text.find(key, line_end)
    return False


def _preference(m: Message) -> tuple[int, int, int, int]:
    level = STACK.index(m.producer) if m.producer in STACK else len(STACK)
    return (m.signature is not None, -level, m.fixed, _RANK[m.severity])


def match_texts(texts: Sequence[str], candidates: dict[str, list[int]],
                catalogs: Sequence[Catalog] | None = None) -> dict[int, tuple[Hit, ...]]:
    """The catalogued messages each text holds, the deciding one first (see the module docstring).
    ``candidates`` maps a key literal (lower case) to the positions whose text holds it ignoring case (a
    superset, from one literal pass)."""
    found: dict[int, dict[str, tuple[tuple[int, int, int, int], Message, Catalog]]] = defaultdict(dict)
    for key, entries in keys(catalogs).items():
        positions = candidates.get(key.lower())
        if not positions:
            continue
        for pos in positions:
            text = texts[pos][:MAX_TEXT]
            for m, cat in entries:
                if _holds(m, cat, text) and (m.id not in found[pos] or found[pos][m.id][1].fixed < m.fixed):
                    found[pos][m.id] = (_preference(m), m, cat)
    classes = all_classes()
    out: dict[int, tuple[Hit, ...]] = {}
    for pos, by_id in found.items():
        longest: dict[str, int] = {}
        for _, m, _cat in by_id.values():
            longest[m.producer] = max(longest.get(m.producer, 0), m.fixed)
        kept = [t for t in by_id.values() if t[1].fixed == longest[t[1].producer]]
        ranked = sorted(kept, key=lambda t: t[0], reverse=True)
        out[pos] = tuple(Hit(m, classes.get(m.class_id or ""), cat) for _, m, cat in ranked)
    return out
