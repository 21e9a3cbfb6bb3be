"""One Apprise delivery, in a process of its own: ``python -m forensics.live.deliver`` reads
``{"urls": [...], "title": ..., "body": ...}`` on stdin and exits 0 when every URL took it.

The watcher runs this under a deadline and kills it when it hangs (channels.py), so a slow or
dead notification service never holds the watcher, let alone the run.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    try:
        job = json.loads(sys.stdin.buffer.read() or b"{}")
    except ValueError:
        sys.stderr.write("deliver: the job on stdin is not JSON\n")
        return 2
    try:
        import apprise
    except ImportError:
        sys.stderr.write("deliver: Apprise is not installed (pip install 'gpu-forensics[live]')\n")
        return 2
    ap = apprise.Apprise()
    bad = [u for u in job.get("urls") or [] if not ap.add(u)]
    if bad:
        sys.stderr.write("deliver: not an Apprise URL Apprise knows: " + ", ".join(bad) + "\n")
    if not len(ap):
        return 2
    ok = ap.notify(title=str(job.get("title") or "forensics"), body=str(job.get("body") or ""),
                   body_format=apprise.NotifyFormat.TEXT)
    return 0 if ok and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
