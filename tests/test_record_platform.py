"""The recorder's platform layer with fakes: WSL2 detection, host-event queries and polling, the
native Windows child's process group and signals (its logic; it has not run on Windows)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from forensics.ingest.bundle import IDX_MAGIC
from forensics.record.platform import current
from forensics.record.platform.host_events import (
    CHANNELS,
    EventQuery,
    HostEventFollower,
    QueryResult,
    as_utf8,
    powershell_query,
    run_with_deadline,
    split_events,
    xpath,
)
from forensics.record.platform.posix import PosixPlatform
from forensics.record.platform.windows import BlockingTee, WindowsChild, _break_event, _creationflags
from forensics.record.platform.wsl import WslPlatform, detect_wsl, find_query_tool
from forensics.record.writer import AppendFile

ROOT = Path(__file__).resolve().parents[1]
SYSTEM = CHANNELS[0]


def _release(tmp_path: Path, text: str) -> dict[str, str]:
    p = tmp_path / "osrelease"
    p.write_text(text + "\n")
    return {"FORENSICS_OSRELEASE_PATH": str(p), "FORENSICS_WINDOWS_ROOT": str(tmp_path / "no-c")}


def test_wsl_is_detected_from_the_kernel_release_or_the_interop_socket(tmp_path: Path) -> None:
    wsl = detect_wsl(_release(tmp_path, "5.15.153.1-microsoft-standard-WSL2"))
    assert wsl is not None and wsl.osrelease == "5.15.153.1-microsoft-standard-WSL2" and not wsl.interop
    assert detect_wsl({**_release(tmp_path, "6.8.0-49-generic"), "WSL_INTEROP": "/run/WSL/8_interop"}) is not None
    assert detect_wsl(_release(tmp_path, "6.8.0-49-generic")) is None
    assert detect_wsl({"FORENSICS_OSRELEASE_PATH": str(tmp_path / "missing")}) is None


def test_plain_linux_gets_the_posix_platform_with_no_manifest_facts(tmp_path: Path) -> None:
    plat = current(_release(tmp_path, "6.8.0-49-generic"))
    assert isinstance(plat, PosixPlatform) and not isinstance(plat, WslPlatform)
    assert plat.facts is None and plat.keeper and plat.nvml_unavailable is None
    assert plat.host_events(tmp_path, lambda *_: None, lambda f: f) is None
    wsl = current(_release(tmp_path, "5.15.153.1-microsoft-standard-WSL2"))
    assert isinstance(wsl, WslPlatform) and wsl.facts is not None and wsl.facts["kind"] == "wsl2"


def test_query_tool_prefers_wevtutil_then_powershell_under_the_windows_drive(tmp_path: Path) -> None:
    root = tmp_path / "c"
    ps = root / "Windows/System32/WindowsPowerShell/v1.0/powershell.exe"
    ps.parent.mkdir(parents=True)
    ps.write_bytes(b"MZ")
    env = {"PATH": str(tmp_path / "empty")}
    assert find_query_tool(env, str(root)) == EventQuery("powershell", str(ps))
    wev = root / "Windows/System32/wevtutil.exe"
    wev.write_bytes(b"MZ")
    assert find_query_tool(env, str(root)) == EventQuery("wevtutil", str(wev))
    assert find_query_tool(env, None) is None


def test_no_host_tool_is_reported_with_the_reason(tmp_path: Path) -> None:
    env = {**_release(tmp_path, "5.15.153.1-microsoft-standard-WSL2"), "PATH": str(tmp_path / "empty")}
    plat = current(env)
    seen: dict[str, Any] = {}
    assert plat.host_events(tmp_path, lambda n, i: seen.update({n: i}), lambda f: f) is None
    assert seen["host_events"]["status"] == "unavailable" and "wevtutil.exe" in seen["host_events"]["reason"]
    off = current({**env, "FORENSICS_HOST_EVENTS": "none"})
    off.host_events(tmp_path, lambda n, i: seen.update({n: i}), lambda f: f)
    assert "disabled" in seen["host_events"]["reason"]


def test_xpath_stays_within_the_event_logs_limit_and_filters_by_time_or_record() -> None:
    first = xpath(SYSTEM, within_ms=600_000)
    assert first.startswith("*[System[Provider[(@Name='nvlddmkm' or @Name='Display'")
    assert "TimeCreated[timediff(@SystemTime) <= 600000]" in first and "EventRecordID" not in first
    later = xpath(SYSTEM, after_record=48213)
    assert "EventRecordID > 48213" in later and "timediff" not in later
    # Windows Event Log wants a structured query beyond 20 expressions in one XPath
    assert first.count("@Name=") + 1 < 20
    assert xpath(CHANNELS[1], within_ms=1).endswith("and EventData[Data='LiveKernelEvent']]")


def test_powershell_query_doubles_single_quotes_inside_its_string() -> None:
    argv = powershell_query("powershell.exe", "System", "*[System[Provider[@Name='nvlddmkm']]]")
    assert argv[:3] == ["powershell.exe", "-NoProfile", "-NonInteractive"]
    assert "-FilterXPath '*[System[Provider[@Name=''nvlddmkm'']]]'" in argv[-1] and "ToXml()" in argv[-1]
    assert argv[-1].startswith("[Console]::OutputEncoding = [System.Text.Encoding]::UTF8; ")


def _ev(rid: int, text: str = "x") -> bytes:
    return (f"<Event xmlns='http://schemas.microsoft.com/win/2004/08/events/event'><System><Provider Name='nvlddmkm'/>"
            f"<EventID>14</EventID><TimeCreated SystemTime='2026-03-14T21:07:31.4121876Z'/>"
            f"<EventRecordID>{rid}</EventRecordID><Channel>System</Channel></System>"
            f"<EventData><Data>{text}</Data></EventData></Event>").encode()


def test_split_events_orders_by_record_id_as_powershell_prints_newest_first() -> None:
    assert [r for r, _ in split_events(_ev(9) + b"\r\n" + _ev(7) + _ev(8))] == [7, 8, 9]


def test_utf16_or_marked_answers_are_read_as_utf8() -> None:
    ev = _ev(3, "Ошибка")  # a localized insertion string
    for raw in (ev.decode().encode("utf-16"), ev.decode().encode("utf-16-le"), b"\xef\xbb\xbf" + ev):
        assert split_events(raw) == [(3, ev)]
    assert as_utf8(b"\x8c\xeb") == b"\x8c\xeb"  # a code page we cannot know: kept as it came


class FakeHost:
    """Answers the follower's queries from a script of replies, and remembers what it was asked."""

    def __init__(self, replies: list[QueryResult]) -> None:
        self.replies = replies
        self.asked: list[list[str]] = []

    def __call__(self, argv: Any, timeout: float) -> QueryResult:
        self.asked.append(list(argv))
        return self.replies.pop(0) if self.replies else QueryResult()


