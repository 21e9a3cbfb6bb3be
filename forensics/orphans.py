"""A process forensics starts dies with the one that started it.

Linux's ``PR_SET_PDEATHSIG`` sends SIGKILL to a process when its parent's thread that started it
ends, however the parent ended (SIGKILL, SIGBUS, the OOM killer). Without it a pre-pass worker
blocked writing its result to a pipe nobody reads any more waits for ever, and an NVML sampler
outlives its recorder. Elsewhere (macOS, Windows) there is no such signal and nothing is armed:
the recorder's helpers hold a lifeline there (``forensics/record/lifeline.py``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

__all__ = ["die_with", "die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Arm SIGKILL for when the parent ends (Linux only; elsewhere nothing)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):  # a libc without prctl: nothing armed
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))


def die_with(parent: int) -> None:
    """:func:`die_with_parent`, then exit at once if ``parent`` already ended before it was armed
    (this process was handed to PID 1, and nothing would stop it)."""
    die_with_parent()
    if os.getppid() != parent:
        os._exit(0)
