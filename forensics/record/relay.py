"""Signals that reach the recorder, passed on to the child exactly once: the part the POSIX child
(:mod:`forensics.record.child`) and the Windows child (:mod:`forensics.record.platform.windows`) share.

Handlers go in before the spawn; a signal that arrives before the child exists is kept and passed
on right after the spawn (:meth:`SignalRelay._forward_pending`), one that arrives later goes to
:meth:`SignalRelay._deliver`. What "passing on" means (``kill``, ``killpg``, a console control
event) is the subclass's :meth:`SignalRelay._forward`.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterable
from typing import Any

__all__ = ["SignalRelay"]


class SignalRelay:
    """Mixin for a child runner with ``proc``, ``forwarded``, ``_pending`` and ``_old_handlers``."""

    proc: Any
    forwarded: list[int]  # the signals passed on, in order (the manifest's forwarded_signals)
    _pending: list[int]
    _old_handlers: dict[int, object]

    def _relayed(self) -> Iterable[int]:
        """The signals to take over (each platform its own)."""
        raise NotImplementedError

    def _forward(self, sig: int) -> None:
        """Pass ``sig`` on to the running child."""
        raise NotImplementedError

    def install_signal_handlers(self) -> None:
        """Before the spawn: a signal that arrives early is kept and passed on after it."""
        for sig in self._relayed():
            with contextlib.suppress(OSError, ValueError):
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)

    def restore_signal_handlers(self) -> None:
        for sig, old in self._old_handlers.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(sig, old)  # type: ignore[arg-type]

    def _on_signal(self, sig: int, _frame: object) -> None:
        if self.proc is None:
            self._pending.append(sig)
            return
        self._deliver(sig)

    def _deliver(self, sig: int) -> None:
        """A signal while the child runs (POSIX overrides it for SIGCONT)."""
        self._forward(sig)

    def _forward_pending(self) -> None:
        """Right after the spawn: what came before it, in order."""
        pending, self._pending = self._pending, []
        for sig in pending:
            self._forward(sig)
