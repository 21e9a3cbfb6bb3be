"""The command line: exit statuses and one-line errors."""

import json
from pathlib import Path

import pytest

from forensics.cli import main


def test_missing_path_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "/definitely/not/here"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err


def test_binary_only_input_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "junk.bin"
    p.write_bytes(bytes(range(256)) * 64)
    assert main(["analyze", "--format", "json", str(p)]) == 2
    got = capsys.readouterr()
    assert got.out == ""  # nothing readable: one line, never a report of nothing
    assert got.err.count("\n") == 1 and "nothing readable" in got.err and "binary" in got.err


def test_json_contract_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "healthy.log"
    p.write_text("epoch 1 step 10 loss 2.31\nepoch 1 step 20 loss 2.10\n")
    rc = main(["analyze", "--format", "json", str(p)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["version"] == 1
    assert out["verdict"]["root_cause"] is None
    assert set(out) >= {"verdict", "findings", "sources", "recordings", "warnings"}
    assert out["sources"][0]["path"] == str(p)


def test_bad_offset_flag(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_text("x\n")
    assert main(["analyze", "--offset", "nonsense", str(p)]) == 2
    assert "--offset" in capsys.readouterr().err


def test_no_subcommand_prints_help() -> None:
    assert main([]) == 2
