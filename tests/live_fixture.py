"""A bundle being recorded, written by the test itself as the recorder would write it: a manifest that
says ``running`` with a heartbeat refreshed every half second (this process stands for the recorder),
streams with their receipt indexes, and the closing manifest at the end."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from forensics.ingest.bundle import FORMAT, IDX_MAGIC, VERSION, pack_receipt


def _iso(ns: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LiveBundle:
    def __init__(self, path: Path, command: tuple[str, ...] = ("python", "train.py")) -> None:
        self.path = path
        path.mkdir(parents=True)
        self.start = time.time_ns()
        self.data: dict[str, Any] = {
            "format": FORMAT, "version": VERSION, "status": "running", "host": socket.gethostname(),
            "command": list(command), "cwd": "/work", "start": _iso(self.start), "start_ns": self.start,
            "end": None, "end_ns": None, "exit_code": None, "signal": None, "signal_name": None,
            "recorder_pid": os.getpid(), "child_pid": None, "boot_time_ns": None, "tz_name": "UTC",
            "interval_s": 0.1, "sources": {"nvml": {"status": "ok"}}, "heartbeat": _iso(self.start),
            "heartbeat_ns": self.start,
        }
        for name in ("stdout", "stderr"):
            (path / f"{name}.log").write_bytes(b"")
            (path / f"{name}.idx").write_bytes(IDX_MAGIC)
        self._write()
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)
        self._beat.start()

    def _write(self) -> None:
        tmp = self.path / "manifest.json.tmp"
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path / "manifest.json")

    def _heartbeat(self) -> None:
        while not self._stop.wait(0.5):
            ns = time.time_ns()
            self.data.update(heartbeat=_iso(ns), heartbeat_ns=ns)
            self._write()

    def append(self, stream: str, text: str) -> None:
        log = self.path / f"{stream}.log"
        with open(log, "ab") as fh:
            fh.write(text.encode())
        with open(self.path / f"{stream}.idx", "ab") as fh:
            fh.write(pack_receipt(log.stat().st_size, time.time_ns()))

    def finish(self, exit_code: int) -> None:
        self._stop.set()
        self._beat.join()
        ns = time.time_ns()
        self.data.update(status="finished", end=_iso(ns), end_ns=ns, exit_code=exit_code, heartbeat=_iso(ns),
                         heartbeat_ns=ns)
        self._write()

    def die(self) -> None:
        """The recorder stops without closing the bundle (its heartbeat goes stale)."""
        self._stop.set()
        self._beat.join()

    def __enter__(self) -> LiveBundle:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._beat.join()


STEPS = "".join(f"step {i} | loss {2.0 / (i + 1):.4f} | 21,500 tokens/s | 250.0 ms/step\n" for i in range(30))
OOM = """Traceback (most recent call last):
  File "/work/train.py", line 88, in <module>
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of \
which 1.06 GiB is free. Of the allocated memory 75.12 GiB is allocated by PyTorch
"""
