"""PyTorch's own forensics, armed in the child's environment unless the user set them.

Names checked against the PyTorch sources (torch/csrc/distributed/c10d/FlightRecorder.hpp,
FlightRecorder.cpp, ProcessGroupNCCL.hpp; torch/distributed/elastic/multiprocessing/errors):

``TORCH_NCCL_TRACE_BUFFER_SIZE``
    entries in the NCCL flight recorder's ring buffer. Read by every torch since 2.2;
    newer ones read ``TORCH_FR_BUFFER_SIZE`` first and default to 2000, older ones
    default to 0 (off). Set to 2000 unless either name is set.
``TORCH_NCCL_DUMP_ON_TIMEOUT``
    dump the flight recorder when the watchdog sees a collective time out (needs the
    monitoring thread, on by default, and a buffer size above 0).
``TORCH_FR_DUMP_TEMP_FILE`` / ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``
    the dump's file prefix (one file per rank: prefix + rank). Newer torch reads the
    first, older the second; both point into ``<bundle>/torch/`` unless either is set.
``TORCHELASTIC_ERROR_FILE``
    where ``@record``-decorated entry points write their exception as JSON. torchrun's
    agent gives each worker its own file and, when a worker fails, copies the first
    failure into *its own* ``TORCHELASTIC_ERROR_FILE`` — this one, in the bundle.
``PYTHONFAULTHANDLER``
    Python prints every thread's stack on SIGSEGV/SIGFPE/SIGABRT/SIGBUS/SIGILL.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = ["TORCH_DIR", "arm_env"]

TORCH_DIR = "torch"


def arm_env(env: Mapping[str, str], bundle: Path) -> dict[str, str]:
    """The variables to add to ``env`` (never overriding one the user set)."""
    torch_dir = bundle / TORCH_DIR
    fr_prefix = str(torch_dir / "flight-recorder-rank-")
    add: dict[str, str] = {}
    if "TORCH_NCCL_TRACE_BUFFER_SIZE" not in env and "TORCH_FR_BUFFER_SIZE" not in env:
        add["TORCH_NCCL_TRACE_BUFFER_SIZE"] = "2000"
    if "TORCH_NCCL_DUMP_ON_TIMEOUT" not in env:
        add["TORCH_NCCL_DUMP_ON_TIMEOUT"] = "1"
    if "TORCH_FR_DUMP_TEMP_FILE" not in env and "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" not in env:
        add["TORCH_FR_DUMP_TEMP_FILE"] = fr_prefix
        add["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] = fr_prefix
    if "TORCHELASTIC_ERROR_FILE" not in env:
        add["TORCHELASTIC_ERROR_FILE"] = str(torch_dir / "elastic-error.json")
    if "PYTHONFAULTHANDLER" not in env:
        add["PYTHONFAULTHANDLER"] = "1"
    return add
