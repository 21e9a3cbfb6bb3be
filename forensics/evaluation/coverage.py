"""``forensics catalogs``: what each producer's catalogue covers, and (``--probes``) what its probes give.

Static figures per catalogue: messages, error- and warning-level ones, error-level ones that map to a
signature or only to a class, and the **coverage**: the share of error-level messages that can lead to a
verdict (mapped and matchable). With probes (``tests/data/catalogs/<producer>/probes.jsonl`` in a
checkout), each probe line goes through the whole analysis: how many get the verdict their probe expects,
and how many are called a failure at all.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from forensics.catalogs.model import Catalog, shipped

__all__ = ["CatalogFigures", "figures", "render_json", "render_markdown", "render_text"]

PROBES = Path(__file__).resolve().parents[2] / "tests" / "data" / "catalogs"


@dataclass
class CatalogFigures:
    producer: str
    title: str
    version: str
    commit: str
    messages: int
    error: int
    warning: int
    error_to_signature: int
    error_class_only: int
    error_matchable: int
    probes: int | None = None
    probes_expected: int | None = None
    probes_failure_found: int | None = None

    @property
    def coverage(self) -> float:
        return self.error_matchable / self.error if self.error else 1.0


def _figures(cat: Catalog, probes: bool) -> CatalogFigures:
    fig = CatalogFigures(cat.producer, cat.title, cat.version, cat.commit, **cat.counts())
    path = PROBES / cat.producer / "probes.jsonl"
    if probes and path.is_file():
        from forensics.evaluation.probes import run_probes
        from forensics.match import load_signatures

        outcomes = run_probes(path, cat.producer, load_signatures())
        fig.probes = len(outcomes)
        fig.probes_expected = sum(o.passed for o in outcomes)
        fig.probes_failure_found = sum(o.failure_found for o in outcomes)
    return fig


def figures(probes: bool = False) -> list[CatalogFigures]:
    return [_figures(cat, probes) for cat in shipped()]


def _pct(n: int | None, d: int | None) -> str:
    return "—" if n is None or not d else f"{n}/{d} ({100 * n / d:.0f} %)"


def render_text(rows: list[CatalogFigures]) -> str:
    lines = [f"{'producer':<11} {'version':<22} {'msgs':>5} {'error':>5} {'→sig':>5} {'class':>5} "
             f"{'coverage':>9}  probes: as expected / a failure"]
    for r in rows:
        probe = (f"  {_pct(r.probes_expected, r.probes)} / {_pct(r.probes_failure_found, r.probes)}"
                 if r.probes is not None else "")
        lines.append(f"{r.producer:<11} {r.version[:22]:<22} {r.messages:>5} {r.error:>5} {r.error_to_signature:>5} "
                     f"{r.error_class_only:>5} {100 * r.coverage:>8.0f}%{probe}")
    return "\n".join(lines) + "\n"


def render_markdown(rows: list[CatalogFigures]) -> str:
    out = ["| producer | pinned version | messages | error-level | → signature | class only | coverage | "
           "probes as expected | probes called a failure |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r.title} | {r.version} (`{r.commit[:12]}`) | {r.messages} | {r.error} | "
                   f"{r.error_to_signature} | {r.error_class_only} | {100 * r.coverage:.0f} % | "
                   f"{_pct(r.probes_expected, r.probes)} | {_pct(r.probes_failure_found, r.probes)} |")
    return "\n".join(out) + "\n"


def render_json(rows: list[CatalogFigures]) -> str:
    return json.dumps([{**asdict(r), "coverage": round(r.coverage, 4)} for r in rows], indent=2) + "\n"
