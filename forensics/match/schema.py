"""The in-memory form of a signature file (see docs/signatures.md for the TOML schema).

Everything here is plain data: compiled once by :mod:`forensics.match.loader`, then
read by the selectors, the correlation step, the matcher and the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import regex

from forensics.findings import MACHINE_CLASSES, RemedyStep

__all__ = [
    "CATEGORIES",
    "MACHINE_CLASSES",
    "GROUP_FIELDS",
    "PLATFORMS",
    "ROLES",
    "Correlation",
    "Evidence",
    "Example",
    "RemedyStep",
    "Signature",
    "Variant",
    "Window",
    "parse_duration",
    "parse_window",
]

CATEGORIES = ("hardware", "driver", "platform", "framework", "application", "config")
PLATFORMS = ("linux", "windows", "wsl", "any")
ROLES = ("anchor", "supporting", "excludes")
CORRELATION_TYPES = ("event_count", "temporal_ordered")
#: Event fields a correlation may group by; ``attrs.<key>`` is accepted too.
GROUP_FIELDS = ("host", "gpu", "rank", "pid", "source", "kind")
FLAG_BITS = {"i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL}

_UNITS_NS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9, "d": 86400 * 10**9}
_DURATION = regex.compile(r"([+-]?)(\d+(?:\.\d+)?)(ms|s|m|h|d)?")


def parse_duration(text: str) -> int:
    """``"90s"``, ``"-10m"``, ``"+1.5h"``, ``"500ms"``, ``"0"`` → signed nanoseconds.

    Raises ValueError on anything else.
    """
    m = _DURATION.fullmatch(text.strip())
    if not m:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 10m, 2h, 500ms)")
    sign, number, unit = m.groups()
    if unit is None and float(number) != 0:
        raise ValueError(f"duration {text!r} needs a unit (ms, s, m, h, d)")
    ns = int(float(number) * _UNITS_NS[unit or "s"])
    return -ns if sign == "-" else ns


@dataclass(frozen=True, slots=True)
class Window:
    """A time range relative to an anchor event, in nanoseconds (``-10m..+10m``)."""

    before_ns: int  # signed offset of the window's start (usually <= 0)
    after_ns: int  # signed offset of the window's end (usually >= 0)

    def contains(self, anchor_ts: int | None, ts: int | None) -> bool:
        """True when ``ts`` falls in the window; always true when either side has no time."""
        if anchor_ts is None or ts is None:
            return True
        return anchor_ts + self.before_ns <= ts <= anchor_ts + self.after_ns


def parse_window(text: str) -> Window:
    """``"-10m..+10m"`` → :class:`Window`; a bare ``"10m"`` means ``-10m..+10m``."""
    if ".." in text:
        start, _, end = text.partition("..")
        w = Window(parse_duration(start), parse_duration(end))
    else:
        span = abs(parse_duration(text))
        w = Window(-span, span)
    if w.before_ns > w.after_ns:
        raise ValueError(f"window {text!r} ends before it starts")
    return w


@dataclass(frozen=True, slots=True)
class Evidence:
    """One ``[[evidence]]`` table, compiled."""

    name: str
    role: str
    line: int  # line of the ``[[evidence]]`` header in the file
    kinds: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    literals: tuple[str, ...] = ()
    pattern: regex.Pattern[str] | None = None
    regex_text: str = ""  # the pattern as written, for messages
    ignore_case: bool = False
    attrs: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    weight: float = 1.0
    window: Window | None = None
    min_count: int = 1
    risk: bool = False  # anchors only: alone, this evidence shows a risk, not a failure


@dataclass(frozen=True, slots=True)
class Correlation:
    type: str
    group_by: tuple[str, ...] = ()
    count: int = 1
    timespan_ns: int | None = None
    order: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Example:
    match: bool
    text: str
    source: str = ""
    line: int = 0
    risk: bool | None = None  # when set: the signature must fire as a risk (True) or as a cause (False)


@dataclass(frozen=True, slots=True)
class Variant:
    """A ``[[variants]]`` table: the words for a finding whose anchor lines all come from the evidence
    ``when`` names (a gloo timeout is worded as gloo's, not NCCL's); empty fields keep the signature's."""

    when: tuple[str, ...]
    title: str = ""
    explain: str = ""
    remedy: tuple[RemedyStep, ...] = ()
    line: int = 0


@dataclass(frozen=True, slots=True)
class Signature:
    """One signature file, validated and compiled."""

    id: str
    title: str
    category: str
    path: str  # where it was loaded from, for messages
    platforms: tuple[str, ...] = ("any",)
    priority: int = 50
    consequence_of: tuple[str, ...] = ()
    risk: bool = False
    explain: str = ""
    remedy: tuple[RemedyStep, ...] = ()  # untagged steps are for every machine
    references: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    correlation: Correlation | None = None
    variants: tuple[Variant, ...] = ()
    examples: tuple[Example, ...] = field(default=(), compare=False)

    @property
    def anchors(self) -> tuple[Evidence, ...]:
        return tuple(e for e in self.evidence if e.role == "anchor")

    def evidence_named(self, name: str) -> Evidence | None:
        return next((e for e in self.evidence if e.name == name), None)

    def variant_for(self, anchors: set[str]) -> Variant | None:
        """The first variant whose ``when`` holds every evidence name that anchored a finding."""
        return next((v for v in self.variants if anchors and anchors <= set(v.when)), None)
