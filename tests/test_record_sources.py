"""The recorder's evidence sources: NVML (present, absent, hanging), Xid events, the kernel log,
the receipt index, and the child's terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from recorder_helpers import bundle, env, jsonl, manifest, read_until, recorder_argv, run, wait_in_bundle

from forensics.analysis import analyze
from forensics.ingest.bundle import IDX_MAGIC, receipt_lookup

PY = sys.executable


@pytest.mark.slow
def test_nvml_absent_is_recorded_as_unavailable_with_reason(tmp_path: Path) -> None:
    res = run(tmp_path, PY, "-c", "print('training')", FORENSICS_FAKE_NVML="absent")
    assert res.returncode == 0 and res.stdout == b"training\n"
    nvml = manifest(tmp_path)["sources"]["nvml"]
    assert nvml["status"] == "unavailable"
    assert "Library Not Found" in nvml["reason"]
    assert not (bundle(tmp_path) / "nvml.jsonl").exists()
    analysis = analyze([str(bundle(tmp_path))])
    notes = [e for e in analysis.timeline.events if e.kind == "recorder"]
    assert any("nvml" in e.message and "Library Not Found" in e.message for e in notes)
    assert analysis.verdict.root_cause is None


@pytest.mark.slow
def test_real_nvml_path_without_a_driver_is_clean(tmp_path: Path) -> None:
    """No fake: the real nvidia-ml-py, on a machine without an NVIDIA driver (skipped on a GPU host)."""
    probe = subprocess.run([PY, "-c", "import pynvml; pynvml.nvmlInit()"], capture_output=True, timeout=30)
    if probe.returncode == 0:
        import pytest

        pytest.skip("this machine has a working NVML")
    e = env()
    e.pop("FORENSICS_FAKE_NVML")
    res = subprocess.run(recorder_argv(tmp_path, PY, "-c", "print(1)"), capture_output=True, env=e, timeout=60)
    assert res.returncode == 0 and res.stdout == b"1\n"
    assert manifest(tmp_path)["sources"]["nvml"]["status"] == "unavailable"
    assert (bundle(tmp_path) / "recorder.log").read_bytes() == b""


@pytest.mark.slow
def test_samples_are_written_and_parsed(tmp_path: Path) -> None:
    res = run(tmp_path, PY, "-c", wait_in_bundle("nvml.jsonl", "\n", count=12))
    assert res.returncode == 0
    b = bundle(tmp_path)
    header, *ticks = jsonl(b / "nvml.jsonl")
    assert header["format"] == "gpu-forensics-nvml" and [g["pci"] for g in header["gpus"]] == ["0000:3b:00.0",
                                                                                                "0000:3c:00.0"]
    assert ticks[0]["k"] == 1 and len(ticks) >= 10
    assert set(ticks[0]["g"]["0"]) == set(header["columns"])
    gpus = (b / "host" / "gpus.json").read_text()
    assert "p2p" in gpus and "0000:3c:00.0" in gpus
    analysis = analyze([str(b)])
    metrics = analysis.timeline.metrics
    assert {m.gpu for m in metrics} == {"0000:3b:00.0", "0000:3c:00.0"}
    assert all(m.values["mem_total_mib"] == 80 * 1024 for m in metrics)
    assert all(m.values["pcie_gen_max"] == 5 for m in metrics)


@pytest.mark.slow
def test_a_hanging_nvml_call_is_an_event_and_the_sampler_is_replaced(tmp_path: Path) -> None:
    flag = tmp_path / "hung-once"
    child = wait_in_bundle("nvml-events.jsonl", "recovered", then="print('done')\n")
    res = run(tmp_path / "out", PY, "-c", child,
              FORENSICS_FAKE_NVML=f"hang:after=0.3,once={flag}", FORENSICS_NVML_DEADLINE_S="0.5")
    assert res.returncode == 0 and res.stdout == b"done\n"
    events = jsonl(bundle(tmp_path / "out") / "nvml-events.jsonl")
    kinds = [e.get("type") for e in events]
    assert "unresponsive" in kinds and "recovered" in kinds
    stuck = next(e for e in events if e.get("type") == "unresponsive")
    assert stuck["call"] == "nvmlDeviceGetPowerUsage" and stuck["gpu"] == 0
    analysis = analyze([str(bundle(tmp_path / "out"))])
    reasons = [e.attrs.get("reason") for e in analysis.timeline.events if e.kind == "recorder"]
    assert "nvml-unresponsive" in reasons and "nvml-recovered" in reasons


@pytest.mark.slow
def test_a_driver_that_stays_wedged_never_holds_up_the_run(tmp_path: Path) -> None:
    start = time.monotonic()
    res = run(tmp_path, PY, "-c", "import time; time.sleep(2.5); print('done')",
              FORENSICS_FAKE_NVML="hang:after=0", FORENSICS_NVML_DEADLINE_S="0.3")
    assert res.returncode == 0 and res.stdout == b"done\n"
    assert time.monotonic() - start < 20
    events = jsonl(bundle(tmp_path) / "nvml-events.jsonl")
    assert sum(e.get("type") == "unresponsive" for e in events) >= 1
    assert manifest(tmp_path)["sources"]["nvml"]["status"] in ("unresponsive", "gave-up")


@pytest.mark.slow
def test_xid_event_from_nvml(tmp_path: Path) -> None:
    res = run(tmp_path, PY, "-c", wait_in_bundle("nvml-events.jsonl", '"xid"'),
              FORENSICS_FAKE_NVML="xid:after=0.2,xid=43")
    assert res.returncode == 0
    [xid] = [e for e in jsonl(bundle(tmp_path) / "nvml-events.jsonl") if e.get("type") == "xid"]
    assert xid["xid"] == 43 and xid["pci"] == "0000:3b:00.0"
    analysis = analyze([str(bundle(tmp_path))])
    [event] = [e for e in analysis.timeline.events if e.kind == "xid"]
    assert event.source == "nvml" and event.attrs["xid"] == 43 and event.gpu == "0000:3b:00.0"


def _kmsg(seq: int, usec: int, msg: str) -> bytes:
    return f"4,{seq},{usec},-;{msg}\n SUBSYSTEM=pci\n".encode()


@pytest.mark.slow
def test_kernel_log_keeps_recent_context_and_new_records_byte_for_byte(tmp_path: Path) -> None:
    now_us = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    dev = tmp_path / "kmsg"
    old = _kmsg(1, now_us - 400_000_000, "old record, long before the run")
    recent = _kmsg(2, now_us - 10_000_000, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.")
    dev.write_bytes(old + recent)
    late = "NVRM: Xid (PCI:0000:3b:00): 43, pid=2, name=python3, Ch 00000008"
    code = f"""
