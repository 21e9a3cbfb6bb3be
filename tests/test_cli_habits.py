"""CLI habits (issue 13): ``-`` for stdin, several bundles in a directory, --since/--until/--host/--rank,
--all, remedy wrapping, exit statuses in --help, colour, completion, and the record command's lines."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from recorder_helpers import env, read_until, recorder_argv

from forensics import colour
from forensics.cli import build_parser, main
from forensics.text_report import wrap_commands
from forensics.timeline.filters import parse_bound, parse_ranks

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples" / "recorded"
XID_DMESG = ROOT / "samples" / "pasted" / "xid79-dmesg.txt"


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    stream = io.TextIOWrapper(io.BytesIO(data))
    monkeypatch.setattr(sys, "stdin", stream)


# -- '-' reads standard input -----------------------------------------------------------------------

def test_dash_reads_standard_input(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _stdin(monkeypatch, XID_DMESG.read_bytes())
    assert main(["analyze", "--format", "json", "-"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["sources"][0]["path"] == "<stdin>"
    assert out["verdict"]["root_cause"] is not None
    # the same verdict as from the file
    assert main(["analyze", "--format", "json", str(XID_DMESG)]) == 1
    assert json.loads(capsys.readouterr().out)["verdict"]["root_cause"] == out["verdict"]["root_cause"]


def test_dash_is_bounded_like_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    from forensics.ingest.sources import Limits, expand_inputs

    _stdin(monkeypatch, b"kernel: line\n" * 1000)
    [item] = list(expand_inputs(["-"], Limits(max_file_bytes=1000)))
    assert len(item.raw) == 1000 and any("more than" in w for w in item.warnings)


def test_dash_on_a_terminal_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    stream = io.TextIOWrapper(io.BytesIO(b""))
    monkeypatch.setattr(stream.buffer, "isatty", lambda: True)
    monkeypatch.setattr(sys, "stdin", stream)
    assert main(["analyze", "-"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pipe a log in" in err


def test_open_refuses_standard_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["open", "-"]) == 2
    assert "standard input" in capsys.readouterr().err


def test_gzipped_standard_input(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import gzip

    _stdin(monkeypatch, gzip.compress(XID_DMESG.read_bytes()))
    assert main(["analyze", "--format", "json", "-"]) == 1
    assert json.loads(capsys.readouterr().out)["sources"][0]["kind"] != "binary"


# -- several bundles in one directory ---------------------------------------------------------------

def _runs_dir(tmp_path: Path, *names: str) -> Path:
    runs = tmp_path / "forensics-runs"
    runs.mkdir()
    for name in names:
        shutil.copytree(SAMPLES / name / "bundle", runs / name)
    return runs


def test_a_directory_of_bundles_means_the_newest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _runs_dir(tmp_path, "oom-first-backward", "healthy")
    starts = {n: json.loads((runs / n / "manifest.json").read_text())["start_ns"] for n in ("oom-first-backward",
                                                                                        "healthy")}
    newest = max(starts, key=lambda n: starts[n])
    rc = main(["analyze", "--format", "json", str(runs)])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert {Path(s["path"]).parts[-2] for s in out["sources"] if "/host/" not in s["path"]} == {newest}
    assert "holds 2 bundles; analyzing the newest" in captured.err and newest in captured.err
    assert rc == (1 if newest == "oom-first-backward" else 0)


@pytest.mark.slow
def test_each_bundle_on_its_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _runs_dir(tmp_path, "oom-first-backward", "healthy")
    assert main(["analyze", "--each", str(runs)]) == 1  # one run failed
    lines = capsys.readouterr().out.splitlines()
    oom = next(line for line in lines if "oom-first-backward" in line)
    healthy = next(line for line in lines if line.startswith(str(runs / "healthy")))
    assert "ROOT CAUSE" in oom and "torch-cuda-oom" in oom and "exit 1" in oom
    assert "no failure found" in healthy and "exit 0" in healthy
    assert main(["analyze", "--each", "--format", "json", str(runs)]) == 1
    out = json.loads(capsys.readouterr().out)
    roots = {Path(r["paths"][0]).name: r["analysis"]["verdict"]["root_cause"] for r in out["runs"]}
    assert roots == {"oom-first-backward": "torch-cuda-oom", "healthy": None}


def test_merge_reads_them_as_one_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _runs_dir(tmp_path, "oom-first-backward", "healthy")
    main(["analyze", "--merge", "--format", "json", str(runs)])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert len(out["recordings"]) == 2 and "newest" not in captured.err
    assert main(["analyze", "--merge", "--each", str(runs)]) == 2


# -- filters ----------------------------------------------------------------------------------------

def test_relative_and_absolute_bounds() -> None:
    assert parse_bound("2h", "--since").relative_s == 7200
    assert parse_bound("30m ago", "--since").relative_s == 1800
    assert parse_bound("1h30m", "--since").relative_s == 5400
    b = parse_bound("2026-11-30 14:00", "--since")
    assert b.ts == 1796047200 * 10**9  # naive: UTC, the zone reports print
    from zoneinfo import ZoneInfo

    assert parse_bound("2026-11-30 14:00", "--since", ZoneInfo("Europe/Berlin")).ts == (1796047200 - 3600) * 10**9
    assert parse_bound("2026-11-30T14:00:00+02:00", "--since").ts == (1796047200 - 7200) * 10**9
    assert parse_ranks(["3", "0-1,7"]) == {0, 1, 3, 7}
    day = parse_bound("14:05", "--until")  # no date: the day of the last event
    assert day.ts is None and day.resolve(1796047200 * 10**9 + 3 * 3600 * 10**9) == (1796047200 + 300) * 10**9


@pytest.mark.parametrize("flag", [["--since", "yesterday-ish nonsense"], ["--rank", "x"], ["--until", "5 parsecs"]])
def test_bad_filter_is_one_line(flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", *flag, str(XID_DMESG)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag[0] in err and "Traceback" not in err


def _ranked_log(tmp_path: Path) -> Path:
    log = tmp_path / "train.log"
    lines = [f"2026-11-30 14:{m:02d}:00,000 - INFO - [rank{m % 2}] step {m} loss 2.0" for m in range(10)]
    lines.insert(6, "[rank1]: Traceback (most recent call last):\n[rank1]:   File \"train.py\", line 3, in <module>\n"
                    "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered")
    log.write_text("\n".join(lines) + "\n")
    return log


def _timed_kernel_log(tmp_path: Path) -> Path:
    """``dmesg --time-format iso`` shaped lines, one a minute from 14:00 to 14:09, the Xid at 14:05."""
    log = tmp_path / "kern.log"
    lines = [f"2026-11-30T14:{m:02d}:00,000000+00:00 node1 kernel: eth0: link up, 100Gbps" for m in range(10)]
    lines[5] = ("2026-11-30T14:05:00,000000+00:00 node1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, "
                "name=python, GPU has fallen off the bus.")
    log.write_text("\n".join(lines) + "\n")
    return log


def test_time_filters_narrow_what_the_signatures_see(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.analysis import Options, analyze
    from forensics.timeline.filters import TimelineFilter

    log = _timed_kernel_log(tmp_path)
    everything = analyze([str(log)])
    assert everything.failed
    # a window after every event leaves nothing to match: one line naming the filter and the span there is
    assert main(["analyze", "--format", "json", "--since", "2099-01-01", str(log)]) == 2
    got = capsys.readouterr()
    assert got.out == "" and "--since '2099-01-01' left no event" in got.err and "2026-11-30T14:0" in got.err
    # the minutes around the error keep it; a window that ends before it does not
    assert main(["analyze", "--format", "json", "--since", "2026-11-30 14:04", "--until", "14:07",
                 str(log)]) == 1
    capsys.readouterr()
    assert main(["analyze", "--since", "2026-11-30 14:00", "--until", "2026-11-30 14:03", str(log)]) == 0
    assert "filtered (since 2026-11-30T14:00:00.000000Z; until 2026-11-30T14:03:00" in capsys.readouterr().out
    # relative to the last event (14:09): '2m' keeps 14:07 on, not the Xid at 14:05
    tail = analyze([str(log)], Options(timeline_filter=TimelineFilter(since=parse_bound("2m", "--since"))))
    assert tail.timeline.events and not tail.failed
    assert all(e.ts is not None and e.ts >= 1796047620 * 10**9 for e in tail.timeline.events)


def test_relative_bounds_apply_to_raw_dmesg_uptimes() -> None:
    from forensics.analysis import Options, analyze
    from forensics.timeline.filters import FilterMatchedNothing, TimelineFilter

    everything = analyze([str(XID_DMESG)])
    ups = sorted(e.uptime_ns for e in everything.timeline.events if e.uptime_ns is not None)
    assert everything.timeline.events and all(e.ts is None for e in everything.timeline.events) and ups
    tail = analyze([str(XID_DMESG)], Options(timeline_filter=TimelineFilter(since=parse_bound("1s", "--since"))))
    assert all(e.uptime_ns is not None and e.uptime_ns >= ups[-1] - 10**9 for e in tail.timeline.events)
    assert len(tail.timeline.events) == sum(u >= ups[-1] - 10**9 for u in ups)
    with pytest.raises(FilterMatchedNothing, match="span no time"):  # uptimes alone have no date to compare
        analyze([str(XID_DMESG)], Options(timeline_filter=TimelineFilter(since=parse_bound("2026-01-01", "--since"))))


def test_rank_and_host_filters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _ranked_log(tmp_path)
    main(["analyze", "--format", "json", str(log)])
    whole = json.loads(capsys.readouterr().out)
    main(["analyze", "--format", "json", "--rank", "0", str(log)])
    rank0 = json.loads(capsys.readouterr().out)
    assert rank0["timeline"]["events"] < whole["timeline"]["events"]
    assert not any(1 in f["ranks"] for f in rank0["findings"])


def test_host_filter_keeps_that_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two hosts' syslogs; the Xid is on node2: --host node1 no longer sees it, --host node2 does."""
    paths = []
    for host in ("node1", "node2"):
        lines = [f"Nov 30 14:{m:02d}:00 {host} kernel: eth0: link up, 100Gbps" for m in range(10)]
        if host == "node2":
            lines[5] = (f"Nov 30 14:05:00 {host} kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, "
                        "GPU has fallen off the bus.")
        (tmp_path / f"{host}.log").write_text("\n".join(lines) + "\n")
        paths.append(str(tmp_path / f"{host}.log"))
    assert main(["analyze", "--format", "json", *paths]) == 1
    assert json.loads(capsys.readouterr().out)["timeline"]["hosts"] == ["node1", "node2"]
    assert main(["analyze", "--format", "json", "--host", "node1", *paths]) == 0
    only = json.loads(capsys.readouterr().out)
    assert only["timeline"]["hosts"] == ["node1"] and only["timeline"]["events"] == 10
    assert only["timeline"]["notes"][-1].startswith("filtered (host node1): kept 10 of 20 events")
    assert main(["analyze", "--format", "json", "--host", "node1,node2", *paths]) == 1
    capsys.readouterr()


