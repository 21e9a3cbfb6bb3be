"""``forensics watch``: real logs written while a real ``forensics watch`` process follows them, rotated
both ways and joined by new files; a bundle being recorded; bad input is one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.live_fixture import OOM, STEPS, LiveBundle

pytestmark = pytest.mark.slow

NCCL = ("[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=161, OpType=ALLREDUCE, NumelIn=16777216, NumelOut=16777216, Timeout(ms)=600000) ran for "
        "600006 milliseconds before timing out.\n")


def _watch(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "forensics", "watch", "--format", "json", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _started(proc: subprocess.Popen[str]) -> None:
    """Give the watcher its start (imports, the signatures: a few seconds) before the log moves on."""
    time.sleep(6)
    assert proc.poll() is None


def test_rotated_logs_and_new_files_are_followed(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    train = logs / "train.log"
    train.write_text(STEPS)
    proc = _watch(str(logs), "--duration", "40")
    _started(proc)
    os.rename(train, logs / "train.log.1")  # logrotate's create: renamed, a new file begun
    train.write_text(STEPS)
    time.sleep(3)
    with open(train, "r+") as fh:  # copytruncate
        fh.truncate(0)
    with open(train, "a") as fh:
        fh.write(STEPS)
    time.sleep(3)
    (logs / "rank1.log").write_text(NCCL)  # a new file in the directory
    time.sleep(4)
    with open(train, "a") as fh:
        fh.write(OOM)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 1, err
    alerts = [json.loads(line) for line in out.splitlines()]
    origins = [a["evidence"][0]["origin"] for a in alerts if a["evidence"]]
    assert any("rank1.log" in o for o in origins), alerts
    assert any(a["signature"] == "torch-cuda-oom" for a in alerts), alerts
    oom = next(a for a in alerts if a["signature"] == "torch-cuda-oom")
    # the traceback starts where it is in the truncated file: after the 30 step lines written since then
    assert oom["evidence"][0]["origin"].endswith("train.log:" + str(len(STEPS.splitlines()) + 1)), oom["evidence"]


def test_a_bundle_being_recorded_is_watched_until_it_finishes(tmp_path: Path) -> None:
    with LiveBundle(tmp_path / "run") as run:
        run.append("stdout", STEPS)
        proc = _watch(str(run.path), "--exit-when-done", "--jsonl", str(tmp_path / "alerts.jsonl"))
        time.sleep(6)
        run.append("stderr", OOM)
        time.sleep(4)
        run.finish(1)
        out, err = proc.communicate(timeout=90)
    assert proc.returncode == 1, err
    [alert] = [json.loads(line) for line in out.splitlines()]
    assert alert["signature"] == "torch-cuda-oom"
    assert alert["detected_after_s"] is not None and alert["detected_after_s"] < 4
    assert json.loads((tmp_path / "alerts.jsonl").read_text())["id"] == alert["id"]


@pytest.mark.parametrize("args, words", [
    (["/nowhere/at/all.log"], "no such file or directory"),
    (["-"], "not standard input"),
    (["{tmp}", "--notify", "not-a-url"], "Apprise URL"),
    (["{tmp}", "--stall-after", "0"], "--stall-after"),
    (["{tmp}", "--duration", "-1"], "--duration"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], words: str) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = subprocess.run([sys.executable, "-m", "forensics", "watch", *argv], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and words in proc.stderr and "Traceback" not in proc.stderr


def test_a_bundle_that_appears_in_a_watched_directory_is_read_as_a_bundle(tmp_path: Path) -> None:
    runs = tmp_path / "forensics-runs"
    runs.mkdir()
    proc = _watch(str(runs), "--duration", "25")
    _started(proc)
    with LiveBundle(runs / "node-1-20261204T100000Z-1") as run:  # a new recording starts there
        run.append("stdout", STEPS)
        time.sleep(4)
        run.append("stderr", OOM)
        time.sleep(6)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 1, err
    [alert] = [json.loads(line) for line in out.splitlines()]
    assert alert["signature"] == "torch-cuda-oom"
    assert alert["evidence"][0]["source"] == "stderr"  # tagged as the bundle's stream, not a loose file
