"""Linux inside WSL2: POSIX for the child, and the Windows host's event log read through interop.

Detection (:func:`detect_wsl`): the kernel release names Microsoft or WSL
(``/proc/sys/kernel/osrelease``, e.g. ``5.15.153.1-microsoft-standard-WSL2``), or the interop
socket variable ``WSL_INTEROP`` is set; ``/mnt/c`` is noted where present. The host's tools are
found on ``PATH`` (WSL appends the Windows ``PATH``) or under the Windows drive
(``/mnt/c/Windows/System32``): ``wevtutil.exe``, else ``powershell.exe``. With interop switched off
(``[interop] enabled=false``) a ``.exe`` cannot be run at all; the manifest says so.

For tests: ``FORENSICS_OSRELEASE_PATH`` (another osrelease file) and ``FORENSICS_WINDOWS_ROOT``
(another ``/mnt/c``); ``FORENSICS_HOST_EVENTS=none`` switches the host events off.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forensics.record.platform.host_events import EventQuery, HostEventFollower
from forensics.record.platform.posix import PosixPlatform
from forensics.record.writer import AppendFile

__all__ = ["HOST_EVENTS_ENV", "OSRELEASE_ENV", "WINDOWS_ROOT_ENV", "WslFacts", "WslPlatform", "detect_wsl",
           "find_query_tool"]

OSRELEASE_ENV = "FORENSICS_OSRELEASE_PATH"
WINDOWS_ROOT_ENV = "FORENSICS_WINDOWS_ROOT"
HOST_EVENTS_ENV = "FORENSICS_HOST_EVENTS"  # "none": do not ask the host


@dataclass(frozen=True)
class WslFacts:
    osrelease: str | None
    interop: bool  # WSL_INTEROP set
    windows_root: str | None  # /mnt/c, where mounted
    evidence: tuple[str, ...]


def detect_wsl(env: Mapping[str, str]) -> WslFacts | None:
    path = env.get(OSRELEASE_ENV, "/proc/sys/kernel/osrelease")
    try:
        release: str | None = Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        release = None
    evidence = []
    if release and ("microsoft" in release.lower() or "wsl" in release.lower()):
        evidence.append(f"kernel release {release}")
    interop = bool(env.get("WSL_INTEROP"))
    if interop:
        evidence.append("WSL_INTEROP is set")
    if not evidence:
        return None
    root = env.get(WINDOWS_ROOT_ENV, "/mnt/c")
    has_root = os.path.isdir(root)
    if has_root:
        evidence.append(f"{root} is mounted")
    return WslFacts(release, interop, root if has_root else None, tuple(evidence))


def find_query_tool(env: Mapping[str, str], windows_root: str | None) -> EventQuery | None:
    """``wevtutil.exe`` on ``PATH`` or in System32, else ``powershell.exe``; ``None`` when neither is there."""
    path = env.get("PATH")
    system32 = [os.path.join(windows_root, d) for d in ("Windows/System32", "Windows/system32")] if windows_root else []
    for tool, exe, sub in (("wevtutil", "wevtutil.exe", ""),
                           ("powershell", "powershell.exe", "WindowsPowerShell/v1.0")):
        found = shutil.which(exe, path=path)
        if found is None:
            for d in system32:
                candidate = os.path.join(d, sub, exe) if sub else os.path.join(d, exe)
                if os.path.isfile(candidate):
                    found = candidate
                    break
        if found is not None:
            return EventQuery(tool, found)
    return None


class WslPlatform(PosixPlatform):
    name = "wsl2"

    def __init__(self, env: Mapping[str, str], found: WslFacts) -> None:
        self.env = dict(env)
        self.wsl = found
        self.facts: dict[str, Any] | None = {"kind": "wsl2", "evidence": list(found.evidence),
                                             "osrelease": found.osrelease}

    def child(self, argv: Sequence[str], env: Mapping[str, str]) -> Any:
        return super().child(argv, env)

    def host_events(self, bundle: Path, on_status: Callable[[str, dict[str, Any]], None],
                    files: Callable[[AppendFile], AppendFile]) -> HostEventFollower | None:
        if self.env.get(HOST_EVENTS_ENV, "").strip().lower() == "none":
            on_status("host_events", {"status": "unavailable", "via": "interop",
                                      "reason": f"disabled ({HOST_EVENTS_ENV}=none)"})
            return None
        query = find_query_tool(self.env, self.wsl.windows_root)
        if query is None:
            where = f"PATH or {self.wsl.windows_root}/Windows/System32" if self.wsl.windows_root else "PATH"
            reason = (f"neither wevtutil.exe nor powershell.exe found on {where} (interop off, or the Windows "
                      "PATH not appended: [interop] appendWindowsPath)")
            on_status("host_events", {"status": "unavailable", "via": "interop", "reason": reason})
            return None
        return HostEventFollower(bundle, query, on_status, files, via="interop")
