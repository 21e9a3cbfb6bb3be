"""PyTorch's own forensics, armed in the child's environment unless the user set them.

Names checked against the PyTorch sources (torch/csrc/distributed/c10d/FlightRecorder.hpp,
FlightRecorder.cpp, ProcessGroupNCCL.hpp; torch/distributed/elastic/multiprocessing/errors):

``TORCH_FR_BUFFER_SIZE`` / ``TORCH_NCCL_TRACE_BUFFER_SIZE``
    entries in the NCCL flight recorder's ring buffer. torch 2.2–2.6 read only the second (default 0:
    off); from 2.7 the flight recorder reads the first and takes the second as a deprecated alias,
    printing ``... is deprecated; use TORCH_FR_BUFFER_SIZE instead`` on every rank when it is set.
    The recorder asks the child's Python which torch it has (its installed metadata, without
    importing torch: :func:`child_torch_version`) and sets the one name that version reads, never
    a deprecated one; unless either name is set.
``TORCH_NCCL_DUMP_ON_TIMEOUT``
    dump the flight recorder when the watchdog sees a collective time out (needs the
    monitoring thread, on by default, and a buffer size above 0). Not renamed.
``TORCH_FR_DUMP_TEMP_FILE`` / ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``
    the dump's file prefix (one file per rank: prefix + rank), by the same rule; an absolute path
    into ``<bundle>/torch/`` (a child that changes directory, as Hydra does, still writes there).
``TORCHELASTIC_ERROR_FILE``
    where ``@record``-decorated entry points write their exception as JSON. torchrun's
    agent gives each worker its own file and, when a worker fails, copies the first
    failure into *its own* ``TORCHELASTIC_ERROR_FILE`` — this one, in the bundle.
``PYTHONFAULTHANDLER``
    Python prints every thread's stack on SIGSEGV/SIGFPE/SIGABRT/SIGBUS/SIGILL.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["FR_SINCE", "TORCH_DIR", "arm_env", "child_torch_version", "fr_names"]

TORCH_DIR = "torch"
FR_SINCE = (2, 7)  # the first torch whose flight recorder reads TORCH_FR_* (the TORCH_NCCL_* names deprecated)
_ASK = ("import importlib.metadata as m\ntry:\n    print(m.version('torch'))\n"
        "except m.PackageNotFoundError:\n    print('')\n")
_ASK_TIMEOUT_S = 3.0


def child_torch_version(python: str, env: Mapping[str, str]) -> str | None:
    """The torch version installed for ``python`` (``''``: none; ``None``: could not tell), read from its
    package metadata: torch is never imported (that takes seconds). Asked in this process when the
    child runs this very interpreter, else of the child's interpreter in a subprocess (tens of ms)."""
    try:
        same = os.path.realpath(python) == os.path.realpath(sys.executable) and \
            env.get("PYTHONPATH") == os.environ.get("PYTHONPATH")
    except OSError:
        same = False
    if same:
        import importlib.metadata as metadata

        try:
            return metadata.version("torch")
        except metadata.PackageNotFoundError:
            return ""
    try:
        res = subprocess.run([python, "-c", _ASK], capture_output=True, timeout=_ASK_TIMEOUT_S, env=dict(env),
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode != 0:
        return None
    return res.stdout.decode(errors="replace").strip()


def _parse(version: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m[1]), int(m[2])) if m else None


def fr_names(torch_version: str | None) -> tuple[str, str]:
    """(buffer size, dump file prefix): the names ``torch_version`` reads without a deprecation warning.
    Unknown or no torch: the current names (an older torch then keeps its flight recorder off, as it
    was; a current one warns about nothing)."""
    parsed = _parse(torch_version or "")
    if parsed is not None and parsed < FR_SINCE:
        return "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
    return "TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE"


def arm_env(env: Mapping[str, str], bundle: Path, torch_version: str | None = None) -> dict[str, str]:
    """The variables to add to ``env`` (never overriding one the user set); every path absolute."""
    torch_dir = Path(os.path.abspath(bundle)) / TORCH_DIR
    buffer_name, dump_name = fr_names(torch_version)
    add: dict[str, str] = {}
    if "TORCH_NCCL_TRACE_BUFFER_SIZE" not in env and "TORCH_FR_BUFFER_SIZE" not in env:
        add[buffer_name] = "2000"
    if "TORCH_NCCL_DUMP_ON_TIMEOUT" not in env:
        add["TORCH_NCCL_DUMP_ON_TIMEOUT"] = "1"
    if "TORCH_FR_DUMP_TEMP_FILE" not in env and "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" not in env:
        add[dump_name] = str(torch_dir / "flight-recorder-rank-")
    if "TORCHELASTIC_ERROR_FILE" not in env:
        add["TORCHELASTIC_ERROR_FILE"] = str(torch_dir / "elastic-error.json")
    if "PYTHONFAULTHANDLER" not in env:
        add["PYTHONFAULTHANDLER"] = "1"
    return add
