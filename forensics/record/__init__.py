"""The recorder: ``forensics record -- CMD``.

Runs CMD exactly as usual and leaves a crash-safe bundle beside it (docs/bundle-format.md).
This package imports in milliseconds: no pandas, textual or torch, and NVML only in
the sampler process.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["run_record"]


def run_record(args: argparse.Namespace) -> int:
    from forensics.record.session import record

    argv = list(args.cmd or [])
    if argv and argv[0] == "--":
        argv = argv[1:]
    announce = False if getattr(args, "quiet", False) else (True if getattr(args, "announce", False) else None)
    return record(argv, Path(args.out), float(args.interval), arm=not args.no_arm, announce=announce,
                  watch=getattr(args, "watch_argv", None))
