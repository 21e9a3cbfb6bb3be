"""The host snapshot: ``python -m forensics.record.snapshot BUNDLE PYTHON``.

Runs once at start in its own low-priority process (it never delays the child) with the
child's environment, and writes ``host/``:

``nvidia-smi-q.xml``   ``nvidia-smi -q -x``
``nvidia-smi-topo.txt`` ``nvidia-smi topo -m``
``nvidia-driver.txt``  ``/proc/driver/nvidia/version``
``lspci-tree.txt``     ``lspci -tvnn`` (where each GPU hangs: root port, switch, chipset)
``lspci.txt``          ``lspci -nn``
``system.json``        kernel, OS, CPU count, memory, boot id, kernel command line
``versions.json``      torch / CUDA / cuDNN / NCCL as the child's Python sees them (asked in a
                       subprocess with a timeout; torch is never imported by the recorder)
``pip-freeze.txt``     ``PYTHON -m pip freeze``
``snapshot.json``      every command run, its exit status, time taken, and any problem

``host/gpus.json`` (NVML: identities, PCIe links, P2P matrix) is written by the sampler;
``host/env.json`` and ``host/command.json`` (redacted) by the recorder itself.
Every command has a timeout (:func:`forensics.record.bounded.run_bounded`).

What differs per platform is one small part (:func:`host_part`): on Linux and other POSIX systems
:class:`PosixHost` (above: ``/proc``, ``/etc/os-release``, idle scheduling); on native Windows
:class:`forensics.record.snapshot_windows.WindowsHost` (CIM queries for the OS, the display adapters
and their PCI locations, ``system.json`` in the same shape, ``windows-gpus.json``). nvidia-smi,
the versions and pip freeze are shared. ``FORENSICS_SNAPSHOT_PLATFORM=windows`` runs the Windows
part elsewhere (tests, with fake tools on ``PATH``).

With ``lifeline`` as third argument, stdin is the recorder's lifeline: end of file ends the snapshot
(:func:`forensics.record.lifeline.hold_lifeline`).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from forensics.record.bounded import Result, run_bounded
from forensics.record.lifeline import LIFELINE_ARG, hold_lifeline
from forensics.record.redact import redact_value
from forensics.record.writer import atomic_write_json

__all__ = ["PLATFORM_ENV", "VERSIONS_SCRIPT", "HostPart", "PosixHost", "host_part", "main"]

PLATFORM_ENV = "FORENSICS_SNAPSHOT_PLATFORM"  # "windows": the Windows part on another system (tests)
BACKGROUND_MAX_S = 180.0  # finishing on its own after the recorder ended: never longer than this

VERSIONS_SCRIPT = """
import json, sys
out = {"python": sys.version.split()[0], "executable": sys.executable}
try:
    import torch
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    try:
        out["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:
        out["cudnn"] = None
    try:
        v = torch.cuda.nccl.version()
        out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:
        out["nccl"] = None
except ImportError as exc:
    out["torch"] = None
    out["torch_missing"] = str(exc)
print(json.dumps(out))
"""


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _record(log: list[dict[str, Any]], name: str, res: Result) -> None:
    argv = [a if len(a) < 200 else "<script>" for a in res.argv]
    entry: dict[str, Any] = {"name": name, "argv": argv, "rc": res.rc, "seconds": round(res.seconds, 3)}
    if res.problem:
        entry["problem"] = res.problem
    elif res.rc:
        entry["problem"] = (res.stderr.decode(errors="replace").strip().splitlines() or [f"exit {res.rc}"])[-1][:300]
    log.append(entry)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def _system() -> dict[str, Any]:
    os_release = {}
    for line in (_read("/etc/os-release") or "").splitlines():
        key, _, value = line.partition("=")
        if key in ("PRETTY_NAME", "ID", "VERSION_ID"):
            os_release[key.lower()] = value.strip('"')
    mem_kb = None
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "machine": platform.machine(),
        "os": os_release,
        "cpus": os.cpu_count(),
        "mem_total_kib": mem_kb,
        "boot_id": _read("/proc/sys/kernel/random/boot_id"),
        "kernel_cmdline": _read("/proc/cmdline"),
        "recorder_python": sys.version.split()[0],
    }


class HostPart(Protocol):
    """What the snapshot asks of its platform."""

    name: str

    def be_idle(self) -> None: ...
    def nvidia_smi(self, env: Mapping[str, str]) -> str | None: ...

    def facts(self, host: Path, env: Mapping[str, str], hostname: str, run: Callable[[list[str], float], Result],
              record: Callable[[str, Result], None], log: list[dict[str, Any]]) -> str | None: ...


class PosixHost:
    """Linux (and other POSIX systems): ``/proc``, ``/etc/os-release``, the driver's version file."""

    name = "posix"

    def be_idle(self) -> None:
        """Run only on otherwise idle CPUs (and disks): the snapshot must never slow the child.
        The commands it runs inherit this."""
        if sys.platform == "win32":
            return
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        with contextlib.suppress(OSError):
            os.nice(19)
        with contextlib.suppress(OSError, AttributeError, ValueError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            # ioprio_set(IOPRIO_WHO_PROCESS, self, IOPRIO_CLASS_IDLE)
            libc.syscall(251 if os.uname().machine == "x86_64" else 30, 1, 0, 3 << 13)

    def nvidia_smi(self, env: Mapping[str, str]) -> str | None:
        return shutil.which("nvidia-smi", path=env.get("PATH"))

    def facts(self, host: Path, env: Mapping[str, str], hostname: str, run: Callable[[list[str], float], Result],
              record: Callable[[str, Result], None], log: list[dict[str, Any]]) -> str | None:
        """``system.json``, ``nvidia-driver.txt`` and the PCI tree (``lspci-tree.txt``: ``lspci -tvnn``,
        ``lspci.txt``: ``lspci -nn``, where lspci is installed); returns the driver line for
        ``versions.json``."""
        atomic_write_json(host / "system.json", _system())
        lspci = shutil.which("lspci", path=env.get("PATH"))
        if lspci is None:
            log.append({"name": "lspci", "problem": "not installed"})
        else:
            for name, args, out in (("lspci -tvnn", ["-tvnn"], "lspci-tree.txt"), ("lspci -nn", ["-nn"], "lspci.txt")):
                res = run([lspci, *args], 20)
                record(name, res)
                if res.stdout:
                    _write(host / out, res.stdout)
        driver = _read("/proc/driver/nvidia/version")
        if driver:
            _write(host / "nvidia-driver.txt", driver.encode() + b"\n")
            return driver.splitlines()[0]
        return None


def host_part(platform_name: str | None = None) -> HostPart:
    """The platform part for ``platform_name`` (a ``sys.platform`` value, or ``windows``; default:
    ``$FORENSICS_SNAPSHOT_PLATFORM``, else this system's)."""
    name = platform_name or os.environ.get(PLATFORM_ENV) or sys.platform
    if name in ("win32", "windows"):
        from forensics.record.snapshot_windows import WindowsHost

        return WindowsHost()
    return PosixHost()


def main(argv: list[str]) -> int:
    bundle = Path(argv[0])
    python = argv[1] if len(argv) > 1 and argv[1] != LIFELINE_ARG else sys.executable
    background: dict[str, Any] = {}
    if LIFELINE_ARG in argv[1:]:
        # The recorder gone (or "stop"): so are we. "Finish on your own" (a short run ended first): go on,
        # within BACKGROUND_MAX_S, and say so in snapshot.json.
        def on_background() -> None:
            background["since_ns"] = time.time_ns()
            threading.Timer(BACKGROUND_MAX_S, lambda: os._exit(0)).start()

        hold_lifeline(lambda: os._exit(0), grace_s=0, on_background=on_background)
    host = bundle / "host"
    host.mkdir(exist_ok=True)
    part = host_part()
    part.be_idle()
    env = dict(os.environ)
    log: list[dict[str, Any]] = []

    def run(cmd: list[str], timeout: float) -> Result:
        return run_bounded(cmd, timeout=timeout)

    driver = part.facts(host, env, platform.node(), run, lambda name, res: _record(log, name, res), log)
    smi = part.nvidia_smi(env)
    if smi is None:
        log.append({"name": "nvidia-smi", "problem": "not installed"})
    else:
        for name, args, out in (("nvidia-smi -q -x", ["-q", "-x"], "nvidia-smi-q.xml"),
                                ("nvidia-smi topo -m", ["topo", "-m"], "nvidia-smi-topo.txt")):
            res = run_bounded([smi, *args], timeout=30)
            _record(log, name, res)
            if res.stdout:
                _write(host / out, res.stdout)
    res = run_bounded([python, "-c", VERSIONS_SCRIPT], timeout=90)
    _record(log, "python versions", res)
    try:
        versions = json.loads(res.stdout.decode(errors="replace").strip().splitlines()[-1]) if res.ok else {}
    except (ValueError, IndexError):
        versions = {}
    versions["driver"] = driver
    atomic_write_json(host / "versions.json", versions)
    res = run_bounded([python, "-m", "pip", "freeze", "--all"], timeout=90)
    _record(log, "pip freeze", res)
    if res.ok:  # VCS requirements can carry credentials: git+https://user:token@host/...
        _write(host / "pip-freeze.txt", redact_value(res.stdout.decode(errors="replace")).encode())
    done: dict[str, Any] = {"python": python, "platform": part.name, "commands": log}
    if background:
        done["finished_after_the_child"] = {"since_ns": background["since_ns"], "finished_ns": time.time_ns()}
    atomic_write_json(host / "snapshot.json", done)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
