"""``forensics lint-signatures DIR...``: check signature files and say what is wrong,
with file and line, quoting regexes as written.

Checks: TOML syntax, the schema (keys, types, values), regexes that do not compile,
anchors without literals, evidence names used twice, correlation names that do not
exist, ``risk`` on evidence that is not an anchor (and risk evidence that changes nothing);
then every ``[[examples]]`` text is run through the whole pipeline (with the shipped
signatures and those being linted) and must fire or stay silent as declared, and fire as a
risk or as a cause when the example says ``risk = true``/``false``.
Warnings (missing explain/remedy/examples) do not fail the run.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from forensics.errors import SignatureError, UsageError
from forensics.evaluation.examples import check_examples
from forensics.match.loader import Problem, check_file, shipped_paths, signature_files
from forensics.match.schema import Signature

__all__ = ["lint_paths", "run_lint"]


def _files(target: Path) -> list[Path]:
    if target.is_file():
        return [target]
    if not target.exists():
        raise UsageError(f"{target}: no such file or directory")
    try:
        return signature_files(target)
    except SignatureError as exc:
        raise UsageError(str(exc)) from None


def lint_paths(targets: Sequence[Path]) -> tuple[int, list[Problem]]:
    """(number of files checked, problems found) for files or directories of signatures."""
    files = [f for t in targets for f in _files(t)]
    problems: list[Problem] = []
    linted: dict[str, tuple[Signature, str]] = {}
    for path in files:
        sig, found = check_file(path)
        problems.extend(found)
        if sig is not None:
            if sig.id in linted and linted[sig.id][1] != str(path):
                problems.append(Problem(str(path), 1, f"id {sig.id!r} is also defined in {linted[sig.id][1]}"))
            linted[sig.id] = (sig, str(path))
    # Examples run with every signature that would be loaded alongside (shipped + linted).
    by_id: dict[str, Signature] = {}
    for shipped_path in shipped_paths():
        shipped, _ = check_file(shipped_path)
        if shipped is not None:
            by_id[shipped.id] = shipped
    by_id.update({sid: sig for sid, (sig, _) in linted.items()})
    everything = list(by_id.values())
    for sig, shown in linted.values():
        for outcome in check_examples(sig, everything):
            if not outcome.ok:
                ex = outcome.example
                if ex.match and outcome.fired:
                    want = "fire as a risk" if ex.risk else "fire as a cause (not only as a risk)"
                    got = "it fired as a cause" if ex.risk else "it fired only as a risk"
                else:
                    want = "fire" if ex.match else "stay silent"
                    got = "it stayed silent" if ex.match else "it fired"
                problems.append(Problem(shown, ex.line, f"example should {want} for {sig.id}, but {got}"))
    return len(files), sorted(problems, key=lambda p: (p.path, p.line))


def run_lint(dirs: Sequence[Path], out: TextIO | None = None) -> int:
    """Print every problem; exit status 1 when any is an error, else 0."""
    out = out or sys.stdout
    count, problems = lint_paths(dirs)
    for p in problems:
        out.write(f"{p}\n")
    errors = sum(not p.warning for p in problems)
    warnings = len(problems) - errors
    out.write(f"{count} signature file(s): {errors} error(s), {warnings} warning(s)\n")
    return 1 if errors else 0
