"""One recording: the bundle directory, the child, and the helpers around it.

Order matters for a guest: validate (bad usage leaves nothing behind), create the bundle
and its manifest (status ``running``), fork the keeper (it passes the child's output on if
this process is SIGKILLed: keeper.py), start the child at once, then the helpers (NVML
sampler, kernel log, host snapshot) — none of them can delay or stop the child. At the
end the manifest is completed (``finished`` or ``interrupted``) by an atomic rename.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forensics import __version__
from forensics.errors import RecordError, UsageError
from forensics.ingest.bundle import FORMAT, MANIFEST, VERSION
from forensics.record.arm import TORCH_DIR, arm_env, child_torch_version
from forensics.record.clock import boot_times, iso_utc, local_zone_name, now_ns, stamp_for_path
from forensics.record.degrade import Degradation
from forensics.record.holders import holders_of
from forensics.record.kernel_log import KernelLogFollower
from forensics.record.lifeline import BACKGROUND, LIFELINE_ARG, helper_flags
from forensics.record.live_watcher import FINAL_S as LIVE_FINAL_S
from forensics.record.live_watcher import LiveWatcher
from forensics.record.platform import ChildLike, ExitStatusLike, HostEvents, KeeperLike, TeeRunner
from forensics.record.platform import current as current_platform
from forensics.record.redact import redact_argv, redact_env, secret_values
from forensics.record.supervisor import RECORDER_LOG, NvmlSupervisor
from forensics.record.tee import PIPE_BATCH_S, StreamTee
from forensics.record.writer import OPEN_FLAGS, AppendFile, Flusher, atomic_write_json
from forensics.secret_values import FILE as VALUES_FILE
from forensics.secret_values import write_values

__all__ = ["Recording", "record"]

DRAIN_S = 2.0  # without a keeper: after the child is gone, how long a quiet output stream is still read
EOF_WAIT_S = 0.25  # after the child is gone: how long its output may take to reach end of file
HELPER_REPORT_ENV = "FORENSICS_HELPER_REPORT_S"  # at the end: how long to wait for helpers that have not reported
HELPER_REPORT_S = 0.3
STOP_S = 0.3  # at the end: how long the NVML sampler and the kernel log follower may take to stop
TAIL_ENV = "FORENSICS_TAIL_S"  # after a failed run: keep listening this long for late Xid/kernel lines
SNAPSHOT_WAIT_ENV = "FORENSICS_SNAPSHOT_WAIT_S"  # at the end: how long an unfinished host snapshot may still run
LIVE_FINAL_ENV = "FORENSICS_LIVE_FINAL_S"  # after the child ended: how long the live watcher may still take
SNAPSHOT_END_ENV = "FORENSICS_SNAPSHOT_END"  # "background" (default): it finishes on its own; "cut": it is stopped
NVML_PAGE_ENV = "FORENSICS_NVML_PAGE"  # tests: hand the deadline page over as Windows does ("path") on Linux


class Manifest:
    """``manifest.json``: rewritten whole, by atomic rename, whenever it changes and once a second."""

    def __init__(self, bundle: Path, data: dict[str, Any]) -> None:
        self.path = bundle / MANIFEST
        self.data = data
        #: told when the manifest cannot be written (the disk is full, the directory gone)
        self.on_error: Any = None
        self._lock = threading.Lock()
        self._hb_fd = os.open(bundle / "heartbeat", os.O_WRONLY | os.O_CREAT | OPEN_FLAGS, 0o644)

    def update(self, **fields: Any) -> None:
        with self._lock:
            self.data.update(fields)

    def source(self, name: str, info: dict[str, Any]) -> None:
        with self._lock:
            self.data["sources"][name] = {**self.data["sources"].get(name, {}), **info}

    def error(self, what: str, exc: BaseException) -> None:
        with self._lock:
            self.data.setdefault("recorder_errors", []).append(f"{what}: {type(exc).__name__}: {exc}")

    def write(self) -> bool:
        with self._lock:
            snapshot = json.loads(json.dumps(self.data, default=str))
        try:
            atomic_write_json(self.path, snapshot)
        except OSError as exc:  # disk full / gone: the previous manifest stays valid
            with contextlib.suppress(OSError):
                os.unlink(self.path.with_name(self.path.name + ".tmp"))
            if self.on_error is not None:
                self.on_error(os.strerror(exc.errno) if exc.errno else str(exc))
            return False
        return True

    def heartbeat(self) -> None:
        ns = now_ns()
        self.update(heartbeat=iso_utc(ns), heartbeat_ns=ns)
        with contextlib.suppress(OSError):
            _write_at_start(self._hb_fd, f"{iso_utc(ns)} {ns}\n".encode())
            os.fsync(self._hb_fd)
        self.write()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._hb_fd)


def _write_at_start(fd: int, data: bytes) -> None:
    """Overwrite the start of the file behind ``fd`` (the heartbeat's one line)."""
    if sys.platform == "win32":  # no pwrite there
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data)
    else:
        os.pwrite(fd, data, 0)


