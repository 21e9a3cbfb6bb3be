"""One analysis's state is its own: ``--all`` goes through :class:`Options`, no caller changes a module
global, and two analyses in two threads at once give what each gives alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from forensics import analysis
from forensics.analysis import Options, analyze
from forensics.cli import main
from forensics.match import matcher


def _oom_log(path: Path, n: int = 40) -> Path:
    path.write_text("".join(f"[  {100 + i}.000000] Out of memory: Killed process {1000 + i} (python) "
                            f"total-vm:1000kB, anon-rss:{900 + i}kB, file-rss:0kB\n" for i in range(n)))
    return path


def _oom_finding(a: analysis.Analysis) -> Any:
    return next(f for f in a.findings if f.matched == 40)


def test_max_evidence_defaults_to_the_matchers_cap() -> None:
    assert Options().max_evidence == matcher.MAX_EVIDENCE


def test_max_evidence_is_an_option(tmp_path: Path) -> None:
    log = _oom_log(tmp_path / "oom.log")
    capped = _oom_finding(analyze([str(log)]))
    every = _oom_finding(analyze([str(log)], Options(max_evidence=None)))
    few = _oom_finding(analyze([str(log)], Options(max_evidence=4)))
    assert len(capped.evidence) == matcher.MAX_EVIDENCE
    assert len(every.evidence) == 40
    assert len(few.evidence) == 4 and few.evidence[0].message == every.evidence[0].message  # first and last
    assert few.evidence[-1].message == every.evidence[-1].message
    assert matcher.MAX_EVIDENCE == 16  # nobody changed it


def test_all_goes_through_options_and_leaves_the_matcher_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    log = _oom_log(tmp_path / "oom.log")
    seen: list[tuple[int | None, int]] = []
    real = analysis.analyze

    def spy(paths: Any, options: Options | None = None, *args: Any, **kwargs: Any) -> analysis.Analysis:
        assert options is not None
        seen.append((options.max_evidence, matcher.MAX_EVIDENCE))
        return real(paths, options, *args, **kwargs)

    monkeypatch.setattr(analysis, "analyze", spy)
    assert main(["analyze", "--all", "--quiet", "--format", "json", str(log)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert seen == [(None, 16)]
    assert any(f["matched"] == 40 and len(f["evidence"]) == 40 for f in out["findings"])
