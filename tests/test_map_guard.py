"""A mapped log cut short under the analysis (forensics/ingest/map_guard.py): one clear line and exit 2,
not a bare ``Bus error``; no worker left behind; the status passed on when nothing goes wrong.

The real command line, run with the mapping threshold lowered (and the workers' threshold, so
that the pre-pass forks its workers too) to keep the file small."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from leftovers import no_leftovers  # noqa: F401  (a fixture)

from forensics.ingest.map_guard import mapped_inputs

pytestmark = [pytest.mark.usefixtures("no_leftovers"),
              pytest.mark.skipif(not hasattr(os, "fork") or not Path("/proc/self/maps").exists(),
                                 reason="fork and /proc")]

DRIVER = """
import sys
from forensics.ingest import map_guard, sources
from forensics.parsers.common import template_scan
sources.MAP_MIN_BYTES = map_guard.MAP_MIN_BYTES = template_scan.PARALLEL_MIN_BYTES = 1 << 20
from forensics.cli import main
sys.exit(main())
"""


def _big_log(path: Path) -> Path:
    """~24 MiB of NCCL and training chatter with one GPU falling off the bus near the end."""
    lines = [f"node1:{100 + i % 8}:{200 + i % 8} [{i % 8}] NCCL INFO Channel {i % 32:02d}/0 : {i % 8}[{i % 8}] -> "
             f"{(i + 1) % 8}[{(i + 1) % 8}] via P2P/CUMEM/read step {i}\n" for i in range(240_000)]
    lines.insert(230_000, "[ 4242.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n")
    path.write_text("".join(lines))
    return path


def _analyze(log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "FORENSICS_SCAN_WORKERS": "2"}
    return subprocess.Popen([sys.executable, "-c", DRIVER, "analyze", str(log)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat[stat.rfind(")") + 2:].split()[1])
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        kids = [p for p, parent in parents.items() if parent == pid and p not in found]
        found.update(kids)
        todo.extend(kids)
    return found


def _wait_until_mapped(proc: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        for pid in _descendants(proc.pid):
            try:
                if str(log) in Path(f"/proc/{pid}/maps").read_text():
                    return
            except OSError:
                continue
        time.sleep(0.005)
    raise AssertionError("the log was never mapped")


@pytest.mark.slow
def test_a_log_cut_short_while_mapped_is_said_in_one_line(tmp_path: Path) -> None:
    log = _big_log(tmp_path / "train.log")
    proc = _analyze(log)
    _wait_until_mapped(proc, log)
    os.truncate(log, 1 << 10)  # copytruncate
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert err.splitlines() == [f"forensics: {log}: the file shrank while it was being read "
                                "(rotated with copytruncate?); analyze a copy of it"]
    assert out == ""


@pytest.mark.slow
def test_a_mapped_log_left_alone_gives_the_verdict_and_its_status(tmp_path: Path) -> None:
    proc = _analyze(_big_log(tmp_path / "train.log"))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "ROOT CAUSE: GPU fell off the PCIe bus (Xid 79)" in out, err


@pytest.mark.slow
def test_a_terminated_guard_terminates_the_analysis(tmp_path: Path) -> None:
    log = _big_log(tmp_path / "train.log")
    proc = _analyze(log)
    _wait_until_mapped(proc, log)
    proc.send_signal(signal.SIGTERM)  # to the guard, which passes it on
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM


def test_the_inputs_that_will_be_mapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from forensics.ingest import map_guard

    monkeypatch.setattr(map_guard, "MAP_MIN_BYTES", 100)
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "stdout.log").write_bytes(b"x" * 150)
    (tmp_path / "bundle" / "manifest.json").write_bytes(b"{}")
    (tmp_path / "big.log").write_bytes(b"y" * 100)
    (tmp_path / "small.log").write_bytes(b"z" * 99)
    named = [str(tmp_path / "bundle"), str(tmp_path / "big.log"), str(tmp_path / "small.log"), "-",
             str(tmp_path / "missing.log")]
    assert mapped_inputs(named) == {str(tmp_path / "bundle" / "stdout.log"): 150, str(tmp_path / "big.log"): 100}
