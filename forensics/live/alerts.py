"""From a verdict to alerts: one per incident, a follow-up when it gets worse or recovers.

An **alert** is the verdict's root cause at that moment, as ``analyze`` states it: the finding
(signature, title, confidence), the culprit line of the verdict's blame (or the ranks, GPUs and
hosts the finding names), the first evidence lines with their ``file:line``, and the first remedy.

An **incident** is keyed by the root cause's signature and its culprit set (``rank:6,7``,
``gpu:0000:3b:00.0``, ``host:node-2``; ``-`` when nobody is singled out):

* a verdict whose key matches an open incident says nothing new;
* the same signature with a culprit set that *contains* the open one's (a second drafter died) or a
  higher confidence is the same incident **worse**: a follow-up;
* the same signature with other culprits, or another signature, is a new incident; an open incident
  whose signature is now only a consequence of the new root cause is closed as *superseded*
  (the new alert names it);
* an open incident whose signature is no longer among the verdict's findings for ``RECOVER_S`` (two
  evaluations at least) has **recovered**: a follow-up (a stall that ended, a throughput back up).

Rate limit: at most ``BURST`` alerts at once, then one per ``REFILL_S``; follow-ups of one incident
at most one per ``FOLLOW_UP_S``. An alert the limit holds back is still written to ``live.jsonl``,
marked ``"suppressed": "rate limit"``; the channels do not get it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from forensics.findings import Confidence, Finding, Verdict
from forensics.units import iso

__all__ = ["FORMAT", "Alert", "Incidents", "RateLimit", "STALL_SIGNATURES", "alert_key"]

FORMAT = "gpu-forensics-live"
VERSION = 1
RECOVER_S = 30.0
BURST = 5
REFILL_S = 60.0
FOLLOW_UP_S = 60.0
MAX_EVIDENCE = 4
#: root causes that are a silence (held while the log says the run saves or evaluates: pauses.py)
STALL_SIGNATURES = frozenset({"silent-worker-stall"})
_RANK = {Confidence.LOW: 0, Confidence.MEDIUM: 1, Confidence.HIGH: 2}


def _culprits(verdict: Verdict, f: Finding) -> dict[str, list[str]]:
    b = verdict.blame
    if b is not None and (b.culprit_ranks or b.culprit_gpus or b.culprit_hosts):
        return {"rank": [str(r) for r in sorted(b.culprit_ranks)], "gpu": sorted(b.culprit_gpus),
                "host": sorted(b.culprit_hosts)}
    return {"rank": [str(r) for r in sorted(f.ranks)], "gpu": sorted(f.gpus), "host": sorted(f.hosts)}


def alert_key(signature: str, culprits: dict[str, list[str]]) -> str:
    parts = [f"{k}:{','.join(v)}" for k, v in culprits.items() if v]
    return f"{signature}|{';'.join(parts) or '-'}"


def _contains(a: dict[str, list[str]], b: dict[str, list[str]]) -> bool:
    """Every culprit of ``b`` is one of ``a``'s, and ``a`` names more."""
    sa = {(k, x) for k, v in a.items() for x in v}
    sb = {(k, x) for k, v in b.items() for x in v}
    return sb < sa


def _culprit_text(verdict: Verdict, f: Finding) -> str:
    if verdict.blame is not None:
        return verdict.blame.line()
    where = []
    if f.ranks:
        where.append("rank" + ("s " if len(f.ranks) > 1 else " ") + ", ".join([str(r) for r in sorted(f.ranks)][:8]))
    if f.gpus:
        where.append("GPU" + ("s " if len(f.gpus) > 1 else " ") + ", ".join(sorted(f.gpus)[:8]))
    if f.hosts:
        where.append("on " + ", ".join(sorted(f.hosts)[:4]))
    return " ".join(where)