def _float_env(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def resolve_command(cmd: str, path: str | None) -> str:
    if "/" in cmd:
        p = Path(cmd)
        if not p.exists():
            raise RecordError(f"command not found: {cmd}")
        if p.is_dir() or not os.access(p, os.X_OK):
            raise RecordError(f"not an executable file: {cmd}")
        return str(p)
    found = shutil.which(cmd, path=path)
    if found is None:
        raise RecordError(f"command not found: {cmd}")
    return found


def child_python(exe: str, path: str | None) -> str:
    """The Python interpreter the child runs (to ask it for torch and pip versions)."""
    if os.path.basename(exe).startswith("python"):
        return exe
    try:
        with open(exe, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        first = b""
    if first.startswith(b"#!") and b"python" in first:
        parts = first[2:].decode(errors="replace").split()
        if parts and os.path.basename(parts[0]) == "env" and len(parts) > 1:
            found = shutil.which(parts[-1], path=path)
            if found:
                return found
        elif parts and os.path.isfile(parts[0]):
            return parts[0]
    return shutil.which("python3", path=path) or sys.executable


def _bundle_dir(out: Path, host: str, start_ns: int) -> Path:
    safe_host = "".join(c if c.isalnum() or c in "-._" else "_" for c in host) or "host"
    try:
        out.mkdir(parents=True, exist_ok=True)
        base = out / f"{safe_host}-{stamp_for_path(start_ns)}-{os.getpid()}"
        for n in range(100):
            path = base if n == 0 else base.with_name(f"{base.name}.{n}")
            try:
                path.mkdir()
                return path
            except FileExistsError:
                continue
        raise RecordError(f"cannot create a bundle in {out}: too many bundles with the same name")
    except OSError as exc:
        raise RecordError(f"cannot create a bundle in {out}: {exc.strerror or exc}") from None


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _ensure_std_fds() -> None:
    """A recorder started with stdin/stdout/stderr closed (a daemon) must not hand those numbers out
    to its own pipes: put /dev/null there first."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


class Recording:
    def __init__(self, argv: Sequence[str], out: Path, interval: float, arm: bool,
                 watch: Sequence[str] | None = None, tell: bool = False) -> None:
        _ensure_std_fds()
        self.watch, self.tell = watch, tell  # the live watcher's arguments (None: --no-watch); its lines shown
        self.argv = list(argv)
        self.env = dict(os.environ)
        self.exe = resolve_command(self.argv[0], self.env.get("PATH"))
        self.interval = interval
        self.start_ns = now_ns()
        self.start_mono_us = time.monotonic_ns() // 1000  # CLOCK_MONOTONIC on Linux, as kmsg stamps
        self.platform = current_platform(self.env)
        self.host = socket.gethostname()
        self.bundle = _bundle_dir(out, self.host, self.start_ns)
        self.python = child_python(self.exe, self.env.get("PATH"))
        self.torch_version = child_torch_version(self.python, self.env) if arm else None
        self.armed = arm_env(self.env, self.bundle, self.torch_version) if arm else {}
        self.env.update(self.armed)
        boot = boot_times()
        boot_used = next((k for k in ("monotonic", "boottime", "btime") if boot.get(k) is not None), None)
        self.manifest = Manifest(self.bundle, {
            "format": FORMAT,
            "version": VERSION,
            "status": "running",
            "host": self.host,
            "command": redact_argv(self.argv),
            "cwd": os.getcwd(),
            "start": iso_utc(self.start_ns),
            "start_ns": self.start_ns,
            "end": None,
            "end_ns": None,
            "exit_code": None,
            "signal": None,
            "signal_name": None,
            "recorder_pid": os.getpid(),
            "child_pid": None,
            "boot_time_ns": boot.get(boot_used) if boot_used else None,
            "boot_time": {**boot, "used": boot_used},
            "tz_name": local_zone_name(),
            "interval_s": interval,
            "armed": self.armed,
            "armed_for": {"python": self.python, "torch": self.torch_version} if arm else None,
            "recorder": {"version": __version__, "python": sys.version.split()[0]},
            "sources": {name: {"status": "starting"}
                        for name in ("nvml", "nvml_events", "kernel_log", "host_snapshot")},
            "heartbeat": iso_utc(self.start_ns),
            "heartbeat_ns": self.start_ns,
        })
        if self.platform.facts is not None:  # WSL2 or Windows: what was detected, and the host's log
            self.manifest.update(platform=self.platform.facts)
            self.manifest.source("host_events", {"status": "starting"})
        self.manifest.write()
        self.degradation = Degradation(self.bundle, self._persist_degraded)
        self.manifest.on_error = lambda error: self.degradation.lost(MANIFEST, error)
        self.child: ChildLike = self.platform.child(self.argv, self.env)
        self.flusher = Flusher(self._tick, on_error=self._file_lost)
        self.tees: list[StreamTee] = []
        self.tee_runners: list[TeeRunner] = []
        self.supervisor: NvmlSupervisor | None = None
        self.kernel_log: KernelLogFollower | None = None
        self.host_events: HostEvents | None = None
        self.snapshot: subprocess.Popen[bytes] | None = None
        self.keeper: KeeperLike | None = None
        self.watcher: LiveWatcher | None = None
        self._ended_mono = time.monotonic()

    def _tick(self) -> None:
        """Once a second: the heartbeat, the terminal's size passed on to the child's pseudo-terminals,
        and whether the bundle directory is still there."""
        self.child.sync_window_size()
        self.degradation.check_directory()
        self.manifest.heartbeat()

    def _file_lost(self, f: AppendFile) -> None:
        self.degradation.lost(f.path.name, f.error or "write failed", offset=f.size,
                              note="the command's output still reaches the terminal")

    def _persist_degraded(self, items: list[dict[str, Any]]) -> bool:
        self.manifest.update(degraded=items)
        return self.manifest.write()

    # -- the run ------------------------------------------------------------------------------------
    def run(self) -> ExitStatusLike:
        if self.armed:
            (self.bundle / TORCH_DIR).mkdir(exist_ok=True)
        self.child.install_signal_handlers()
        if self.platform.keeper:
            self._guard("keeper", self._start_keeper)
        try:
            self.child.start()
        except (OSError, subprocess.SubprocessError) as exc:
            if self.keeper is not None:
                self.keeper.release()
            reason = getattr(exc, "strerror", None) or str(exc)
            self.manifest.update(status="failed-to-start", error=f"cannot run {self.argv[0]}: {reason}",
                                 end=iso_utc(now_ns()), end_ns=now_ns())
            self.manifest.write()
            self.manifest.close()
            self.child.restore_signal_handlers()
            raise RecordError(f"cannot run {self.argv[0]}: {reason}") from None
        assert self.child.proc is not None
        if self.keeper is not None:
            self.keeper.child_started(self.child.proc.pid)
        self.manifest.update(child_pid=self.child.proc.pid)
        self._start_helpers()
        try:
            status = self.child.wait()
        except BaseException as exc:  # the recorder could not see the child to its end: say so, close up
            # (the keeper is not released: when this process exits, it passes the child's output on)
            self.manifest.update(status="interrupted", error=f"{type(exc).__name__}: {exc}",
                                 end=iso_utc(now_ns()), end_ns=now_ns())
            self._guard("closing", self._close_files)
            raise
        end = now_ns()
        self._ended_mono = time.monotonic()
        if self.watcher is not None:
            self.watcher.child_ended()
        self.child.take_back_terminal()
        self.manifest.update(end=iso_utc(end), end_ns=end, exit_code=status.code, signal=status.signal,
                             signal_name=signal.Signals(status.signal).name if status.signal else None)
        self._finish(status)
        return status

    def _guard(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:  # a helper that fails costs its evidence, never the run
            self.manifest.error(what, exc)
            return None

    def _start_keeper(self) -> None:
        """Fork the keeper before the child, while this process has no other thread (see keeper.py)."""
        if sys.platform == "win32":  # no fork there: its platform says keeper = False
            return
        from forensics.record.keeper import Keeper, KeptStream

        self.keeper = Keeper.start([KeptStream(s.read_fd, s.echo_fd, self.bundle / f"{name}.log",
                                               self.bundle / f"{name}.idx")
                                    for name, s in self.child.open_streams().items()])

    def _start_helpers(self) -> None:
        self._guard("tees", self._start_tees)
        self.flusher.start()
        self._guard("host files", self._write_host_files)
        self._guard("nvml", self._start_nvml)
        self._guard("kernel log", self._start_kernel_log)
        if self.platform.facts is not None:
            self._guard("host events", self._start_host_events)
        self._guard("host snapshot", self._start_snapshot)
        if self.watch is not None:
            self._guard("live watcher", self._start_watcher)
        self.manifest.write()

    def _start_watcher(self) -> None:
        self.manifest.source("live", {"status": "starting", "file": "live.jsonl"})
        self.watcher = LiveWatcher(self.bundle, self.watch or [], self.tell, self.tees,
                                   colour=self.tell and _isatty(2) and "NO_COLOR" not in os.environ)

    def _start_tees(self) -> None:
        pty = False
        for name, stream in self.child.streams.items():
            log = self.flusher.add(AppendFile(self.bundle / f"{name}.log"))
            idx = self.flusher.add(AppendFile(self.bundle / f"{name}.idx"))
            pty = pty or stream.is_pty
            self.tees.append(self.platform.tee(name, stream.read_fd, stream.echo_fd, log, idx,
                                               batch_s=0.0 if stream.is_pty else PIPE_BATCH_S))
            self.manifest.source(name, {"status": "ok", "file": f"{name}.log", "index": f"{name}.idx",
                                        "terminal": "pty" if stream.is_pty else "pipe"})
        if getattr(self.child, "merged_stderr", False):
            self.manifest.source("stderr", {"status": "merged", "into": "stdout.log",
                                            "reason": "stdout and stderr are one terminal: the child got one "
                                                      "pseudo-terminal for both, as from a shell"})
        self.tee_runners = self.platform.tee_runners(self.tees, 0.0 if pty else PIPE_BATCH_S)
        for runner in self.tee_runners:
            runner.start()

    def _write_host_files(self) -> None:
        host = self.bundle / "host"
        host.mkdir(exist_ok=True)
        atomic_write_json(host / "env.json", redact_env(self.env))
        # what was hidden, as keyed hashes only: readers find those values again wherever they appear
        n = write_values(host / VALUES_FILE, secret_values(self.env, self.argv))
        self.manifest.update(secret_values={"count": n, "file": f"host/{VALUES_FILE}",
                                            "hash": "BLAKE2b keyed with this user's key (kept outside the bundle)"}
                             if n else {"count": 0})
        atomic_write_json(host / "command.json", {"argv": redact_argv(self.argv), "executable": self.exe,
                                                  "cwd": os.getcwd(), "armed": self.armed})

    def _start_nvml(self) -> None:
        if self.platform.nvml_unavailable is not None:
            for name in ("nvml", "nvml_events"):
                self.manifest.source(name, {"status": "unavailable", "reason": self.platform.nvml_unavailable})
            return
        page = self.env.get(NVML_PAGE_ENV) or self.platform.nvml_page
        self.supervisor = NvmlSupervisor(self.bundle, self.interval, self._nvml_status, page=page)
        self.supervisor.start()

    def _nvml_status(self, name: str, info: dict[str, Any]) -> None:
        if name == "lost":  # the sampler could not write one of its files
            offset = info.get("offset")
            self.degradation.lost(str(info.get("file")), str(info.get("error")),
                                  offset=offset if isinstance(offset, int) else None)
        else:
            self.manifest.source(name, info)

    def _start_kernel_log(self) -> None:
        reason = self.platform.kernel_log_unavailable
        if reason is not None:
            self.manifest.source("kernel_log", {"status": "unavailable", "reason": reason})
            return
        self.kernel_log = KernelLogFollower(self.bundle, self.start_mono_us, self.manifest.source, self.flusher.add)
        self.kernel_log.start()

    def _start_host_events(self) -> None:
        self.host_events = self.platform.host_events(self.bundle, self.manifest.source, self.flusher.add)
        if self.host_events is not None:
            self.host_events.start()

    def _start_snapshot(self) -> None:
        argv = [sys.executable, "-m", "forensics.record.snapshot", str(self.bundle), self.python, LIFELINE_ARG]
        # No death signal: at the end it may finish in the background (_stop_snapshot); its stdin lifeline
        # still ends it when the recorder dies without saying so.
        # Its own session and process group: stopping it (FORENSICS_SNAPSHOT_END=cut) stops what it runs too,
        # and no terminal signal meant for the child reaches it.
        with open(self.bundle / RECORDER_LOG, "ab") as log:
            self.snapshot = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=log, stderr=log, env=self.env,
                                             close_fds=True, creationflags=helper_flags(idle=True),
                                             start_new_session=sys.platform != "win32")

    # -- closing ------------------------------------------------------------------------------------
    def _finish(self, status: ExitStatusLike) -> None:
        streams = self._end_output()
        deadline = time.monotonic() + _float_env(HELPER_REPORT_ENV, HELPER_REPORT_S)
        while time.monotonic() < deadline and any(
                self.manifest.data["sources"].get(s, {}).get("status") == "starting" for s in ("nvml", "kernel_log")):
            time.sleep(0.02)
        if status.code != 0:
            # The driver often logs the Xid as the failed process's context is torn down, and NVML
            # delivers its event up to a second later: keep the sampler and kernel log a moment longer.
            ended = self.manifest.data.get("end_ns") or now_ns()
            time.sleep(max(0.0, _float_env(TAIL_ENV, 2.0) - (now_ns() - ended) / 1e9))
        # Stop the helpers together, each within STOP_S: none of them may hold the exit.
        if self.supervisor is not None:
            self._guard("stop nvml", self.supervisor.request_stop, STOP_S)
        if self.kernel_log is not None:
            self._guard("stop kernel log", self.kernel_log.request_stop)
        if self.host_events is not None:
            self._guard("stop host events", self.host_events.stop)
        self._guard("host snapshot", self._stop_snapshot)
        self._guard("stop nvml", self._stop_nvml)
        if self.kernel_log is not None:
            self._guard("stop kernel log", self.kernel_log.stop, STOP_S)
        if self.watcher is not None:
            watcher = self.watcher
            deadline = max(self._ended_mono + _float_env(LIVE_FINAL_ENV, LIVE_FINAL_S), time.monotonic() + 0.5)
            self._guard("live watcher", lambda: self.manifest.source("live", watcher.stop(deadline)))
        for name, info in streams.items():
            self.manifest.source(name, info)
        for name, info in list(self.manifest.data["sources"].items()):
            if info.get("status") == "starting":
                self.manifest.source(name, {"status": "not-ready", "reason": "the run ended before it reported"})
        self.manifest.update(status="finished", forwarded_signals=[signal.Signals(s).name
                                                                   for s in self.child.forwarded])
        self._close_files()

    def _end_output(self) -> dict[str, dict[str, Any]]:
        """Read the child's output to its end. A stream another process still holds (a daemon the child
        left behind) is handed to the keeper, which passes it on until it is closed, so that process
        lives on as it would without the recorder; without a keeper it is read until quiet for DRAIN_S."""
        deadline = time.monotonic() + EOF_WAIT_S
        for runner in self.tee_runners:
            runner.join(timeout=max(0.0, deadline - time.monotonic()))
        held = [t for t in self.tees if not t.eof.is_set()]
        notes: dict[str, str] = {}
        keeper_pid = getattr(self.keeper, "pid", None)
        if held:
            who = {t.name: holders_of(t.src_fd) for t in held}
            if self.keeper is not None:
                for runner in self.tee_runners:
                    runner.halt()
                for runner in self.tee_runners:
                    runner.join(timeout=2.0)
                for t in held:
                    notes[t.name] = (f"still held open by {who[t.name] or 'another process'} when the child ended: "
                                     "the keeper passes it on (terminal and log) until it is closed")
                self._guard("keeper", self.keeper.hand_over)
                self.keeper = None
            else:
                for runner in self.tee_runners:
                    runner.stop_when_quiet(DRAIN_S)
                for runner in self.tee_runners:
                    runner.join(timeout=DRAIN_S + 10)
                for t in held:
                    if not t.eof.is_set():
                        notes[t.name] = (f"stopped reading {DRAIN_S:g} s after the child ended and the output fell "
                                         f"quiet: still held open by {who[t.name] or 'another process'}")
        if self.keeper is not None:
            self._guard("keeper", self.keeper.release)
        out: dict[str, dict[str, Any]] = {}
        for t in self.tees:
            name = t.name.removeprefix("forensics-tee-")
            out[name] = {"bytes": t.received, "echo_error": t.echo_error, "dropped": t.log.dropped,
                         "write_error": t.log.error}
            if t.name in notes:
                out[name]["held_open"] = notes[t.name]
                if keeper_pid is not None and "keeper" in notes[t.name]:
                    out[name]["keeper_pid"] = keeper_pid
        return out

    def _close_files(self) -> None:
        self.flusher.stop()
        for f in self.flusher.files:
            f.close()
        self.manifest.heartbeat()
        self.manifest.close()
        self.degradation.close()
        self.child.restore_signal_handlers()

    def _stop_nvml(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop(STOP_S)
            self.supervisor.close()

    def _stop_snapshot(self) -> None:
        """Give an unfinished host snapshot a moment, then let it finish in the background at idle priority
        (it writes ``host/snapshot.json`` last; its own commands' timeouts bound it), or stop it
        (``FORENSICS_SNAPSHOT_END=cut``). Either way the manifest says so and the exit is not held."""
        proc = self.snapshot
        if proc is None:
            return
        wait_s = _float_env(SNAPSHOT_WAIT_ENV, 0.2)
        try:
            proc.wait(timeout=wait_s)
            self.manifest.source("host_snapshot", {"status": "ok" if proc.returncode == 0 else "failed",
                                                   "rc": proc.returncode, "dir": "host"})
        except subprocess.TimeoutExpired:
            if os.environ.get(SNAPSHOT_END_ENV, "background") == "cut":
                if sys.platform == "win32":
                    proc.kill()
                else:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)  # with the nvidia-smi or pip it is running
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=1.0)
                reason = f"still running {wait_s:g} s after the child ended: stopped"
                self.manifest.source("host_snapshot", {"status": "incomplete", "reason": reason})
            else:
                if proc.stdin is not None:
                    with contextlib.suppress(OSError):
                        proc.stdin.write(BACKGROUND)
                        proc.stdin.flush()
                self.manifest.source("host_snapshot", {
                    "status": "background", "pid": proc.pid, "dir": "host",
                    "reason": f"still running {wait_s:g} s after the child ended: it finishes on its own at idle "
                              "priority and writes host/snapshot.json last (a missing snapshot.json: it was cut "
                              "short)"})
        finally:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()


def _say(text: str, announce: bool) -> None:
    """One line of the recorder's own on stderr, before the child starts or after it ended (never while
    its output flows); only on a terminal unless ``announce``, so a captured stderr stays the child's."""
    if not announce:
        return
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"forensics: {text}\n")
        sys.stderr.flush()


