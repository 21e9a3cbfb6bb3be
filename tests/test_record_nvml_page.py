"""The NVML sampler as native Windows runs it, for real on Linux with the fake NVML: the deadline page
handed over by path (Windows has no ``pass_fds``), status lines read on a thread, the stdin lifeline,
and a wedged NVML still caught at its deadline and the stuck sampler given up on."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from leftovers import no_leftovers  # noqa: F401  (a fixture)
from recorder_helpers import bundle, env, jsonl, manifest, run, wait_in_bundle

from forensics.record import deadline
from forensics.record.platform.posix import PosixPlatform
from forensics.record.platform.windows import WindowsPlatform
from forensics.record.supervisor import NvmlSupervisor, StatusLines

PY = sys.executable
pytestmark = pytest.mark.usefixtures("no_leftovers")


@pytest.fixture
def page_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Page files go to a directory of the test's own, so what is left behind can be seen."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    yield d


def _pages(d: Path) -> list[str]:
    return sorted(p.name for p in d.glob("forensics-nvml-*.page"))


def test_windows_hands_the_page_over_by_path_and_posix_by_descriptor() -> None:
    win, posix = WindowsPlatform({}), PosixPlatform()
    assert win.nvml_page == "path" and win.nvml_unavailable is None
    assert posix.nvml_page == "fd" and posix.nvml_unavailable is None
    assert win.kernel_log_unavailable and "System log" in win.kernel_log_unavailable
    assert posix.kernel_log_unavailable is None
    with pytest.raises(ValueError, match="handover"):
        NvmlSupervisor(Path("/nonexistent"), 0.1, lambda *_: None, page="shm")


@pytest.mark.parametrize("handover", deadline.HANDOVERS)
def test_a_call_published_on_one_side_is_seen_on_the_other(handover: str, page_dir: Path) -> None:
    page = deadline.PageFile(handover)
    try:
        theirs, forget = deadline.map_page_arg(page.arg)  # what the sampler does with its argument
        assert theirs is not None
        seen: list[list[deadline.Stuck]] = []
        guard = deadline.CallGuard(theirs, 1)
        guard("nvmlDeviceGetPowerUsage", 3,
              lambda: seen.append(deadline.read_slots(page.page, time.time_ns() + 10**10, 10**9)))
        [stuck] = seen[0]
        assert (stuck.slot, stuck.call, stuck.gpu) == (1, "nvmlDeviceGetPowerUsage", 3)
        assert deadline.read_slots(page.page, time.time_ns() + 10**10, 10**9) == []  # cleared after the call
        forget()
        theirs.close()
    finally:
        page.close()
    assert _pages(page_dir) == []
    assert deadline.map_page_arg("-1")[0] is None


def test_status_lines_read_on_a_thread_keep_partial_lines_for_later() -> None:
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as pipe:
        lines = StatusLines(pipe, threaded=True)
        assert lines.threaded
        os.write(w, b'{"status":"ok","gpus":2}\nnot json\n{"samp')
        deadline_t = time.monotonic() + 10
        got: list[dict[str, Any]] = []
        while not got and time.monotonic() < deadline_t:
            got = lines.take()
            time.sleep(0.02)
        assert got == [{"status": "ok", "gpus": 2}]
        os.write(w, b'ling":"ok"}\n')
        os.close(w)
        while not (got := lines.take()) and time.monotonic() < deadline_t:
            time.sleep(0.02)
        assert got == [{"sampling": "ok"}]


def _supervise(tmp_path: Path) -> tuple[NvmlSupervisor, list[tuple[str, dict[str, Any]]]]:
    heard: list[tuple[str, dict[str, Any]]] = []
    (tmp_path / "host").mkdir(exist_ok=True)
    sup = NvmlSupervisor(tmp_path, 0.05, lambda name, info: heard.append((name, dict(info))), page="path",
                         threaded_reads=True)
    sup.start()
    return sup, heard


def _wait(what: Any, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not what() and time.monotonic() < end:
        time.sleep(0.05)


@pytest.mark.slow
def test_the_sampler_samples_with_its_page_handed_over_by_path(
        tmp_path: Path, page_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORENSICS_FAKE_NVML", "ok")
    sup, heard = _supervise(tmp_path)
    _wait(lambda: (tmp_path / "nvml.jsonl").exists() and len(jsonl(tmp_path / "nvml.jsonl")) > 5)
    assert len(_pages(page_dir)) == 1  # the one sampler's page, while it runs
    sup.stop()
    sup.close()
    assert not sup.is_alive() and sup.proc is not None and sup.proc.poll() is not None
    assert ("nvml", {"status": "ok", "gpus": 2, "names": ["Fake GPU"]}) in heard
    assert len(jsonl(tmp_path / "nvml.jsonl")) > 5 and (tmp_path / "host" / "gpus.json").exists()
    assert _pages(page_dir) == []  # removed once nobody holds it


@pytest.mark.slow
def test_a_wedged_nvml_is_caught_at_its_deadline_and_the_stuck_sampler_replaced(
        tmp_path: Path, page_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page handed over by path carries the stuck call's name: the supervisor says so, kills and
    leaves that sampler, and a replacement (NVML answers again: ``once``) samples and recovers."""
    monkeypatch.setenv("FORENSICS_FAKE_NVML", f"hang:after=0,once={tmp_path / 'hung-once'}")
    monkeypatch.setenv("FORENSICS_NVML_DEADLINE_S", "0.3")
    sup, heard = _supervise(tmp_path)
    events = tmp_path / "nvml-events.jsonl"
    _wait(lambda: events.exists() and any(e.get("type") == "recovered" for e in jsonl(events)))
    sup.stop()
    sup.close()
    kinds = [e.get("type") for e in jsonl(events)[1:]]
    [stuck] = [e for e in jsonl(events) if e.get("type") == "unresponsive"]
    assert stuck["call"] == "nvmlDeviceGetPowerUsage" and stuck["waited_s"] >= 0.3
    assert kinds.index("unresponsive") < kinds.index("recovered")
    assert ("nvml", {"status": "unresponsive", "reason": "nvmlDeviceGetPowerUsage did not return"}) in heard
    assert sup.restarts >= 1 and _pages(page_dir) == []
    _wait(lambda: not sup._reap_stuck(), 10)
    assert sup._reap_stuck() == []  # the stuck one was killed (the fake's hang is interruptible)


