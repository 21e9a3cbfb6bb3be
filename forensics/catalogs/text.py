"""A catalogue message's ``text`` (its fixed words, ``{}`` where a value goes) as something to match.

Shared by the engine and the builder (``tools/catalogs/build.py``), so "matchable" means one thing.
"""

from __future__ import annotations

import re

__all__ = ["MARKED_BELOW", "MIN_FIXED", "distinctive", "find_in_order", "fixed_chars", "fragments",
           "holds_in_order", "key_literal", "match_line", "pieces", "without_function"]

#: Fixed characters a text needs before it is matched at all.
MIN_FIXED = 12
#: Below this many fixed characters a text matches only on a line holding one of its catalogue's markers.
MARKED_BELOW = 24


_SPLIT = re.compile(r"(\{\{|\}\}|\{\})")


def fragments(text: str) -> list[str]:
    """The literal pieces between ``{}`` placeholders (``{{`` and ``}}`` are literal braces)."""
    if "{" not in text and "}" not in text:
        return [text]
    pieces: list[str] = []
    current: list[str] = []
    for token in _SPLIT.split(text):
        if token == "{}":
            pieces.append("".join(current))
            current = []
        elif token in ("{{", "}}"):
            current.append(token[0])
        else:
            current.append(token)
    pieces.append("".join(current))
    return pieces


def _pieces(line: str) -> list[str]:
    return [p.strip() for p in fragments(line) if p.strip()]


def fixed_chars(line: str) -> int:
    return sum(len(p) for p in _pieces(line))


def match_line(text: str) -> str:
    """The line of a (possibly multi-line) text that is matched: the one with the most fixed characters."""
    lines = text.split("\n")
    return max(lines, key=fixed_chars) if len(lines) > 1 else text


def key_literal(text: str) -> str:
    """The longest fixed piece of the matched line: what a big-log pre-pass and the literal index look for."""
    pieces = _pieces(match_line(text))
    return max(pieces, key=len) if pieces else ""


def pieces(text: str) -> tuple[str, ...]:
    """The fixed pieces of the matched line, in order (each stripped of the spaces around it)."""
    return tuple(_pieces(match_line(text)))


#: A programmer's name: SNAKE_OR_lower_snake with an underscore, or camelCase (cudaErrorDevicesUnavailable).
_SYMBOL = re.compile(r"\b(?:[A-Za-z0-9]+_[A-Za-z0-9_]+|[a-z]+[A-Z][A-Za-z0-9]+)\b")


def distinctive(text: str) -> bool:
    """Whether a message can be matched without its producer's marker on the line: long enough to be no
    other program's words, or holding a programmer's name (``CACHE_MANAGER (34)``, ``cudaErrorNoDevice``,
    ``NVMLError_GpuIsLost``) of ten characters or more, which prose does not."""
    line = match_line(text)
    if fixed_chars(line) >= MARKED_BELOW:
        return True
    return any(len(sym) >= 10 for piece in _pieces(line) for sym in _SYMBOL.findall(piece))


#: A function's name that a message's format starts with (``socketProgress: ``, ``ncclCommInitRank : ``).
_FUNCTION_PREFIX = re.compile(r"^(?:[a-z][a-z0-9]*[A-Z][A-Za-z0-9_]*|[a-z][a-z0-9]*_[a-z0-9_]+"
                              r"|[A-Z][a-z]+[A-Z][A-Za-z0-9]*)(?:\(\))? ?: ")


def without_function(text: str) -> str | None:
    """``text`` without the function name it starts with, or ``None`` when it starts with none. Producers that
    print their own function's name before a message rename functions between releases (NCCL 2.14's
    ``Net : Connection closed by remote peer`` is 2.30's ``socketProgress: Connection closed by remote
    peer``): the rest of the message is the wording that lasts."""
    m = _FUNCTION_PREFIX.match(text)
    return text[m.end():] if m and fixed_chars(match_line(text[m.end():])) >= MIN_FIXED else None


def find_in_order(parts: tuple[str, ...], line: str) -> tuple[int, int] | None:
    """Where ``parts`` occur in ``line`` in this order, without overlapping: (start of the first, end of the
    last), or ``None``. Taking each at its first place after the previous one is enough (a later place
    never helps the ones after it), so this is linear in the line: no regular expression, no backtracking."""
    pos = 0
    start = -1
    for part in parts:
        at = line.find(part, pos)
        if at < 0:
            return None
        if start < 0:
            start = at
        pos = at + len(part)
    return (max(start, 0), pos)


def holds_in_order(parts: tuple[str, ...], line: str) -> bool:
    return find_in_order(parts, line) is not None
