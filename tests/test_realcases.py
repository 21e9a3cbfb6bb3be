"""tests/realcases and tests/realcases2: every harvested case folder is well formed, the halves are
disjoint, no thread is used twice, and each half holds its score.

The first-look figures (taken before any fix) are in each set's README; the bars here are set after the
fixes, as regression guards (the held-out halves are scored, never read).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
REAL = TESTS / "realcases"
SETS = (REAL, TESTS / "realcases2")
HALVES = ("dev", "heldout")
SIGNATURES_MD = TESTS.parent / "SIGNATURES.md"
REQUIRED = {"id": str, "primary": str, "also": list, "accept": list, "source": str, "platform": str,
            "log_kinds": list, "confidence": str, "summary": str, "note": str}
PLATFORMS = {"linux", "windows", "wsl", "unknown"}
CONFIDENCES = {"thread-confirmed", "inferred"}


def _cases(half: str, root: Path = REAL) -> list[Path]:
    folder = root / half / "cases"
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


ALL = [c for root in SETS for h in HALVES for c in _cases(h, root)]
CULPRIT_KEYS = {"ranks": int, "gpus": str, "hosts": str, "pids": int}


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


@pytest.mark.parametrize("root", SETS, ids=[r.name for r in SETS])
def test_both_halves_hold_failures_and_healthy_logs(root: Path) -> None:
    for half in HALVES:
        cases = _cases(half, root)
        healthy = [c for c in cases if tomllib.loads((c / "case.toml").read_text())["primary"] == "none"]
        assert len(cases) >= 30, half
        assert len(healthy) >= 10 and len(cases) - len(healthy) >= 20, half


@pytest.mark.parametrize("case", ALL, ids=[f"{c.parents[2].name}/{c.parent.parent.name}/{c.name}" for c in ALL])
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
    culprit = data.get("culprit")
    if culprit is not None:  # who is to blame, where the thread or the log establishes it
        assert isinstance(culprit.get("basis"), str) and culprit["basis"].strip()
        named = {k: v for k, v in culprit.items() if k != "basis"}
        assert named and set(named) <= set(CULPRIT_KEYS), named
        for key, values in named.items():
            assert values and all(isinstance(v, CULPRIT_KEYS[key]) for v in values), (key, values)


def test_no_source_is_used_twice() -> None:
    seen: dict[str, Path] = {}
    for case in ALL:
        src = tomllib.loads((case / "case.toml").read_text())["source"].split("#")[0]
        assert src not in seen, (case.name, seen.get(src))
        seen[src] = case
    for other in (TESTS / "corpus" / "cases", TESTS / "heldout" / "cases"):
        clash = set(seen) & set(_sources(other))
        assert not clash, (other, sorted(clash))


#: Regression bars, set after fixes (each set's README has the first-look figures, taken before any fix:
#: realcases held-out 41/53 top-1 with 2/16 false alarms, dev 47/68 with 3/20; realcases2 held-out 38/48
#: with 0/16, dev 50/57 with 1/15). (set, half) -> (top-1 at least, false alarms at most).
BARS = {("realcases", "dev"): (63, 0), ("realcases", "heldout"): (49, 1),
        ("realcases2", "dev"): (54, 1), ("realcases2", "heldout"): (44, 0)}


@pytest.mark.slow
@pytest.mark.parametrize(("name", "half"), list(BARS), ids=[f"{n}/{h}" for n, h in BARS])
def test_half_holds_its_score(name: str, half: str) -> None:
    from forensics.evaluation.evaluate import evaluate

    report = evaluate(TESTS / name / half)
    assert not [r.error for r in report.results if r.error]
    top1, false_alarms = BARS[name, half]
    misses = [(r.case, r.primary, r.predicted) for r in report.misses]
    assert report.top1[0] >= top1, misses
    assert report.false_alarms[0] <= false_alarms, misses