def _follower(tmp_path: Path, host: FakeHost, status: dict[str, Any]) -> HostEventFollower:
    os.environ["FORENSICS_HOST_EVENTS_POLL_S"] = "0.05"
    try:
        return HostEventFollower(tmp_path, EventQuery("wevtutil", "wevtutil.exe"),
                                 lambda n, i: status.update({n: i}), lambda f: f, via="interop",
                                 runner=host, channels=[SYSTEM])
    finally:
        del os.environ["FORENSICS_HOST_EVENTS_POLL_S"]


def test_follower_keeps_each_event_once_and_asks_after_the_last_record(tmp_path: Path) -> None:
    host = FakeHost([QueryResult(_ev(5) + _ev(6)), QueryResult(_ev(6) + _ev(7, "PCIE REORDER"))])
    status: dict[str, Any] = {}
    f = _follower(tmp_path, host, status)
    f.start()
    deadline = time.monotonic() + 10
    while len(host.asked) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    f.stop()
    assert not f.is_alive()
    text = (tmp_path / "host-events.xml").read_bytes()
    assert [r for r, _ in split_events(text)] == [5, 6, 7]
    assert text.count(b"<!-- received ") == 2 and _ev(7, "PCIE REORDER") in text
    assert "timediff" in host.asked[0][3] and "EventRecordID > 6" in host.asked[1][3]
    assert "EventRecordID > 7" in host.asked[-1][3]
    idx = (tmp_path / "host-events.idx").read_bytes()
    assert idx.startswith(IDX_MAGIC) and len(idx) == len(IDX_MAGIC) + 2 * 16
    info = status["host_events"]
    assert info["status"] == "ok" and info["channels"]["System"] == {"events": 3, "last_record_id": 7}


def test_follower_says_why_when_the_host_cannot_be_asked(tmp_path: Path) -> None:
    host = FakeHost([QueryResult(problem="cannot run wevtutil.exe: Exec format error")])
    status: dict[str, Any] = {}
    f = _follower(tmp_path, host, status)
    f.run()
    assert status["host_events"] == {"status": "unavailable", "via": "interop", "tool": "wevtutil",
                                     "reason": "System: cannot run wevtutil.exe: Exec format error"}
    assert not (tmp_path / "host-events.xml").exists()


class _HangingQuery:
    """A host that never answers: each call writes its pid, then sleeps."""

    tool = "wevtutil"
    exe = sys.executable

    def __init__(self, pids: Path) -> None:
        self.pids = pids

    def argv(self, channel: str, query: str) -> list[str]:
        code = f"import os, time; open({str(self.pids)!r}, 'a').write(f'{{os.getpid()}}\\n'); time.sleep(60)"
        return [sys.executable, "-c", code]


