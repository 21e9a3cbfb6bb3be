"""What the recorder needs from the operating system, behind one small interface.

:func:`current` picks the platform: :mod:`.posix` (Linux, macOS), :mod:`.wsl` (Linux inside WSL2:
POSIX plus the Windows host's event log through interop) or :mod:`.windows` (native Windows). The
recorder's core (session, tees, manifest, bundle) is shared; a platform gives it

* ``child(argv, env)``: the object that runs the command (process group, signals, output streams),
* ``tee(...)``: the thread that copies one output stream to the bundle and the terminal,
* ``nvml_unavailable``: why NVML cannot be sampled here (``None``: it can),
* ``nvml_page``: how the NVML sampler gets its deadline page (``fd``: an inherited descriptor,
  POSIX; ``path``: a file it maps by name, Windows — :mod:`forensics.record.deadline`),
* ``kernel_log_unavailable``: why there is no kernel log to follow (``None``: there is),
* ``keeper``: whether a keeper process may be forked (POSIX only),
* ``host_events(bundle, on_status, files)``: a thread that reads the host's event log, or ``None``,
* ``facts``: what was detected and why, for the manifest (``None`` on plain POSIX, whose manifest
  stays as it was).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from forensics.record.tee import StreamTee
from forensics.record.writer import AppendFile

__all__ = ["ChildLike", "ExitStatusLike", "KeeperLike", "Platform", "TeeRunner", "current"]


class ExitStatusLike(Protocol):
    """How the child ended (:class:`forensics.record.child.ExitStatus`, ``windows.WindowsStatus``)."""

    code: int | None
    signal: int | None

    @property
    def shell_status(self) -> int: ...


class KeeperLike(Protocol):
    """The part of :class:`forensics.record.keeper.Keeper` that the session uses (POSIX only)."""

    def child_started(self, pid: int) -> None: ...
    def release(self) -> None: ...
    def hand_over(self) -> None: ...


class TeeRunner(Protocol):
    """A thread that reads one or more of the child's streams (:class:`forensics.record.tee.TeeGroup`,
    or a Windows ``BlockingTee``)."""

    def start(self) -> None: ...
    def join(self, timeout: float | None = None) -> None: ...
    def is_alive(self) -> bool: ...
    def stop_when_quiet(self, grace_s: float) -> None: ...
    def halt(self) -> None: ...


class ChildLike(Protocol):
    """The part of :class:`forensics.record.child.Child` that the session uses."""

    proc: Any
    tty_fd: int | None
    forwarded: list[int]

    @property
    def streams(self) -> Mapping[str, Any]: ...

    def open_streams(self) -> Mapping[str, Any]: ...
    def install_signal_handlers(self) -> None: ...
    def restore_signal_handlers(self) -> None: ...
    def start(self) -> None: ...
    def wait(self) -> ExitStatusLike: ...
    def take_back_terminal(self) -> None: ...
    def sync_window_size(self) -> None: ...


class HostEvents(Protocol):
    def start(self) -> None: ...
    def stop(self, timeout: float | None = None) -> None: ...


class Platform(Protocol):
    name: str
    keeper: bool
    facts: dict[str, Any] | None
    nvml_unavailable: str | None
    nvml_page: str
    kernel_log_unavailable: str | None

    def child(self, argv: Sequence[str], env: Mapping[str, str]) -> ChildLike: ...

    def tee(self, name: str, src_fd: int, echo_fd: int, log: AppendFile, idx: AppendFile,
            batch_s: float = 0.0) -> StreamTee: ...

    def tee_runners(self, tees: Sequence[StreamTee], batch_s: float) -> list[TeeRunner]: ...

    def host_events(self, bundle: Path, on_status: Callable[[str, dict[str, Any]], None],
                    files: Callable[[AppendFile], AppendFile]) -> HostEvents | None: ...


def current(env: Mapping[str, str] | None = None) -> Platform:
    """The platform this process records on (``env``: the environment to read, default ``os.environ``)."""
    env = os.environ if env is None else env
    if sys.platform == "win32":
        from forensics.record.platform.windows import WindowsPlatform

        return WindowsPlatform(env)
    from forensics.record.platform.wsl import detect_wsl

    found = detect_wsl(env)
    if found is not None:
        from forensics.record.platform.wsl import WslPlatform

        return WslPlatform(env, found)
    from forensics.record.platform.posix import PosixPlatform

    return PosixPlatform()
