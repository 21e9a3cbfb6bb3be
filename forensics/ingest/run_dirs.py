"""A directory of several bundles (``forensics-runs/``): which of them one analysis reads.

Bundles of unrelated runs must never be merged into one verdict, so a directory argument that
holds two or more bundles stands for its *newest* bundle (by the manifest's start time, else the
directory's modification time) unless the user asks for ``--each`` (one analysis per bundle) or
``--merge`` (they are one job: read everything, as for any directory).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Plan", "bundles_in", "plan"]

MAX_DEPTH = 3  # forensics-runs/<bundle>, samples/<case>/bundle, one level more
MAX_DIRS = 5_000  # directories looked at under one argument


def _start(path: Path) -> float:
    from forensics.ingest import bundle

    manifest = bundle.read_manifest(path) or {}
    start = manifest.get("start_ns")
    if isinstance(start, int):
        return start / 1e9
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def bundles_in(root: Path) -> list[Path]:
    """The bundle directories under ``root`` (not inside another bundle), oldest first; ``[root]``
    itself when it is a bundle."""
    from forensics.ingest import bundle

    if bundle.is_bundle(root):
        return [root]
    found: list[Path] = []
    seen = 0
    base = len(root.parts)
    for dirpath, dirnames, _files in os.walk(root, followlinks=False):
        dirnames.sort()
        here = Path(dirpath)
        for d in list(dirnames):
            seen += 1
            if seen > MAX_DIRS:
                dirnames.clear()
                break
            if bundle.is_bundle(here / d):
                found.append(here / d)
                dirnames.remove(d)
        if len(here.parts) - base + 1 >= MAX_DEPTH:
            dirnames.clear()
    return sorted(found, key=lambda p: (_start(p), str(p)))


@dataclass
class Plan:
    """The analyses to run (each a list of paths read together) and what to tell the user."""

    groups: list[list[str]]
    notices: list[str] = field(default_factory=list)


def plan(paths: Sequence[str], mode: str = "newest") -> Plan:
    """``mode``: ``newest`` (default), ``each`` or ``merge`` (see the module's docstring)."""
    if mode == "merge":
        return Plan([list(paths)])
    groups: list[list[str]] = []
    chosen: list[str] = []
    notices: list[str] = []
    for arg in paths:
        found = bundles_in(Path(arg)) if arg != "-" and os.path.isdir(arg) else []
        if mode == "each":
            groups += [[str(b)] for b in found] if len(found) > 1 else [[arg]]
            continue
        if len(found) > 1:
            newest = found[-1]
            notices.append(f"{arg} holds {len(found)} bundles; analyzing the newest, {newest} "
                           "(--each: every bundle on its own; --merge: all as one job)")
            chosen.append(str(newest))
        else:
            chosen.append(arg)
    if mode == "each":
        return Plan(groups, notices)
    return Plan([chosen], notices)
