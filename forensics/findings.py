"""What the matcher concludes: :class:`Finding` (one signature that fired) and
:class:`Verdict` (root cause, consequences, contributing findings, confidence)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from forensics.events import Event

__all__ = ["MACHINE_CLASSES", "Blame", "Confidence", "Finding", "Machine", "RemedyStep", "Role", "Verdict",
           "XidIncident", "number_ranges"]


class Role(StrEnum):
    ROOT_CAUSE = "root-cause"
    CONSEQUENCE = "consequence"
    CONTRIBUTING = "contributing"


class Confidence(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


#: Classes of machine a remedy step can be written for (forensics/match/gpu_models.toml says which GPUs are which).
MACHINE_CLASSES = ("datacenter", "workstation", "consumer")


@dataclass(frozen=True, slots=True)
class RemedyStep:
    """One step of a signature's remedy; ``machines`` names the classes of machine it is for (empty: all)."""

    text: str
    machines: tuple[str, ...] = ()

    def label(self) -> str:
        """The step as shown when it fits only some of the machines in question: "For datacenter GPUs: …"."""
        if not self.machines:
            return self.text
        cards = [m for m in ("consumer", "workstation") if m in self.machines]
        words = (["datacenter GPUs"] if "datacenter" in self.machines else []) + (
            [f"{' or '.join(cards)} cards"] if cards else [])
        return f"For {' and '.join(words)}: {self.text[:1].lower()}{self.text[1:]}"


def remedy_for(steps: Iterable[RemedyStep], classes: Iterable[str]) -> list[str]:
    """The steps that fit a machine whose GPUs are of ``classes`` (none known: every step, the tagged ones
    labelled with their classes). A step for every class present is shown as written, one for only some of
    them labelled, one for none of them left out."""
    present = set(classes)
    out = []
    for step in steps:
        if not step.machines or (present and present <= set(step.machines)):
            out.append(step.text)
        elif not present or present & set(step.machines):
            out.append(step.label())
    return out


