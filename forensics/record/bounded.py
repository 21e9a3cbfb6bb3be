"""Run an external command with a hard deadline, never waiting on a process that will not die.

``subprocess.run(timeout=…)`` kills on timeout and then waits without limit — a
process stuck in the driver (``nvidia-smi`` on a wedged GPU) would hang the caller.
:func:`run_bounded` gives up on it instead.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Result", "run_bounded"]


@dataclass
class Result:
    argv: list[str]
    rc: int | None
    stdout: bytes
    stderr: bytes
    seconds: float
    problem: str | None = None  # why there is no normal result (timeout, not found …)

    @property
    def ok(self) -> bool:
        return self.problem is None and self.rc == 0


def run_bounded(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> Result:
    start = time.monotonic()
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=dict(env) if env is not None else None, close_fds=True)
    except OSError as exc:
        return Result(list(argv), None, b"", b"", 0.0, f"cannot run: {exc.strerror or exc}")
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            out, err = proc.communicate(timeout=2.0)
        except subprocess.TimeoutExpired:  # stuck in the kernel: leave it
            out, err = b"", b""
        return Result(list(argv), None, out or b"", err or b"", time.monotonic() - start,
                      f"timed out after {timeout:g} s")
    return Result(list(argv), proc.returncode, out, err, time.monotonic() - start)
