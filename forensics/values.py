"""Loosely typed values read back as what they mean: event attrs and JSON fields."""

from __future__ import annotations

from typing import Any

__all__ = ["as_int"]


def as_int(value: Any) -> int | None:
    """An attr or JSON value as an int: ints (not bools) and decimal strings such as ``"-1"``; else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        digits = text.removeprefix("-")
        if digits.isascii() and digits.isdigit():
            return int(text)
    return None