import time
time.sleep(0.3)
with open({str(dev)!r}, 'ab') as fh:
    fh.write(b'4,3,' + str(time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000).encode() + b',-;{late}\\n')
time.sleep(1.2)
"""
    res = run(tmp_path / "out", PY, "-c", code, FORENSICS_KERNEL_LOG="kmsg", FORENSICS_KMSG_PATH=str(dev))
    assert res.returncode == 0
    kept = (bundle(tmp_path / "out") / "kmsg.log").read_bytes()
    assert kept.startswith(recent)
    assert old not in kept
    assert kept.endswith(f",-;{late}\n".encode())
    m = manifest(tmp_path / "out")
    assert m["sources"]["kernel_log"]["source"] == "kmsg" and m["boot_time_ns"]


@pytest.mark.slow
def test_no_kernel_log_is_marked_unavailable(tmp_path: Path) -> None:
    res = run(tmp_path, PY, "-c", "pass", FORENSICS_KERNEL_LOG="kmsg", FORENSICS_KMSG_PATH=str(tmp_path / "nope"))
    assert res.returncode == 0
    info = manifest(tmp_path)["sources"]["kernel_log"]
    assert info["status"] == "unavailable" and "No such file" in info["reason"]


BAR = r"""
import sys, time
for i in range(20000):
    sys.stdout.write(f"\r{i:6d}/20000 [{'#' * (i // 1000):20s}]")
    if i % 2000 == 0:
        sys.stdout.flush(); time.sleep(0.05)
sys.stdout.write("\ndone\n")
"""


@pytest.mark.slow
def test_receipt_index_does_not_grow_per_carriage_return(tmp_path: Path) -> None:
    before = time.time_ns()
    res = run(tmp_path, PY, "-c", BAR)
    after = time.time_ns()
    assert res.returncode == 0
    b = bundle(tmp_path)
    raw = (b / "stdout.idx").read_bytes()
    assert raw.startswith(IDX_MAGIC)
    entries = (len(raw) - len(IDX_MAGIC)) // 16
    assert res.stdout.count(b"\r") == 20000
    assert 1 <= entries <= 10
    at = receipt_lookup(raw)
    assert at is not None
    data = (b / "stdout.log").read_bytes()
    done = data.index(b"done")
    assert before <= (at(0) or 0) <= (at(done) or 0) <= after


TTY_CHILD = """
import os, signal, sys, time
def on(sig, frame):
    print(f"child got {signal.Signals(sig).name}", flush=True); sys.exit(0)
signal.signal(signal.SIGINT, on)
print(f"stdout tty={os.isatty(1)} stderr tty={os.isatty(2)} fg={os.tcgetpgrp(0) == os.getpgrp()}", flush=True)
print(f"size={tuple(os.get_terminal_size(1))}", flush=True)
print("ready", flush=True)
time.sleep(30)
"""


@pytest.mark.slow
def test_on_a_terminal_the_child_is_foreground_and_ctrl_c_reaches_it_once(tmp_path: Path) -> None:
    pid, master = pty.fork()
    if pid == 0:  # the recorder, in a new session on a pseudo-terminal, as an interactive shell would run it
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
            os.execvpe(PY, recorder_argv(tmp_path, PY, "-c", TTY_CHILD), env())
        finally:
            os._exit(127)
    try:
        out = read_until(master, b"ready", timeout=20)
        assert b"stdout tty=True stderr tty=True fg=True" in out
        assert b"size=(101, 33)" in out
        os.write(master, b"\x03")  # Ctrl-C typed at the terminal
        out += read_until(master, b"child got SIGINT", timeout=20)
        assert out.count(b"child got SIGINT") == 1
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(master)
    # The child died of nothing (it handled SIGINT and exited 0), so the recorder exits 0.
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    m = manifest(tmp_path)
    assert m["forwarded_signals"] == []
    assert m["sources"]["stdout"]["terminal"] == "pty"
    assert (bundle(tmp_path) / "stdout.log").read_bytes().endswith(b"ready\nchild got SIGINT\n")


@pytest.mark.slow
def test_interrupted_child_on_a_terminal_ends_the_recorder_like_sigint(tmp_path: Path) -> None:
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.execvpe(PY, recorder_argv(tmp_path, PY, "-c", "import time; print('ready', flush=True); time.sleep(30)"),
                       env())
        finally:
            os._exit(127)
    try:
        read_until(master, b"ready", timeout=20)
        os.write(master, b"\x03")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(master)
    # A shell must see the job die of SIGINT (so a script stops), and $? is 130 = 128 + SIGINT.
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT
    assert manifest(tmp_path)["signal_name"] == "SIGINT"
