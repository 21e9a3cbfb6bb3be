"""One signature against the timeline: anchors, excludes, correlation, supporting
evidence, and the score.

Score in [0, 1]: ``0.8 × A + 0.2 × min(1, S) + repetition``, where ``A`` is the
largest weight among the anchor evidence that matched, ``S`` the sum of the
weights of supporting evidence found in its window, and ``repetition`` adds 0.02
per further distinct anchor line (at most 0.1). An anchor of weight 1 alone scores
0.8; a weak anchor (a bare ``Killed``, weight 0.3) scores about 0.25.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from forensics.events import Event
from forensics.findings import Finding, remedy_for
from forensics.match import correlation
from forensics.match.facts import finding_facts
from forensics.match.schema import Evidence, Signature
from forensics.match.selectors import EventIndex

__all__ = ["MAX_EVIDENCE", "Match", "match_signature", "score"]

#: Evidence events kept on a finding (first ones and last ones); the count is kept in ``matched``.
MAX_EVIDENCE = 16
#: The weight of an anchor found through a producer's catalogue (a message that alone is evidence of the
#: signature, in a wording its own patterns may not know); a signature's own firm anchors weigh 1.
CATALOG_WEIGHT = 0.9
#: The name under which those anchors are listed.
CATALOG_ANCHOR = "catalogue"


@dataclass
class Match:
    """A fired signature with what the verdict needs beyond the :class:`Finding`."""

    sig: Signature
    finding: Finding
    anchors: list[int]  # positions of the anchor events that count
    positions: list[int]  # every evidence position (anchors + supporting), uncapped
    pids: set[int] = field(default_factory=set)
    risk_only: list[str] = field(default_factory=list)  # names of the risk anchors, when only they matched

    @property
    def first_pos(self) -> int:
        return self.anchors[0]


def score(anchor_weight: float, support_weight: float, distinct_anchors: int) -> float:
    """The finding's score from its evidence (see the module docstring)."""
    repetition = min(0.1, 0.02 * max(0, distinct_anchors - 1))
    return round(max(0.0, min(1.0, 0.8 * min(1.0, anchor_weight) + 0.2 * min(1.0, support_weight) + repetition)), 3)


def _same_host(a: Event, b: Event) -> bool:
    return a.host is None or b.host is None or a.host == b.host


def _in_window(ev: Evidence, anchor: Event, other: Event) -> bool:
    return _same_host(anchor, other) and (ev.window is None or ev.window.contains(anchor.ts, other.ts))


def _excluded(sig: Signature, index: EventIndex, anchor: Event) -> bool:
    for ex in sig.evidence:
        if ex.role != "excludes":
            continue
        hits = [p for p in index.select(ex, sig.id) if _in_window(ex, anchor, index.events[p])]
        if len(hits) >= ex.min_count:
            return True
    return False


def _cap(positions: Sequence[int], limit: int | None) -> list[int]:
    if limit is None or len(positions) <= limit:
        return list(positions)
    head = limit * 3 // 4
    return list(positions[:head]) + list(positions[-(limit - head):])


