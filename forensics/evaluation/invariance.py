"""``forensics eval --transforms``: does the verdict survive the way real logs arrive?

Every target (a labelled case folder, a recorded bundle, a loose sample log) is analyzed once as
it is, then once per transform of :mod:`forensics.evaluation.transforms` applied to its text files (or, for
``paste`` / ``paste-reversed``, to the whole case: its text logs as one paste); the *invariance rate* is the
share of transformed targets whose root cause is the untransformed one, the *culprit invariance* the share
that name the same culprit (:mod:`forensics.evaluation.culprit_score`; a relabelling transform says how it
names each rank's worker now).
A transform that does not apply to any file of a target (no line over 80 columns to wrap, not a
Windows export to localize) is not counted for it.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from forensics.errors import UsageError
from forensics.evaluation import transforms
from forensics.evaluation.culprit_score import culprit_key, describe_key, same_culprit
from forensics.findings import Blame

__all__ = ["InvarianceReport", "Target", "find_targets", "invariance", "run_invariance"]

#: Text files of a bundle a launcher would have wrapped (the recorded command's own output).
BUNDLE_STREAMS = ("stdout.log", "stderr.log")
_STREAM_KINDS = ("process-output", "nccl-debug", "slurm", "plaintext")
_TEXT_SUFFIXES = (".txt", ".log", ".out", ".err")
#: Transforms of a whole case: its text logs pasted as one (in order, reversed).
CASE_TRANSFORMS = ("paste", "paste-reversed")


@dataclass
class Target:
    """What is analyzed: ``files`` (paths) of a case, or one bundle directory."""

    name: str
    files: list[Path]
    bundle: Path | None = None
    healthy: bool = False


@dataclass
class Outcome:
    target: str
    transform: str
    baseline: str
    got: str
    culprit_want: str = ""  # the untransformed culprit, named as the transform names workers
    culprit_got: str = ""
    culprit_same: bool = True


@dataclass
class InvarianceReport:
    outcomes: list[Outcome] = field(default_factory=list)

    def rate(self, name: str | None = None) -> tuple[int, int]:
        rows = [o for o in self.outcomes if name is None or o.transform == name]
        return sum(o.got == o.baseline for o in rows), len(rows)

    def culprit_rate(self, name: str | None = None, named: bool = False) -> tuple[int, int]:
        """Transformed targets that name the untransformed culprit (any, where there was none); ``named``:
        only the targets whose untransformed verdict named one."""
        rows = [o for o in self.outcomes if (name is None or o.transform == name) and (o.culprit_want or not named)]
        return sum(o.culprit_same for o in rows), len(rows)

    @property
    def changed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.got != o.baseline or not o.culprit_same]


def _case_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name != "case.toml")


def find_targets(root: Path) -> list[Target]:
    """Case folders (``case.toml``), bundles (``manifest.json``) and loose text logs under ``root``."""
    import tomllib

    from forensics.evaluation.evaluate import find_cases

    if not root.exists():
        raise UsageError(f"{root}: no such file or directory")
    if root.is_file():
        return [Target(root.name, [root])]
    cases = find_cases(root)
    if cases:
        out = []
        for c in cases:
            try:
                healthy = tomllib.loads((c / "case.toml").read_text(encoding="utf-8")).get("primary") == "none"
            except (OSError, ValueError):
                healthy = False
            out.append(Target(c.name, _case_files(c), healthy=healthy))
        return out
    targets: list[Target] = []
    bundles = sorted(m.parent for m in root.rglob("manifest.json"))
    for b in bundles:
        targets.append(Target(str(b.relative_to(root)) if b != root else b.name, [], bundle=b))
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in _TEXT_SUFFIXES and not any(b in p.parents for b in bundles):
            targets.append(Target(str(p.relative_to(root)), [p]))
    return targets


def _analyze(paths: Sequence[str], signature_dirs: Sequence[Path]) -> tuple[str, object]:
    from forensics.analysis import Options, analyze

    analysis = analyze(list(paths), Options(signature_dirs=signature_dirs))
    return analysis.verdict.root_cause_id or "none", analysis


def _blame(analysis: object) -> Blame | None:
    verdict = getattr(analysis, "verdict", None)
    return getattr(verdict, "blame", None)


def _evidence_spans(analysis: object) -> dict[str, list[tuple[int, int]]]:
    """Per input path: the (line, nlines) of every finding's evidence."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for f in getattr(analysis, "findings", []):
        for e in f.evidence:
            if e.origin is not None and e.origin.line:
                spans.setdefault(e.origin.path, []).append((e.origin.line, max(1, e.origin.nlines)))
    return spans


