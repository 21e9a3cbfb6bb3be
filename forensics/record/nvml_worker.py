"""The NVML sampler process: ``python -m forensics.record.nvml_worker BUNDLE ...``.

Started (and replaced when NVML stops answering) by
:class:`forensics.record.supervisor.NvmlSupervisor`. Two threads:

* the sampler reads :data:`forensics.record.nvml.FIELDS` for every GPU each tick and
  appends to ``nvml.jsonl`` (:class:`~forensics.record.nvml_log.NvmlLog`); compute
  processes, their utilization and slow fields once a second;
* the listener writes ``host/gpus.json`` (static facts, first sampler only), then waits
  on ``nvmlEventSetWait_v2`` for Xid and ECC events and appends them to
  ``nvml-events.jsonl``.

Every NVML call runs under a :class:`~forensics.record.deadline.CallGuard`. Status lines
(JSON) go to stdout for the supervisor. The process dies with the recorder (on Linux
``PR_SET_PDEATHSIG``; everywhere its stdin *lifeline*, :func:`forensics.record.lifeline.hold_lifeline`)
and ignores the terminal's SIGINT/SIGHUP: only the recorder stops it (end of file on the
lifeline; SIGTERM on POSIX).

Arguments: ``BUNDLE INTERVAL PAGE [static] [lifeline]``; ``PAGE`` is the deadline page as
:func:`forensics.record.deadline.map_page_arg` reads it (an inherited descriptor, a page file's
path, or ``-1`` for none).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from forensics.orphans import die_with
from forensics.record.deadline import CallGuard, map_page_arg
from forensics.record.lifeline import LIFELINE_ARG, hold_lifeline
from forensics.record.nvml import GpuInfo, Nvml, NvmlUnavailable, event_mask
from forensics.record.nvml_log import NvmlLog
from forensics.record.writer import AppendFile, atomic_write_json

EVENTS = "nvml-events.jsonl"
EVENTS_FORMAT = "gpu-forensics-nvml-events"
WAIT_MS = 500


class Control:
    """JSON status lines to the supervisor (stdout), thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def send(self, **msg: Any) -> None:
        data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        with self._lock, contextlib.suppress(OSError):
            os.write(1, data)


def events_file(bundle: Path) -> AppendFile:
    f = AppendFile(bundle / EVENTS)
    if f.size == 0:
        f.write((json.dumps({"format": EVENTS_FORMAT, "version": 1, "host": socket.gethostname()}) + "\n").encode())
    return f


def write_event(f: AppendFile, **event: Any) -> None:
    event.setdefault("t", time.time_ns())
    f.write((json.dumps(event, separators=(",", ":")) + "\n").encode())


def listen(nv: Nvml, guard: CallGuard, events: AppendFile, control: Control, stop: threading.Event,
           bundle: Path, write_static: bool) -> None:
    """Static facts first, then Xid/ECC events until ``stop``."""
    if write_static:
        try:
            atomic_write_json(bundle / "host" / "gpus.json", nv.static_info())
        except Exception as exc:
            control.send(static="failed", reason=f"{type(exc).__name__}: {exc}")
    n = nv.mod
    types = event_mask(n)
    try:
        es = guard("nvmlEventSetCreate", -1, n.nvmlEventSetCreate)
    except Exception as exc:
        control.send(listener="unavailable", reason=str(exc) or type(exc).__name__)
        return
    by_handle: dict[int, GpuInfo] = {}
    # All types at once; where a GPU refuses some, fewer (Xid first: it is the one that matters).
    choices = [types, [t for t in types if t[0] in ("xid", "ecc-double-bit")], [t for t in types if t[0] == "xid"]]
    registered: dict[str, list[str]] = {}
    for g in nv.gpus:
        if g.handle is None:
            continue
        for choice in choices:
            if not choice:
                continue
            try:
                guard("nvmlDeviceRegisterEvents", g.index, n.nvmlDeviceRegisterEvents, g.handle,
                      sum(bit for _, bit in choice), es)
            except Exception:
                continue
            by_handle[nv.handle_key(g.handle)] = g
            registered[str(g.index)] = [name for name, _ in choice]
            break
    if not by_handle:
        control.send(listener="unavailable", reason="no GPU accepted event registration")
        return
    control.send(listener="ok", gpus=len(by_handle), types=registered)
    names = {v: k for k, v in types}
    errors = 0
    while not stop.is_set():
        try:
            data = guard("nvmlEventSetWait_v2", -1, n.nvmlEventSetWait_v2, es, WAIT_MS, extra_ms=WAIT_MS)
        except Exception as exc:
            if getattr(exc, "value", None) == getattr(n, "NVML_ERROR_TIMEOUT", 10):
                errors = 0
                continue
            errors += 1
            if errors >= 30:
                control.send(listener="stopped", reason=str(exc) or type(exc).__name__)
                return
            stop.wait(1.0)
            continue
        errors = 0
        found = by_handle.get(nv.handle_key(data.device))
        kind = names.get(int(data.eventType), f"event-0x{int(data.eventType):x}")
        ev: dict[str, Any] = {"type": "xid" if kind == "xid" else "ecc" if kind.startswith("ecc") else kind,
                              "gpu": found.index if found else None, "pci": found.pci if found else None}
        if kind == "xid":
            ev["xid"] = int(data.eventData)
        elif kind.startswith("ecc"):
            ev["ecc"] = kind.removeprefix("ecc-")
        write_event(events, **ev)
        events.fsync()