def _running(pid: int) -> bool:
    try:
        return not Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].startswith("Z")
    except OSError:
        return False


@pytest.mark.slow
def test_stopping_while_a_call_hangs_kills_it_and_asks_nothing_more(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    f = HostEventFollower(tmp_path, _HangingQuery(pids), lambda n, i: None,  # type: ignore[arg-type]
                          lambda f: f, via="interop", channels=CHANNELS)
    f.start()
    deadline = time.monotonic() + 10
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    start = time.monotonic()
    f.stop(timeout=0.5)
    assert time.monotonic() - start < 5 and not f.is_alive()
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 1 and not _running(started[0])  # the Application channel was never asked


@pytest.mark.slow
def test_a_hanging_call_is_killed_at_its_deadline(tmp_path: Path) -> None:
    start = time.monotonic()
    res = run_with_deadline([sys.executable, "-c", "import time; time.sleep(60)"], 0.5)
    assert res.problem is not None and "timed out after 0.5 s" in res.problem
    assert time.monotonic() - start < 10
    failed = run_with_deadline([sys.executable, "-c", "import sys; sys.exit('Access is denied.')"], 10)
    assert failed.problem is not None and "Access is denied." in failed.problem
    assert "cannot run" in (run_with_deadline([str(tmp_path / "nope.exe")], 1).problem or "")


class FakeProc:
    pid = 4242

    def __init__(self, slices: int, code: int) -> None:
        self.returncode: int | None = None
        self._slices = slices
        self._code = code

    def wait(self, timeout: float | None = None) -> int:
        if self._slices > 0:
            self._slices -= 1
            raise subprocess.TimeoutExpired("child", timeout or 0)
        self.returncode = self._code
        return self._code


def test_windows_child_gets_its_own_group_and_ctrl_c_passed_on_once() -> None:
    launched: dict[str, Any] = {}
    sent: list[tuple[int, int]] = []
    proc = FakeProc(slices=2, code=3)

    def popen(argv: list[str], **kw: Any) -> FakeProc:
        launched.update(kw, argv=argv)
        return proc

    child = WindowsChild(["train.exe"], {"A": "1"}, popen=popen, kill=lambda pid, sig: sent.append((pid, sig)))
    child._on_signal(signal.SIGINT, None)  # before the spawn: kept, passed on after it
    assert sent == []
    child.start()
    assert launched["creationflags"] == _creationflags() and launched["argv"] == ["train.exe"]
    assert launched["stdin"] is None and launched["env"] == {"A": "1"}
    assert sent == [(4242, _break_event())] and child.forwarded == [signal.SIGINT]
    status = child.wait()  # in slices, so handlers run while the child lives
    assert status.code == 3 and status.shell_status == 3 and proc._slices == 0
    child._on_signal(signal.SIGINT, None)  # after the exit: nothing to send
    assert len(sent) == 1
    for s in child.streams.values():
        os.close(s.read_fd)


def test_blocking_tee_copies_a_pipe_to_the_log_and_the_terminal(tmp_path: Path) -> None:
    r, w = os.pipe()
    er, ew = os.pipe()
    log, idx = AppendFile(tmp_path / "stdout.log"), AppendFile(tmp_path / "stdout.idx")
    tee = BlockingTee("stdout", r, ew, log, idx)
    tee.start()
    os.write(w, b"step 1 loss 2.3\n")
    os.write(w, b"step 2 loss 2.1\n")
    os.close(w)
    tee.join(10)
    assert not tee.is_alive() and tee.received == 32
    assert (tmp_path / "stdout.log").read_bytes() == b"step 1 loss 2.3\nstep 2 loss 2.1\n"
    os.close(ew)
    assert os.read(er, 100) == b"step 1 loss 2.3\nstep 2 loss 2.1\n"
    assert (tmp_path / "stdout.idx").read_bytes().startswith(IDX_MAGIC)
    os.close(r)
    os.close(er)


def test_the_session_and_its_helpers_import_no_posix_only_module() -> None:
    """What Windows imports to record: the keeper and the POSIX child are imported only where used."""
    code = ("import sys, forensics.record.session, forensics.record.supervisor, forensics.record.snapshot, "
            "forensics.record.nvml_worker; print(sorted(m for m in ('forensics.record.keeper', "
            "'forensics.record.child', 'pty', 'termios', 'tty') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stdout + res.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="checks the Windows path from a POSIX system")
@pytest.mark.slow
def test_the_recorder_type_checks_as_windows() -> None:
    """The whole recorder as Windows Python sees it: what runs there must not touch a POSIX-only name
    (``os.pwrite``, ``signal.SIGHUP`` …); the POSIX-only modules say so at their top, so mypy skips
    them for win32 and flags any import of them on the Windows path."""
    res = subprocess.run([sys.executable, "-m", "mypy", "--platform", "win32", "--no-incremental", "forensics/record"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
