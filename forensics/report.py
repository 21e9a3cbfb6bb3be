"""Render an :class:`~forensics.analysis.Analysis` for a person (terminal text)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forensics.analysis import Analysis

__all__ = ["iso", "render_text"]


def iso(ts: int | None) -> str | None:
    """UTC nanoseconds as ISO 8601 with microseconds, or None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts / 1e9, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def render_text(analysis: Analysis) -> str:
    v = analysis.verdict
    out: list[str] = []
    if v.root_cause is None:
        out.append(f"No failure found ({v.confidence} confidence). {v.summary}".rstrip())
    else:
        f = v.root_cause
        out.append(f"ROOT CAUSE: {f.signature} — {f.title}  [{v.confidence} confidence]")
        if v.summary:
            out.append(f"  {v.summary}")
        if f.explain:
            out.append("")
            out.append("  " + f.explain.strip().replace("\n", "\n  "))
        out.append("")
        out.append("  Evidence:")
        for e in f.evidence[:8]:
            out.append(f"    {iso(e.ts) or '(no time)':<28} {e.origin}  {e.message[:160]}")
        if v.consequences:
            out.append("")
            out.append("  Consequences:")
            for c in v.consequences:
                out.append(f"    - {c.signature}: {c.title}" + (f" ({c.note})" if c.note else ""))
        if f.remedy:
            out.append("")
            out.append("  What to do:")
            for i, step in enumerate(f.remedy, 1):
                out.append(f"    {i}. {step}")
    if v.contributing:
        out.append("")
        out.append("  Risks and contributing findings:")
        for c in v.contributing:
            out.append(f"    - {c.signature}: {c.title}" + (f" ({c.note})" if c.note else ""))
    if v.ruled_out:
        out.append("")
        out.append("  Ruled out:")
        for sig, why in v.ruled_out:
            out.append(f"    - {sig}: {why}")
    out.append("")
    out.append(f"Read {len(analysis.sources)} file(s): "
               + ", ".join(f"{s.path} ({s.kind}, {s.events} events)" for s in analysis.sources[:10])
               + (" …" if len(analysis.sources) > 10 else ""))
    for w in analysis.warnings[:20]:
        out.append(f"warning: {w}")
    return "\n".join(out) + "\n"
