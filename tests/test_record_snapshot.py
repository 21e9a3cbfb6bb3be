"""The host snapshot writes nothing secret: pip freeze of VCS requirements keeps no credentials."""

from __future__ import annotations

import stat
from pathlib import Path

from forensics.record import snapshot

FAKE_PYTHON = """#!/bin/sh
if [ "$2" = "pip" ]; then
  echo "torch==2.11.0"
  echo "mylib @ git+https://alice:ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/org/mylib.git@abc123"
  exit 0
fi
echo '{"torch": "2.11.0"}'
"""


def test_pip_freeze_credentials_are_redacted(tmp_path: Path) -> None:
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    assert snapshot.main([str(bundle), str(python)]) == 0
    freeze = (bundle / "host" / "pip-freeze.txt").read_text()
    assert "torch==2.11.0" in freeze
    assert "github.com/org/mylib.git" in freeze
    assert "alice" not in freeze and "ghp_" not in freeze
