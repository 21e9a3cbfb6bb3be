"""What the detectors of one analysis share: results every detector asks for (the metric samples
arranged as frames, the run boundaries of the events), built once per analysis.

:func:`~forensics.match.detectors.run_detectors` makes one :class:`DetectorContext` per call and makes
it current while its detectors run. It is held in a :class:`~contextvars.ContextVar`, so two analyses
in two threads (a notebook, the TUI's worker, the MCP server's tool calls) never see each other's,
and it is gone when the run ends. Outside a run, :func:`memo` builds without keeping anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

__all__ = ["DetectorContext", "active", "memo"]

T = TypeVar("T")


class DetectorContext:
    """Results kept for one analysis's detectors, each under a name and for one input sequence."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[Sequence[Any], int, Any]] = {}

    def memo(self, name: str, data: Sequence[Any], build: Callable[[Sequence[Any]], T]) -> T:
        """``build(data)``, kept while ``data`` is the same sequence of the same length."""
        kept = self._kept.get(name)
        if kept is not None and kept[0] is data and kept[1] == len(data):
            value: T = kept[2]
            return value
        value = build(data)
        self._kept[name] = (data, len(data), value)
        return value


_CURRENT: ContextVar[DetectorContext | None] = ContextVar("forensics_detector_context", default=None)


@contextmanager
def active(context: DetectorContext) -> Iterator[DetectorContext]:
    """Make ``context`` the current one (in this thread or task) until the block ends."""
    token = _CURRENT.set(context)
    try:
        yield context
    finally:
        _CURRENT.reset(token)


def memo(name: str, data: Sequence[Any], build: Callable[[Sequence[Any]], T]) -> T:
    """``build(data)``, kept in the current :class:`DetectorContext` (built afresh when none is current)."""
    context = _CURRENT.get()
    return build(data) if context is None else context.memo(name, data, build)
