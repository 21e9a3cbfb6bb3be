"""Linux and other POSIX systems: the child, signals and terminal of :mod:`forensics.record.child`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from forensics.record.tee import StreamTee, TeeGroup, same_destination
from forensics.record.writer import AppendFile

__all__ = ["PosixPlatform"]


class PosixPlatform:
    name = "posix"
    keeper = True
    facts: dict[str, Any] | None = None
    nvml_unavailable: str | None = None  # why NVML cannot be sampled here (None: it can)
    nvml_page = "fd"  # the sampler's deadline page: an inherited descriptor (pass_fds)
    kernel_log_unavailable: str | None = None

    def child(self, argv: Sequence[str], env: Mapping[str, str]) -> Any:
        from forensics.record.child import Child

        return Child(argv, env)

    def tee(self, name: str, src_fd: int, echo_fd: int, log: AppendFile, idx: AppendFile,
            batch_s: float = 0.0) -> StreamTee:
        return StreamTee(name, src_fd, echo_fd, log, idx, batch_s=batch_s)

    def tee_runners(self, tees: Sequence[StreamTee], batch_s: float) -> list[Any]:
        """One reading thread per destination: streams whose echoes lead to one place (``> log 2>&1``)
        share one, which keeps their lines whole (:mod:`forensics.record.lineorder`)."""
        groups: list[list[StreamTee]] = []
        for t in tees:
            for g in groups:
                if t.echo_fd is not None and g[0].echo_fd is not None and same_destination(t.echo_fd, g[0].echo_fd):
                    g.append(t)
                    break
            else:
                groups.append([t])
        return [TeeGroup(g, batch_s=batch_s) for g in groups]

    def host_events(self, bundle: Path, on_status: Callable[[str, dict[str, Any]], None],
                    files: Callable[[AppendFile], AppendFile]) -> Any:
        return None
