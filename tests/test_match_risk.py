"""Per-evidence risk: an anchor with ``risk = true`` alone makes a contributing risk, never a
root cause; next to a failure anchor it does not anchor at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from matchkit import ev, timeline

from forensics.analysis import analyze
from forensics.evaluation.examples import analyze_text, check_examples
from forensics.evaluation.lint import lint_paths
from forensics.findings import Role
from forensics.match import diagnose, load_signatures
from forensics.match.loader import check_text
from forensics.match.schema import Evidence, Signature

SHIPPED = load_signatures()
CORPUS = Path(__file__).resolve().parent / "corpus" / "cases"


def _sig(**over: object) -> Signature:
    evidence = (Evidence(name="fatal", role="anchor", line=1, literals=("FATAL",)),
                Evidence(name="warned", role="anchor", line=2, literals=("WARN",), risk=True, weight=0.5))
    base: dict[str, object] = {"id": "s", "title": "t", "category": "hardware", "path": "s.toml",
                               "priority": 80, "evidence": evidence}
    base.update(over)
    return Signature(**base)  # type: ignore[arg-type]


def test_risk_evidence_alone_is_a_contributing_risk() -> None:
    findings, verdict = diagnose(timeline([ev("WARN link retrain", t=1), ev("WARN retrain again", t=2)]), [_sig()])
    [f] = findings
    assert f.risk and f.role == Role.CONTRIBUTING and verdict.root_cause is None
    assert f.note == "a risk, not a cause on its own (only its risk evidence matched: warned)"
    assert f.score == 0.42  # 0.8 × 0.5 + one more distinct line
    assert verdict.contributing == [f] and "Risks found: s." in verdict.summary


def test_a_failure_anchor_makes_it_a_cause_and_risk_lines_do_not_anchor_it() -> None:
    warn, fatal = ev("WARN link retrain", t=1), ev("FATAL link down", t=50)
    findings, verdict = diagnose(timeline([warn, fatal]), [_sig()])
    [f] = findings
    assert verdict.root_cause is f and not f.risk
    assert f.evidence == [fatal] and f.matched == 1 and f.score == 0.8
    assert f.first_seen == fatal.ts


def test_loader_checks_risk_on_evidence() -> None:
    head = 'id = "x"\ntitle = "t"\ncategory = "hardware"\n'
    anchor = '[[evidence]]\nname = "a"\nrole = "anchor"\nliterals = ["A"]\n'
    on_supporting = head + anchor + '[[evidence]]\nname = "b"\nrole = "supporting"\nliterals = ["B"]\nrisk = true\n'
    sig, problems = check_text(on_supporting, "x.toml", "x")
    assert sig is None
    assert "evidence 'b': 'risk' marks an anchor that alone shows a risk; supporting evidence cannot have it" in \
        [p.message for p in problems]
    not_bool = head + anchor + 'risk = "yes"\n'
    assert "evidence 'a': risk must be true or false" in [p.message for p in check_text(not_bool, "x.toml", "x")[1]]
    redundant = 'id = "x"\ntitle = "t"\ncategory = "hardware"\nrisk = true\n' + anchor + "risk = true\n"
    sig, problems = check_text(redundant, "x.toml", "x")
    assert sig is not None and sig.evidence[0].risk
    assert any(p.warning and "changes nothing" in p.message for p in problems)
    only_risk = head + anchor + "risk = true\n"
    assert any(p.warning and "every anchor is risk evidence" in p.message
               for p in check_text(only_risk, "x.toml", "x")[1])
    bad_example = head + anchor + '[[examples]]\nmatch = false\nrisk = true\ntext = "A"\n'
    assert "example 'risk' must be true or false, on an example with match = true" in \
        [p.message for p in check_text(bad_example, "x.toml", "x")[1]]


def test_lint_checks_that_an_example_fires_as_declared(tmp_path: Path) -> None:
    text = '''id = "pcie-aer"
title = "t"
category = "hardware"
priority = 82
explain = "e"
remedy = ["r"]

[[evidence]]
name = "storm"
role = "anchor"
risk = true
literals = ["Corrected error"]
min_count = 2

[[evidence]]
name = "fatal"
role = "anchor"
literals = ["Uncorrected"]

[[examples]]
match = true
risk = false
text = """
pcieport 0000:00:1c.5: AER: Corrected error received: 0000:00:1c.5
pcieport 0000:00:1c.5: AER: Corrected error received: 0000:00:1c.5
"""

[[examples]]
match = false
text = "hello"
'''
    (tmp_path / "pcie-aer.toml").write_text(text)
    _, problems = lint_paths([tmp_path])
    assert [p.message for p in problems] == [
        "example should fire as a cause (not only as a risk) for pcie-aer, but it fired only as a risk"]


@pytest.mark.slow
def test_shipped_risk_examples_fire_as_risks() -> None:
    declared = [(s, o) for s in SHIPPED for o in check_examples(s, SHIPPED) if o.example.risk is not None]
    assert {s.id for s, _ in declared} >= {"pcie-aer", "meta-device-checkpoint"}
    assert all(o.ok for _, o in declared), [(s.id, o.example.line) for s, o in declared if not o.ok]


def test_corrected_aer_storm_is_a_risk_and_the_verdict_stays_none() -> None:
    analysis = analyze([str(CORPUS / "neg-gsconnect1052-aer-rxerr-spam-ru-locale")])
    assert analysis.verdict.root_cause is None
    assert [f.signature for f in analysis.verdict.contributing] == ["pcie-aer"]
    assert analysis.verdict.contributing[0].risk


def test_uncorrectable_aer_after_a_corrected_storm_is_the_root_cause() -> None:
    corrected = "".join(f"[7478{i}.660366] pcieport 0000:00:02.0: AER: Corrected error received: id=0010\n"
                        for i in range(6))
    fatal = "[74889.542031] pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: id=0010\n"
    findings = analyze_text(corrected + fatal, SHIPPED)
    [aer] = [f for f in findings if f.signature == "pcie-aer"]
    assert aer.role == Role.ROOT_CAUSE and not aer.risk


def test_offload_notice_alone_is_a_meta_device_risk_not_memory_margin() -> None:
    text = ("WARNING:root:Some parameters are on the meta device because they were offloaded to the cpu.\n"
            "Loading checkpoint shards: 100%|██████████| 2/2 [00:03<00:00,  1.60s/it]\n")
    findings = analyze_text(text, SHIPPED)
    assert [(f.signature, f.role, f.risk) for f in findings] == [
        ("meta-device-checkpoint", Role.CONTRIBUTING, True)]