def record(argv: Sequence[str], out: Path, interval: float, arm: bool, announce: bool | None = None,
           watch: Sequence[str] | None = None) -> int:
    """Run ``argv`` under the recorder; returns the exit status to pass on. ``announce``: print where
    the bundle is at the start and the end, and the live watcher's alerts (``None``: when stderr is a
    terminal). ``watch``: the live watcher's arguments (None: no watcher)."""
    if not argv:
        raise UsageError("record: no command given (usage: forensics record [--out DIR] [--interval S] "
                         "[--no-arm] -- CMD ...)")
    if not 0.01 <= interval <= 3600:
        raise UsageError(f"record: --interval must be between 0.01 and 3600 seconds, got {interval:g}")
    if announce is None:
        announce = _isatty(2)
    rec = Recording(argv, out, interval, arm, watch=watch, tell=announce)
    _say(f"recording into {rec.bundle}", announce)
    try:
        status = rec.run()
    except BaseException:
        _say(f"bundle left in {rec.bundle} ({rec.manifest.data.get('status')})", announce)
        raise
    how = f"signal {signal.Signals(status.signal).name}" if status.signal else f"exit {status.code}"
    if announce and any(t.tail not in (b"", b"\n") for t in rec.tees):
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write("\n")  # the child's last line had no end: ours starts on a line of its own
    _say(f"bundle written to {rec.bundle} ({how}); explain it with: "
         f"forensics analyze {shlex.quote(str(rec.bundle))}", announce)
    if status.signal == signal.SIGINT and rec.child.tty_fd is not None:
        # A shell decides whether to stop a script by how its job died: die the same way.
        sys.stdout.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return status.shell_status