#: The recorder's pid, set by the supervisor: the parent this worker must still have once its
#: death signal is armed (a recorder killed in the worker's first moments left it to PID 1).
PARENT_ENV = "FORENSICS_RECORDER_PID"


def _expected_parent() -> int:
    try:
        return int(os.environ.get(PARENT_ENV, ""))
    except ValueError:
        return os.getppid()


def run(bundle: Path, interval: float, page_arg: str, write_static: bool, lifeline: bool = False) -> int:
    parent = _expected_parent()
    die_with(parent)  # (and gone at once if the recorder died before the death signal was armed)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform != "win32":
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if lifeline:
        hold_lifeline(stop.set)
    control = Control()
    page, close_page = map_page_arg(page_arg)
    try:
        return _sample(bundle, interval, page, write_static, stop, control, parent)
    finally:
        close_page()


def _sample(bundle: Path, interval: float, page: Any, write_static: bool, stop: threading.Event,
            control: Control, parent: int) -> int:
    try:
        nv = Nvml(CallGuard(page, 0))
    except NvmlUnavailable as exc:
        control.send(status="unavailable", reason=str(exc))
        return 0
    control.send(status="ok", gpus=len(nv.gpus), names=sorted({g.name for g in nv.gpus}))
    events = events_file(bundle)

    def write_failed(f: AppendFile) -> None:  # the disk filled: the recorder says so (record/degrade.py)
        control.send(lost=f.path.name, error=f.error, offset=f.size)

    events.on_error = write_failed
    listener = threading.Thread(target=listen, name="nvml-events", daemon=True,
                                args=(nv, CallGuard(page, 1), events, control, stop, bundle, write_static))
    listener.start()
    header = {"interval_s": interval, "host": socket.gethostname(),
              "gpus": [{"i": g.index, "pci": g.pci, "name": g.name, "uuid": g.uuid} for g in nv.gpus]}
    log = NvmlLog(bundle, header, on_error=write_failed)
    slow_every = max(1, round(1.0 / interval))
    tick = 0
    next_t = time.monotonic()
    last_sync = next_t
    while not stop.is_set():
        t_ns = time.time_ns()
        slow = tick % slow_every == 0
        values = {}
        procs = {}
        putil = {}
        for g in nv.gpus:
            vals, lost = nv.sample(g, slow)
            values[g.index] = vals
            if lost:
                write_event(events, type="gpu-lost", gpu=g.index, pci=g.pci, call=lost)
            if slow:
                procs[g.index] = nv.processes(g)
                putil[g.index] = nv.process_utilization(g)
        log.write_tick(t_ns, values, procs, putil)
        if tick == 0:
            control.send(sampling="ok")
        tick += 1
        now = time.monotonic()
        if now - last_sync >= 1.0:
            log.fsync()
            events.fsync()
            last_sync = now
            if os.getppid() != parent:
                break
        next_t += interval
        if next_t < now - interval:  # fell behind (suspended, starved): do not burst to catch up
            next_t = now
        stop.wait(max(0.0, next_t - time.monotonic()))
    log.close()
    listener.join(timeout=0.1)  # it may sit in an event wait; the process can end without it
    events.close()
    if not listener.is_alive():
        nv.shutdown()
    return 0


def main(argv: list[str]) -> int:
    bundle = Path(argv[0])
    interval = float(argv[1])
    flags = set(argv[3:])
    return run(bundle, interval, argv[2], "static" in flags, lifeline=LIFELINE_ARG in flags)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
