"""One clear line, not a bare ``Bus error``, when a mapped log is cut short under the analysis.

Files from :data:`forensics.ingest.filemap.MAP_MIN_BYTES` on are mapped, not read; when such a file is
truncated while it is mapped (``logrotate``'s ``copytruncate``, a collector rewriting it), reading a
page past its new end raises ``SIGBUS``, which no Python code can catch: the process dies. So when
an input that big is named, :func:`guard` forks before anything is read: the child does the work,
with the terminal and the standard streams as they were; the parent only waits, passes ``SIGTERM``
and ``SIGHUP`` on (the terminal's ``Ctrl-C`` reaches the child itself), and exits with the child's
status — or, if the child died of ``SIGBUS``, says which file shrank and exits with
:data:`EXIT_SHRANK`.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterable

from forensics.ingest.filemap import MAP_MIN_BYTES
from forensics.orphans import die_with

__all__ = ["EXIT_SHRANK", "guard", "mapped_inputs"]

#: The exit status after a mapped input shrank under the analysis (as for other bad input).
EXIT_SHRANK = 2


def mapped_inputs(paths: Iterable[str]) -> dict[str, int]:
    """The regular files among ``paths`` (directories walked) big enough to be mapped: path -> size
    (a compressed one among them is read instead; guarding it costs a fork, nothing more)."""
    found: dict[str, int] = {}
    for path in paths:
        if path == "-":
            continue
        if os.path.isdir(path):
            for root, _, names in os.walk(path):
                for name in names:
                    _note_if_big(os.path.join(root, name), found)
        else:
            _note_if_big(path, found)
    return found


def _note_if_big(path: str, found: dict[str, int]) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    if st.st_size >= MAP_MIN_BYTES and os.path.isfile(path):
        found[path] = st.st_size


def guard(paths: Iterable[str]) -> None:
    """Return in a child process that does the work, when an input will be mapped (see the module
    docstring); else return at once. The parent never returns: it exits with the child's status."""
    sizes = mapped_inputs(paths)
    if not sizes or not hasattr(os, "fork"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        die_with(parent)  # the parent SIGKILLed (``timeout -s KILL``): so is the work
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal sends it to the child as well
    for passed_on in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(passed_on, lambda signum, _frame: os.kill(pid, signum))
    _, status = os.waitpid(pid, 0)
    os._exit(_outcome(status, sizes))


def _outcome(status: int, sizes: dict[str, int]) -> int:
    """The parent's exit status for the child's ``status``; the line to say when a file shrank."""
    if not os.WIFSIGNALED(status):
        return os.waitstatus_to_exitcode(status)
    signum = os.WTERMSIG(status)
    if signum == signal.SIGBUS:
        shrank = [path for path, size in sizes.items() if _size(path) < size] or list(sizes)
        sys.stderr.write(f"forensics: {', '.join(shrank)}: the file shrank while it was being read "
                         "(rotated with copytruncate?); analyze a copy of it\n")
        sys.stderr.flush()
        return EXIT_SHRANK
    return 128 + signum


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1
