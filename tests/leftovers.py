"""A fixture that fails a test which leaves processes behind.

The test process becomes a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): every process
started under it that loses its parent — a recorder's helper after a SIGKILL, a grandchild —
is re-parented to the test process instead of PID 1, so after the test they can all be found
(``/proc/*/stat`` with the test process as parent). Processes get a few seconds to finish
(the keeper legitimately outlives a killed recorder until the child ends); whatever is still
there then is killed, reaped and named in the failure."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Iterator

import pytest

PR_SET_CHILD_SUBREAPER = 36


def _children() -> dict[int, str]:
    me = os.getpid()
    out: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[1]) == me:
            out[int(entry)] = cmd
    return out


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def kill_leftovers(before: set[int], grace_s: float) -> dict[int, str]:
    """Wait up to ``grace_s`` for processes that were not there in ``before`` to end; kill the rest."""
    deadline = time.monotonic() + grace_s
    while True:
        _reap()
        left = {pid: cmd for pid, cmd in _children().items() if pid not in before}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    time.sleep(0.1)
    _reap()
    return left


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    before = set(_children())
    try:
        yield
    finally:
        left = kill_leftovers(before, grace_s=8.0)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0)
    assert not left, f"processes left behind: {left}"
