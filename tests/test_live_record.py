"""``forensics record`` watches by default: scripted CPU children (samples/scenarios/cpu_live.py) under
a real recorder, the watcher a real process; alerts in live.jsonl, on the terminal (a real pty)
between the child's lines, never on a piped stderr unless --announce."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.recorder_helpers import bundle, env, jsonl, manifest, read_until, recorder_argv, run

pytestmark = pytest.mark.slow

CHILD = str(Path(__file__).resolve().parents[1] / "samples" / "scenarios" / "cpu_live.py")
LIVE = {"FORENSICS_LIVE_FINAL_S": "8"}  # a short run: the watcher gets time for its last look


def _child(*args: str) -> tuple[str, ...]:
    return (sys.executable, CHILD, *args)


def _fault_ns(b: Path) -> int:
    line = next(ln for ln in (b / "stderr.log").read_text().splitlines() if ln.startswith("FAULT "))
    return int(line.split()[1])


def test_a_rank_that_raises_is_told_with_its_rank_and_the_first_remedy(tmp_path: Path) -> None:
    proc = run(tmp_path, *_child("--mode", "raise", "--exc", "oom", "--rank", "2", "--steps", "40",
                                 "--fault-at", "15", "--step", "0.2"), timeout=120, **LIVE)
    assert proc.returncode == 1  # the child's own status, unchanged
    b = bundle(tmp_path)
    alerts = jsonl(b / "live.jsonl")
    oom = [a for a in alerts if a["signature"] == "torch-cuda-oom"]
    assert oom, alerts
    a = oom[0]
    assert a["kind"] == "new" and a["format"] == "gpu-forensics-live"
    assert "rank 2" in a["culprit"] or a["culprits"]["rank"] == ["2"], a
    assert a["remedy"] and "/stderr.log:" in a["evidence"][0]["origin"]
    assert a["time_ns"] >= _fault_ns(b)
    assert manifest(tmp_path)["sources"]["live"]["status"] == "ok"
    # what analyze says afterwards is what was told
    out = subprocess.run([sys.executable, "-m", "forensics", "analyze", "--format", "json", str(b)],
                         capture_output=True, env=env(), timeout=120)
    assert json.loads(out.stdout)["verdict"]["root_cause"] == "torch-cuda-oom"


def test_a_rank_that_stops_while_the_others_go_on_is_named(tmp_path: Path) -> None:
    proc = run(tmp_path, *_child("--mode", "stop", "--rank", "3", "--steps", "90", "--fault-at", "15",
                                 "--step", "0.2"), timeout=120, extra=("--stall-after", "6"), **LIVE)
    assert proc.returncode == 0
    alerts = jsonl(bundle(tmp_path) / "live.jsonl")
    stall = [a for a in alerts if a["signature"] == "silent-worker-stall" and a["kind"] == "new"]
    assert stall, alerts
    assert stall[0]["culprits"]["rank"] == ["3"], stall[0]


def test_throughput_that_halves_is_told(tmp_path: Path) -> None:
    run(tmp_path, *_child("--mode", "halve", "--ranks", "1", "--steps", "45", "--fault-at", "20", "--step", "0.15"),
        timeout=120, **LIVE)
    alerts = jsonl(bundle(tmp_path) / "live.jsonl")
    assert [a["signature"] for a in alerts if a["kind"] == "new"] == ["throughput-collapse"], alerts


def test_a_healthy_child_raises_nothing_and_no_watch_runs_none(tmp_path: Path) -> None:
    proc = run(tmp_path / "a", *_child("--mode", "healthy", "--steps", "30", "--step", "0.1"), timeout=120, **LIVE)
    assert proc.returncode == 0
    b = bundle(tmp_path / "a")
    assert not (b / "live.jsonl").exists() or jsonl(b / "live.jsonl") == []
    proc = run(tmp_path / "b", *_child("--mode", "raise", "--steps", "10", "--fault-at", "2", "--step", "0.05"),
               extra=("--no-watch",), timeout=120)
    assert proc.returncode == 1
    b = bundle(tmp_path / "b")
    assert not (b / "live.jsonl").exists() and not (b / "live.log").exists()
    assert "live" not in manifest(tmp_path / "b")["sources"]


def test_piped_stderr_stays_the_childs_own_unless_announce(tmp_path: Path) -> None:
    args = _child("--mode", "raise", "--steps", "30", "--fault-at", "10", "--step", "0.1", "--ranks", "2")
    quiet = run(tmp_path / "q", *args, timeout=120, **LIVE)
    assert b"forensics ALERT" not in quiet.stderr
    assert quiet.stderr == (bundle(tmp_path / "q") / "stderr.log").read_bytes()
    told = run(tmp_path / "t", *args, extra=("--announce",), timeout=120, **LIVE)
    assert b"forensics ALERT" in told.stderr


def test_on_a_terminal_the_alert_is_one_line_between_the_childs_lines(tmp_path: Path) -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the recorder on a real terminal
        os.environ.update(env(NO_COLOR="1", **LIVE))
        argv = recorder_argv(tmp_path, *_child("--mode", "raise", "--steps", "40", "--fault-at", "12",
                                               "--step", "0.15", "--ranks", "2"))
        os.execv(argv[0], argv)
    out = read_until(fd, b"bundle written to", timeout=90)
    os.waitpid(pid, 0)
    lines = out.replace(b"\r\n", b"\n").split(b"\n")
    told = [ln for ln in lines if b"forensics ALERT" in ln]
    assert told, out[-2000:]
    assert all(ln.startswith(b"forensics ALERT") for ln in told)  # never inside a line of the child's
    assert all(b"[rank" not in ln for ln in told)


def test_a_hung_or_failing_channel_changes_nothing_for_the_child(tmp_path: Path) -> None:
    args = _child("--mode", "raise", "--steps", "20", "--fault-at", "5", "--step", "0.1", "--ranks", "2")
    extra = ("--notify-cmd", "sleep 300", "--notify-cmd", "exit 3")
    t0 = time.monotonic()
    proc = run(tmp_path, *args, extra=extra, timeout=120, FORENSICS_LIVE_FINAL_S="3")
    took = time.monotonic() - t0
    assert proc.returncode == 1
    b = bundle(tmp_path)
    assert proc.stdout == (b / "stdout.log").read_bytes()
    assert took < 60  # the recorder ended within its own deadlines, not when `sleep 300` would have
    assert jsonl(b / "live.jsonl")  # the file channel has the alert whatever the others did


def test_a_checkpoint_save_longer_than_the_stall_threshold_is_not_a_stall(tmp_path: Path) -> None:
    # every rank stops for 12 s at steps 20 and 40 while rank 0 says it saves a checkpoint (threshold 6 s)
    run(tmp_path / "save", *_child("--mode", "healthy", "--steps", "50", "--step", "0.2", "--pause", "12",
                                   "--pause-every", "20"), extra=("--stall-after", "6"), timeout=180, **LIVE)
    b = bundle(tmp_path / "save")
    assert not (b / "live.jsonl").exists() or jsonl(b / "live.jsonl") == []
    # the same silence without the line saying why is told
    run(tmp_path / "hang", *_child("--mode", "hang", "--steps", "50", "--step", "0.2", "--fault-at", "20",
                                   "--hang-for", "14"), extra=("--stall-after", "6"), timeout=180, **LIVE)
    told = [a["signature"] for a in jsonl(bundle(tmp_path / "hang") / "live.jsonl") if a["kind"] == "new"]
    assert "silent-worker-stall" in told
