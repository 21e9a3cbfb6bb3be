"""tests/realcases: every harvested case folder is well formed and the halves are disjoint.

No score bar here on purpose: the first-look figures are recorded in tests/realcases/README.md
and a bar is added only after fixes (the held-out half must stay a fair test).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
REAL = TESTS / "realcases"
HALVES = ("dev", "heldout")
SIGNATURES_MD = TESTS.parent / "SIGNATURES.md"
REQUIRED = {"id": str, "primary": str, "also": list, "accept": list, "source": str, "platform": str,
            "log_kinds": list, "confidence": str, "summary": str, "note": str}
PLATFORMS = {"linux", "windows", "wsl", "unknown"}
CONFIDENCES = {"thread-confirmed", "inferred"}


def _cases(half: str) -> list[Path]:
    root = REAL / half / "cases"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


ALL = [c for h in HALVES for c in _cases(h)]


def _known_ids() -> set[str]:
    return set(re.findall(r"^- `([a-z0-9-]+)`", SIGNATURES_MD.read_text(), re.M))


def _half_of(case_id: str) -> str:
    """The split rule fixed before the analyzer ran (README): sha256 of the id, even -> dev."""
    return "dev" if int(hashlib.sha256(case_id.encode()).hexdigest(), 16) % 2 == 0 else "heldout"


def _sources(root: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for toml in root.glob("*/case.toml"):
        data = tomllib.loads(toml.read_text())
        if "source" in data:
            found[data["source"].split("#")[0]] = toml.parent
    return found


def test_both_halves_hold_failures_and_healthy_logs() -> None:
    for half in HALVES:
        cases = _cases(half)
        healthy = [c for c in cases if tomllib.loads((c / "case.toml").read_text())["primary"] == "none"]
        assert len(cases) >= 30, half
        assert len(healthy) >= 10 and len(cases) - len(healthy) >= 20, half
    assert len(ALL) >= 80


@pytest.mark.parametrize("case", ALL, ids=[f"{c.parent.parent.name}/{c.name}" for c in ALL])
def test_case_is_well_formed(case: Path) -> None:
    data = tomllib.loads((case / "case.toml").read_text())
    for key, kind in REQUIRED.items():
        assert isinstance(data.get(key), kind), key
    assert data["id"] == case.name
    assert _half_of(case.name) == case.parent.parent.name
    assert data["platform"] in PLATFORMS
    assert data["confidence"] in CONFIDENCES
    assert data["source"].startswith("https://")
    assert data["summary"].strip() and data["log_kinds"]
    known = _known_ids()
    assert data["primary"] == "none" or data["primary"] in known, data["primary"]
    for sid in data["also"] + data["accept"]:
        assert sid in known, sid
    assert data["primary"] not in data["also"] + data["accept"]
    logs = [p for p in case.iterdir() if p.is_file() and p.name != "case.toml"]
    assert logs, "no log file"
    for log in logs:
        text = log.read_text(encoding="utf-8")
        assert text.strip(), log.name
        assert "```" not in text, f"markdown fence left in {log.name}"


def test_no_source_is_used_twice() -> None:
    seen: dict[str, Path] = {}
    for case in ALL:
        src = tomllib.loads((case / "case.toml").read_text())["source"].split("#")[0]
        assert src not in seen, (case.name, seen.get(src))
        seen[src] = case
    for other in (TESTS / "corpus" / "cases", TESTS / "heldout" / "cases"):
        clash = set(seen) & set(_sources(other))
        assert not clash, (other, sorted(clash))


#: Regression bars, set after the fixes of this round (tests/realcases/README.md has the first-look
#: figures, taken before any fix: held-out 41/53 top-1 with 2/16 false alarms, dev 47/68 with 3/20).
BARS = {"dev": (59, 0), "heldout": (47, 1)}  # half -> (top-1 at least, false alarms at most)


@pytest.mark.parametrize("half", HALVES)
@pytest.mark.slow
def test_half_holds_its_score(half: str) -> None:
    from forensics.evaluation.evaluate import evaluate

    report = evaluate(REAL / half)
    assert not [r.error for r in report.results if r.error]
    top1, false_alarms = BARS[half]
    misses = [(r.case, r.primary, r.predicted) for r in report.misses]
    assert report.top1[0] >= top1, misses
    assert report.false_alarms[0] <= false_alarms, misses
