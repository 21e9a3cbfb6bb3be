"""After the verdict: the post-mortem report (``forensics report``: Markdown, HTML, JSON), the
comparison of a good and a bad run (``forensics diff``) and the redacted case archive
(``forensics pack``). Everything reads inputs through :mod:`forensics.analysis`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forensics.analysis import Analysis
    from forensics.ingest.environment import BundleFacts

__all__ = ["FORMATS", "render_report", "write_report"]

FORMATS = ("md", "html", "json")


def render_report(analysis: Analysis, facts: list[BundleFacts], fmt: str = "md") -> str:
    """The report of ``analysis`` (and the bundles' ``facts``) in ``fmt`` (``md``, ``html``, ``json``)."""
    from forensics.postmortem.model import build_report

    data = build_report(analysis, facts)
    if fmt == "json":
        from forensics.escape import finite, json_dumps

        notes: list[str] = []
        data = finite(data, notes)
        if notes:
            data["warnings"] = [*data.get("warnings", []),
                                *(f"not a finite number, written as null: {n}" for n in notes[:20])]
        return json_dumps(data, indent=2) + "\n"
    if fmt == "html":
        from forensics.postmortem.html_report import render_html

        return render_html(analysis, data)
    from forensics.postmortem.markdown import render_markdown

    return render_markdown(analysis, data)


def write_report(analysis: Analysis, paths: Sequence[str], directory: Path, fmt: str = "md") -> Path:
    """Write the report of ``analysis`` (bundle facts read from ``paths``) into ``directory`` as
    ``forensics-report-<UTC time>.<fmt>``, never over an existing file; returns its path."""
    from forensics.analysis import bundle_facts

    text = render_report(analysis, bundle_facts(paths), fmt)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = directory / f"forensics-report-{stamp}.{fmt}"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"forensics-report-{stamp}-{n}.{fmt}"
    with path.open("x", encoding="utf-8") as fh:
        fh.write(text)
    return path
