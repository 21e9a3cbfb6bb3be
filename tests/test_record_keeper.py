"""The keeper: when the recorder is SIGKILLed, the child runs on, its output still reaches the
terminal and the bundle, and nothing is left running after it."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from recorder_helpers import bundle, env, manifest, read_until, recorder_argv

from forensics.ingest.bundle import IDX_MAGIC, receipt_lookup

PY = sys.executable

# Prints for about a second, waits until the test has SIGKILLed the recorder (the go file), prints for
# about two seconds more on both streams, then leaves a note and exits 7. A write that fails (EPIPE,
# EIO) raises, so the note is only written when every line went out.
PRINTER = """
import os, sys, time
go, done = sys.argv[1], sys.argv[2]
for i in range(20):
    print(f"line {i}", flush=True)
    time.sleep(0.05)
for _ in range(3000):
    if os.path.exists(go):
        break
    time.sleep(0.01)
for i in range(20, 60):
    print(f"line {i}", flush=True)
    print(f"err {i}", file=sys.stderr, flush=True)
    time.sleep(0.05)
with open(done, "w") as fh:
    fh.write("finished, exit 7")
sys.exit(7)
"""
STDOUT = b"".join(b"line %d\n" % i for i in range(60))
STDERR = b"".join(b"err %d\n" % i for i in range(20, 60))
# On one terminal the child has one pseudo-terminal for both streams: stdout.log holds them in order.
MERGED = b"".join(b"line %d\n" % i for i in range(20)) + b"".join(b"line %d\nerr %d\n" % (i, i) for i in range(20, 60))


def _check_bundle(out: Path, merged: bool = False) -> None:
    b = bundle(out)
    streams = (("stdout", MERGED),) if merged else (("stdout", STDOUT), ("stderr", STDERR))
    for name, data in streams:
        assert (b / f"{name}.log").read_bytes() == data
    assert not merged or not (b / "stderr.log").exists()
    # The manifest is the recorder's: it still says running, which readers report as interrupted.
    assert manifest(out)["status"] == "running"
    for name, data in streams:
        raw = (b / f"{name}.idx").read_bytes()
        assert raw.startswith(IDX_MAGIC) and (len(raw) - len(IDX_MAGIC)) % 16 == 0
        lookup = receipt_lookup(raw)
        assert lookup is not None and lookup(len(data) - 1) is not None


@pytest.mark.slow
def test_pipes_child_outlives_a_sigkilled_recorder(tmp_path: Path) -> None:
    go, done, out = tmp_path / "go", tmp_path / "done", tmp_path / "out"
    proc = subprocess.Popen(recorder_argv(out, PY, "-c", PRINTER, str(go), str(done)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env(), stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    seen = b""
    while b"line 19\n" not in seen:
        line = proc.stdout.readline()
        assert line, "the recorder ended early"
        seen += line
    proc.kill()
    assert proc.wait(timeout=10) == -signal.SIGKILL
    go.touch()
    # Our end of the recorder's stdout/stderr reaches EOF only once the keeper has let go of them.
    rest, err = proc.communicate(timeout=30)
    assert done.read_text() == "finished, exit 7"
    assert seen + rest == STDOUT  # lines after the kill reached the terminal through the keeper
    assert err == STDERR
    _check_bundle(out)


SHELL = """
import os, signal, subprocess, sys
rec = subprocess.Popen(sys.argv[1:])  # a job in the foreground of this terminal, as a shell runs it
print(f"recorder pid {rec.pid}", flush=True)
rc = rec.wait()
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
os.tcsetpgrp(0, os.getpgrp())  # a shell takes the terminal back when its job ends
print(f"recorder ended {rc}", flush=True)
os.read(0, 1)  # the prompt: wait for a key
"""


@pytest.mark.slow
def test_pty_child_outlives_a_sigkilled_recorder(tmp_path: Path) -> None:
    go, done, out = tmp_path / "go", tmp_path / "done", tmp_path / "out"
    pid, master = pty.fork()
    if pid == 0:  # a minimal interactive shell on a fresh terminal, running the recorder as its job
        try:
            os.execvpe(PY, [PY, "-c", SHELL, *recorder_argv(out, PY, "-c", PRINTER, str(go), str(done))], env())
        finally:
            os._exit(127)
    try:
        screen = read_until(master, b"line 19\r\n")
        found = re.search(rb"recorder pid (\d+)", screen)
        assert found and b"line 19" in screen, screen
        os.kill(int(found[1]), signal.SIGKILL)
        screen += read_until(master, b"recorder ended -9")
        assert b"recorder ended -9" in screen
        go.touch()
        screen += read_until(master, b"line 59\r\n")
        for _ in range(3000):  # the child writes its note after its last line
            if done.exists():
                break
            time.sleep(0.01)
        assert done.read_text() == "finished, exit 7"
        os.write(master, b"\n")  # leave the shell
        # EOF (EIO) on the terminal once no process holds it: the keeper has left too.
        screen += read_until(master, b"\0never\0")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(master)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    after = screen.split(b"recorder ended -9", 1)[1]
    assert b"line 59\r\n" in after and b"err 59\r\n" in after  # the keeper kept echoing to the terminal
    assert manifest(out)["sources"]["stdout"]["terminal"] == "pty"
    assert manifest(out)["sources"]["stderr"]["status"] == "merged"
    _check_bundle(out, merged=True)


GRANDCHILD = """
import os, subprocess, sys
subprocess.Popen(["sleep", "60"])  # inherits stdout and never closes it
print(f"started {os.getpid()}", flush=True)
sys.stdin.read()  # until the test closes our stdin
print("bye", flush=True)
"""


@pytest.mark.slow
def test_keeper_leaves_with_the_child_even_if_a_grandchild_holds_the_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r, w = os.pipe()
    proc = subprocess.Popen(recorder_argv(out, PY, "-c", GRANDCHILD), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env(), stdin=r)
    os.close(r)
    assert proc.stdout is not None
    child = 0
    try:
        started = proc.stdout.readline()
        assert started.startswith(b"started ")
        child = int(started.split()[1])
        proc.kill()
        proc.wait(timeout=10)
        os.close(w)  # the child ends; the sleep still holds its stdout
        w = -1
        rest, _ = proc.communicate(timeout=30)  # EOF here: the keeper left although the pipe is still open
        assert rest == b"bye\n"
        assert (bundle(out) / "stdout.log").read_bytes() == started + b"bye\n"
    finally:
        if w >= 0:
            os.close(w)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if child:
                os.killpg(child, signal.SIGKILL)  # the orphaned sleep is still in the child's process group


HANDLER = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda sig, frame: print("child got SIGTERM", flush=True))
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
print("after the recorder", flush=True)
"""


