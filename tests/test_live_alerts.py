"""forensics/live/alerts.py: one alert per incident, follow-ups when it gets worse or recovers, a rate limit."""

from __future__ import annotations

from forensics.events import Event, Origin, Severity, TsSource
from forensics.findings import Blame, Confidence, Finding, Role, Verdict
from forensics.live.alerts import Incidents, RateLimit, alert_key, candidate

T0 = 1_790_000_000 * 10**9


def _event(msg: str, ts: int = T0) -> Event:
    return Event(ts=ts, ts_source=TsSource.EXACT, source="stderr", kind="traceback", message=msg,
                 origin=Origin("run/stderr.log", 12, 400), severity=Severity.ERROR)


def _verdict(sig: str | None, ranks: list[int] = (), conf: Confidence = Confidence.HIGH,  # type: ignore[assignment]
             consequences: list[str] = (), risk: bool = False) -> Verdict:  # type: ignore[assignment]
    if sig is None:
        return Verdict(None, Confidence.HIGH, "nothing")
    f = Finding(sig, f"title of {sig}", "framework", 0.8, [_event(f"evidence of {sig}")], role=Role.ROOT_CAUSE,
                remedy=[f"first remedy of {sig}", "second"], risk=risk)
    blame = Blame(f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}", "the others", "why",
                  culprit_ranks=list(ranks)) if ranks else None
    cons = [Finding(c, c, "framework", 0.5, [], role=Role.CONSEQUENCE) for c in consequences]
    return Verdict(f, conf, f"summary of {sig}", consequences=cons, blame=blame)


def test_candidate_carries_the_verdict_culprit_evidence_and_first_remedy() -> None:
    a = candidate(_verdict("torch-cuda-oom", [1]), T0 + 2 * 10**9)
    assert a is not None
    assert a.key == "torch-cuda-oom|rank:1"
    assert a.culprit.startswith("Culprit: rank 1")
    assert a.evidence[0]["origin"] == "run/stderr.log:12"
    assert a.remedy == "first remedy of torch-cuda-oom"
    assert a.detected_after_s == 2.0
    line = a.line()
    assert "\n" not in line and "torch-cuda-oom" in line and "rank 1" in line
    assert candidate(_verdict(None), T0) is None
    assert candidate(_verdict("memory-margin", risk=True), T0) is None  # a risk is not told


def test_one_alert_per_incident_then_worse_then_recovered() -> None:
    inc = Incidents(recover_s=0.0, follow_up_s=0.0)
    first = inc.update(_verdict("silent-worker-stall", [6]), T0, now=0.0)
    assert [(a.kind, a.key) for a in first] == [("new", "silent-worker-stall|rank:6")]
    assert inc.update(_verdict("silent-worker-stall", [6]), T0, now=1.0) == []  # the same: said once
    worse = inc.update(_verdict("silent-worker-stall", [6, 7]), T0, now=2.0)
    assert [(a.kind, a.incident, a.previous) for a in worse] == [("worse", first[0].incident, first[0].id)]
    assert inc.update(_verdict(None), T0, now=3.0) == []  # one miss is not a recovery
    rec = inc.update(_verdict(None), T0, now=40.0)
    assert [(a.kind, a.incident) for a in rec] == [("recovered", first[0].incident)]
    assert inc.open == {}


def test_other_culprits_are_another_incident_and_a_consequence_is_superseded() -> None:
    inc = Incidents(recover_s=0.0)
    a = inc.update(_verdict("torch-cuda-oom", [1]), T0, now=0.0)
    b = inc.update(_verdict("torch-cuda-oom", [3]), T0, now=1.0)
    assert a[0].incident != b[0].incident
    c = inc.update(_verdict("xid-79-fallen-off-bus", consequences=["torch-cuda-oom"]), T0, now=2.0)
    assert c[0].kind == "new" and sorted(c[0].supersedes) == sorted([a[0].incident, b[0].incident])
    assert list(inc.open) == [alert_key("xid-79-fallen-off-bus", {"rank": [], "gpu": [], "host": []})]


def test_a_stall_is_held_while_the_run_says_it_pauses() -> None:
    inc = Incidents()
    assert inc.update(_verdict("silent-worker-stall", [2]), T0, now=0.0, hold=True) == []
    assert [a.kind for a in inc.update(_verdict("torch-cuda-oom", [2]), T0, now=1.0, hold=True)] == ["new"]
    assert [a.kind for a in inc.update(_verdict("silent-worker-stall", [2]), T0, now=2.0)] == ["new"]


def test_rate_limit_marks_what_it_holds_back() -> None:
    inc = Incidents(rate=RateLimit(burst=2, refill_s=60.0))
    told = [inc.update(_verdict(f"sig-{i}"), T0, now=float(i))[0] for i in range(4)]
    assert [a.suppressed for a in told] == [None, None, "rate limit", "rate limit"]
    assert inc.rate.take(now=200.0)  # refilled after a while
