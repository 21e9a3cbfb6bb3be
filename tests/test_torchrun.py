"""torchrun / elastic agent lines and ChildFailedError report entries."""

from __future__ import annotations

from forensics.parsers.common.stream_text import Stamp
from forensics.parsers.producers.torchrun import agent_line, exit_attrs, report_entry


def test_exit_codes_name_signals() -> None:
    assert exit_attrs(-9) == {"exitcode": -9, "signal": "SIGKILL"}
    assert exit_attrs(-6)["signal"] == "SIGABRT" and exit_attrs(-7)["signal"] == "SIGBUS"
    assert exit_attrs(137)["signal"] == "SIGKILL"
    assert exit_attrs(1) == {"exitcode": 1}


def test_agent_lines() -> None:
    msg, attrs = agent_line("failed (exitcode: -9) local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python")
    assert attrs == {"exitcode": -9, "signal": "SIGKILL", "local_rank": 5, "pid": 2630,
                     "binary": "/root/miniconda3/bin/python"}
    assert msg.startswith("failed (exitcode: -9)")
    _, attrs = agent_line("Sending process 33051 closing signal SIGTERM")
    assert attrs == {"pid": 33051, "signal": "SIGTERM", "sent": True}
    _, attrs = agent_line("[launch.py:319:sigkill_handler] ... exits with return code = -7")
    assert attrs["signal"] == "SIGBUS"
    _, attrs = agent_line("subprocess.CalledProcessError: Command '[...]' died with <Signals.SIGSEGV: 11>.")
    assert attrs == {"signal": "SIGSEGV", "exitcode": -11}
    assert agent_line("nothing to see") is None


def test_report_entry_full_and_collapsed() -> None:
    attrs, stamp = report_entry("[0]: time : 2025-05-21_15:43:03 host : node-7 rank : 0 (local_rank: 0) "
                                "exitcode : -9 (pid: 14750) error_file: <N/A> "
                                "traceback : Signal 9 (SIGKILL) received by PID 14750")
    assert attrs["exitcode"] == -9 and attrs["pid"] == 14750 and attrs["host"] == "node-7"
    assert attrs["rank"] == 0 and attrs["error_file"] == "<N/A>" and attrs["signal"] == "SIGKILL"
    assert stamp == Stamp(2025, 5, 21, 15, 43, 3)
    attrs, _ = report_entry("rank2 (local rank: 2)exitcode: -9 (pid: 36071)error file: <N/A>")
    assert (attrs["rank"], attrs["local_rank"], attrs["pid"]) == (2, 2, 36071)
    assert report_entry("no exit code here") is None


def test_deepspeed_launcher_start_and_clean_exit() -> None:
    # DeepSpeed launch.py on node 1 of a pdsh run (aws-samples/aws-hpc-tutorials, saforem2/vault)
    msg, attrs = agent_line("[INFO] [launch.py:109:main] nnodes=2, num_local_procs=1, node_rank=1")
    assert msg == "nnodes=2, num_local_procs=1, node_rank=1"
    assert attrs == {"launch": True, "nnodes": 2, "local_procs": 1, "node_rank": 1}
    _, attrs = agent_line("[launch.py:350:main] Process 57911 exits successfully.")
    assert attrs == {"exitcode": 0, "pid": 57911}
    assert agent_line("global_rank_mapping=defaultdict(<class 'list'>, {'a': [0]})") is None
