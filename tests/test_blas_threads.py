"""The analyzer asks numpy's BLAS for one thread (its pool's spinning cost more CPU than reading a
100 MB log on a 16-CPU machine); the recorded command's environment is left as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from forensics import cli


def test_analyze_sets_one_blas_thread_unless_the_user_chose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "x.log"
    log.write_text("hello\n")
    for name in cli.BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    cli.main(["analyze", str(log), "--quiet"])
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1" and os.environ["OMP_NUM_THREADS"] == "1"
    assert os.environ["MKL_NUM_THREADS"] == "3"


@pytest.mark.slow
def test_the_recorded_command_keeps_its_own_blas_settings(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in cli.BLAS_THREAD_VARIABLES}
    res = subprocess.run([sys.executable, "-m", "forensics", "record", "--out", str(tmp_path), "--quiet", "--",
                          sys.executable, "-c", "import os; print(os.environ.get('OPENBLAS_NUM_THREADS', 'unset'))"],
                         env=env, capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == b"unset"
