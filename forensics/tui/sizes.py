"""Terminal sizes at which the layout changes (the stylesheet's ``wide``/``narrow``/``short`` classes)."""

from __future__ import annotations

__all__ = ["NARROW", "SHORT", "WIDE"]

WIDE = 140  # columns from which the overview and evidence use two columns
NARROW = 100  # below: the evidence list goes above its detail, list titles wrap, labels shorten
SHORT = 32  # rows below which the overview's verdict box is compacted to one line per part
