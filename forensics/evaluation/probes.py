"""Catalogue probes: a producer's message as a realistic log line, through the whole analysis, to a verdict.

Each catalogue may ship ``tests/data/catalogs/<producer>/probes.jsonl``: one JSON object per line,
``{"id": message id, "line": the line as the producer prints it, "expect": signature or class id,
"context": [lines before]}``. A probe passes when the verdict is what ``expect`` says: that signature
as the root cause; for an error class, ``unrecognized-failure`` whose decisive catalogued line is of that
class; for a warning or info class, no failure at all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from forensics.catalogs.model import all_classes
from forensics.match.schema import Signature

__all__ = ["ProbeOutcome", "read_probes", "run_probe", "run_probes"]


@dataclass(frozen=True)
class ProbeOutcome:
    producer: str
    message: str
    line: str
    expect: str
    got: str  # the root cause's signature, "unrecognized-failure:<class>", or "none"

    @property
    def passed(self) -> bool:
        return self.got == self.expect or self.got == f"unrecognized-failure:{self.expect}" or (
            self.got == "none" and self._quiet_class())

    @property
    def failure_found(self) -> bool:
        """Whether the verdict calls it a failure at all (what the coverage figure counts)."""
        return self.got != "none"

    def _quiet_class(self) -> bool:
        cls = all_classes().get(self.expect)
        return cls is not None and cls.severity != "error"


def read_probes(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_probe(probe: dict[str, object], producer: str, signatures: Sequence[Signature]) -> ProbeOutcome:
    from forensics.analysis import Options, parse_input
    from forensics.ingest.sources import InputFile
    from forensics.match import diagnose, notable_literals
    from forensics.timeline.merge import build_timeline

    context = probe.get("context") or []
    lines = [str(x) for x in context] if isinstance(context, list) else []
    line = str(probe["line"])
    text = "\n".join([*lines, line]) + "\n"
    _, events, metrics = parse_input(InputFile("probe.log", text.encode("utf-8")), Options(),
                                     notable_literals(signatures))
    _, verdict = diagnose(build_timeline([(events, metrics)]), signatures)
    root = verdict.root_cause
    if root is None:
        got = "none"
    elif root.signature == "unrecognized-failure" and isinstance(cat := root.facts.get("catalog"), list) and cat:
        got = f"unrecognized-failure:{cat[0].get('class')}"
    else:
        got = root.signature
    return ProbeOutcome(producer, str(probe.get("id", "")), line, str(probe.get("expect", "")), got)


def run_probes(path: Path, producer: str, signatures: Sequence[Signature]) -> list[ProbeOutcome]:
    return [run_probe(p, producer, signatures) for p in read_probes(path)]
