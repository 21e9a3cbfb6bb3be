"""Fault scripts for the recorder (issue 14), as tests: the disk fills, the bundle directory is
removed, a file becomes unwritable, NVML wedges, journalctl hangs, the child closes its stdout
early, a grandchild holds the pipe, the recorder is SIGKILLed at random instants. Each asserts
what is kept, what is said, that the child's status is passed on, and (``no_leftovers``) that no
process is left behind."""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from leftovers import no_leftovers  # noqa: F401  (a fixture)
from recorder_helpers import bundle, env, jsonl, manifest, recorder_argv, run

from forensics.analysis import analyze
from forensics.record.degrade import MARKER, Degradation

PY = sys.executable
pytestmark = pytest.mark.usefixtures("no_leftovers")

# ~2.2 MB on stdout, then exit 3.
FLOOD = "import sys\nfor i in range(30000): print('line %06d ' % i + 'x' * 60)\nprint('done'); sys.exit(3)"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (root only); skipped where it cannot be mounted."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if shutil.which("mount") is None or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _said(stderr: bytes, text: str) -> list[str]:
    return [line for line in stderr.decode(errors="replace").splitlines() if line.startswith("forensics record:")
            and text in line]


@pytest.mark.slow
def test_the_disk_fills_during_record(small_disk: Path) -> None:
    res = run(small_disk, PY, "-c", FLOOD)
    assert res.returncode == 3  # the child's status, passed on
    lines = res.stdout.decode().splitlines()
    assert len(lines) == 30001 and lines[-1] == "done"  # the terminal got everything
    assert len(_said(res.stderr, "stdout.log: No space left on device; recording degraded from")) == 1
    assert len(_said(res.stderr, "")) == 1  # said once
    b = bundle(small_disk)
    data = manifest(small_disk)
    assert data["status"] == "finished" and data["exit_code"] == 3
    [lost] = [d for d in data["degraded"] if d["file"] == "stdout.log"]
    assert lost["error"] == "No space left on device" and 0 < lost["offset"] == (b / "stdout.log").stat().st_size
    assert json.loads((b / MARKER).read_text())["degraded"][0]["file"] == "stdout.log"
    analysis = analyze([str(b)])
    assert any("recording degraded: stdout.log: No space left on device" in w for w in analysis.warnings)
    assert any(e.kind == "recorder" and e.attrs.get("reason") == "recording-degraded"
               for e in analysis.timeline.events)


@pytest.mark.slow
def test_the_bundle_directory_is_removed_mid_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    child = "import time\nprint('before', flush=True)\ntime.sleep(3)\nprint('after', flush=True)"
    proc = subprocess.Popen(recorder_argv(out, PY, "-c", child), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env(), stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"before\n"
    b = bundle(out)
    for _ in range(50):  # the recorder may still be writing into it (its host snapshot): try again
        try:
            shutil.rmtree(b)
            break
        except OSError:
            time.sleep(0.05)
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and rest == b"after\n"
    assert len(_said(err, "bundle directory: removed while recording; recording degraded from")) == 1
    data = json.loads((b / "manifest.json").read_text())  # made again, to say what happened
    assert data["degraded"][0]["file"] == "bundle directory"
    assert json.loads((b / MARKER).read_text())["degraded"][0]["error"] == "removed while recording"
    assert any("recording degraded: bundle directory" in w for w in analyze([str(b)]).warnings)


def test_a_removal_noticed_first_by_the_manifest_is_told_as_the_removal(tmp_path: Path) -> None:
    """The race CI once lost: ``rm -r`` had emptied the bundle but not yet removed it when the
    manifest's rewrite failed, so the manifest's loss came first. The removal goes first, from
    when the first file vanished, and the file is named as where it was first noticed."""
    b = tmp_path / "bundle"
    b.mkdir()
    manifests: list[list[dict[str, object]]] = []
    said_fd, said_w = os.pipe()
    degradation = Degradation(b, lambda items: manifests.append(items) or True, err_fd=said_w)
    degradation.lost("manifest.json", os.strerror(2))  # ENOENT: the directory is half gone
    degradation.lost("stdout.log", "No space left on device", offset=7)  # a loss of its own
    shutil.rmtree(b)
    degradation.check_directory()
    os.close(said_w)
    said = os.read(said_fd, 1 << 16).decode().splitlines()
    os.close(said_fd)
    removal, full = manifests[-1]
    assert removal["file"] == "bundle directory" and removal["first_noticed"] == ["manifest.json"]
    assert removal["since_ns"] == manifests[0][0]["since_ns"]  # the removal began when the manifest vanished
    assert full["file"] == "stdout.log" and full["offset"] == 7
    assert json.loads((b / MARKER).read_text())["degraded"][0]["file"] == "bundle directory"
    assert [line.split(": ")[1] for line in said] == ["manifest.json", "bundle directory"]


@pytest.mark.slow
def test_a_file_that_cannot_grow_mid_run(tmp_path: Path) -> None:
    """RLIMIT_FSIZE on the recorder: its writes past 256 KiB fail with EFBIG (Python ignores
    SIGXFSZ; the child gets the default action back and writes to a pipe anyway)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))

    res = subprocess.run(recorder_argv(tmp_path, PY, "-c", FLOOD), capture_output=True, env=env(),
                         stdin=subprocess.DEVNULL, timeout=120, preexec_fn=limit)
    assert res.returncode == 3 and res.stdout.decode().splitlines()[-1] == "done"
    assert len(_said(res.stderr, "stdout.log: File too large; recording degraded")) == 1
    # stdout.log's loss, once; another file that reached the limit too (its index) may be noted beside it
    [lost] = [d for d in manifest(tmp_path)["degraded"] if d["file"] == "stdout.log"]
    assert lost["offset"] <= 256 << 10


@pytest.mark.slow
def test_a_wedged_nvml_never_holds_up_the_run(tmp_path: Path) -> None:
    start = time.monotonic()
    res = run(tmp_path, PY, "-c", "import time; time.sleep(2); print('done'); raise SystemExit(5)",
              FORENSICS_FAKE_NVML="hang:after=0", FORENSICS_NVML_DEADLINE_S="0.3")
    assert res.returncode == 5 and res.stdout == b"done\n"
    assert time.monotonic() - start < 30
    assert any(e.get("type") == "unresponsive" for e in jsonl(bundle(tmp_path) / "nvml-events.jsonl"))


FAKE_JOURNALCTL = """#!/bin/sh
# a journalctl that hangs: the probe (-n 1) never answers when HANG_PROBE is set, -f never prints
case " $* " in
  *" -n "*) [ -n "$HANG_PROBE" ] && exec sleep 600
            echo '{"__REALTIME_TIMESTAMP":"1","MESSAGE":"x","_TRANSPORT":"kernel"}'; exit 0;;
