"""Saying the truth about what was read (issue 24, tried as a new user would): a folder is read for its
logs, not its README or source code; a filter that selects nothing is bad usage, not a clean bill of
health; unreadable inputs are one line with nothing on stdout; ``--merge`` of unrelated bundles says so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hostile import RECORDED, ROOT, bundle, edit_manifest

from forensics.cli import main

README_XID = "# Project\n\nIf you see `NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.` reboot.\n"
HEALTHY_LOG = "".join(f"step {i} loss {2.0 - i / 100:.3f}\n" for i in range(1, 50))


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_readme_in_a_project_folder_is_not_evidence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "train.log").write_text(HEALTHY_LOG)
    (tmp_path / "README.md").write_text(README_XID)
    (tmp_path / "train.py").write_text('"""Handles Xid 79: GPU has fallen off the bus."""\nprint("hi")\n')
    (tmp_path / "config.yaml").write_text("lr: 0.1\n")
    code, out, _err = _run(capsys, "analyze", str(tmp_path))
    assert code == 0 and "NO FAILURE FOUND" in out, out  # was: ROOT CAUSE Xid 79 citing README.md:2
    note = next(line for line in out.splitlines() if "not logs" in line)
    assert "skipped 3 files that are not logs: " in note and note.endswith("; name them to read them")
    assert all(kind in note for kind in ("1 README", "1 .py", "1 .yaml"))
    code, out, _err = _run(capsys, "analyze", str(tmp_path / "README.md"))  # named: always read
    assert code == 1 and "Xid 79" in out


def test_a_json_log_in_a_folder_is_still_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    error_file = {"message": {"message": "RuntimeError: CUDA error: an illegal memory access was encountered",
                              "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"t.py\", "
                                                            "line 1\nRuntimeError: CUDA error: an illegal memory "
                                                            "access was encountered\n", "timestamp": "1700000000"}}}
    (tmp_path / "error.json").write_text(json.dumps(error_file))
    code, out, _err = _run(capsys, "analyze", "--format", "json", str(tmp_path))
    data = json.loads(out)
    assert [s["path"] for s in data["sources"]] == [str(tmp_path / "error.json")]
    assert data["sources"][0]["kind"] != "text"


def test_the_scenarios_folder_gives_no_verdict_from_docstrings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _run(capsys, "analyze", str(ROOT / "samples" / "scenarios"))
    assert "meta-device-checkpoint" not in out and "ROOT CAUSE" not in out
    assert ".py" in out and "not logs" in out


def test_a_samples_readme_does_not_raise_a_verdicts_confidence(capsys: pytest.CaptureFixture[str]) -> None:
    case = RECORDED / "oom-first-backward"
    _code, with_readme, _ = _run(capsys, "analyze", "--format", "json", str(case))
    _code, bundle_only, _ = _run(capsys, "analyze", "--format", "json", str(case / "bundle"))
    a, b = json.loads(with_readme)["verdict"], json.loads(bundle_only)["verdict"]
    assert (a["root_cause"], a["confidence"]) == (b["root_cause"], b["confidence"])


@pytest.mark.parametrize(("flag", "says"), [
    (["--host", "nodeZ"], "--host nodeZ matched no host; the inputs name vm"),
    (["--rank", "5"], "--rank 5 matched no rank; the inputs name ranks 0–1"),
    (["--since", "2030-01-01"], "--since '2030-01-01' left no event; the inputs' events span 2026-11-29"),
    (["--until", "2020-01-01"], "--until '2020-01-01' left no event"),
])
def test_a_filter_that_selects_nothing_is_exit_2_and_says_what_exists(
        flag: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "analyze", *flag, str(RECORDED / "silent-stall-2gpu" / "bundle"))
    assert code == 2 and out == "", (code, out)
    assert err.count("\n") == 1 and says in err, err


def test_a_filter_that_selects_something_still_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _run(capsys, "analyze", "--rank", "1", "--host", "vm",
                           str(RECORDED / "silent-stall-2gpu" / "bundle"))
    assert code in (0, 1) and ("ROOT CAUSE" in out or "NO FAILURE" in out)


def test_unreadable_input_is_one_line_and_nothing_on_stdout(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.log").write_bytes(b"")
    for args in (["analyze", str(tmp_path / "empty.log")], ["analyze", "/bin/ls"],
                 ["analyze", "--format", "json", "/bin/ls"], ["report", str(tmp_path / "empty.log")]):
        code, out, err = _run(capsys, *args)
        assert code == 2 and out == "", (args, out)
        assert err.count("\n") == 1 and err.startswith("forensics: nothing readable in the inputs: "), err


def test_merge_of_unrelated_bundles_warns_and_of_one_job_does_not(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _run(capsys, "analyze", "--merge", str(RECORDED))
    assert "--merge reads 13 bundles that do not look like one job" in err
    job = tmp_path / "job"
    job.mkdir()
    for i, host in enumerate(("node1", "node2")):  # one job on two nodes: the same time, the same command
        b = bundle(job, f"b{i}", "silent-stall-2gpu")
        edit_manifest(b, host=host)
    _run(capsys, "analyze", "--merge", str(job))
    _code, _out, err = _run(capsys, "analyze", "--merge", str(job))
    assert "do not look like one job" not in err
    shutil.rmtree(job)
