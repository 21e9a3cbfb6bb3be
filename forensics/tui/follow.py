"""``forensics open --follow``: a run still being recorded, shown as it goes.

Every few seconds the app asks :meth:`Follower.due`: whether the inputs changed since they were
last analyzed (the sizes of their files; a bundle's heartbeat and manifest rewrites alone are not a
change, its status is) and enough time passed since the last analysis (three times what it took, so
following a long run costs at most a quarter of a core). Then the whole analysis runs again through
the façade — what the screen shows is what ``analyze`` says at that moment — and :meth:`news` says
what is new: a root cause, a finding, the recording's end.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

Severity = Literal["information", "warning", "error"]

if TYPE_CHECKING:
    from forensics.analysis import Analysis

__all__ = ["Follower"]

_QUIET = frozenset({"heartbeat", "manifest.json", "manifest.json.tmp", "live.log"})


def _fingerprint(paths: Sequence[str]) -> tuple[object, ...]:
    parts: list[object] = []
    for p in paths:
        root = Path(p)
        files = [root] if root.is_file() else [Path(d) / f for d, _, fs in os.walk(root) for f in fs]
        for f in sorted(files):
            if f.name in _QUIET:
                continue
            with contextlib.suppress(OSError):
                parts.append((str(f), f.stat().st_size))
        with contextlib.suppress(OSError, ValueError):
            import json

            parts.append(json.loads((root / "manifest.json").read_text()).get("status"))
    return tuple(parts)


class Follower:
    def __init__(self, paths: Sequence[str], analysis: Analysis) -> None:
        self.paths = list(paths)
        self.seen = _fingerprint(self.paths)
        self.took = 0.0
        self.last = time.monotonic()
        self.signatures = {f.signature for f in analysis.findings}
        self.root = analysis.verdict.root_cause_id
        self.running = self._running(analysis)

    @staticmethod
    def _running(analysis: Analysis) -> bool:
        return any(r.get("status") == "running" for r in analysis.recordings)

    def due(self) -> bool:
        if time.monotonic() - self.last < 3 * self.took:
            return False
        now = _fingerprint(self.paths)
        if now == self.seen:
            return False
        self.seen = now
        return True

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.last = time.monotonic()
            self.took = self.last - start

    def news(self, analysis: Analysis) -> list[tuple[str, Severity]]:
        """What changed since the last analysis, as notifications (text, severity)."""
        out: list[tuple[str, Severity]] = []
        v = analysis.verdict
        if v.root_cause is not None and v.root_cause_id != self.root:
            who = f" — {v.blame.line()}" if v.blame is not None else ""
            out.append((f"ROOT CAUSE: {v.root_cause.title} ({v.root_cause.signature}){who}", "error"))
        for f in analysis.findings:
            if f.signature not in self.signatures and f is not v.root_cause:
                out.append((f"new finding: {f.title} ({f.signature})", "warning"))
        running = self._running(analysis)
        if self.running and not running:
            out.append(("the recording ended", "information"))
        self.signatures = {f.signature for f in analysis.findings}
        self.root = v.root_cause_id
        self.running = running
        return out

    def status(self, analysis: Analysis) -> str:
        """The app's subtitle: what is followed and whether it is still being recorded."""
        rec = next((r for r in analysis.recordings if r.get("status") == "running"), None)
        where = " ".join(self.paths)[:60]
        if rec is not None:
            return f"following {where} · still recording since {rec.get('start')}"
        return f"following {where}"
