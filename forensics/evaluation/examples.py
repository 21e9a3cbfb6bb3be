"""Run a signature's ``[[examples]]`` through the whole pipeline (detect → parse →
timeline → detectors → match), as ``forensics analyze`` would on a pasted file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from forensics.findings import Finding
from forensics.match.schema import Example, Signature

__all__ = ["ExampleOutcome", "analyze_text", "check_examples"]


@dataclass(frozen=True)
class ExampleOutcome:
    signature: str
    example: Example
    fired: bool
    as_risk: bool = False  # it fired as a risk (contributing, never the root cause)

    @property
    def ok(self) -> bool:
        if self.fired != self.example.match:
            return False
        return self.example.risk is None or not self.fired or self.as_risk == self.example.risk


def analyze_text(text: str, signatures: Sequence[Signature], name: str = "example.log") -> list[Finding]:
    """The findings for one small log file given as text."""
    from forensics.analysis import Options, parse_input
    from forensics.ingest.sources import InputFile
    from forensics.match import diagnose, notable_literals
    from forensics.timeline.merge import build_timeline

    report, events, metrics = parse_input(InputFile(name, text.encode("utf-8")), Options(),
                                          notable_literals(signatures))
    findings, _ = diagnose(build_timeline([(events, metrics)]), signatures)
    return findings


def check_examples(sig: Signature, signatures: Sequence[Signature]) -> list[ExampleOutcome]:
    """Each example of ``sig`` run against all ``signatures``: did ``sig`` fire?"""
    out = []
    for ex in sig.examples:
        mine = [f for f in analyze_text(ex.text, signatures) if f.signature == sig.id]
        out.append(ExampleOutcome(sig.id, ex, bool(mine), any(f.risk for f in mine)))
    return out
