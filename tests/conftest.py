"""Test-session setup: the suite never reads or writes the user's own caches, and leaves no folder behind."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pytest

# The compiled-signature cache (forensics/match/loader.py) goes to a fresh directory per test process
# (each xdist worker has its own), so a stale cache in ~/.cache can neither hide nor cause a failure here;
# pytest_unconfigure removes it.
_CACHE_DIR = tempfile.mkdtemp(prefix="forensics-test-cache-")
os.environ["FORENSICS_CACHE_DIR"] = _CACHE_DIR

# pytest keeps the assertion-rewritten test modules only where bytecode may be written; with
# PYTHONDONTWRITEBYTECODE=1 (this project's shells) it rewrote all ~110 modules on every run, about
# 15 s of CPU before the first test. The flag is lifted for this process only (children keep it).
sys.dont_write_bytecode = False


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)