def _worker(tmp_path: Path, page: deadline.PageFile, fake: str) -> subprocess.Popen[bytes]:
    argv = [PY, "-m", "forensics.record.nvml_worker", str(tmp_path), "0.05", page.arg, "-", "lifeline"]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**env(), "FORENSICS_FAKE_NVML": fake, "FORENSICS_RECORDER_PID": str(os.getpid())})


@pytest.mark.parametrize("fake", ["ok", "hang:after=0"], ids=["sampling", "wedged-in-a-call"])
@pytest.mark.slow
def test_a_sampler_whose_lifeline_is_cut_ends(tmp_path: Path, page_dir: Path, fake: str) -> None:
    """End of file on its stdin (the recorder closed it, or died: on Windows the only sign) ends the
    sampler: at once when it samples, after the grace when a call is wedged in the driver."""
    page = deadline.PageFile("path")
    proc = _worker(tmp_path, page, fake)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert b'"status":"ok"' in proc.stdout.readline()
        time.sleep(0.5)
        assert proc.poll() is None
        if fake.startswith("hang"):
            assert deadline.read_slots(page.page, time.time_ns(), 0)  # in the wedged call now
        proc.stdin.close()
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        page.close()
    if fake == "ok":
        assert len(jsonl(tmp_path / "nvml.jsonl")) > 3


@pytest.mark.slow
def test_record_with_the_page_handed_over_by_path_end_to_end(tmp_path: Path) -> None:
    """``forensics record`` itself with the Windows handover (``FORENSICS_NVML_PAGE=path``) and a
    wedged NVML: the run is untouched, the bundle says NVML stopped answering, and no page file or
    sampler is left."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    child = wait_in_bundle("nvml-events.jsonl", "unresponsive", then="print('done'); raise SystemExit(3)\n")
    res = run(tmp_path / "out", PY, "-c", child,
              FORENSICS_NVML_PAGE="path", FORENSICS_FAKE_NVML="hang:after=0.5", FORENSICS_NVML_DEADLINE_S="0.3",
              TMPDIR=str(tmp))
    assert res.returncode == 3 and res.stdout == b"done\n"
    events = jsonl(bundle(tmp_path / "out") / "nvml-events.jsonl")
    assert any(e.get("type") == "unresponsive" and e.get("call") == "nvmlDeviceGetPowerUsage" for e in events)
    assert manifest(tmp_path / "out")["sources"]["nvml"]["status"] in ("unresponsive", "gave-up")
    assert jsonl(bundle(tmp_path / "out") / "nvml.jsonl")  # it sampled before it wedged
    assert _pages(tmp) == []


def test_status_reader_thread_does_not_hold_up_a_stuck_sampler_exit() -> None:
    """A reader thread blocked on a sampler that never writes again does not keep anything waiting."""
    proc = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        lines = StatusLines(proc.stdout, threaded=True)
        start = time.monotonic()
        assert lines.take() == []
        lines.close()  # returns at once: the thread owns the pipe
        assert time.monotonic() - start < 1
        assert [t for t in threading.enumerate() if t.name == "forensics-nvml-status"]
    finally:
        proc.kill()
        proc.wait()
