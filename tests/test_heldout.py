"""The held-out set of real logs (tests/heldout): analyzed cleanly, and its score is a regression bar.

The set measures the analyzer on incidents it was not developed against; its first score (29/30)
and what was fixed since are in tests/heldout/README.md. The shape tests below pin the log shapes
the set exposed, on the real files.
"""

from pathlib import Path

import pytest
from forensics.parsers.common.stream_text import split_body

from forensics.analysis import Analysis, Options, analyze
from forensics.evaluation.evaluate import evaluate

HELDOUT = Path(__file__).parent / "heldout"
CASES = sorted(p for p in (HELDOUT / "cases").iterdir() if (p / "case.toml").is_file())

#: The top-1 score after the fixes recorded in tests/heldout/README.md.
TOP1_BAR = 30


def _analyze(case: Path) -> Analysis:
    logs = sorted(str(p) for p in case.iterdir() if p.is_file() and p.name != "case.toml")
    return analyze(logs, Options())


def test_heldout_set_is_sized_as_documented() -> None:
    assert 20 <= len(CASES) <= 40
    assert sum(1 for c in CASES if 'primary = "none"' in (c / "case.toml").read_text()) >= 4


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_is_analyzed_without_warnings(case: Path) -> None:
    analysis = _analyze(case)
    warnings = list(analysis.warnings) + [w for s in analysis.sources for w in s.warnings]
    assert warnings == []
    assert all(s.events > 0 for s in analysis.sources), [(s.path, s.kind) for s in analysis.sources]


@pytest.mark.slow
def test_heldout_accuracy_bar() -> None:
    report = evaluate(HELDOUT)
    assert not [r.error for r in report.results if r.error]
    misses = [(r.case, r.primary, r.predicted) for r in report.misses]
    assert report.top1[0] >= TOP1_BAR, misses
    assert report.false_alarms[0] == 0, misses


def test_open_mpi_tag_output_prefix_is_peeled() -> None:
    """``mpirun --tag-output`` lines, with a stamp before the tag (MeshTransformer issue 38)."""
    body = split_body("2020-11-08 20:25:49 [1,0]<stdout>:az-scus-v100-2-worker-mgfopa:993:993 [3] "
                      "misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]")
    assert body.text.startswith("az-scus-v100-2-worker-mgfopa:993:993 [3] ")
    assert body.rank == 0 and body.key == "m0"
    assert body.stamp is not None and (body.stamp.year, body.stamp.hour, body.stamp.second) == (2020, 20, 49)
    tagged = split_body("[1,3]<stderr>:[rank3]: ncclRemoteError: A call failed")
    assert (tagged.text, tagged.rank) == ("ncclRemoteError: A call failed", 3)
    assert split_body("[1,2] plain text").text == "[1,2] plain text"


def test_mpirun_tagged_nccl_debug_file_is_read_as_nccl_debug() -> None:
    analysis = _analyze(HELDOUT / "cases" / "neg-meshtransformer38-libibverbs-mpirun-prefix")
    assert [s.kind for s in analysis.sources] == ["nccl-debug"]
    warns = [e for e in analysis.timeline.events if "Failed to open libibverbs" in e.message]
    assert len(warns) == 3
    assert analysis.verdict.root_cause_id is None


def test_windbg_analysis_body_without_banner() -> None:
    """A ``!analyze -v`` body pasted from KEY_VALUES_STRING on (tensorflow issue 62633)."""
    analysis = _analyze(HELDOUT / "cases" / "tf62633-windbg-bugcheck-133")
    assert [s.kind for s in analysis.sources] == ["windbg"]
    [bugcheck] = [e for e in analysis.timeline.events if e.kind == "bugcheck"]
    assert bugcheck.attrs["code"] == 0x133
    assert bugcheck.attrs["args"] == ["1", "1e00", "fffff8024c8fb320", "0"]
    assert analysis.verdict.root_cause_id == "windows-bugcheck"
