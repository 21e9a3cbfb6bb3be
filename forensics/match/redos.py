"""Nested quantifiers in a signature's regex: the shape that backtracks exponentially.

``(a+)+$``, ``(\\d+)*``, ``(.*)*``, ``(\\s*\\w+)+``: an unbounded repeat whose body holds
another unbounded repeat and nothing it must match besides (every other element of the body
may match empty), so a failing match tries every way of cutting the text between the two
repeats — 2^n for n characters. A body with a required separator, ``(\\w+\\s)+`` or
``(\\d+\\.)+``, cuts one way only and is not flagged. Patterns are parsed with the standard
library's parser (``regex`` syntax it does not know is skipped: no flag rather than a false one).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["nested_quantifier"]

from re import _constants as _c  # type: ignore[attr-defined]  # the standard library's own regex parser (Python 3.11+)
from re import _parser as _p  # type: ignore[attr-defined]

_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)} - {None}
#: Repeats allowing more than this many iterations count as unbounded.
_MANY = 16


def _unbounded(op: Any, av: Any) -> bool:
    return op in _REPEATS and av[1] > _MANY


def _may_be_empty(items: Any) -> bool:
    """Whether a parsed sequence can match the empty string (conservatively: False if unsure)."""
    for op, av in items:
        if op in _REPEATS:
            if av[0] > 0 and not _may_be_empty(av[2]):
                return False
        elif op is _c.SUBPATTERN:
            if not _may_be_empty(av[-1]):
                return False
        elif op is _c.BRANCH:
            if not any(_may_be_empty(b) for b in av[1]):
                return False
        elif op in (_c.AT, _c.ASSERT, _c.ASSERT_NOT):
            continue
        else:
            return False
    return True


def _flatten(items: Any) -> list[tuple[Any, Any]]:
    """A sequence with plain groups opened (``(?:a+)`` is ``a+`` for this purpose)."""
    out: list[tuple[Any, Any]] = []
    for op, av in items:
        if op is _c.SUBPATTERN:
            out.extend(_flatten(av[-1]))
        else:
            out.append((op, av))
    return out


def _ambiguous_body(body: Any) -> bool:
    """The body holds an unbounded repeat and every other element may match empty."""
    items = _flatten(body)
    if len(items) == 1 and items[0][0] is _c.BRANCH:  # (a+|b)+: any branch of that shape
        return any(_ambiguous_body(branch) for branch in items[0][1][1])
    repeats = [i for i, (op, av) in enumerate(items) if _unbounded(op, av)]
    if not repeats:
        return False
    return any(all(_may_be_empty([item]) for j, item in enumerate(items) if j != r) for r in repeats)


def _walk(items: Any) -> str | None:
    for op, av in items:
        if op in _REPEATS:
            if av[1] > _MANY and _ambiguous_body(av[2]):
                return "an unbounded repeat of a group that is itself an unbounded repeat"
            found = _walk(av[2])
        elif op is _c.SUBPATTERN:
            found = _walk(av[-1])
        elif op is _c.BRANCH:
            found = next((f for b in av[1] if (f := _walk(b)) is not None), None)
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            found = _walk(av[1])
        else:
            found = None
        if found is not None:
            return found
    return None


def nested_quantifier(pattern: str, flags: int = 0) -> str | None:
    """Why ``pattern`` can backtrack exponentially (a nested quantifier), or ``None``."""
    try:
        parsed = _p.parse(pattern, flags & (re.IGNORECASE | re.MULTILINE | re.DOTALL | re.VERBOSE))
    except (re.error, RecursionError, ValueError, TypeError, IndexError):  # regex-module syntax
        return None
    return _walk(parsed)
