"""The native Windows platform composed end to end on Linux: ``forensics record`` with
:class:`~forensics.record.platform.windows.WindowsPlatform` in place of the POSIX one, so the session,
the Windows child (pipes, blocking tees, no keeper), the NVML sampler with its page handed over by
path, the Windows snapshot and the host-event follower run together. Windows' own calls take their
POSIX stand-ins here (``creationflags`` 0, Ctrl-Break sent as SIGINT), the host's tools are the fakes
in tests/fakes replaying real outputs. This shows the parts fit; it is not a run on Windows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from leftovers import no_leftovers  # noqa: F401  (a fixture)
from recorder_helpers import bundle, jsonl, manifest
from recorder_helpers import env as recorder_env

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "fakes"
PY = sys.executable
pytestmark = pytest.mark.usefixtures("no_leftovers")
AS_WINDOWS = """
import os, sys
from forensics.record import session
from forensics.record.platform.windows import WindowsPlatform
session.current_platform = lambda env=None: WindowsPlatform(os.environ if env is None else env)
from forensics.cli import main
sys.exit(main(sys.argv[1:]))
"""
FAILS_LATER = ("import sys, time; print('step 1 loss 2.0', flush=True); time.sleep(6); "
               "print('RuntimeError: CUDA error: unknown error', file=sys.stderr); sys.exit(1)")


@pytest.mark.slow
def test_a_recording_on_the_windows_platform_holds_what_windows_gives(tmp_path: Path) -> None:
    (tmp_path / "replay").mkdir()
    shutil.copy(ROOT / "tests/data/windows/report1-p2p-sram.xml", tmp_path / "replay" / "report1.System.xml")
    shutil.copytree(ROOT / "tests/data/windows/cim", tmp_path / "cim")
    (tmp_path / "tmp").mkdir()
    env = recorder_env(
        FORENSICS_HOST_EVENTS="auto", PATH=f"{FAKES}{os.pathsep}/usr/bin:/bin", SystemRoot=str(tmp_path / "C"),
        FAKE_WEVTUTIL_REPLAY=str(tmp_path / "replay"), FAKE_WEVTUTIL_STATE=str(tmp_path / "fake.state"),
        FAKE_WEVTUTIL_DELAY_S="1", FORENSICS_HOST_EVENTS_POLL_S="0.4",
        FAKE_POWERSHELL_CIM=str(tmp_path / "cim"), FORENSICS_SNAPSHOT_PLATFORM="windows",
        FORENSICS_SNAPSHOT_WAIT_S="60", TMPDIR=str(tmp_path / "tmp"))
    out = tmp_path / "out"
    res = subprocess.run([PY, "-c", AS_WINDOWS, "record", "--out", str(out), "--interval", "0.05", "--", PY, "-c",
                          FAILS_LATER], capture_output=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert res.returncode == 1, res.stderr
    assert res.stdout == b"step 1 loss 2.0\n" and b"CUDA error: unknown error" in res.stderr
    b, m = bundle(out), manifest(out)
    assert m["platform"]["kind"] == "windows" and m["status"] == "finished" and m["exit_code"] == 1
    src = m["sources"]
    assert src["stdout"]["terminal"] == "pipe" and src["stdout"]["bytes"] == len(b"step 1 loss 2.0\n")
    assert src["kernel_log"] == {"status": "unavailable", "reason": "Windows has no kernel ring buffer to follow; "
                                 "its System log is read as host_events"}
    assert src["nvml"]["status"] == "ok" and len(jsonl(b / "nvml.jsonl")) > 10
    assert src["host_events"]["status"] == "ok" and src["host_events"]["via"] == "local"
    assert src["host_events"]["channels"]["System"]["events"] == 4
    assert src["host_snapshot"]["status"] == "ok"
    assert (b / "stdout.log").read_bytes() == b"step 1 loss 2.0\n"
    gpus = json.loads((b / "host" / "windows-gpus.json").read_text())["adapters"]
    assert gpus[0]["driver_version"] == "565.90"
    assert list((tmp_path / "tmp").glob("forensics-nvml-*.page")) == []
    verdict = subprocess.run([PY, "-m", "forensics", "analyze", "--format", "json", str(b)], capture_output=True,
                             text=True, timeout=120)
    assert json.loads(verdict.stdout)["verdict"]["root_cause"] == "p2p-sram-error"
