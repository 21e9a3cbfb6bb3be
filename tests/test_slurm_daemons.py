"""Slurm's own records as events (parsers/producers/slurm.py, parsers/slurm_daemon_log.py, the journal's
hand-over in parsers/common/user_space.py) and their use as shared moments (forensics/timeline/clocksync.py).

Real lines in ``tests/data/slurm/`` (sources in its README); the cross-host test builds two nodes'
syslogs and a controller log from the same real line shapes, one node's clock shifted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from forensics.parsers.producers.slurm import parse_daemon, parse_slurm

from forensics.analysis import Options, analyze
from forensics.events import Event, Severity, TsSource
from forensics.timeline.clocksync import sync_key

DATA = Path(__file__).resolve().parent / "data" / "slurm"
NS = 1_000_000_000


def slurm_events(*paths: Path) -> list[Event]:
    a = analyze([str(p) for p in paths], Options())
    return [e for e in a.timeline.events if e.kind == "slurm"]


# -- the daemon reader ----------------------------------------------------------------------------
@pytest.mark.parametrize(("line", "expected"), [
    # NVIDIA/DCGM#155: slurmd names itself again inside the syslog message
    ("slurmd: launch task StepId=838896.12 request from UID:12211 GID:5101 HOST:172.20.26.64 PORT:39002",
     {"daemon": "slurmd", "job": "838896", "step": "12", "step_event": "start", "uid": 12211}),
    # dask-gateway#478: the batch host starting a batch job
    ("Launching batch job 67 for UID 1001", {"job": "67", "step": "batch", "step_event": "start"}),
    # ariqRam/SlurmLogReader: the controller allocating nodes, a queued allocation, the job's end
    ("sched: Allocate JobId=42822 NodeList=cpu03 #CPUs=1 Partition=cpu-opteron",
     {"job": "42822", "nodes": "cpu03", "step_event": "allocated"}),
    ("sched: _slurm_rpc_allocate_resources JobId=42822 NodeList=(null) usec=54752",
     {"job": "42822", "step_event": "submitted"}),
    ("_job_complete: JobId=42825 WTERMSIG 126", {"job": "42825", "term_signal": 126}),
    ("_job_complete: JobId=42825 cancelled by interactive user", {"job": "42825", "cancelled": True}),
    ("_job_complete: JobId=42822 done", {"job": "42822", "step_event": "end"}),
    ("_slurm_rpc_kill_job: REQUEST_KILL_JOB JobId=42802 uid 548200045", {"job": "42802", "step_event": "kill"}),
])
def test_daemon_records_name_job_step_and_what_happened(line: str, expected: dict[str, object]) -> None:
    parsed = parse_daemon(line)
    assert parsed is not None
    attrs, error = parsed
    assert not error
    assert {k: attrs.get(k) for k in expected} == expected


def test_slurmstepd_lines_in_slurmd_log_carry_the_step_and_debug_chatter_is_dropped() -> None:
    done = parse_daemon("[50.batch] done with job")
    assert done is not None and done[0] == {"daemon": "slurmstepd", "job": "50", "step": "batch", "step_event": "end"}
    err = parse_daemon("[50.batch] error: unable to mount memory cgroup namespace: Device or resource busy")
    assert err is not None and err[1] and err[0]["job"] == "50"
    assert parse_daemon("debug:  AcctGatherEnergy NONE plugin loaded", "slurmstepd") is None
    assert parse_daemon("task/affinity: _task_layout_lllp_cyclic: _task_layout_lllp_cyclic", "slurmd") is None
    assert parse_daemon("not a slurm record") is None


def test_srun_verbose_lines_give_allocation_step_launch_and_exits() -> None:
    # ai-dynamo/dynamo multinode README; yolov5#12429; a TReNDS-style srun -v allocation line
    launch = parse_slurm("srun: launching StepId=453374.18 on host node2, 4 tasks: [4-7]")
    assert launch is not None
    assert {k: launch[0][k] for k in ("job", "step", "step_event", "node", "tasks", "ntasks")} == {
        "job": "453374", "step": "18", "step_event": "start", "node": "node2", "tasks": "[4-7]", "ntasks": 4}
    allocated = parse_slurm("srun: job 4296558 has been allocated resources")
    assert allocated is not None and allocated[0]["step_event"] == "allocated" and allocated[0]["job"] == "4296558"
    exited = parse_slurm("srun: error: d-8-4-1: task 1: Exited with exit code 1")
    assert exited is not None and exited[0]["exitcode"] == 1 and exited[0]["node"] == "d-8-4-1" and exited[2]
    aborted = parse_slurm("srun: Job step aborted: Waiting up to 47 seconds for job step to finish.")
    assert aborted is not None and aborted[0]["step_event"] == "abort"


# -- real files ------------------------------------------------------------------------------------
def test_slurmd_syslog_line_becomes_a_step_start_on_its_node() -> None:
    events = slurm_events(DATA / "dcgm155_gx01_syslog.log")
    assert len(events) == 1  # the task/affinity chatter of the same job is not an event
    e = events[0]
    assert (e.host, e.attrs["job"], e.attrs["step"], e.attrs["step_event"]) == ("gx01", "838896", "12", "start")
    assert e.ts is not None and e.ts_source is TsSource.LOCAL
    assert sync_key(e) == ("slurm-step", "838896.12")


def test_slurmctld_log_is_read_as_the_controllers_records() -> None:
    a = analyze([str(DATA / "slurmlogreader_slurmctld.log")], Options())
    assert [s.kind for s in a.sources] == ["slurm-daemon-log"]
    events = [e for e in a.timeline.events if e.kind == "slurm"]
    by_job = {e.attrs["job"]: e for e in events if e.attrs.get("step_event") == "allocated"}
    assert by_job["42822"].attrs["nodes"] == "cpu03"
    assert sync_key(by_job["42822"]) == ("slurm-job", "42822")
    killed = next(e for e in events if e.attrs.get("term_signal") == 126)
    assert killed.attrs["job"] == "42825" and killed.severity is Severity.WARNING
    assert any(e.attrs.get("cancelled") and e.attrs["job"] == "42825" for e in events)
    assert all(e.ts is not None and e.ts_source is TsSource.LOCAL for e in events)
    # the stamps keep their milliseconds, in file order
    stamps = [e.ts for e in events if e.ts is not None]
    assert stamps == sorted(stamps) and any(ts % NS for ts in stamps)


def test_another_clusters_slurmctld_excerpt_reads_the_same_way() -> None:
    # ArjunaCluster/ArjunaUsers#137: a GPU job killed by signal 9 (not the file the reader was written on)
    events = slurm_events(DATA / "arjuna137_slurmctld.log")
    assert [e.attrs.get("step_event") for e in events] == ["submitted", "allocated", None, "end"]
    assert events[2].attrs["term_signal"] == 9 and events[2].severity is Severity.WARNING
    assert all(e.attrs["job"] == "127441" for e in events)


def test_srun_launch_lines_name_every_node_of_the_step() -> None:
    events = slurm_events(DATA / "dynamo_srun_launch.log")
    assert [e.attrs["node"] for e in events] == ["node1", "node2", "node3", "node4"]
    assert {sync_key(e) for e in events} == {("slurm-step", "453374.18")}
    assert all(e.host is None for e in events)  # srun prints them on the submitting host, not on the node


def test_held_back_journal_of_a_batch_host_in_a_turkish_locale() -> None:
    # dask-gateway#478, kept out of development: slurmd-<node> identifier, `Şub`, slurmstepd debug lines
    events = slurm_events(DATA / "dask_gateway478_worker_journal.log")
    assert len(events) == 1
    e = events[0]
    assert (e.host, e.attrs["job"], e.attrs["step"], e.attrs["step_event"]) == ("tpaoslurmworker1", "67", "batch",
                                                                                  "start")
    assert e.ts is not None and sync_key(e) == ("slurm-job", "67")


# -- shared moments across hosts -------------------------------------------------------------------
def _syslog(host: str, lines: list[tuple[int, str]], shift: int) -> str:
    out = []
    for second, msg in lines:
        s = second + shift
        out.append(f"Feb 28 16:{s // 60:02d}:{s % 60:02d} {host} {msg}\n")
    return "".join(out)


def test_step_starts_and_job_allocation_align_the_nodes_and_the_controller(tmp_path: Path) -> None:
    """Two steps launched on two nodes and a batch job allocated by the controller; node02's clock is
    90 s ahead. The offsets come out of the Slurm moments alone."""
    steps = [(100, "slurmd[27067]: slurmd: launch task StepId=838896.0 request from UID:12211 GID:5101 "
                   "HOST:172.20.26.64 PORT:39002"),
             (400, "slurmd[27067]: slurmd: launch task StepId=838896.1 request from UID:12211 GID:5101 "
                   "HOST:172.20.26.64 PORT:39004")]
    batch = [(40, "slurmd[27067]: Launching batch job 838896 for UID 12211")]
    (tmp_path / "node01.syslog").write_text(_syslog("node01", batch + steps, 0))
    (tmp_path / "node02.syslog").write_text(_syslog("node02", steps, 90))
    # the controller's clock is 30 s behind: its allocation pairs with the batch host's launch
    (tmp_path / "ctl01.syslog").write_text(_syslog("ctl01", [(10, "slurmctld[1533]: sched: Allocate JobId=838896 "
                                                                "NodeList=node[01-02] #CPUs=16 Partition=gpu")], 0))
    a = analyze([str(p) for p in sorted(tmp_path.iterdir())], Options())
    tl = a.timeline
    assert tl.clock_reference == "node01"
    assert tl.clock_offsets["node02"].offset_s == pytest.approx(-90.0, abs=0.01)
    assert [k.kind for k in tl.clock_evidence["node02"]] == ["slurm-step"]
    assert tl.offsets_applied["node02"] == pytest.approx(-90.0, abs=0.01)
    ctl = tl.clock_offsets["ctl01"]
    assert ctl.offset_s == pytest.approx(30.0, abs=0.01) and ctl.n_pairs == 1
    assert [k.kind for k in tl.clock_evidence["ctl01"]] == ["slurm-job"]
    assert "ctl01" not in tl.offsets_applied  # one pair is not enough to move a host's clock
