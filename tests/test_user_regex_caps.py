"""User signatures cannot hang an analysis (issue 14): ``lint-signatures`` (and the loader)
refuse nested quantifiers, and a (signature, evidence) pair whose regex timed out once is
skipped for the rest of the analysis instead of costing 0.2 s on each of 300 lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import Options, analyze
from forensics.evaluation.lint import lint_paths
from forensics.match.redos import nested_quantifier

SIG = """id = "{id}"
title = "A user signature"
category = "driver"
explain = "x"
remedy = ["y"]

[[evidence]]
name = "line"
role = "anchor"
literals = ["payload"]
regex = '''{regex}'''
"""


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(\d+)*x", r"(.*)*y", r"payload=(\s*\w+)+;", r"(?:[a-z]+-?)+!"])
def test_lint_flags_nested_quantifiers(tmp_path: Path, pattern: str) -> None:
    (tmp_path / "nested.toml").write_text(SIG.format(id="nested", regex=pattern))
    _, problems = lint_paths([tmp_path])
    errors = [str(p) for p in problems if not p.warning]
    assert any(f"{tmp_path}/nested.toml:11: evidence 'line': regex has a nested quantifier" in e
               and f"'{pattern}'" in e for e in errors), errors


@pytest.mark.parametrize("pattern", [r"(\w+\s)+done", r"(\d+\.)+\d+", r"(?:\d{1,3}\.){3}\d{1,3}", r"a+b+c*"])
def test_separated_repeats_are_not_flagged(pattern: str) -> None:
    assert nested_quantifier(pattern) is None


@pytest.mark.slow
def test_a_regex_that_timed_out_once_is_capped_for_the_analysis(tmp_path: Path) -> None:
    sigs = tmp_path / "sigs"
    sigs.mkdir()
    # (a|aa)+ backtracks exponentially but has no nested quantifier: the run-time cap is the guard.
    (sigs / "slow-user-regex.toml").write_text(SIG.format(id="slow-user-regex", regex=r"payload (a|aa)+b"))
    log = tmp_path / "app.log"
    log.write_text("".join(f"payload {'a' * (40 + i % 7)} line {i}\n" for i in range(300)))
    a = analyze([str(log)], Options(signature_dirs=[sigs]))
    timed_out = [w for w in a.warnings if "slow-user-regex" in w and "ran over" in w]
    assert len(timed_out) == 1 and timed_out[0].endswith("it is skipped for the rest of this analysis")
