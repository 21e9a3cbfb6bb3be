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
        return Plan([list(paths)], _unrelated(paths))
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


def _span(manifest: dict[str, object]) -> tuple[int, int] | None:
    start = manifest.get("start_ns")
    end = manifest.get("end_ns") or manifest.get("heartbeat_ns") or start
    if isinstance(start, int) and isinstance(end, int) and not isinstance(start, bool) and start <= end:
        return start, end
    return None


def _command(manifest: dict[str, object]) -> str | None:
    command = manifest.get("command")
    return " ".join(str(a) for a in command)[:4096] if isinstance(command, list) and command else None


def _unrelated(paths: Sequence[str]) -> list[str]:
    """``--merge`` of bundles that are not one job: a warning naming why. Bundles belong together when
    their recordings overlap in time (the nodes of one job) or run the same command (one job restarted);
    sharing a host alone does not make two runs one (a workstation records many)."""
    from forensics.ingest import bundle

    found: list[tuple[Path, dict[str, object]]] = []
    for arg in paths:
        if arg == "-" or not os.path.isdir(arg):
            continue
        for b in bundles_in(Path(arg)):
            found.append((b, bundle.read_manifest(b) or {}))
    if len(found) < 2:
        return []
    parent = list(range(len(found)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    spans = [_span(m) for _b, m in found]
    commands = [_command(m) for _b, m in found]
    for i in range(len(found)):
        for j in range(i + 1, len(found)):
            one, two = spans[i], spans[j]
            overlap = one is not None and two is not None and one[0] <= two[1] and two[0] <= one[1]
            if overlap or (commands[i] is not None and commands[i] == commands[j]):
                parent[root(i)] = root(j)
    groups = len({root(i) for i in range(len(found))})
    if groups == 1:
        return []
    hosts = {str(m.get("host")) for _b, m in found if isinstance(m.get("host"), str)}
    distinct = len({c for c in commands if c})
    why = (f"no overlapping time and {distinct} different command{'s' if distinct != 1 else ''} among them"
           + (f", {len(hosts)} hosts" if len(hosts) > 1 else ""))
    return [f"--merge reads {len(found)} bundles that do not look like one job ({groups} unrelated groups: "
            f"{why}); they get one verdict together — --each analyzes them one by one"]