def _kinds(analysis: object) -> dict[str, str]:
    return {s.path: s.kind for s in getattr(analysis, "sources", [])}


def chatter_pool(targets: Iterable[Target]) -> dict[str, list[tuple[str, str]]]:
    """Healthy lines by format, with the target they came from: NCCL INFO lines (of any target)
    for the process-output kinds, the whole text of healthy cases for the kind they were detected as."""
    from forensics.analysis import Options, parse_input
    from forensics.ingest.sources import expand_inputs

    pool: dict[str, list[tuple[str, str]]] = {}
    for t in targets:
        for path in t.files:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            nccl = [ln for ln in text.splitlines() if "NCCL INFO" in ln and "WARN" not in ln and "rror" not in ln]
            for kind in _STREAM_KINDS:
                pool.setdefault(kind, []).extend((t.name, ln) for ln in nccl)
            if t.healthy:
                for item in expand_inputs([str(path)]):
                    report, _, _ = parse_input(item, Options())
                    if report.kind not in _STREAM_KINDS:
                        pool.setdefault(report.kind, []).extend((t.name, ln) for ln in text.splitlines() if ln.strip())
    return pool


#: Formats a person pastes as text (a program's output, a kernel log); structured files are not pasted.
_PASTED = ("process-output", "nccl-debug", "slurm", "plaintext", "dmesg", "dmesg-ctime", "dmesg-iso", "dmesg-delta",
           "syslog", "journalctl", "slurm-daemon", "stack-dumps", "py-spy", "faulthandler", "gdb")


def _paste(t: Target, name: str, tmp: Path, kinds: dict[str, str]) -> list[str] | None:
    """The case's text logs as one paste (in order, or reversed), the other files as they are."""
    if t.bundle is not None:
        return None
    texts = [p for p in t.files if kinds.get(str(p), "").startswith(_PASTED) and b"\x00" not in p.read_bytes()[:4096]]
    if len(texts) < 2:
        return None
    order = list(reversed(texts)) if name == "paste-reversed" else texts
    joined = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in order)
    (tmp / "paste.txt").write_bytes(joined)
    out = [str(tmp / "paste.txt")]
    for p in t.files:
        if p not in texts:
            (tmp / p.name).write_bytes(p.read_bytes())
            out.append(str(tmp / p.name))
    return out


def _rewrite(t: Target, name: str, tmp: Path, spans: dict[str, list[tuple[int, int]]], kinds: dict[str, str],
             pool: dict[str, list[tuple[str, str]]], seed: int, base: Blame | None = None,
             renamed: dict[int, dict[str, str]] | None = None) -> list[str] | None:
    """Write ``t`` transformed by ``name`` under ``tmp``; the paths to analyze, or None when nothing changed.
    ``base``: the untransformed culprit line; ``renamed`` collects how the transform names workers."""
    if name in CASE_TRANSFORMS:
        return _paste(t, name, tmp, kinds)
    culprits = list(base.culprit_ranks) if base is not None else []
    bystander = max(base.victim_ranks) if base is not None and base.victim_ranks else None
    renamed = renamed if renamed is not None else {}
    changed = False
    if t.bundle is not None:
        dest = tmp / t.bundle.name
        shutil.copytree(t.bundle, dest)
        for i, stream in enumerate(BUNDLE_STREAMS):
            src = t.bundle / stream
            if not src.is_file():
                continue
            raw = src.read_bytes()
            key = str(src)
            info = transforms.FileInfo(stream, kinds.get(key, ""), spans.get(key, []), i,
                                       [ln for who, ln in pool.get(kinds.get(key, ""), []) if who != t.name],
                                       in_bundle=True, culprits=culprits, bystander=bystander)
            new = transforms.apply(name, raw, info, seed)
            renamed.update(info.renamed)
            if new is None:
                continue
            (dest / stream).write_bytes(new)
            idx = t.bundle / stream.replace(".log", ".idx")
            if idx.is_file():
                moved = transforms.remap_receipts(idx.read_bytes(), raw, new)
                if moved is None:
                    (dest / idx.name).unlink()
                else:
                    (dest / idx.name).write_bytes(moved)
            changed = True
        return [str(dest)] if changed else None
    out: list[str] = []
    for i, src in enumerate(t.files):
        raw = src.read_bytes()
        key = str(src)
        info = transforms.FileInfo(src.name, kinds.get(key, ""), spans.get(key, []), i,
                                   [ln for who, ln in pool.get(kinds.get(key, ""), []) if who != t.name],
                                   culprits=culprits, bystander=bystander)
        new = None if b"\x00" in raw[:4096] else transforms.apply(name, raw, info, seed)
        renamed.update(info.renamed)
        dest = tmp / src.name
        dest.write_bytes(raw if new is None else new)
        changed |= new is not None
        out.append(str(dest))
    return out if changed else None