esac
exec sleep 600
"""


@pytest.mark.parametrize("hang_probe", ["1", ""], ids=["probe-hangs", "follow-hangs"])
@pytest.mark.slow
def test_a_journalctl_that_hangs(tmp_path: Path, hang_probe: str) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "journalctl").write_text(FAKE_JOURNALCTL)
    (bindir / "journalctl").chmod(0o755)
    start = time.monotonic()
    res = run(tmp_path / "out", PY, "-c", "print('hi')", FORENSICS_KERNEL_LOG="journal", HANG_PROBE=hang_probe,
              PATH=f"{bindir}:{os.environ['PATH']}")
    assert res.returncode == 0 and res.stdout == b"hi\n"
    assert time.monotonic() - start < 30
    kernel_log = manifest(tmp_path / "out")["sources"]["kernel_log"]
    assert kernel_log["status"] in (("not-ready", "unavailable") if hang_probe else ("ok",)), kernel_log


@pytest.mark.slow
def test_a_sigkilled_recorder_takes_journalctl_with_it(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "journalctl").write_text(FAKE_JOURNALCTL)
    (bindir / "journalctl").chmod(0o755)
    out = tmp_path / "out"
    proc = subprocess.Popen(recorder_argv(out, PY, "-c", "import time; print('up', flush=True); time.sleep(3)"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=env(FORENSICS_KERNEL_LOG="journal", PATH=f"{bindir}:{os.environ['PATH']}"))
    assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
    deadline = time.monotonic() + 20
    while manifest(out)["sources"]["kernel_log"].get("status") != "ok" and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.kill()
    proc.communicate(timeout=30)  # the keeper lets go when the child ends; no_leftovers checks the rest


@pytest.mark.slow
def test_a_child_that_closes_stdout_early(tmp_path: Path) -> None:
    child = "import os, sys, time\nos.close(1)\ntime.sleep(0.5)\nprint('still here', file=sys.stderr)\nsys.exit(4)"
    res = run(tmp_path, PY, "-c", child)
    assert res.returncode == 4 and res.stdout == b"" and res.stderr.endswith(b"still here\n")
    b = bundle(tmp_path)
    assert (b / "stdout.log").read_bytes() == b"" and (b / "stderr.log").read_bytes() == b"still here\n"
    assert manifest(tmp_path)["exit_code"] == 4


@pytest.mark.slow
def test_a_grandchild_holding_the_pipe_does_not_hold_the_recorder(tmp_path: Path) -> None:
    """The recorder ends with the child; the keeper passes on what the grandchild still holds, and leaves
    once the grandchild has closed it (here: killed), so nothing of the recorder's stays behind."""
    child = ("import subprocess, sys\n"
             "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
             "print(p.pid, flush=True)\n")
    log = tmp_path / "out.log"
    with log.open("wb") as fh:
        res = subprocess.run(recorder_argv(tmp_path / "out", PY, "-c", child), stdout=fh, stderr=subprocess.STDOUT,
                             env=env(), stdin=subprocess.DEVNULL, timeout=60)
    grandchild = int(log.read_text().split()[0])
    m = manifest(tmp_path / "out")
    assert res.returncode == 0 and m["status"] == "finished"
    keeper = m["sources"]["stdout"]["keeper_pid"]
    assert f"pid {grandchild} (python" in m["sources"]["stdout"]["held_open"]
    os.kill(grandchild, signal.SIGKILL)  # the child's own process: not ours to keep
    for _ in range(600):  # the keeper sees end of file and leaves (the leftovers check follows)
        try:
            os.kill(keeper, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)


