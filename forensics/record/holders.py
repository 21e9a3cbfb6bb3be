"""Which processes still hold the other end of one of the child's output streams (Linux ``/proc``).

After the child has ended, a stream that has not reached end of file is held by something the child
left behind (a daemon, ``cmd &``); the manifest names it. Bounded: at most :data:`MAX_PROCS`
processes are looked at, never more than :data:`BUDGET_S`, and anything unreadable is skipped.
"""

from __future__ import annotations

import contextlib
import os
import stat
import struct
import sys
import time

__all__ = ["holders_of"]

MAX_PROCS = 20_000
BUDGET_S = 0.3
_TIOCGPTN = 0x80045430


def _target(fd: int) -> str | None:
    """What the other end of ``fd`` looks like in ``/proc/<pid>/fd``: ``pipe:[inode]`` or ``/dev/pts/N``."""
    if sys.platform == "win32":
        return None
    import fcntl

    try:
        st = os.fstat(fd)
    except OSError:
        return None
    if stat.S_ISFIFO(st.st_mode):
        return f"pipe:[{st.st_ino}]"
    with contextlib.suppress(OSError):  # a pty master: its slave's number
        n = struct.unpack("I", fcntl.ioctl(fd, _TIOCGPTN, b"\0" * 4))[0]
        return f"/dev/pts/{n}"
    return None


def holders_of(fd: int) -> str:
    """``pid 123 (python3), pid 456 (sleep)`` for the processes other than this one holding the other end
    of ``fd``; ``''`` when none could be named (not Linux, no permission, out of time)."""
    if not sys.platform.startswith("linux"):
        return ""
    target = _target(fd)
    if target is None:
        return ""
    me = os.getpid()
    found: list[str] = []
    end = time.monotonic() + BUDGET_S
    try:
        # newest first: what the child left behind was started after it
        pids = sorted((int(p) for p in os.listdir("/proc") if p.isdigit()), reverse=True)[:MAX_PROCS]
    except OSError:
        return ""
    for pid in pids:
        if time.monotonic() > end:
            break
        if pid == me:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{name}") != target:
                    continue
            except OSError:
                continue
            try:
                with open(f"/proc/{pid}/comm") as fh:
                    comm = fh.read().strip()
            except OSError:
                comm = "?"
            if comm != "forensics-keep":  # the keeper holds the read end of the same pipe
                found.append(f"pid {pid} ({comm})")
            break
    return ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
