"""Test-session setup: the suite never reads or writes the user's own caches."""

from __future__ import annotations

import os
import tempfile

# The compiled-signature cache (forensics/match/loader.py) goes to a fresh directory per test session,
# so a stale cache in ~/.cache can neither hide nor cause a failure here.
os.environ["FORENSICS_CACHE_DIR"] = tempfile.mkdtemp(prefix="forensics-test-cache-")
