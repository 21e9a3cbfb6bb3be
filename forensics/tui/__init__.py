"""The Textual post-mortem UI: ``forensics open PATH...``.

Only this package imports textual. The app reaches data through
:func:`forensics.analysis.analyze` (in a worker thread) and nothing else.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from forensics.errors import UsageError

if TYPE_CHECKING:
    from forensics.analysis import Options

__all__ = ["run_app"]


def run_app(paths: Sequence[str], options: Options, follow: float | None = None) -> int:
    """Open the app on ``paths``; returns 0, or 2 when the inputs could not be analyzed. ``follow``: look
    at the inputs again every so many seconds (a run still being recorded)."""
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"no such file or directory: {missing[0]}")
    from forensics.tui.app import ForensicsApp

    app = ForensicsApp(paths, options, follow=follow)
    result = app.run()
    if app.exit_line:
        sys.stderr.write(f"forensics: {app.exit_line}\n")
    if result is None and app.return_code:  # the UI itself failed (its error was printed): never 0
        return 2
    return int(result or 0)
