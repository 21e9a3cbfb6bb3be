"""The Textual post-mortem UI: ``forensics open``. Lands with issue 6."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from forensics.errors import UsageError

if TYPE_CHECKING:
    from forensics.analysis import Options

__all__ = ["run_app"]


def run_app(paths: Sequence[str], options: Options) -> int:
    raise UsageError("open is not implemented yet")