def match_signature(sig: Signature, index: EventIndex, max_evidence: int | None = MAX_EVIDENCE) -> Match | None:
    """Run one signature; None when it does not fire. ``max_evidence``: evidence events kept on the
    finding (None: every one, ``analyze --all``)."""
    events = index.events
    selected: dict[str, list[int]] = {}
    weight_of: dict[int, float] = {}
    anchors: set[int] = set()
    firm: dict[int, float] = {}  # position -> weight, from anchors that are not risk evidence
    risk_names: dict[int, list[str]] = {}
    for ev in sig.anchors:
        hits = index.select(ev, sig.id)
        selected[ev.name] = hits
        if len(hits) < ev.min_count:
            continue
        for p in hits:
            anchors.add(p)
            weight_of[p] = max(weight_of.get(p, 0.0), ev.weight)
            if ev.risk:
                risk_names.setdefault(p, []).append(ev.name)
            else:
                firm[p] = max(firm.get(p, 0.0), ev.weight)
    from_catalog = index.catalog_positions(sig.id)
    selected[CATALOG_ANCHOR] = from_catalog
    for p in from_catalog:
        anchors.add(p)
        weight_of[p] = max(weight_of.get(p, 0.0), CATALOG_WEIGHT)
        firm[p] = max(firm.get(p, 0.0), CATALOG_WEIGHT)
    if not anchors:
        return None
    has_excludes = any(e.role == "excludes" for e in sig.evidence)
    valid = sorted(p for p in anchors if not (has_excludes and _excluded(sig, index, events[p])))
    if not valid:
        return None
    risk_only: list[str] = []
    if any(p in firm for p in valid):
        # A failure is shown: risk evidence does not anchor it (list it as supporting to count it).
        valid = [p for p in valid if p in firm]
        weight_of = firm
    elif risk_names:
        risk_only = sorted({n for p in valid for n in risk_names.get(p, ())})
    for ev in sig.evidence:
        if ev.role == "supporting":
            selected[ev.name] = index.select(ev, sig.id)
    corr = sig.correlation
    if corr is not None:
        if corr.type == "event_count":
            valid = correlation.event_count(valid, events, corr)
        else:
            valid_set = set(valid)
            anchor_names = {a.name for a in sig.anchors} | {CATALOG_ANCHOR}
            chosen = {n: ([p for p in ps if p in valid_set] if n in anchor_names else ps)
                      for n, ps in selected.items() if n != CATALOG_ANCHOR or n in corr.order}
            chain = correlation.temporal_ordered(chosen, events, corr)
            # An anchor the order does not name proves the failure on its own.
            alone = sorted({p for name in [a.name for a in sig.anchors] + [CATALOG_ANCHOR] if name not in corr.order
                            for p in selected.get(name, ()) if p in valid_set})
            if not chain and not alone:
                return None
            valid = sorted({p for p in chain if p in valid_set} | set(alone)) or chain
        if not valid:
            return None
    support: list[int] = []
    support_weight = 0.0
    for ev in sig.evidence:
        if ev.role != "supporting":
            continue
        hits = [p for p in selected.get(ev.name, ())
                if any(_in_window(ev, events[a], events[p]) for a in valid[:50])]
        if len(hits) >= ev.min_count:
            support.extend(hits)
            support_weight += ev.weight
    anchor_weight = max(weight_of.get(p, 0.0) for p in valid)
    distinct = len({events[p].message for p in valid})
    positions = sorted(set(valid) | set(support))
    shown = sorted(set(_cap(valid, max_evidence)) | set(_cap(sorted(set(support)), max_evidence)))
    valid_set = set(valid)
    anchored_by = {name for name in [a.name for a in sig.anchors] + [CATALOG_ANCHOR]
                   if valid_set.intersection(selected.get(name, ()))}
    # words for what was seen (a gloo timeout is not NCCL's); a catalogue hit says only that the line is an
    # error the signature knows, not whose wording it is
    variant = sig.variant_for(anchored_by - {CATALOG_ANCHOR})
    steps = list(variant.remedy if variant is not None and variant.remedy else sig.remedy)
    finding = Finding(
        signature=sig.id,
        title=variant.title if variant is not None and variant.title else sig.title,
        category=sig.category,
        score=score(anchor_weight, support_weight, distinct),
        evidence=[events[p] for p in shown],
        explain=variant.explain if variant is not None and variant.explain else sig.explain,
        remedy=remedy_for(steps, ()),
        steps=steps,
        references=list(sig.references),
        hosts=sorted({h for p in positions if (h := events[p].host)}),
        gpus=sorted({str(events[p].gpu) for p in positions if events[p].gpu is not None}),
        ranks=sorted({r for p in positions for r in _ranks(events[p])}),
        matched=len(valid),
        facts=finding_facts([events[p] for p in positions],
                            lambda: [events[p] for p in index.of_kind("progress")]),
    )
    pids = {pid for p in valid if (pid := _pid(events[p])) is not None}
    return Match(sig, finding, valid, positions, pids, risk_only)


def _ranks(e: Event) -> list[int]:
    """The rank of an event, or the ranks a derived cross-rank event speaks about."""
    if e.rank is not None:
        return [e.rank]
    found = e.attrs.get("ranks", e.attrs.get("rank"))
    values = found if isinstance(found, list) else [found]
    return [r for r in values if isinstance(r, int) and not isinstance(r, bool)]


def _pid(e: Event) -> int | None:
    if e.pid is not None:
        return e.pid
    p = e.attrs.get("pid")
    return p if isinstance(p, int) and not isinstance(p, bool) else None
