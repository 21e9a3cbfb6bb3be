"""Correlation (counts within a timespan per group, ordered sequences), windows,
excludes, supporting evidence and the score."""

from matchkit import by_id, ev, fixture_signatures, run

from forensics.match.matcher import MAX_EVIDENCE, score

BURST = fixture_signatures("xid-burst")
ORDERED = fixture_signatures("aer-then-link-down")


def _xid13(t: float | None, gpu: str = "0000:3b:00.0") -> object:
    return ev("NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception", kind="xid", t=t, gpu=gpu)


def test_event_count_needs_count_within_timespan() -> None:
    fired, _ = run([_xid13(0), _xid13(20), _xid13(50)], BURST)
    assert [f.signature for f in fired] == ["xid-burst"]
    spread, _ = run([_xid13(0), _xid13(70), _xid13(140)], BURST)
    assert "xid-burst" not in by_id(spread)  # (the Xids alone are an unrecognized-failure here)


def test_event_count_groups_by_gpu() -> None:
    mixed = [_xid13(0, "a"), _xid13(1, "b"), _xid13(2, "a"), _xid13(3, "b")]
    assert "xid-burst" not in by_id(run(mixed, BURST)[0])
    three_on_a = mixed + [_xid13(4, "a")]
    found = by_id(run(three_on_a, BURST)[0])["xid-burst"]
    assert found.gpus == ["a"] and found.matched == 3


def test_event_count_without_times_counts_everything() -> None:
    assert len(run([_xid13(None), _xid13(None), _xid13(None)], BURST)[0]) == 1


def test_temporal_order_with_and_without_times() -> None:
    aer = "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received"
    down = "pcieport 0000:00:01.0: Link Down"
    assert run([ev(aer, t=0), ev(down, t=2)], ORDERED)[0]
    assert not run([ev(aer, t=2), ev(down, t=0)], ORDERED)[0]
    assert not run([ev(aer, t=0), ev(down, t=60)], ORDERED)[0]  # outside the 10 s timespan
    # No times: file order decides.
    assert run([ev(aer, line=10), ev(down, line=11)], ORDERED)[0]
    assert not run([ev(down, line=10), ev(aer, line=11)], ORDERED)[0]


def test_excludes_inside_their_window_suppress_the_anchor() -> None:
    sigs = fixture_signatures("xid-45-preemptive-cleanup")
    xid45 = "NVRM: Xid (PCI:0000:61:00): 45, pid=1496200, name=python, Ch 0000000a"
    assert not run([ev("KeyboardInterrupt", t=0), ev(xid45, t=5)], sigs)[0]
    assert run([ev("KeyboardInterrupt", t=0), ev(xid45, t=300)], sigs)[0]  # outside -30s..+30s
    # Untimed: the window cannot be checked, so the exclusion holds.
    assert not run([ev("KeyboardInterrupt"), ev(xid45)], sigs)[0]
    # Another host's Ctrl-C says nothing about this host.
    assert run([ev("KeyboardInterrupt", t=0, host="a"), ev(xid45, t=1, host="b")], sigs)[0]


def test_supporting_evidence_in_window_raises_the_score() -> None:
    sigs = fixture_signatures("xid-79-fallen-off-bus")
    xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."
    aer = "pcieport 0000:3a:00.0: AER: Uncorrected (Fatal) error received"
    alone = by_id(run([ev(xid, t=100)], sigs)[0])["xid-79-fallen-off-bus"]
    helped = by_id(run([ev(aer, t=95), ev(xid, t=100)], sigs)[0])["xid-79-fallen-off-bus"]
    late = by_id(run([ev(xid, t=100), ev(aer, t=105)], sigs)[0])["xid-79-fallen-off-bus"]  # window -1m..0
    assert alone.score == late.score == 0.8
    assert helped.score == 0.9
    assert len(helped.evidence) == 2 and len(late.evidence) == 1


def test_score_formula() -> None:
    assert score(1.0, 0.0, 1) == 0.8
    assert score(0.3, 0.0, 1) == 0.24
    assert score(1.0, 5.0, 1) == 1.0
    assert score(1.0, 0.0, 4) == 0.86
    assert score(1.0, 0.0, 100) == 0.9


def test_many_anchor_lines_keep_the_first_and_last_as_evidence() -> None:
    sigs = fixture_signatures("cuda-illegal-memory-access")
    events = [ev(f"[rank{i}] CUDA error: an illegal memory access was encountered", t=i) for i in range(40)]
    f = by_id(run(events, sigs)[0])["cuda-illegal-memory-access"]
    assert f.matched == 40 and len(f.evidence) == MAX_EVIDENCE
    assert f.evidence[0].message.startswith("[rank0]") and f.evidence[-1].message.startswith("[rank39]")
    assert f.first_seen is not None and f.last_seen is not None and f.last_seen - f.first_seen == 39 * 10**9