@dataclass
class Alert:
    """One alert as written to ``live.jsonl`` (``docs/live.md`` has the schema)."""

    kind: str  # new | worse | recovered
    incident: str
    key: str
    signature: str
    title: str
    confidence: str
    summary: str
    culprit: str
    culprits: dict[str, list[str]]
    evidence: list[dict[str, Any]]
    remedy: str
    remedies: list[str]
    first_seen_ns: int | None
    observed_until_ns: int
    consequences: list[str] = field(default_factory=list)
    category: str = ""
    score: float = 0.0
    blame: dict[str, Any] | None = None
    previous: str | None = None
    supersedes: list[str] = field(default_factory=list)
    id: str = ""
    time_ns: int = 0
    suppressed: str | None = None
    run: dict[str, Any] = field(default_factory=dict)

    @property
    def detected_after_s(self) -> float | None:
        """From the root cause's first event to the moment the alert was raised, on the data's clock."""
        if self.first_seen_ns is None:
            return None
        return round((self.observed_until_ns - self.first_seen_ns) / 1e9, 3)

    def line(self) -> str:
        """One line for a terminal: what, who, the first evidence, what to do."""
        head = {"new": "ALERT", "worse": "WORSE", "recovered": "RECOVERED"}.get(self.kind, self.kind.upper())
        if self.kind == "recovered":
            return f"forensics {head}: {self.title} ({self.signature}) no longer holds [{self.incident}]"
        parts = [f"forensics {head}: {self.title} ({self.signature}, {self.confidence})"]
        if self.culprit:
            parts.append(_short(self.culprit, 200))
        if self.evidence:
            first = self.evidence[0]
            parts.append(f"{first['origin']}: {_short(first['message'], 120)}")
        if self.remedy:
            parts.append(f"do: {_short(self.remedy, 160)}")
        return " — ".join(parts) + f" [{self.incident}]"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "version": VERSION, "id": self.id, "incident": self.incident, "kind": self.kind,
            "time": iso(self.time_ns), "time_ns": self.time_ns,
            "observed_until": iso(self.observed_until_ns), "observed_until_ns": self.observed_until_ns,
            "first_seen": iso(self.first_seen_ns), "first_seen_ns": self.first_seen_ns,
            "detected_after_s": self.detected_after_s,
            "key": self.key, "signature": self.signature, "title": self.title, "category": self.category,
            "confidence": self.confidence, "score": round(self.score, 3), "summary": self.summary,
            "culprit": self.culprit, "culprits": self.culprits, "blame": self.blame,
            "evidence": self.evidence, "remedy": self.remedy, "remedies": self.remedies,
            "consequences": self.consequences, "previous": self.previous, "supersedes": self.supersedes,
            "suppressed": self.suppressed, "run": self.run, "line": self.line(),
        }


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def candidate(verdict: Verdict, observed_until_ns: int) -> Alert | None:
    """The alert the verdict stands for (None: no root cause, or only a risk)."""
    f = verdict.root_cause
    if f is None or f.risk:
        return None
    from forensics.secrets import redact_text

    culprits = _culprits(verdict, f)
    evidence = [{"ts": iso(e.ts), "origin": str(e.origin), "source": e.source, "kind": e.kind,
                 "message": redact_text(e.message[:400])[0]} for e in f.evidence[:MAX_EVIDENCE]]
    b = verdict.blame
    blame = None if b is None else {"line": b.line(), "culprits": b.culprits, "victims": b.victims, "why": b.why,
                                    "culprit_ranks": b.culprit_ranks, "culprit_gpus": b.culprit_gpus,
                                    "culprit_hosts": b.culprit_hosts, "victim_ranks": b.victim_ranks,
                                    "victim_gpus": b.victim_gpus, "basis": b.basis}
    return Alert(kind="new", incident="", key=alert_key(f.signature, culprits), signature=f.signature,
                 title=f.title, confidence=str(verdict.confidence), summary=redact_text(verdict.summary)[0],
                 culprit=redact_text(_culprit_text(verdict, f))[0], culprits=culprits, evidence=evidence,
                 remedy=f.remedy[0] if f.remedy else "", remedies=list(f.remedy), first_seen_ns=f.first_seen,
                 observed_until_ns=observed_until_ns, consequences=[c.signature for c in verdict.consequences],
                 category=f.category, score=f.score, blame=blame)


@dataclass
class _Incident:
    id: str
    alert: Alert  # the last one told
    last_present: float
    misses: int = 0
    last_told: float = 0.0


