"""The recorder: ``forensics record -- CMD``. Lands with issue 2."""

from __future__ import annotations

import argparse

from forensics.errors import UsageError

__all__ = ["run_record"]


def run_record(args: argparse.Namespace) -> int:
    raise UsageError("record is not implemented yet")
