"""Helpers the recorder starts must never outlive it.

A helper started with :func:`die_with_recorder` runs behind a few lines of Python that arm
``PR_SET_PDEATHSIG`` (SIGKILL when the recorder's thread that started it ends), check that
the recorder is still its parent — a recorder killed between the fork and the arming left its
helper to PID 1, running forever — and only then ``exec`` the helper itself (the death signal
survives ``exec``). ``journalctl -f`` otherwise outlives a SIGKILLed recorder until its next
write hits the broken pipe, which on a quiet host is never.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["die_with_recorder"]

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
    """``argv`` (an absolute executable first) wrapped so that it dies with this process."""
    return [sys.executable, "-I", "-S", "-c", _GUARD, str(os.getpid()), *argv]
