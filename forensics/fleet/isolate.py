"""One fleet input in a process of its own, under a wall-clock deadline.

A worker that reads a FIFO a writer holds, or that spins in a pathological input, would hold its
Dask worker for ever and the fleet run with it. :func:`run_isolated` forks the worker (the analyzer is
already imported there, so a fork costs milliseconds), runs the function in the child and sends the
result back over a pipe; at the deadline the child is killed and the input becomes a row with its error.
A child that dies (the kernel's OOM killer, a crash in a C extension) is a row too. Where there is no
``fork`` (Windows) the function runs in the worker itself, without a deadline.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import sys
import time
import warnings
from collections.abc import Callable
from contextlib import suppress
from typing import Any

__all__ = ["Died", "TimedOut", "run_isolated"]

_LENGTH = struct.Struct("<Q")


class TimedOut(Exception):
    """The child was killed at its deadline."""


class Died(Exception):
    """The child ended without a result (killed by a signal, or exited)."""


def run_isolated(fn: Callable[..., Any], args: tuple[Any, ...], deadline_s: float | None) -> Any:
    """``fn(*args)`` in a forked child, its (picklable) result returned; :class:`TimedOut` after
    ``deadline_s`` seconds (the child killed), :class:`Died` when it ends without a result."""
    if not deadline_s or not hasattr(os, "fork"):
        return fn(*args)
    reader, writer = os.pipe()
    with warnings.catch_warnings():  # the child runs our code only, never Dask's threads
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (covered through the fleet tests)
        code = 0
        try:
            os.close(reader)
            data = pickle.dumps(fn(*args), protocol=pickle.HIGHEST_PROTOCOL)
            view = memoryview(_LENGTH.pack(len(data)) + data)
            while view:
                view = view[os.write(writer, view):]
        except BaseException:  # noqa: BLE001 - whatever happens, the child ends here
            code = 70
        finally:
            with suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    os.close(writer)
    try:
        raw = _read_until(reader, time.monotonic() + deadline_s)
    finally:
        os.close(reader)
    if raw is None:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise TimedOut(f"still running after its deadline ({deadline_s:g} s); killed")
    _pid, status = os.waitpid(pid, 0)
    if len(raw) >= _LENGTH.size and len(raw) == _LENGTH.size + _LENGTH.unpack_from(raw)[0]:
        return pickle.loads(raw[_LENGTH.size:])  # noqa: S301 - our own child's bytes
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals.__members__.values() else str(sig)
        raise Died(f"the analysis was killed by {name}" + (" (out of memory?)" if sig == signal.SIGKILL else ""))
    raise Died(f"the analysis ended without a result (exit status {os.WEXITSTATUS(status)})")


def _read_until(fd: int, deadline: float) -> bytes | None:
    """Everything written to ``fd`` until its end, or None at ``deadline``."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
