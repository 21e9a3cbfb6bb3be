"""Slurm and shell job lines."""

from __future__ import annotations

from forensics.parsers.common.stream_text import Stamp
from forensics.parsers.producers.slurm import parse_shell_signal, parse_slurm


def test_cancellation_with_reason_and_time() -> None:
    parsed = parse_slurm("slurmstepd: error: *** JOB 494583 ON gpu3 CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME "
                         "LIMIT ***")
    assert parsed is not None
    attrs, stamp, error = parsed
    assert attrs["job"] == "494583" and attrs["reason"] == "TIME LIMIT" and attrs["cancelled"] and error
    assert stamp == Stamp(2024, 4, 20, 9, 9, 37)


def test_oom_kill_generations() -> None:
    for line, job, step in [
        ("slurmstepd: error: Detected 2 oom-kill event(s) in step 3756240.batch cgroup.", "3756240", "batch"),
        ("slurmstepd: error: Detected 1 oom_kill event in StepId=11300781.0. Some of the step tasks have been OOM "
         "Killed.", "11300781", "0"),
    ]:
        parsed = parse_slurm(line)
        assert parsed is not None
        attrs = parsed[0]
        assert (attrs["job"], attrs["step"]) == (job, step) and attrs["oom_kill_events"] >= 1


def test_srun_task_lines() -> None:
    parsed = parse_slurm("srun: error: gpu20-15: task 3: Killed")
    assert parsed is not None
    assert parsed[0] == {"daemon": "srun", "node": "gpu20-15", "task": "3", "reason": "Killed", "rank": 3}
    assert parse_slurm("not slurm") is None


def test_shell_signals() -> None:
    assert parse_shell_signal("Killed") == {"signal": "SIGKILL"}
    assert parse_shell_signal("Segmentation fault (core dumped)") == {"signal": "SIGSEGV"}
    assert parse_shell_signal("/var/spool/slurmd/job00191/slurm_script: line 28:  8156 Killed                  "
                              "python3 main.py") == {"signal": "SIGKILL", "pid": 8156}
    assert parse_shell_signal("the worker was killed") is None
