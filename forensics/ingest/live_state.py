"""Is a bundle whose manifest still says ``running`` being recorded now, or did its recorder die?

The recorder rewrites the heartbeat every second. A manifest that says ``running`` with a
heartbeat under ``STALE_S`` old — and, when the bundle was recorded on this host, a recorder
process that still exists — is a run in progress: readers analyze what it holds so far and say so.
Otherwise the recorder stopped without closing the bundle (host crash, power loss, SIGKILL) and
the recording is reported as interrupted at its last heartbeat.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["STALE_S", "RecordingState", "recording_state"]

#: a heartbeat older than this (seconds) means the recorder is gone
STALE_S = 10.0


@dataclass(frozen=True)
class RecordingState:
    live: bool
    heartbeat_age_s: float | None  # seconds since the last heartbeat (None: no heartbeat)
    why: str  # in words: "heartbeat 0.4 s ago, recorder pid 4100 running" / "heartbeat 3 h ago"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # someone else's process: it exists
    return True


def _age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def recording_state(manifest: dict[str, Any], now_ns: int | None = None) -> RecordingState | None:
    """The state of a manifest that says ``running`` (None for any other status)."""
    if manifest.get("status") != "running":
        return None
    now_ns = time.time_ns() if now_ns is None else now_ns
    beat = _int(manifest.get("heartbeat_ns")) or _int(manifest.get("start_ns"))
    age = (now_ns - beat) / 1e9 if beat is not None else None
    if age is None:
        return RecordingState(False, None, "no heartbeat")
    if age > STALE_S:
        return RecordingState(False, age, f"last heartbeat {_age(age)} ago")
    pid = _int(manifest.get("recorder_pid"))
    if pid is not None and manifest.get("host") == socket.gethostname() and not _pid_alive(pid):
        return RecordingState(False, age, f"heartbeat {_age(max(age, 0.0))} ago but recorder pid {pid} is gone")
    return RecordingState(True, age, f"heartbeat {_age(max(age, 0.0))} ago")
