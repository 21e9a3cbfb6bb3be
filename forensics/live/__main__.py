"""The recorder's watcher process: ``python -m forensics.live BUNDLE [alert flags] --lifeline``.

``forensics record`` starts it (by module name: the recorder never imports the analysis) once the
child runs, at low priority, with its stdin as a lifeline: the line ``end`` means the child ended
(read the rest, evaluate once more, deliver, leave); end of file without it means the recorder is
gone (leave at once). With ``--tell`` each alert's line goes to stdout, which the recorder shows on
its terminal between the child's lines. Alerts always go to ``BUNDLE/live.jsonl``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import threading
from pathlib import Path

#: after the run ended: how long deliveries still in flight are waited for
FINAL_WAIT_S = 2.0


def _lifeline(stop: threading.Event, end: threading.Event, wake: list[object]) -> None:
    with contextlib.suppress(OSError, ValueError):
        for line in sys.stdin.buffer:
            if line.strip() == b"end":
                end.set()
                break
    if not end.is_set():
        stop.set()
    for w in wake:
        getattr(w, "wake", lambda: None)()


def main(argv: list[str] | None = None) -> int:
    from forensics.orphans import die_with_parent

    die_with_parent()
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")
    from forensics.live.flags import add_alert_flags, check_alert_flags

    p = argparse.ArgumentParser(prog="python -m forensics.live")
    p.add_argument("bundle")
    add_alert_flags(p)
    p.add_argument("--tell", action="store_true", help="one line per alert on stdout")
    p.add_argument("--lifeline", action="store_true", help="stdin is the recorder's lifeline")
    p.add_argument("--stats", metavar="FILE", help="write the watcher's figures (JSON) there at the end")
    args = p.parse_args(argv)
    from forensics.errors import UsageError
    from forensics.live.watcher import lower_priority, say

    try:
        check_alert_flags(args)
    except UsageError as exc:
        say(str(exc))
        return 2
    lower_priority()
    import gc

    gc.disable()
    try:
        from forensics.live.channels import Channels
        from forensics.live.engine import LiveEngine
        from forensics.live.watcher import Watcher
    finally:
        gc.freeze()
        gc.enable()
    from forensics.ingest.bundle import read_manifest
    from forensics.live.watcher import WatchOptions

    bundle = Path(args.bundle)
    engine = LiveEngine([bundle])
    manifest = read_manifest(bundle) or {}
    channels = Channels(jsonl=bundle / "live.jsonl", tell=sys.stdout if args.tell else None, urls=args.notify,
                        commands=args.notify_cmd,
                        run={"bundle": str(bundle), "host": manifest.get("host") or socket.gethostname(),
                             "command": manifest.get("command"), "start": manifest.get("start")})
    options = WatchOptions(stall_after=args.stall_after, pause_max=args.pause_max, cpu_budget=args.cpu_budget,
                           use_watchfiles=False)
    watcher = Watcher(engine, channels, options)
    stop, end = threading.Event(), threading.Event()
    if args.lifeline:
        threading.Thread(target=_lifeline, args=(stop, end, [watcher]), daemon=True,
                         name="forensics-live-lifeline").start()
    try:
        watcher.run(stop, end)
    except KeyboardInterrupt:
        return 0
    if end.is_set():
        channels.wait(FINAL_WAIT_S)
    stats = watcher.stats()
    say("; ".join(f"{k} {v}" for k, v in stats.items()))
    if args.stats:
        with contextlib.suppress(OSError):
            Path(args.stats).write_text(json.dumps(stats) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
