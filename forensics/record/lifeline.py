"""Helpers the recorder starts must never outlive it.

A helper started with :func:`die_with_recorder` runs behind a few lines of Python that arm
``PR_SET_PDEATHSIG`` (SIGKILL when the recorder's thread that started it ends), check that
the recorder is still its parent — a recorder killed between the fork and the arming left its
helper to PID 1, running forever — and only then ``exec`` the helper itself (the death signal
survives ``exec``). ``journalctl -f`` otherwise outlives a SIGKILLed recorder until its next
write hits the broken pipe, which on a quiet host is never.

Windows has neither the death signal nor an ``exec`` that keeps the process (``os.execv`` starts
a new one), so there :func:`die_with_recorder` leaves the command as it is, and the recorder's
own Python helpers (the NVML sampler, the host snapshot) hold a *lifeline* instead, on every
platform: their stdin is a pipe whose write end only the recorder holds. End of file on it — the
recorder closed it to stop them, or died — ends them (:func:`hold_lifeline`). On Windows the
helpers are also started without the user's console (:func:`helper_flags`), so a Ctrl-C or
Ctrl-Break meant for the training run never reaches them.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

__all__ = ["BACKGROUND", "LIFELINE_ARG", "die_with_recorder", "helper_flags", "hold_lifeline"]

LIFELINE_ARG = "lifeline"  # the argument that tells a helper its stdin is its lifeline
#: written on a lifeline before closing it: "finish what you are doing on your own" (the host snapshot
#: at the end of a short run); end of file without it still means "stop"
BACKGROUND = b"B"

_GUARD = (
    "import os, sys\n"
    "try:\n"
    "    import ctypes\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, 9)\n"  # PR_SET_PDEATHSIG, SIGKILL
    "except (OSError, AttributeError, ImportError):\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(0)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def die_with_recorder(argv: Sequence[str]) -> list[str]:
    """``argv`` (an absolute executable first) wrapped so that it dies with this process
    (on Windows unchanged: see the module's docstring)."""
    if sys.platform == "win32":
        return list(argv)
    return [sys.executable, "-I", "-S", "-c", _GUARD, str(os.getpid()), *argv]


def helper_flags(idle: bool = False) -> int:
    """``creationflags`` for a helper process: on Windows a console of its own that nobody sees
    (``CREATE_NO_WINDOW``: the user's console control events do not reach it, and the commands it
    runs open no window), at idle priority when ``idle``; 0 elsewhere."""
    if sys.platform == "win32":
        return subprocess.CREATE_NO_WINDOW | (subprocess.IDLE_PRIORITY_CLASS if idle else 0)
    return 0


def hold_lifeline(on_cut: Callable[[], None], grace_s: float = 3.0, fd: int = 0,
                  on_background: Callable[[], None] | None = None) -> threading.Thread:
    """In a helper: watch ``fd`` (stdin, a pipe only the recorder writes to) on a thread; at end of
    file call ``on_cut`` (stop politely), and end the process if it is still there ``grace_s`` later
    (a thread stuck in a driver call would otherwise keep it). With ``on_background``, a lifeline
    closed after :data:`BACKGROUND` calls it instead and the helper goes on."""

    def watch() -> None:
        seen = b""
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(fd, 512):
                seen = (seen + chunk)[-16:]
        if on_background is not None and seen.endswith(BACKGROUND):
            with contextlib.suppress(Exception):
                on_background()
            return
        with contextlib.suppress(Exception):
            on_cut()
        time.sleep(grace_s)
        os._exit(0)

    thread = threading.Thread(target=watch, name="forensics-lifeline", daemon=True)
    thread.start()
    return thread
