"""The host snapshot writes nothing secret: pip freeze of VCS requirements keeps no credentials."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from forensics.record import snapshot

FAKE_PYTHON = """#!/bin/sh
if [ "$2" = "pip" ]; then
  echo "torch==2.11.0"
  echo "mylib @ git+https://alice:ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/org/mylib.git@abc123"
  exit 0
fi
echo '{"torch": "2.11.0"}'
"""


def _snapshot(tmp_path: Path) -> Path:
    """Run the snapshot into ``tmp_path/bundle`` with the fake interpreter; the bundle."""
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    assert snapshot.main([str(bundle), str(python)]) == 0
    return bundle


def test_pip_freeze_credentials_are_redacted(tmp_path: Path) -> None:
    bundle = _snapshot(tmp_path)
    freeze = (bundle / "host" / "pip-freeze.txt").read_text()
    assert "torch==2.11.0" in freeze
    assert "github.com/org/mylib.git" in freeze
    assert "alice" not in freeze and "ghp_" not in freeze


FAKE_LSPCI = """#!/bin/sh
# replays a real laptop's lspci (tests/data/lspci_tree: the LPIC-1 post, see SOURCES.md)
case "$1" in
  -tvnn) tail -n +2 "{tree}" ;;
  -nn) tail -n +2 "{listing}" ;;
  *) exit 2 ;;
esac
"""


def test_the_pci_tree_is_captured_and_read_into_the_topology(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshot keeps ``lspci -tvnn`` / ``lspci -nn``; analyze reads them into the GPU's chain
    (the MX150 hangs on an Intel PCH root port: behind the chipset)."""
    data = Path(__file__).parent / "data" / "lspci_tree"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    lspci = bin_dir / "lspci"
    lspci.write_text(FAKE_LSPCI.format(tree=data / "lpic-laptop-mx150-tree.txt",
                                       listing=data / "lpic-laptop-mx150-lspci.txt"))
    lspci.chmod(lspci.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    bundle = _snapshot(tmp_path)
    tree = (bundle / "host" / "lspci-tree.txt").read_text()
    assert "GP108M [GeForce MX150]" in tree
    assert "Host bridge" in (bundle / "host" / "lspci.txt").read_text()
    from forensics.analysis import analyze

    facts = analyze([str(bundle / "host" / "lspci-tree.txt"), str(bundle / "host" / "lspci.txt")])
    assert facts.topology is not None
    chipset = [g for g in facts.topology.gpus if g.attachment == "chipset"]
    assert chipset, [(g.gpu, g.attachment) for g in facts.topology.gpus]


def test_no_lspci_is_said_in_the_snapshot_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    bundle = _snapshot(tmp_path)
    import json

    log = json.loads((bundle / "host" / "snapshot.json").read_text())["commands"]
    assert {"name": "lspci", "problem": "not installed"} in log
    assert not (bundle / "host" / "lspci-tree.txt").exists()