class RateLimit:
    """A token bucket: ``burst`` at once, then one per ``refill_s``."""

    def __init__(self, burst: int = BURST, refill_s: float = REFILL_S) -> None:
        self.burst, self.refill_s = burst, refill_s
        self.tokens = float(burst)
        self.at: float | None = None

    def take(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        if self.at is not None:
            self.tokens = min(self.burst, self.tokens + max(0.0, now - self.at) / self.refill_s)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class Incidents:
    """The open incidents and what a new verdict makes of them (module docstring)."""

    def __init__(self, rate: RateLimit | None = None, recover_s: float = RECOVER_S,
                 follow_up_s: float = FOLLOW_UP_S) -> None:
        self.open: dict[str, _Incident] = {}
        self.rate = rate or RateLimit()
        self.recover_s = recover_s
        self.follow_up_s = follow_up_s
        self._n_incidents = 0
        self._n_alerts = 0

    def update(self, verdict: Verdict | None, observed_until_ns: int, now: float | None = None,
               hold: bool = False) -> list[Alert]:
        """The alerts a verdict raises. ``hold``: a new stall-type root cause is not told yet (the run
        said it pauses); known incidents are still followed."""
        now = time.monotonic() if now is None else now
        out: list[Alert] = []
        cand = candidate(verdict, observed_until_ns) if verdict is not None else None
        present = {f.signature for f in _findings(verdict)} if verdict is not None else set()
        matched: _Incident | None = None
        if cand is not None:
            matched = self._match(cand)
            if matched is None and not (hold and cand.signature in STALL_SIGNATURES):
                cand.supersedes = [i.id for i in self.open.values()
                                   if i.alert.signature != cand.signature and i.alert.signature in present]
                for gone in cand.supersedes:
                    self.open.pop(next(k for k, i in self.open.items() if i.id == gone), None)
                self._n_incidents += 1
                inc = _Incident(f"i-{self._n_incidents:04d}", cand, now)
                cand.incident = inc.id
                self.open[cand.key] = inc
                out.append(self._tell(cand, inc, now))
            elif matched is not None:
                matched.last_present, matched.misses = now, 0
                if self._worse(cand, matched.alert) and now - matched.last_told >= self.follow_up_s:
                    cand.kind, cand.incident, cand.previous = "worse", matched.id, matched.alert.id
                    self.open.pop(matched.alert.key, None)
                    self.open[cand.key] = matched
                    out.append(self._tell(cand, matched, now))
        for key, inc in list(self.open.items()):
            if inc is matched or (cand is not None and key == cand.key):
                continue
            if inc.alert.signature in present:
                inc.last_present, inc.misses = now, 0
                continue
            inc.misses += 1
            if inc.misses >= 2 and now - inc.last_present >= self.recover_s:
                a = inc.alert
                rec = Alert(kind="recovered", incident=inc.id, key=a.key, signature=a.signature, title=a.title,
                            confidence=a.confidence, summary=f"{a.title}: no longer found by the analysis",
                            culprit=a.culprit, culprits=a.culprits, evidence=[], remedy="", remedies=[],
                            first_seen_ns=a.first_seen_ns, observed_until_ns=observed_until_ns, previous=a.id,
                            category=a.category)
                del self.open[key]
                out.append(self._tell(rec, inc, now))
        return out

    def _match(self, cand: Alert) -> _Incident | None:
        if cand.key in self.open:
            return self.open[cand.key]
        for inc in self.open.values():
            if inc.alert.signature == cand.signature and _contains(cand.culprits, inc.alert.culprits):
                return inc
        return None

    @staticmethod
    def _worse(new: Alert, old: Alert) -> bool:
        if _contains(new.culprits, old.culprits):
            return True
        return _RANK.get(Confidence(new.confidence), 0) > _RANK.get(Confidence(old.confidence), 0)

    def _tell(self, alert: Alert, inc: _Incident, now: float) -> Alert:
        self._n_alerts += 1
        alert.id = f"a-{self._n_alerts:04d}"
        alert.time_ns = time.time_ns()
        if not self.rate.take(now):
            alert.suppressed = "rate limit"
        inc.alert, inc.last_told = alert, now
        return alert


def _findings(verdict: Verdict) -> list[Finding]:
    out = [verdict.root_cause] if verdict.root_cause is not None else []
    return out + list(verdict.consequences) + list(verdict.contributing)