@dataclass
class Machine:
    """What the inputs say the GPUs are (forensics/match/machine.py): per GPU its model and class."""

    gpus: dict[str, tuple[str, str]] = field(default_factory=dict)  # GPU (bus id, else model) -> (model, class)
    basis: list[str] = field(default_factory=list)  # where the models were read ("nvidia-smi -q", "lspci" …)

    def classes(self, gpus: Iterable[str] = ()) -> set[str]:
        """The classes of ``gpus`` when the inputs name them, else of every GPU seen."""
        wanted = [self.gpus[g][1] for g in gpus if g in self.gpus]
        return set(wanted) if wanted else {c for _, c in self.gpus.values()}

    def heading(self, finding: Finding) -> str:
        """What a finding's remedy was chosen for, said where the steps are listed ("" when its signature has
        no steps for one class of machine only)."""
        if not any(s.machines for s in finding.steps):
            return ""
        classes = self.classes(finding.gpus)
        if not classes:
            return "the GPU model is not in the inputs: steps for one class of machine are labelled"
        return f"for {self.describe(finding.gpus)}"

    def describe(self, gpus: Iterable[str] = ()) -> str:
        """``"NVIDIA H200 ×2 (datacenter)"``: the models seen, for the report's remedy heading."""
        named = [self.gpus[g] for g in gpus if g in self.gpus]
        counts: dict[tuple[str, str], int] = {}
        for model, cls in named or self.gpus.values():
            counts[(model, cls)] = counts.get((model, cls), 0) + 1
        return ", ".join(f"{m}{f' ×{n}' if n > 1 else ''} ({c})" for (m, c), n in counts.items())


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
    remedy: list[str] = field(default_factory=list)  # the steps for this machine (remedy_for over ``steps``)
    references: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    note: str = ""  # why this role: "follows xid-79 by 600 s", "benign at idle" …
    matched: int = 0  # how many events matched the anchors (evidence keeps only some of them)
    facts: dict[str, Any] = field(default_factory=dict)  # phase, first, OOM sizes (forensics/match/facts.py)
    risk: bool = False  # a risk, never the root cause (risk signature, or only risk evidence matched)
    steps: list[RemedyStep] = field(default_factory=list)  # the signature's remedy, every class of machine

    def fit_remedy(self, machine: Machine) -> None:
        """Choose the remedy steps for the machine its GPUs are on (a finding without tagged steps keeps its
        remedy as it is)."""
        if any(s.machines for s in self.steps):
            self.remedy = remedy_for(self.steps, machine.classes(self.gpus))

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
    """Who broke the job and who only suffered from it (forensics/match/blame.py): present whenever one
    rank, GPU, process or node is identifiable, single-worker failures too.

    ``culprits`` and ``victims`` are labels as a person writes them ("ranks 6, 7 (GPUs 6, 7)",
    "63 ranks (0–32, 34–63)"); the numbers are kept too for the JSON and the TUI. ``why`` says in words
    what sets the culprits apart ("GPUs 6, 7 hold 59 GB at 0 % while GPUs 0–5 hold 91–97 GB"), or,
    with no culprit, why the evidence does not single one out."""

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
    culprit_pids: list[int] = field(default_factory=list)  # the culprit processes (an Xid's, the OOM killer's)

    def line(self) -> str:
        """The verdict's first line: ``Culprit: … · victims: … — why``."""
        text = f"Culprit: {self.culprits or 'not singled out'}"
        if self.victims:
            text += f" · victims: {self.victims}"
        return text + (f" — {self.why}" if self.why else "")

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``verdict.blame``, docs/analyze.schema.json): the same fields as the text."""
        return {"line": self.line(), "culprits": self.culprits, "victims": self.victims, "why": self.why,
                "culprit_ranks": self.culprit_ranks, "culprit_gpus": self.culprit_gpus,
                "culprit_hosts": self.culprit_hosts, "culprit_pids": self.culprit_pids,
                "victim_ranks": self.victim_ranks, "victim_gpus": self.victim_gpus,
                "victim_count": len(self.victim_ranks) + len(self.victim_gpus), "basis": self.basis,
                "facts": self.facts}


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
    machine: Machine | None = None  # the GPUs' models and classes, when the inputs name them

    @property
    def root_cause_id(self) -> str | None:
        return self.root_cause.signature if self.root_cause else None

    def remedy_heading(self, f: Finding) -> str:
        """What ``f``'s remedy steps were chosen for ("for NVIDIA H200 ×2 (datacenter)"), "" when its signature
        has no steps for one class of machine only. Every face shows it beside "What to do"."""
        return self.machine.heading(f) if self.machine is not None else Machine().heading(f)

    def __repr__(self) -> str:
        return (f"Verdict(root_cause={self.root_cause_id!r}, confidence={str(self.confidence)!r}, "
                f"consequences={[f.signature for f in self.consequences]!r}, "
                f"contributing={[f.signature for f in self.contributing]!r})")

    def dt_s(self, e: Event) -> float | None:
        """Seconds from the root cause's first event to ``e`` (None when either has no time)."""
        if self.t0 is None or e.ts is None:
            return None
        return round((e.ts - self.t0) / 1e9, 3)


def number_ranges(numbers: Iterable[int], min_run: int = 2, max_parts: int = 0) -> str:
    """Ranks or GPU indices as a person writes them: ``[0, 1, 2, 5]`` → ``"0–2, 5"``; runs shorter
    than ``min_run`` are listed (``min_run=3``: ``[6, 7]`` → ``"6, 7"``). With ``max_parts`` the text
    stays bounded: the first ``max_parts`` parts, then ``… (N more)`` counting the numbers left out."""
    nums = sorted(set(numbers))
    parts: list[str] = []
    shown = 0
    i = 0
    while i < len(nums):
        if max_parts and len(parts) >= max_parts:
            parts.append(f"… ({len(nums) - shown} more)")
            break
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        if i == j or j - i + 1 < min_run:
            room = max_parts - len(parts) if max_parts else j - i + 1
            parts += [str(n) for n in nums[i:i + min(room, j - i + 1)]]
            shown += min(room, j - i + 1)
            i += min(room, j - i + 1)
            continue
        parts.append(f"{nums[i]}–{nums[j]}")
        shown += j - i + 1
        i = j + 1
    return ", ".join(parts)
