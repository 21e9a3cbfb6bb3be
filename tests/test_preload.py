"""numpy is imported beside the read of a file the pre-pass will read, and only then."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from forensics.parsers.common import template_scan

from forensics.ingest import preload

PROBE = """
import sys
from forensics.ingest import preload, sources
items = list(sources.expand_inputs([sys.argv[1]]))
started = preload._thread is not None
preload.settle()
print(started, "numpy" in sys.modules, len(items[0].raw))
"""


def _probe(path: Path) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_the_threshold_is_the_pre_pass_one() -> None:
    assert preload.NUMPY_FROM_BYTES == template_scan.MIN_BYTES


@pytest.mark.slow
def test_a_big_file_has_numpy_imported_beside_its_read(tmp_path: Path) -> None:
    big = tmp_path / "big.log"
    big.write_bytes(b"step 1 loss 2.0\n" * (preload.NUMPY_FROM_BYTES // 16 + 1))
    assert _probe(big) == ["True", "True", str(big.stat().st_size)]


def test_a_small_file_imports_nothing(tmp_path: Path) -> None:
    small = tmp_path / "small.log"
    small.write_bytes(b"step 1 loss 2.0\n" * 1000)
    assert _probe(small) == ["False", "False", "16000"]
