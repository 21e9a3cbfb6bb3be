"""End-to-end: every recorded sample in samples/recorded/ gets the verdict its expected.toml states.

Each sample directory holds ``bundle/`` (what ``forensics record`` wrote on a real GPU), ``README.md``
(how it was made) and ``expected.toml``::

    root_cause = "torch-cuda-oom"        # or "none"
    consequences = ["..."]               # optional: ids that must be reported as consequences
    contributing = ["memory-margin"]     # optional: ids that must be reported as contributing
    findings = ["..."]                   # optional: ids that must appear among the findings at all
    evidence_kinds = ["xid", "traceback"]  # optional: event kinds the timeline must hold
    root_ranks = [1]                     # optional: the root finding's ranks, exactly
    culprit_ranks = [6, 7]               # optional: the verdict's culprit ranks (blame), exactly
    summary_contains = ["SeqNum 11"]     # optional: texts the verdict summary must hold
    source_kinds = ["flight-recorder"]   # optional: parser kinds some input must be read as
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from forensics.analysis import analyze

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "recorded"
CASES = sorted(p for p in SAMPLES.glob("*") if (p / "expected.toml").is_file())


def test_there_are_recorded_samples() -> None:
    assert CASES, "samples/recorded/ holds no sample with an expected.toml"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_recorded_sample_verdict(case: Path) -> None:
    expected = tomllib.loads((case / "expected.toml").read_text())
    analysis = analyze([str(case / "bundle")])
    want = expected["root_cause"]
    assert analysis.verdict.root_cause_id == (None if want == "none" else want), analysis.verdict.summary
    assert analysis.recordings, "the bundle's manifest was not read"
    found = {f.signature for f in analysis.findings}
    consequences = {f.signature for f in analysis.verdict.consequences}
    contributing = {f.signature for f in analysis.verdict.contributing}
    for sig in expected.get("consequences", []):
        assert sig in consequences, f"{sig} not among consequences {sorted(consequences)}"
    for sig in expected.get("contributing", []):
        assert sig in contributing, f"{sig} not among contributing {sorted(contributing)}"
    for sig in expected.get("findings", []):
        assert sig in found, f"{sig} not among findings {sorted(found)}"
    kinds = {e.kind for e in analysis.timeline.events}
    for kind in expected.get("evidence_kinds", []):
        assert kind in kinds, f"no {kind} event in the timeline ({sorted(kinds)})"
    if "root_ranks" in expected:
        assert analysis.verdict.root_cause is not None
        assert analysis.verdict.root_cause.ranks == expected["root_ranks"], analysis.verdict.summary
    if "culprit_ranks" in expected:
        assert analysis.verdict.blame is not None, analysis.verdict.summary
        assert analysis.verdict.blame.culprit_ranks == expected["culprit_ranks"], analysis.verdict.blame.line()
    for text in expected.get("summary_contains", []):
        assert text in analysis.verdict.summary, analysis.verdict.summary
    source_kinds = {s.kind for s in analysis.sources}
    for kind in expected.get("source_kinds", []):
        assert kind in source_kinds, f"no input read as {kind} ({sorted(source_kinds)})"