def test_all_shows_every_matching_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "oom.log"
    log.write_text("".join(f"[  {100 + i}.000000] Out of memory: Killed process {1000 + i} (python) "
                           f"total-vm:1000kB, anon-rss:{900 + i}kB, file-rss:0kB\n" for i in range(40)))
    main(["analyze", str(log)])
    short = capsys.readouterr().out
    main(["analyze", "--all", str(log)])
    full = capsys.readouterr().out
    assert "more matching line(s) (--all shows them)" in short
    assert full.count("Killed process") > short.count("Killed process")
    assert "more matching line(s)" not in full


# -- remedy wrapping --------------------------------------------------------------------------------

def test_commands_are_never_broken_when_wrapped() -> None:
    step = ("Find the odd one out: nvidia-smi --query-gpu=index,utilization.gpu,power.draw,memory.used "
            "--format=csv -l 5 (a GPU at 0 % is the one); then nvidia-smi -q -d COMPUTE and "
            "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    lines = wrap_commands(step, 40)
    assert " ".join(lines) == " ".join(step.split())  # nothing lost or split inside a word
    tokens = {t for line in lines for t in line.split()}
    assert tokens == set(step.split())
    assert any(line.startswith("nvidia-smi --query-gpu=") and line.endswith("--format=csv -l 5") for line in lines)
    assert any("-q -d COMPUTE" in line for line in lines)
    assert all(len(line) <= 40 or " " not in line.split(" --")[0] for line in lines)


@pytest.mark.slow
def test_report_remedies_copy_paste(capsys: pytest.CaptureFixture[str]) -> None:
    main(["analyze", str(SAMPLES / "silent-stall-2gpu" / "bundle")])
    out = capsys.readouterr().out
    block = out.split("What to do:")[1].split("\n\n")[0]
    assert "nvidia-smi --query-gpu=index,utilization.gpu,power.draw,memory.used --format=csv -l 5" in block


# -- --help: exit statuses and a help string on every flag ------------------------------------------

def _subparsers() -> dict[str, object]:
    import argparse

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("command", sorted(_subparsers()))  # every subcommand, a new one included
def test_every_subcommand_documents_its_exit_statuses(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    assert "exit status" in text
    if command == "analyze":
        for code, what in (("0", "no failure found"), ("1", "a failure was found"), ("2", "bad usage"),
                           ("3", "could not be read")):
            assert re.search(rf"^\s+{code}\s+.*{what}", text, re.M), (code, text)


def test_every_flag_has_help() -> None:
    for name, sub in _subparsers().items():
        for action in sub._actions:  # type: ignore[attr-defined]
            if action.dest == "help":
                continue
            assert action.help, f"{name}: {action.option_strings or action.dest} has no help"


# -- colour -----------------------------------------------------------------------------------------

class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "ROOT CAUSE: x\n  Evidence:\nwarning: w\n"
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    plain = io.StringIO()
    colour.write_report(text, plain)
    assert plain.getvalue() == text
    tty = _Tty()
    colour.write_report(text, tty)
    assert "\x1b[" in tty.getvalue() and re.sub(r"\x1b\[[0-9;]*m", "", tty.getvalue()) == text
    monkeypatch.setenv("NO_COLOR", "1")
    tty = _Tty()
    colour.write_report(text, tty)
    assert tty.getvalue() == text


@pytest.mark.slow
def test_report_through_a_pipe_has_no_escapes() -> None:
    res = subprocess.run([sys.executable, "-m", "forensics", "analyze", str(XID_DMESG)], capture_output=True,
                         timeout=120, env={**os.environ, "FORCE_COLOR": "", "NO_COLOR": ""})
    assert res.returncode == 1 and b"\x1b[" not in res.stdout and b"ROOT CAUSE" in res.stdout


# -- shell completion -------------------------------------------------------------------------------

@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", shell]) == 0
    out = capsys.readouterr().out
    assert "forensics" in out and "_ARGCOMPLETE" in out


def test_completion_answers_the_shell(tmp_path: Path) -> None:
    """What bash's completion function does: run the program with _ARGCOMPLETE set, read fd 8."""
    line = "forensics analyze --si"
    r, w = os.pipe()
    proc = subprocess.run([sys.executable, "-m", "forensics"], pass_fds=(w,), timeout=60, capture_output=True,
                          env={**os.environ, "_ARGCOMPLETE": "1", "_ARGCOMPLETE_IFS": "\n", "COMP_LINE": line,
                               "COMP_POINT": str(len(line)), "_ARGCOMPLETE_STDOUT_FILENAME": str(tmp_path / "o")})
    os.close(w)
    os.close(r)
    assert proc.returncode == 0, proc.stderr
    assert "--since" in (tmp_path / "o").read_text().split("\n")


# -- record says where the bundle is ----------------------------------------------------------------

CHILD = "import sys; print('child out', flush=True); print('child err', file=sys.stderr, flush=True)"


@pytest.mark.slow
def test_record_announces_the_bundle_on_a_terminal(tmp_path: Path) -> None:
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(recorder_argv(tmp_path / "runs", sys.executable, "-c", CHILD), stdin=slave,
                            stdout=slave, stderr=slave, env=env(), close_fds=True)
    os.close(slave)
    text = read_until(master, b"explain it with", timeout=60).decode(errors="replace")
    proc.wait(timeout=60)
    os.close(master)
    [bundle] = list((tmp_path / "runs").iterdir())
    start, end = text.index("forensics: recording into"), text.index("forensics: bundle written to")
    assert start < text.index("child out") < end and start < text.index("child err") < end
    assert str(bundle) in text[start:text.index("\n", start)]
    assert f"forensics analyze {bundle}" in text and "(exit 0)" in text


@pytest.mark.slow
def test_record_lines_only_when_asked_off_a_terminal(tmp_path: Path) -> None:
    quiet = subprocess.run(recorder_argv(tmp_path / "a", sys.executable, "-c", CHILD), capture_output=True,
                           timeout=60, env=env(), stdin=subprocess.DEVNULL)
    assert quiet.stderr == b"child err\n"  # a captured stderr stays the child's, byte for byte
    loud = subprocess.run(recorder_argv(tmp_path / "b", sys.executable, "-c", CHILD, extra=("--announce",)),
                          capture_output=True, timeout=60, env=env(), stdin=subprocess.DEVNULL)
    lines = loud.stderr.decode().splitlines()
    [bundle] = list((tmp_path / "b").iterdir())
    assert lines[0] == f"forensics: recording into {bundle}"
    assert lines[1] == "child err"
    assert lines[2].startswith(f"forensics: bundle written to {bundle} (exit 0)")
    assert loud.stdout == b"child out\n"


@pytest.mark.slow
def test_record_end_line_starts_on_its_own_line(tmp_path: Path) -> None:
    """A child whose last output has no newline (a progress bar's \\r): the recorder's line still starts a line."""
    child = "import sys; sys.stderr.write('50%\\r'); sys.stderr.flush()"
    res = subprocess.run(recorder_argv(tmp_path / "c", sys.executable, "-c", child, extra=("--announce",)),
                         capture_output=True, timeout=60, env=env(), stdin=subprocess.DEVNULL)
    err = res.stderr.decode()
    assert "50%\r\nforensics: bundle written to" in err
