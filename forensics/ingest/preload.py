"""numpy imported in a thread while a big file is read, so the two overlap.

A file the template pre-pass will read (:data:`~forensics.parsers.common.template_scan.MIN_BYTES` and up)
needs numpy, whose import costs 60-90 ms; reading the file costs about as much, and ``os.read``
lets go of the interpreter lock while the kernel copies. :func:`numpy_while_reading` starts the
import beside the read; :func:`settle` waits for it (the pre-pass calls it before it forks its
workers, so no thread of ours is alive at the fork).
"""

from __future__ import annotations

import contextlib
import threading

__all__ = ["NUMPY_FROM_BYTES", "numpy_while_reading", "settle"]

#: Files from this size on are read by the pre-pass (``template_scan.MIN_BYTES``, tested equal).
NUMPY_FROM_BYTES = 4 << 20

_thread: threading.Thread | None = None


def _import_numpy() -> None:
    with contextlib.suppress(ImportError):  # (the pre-pass then says so in its own words)
        import numpy  # noqa: F401


def numpy_while_reading() -> None:
    """Start importing numpy in a thread (once per process; nothing when it is imported already)."""
    global _thread
    import sys

    if _thread is None and "numpy" not in sys.modules:
        _thread = threading.Thread(target=_import_numpy, name="forensics-preload", daemon=True)
        _thread.start()


def settle() -> None:
    """Wait until the import started by :func:`numpy_while_reading` is done (at once if none)."""
    if _thread is not None:
        _thread.join()