PRINTER = """
import sys, time
for i in range(60):
    print(f"line {i}", flush=True)
    time.sleep(0.05)
sys.exit(7)
"""


def _kill_at(out: Path, delay: float) -> tuple[int, bytes]:
    proc = subprocess.Popen(recorder_argv(out, PY, "-c", PRINTER), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env(), stdin=subprocess.DEVNULL)
    time.sleep(delay)
    proc.kill()
    rest, _ = proc.communicate(timeout=60)
    return proc.returncode, rest


@pytest.mark.slow
def test_sigkill_of_the_recorder_at_random_instants(tmp_path: Path) -> None:
    """Seeded instants, some in the recorder's first 70 ms (``FORENSICS_KILL_INSTANTS`` for more):
    the child finishes with its own status, every line it printed reaches the terminal (the
    keeper, once the recorder is set up), the bundle stays readable, and no helper outlives it."""
    rng = random.Random(14)
    n = int(os.environ.get("FORENSICS_KILL_INSTANTS", "4"))
    for i in range(n):
        delay = rng.uniform(0.0, 0.07) if i % 2 == 0 else rng.uniform(0.2, 1.5)
        out = tmp_path / f"run{i}"
        rc, seen = _kill_at(out, delay)
        assert rc in (-signal.SIGKILL, 7)  # 7: on a loaded machine the run may end before the kill
        if not out.exists() or not any(p.is_dir() for p in out.iterdir()):
            continue  # killed before it made the bundle: nothing was started
        lines = seen.decode().splitlines()
        if lines:  # once output flows through the recorder it is all passed on
            assert lines == [f"line {k}" for k in range(len(lines))]
        analysis = analyze([str(bundle(out))])
        assert not [w for w in analysis.warnings if "failed" in w]


@pytest.mark.slow
def test_a_worker_whose_recorder_died_before_it_armed_exits(tmp_path: Path) -> None:
    """The NVML worker checks, once PR_SET_PDEATHSIG is armed, that its parent is still the
    recorder that started it; a worker orphaned before that exits instead of sampling forever."""
    res = subprocess.run([PY, "-m", "forensics.record.nvml_worker", str(tmp_path), "0.05", "-1", "-"],
                         env={**env(), "FORENSICS_RECORDER_PID": "1"}, capture_output=True, timeout=30)
    assert res.returncode == 0 and res.stdout == b""
    assert not (tmp_path / "nvml.jsonl").exists()


@pytest.mark.slow
def test_the_disk_fills_while_the_child_is_quiet(small_disk: Path) -> None:
    """Something else fills the disk: the heartbeat's manifest rewrite is what fails first; it is
    said once and noted, and the ballast gives the marker its room."""
    filler = small_disk / "filler"
    child = (f"import os, time\ntime.sleep(0.8)\nfd = os.open({str(filler)!r}, os.O_WRONLY | os.O_CREAT)\n"
             "try:\n    while True: os.write(fd, b'x' * 4096)\nexcept OSError: pass\n"
             "time.sleep(2.5)\nprint('done')")
    res = run(small_disk, PY, "-c", child)
    assert res.returncode == 0 and res.stdout == b"done\n"
    assert len(_said(res.stderr, "No space left on device; recording degraded from")) == 1
    marker = json.loads((bundle(small_disk) / MARKER).read_text())
    assert marker["degraded"][0]["error"] == "No space left on device"


def test_a_sampler_write_failure_reaches_the_recorder() -> None:
    """The NVML worker reports a file it could not write on its control pipe; the supervisor hands
    it to the recorder as ``lost`` (session.py routes it to the degradation record)."""
    from forensics.record.supervisor import NvmlSupervisor

    heard: list[tuple[str, dict[str, object]]] = []
    sup = NvmlSupervisor(Path("/nonexistent"), 0.1, lambda name, info: heard.append((name, info)))
    sup._handle({"lost": "nvml.jsonl", "error": "No space left on device", "offset": 4096})
    assert heard == [("lost", {"file": "nvml.jsonl", "error": "No space left on device", "offset": 4096})]
