"""``--format json`` against its published schema, docs/analyze.schema.json, on every sample."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from forensics.analysis import JSON_VERSION
from forensics.cli import main

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "docs" / "analyze.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())


def test_the_schema_is_valid_and_pins_the_version() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$defs"]["version"]["const"] == JSON_VERSION


@pytest.mark.slow
def test_every_recorded_sample_matches_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    samples = ROOT / "samples" / "recorded"
    main(["analyze", "--each", "--format", "json", "--quiet", str(samples)])
    out = json.loads(capsys.readouterr().out)
    VALIDATOR.validate(out)
    cases = {p.parent.name for p in samples.glob("*/bundle")}
    assert {Path(r["paths"][0]).parent.name for r in out["runs"]} == cases
    for run in out["runs"]:  # each run is also a single analysis, as analyze BUNDLE prints it
        VALIDATOR.validate(run["analysis"])
        assert run["analysis"]["recordings"]


@pytest.mark.parametrize("path", sorted((ROOT / "samples" / "pasted").iterdir()), ids=lambda p: p.name)
def test_pasted_samples_match_the_schema(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["analyze", "--format", "json", str(path)])
    VALIDATOR.validate(json.loads(capsys.readouterr().out))


def test_a_drift_in_the_output_is_caught(capsys: pytest.CaptureFixture[str]) -> None:
    main(["analyze", "--format", "json", str(ROOT / "samples" / "pasted" / "xid79-dmesg.txt")])
    out = json.loads(capsys.readouterr().out)
    out["findings"][0]["score"] = "0.8"  # a number turned string
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(out)
    del out["findings"][0]["score"]
    out["version"] = JSON_VERSION + 1
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(out)
