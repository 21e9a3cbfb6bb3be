"""The exception tree of gpu-forensics.

::

    ForensicsError                 anything this package raises on purpose
    ├── UsageError                 the user asked for something impossible (bad flag, missing path)
    ├── InputError                 an input could not be read (unreadable file, corrupt archive)
    │   └── ArchiveError           an archive is unsafe or over its caps
    ├── SignatureError             a signature file is invalid (names the file and line)
    └── RecordError                the recorder could not start (bad --out, command not found)

The CLI turns every ``ForensicsError`` into one line on stderr and a non-zero
exit status; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

__all__ = [
    "ArchiveError",
    "ForensicsError",
    "InputError",
    "RecordError",
    "SignatureError",
    "UsageError",
]


class ForensicsError(Exception):
    """Base of every error gpu-forensics raises on purpose."""

    exit_code = 2


class UsageError(ForensicsError):
    """The command line asked for something that cannot be done."""


class InputError(ForensicsError):
    """An input file or directory could not be read."""


class ArchiveError(InputError):
    """An archive is unsafe (path traversal, links out) or over its size caps."""


class SignatureError(ForensicsError):
    """A signature file is invalid; the message names the file and line."""


class RecordError(ForensicsError):
    """The recorder could not start the run."""