@pytest.mark.slow
def test_a_signal_to_the_recorders_group_reaches_the_child_once_and_spares_the_keeper(tmp_path: Path) -> None:
    go, out = tmp_path / "go", tmp_path / "out"
    proc = subprocess.Popen(recorder_argv(out, PY, "-c", HANDLER, str(go)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env(), stdin=subprocess.DEVNULL, start_new_session=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    os.killpg(proc.pid, signal.SIGTERM)  # the recorder and its keeper; the child has a group of its own
    assert proc.stdout.readline() == b"child got SIGTERM\n"
    proc.kill()
    proc.wait(timeout=10)
    go.touch()
    rest, _ = proc.communicate(timeout=30)
    assert rest == b"after the recorder\n"  # the keeper ignored SIGTERM and took over
    assert (bundle(out) / "stdout.log").read_bytes() == b"ready\nchild got SIGTERM\nafter the recorder\n"


@pytest.mark.slow
def test_normal_run_leaves_no_keeper_behind(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = subprocess.run(recorder_argv(out, PY, "-c", "print('hi')"), capture_output=True, env=env(),
                         stdin=subprocess.DEVNULL, timeout=60)
    assert res.returncode == 0 and res.stdout == b"hi\n"
    assert manifest(out)["status"] == "finished"
    # The keeper is a fork of the recorder (same command line): the recorder reaps it before it exits.
    assert _running_with(str(out).encode()) == []


def _running_with(arg: bytes) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if arg in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                found.append(int(pid))
    return found
