"""``forensics watch PATH...``: the live watcher on a run that was not started under ``record``.

It follows log files (one that does not exist yet is waited for), directories of logs (new files
are picked up) and bundles being recorded, with the same engine, alerts and channels as the
recorder's watcher. Alerts go to stdout (a line of text each, or JSON with ``--format json``),
to ``--jsonl FILE``, and through ``--notify`` / ``--notify-cmd``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import sys
import threading
from pathlib import Path

from forensics.errors import UsageError

__all__ = ["run_watch"]


def _check_paths(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p == "-":
            raise UsageError("watch follows files and directories, not standard input")
        path = Path(p)
        if not path.exists() and not path.parent.is_dir():
            raise UsageError(f"no such file or directory: {p} (nor a directory to wait for it in)")
        if path.exists() and not (path.is_file() or path.is_dir()):
            raise UsageError(f"not a regular file or a directory: {p}")
        out.append(path)
    return out


def run_watch(args: argparse.Namespace) -> int:
    from forensics.live.flags import check_alert_flags

    check_alert_flags(args)
    if args.duration is not None and args.duration <= 0:
        raise UsageError(f"--duration must be positive, got {args.duration:g}")
    if not 0.01 <= args.time_scale <= 10000:
        raise UsageError(f"--time-scale must be between 0.01 and 10000, got {args.time_scale:g}")
    roots = _check_paths(args.paths)
    if args.jsonl and not Path(args.jsonl).parent.is_dir():
        raise UsageError(f"--jsonl: no such directory: {Path(args.jsonl).parent}")
    from forensics.live.channels import Channels
    from forensics.live.engine import LiveEngine
    from forensics.live.watcher import Watcher, WatchOptions, lower_priority

    dirs = [Path(d) for d in (args.signatures or [])]
    env = os.environ.get("FORENSICS_SIGNATURES")
    if env:
        dirs += [Path(d) for d in env.split(os.pathsep) if d]
    lower_priority()
    engine = LiveEngine(roots, signature_dirs=dirs, time_scale=args.time_scale, from_end=args.from_end)
    channels = Channels(jsonl=Path(args.jsonl) if args.jsonl else None, tell=sys.stdout,
                        tell_json=args.format == "json", urls=args.notify, commands=args.notify_cmd,
                        run={"paths": [str(r) for r in roots], "host": socket.gethostname()})
    options = WatchOptions(stall_after=args.stall_after, pause_max=args.pause_max, cpu_budget=args.cpu_budget,
                           duration=args.duration, exit_when_done=args.exit_when_done)
    watcher = Watcher(engine, channels, options)
    stop = threading.Event()

    def halt(signum: int, frame: object) -> None:
        stop.set()
        watcher.wake()

    with contextlib.suppress(ValueError):  # (not the main thread: a test calling in)
        signal.signal(signal.SIGTERM, halt)
        signal.signal(signal.SIGINT, halt)
    try:
        watcher.run(stop)
    finally:
        channels.wait(2.0)
        engine.close()
    if args.stats:
        with contextlib.suppress(OSError):
            Path(args.stats).write_text(json.dumps(watcher.stats()) + "\n")
    return 1 if any(a.kind != "recovered" for a in watcher.alerts) else 0
