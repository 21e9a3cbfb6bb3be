"""Per-process utilization in the recorder (issue 21, "Shared GPUs"): the NVML sampler reads
``nvmlDeviceGetProcessUtilization`` beside the compute processes' memory, the bundle keeps it (``pu``), and an
idle process on a busy GPU — its memory frozen at its cap — is told apart from the busy one. Run through the
fake NVML (forensics/record/fake_nvml.py: ``procs``, ``idle``, ``after``, ``cap``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from recorder_helpers import bundle, jsonl, run

from forensics.analysis import analyze
from forensics.record.nvml import Nvml


def _direct(call: str, gpu: int, fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def test_the_sampler_reads_per_process_utilization(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORENSICS_FAKE_NVML", "ok:gpus=1,procs=3,idle=1,after=0")
    nv = Nvml(_direct)
    gpu = nv.gpus[0]
    first = nv.process_utilization(gpu)
    assert first == [[5000, 60, 20], [5002, 60, 20]]  # process 5001 ran no kernel: absent, i.e. idle
    assert [pid for pid, _ in nv.processes(gpu) or []] == [5000, 5001, 5002]


def test_all_idle_is_an_empty_reading_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORENSICS_FAKE_NVML", "ok:gpus=1,procs=2,idle=0+1,after=0")
    nv = Nvml(_direct)
    assert nv.process_utilization(nv.gpus[0]) == []


def test_a_recording_names_the_processes_frozen_at_their_cap(tmp_path: Path) -> None:
    out = tmp_path / "out"
    child = ("import time\n"
             "for i in range(30):\n"
             "    print(f'step {i} loss {1 / (i + 1):.3f} | 1,000 tokens/s', flush=True)\n"
             "    time.sleep(0.5)\n")
    done = run(out, "python3", "-c", child, timeout=120,
               FORENSICS_FAKE_NVML="ok:gpus=1,procs=3,idle=1+2,after=2,cap=4096")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    b = bundle(out)
    rows = jsonl(b / "nvml.jsonl")
    utils = [r["pu"]["0"] for r in rows if "pu" in r]
    assert utils and any(len(u) == 3 for u in utils) and [5000, 60, 20] in utils[-1]
    assert all(pid == 5000 for pid, *_ in utils[-1])  # at the end only process 5000 works
    a = analyze([str(b)])
    procs = {e.pid: e for e in a.timeline.events if e.kind == "gpu-process"}
    assert procs[5001].attrs["sm_last"] == 0 and procs[5001].attrs["last_mib"] == 4096
    assert procs[5000].attrs["sm_last"] == 60
    (idle,) = [e for e in a.timeline.events if e.attrs.get("detector") == "idle-workers"]
    assert idle.attrs["stunted_pids"] == [5001, 5002] and idle.attrs["frozen_pids"] == [5001, 5002]
    assert idle.attrs["busy_pids"] == [5000]
    assert not any(e.attrs.get("detector") == "stunted-workers" for e in a.timeline.events)
    json.dumps([dict(e.attrs) for e in a.timeline.events if e.kind == "gpu-process"])
