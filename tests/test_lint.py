"""``forensics lint-signatures``: every problem named with file, line and the pattern as
written (golden text), plus the loader's own checks."""

import io
from pathlib import Path

import pytest

from forensics.cli import main
from forensics.errors import SignatureError
from forensics.evaluation.lint import lint_paths, run_lint
from forensics.match import load_signatures
from forensics.match.loader import check_text, load_file

DATA = Path(__file__).parent / "data"
BAD = DATA / "signatures_bad"
GOOD = DATA / "signatures"


def _errors(path: Path) -> list[str]:
    _, problems = lint_paths([path])
    return [str(p) for p in problems if not p.warning]


def test_regex_error_quotes_the_pattern_as_written() -> None:
    assert _errors(BAD / "bad-regex.toml") == [
        f"{BAD}/bad-regex.toml:9: evidence 'xid': regex does not compile: missing ) at position 22: "
        "'Xid \\(PCI:[^)]*\\): (79'",
    ]


def test_schema_errors_name_their_lines() -> None:
    assert _errors(BAD / "no-literals.toml") == [
        f"{BAD}/no-literals.toml:4: priority must be an integer from 0 to 100, got 150",
        f"{BAD}/no-literals.toml:6: evidence 'xid': an anchor needs 'literals' (the analyzer only sees lines "
        "holding one of them)",
        f"{BAD}/no-literals.toml:10: unknown key 'windw' in [[evidence]] (did you mean 'window'?)",
    ]


def test_toml_syntax_error() -> None:
    assert _errors(BAD / "syntax.toml") == [f"{BAD}/syntax.toml:4: TOML syntax error: Unclosed array"]


def test_id_window_and_order_errors() -> None:
    assert _errors(BAD / "wrong-id.toml") == [
        f"{BAD}/wrong-id.toml:1: id 'another-id' differs from the file name 'wrong-id'.toml",
        f"{BAD}/wrong-id.toml:9: evidence 'a': 'window' is relative to the anchor, so only supporting/excludes "
        "evidence has one",
        f"{BAD}/wrong-id.toml:15: evidence 'b': window '+1m..-1m' ends before it starts",
        f"{BAD}/wrong-id.toml:19: order names evidence 'c', which does not exist",
    ]


def test_keys_inside_multiline_strings_do_not_confuse_line_numbers() -> None:
    text = '''id = "x"
title = "t"
category = "driver"
explain = """
regex = not a key here
"""

[[evidence]]
name = "a"
role = "anchor"
literals = ["a"]
regex = \'\'\'(\'\'\'
'''
    _, problems = check_text(text, "x.toml", "x")
    errors = [str(p) for p in problems if not p.warning]
    assert errors == ["x.toml:12: evidence 'a': regex does not compile: missing ) at position 1: '('"]


@pytest.mark.slow
def test_run_lint_exit_status_and_summary() -> None:
    out = io.StringIO()
    assert run_lint([BAD], out) == 1
    assert out.getvalue().splitlines()[-1] == "4 signature file(s): 9 error(s), 9 warning(s)"
    out = io.StringIO()
    assert run_lint([GOOD], out) == 0
    assert "0 error(s)" in out.getvalue()


def test_lint_runs_examples_through_the_pipeline(tmp_path: Path) -> None:
    (tmp_path / "quiet.toml").write_text('''id = "quiet"
title = "Never fires on its own example"
category = "driver"
explain = "x"
remedy = ["y"]

[[evidence]]
name = "a"
role = "anchor"
literals = ["GPU has fallen"]

[[examples]]
match = true
text = "nothing to see here\\n"

[[examples]]
match = false
text = "GPU has fallen off the bus\\n"
''')
    _, problems = lint_paths([tmp_path])
    assert [str(p) for p in problems] == [
        f"{tmp_path}/quiet.toml:12: example should fire for quiet, but it stayed silent",
        f"{tmp_path}/quiet.toml:16: example should stay silent for quiet, but it fired",
    ]


def test_lint_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint-signatures", str(BAD / "bad-regex.toml")]) == 1
    assert "regex does not compile" in capsys.readouterr().out
    assert main(["lint-signatures", "/no/such/dir"]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_load_file_raises_one_line_with_file_and_line() -> None:
    with pytest.raises(SignatureError) as err:
        load_file(BAD / "no-literals.toml")
    msg = str(err.value)
    assert msg.startswith(f"{BAD}/no-literals.toml:4: priority must be")
    assert "\n" not in msg and "(and 2 more problem(s); run: forensics lint-signatures)" in msg


def test_broken_user_signatures_are_one_line_error_in_analyze(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "a.log"
    log.write_text("hello\n")
    assert main(["analyze", "--signatures", str(BAD), str(log)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("forensics: ") and ".toml:" in err


def test_missing_signature_dir_is_an_error() -> None:
    with pytest.raises(SignatureError, match="signature directory not found"):
        load_signatures([Path("/no/such/signatures")])


def test_user_signature_replaces_shipped_one_with_the_same_id() -> None:
    shipped = {s.id: s for s in load_signatures()}
    mine = {s.id: s for s in load_signatures([GOOD])}
    assert mine["xid-79-fallen-off-bus"].path.startswith(str(GOOD))
    assert set(shipped) <= set(mine)


def test_user_signatures_from_the_environment_fire_in_analyze(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    import json

    sigdir = tmp_path / "sigs"
    sigdir.mkdir()
    (sigdir / "my-app-exploded.toml").write_text('''id = "my-app-exploded"
title = "Our data loader gave up"
category = "application"
priority = 70
explain = "The loader's retry budget ran out."
remedy = ["Check the object store"]

[[evidence]]
name = "gave-up"
role = "anchor"
literals = ["MYAPP-E42"]
regex = \'\'\'MYAPP-E42: loader gave up after \\d+ retries\'\'\'
''')
    log = tmp_path / "train.log"
    log.write_text("step 1\nMYAPP-E42: loader gave up after 5 retries\n")
    monkeypatch.setenv("FORENSICS_SIGNATURES", str(sigdir))
    assert main(["analyze", "--format", "json", str(log)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"]["root_cause"] == "my-app-exploded"
    assert out["findings"][0]["evidence"][0]["origin"] == f"{log}:2"
