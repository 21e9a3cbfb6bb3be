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

    @property
    def ok(self) -> bool:
        return self.fired == self.example.match


def analyze_text(text: str, signatures: Sequence[Signature], name: str = "example.log") -> list[Finding]:
    """The findings for one small log file given as text."""
    from forensics.analysis import Options, parse_input
    from forensics.match import diagnose, notable_literals
    from forensics.sources import InputFile
    from forensics.timeline import build_timeline

    report, events, metrics = parse_input(InputFile(name, text.encode("utf-8")), Options(),
                                          notable_literals(signatures))
    findings, _ = diagnose(build_timeline([(events, metrics)]), signatures)
    return findings


def check_examples(sig: Signature, signatures: Sequence[Signature]) -> list[ExampleOutcome]:
    """Each example of ``sig`` run against all ``signatures``: did ``sig`` fire?"""
    out = []
    for ex in sig.examples:
        fired = any(f.signature == sig.id for f in analyze_text(ex.text, signatures))
        out.append(ExampleOutcome(sig.id, ex, fired))
    return out
