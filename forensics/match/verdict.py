"""From fired signatures to one answer: root cause, consequences, contributing risks,
the runners-up and why they lost, and how sure we are.

Rules (docs/signatures.md, "How the verdict is made"):

* ``risk = true`` findings are never a root cause; they are contributing.
* Finding G *explains* finding F when F lists G in ``consequence_of`` (or lists
  ``"*"`` and G has a higher ``priority``), and time and place allow it: G did not
  start after F ended (30 s tolerance for clocks and interleaved output), G is not
  far older than F (1 h, or 1.5 × a watchdog timeout carried by F's evidence), and
  for named links both happened on the same host when both hosts are known. Without
  timestamps, ``"*"`` links need G no later than F in the same file (a few hundred
  lines of slack for interleaved output); named links need nothing more.
* A precursor is not a consequence. Where the signatures let two findings explain each other by
  name (``pcie-aer`` and ``xid-79-fallen-off-bus``: a link that drops loses the GPU, a GPU that
  drops makes its port report errors), the one that started first on one clock is the cause: the
  stamps one file's lines carry themselves (wall time or kernel uptime, never an inferred or
  receipt time), of one host and one rank. A one-way link keeps the 30 s tolerance (for clocks
  that may disagree, and for a driver that reports a fault after its first symptoms).
* The root cause is the strongest finding that nothing else explains; strength is
  ``priority × (0.5 + 0.5 × score)``; among findings of similar strength with
  timestamps the earliest wins. A timed finding that explains nothing and ended more than
  2 h before another finding of at least half its strength began is an earlier, separate
  incident.
* Consequences are everything the root explains, directly or through a chain.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from forensics.events import Event, MetricSample, TsSource
from forensics.findings import Confidence, Finding, Role, Verdict
from forensics.lazy_re import lazy_compile
from forensics.match.blame import blame
from forensics.match.facts import oom_sentence, stop_code_sentence
from forensics.match.matcher import Match
from forensics.match.this_run import RunScope, scope
from forensics.timeline.identity import IdentityTable

__all__ = ["decide"]

TOLERANCE_NS = 30 * 10**9
DEFAULT_MAX_GAP_NS = 3600 * 10**9
STALE_NS = 2 * 3600 * 10**9
#: A watchdog timeout above a year is a garbled number (and may not even fit a float).
MAX_TIMEOUT_MS = 366 * 86_400_000
STALE_STRENGTH = 0.5  # a later incident must be at least this strong, relative, to make an old one stale
NEAR_LINES = 300
LEAGUE = 12.0  # strength difference within which the earlier finding wins


_Clock = tuple[str, str | None, int | None]  # file, host, rank


@dataclass
class _Node:
    m: Match
    first: int | None  # earliest anchor time
    last: int | None
    lines: dict[str, tuple[int, int]]  # file -> (first line, last line) of its evidence
    strength: float
    max_gap: int
    clocks: dict[_Clock, tuple[int | None, int | None]]  # one clock -> earliest anchor (own wall stamp, uptime)

    @property
    def sig_id(self) -> str:
        return self.m.sig.id


def _node(m: Match, events: Sequence[Event], run: RunScope | None = None) -> _Node:
    """A finding as the verdict weighs it, timed by its own events: a recording's earlier context
    (:mod:`forensics.match.this_run`) does not make it older."""
    evs = [events[p] for p in m.positions]
    anchors = [events[p] for p in m.anchors]
    if run is not None:
        anchors = run.own(anchors)
        m.finding.evidence = run.ordered(m.finding.evidence)
    stamps = [e.ts for e in anchors if e.ts is not None]
    lines: dict[str, tuple[int, int]] = {}
    for e in evs:
        lo, hi = lines.get(e.origin.path, (e.origin.line, e.origin.line))
        lines[e.origin.path] = (min(lo, e.origin.line), max(hi, e.origin.line + e.origin.nlines - 1))
    timeouts = [min(t, MAX_TIMEOUT_MS) for e in evs
                if isinstance(t := e.attrs.get("timeout_ms"), int | float) and t > 0]
    max_gap = max(DEFAULT_MAX_GAP_NS, int(max(timeouts, default=0) * 1.5e6) + 60 * 10**9)
    strength = m.sig.priority * (0.5 + 0.5 * m.finding.score)
    return _Node(m, min(stamps) if stamps else None, max(stamps) if stamps else None, lines, strength, max_gap,
                 _clocks(events[p] for p in m.anchors))


#: Times a line carries itself; an inferred or receipt time orders output, not what happened.
_OWN_STAMPS = frozenset({TsSource.EXACT, TsSource.LOCAL, TsSource.BOOT_RELATIVE})


def _clocks(anchors: Iterable[Event]) -> dict[_Clock, tuple[int | None, int | None]]:
    """Per clock (one file's lines of one host and rank: a log of many ranks mixes their hosts' clocks), the
    earliest anchor: its own wall stamp and its kernel uptime."""
    out: dict[_Clock, tuple[int | None, int | None]] = {}
    for e in anchors:
        wall = e.ts if e.ts_source in _OWN_STAMPS else None
        key = (e.origin.path, e.host, e.rank)
        old_wall, old_up = out.get(key, (None, None))
        out[key] = (_least(old_wall, wall), _least(old_up, e.uptime_ns))
    return out


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _precedes(f: _Node, g: _Node) -> bool:
    """True when ``f`` started before ``g`` on a clock both share (one file's own stamps): ``f`` is
    then ``g``'s precursor, not its consequence."""
    earlier = later = False
    for clock, (f_wall, f_up) in f.clocks.items():
        if clock not in g.clocks:
            continue
        g_wall, g_up = g.clocks[clock]
        a, b = (f_wall, g_wall) if f_wall is not None and g_wall is not None else (f_up, g_up)
        if a is None or b is None:
            continue
        earlier |= a < b
        later |= a >= b
    return earlier and not later


def _explains(g: _Node, f: _Node) -> bool:
    """True when ``g`` can be the cause of ``f`` (see the module docstring)."""
    listed = f.m.sig.consequence_of
    named = g.sig_id in listed
    star = "*" in listed and g.m.sig.priority > f.m.sig.priority
    if not (named or star):
        return False
    if named and f.sig_id in g.m.sig.consequence_of and _precedes(f, g):  # a precursor is not a consequence
        return False
    gh, fh = set(g.m.finding.hosts), set(f.m.finding.hosts)
    if named and not star and gh and fh and not gh & fh:
        return False
    if g.first is not None and f.first is not None and f.last is not None and g.last is not None:
        if g.first > f.last + TOLERANCE_NS:
            return False
        return f.first - g.last <= f.max_gap
    if star and not named:
        for path, (g_lo, _) in g.lines.items():
            if path in f.lines and g_lo > f.lines[path][1] + NEAR_LINES:
                return False
    return True


def _order_key(n: _Node) -> tuple[int, int]:
    return (n.first if n.first is not None else 1 << 62, n.m.first_pos)


def _shown_key(n: _Node) -> tuple[int, int]:
    """The order of lists a person reads (``Then:``, consequences, contributing): by the first time each
    finding shows (``Finding.first_seen``, its supporting lines included, as the tables print it)."""
    first = n.m.finding.first_seen
    return (first if first is not None else 1 << 62, n.m.first_pos)


def _pick_root(pool: list[_Node]) -> _Node:
    best = max(n.strength for n in pool)
    league = [n for n in pool if n.strength >= best - LEAGUE]
    if len(league) > 1 and all(n.first is not None for n in league):
        return min(league, key=lambda n: (_order_key(n), -n.strength))
    return max(pool, key=lambda n: (n.strength, -_order_key(n)[0], -n.m.first_pos))


def _gap(a: int | None, b: int | None) -> str:
    if a is None or b is None:
        return ""
    secs = (b - a) / 1e9
    if abs(secs) < 1:
        return " within the same second"
    unit, val = ("s", secs) if abs(secs) < 120 else ("min", secs / 60) if abs(secs) < 7200 else ("h", secs / 3600)
    return f" {val:.0f} {unit} later" if secs > 0 else f" {-val:.0f} {unit} earlier"


def _link_note(parent: _Node, child: _Node) -> str:
    note = f"follows {parent.sig_id}{_gap(parent.first, child.first)}"
    shared = parent.m.pids & child.m.pids
    if shared:
        note += f" (same pid {', '.join(map(str, sorted(shared)))})"
    return note


def _why_lost(loser: _Node, root: _Node) -> str:
    timed = loser.first is not None and root.first is not None
    if timed and loser.strength >= root.strength - LEAGUE and _order_key(root) < _order_key(loser):
        return f"happened after {root.sig_id}{_gap(root.first, loser.first).replace(' later', '')}"
    if loser.m.sig.priority < root.m.sig.priority:
        return (f"lower priority ({loser.m.sig.priority}) than {root.sig_id} ({root.m.sig.priority}) "
                f"and not its cause")
    if loser.m.finding.score < root.m.finding.score:
        return f"weaker evidence (score {loser.m.finding.score:.2f} vs {root.m.finding.score:.2f})"
    return f"as likely as {root.sig_id}, which comes first in the logs"


def _confidence(root: _Node, runners_up: list[_Node], consequences: list[_Node]) -> tuple[Confidence, str]:
    s = root.m.finding.score
    level = 2 if s >= 0.75 else 1 if s >= 0.5 else 0
    reason = ""
    sources = {e.origin.path for e in root.m.finding.evidence}
    corroborated = len(sources) > 1 or any(n.first is not None for n in consequences) or s >= 0.85
    if corroborated and level == 0:
        level = 1
    elif corroborated and level == 1 and s >= 0.6:
        level = 2
    if "*" in root.m.sig.consequence_of and level == 2:
        level = 1
        reason = f"{root.sig_id} is usually a symptom, and nothing in the logs shows what caused it"
    close = [n for n in runners_up if n.strength >= 0.9 * root.strength]
    if close and level > 0:
        level -= 1
        reason = f"{close[0].sig_id} explains the logs almost as well"
    if level == 0 and not reason:
        reason = f"the evidence is thin (score {s:.2f}); look for the kernel or scheduler log of that moment"
    return (Confidence.HIGH, Confidence.MEDIUM, Confidence.LOW)[2 - level], reason


def _where(f: Finding) -> str:
    parts = []
    if f.hosts:
        parts.append("host " + ", ".join(f.hosts[:3]) + (" …" if len(f.hosts) > 3 else ""))
    if f.gpus:
        parts.append("GPU " + ", ".join(f.gpus[:4]) + (" …" if len(f.gpus) > 4 else ""))
    if f.ranks:
        parts.append("rank " + ", ".join(map(str, f.ranks[:6])) + (" …" if len(f.ranks) > 6 else ""))
    return f" on {'; '.join(parts)}" if parts else ""


_RECOVERY = lazy_compile(r"recovery action changed from 0x[0-9a-fA-F]+ \([^)]*\) to 0x[0-9a-fA-F]+ \(([^)]+)\)")


def _driver_verdict(nodes: Sequence[_Node]) -> str | None:
    """The recovery action the driver asked for last (Xid 154), if any finding shows one."""
    found: tuple[int, str] | None = None
    for n in nodes:
        for e in n.m.finding.evidence:
            m = _RECOVERY.search(e.text)
            if m and (found is None or (e.ts or 0) >= found[0]):
                found = (e.ts or 0, m.group(1))
    return found[1] if found else None


#: Detectors whose sentence says which rank stopped or what the ranks disagreed about.
_CROSS_RANK = ("rank-behind", "nccl-desync", "hang-stack")


def _cross_rank_sentence(f: Finding) -> str:
    """The cross-rank comparison behind a finding, as a sentence ("Rank 1 fell behind: …")."""
    for e in f.evidence:
        if e.kind == "derived" and e.attrs.get("detector") in _CROSS_RANK:
            sentence = e.message.split("] ", 1)[-1].rstrip(".")
            return sentence[:1].upper() + sentence[1:]
    return ""


def _summary(root: _Node, consequences: list[_Node], reason: str, events: Sequence[Event],
             culprits: str = "") -> str:
    from forensics.units import when as human_time

    f = root.m.finding
    timed = [e for p in root.m.anchors if (e := events[p]).ts is not None]
    own = [e for e in timed if root.first is None or (e.ts or 0) >= root.first]  # not the recording's context
    first = min(own or timed, key=lambda e: e.ts or 0, default=None)
    when = f" at {human_time(first)}" if first is not None else ""
    # the culprits, not every GPU the evidence names ("on rank 5 (GPU 0000:c1:00.0)", ": pid 576419 (python)")
    where = (f": {culprits}" if culprits.startswith("pid") else f" on {culprits}") if culprits else _where(f)
    text = f"{f.title}{where}{when}."
    for detail in (oom_sentence(f.facts), stop_code_sentence(f.facts), _cross_rank_sentence(f)):
        if detail:
            text += f" {detail}."
    if consequences:
        text += " Then: " + " → ".join(n.sig_id for n in consequences) + "."
    action = _driver_verdict([root, *consequences])
    if action and action.lower() != "none":
        text += f" The driver's own verdict (Xid 154): {action}."
    if reason:
        text += f" Not certain: {reason}."
    return text


_GLOO = lazy_compile(r"\bgloo\b|ProcessGroupGloo", re.I)
_NCCL = lazy_compile(r"NCCL")


def _backend_title(f: Finding) -> None:
    """A title that names NCCL, for a finding whose own lines are gloo's and never NCCL's (a collective
    timing out on gloo matches the same signature): the title names the backend the logs show."""
    if "NCCL" not in f.title:
        return
    texts = [e.text for e in f.evidence if e.kind != "derived"]
    if texts and any(_GLOO.search(t) for t in texts) and not any(_NCCL.search(t) for t in texts):
        f.title = f.title.replace("NCCL", "gloo")


def decide(matches: Sequence[Match], events: Sequence[Event], healthy_note: str = "",
           healthy_confidence: Confidence = Confidence.MEDIUM,
           samples: Sequence[MetricSample] = (),
           identity: IdentityTable | None = None) -> tuple[list[Finding], Verdict]:
    """Order fired signatures into the verdict. Returns the findings (root first, then
    consequences, then the rest) with their roles and notes set, and the verdict (with its
    culprit line, :mod:`forensics.match.blame`, for multi-rank / multi-GPU jobs)."""
    run = scope(events)
    nodes = [_node(m, events, run) for m in matches]
    for m in matches:
        _backend_title(m.finding)
    risks = [n for n in nodes if n.m.sig.risk or n.m.risk_only]
    causes = [n for n in nodes if not (n.m.sig.risk or n.m.risk_only)]
    for n in risks:
        n.m.finding.role = Role.CONTRIBUTING
        n.m.finding.risk = True
        only = f" (only its risk evidence matched: {', '.join(n.m.risk_only)})" if n.m.risk_only else ""
        n.m.finding.note = n.m.finding.note or f"a risk, not a cause on its own{only}"
    if not causes:
        note = healthy_note
        if risks:
            note += " Risks found: " + ", ".join(dict.fromkeys(n.sig_id for n in risks)) + "."
        verdict = Verdict(None, healthy_confidence, note.strip(), contributing=[n.m.finding for n in risks])
        return [n.m.finding for n in sorted(risks, key=_order_key)], verdict

    edges = {id(g): [f for f in causes if f is not g and _explains(g, f)] for g in causes}
    explained = {id(f) for g in causes for f in edges[id(g)]}
    later: dict[int, _Node] = {}  # stale finding id -> the later, comparable incident
    before: dict[int, _Node] = {}  # findings of the recording's context only
    for n in causes:
        if n.last is None or edges[id(n)]:
            continue
        newer = [d for d in causes if d.first is not None and d.first - n.last > STALE_NS
                 and d.strength >= STALE_STRENGTH * n.strength]
        if newer:
            later[id(n)] = max(newer, key=lambda d: d.first or 0)
    stale = set(later)
    for n in causes:  # a finding made only of the kernel log from before the recording: context
        if run.context and all(run.is_context(events[p]) for p in n.m.anchors) and \
                any(not all(run.is_context(events[p]) for p in d.m.anchors) for d in causes):
            stale.add(id(n))
            before[id(n)] = n
    candidates = [n for n in causes if id(n) not in stale] or causes
    pool = [n for n in candidates if id(n) not in explained] or candidates
    root = _pick_root(pool)

    reached: dict[int, _Node] = {}  # consequence id -> parent
    frontier = [root]
    while frontier:
        nxt = []
        for g in frontier:
            for f in edges[id(g)]:
                if f is not root and id(f) not in reached:
                    reached[id(f)] = g
                    nxt.append(f)
        frontier = nxt
    consequences = sorted((n for n in causes if id(n) in reached), key=_shown_key)

    root.m.finding.role = Role.ROOT_CAUSE
    root.m.finding.note = (f"root cause; explains {len(consequences)} other finding(s)" if consequences
                           else "root cause")
    for n in consequences:
        n.m.finding.role = Role.CONSEQUENCE
        n.m.finding.note = _link_note(reached[id(n)], n)
    ruled_out: list[tuple[str, str]] = []
    side: list[_Node] = []
    runners_up: list[_Node] = []
    for n in sorted(causes, key=lambda n: -n.strength):
        if n is root or id(n) in reached:
            continue
        n.m.finding.role = Role.CONTRIBUTING
        parents = [g for g in causes if n in edges[id(g)]]
        if id(n) in before:
            why = "only in the kernel log from before this recording began (another run's, context)"
        elif id(n) in stale:
            d = later[id(n)]
            gap = ((d.first or 0) - (n.last or 0)) / 3.6e12
            why = f"an earlier, separate incident ({gap:.1f} h before {d.sig_id})"
        elif parents:
            n.m.finding.note = _link_note(parents[0], n)
            side.append(n)
            continue
        else:
            why = _why_lost(n, root)
            runners_up.append(n)
        n.m.finding.note = f"ruled out: {why}"
        ruled_out.append((n.sig_id, why))

    confidence, reason = _confidence(root, runners_up, consequences)
    ordered = [root, *consequences, *sorted(side + risks, key=_order_key),
               *[n for n in sorted(causes, key=lambda n: -n.strength)
                 if n is not root and id(n) not in reached and n not in side]]
    verdict = Verdict(
        root_cause=root.m.finding,
        confidence=confidence,
        summary="",
        consequences=[n.m.finding for n in consequences],
        contributing=[n.m.finding for n in sorted(risks + side, key=_shown_key)],
        ruled_out=ruled_out,
        t0=root.first,
    )
    # evidence stays in time order; the culprit line names its basis
    verdict.blame = blame(verdict, events, samples, identity, run.context)
    verdict.summary = _summary(root, consequences, reason, events, verdict.blame.culprits if verdict.blame else "")
    return [n.m.finding for n in ordered], verdict