def invariance(roots: Sequence[Path], names: Sequence[str] | None = None, signature_dirs: Sequence[Path] = (),
               seed: int = 0, targets: Sequence[Target] | None = None) -> InvarianceReport:
    """Analyze every target under ``roots`` as it is and under each transform in ``names`` (all by default)."""
    from forensics.match import load_signatures

    chosen = expand_names(names)
    load_signatures(signature_dirs)
    if targets is None:
        targets = [t for r in roots for t in find_targets(r)]
    pool = chatter_pool(targets) if "interleave" in chosen else {}
    report = InvarianceReport()
    for t in targets:
        paths = [str(t.bundle)] if t.bundle is not None else [str(p) for p in t.files]
        baseline, analysis = _analyze(paths, signature_dirs)
        spans, kinds = _evidence_spans(analysis), _kinds(analysis)
        base = _blame(analysis)
        for name in chosen:
            renamed: dict[int, dict[str, str]] = {}
            with tempfile.TemporaryDirectory(prefix="forensics-inv-") as d:
                rewritten = _rewrite(t, name, Path(d), spans, kinds, pool, seed, base, renamed)
                if rewritten is None:
                    continue
                got, after = _analyze(rewritten, signature_dirs)
            # the same worker, by its old name (the message still names the rank) or its new one (its node)
            want, have = culprit_key(base, renamed), culprit_key(_blame(after))
            same = same_culprit(want, have) or (bool(renamed) and same_culprit(culprit_key(base), have))
            report.outcomes.append(Outcome(t.name, name, baseline, got, describe_key(want), describe_key(have), same))
    return report


def expand_names(names: Sequence[str] | None) -> list[str]:
    """The transforms asked for: all by default; ``culprit`` stands for :data:`transforms.CULPRIT_TRANSFORMS`."""
    known = [*transforms.names(), *CASE_TRANSFORMS]
    chosen: list[str] = []
    for n in names or known:
        for name in (transforms.CULPRIT_TRANSFORMS if n == "culprit" else (n,)):
            if name not in chosen:
                chosen.append(name)
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise UsageError(f"--transforms: unknown {', '.join(unknown)} (known: culprit, {', '.join(known)})")
    return chosen


def _pct(pair: tuple[int, int]) -> str:
    n, d = pair
    return f"{n}/{d} ({100 * n / d:.1f}%)" if d else "0/0"


def print_invariance(report: InvarianceReport, names: Sequence[str], verbose: bool = False,
                     out: TextIO | None = None) -> None:
    w = (out or sys.stdout).write
    if verbose:
        for o in report.changed:
            what = f"{o.baseline} → {o.got}" if o.got != o.baseline else o.baseline
            blamed = "" if o.culprit_same else f"  culprit {o.culprit_want or '-'} → {o.culprit_got or '-'}"
            w(f"CHANGED {o.transform:<17} {o.target:<52} {what}{blamed}\n")
        w("\n")
    w("invariance (same root cause / same culprit as untransformed):\n")
    for name in [*names, None]:
        w(f"  {name or 'overall':<17} {_pct(report.rate(name)):<18} culprit {_pct(report.culprit_rate(name)):<18} "
          f"where one was named {_pct(report.culprit_rate(name, named=True))}\n")


def run_invariance(roots: Sequence[Path], names: Sequence[str] | None, signature_dirs: Sequence[Path] = (),
                   verbose: bool = False, seed: int = 0) -> int:
    """The ``eval --transforms`` command: 0 when every transformed target kept its root cause, else 1."""
    chosen = expand_names(names)
    report = invariance(roots, chosen, signature_dirs, seed)
    if not report.outcomes:
        raise UsageError("no transform applied to any target")
    print_invariance(report, chosen, verbose)
    return 0 if not report.changed else 1
