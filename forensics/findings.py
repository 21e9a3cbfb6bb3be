"""What the matcher concludes: :class:`Finding` (one signature that fired) and
:class:`Verdict` (root cause, consequences, contributing findings, confidence)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from forensics.events import Event

__all__ = ["Confidence", "Finding", "Role", "Verdict", "number_ranges"]


class Role(StrEnum):
    ROOT_CAUSE = "root-cause"
    CONSEQUENCE = "consequence"
    CONTRIBUTING = "contributing"


class Confidence(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@dataclass
class Finding:
    """One signature that matched, with the events that prove it."""

    signature: str
    title: str
    category: str
    score: float
    evidence: list[Event]
    role: Role = Role.CONTRIBUTING
    explain: str = ""
    remedy: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    note: str = ""  # why this role: "follows xid-79 by 600 s", "benign at idle" …
    matched: int = 0  # how many events matched the anchors (evidence keeps only some of them)
    facts: dict[str, Any] = field(default_factory=dict)  # phase, first, OOM sizes (forensics/match/facts.py)
    risk: bool = False  # a risk, never the root cause (risk signature, or only risk evidence matched)

    @property
    def first_seen(self) -> int | None:
        stamps = [e.ts for e in self.evidence if e.ts is not None]
        return min(stamps) if stamps else None

    @property
    def last_seen(self) -> int | None:
        stamps = [e.ts for e in self.evidence if e.ts is not None]
        return max(stamps) if stamps else None


@dataclass
class Verdict:
    """The answer: which finding is the root cause, how sure, and what lost."""

    root_cause: Finding | None
    confidence: Confidence
    summary: str
    consequences: list[Finding] = field(default_factory=list)
    contributing: list[Finding] = field(default_factory=list)
    ruled_out: list[tuple[str, str]] = field(default_factory=list)  # (signature id, why it lost)
    warnings: list[str] = field(default_factory=list)  # matcher trouble (a regex that timed out …)

    @property
    def root_cause_id(self) -> str | None:
        return self.root_cause.signature if self.root_cause else None


def number_ranges(numbers: Iterable[int]) -> str:
    """Ranks or GPU indices as a person writes them: ``[0, 1, 2, 5]`` → ``"0–2, 5"``."""
    nums = sorted(set(numbers))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}–{nums[j]}")
        i = j + 1
    return ", ".join(parts)
