"""``forensics eval CORPUS_DIR``: score the analyzer on labelled cases.

A case is a folder with ``case.toml`` (``primary``, ``also``, optional ``accept``,
``confidence``) and log files; only the log files are analyzed (tests/corpus/README.md).
Reported: top-1 accuracy, top-3 (the primary among the first three findings), found at
all, accuracy on ``thread-confirmed`` cases, false alarms on ``none`` cases, the confusions, and the
culprit score over the cases whose ``[culprit]`` table names who is to blame (the verdict's culprit line
names the same rank, GPU, node or process: :mod:`forensics.evaluation.culprit_score`).
"""

from __future__ import annotations

import sys
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from forensics.errors import ForensicsError, UsageError
from forensics.evaluation.culprit_score import culprit_key, describe_key, label_key, same_culprit

__all__ = ["CaseResult", "EvalReport", "evaluate", "find_cases", "run_eval"]


@dataclass
class CaseResult:
    case: str
    primary: str
    accept: list[str]
    predicted: str  # root-cause id or "none"
    confidence: str
    findings: list[str]
    thread_confirmed: bool
    error: str = ""
    culprit_want: str = ""  # the case's [culprit] label, described ("" when it has none)
    culprit_got: str = ""
    culprit_ok: bool | None = None  # None: the case carries no [culprit]

    @property
    def correct(self) -> bool:
        return not self.error and (self.predicted == self.primary or self.predicted in self.accept)

    @property
    def top3(self) -> bool:
        if self.primary == "none":
            return self.correct
        ranked = ([self.predicted] if self.predicted != "none" else []) + \
            [f for f in self.findings if f != self.predicted]
        return self.correct or self.primary in ranked[:3] or any(a in ranked[:3] for a in self.accept)

    @property
    def found(self) -> bool:
        return self.correct or self.primary in self.findings


@dataclass
class EvalReport:
    results: list[CaseResult] = field(default_factory=list)

    def _rate(self, cases: Sequence[CaseResult], attr: str) -> tuple[int, int]:
        return sum(bool(getattr(r, attr)) for r in cases), len(cases)

    @property
    def top1(self) -> tuple[int, int]:
        return self._rate(self.results, "correct")

    @property
    def top3(self) -> tuple[int, int]:
        return self._rate(self.results, "top3")

    @property
    def found(self) -> tuple[int, int]:
        return self._rate(self.results, "found")

    @property
    def confirmed(self) -> tuple[int, int]:
        return self._rate([r for r in self.results if r.thread_confirmed], "correct")

    @property
    def false_alarms(self) -> tuple[int, int]:
        none_cases = [r for r in self.results if r.primary == "none"]
        return sum(not r.correct for r in none_cases), len(none_cases)

    @property
    def culprit(self) -> tuple[int, int]:
        """Cases with a ``[culprit]`` whose verdict names that culprit (forensics/evaluation/culprit_score.py)."""
        labelled = [r for r in self.results if r.culprit_ok is not None]
        return sum(bool(r.culprit_ok) for r in labelled), len(labelled)

    @property
    def misses(self) -> list[CaseResult]:
        return [r for r in self.results if not r.correct]


def find_cases(corpus: Path) -> list[Path]:
    """Case folders: ``corpus/cases/*`` or ``corpus/*`` holding a ``case.toml``
    (``corpus`` itself when it is one case)."""
    if (corpus / "case.toml").is_file():
        return [corpus]
    root = corpus / "cases" if (corpus / "cases").is_dir() else corpus
    return sorted(p for p in root.iterdir() if (p / "case.toml").is_file())


def _evaluate_case(folder: Path, signature_dirs: Sequence[Path]) -> CaseResult:
    from forensics.analysis import Options, analyze

    try:
        meta = tomllib.loads((folder / "case.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return CaseResult(folder.name, "?", [], "none", "", [], False, error=f"case.toml unreadable: {exc}")
    primary = str(meta.get("primary", "none"))
    accept = [str(a) for a in meta.get("accept", [])]
    confirmed = meta.get("confidence") == "thread-confirmed"
    logs = sorted(str(p) for p in folder.iterdir() if p.is_file() and p.name != "case.toml")
    try:
        analysis = analyze(logs, Options(signature_dirs=signature_dirs))
    except ForensicsError as exc:
        return CaseResult(folder.name, primary, accept, "none", "", [], confirmed, error=str(exc))
    v = analysis.verdict
    result = CaseResult(folder.name, primary, accept, v.root_cause_id or "none", str(v.confidence),
                        [f.signature for f in analysis.findings], confirmed)
    table = meta.get("culprit")
    if isinstance(table, dict):
        want, got = label_key(table), culprit_key(v.blame)
        result.culprit_want, result.culprit_got = describe_key(want), describe_key(got)
        result.culprit_ok = same_culprit(want, got)
    return result


def evaluate(corpus: Path, signature_dirs: Sequence[Path] = ()) -> EvalReport:
    """Analyze every case of ``corpus``."""
    if not corpus.is_dir():
        raise UsageError(f"{corpus}: not a directory of cases")
    from forensics.match import load_signatures

    load_signatures(signature_dirs)  # a broken signature file is one clear error, not 60 case errors
    return EvalReport([_evaluate_case(c, signature_dirs) for c in find_cases(corpus)])


def _pct(pair: tuple[int, int]) -> str:
    n, d = pair
    return f"{n}/{d} ({n / d:.0%})" if d else "0/0"


def print_report(report: EvalReport, verbose: bool = False, out: TextIO | None = None) -> None:
    w = (out or sys.stdout).write
    if verbose:
        for r in report.results:
            mark = "ok  " if r.correct else "MISS"
            extra = f"  error: {r.error}" if r.error else ""
            others = [f for f in r.findings if f != r.predicted][:4]
            blamed = "" if r.culprit_ok is None else (
                f"  culprit ok ({r.culprit_got})" if r.culprit_ok else
                f"  culprit MISS (want {r.culprit_want}, got {r.culprit_got or 'none'})")
            w(f"{mark} {r.case:<48} want {r.primary:<28} got {r.predicted:<28} {r.confidence:<6}"
              + (f"  also: {', '.join(others)}" if others else "") + blamed + extra + "\n")
        w("\n")
    w(f"cases:                 {len(report.results)}\n")
    w(f"top-1 accuracy:        {_pct(report.top1)}\n")
    w(f"top-3 accuracy:        {_pct(report.top3)}\n")
    w(f"primary found at all:  {_pct(report.found)}\n")
    w(f"thread-confirmed top-1: {_pct(report.confirmed)}\n")
    w(f"false alarms on none:  {_pct(report.false_alarms)}\n")
    if report.culprit[1]:
        w(f"culprit score:         {_pct(report.culprit)}  (cases with a [culprit])\n")
    confusions = Counter((r.primary, r.predicted) for r in report.misses)
    if confusions:
        w("confusions (wanted → got):\n")
        for (want, got), n in confusions.most_common():
            w(f"  {want} → {got}" + (f"  ×{n}" if n > 1 else "") + "\n")


def run_eval(corpus: Path, signature_dirs: Sequence[Path] = (), verbose: bool = False) -> int:
    """The ``eval`` command: 0 when every case ran, 1 when a case could not be analyzed."""
    report = evaluate(corpus, signature_dirs)
    if not report.results:
        raise UsageError(f"{corpus}: no case folders (each needs a case.toml)")
    print_report(report, verbose)
    return 1 if any(r.error for r in report.results) else 0
