"""What the matcher concludes: :class:`Finding` (one signature that fired) and
:class:`Verdict` (root cause, consequences, contributing findings, confidence)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from forensics.events import Event

__all__ = ["Blame", "Confidence", "Finding", "Role", "Verdict", "XidIncident", "number_ranges"]


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

    def __repr__(self) -> str:
        return (f"Finding({self.signature!r}, role={str(self.role)!r}, score={self.score}, matched={self.matched}, "
                f"evidence={len(self.evidence)})")


@dataclass
class Blame:
    """Who broke a multi-rank / multi-GPU job and who only suffered from it (forensics/match/blame.py).

    ``culprits`` and ``victims`` are labels as a person writes them ("ranks 6, 7 (GPUs 6, 7)");
    the numbers are kept too for the JSON and the TUI. ``why`` says in words what sets the
    culprits apart ("GPUs 6, 7 hold 59 GB at 0 % while GPUs 0–5 hold 91–97 GB")."""

    culprits: str
    victims: str
    why: str
    culprit_ranks: list[int] = field(default_factory=list)
    culprit_gpus: list[str] = field(default_factory=list)
    culprit_hosts: list[str] = field(default_factory=list)
    victim_ranks: list[int] = field(default_factory=list)
    victim_gpus: list[str] = field(default_factory=list)
    basis: list[str] = field(default_factory=list)  # the detectors/evidence the blame rests on
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)  # "GPU 6": memory/util/power; "rank 6": last step

    def line(self) -> str:
        """The verdict's first line: ``Culprit: … · victims: … — why``."""
        text = f"Culprit: {self.culprits or 'not singled out'}"
        if self.victims:
            text += f" · victims: {self.victims}"
        return text + (f" — {self.why}" if self.why else "")


@dataclass
class XidIncident:
    """Xids of one GPU that came in one burst (grouped until 3 min of silence), with the Xid
    that started it and the rest as its consequences (forensics/match/xid_incidents.py)."""

    gpu: str
    host: str | None
    first_ts: int | None
    last_ts: int | None
    primary: int
    primary_meaning: str  # "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS: GPU has fallen off the bus"
    bucket: str  # NVIDIA's immediate resolution bucket ("RESTART_BM"), "" when the catalogue gives none
    investigatory: str
    consequences: dict[int, int] = field(default_factory=dict)  # Xid -> how many times
    count: int = 0
    disrupts_job: bool = False
    why_disruptive: str = ""
    evidence: list[Event] = field(default_factory=list)


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
    blame: Blame | None = None  # culprit + victims + why, for multi-rank / multi-GPU verdicts
    t0: int | None = None  # the root cause's first event (UTC ns): evidence Δt is relative to it
    xid_incidents: list[XidIncident] = field(default_factory=list)
    xid_catalog: str = ""  # the pinned NVIDIA Xid catalogue version the verdict used, when Xids were seen

    @property
    def root_cause_id(self) -> str | None:
        return self.root_cause.signature if self.root_cause else None

    def __repr__(self) -> str:
        return (f"Verdict(root_cause={self.root_cause_id!r}, confidence={str(self.confidence)!r}, "
                f"consequences={[f.signature for f in self.consequences]!r}, "
                f"contributing={[f.signature for f in self.contributing]!r})")

    def dt_s(self, e: Event) -> float | None:
        """Seconds from the root cause's first event to ``e`` (None when either has no time)."""
        if self.t0 is None or e.ts is None:
            return None
        return round((e.ts - self.t0) / 1e9, 3)


def number_ranges(numbers: Iterable[int], min_run: int = 2) -> str:
    """Ranks or GPU indices as a person writes them: ``[0, 1, 2, 5]`` → ``"0–2, 5"``; runs shorter
    than ``min_run`` are listed (``min_run=3``: ``[6, 7]`` → ``"6, 7"``)."""
    nums = sorted(set(numbers))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        if i == j or j - i + 1 < min_run:
            parts += [str(n) for n in nums[i:j + 1]]
        else:
            parts.append(f"{nums[i]}–{nums[j]}")
        i = j + 1
    return ", ".join(parts)
