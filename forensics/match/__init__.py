"""Signature matching and the verdict.

Scaffolding only: the engine (loader, matcher, correlation, verdict) lands with
issue 4. Until then no signature is loaded and every analysis has no findings.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forensics.findings import Confidence, Finding, Verdict
from forensics.timeline import Timeline

__all__ = ["diagnose", "load_signatures", "notable_literals"]


def load_signatures(extra_dirs: Sequence[Path] = ()) -> list[Any]:
    return []


def notable_literals(signatures: Sequence[Any]) -> tuple[bytes, ...]:
    return ()


def diagnose(timeline: Timeline, signatures: Sequence[Any]) -> tuple[list[Finding], Verdict]:
    return [], Verdict(None, Confidence.LOW, "no signatures loaded")
