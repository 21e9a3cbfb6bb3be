"""Run the child as if the recorder were not there: terminal, signals, exit status.

* **Process group and terminal.** The child gets its own process group. When the
  recorder is the terminal's foreground job, that group is made the foreground group
  (as a shell does for a job), so Ctrl-C, Ctrl-\\ and Ctrl-Z reach the child directly —
  exactly once — and the child can read the terminal (``pdb`` works: stdin is never
  touched). The recorder ignores SIGTTOU so it can still echo and take the terminal
  back at the end.
* **Signals sent to the recorder** (SIGTERM from a scheduler, SIGHUP from a closing
  shell, SIGINT/SIGQUIT/SIGUSR1/SIGUSR2 from ``kill``) are passed to the child's process,
  as ``kill <pid>`` would deliver them. SIGCONT/SIGTSTP go to its whole group.
* **Ctrl-Z.** When the child stops on a terminal stop signal, the recorder takes the
  terminal back and stops itself, so the shell sees the job stopped; on ``fg`` it hands
  the terminal back and continues the child.
* **Output.** If the recorder's stdout (stderr) is a terminal, the child's is a
  pseudo-terminal in raw mode with the same window size — the child still sees a tty
  (colours, line buffering, progress bars unchanged); otherwise a pipe, as it had.
* **Exit status.** The child's exit code, or 128+N when signal N killed it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import signal
import subprocess
import sys
import termios
import tty
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from forensics.record.relay import SignalRelay
from forensics.record.tee import same_destination

if sys.platform == "win32":  # never imported there (platform/windows.py runs the child); tells mypy so
    raise ImportError("forensics.record.child is POSIX only")

__all__ = ["FORWARDED", "Child", "ExitStatus"]

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGALRM, signal.SIGPWR, signal.SIGXCPU)
_JOB_CONTROL = (signal.SIGCONT, signal.SIGTSTP)
_TTY_STOPS = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)
PIPE_BYTES = 1 << 20  # room for the child to run ahead of the tee (the unprivileged maximum by default)


@dataclass
class ExitStatus:
    code: int | None = None
    signal: int | None = None

    @property
    def shell_status(self) -> int:
        if self.signal is not None:
            return 128 + self.signal
        return self.code if self.code is not None else 1


def _terminal_fd() -> int | None:
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return fd
        except OSError:
            continue
    return None


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _winsize(fd: int) -> bytes | None:
    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except OSError:
        return None


@dataclass
class _Stream:
    read_fd: int  # the recorder reads the child's output here
    child_fd: int  # what the child writes to
    is_pty: bool
    echo_fd: int  # where the recorder echoes it (1 or 2)


@dataclass
class Child(SignalRelay):
    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    streams: dict[str, _Stream] = field(default_factory=dict)
    tty_fd: int | None = None
    handed_terminal: bool = False
    forwarded: list[int] = field(default_factory=list)
    _pending: list[int] = field(default_factory=list)
    _old_handlers: dict[int, object] = field(default_factory=dict)

    # -- setup ----------------------------------------------------------------------------------
    def _make_stream(self, name: str, echo_fd: int) -> _Stream:
        if os.isatty(echo_fd):
            master, slave = pty.openpty()
            with contextlib.suppress(termios.error):
                tty.setraw(slave)
            size = _winsize(echo_fd)
            if size:
                with contextlib.suppress(OSError):
                    fcntl.ioctl(master, termios.TIOCSWINSZ, size)
            os.set_inheritable(master, False)
            return _Stream(master, slave, True, echo_fd)
        r, w = os.pipe()
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        return _Stream(r, w, False, echo_fd)

    def _relayed(self) -> Iterable[int]:
        return (*FORWARDED, *_JOB_CONTROL)

    def open_streams(self) -> dict[str, _Stream]:
        """Make the child's stdout/stderr (pty or pipe) before the spawn, so a keeper can share the read ends.
        When both lead to one terminal the child gets one pseudo-terminal for both, as a shell gives it
        one terminal: the kernel keeps the order of its writes, and the bundle has them in ``stdout.log``
        (``merged_stderr``)."""
        if not self.streams:
            out = self._make_stream("stdout", 1)
            if out.is_pty and _isatty(2) and same_destination(1, 2):
                self.streams = {"stdout": out}
            else:
                self.streams = {"stdout": out, "stderr": self._make_stream("stderr", 2)}
        return self.streams

    @property
    def merged_stderr(self) -> bool:
        """Is the child's stderr the same pseudo-terminal as its stdout?"""
        return bool(self.streams) and "stderr" not in self.streams

    def start(self) -> None:
        """Spawn the child (raises OSError when it cannot be executed)."""
        self.open_streams()
        tty_fd = _terminal_fd()
        foreground = False
        if tty_fd is not None:
            try:
                foreground = os.tcgetpgrp(tty_fd) == os.getpgrp()
            except OSError:
                foreground = False
        self.tty_fd = tty_fd

        def in_child() -> None:  # runs between fork and exec: plain system calls only
            os.setpgid(0, 0)
            if foreground and tty_fd is not None:
                old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
                with contextlib.suppress(OSError):
                    os.tcsetpgrp(tty_fd, os.getpid())
                signal.signal(signal.SIGTTOU, old)

        out = self.streams["stdout"]
        err = self.streams.get("stderr", out)
        try:
            self.proc = subprocess.Popen(list(self.argv), stdin=None, stdout=out.child_fd, stderr=err.child_fd,
                                         env=dict(self.env), cwd=self.cwd, preexec_fn=in_child, close_fds=True)
        finally:
            for s in self.streams.values():
                os.close(s.child_fd)
        with contextlib.suppress(OSError):
            os.setpgid(self.proc.pid, self.proc.pid)
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        if foreground and tty_fd is not None:
            with contextlib.suppress(OSError):
                os.tcsetpgrp(tty_fd, self.proc.pid)
                self.handed_terminal = True
        self._forward_pending()

    # -- signals (SignalRelay keeps the early ones) ------------------------------------------------
    def _deliver(self, sig: int) -> None:
        if sig == signal.SIGCONT:
            self._resume()
            return
        self._forward(sig)

    def _forward(self, sig: int) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        self.forwarded.append(sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if sig in _JOB_CONTROL:
                os.killpg(proc.pid, sig)
            else:
                os.kill(proc.pid, sig)

    def _resume(self) -> None:
        """We were continued (``fg``/``bg``): give the terminal back if we are in front, continue the child."""
        proc = self.proc
        if proc is None:
            return
        if self.tty_fd is not None:
            with contextlib.suppress(OSError):
                if os.tcgetpgrp(self.tty_fd) == os.getpgrp():
                    os.tcsetpgrp(self.tty_fd, proc.pid)
                    self.handed_terminal = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGCONT)

    def _stopped(self, sig: int) -> None:
        """The child stopped on a terminal stop signal: stop the recorder too, so the shell sees it."""
        if sig not in _TTY_STOPS or self.tty_fd is None:
            return
        with contextlib.suppress(OSError):
            os.tcsetpgrp(self.tty_fd, os.getpgrp())
        os.kill(os.getpid(), signal.SIGSTOP)  # SIGCONT (fg/bg) resumes us through _resume

    # -- waiting ----------------------------------------------------------------------------------
    def wait(self) -> ExitStatus:
        proc = self.proc
        assert proc is not None
        while True:
            try:
                pid, status = os.waitpid(proc.pid, os.WUNTRACED)
            except ChildProcessError:
                return ExitStatus(code=proc.returncode)
            if pid != proc.pid:
                continue
            if os.WIFSTOPPED(status):
                self._stopped(os.WSTOPSIG(status))
                continue
            if os.WIFSIGNALED(status):
                proc.returncode = -os.WTERMSIG(status)
                return ExitStatus(signal=os.WTERMSIG(status))
            proc.returncode = os.WEXITSTATUS(status)
            return ExitStatus(code=os.WEXITSTATUS(status))

    def take_back_terminal(self) -> None:
        if self.handed_terminal and self.tty_fd is not None:
            with contextlib.suppress(OSError):
                os.tcsetpgrp(self.tty_fd, os.getpgrp())
            self.handed_terminal = False

    def sync_window_size(self) -> None:
        """Copy the real terminal's size to the child's pseudo-terminals (called when idle)."""
        for s in self.streams.values():
            if not s.is_pty:
                continue
            size = _winsize(s.echo_fd)
            if size and size != _winsize(s.read_fd):
                with contextlib.suppress(OSError):
                    fcntl.ioctl(s.read_fd, termios.TIOCSWINSZ, size)

