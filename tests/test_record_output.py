"""The recorder leaves the run as it was: lines whole when stdout and stderr share a file, the order the
child wrote them, and an end that waits for nothing (the host snapshot finishes on its own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from recorder_helpers import bundle, env, manifest, recorder_argv

from forensics.record.lineorder import LineOrder

PY = sys.executable


def _order() -> tuple[LineOrder, list[tuple[int, bytes]]]:
    out: list[tuple[int, bytes]] = []
    return LineOrder(lambda key, data: out.append((key, data)), hold_s=0.05), out


def test_a_line_in_two_pieces_is_not_cut_by_the_other_stream() -> None:
    order, out = _order()
    order.add(0, b"step 3/5 loss=1.000", now=0.0)
    order.add(1, b"[rank0] progress 60%\n", now=0.001)
    assert out == []  # the unfinished stdout line holds what came after it
    order.add(0, b"\nstep 4/5", now=0.002)
    assert out == [(0, b"step 3/5 loss=1.000\n"), (1, b"[rank0] progress 60%\n")]
    order.add(0, b" loss=0.5\n", now=0.003)
    assert out[-1] == (0, b"step 4/5 loss=0.5\n")


def test_an_unfinished_line_goes_out_after_the_hold_and_owns_the_output() -> None:
    order, out = _order()
    order.add(0, b"Password: ", now=0.0)
    order.pump(0.049)
    assert out == []
    order.pump(0.05)
    assert out == [(0, b"Password: ")] and order.owner == 0
    assert order.next_deadline() is None
    order.add(0, b"\n", now=0.2)
    assert out[-1] == (0, b"\n") and order.owner is None


def test_carriage_returns_end_a_piece_and_flush_passes_everything() -> None:
    order, out = _order()
    order.add(1, b"\r 10%|#  |\r 20%|## ", now=0.0)
    assert out == [(1, b"\r 10%|#  |\r")]
    order.add(0, b"partial", now=0.01)
    order.flush()
    assert out[1:] == [(1, b" 20%|## "), (0, b"partial")]
    assert order.held == 0


SPLIT_WRITER = """
import os, sys, time
for i in range(int(sys.argv[1])):
    os.write(1, b"step %d/20 loss=1.000 tok/s=12000" % i)  # the text ...
    time.sleep(0.01)  # ... the child is descheduled ...
    os.write(1, b"\\n")  # ... the newline
    os.write(2, b"[rank0] progress %d%%\\n" % (5 * i))
"""
HOG = "import time\nend = time.monotonic() + 120\nwhile time.monotonic() < end:\n    pass\n"


def test_no_line_is_spliced_in_a_shared_file_under_a_cpu_hog(tmp_path: Path) -> None:
    """``forensics record -- CMD > log 2>&1`` while CPU hogs compete: every line whole and each stream's lines
    in order. (Which of two lines of different streams went first is known to the recorder only when it
    read them in different rounds: bench/bench_splice.py counts both over hundreds of runs.)"""
    hogs = [subprocess.Popen([PY, "-c", HOG]) for _ in range(os.cpu_count() or 2)]
    out_lines = [b"step %d/20 loss=1.000 tok/s=12000" % i for i in range(20)]
    err_lines = [b"[rank0] progress %d%%" % (5 * i) for i in range(20)]
    try:
        for n in range(3):
            log = tmp_path / f"out-{n}.log"
            with log.open("wb") as fh:
                res = subprocess.run(recorder_argv(tmp_path / f"r{n}", PY, "-c", SPLIT_WRITER, "20"), stdout=fh,
                                     stderr=subprocess.STDOUT, env=env(), stdin=subprocess.DEVNULL, timeout=120)
            assert res.returncode == 0
            lines = log.read_bytes().split(b"\n")
            assert lines[-1] == b""
            assert [ln for ln in lines if ln.startswith(b"step")] == out_lines  # none cut, none glued
            assert [ln for ln in lines if ln.startswith(b"[rank0]")] == err_lines
            assert len(lines) == 41
            b = bundle(tmp_path / f"r{n}")  # each stream's file is its own, byte for byte
            assert (b / "stdout.log").read_bytes() == b"".join(ln + b"\n" for ln in out_lines)
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def test_separate_destinations_are_passed_on_at_once(tmp_path: Path) -> None:
    """stdout and stderr to two files: nothing to keep apart, so nothing is held (a prompt shows at once)."""
    out, err = tmp_path / "o", tmp_path / "e"
    child = "import sys\nsys.stdout.write('Continue? '); sys.stdout.flush(); sys.stderr.write('warn\\n')"
    with out.open("wb") as o, err.open("wb") as e:
        res = subprocess.run(recorder_argv(tmp_path / "r", PY, "-c", child), stdout=o, stderr=e, env=env(),
                             stdin=subprocess.DEVNULL, timeout=60)
    assert res.returncode == 0 and out.read_bytes() == b"Continue? " and err.read_bytes() == b"warn\n"


FAKE_PYTHON = """#!/bin/sh
# stands in for the child's python: the snapshot asks it for versions and pip freeze, each taking a second
case "$1" in
  -c) sleep 1; echo '{"python": "3.11.0", "torch": null}' ;;
  -m) sleep 1; echo 'pkg==1.0' ;;
  *) exit 0 ;;
esac
"""


def test_an_unfinished_snapshot_finishes_in_the_background(tmp_path: Path) -> None:
    """The child ends at once, the snapshot's commands take seconds: the recorder returns without them, the
    manifest says ``background``, and the snapshot still writes everything, ``snapshot.json`` last."""
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    res = subprocess.run(recorder_argv(tmp_path / "out", str(fake), "run"), capture_output=True,
                         stdin=subprocess.DEVNULL, env=env(FORENSICS_SNAPSHOT_END="background"), timeout=60)
    assert res.returncode == 0
    info = manifest(tmp_path / "out")["sources"]["host_snapshot"]
    assert info["status"] == "background" and "snapshot.json" in info["reason"]
    for _ in range(2400):  # it ends on its own (idle priority: on a busy machine it waits for a free CPU)
        try:
            os.kill(info["pid"], 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    host = bundle(tmp_path / "out") / "host"
    data = json.loads((host / "snapshot.json").read_text())
    assert data["finished_after_the_child"]["finished_ns"] >= data["finished_after_the_child"]["since_ns"]
    assert (host / "pip-freeze.txt").read_text() == "pkg==1.0\n"
