"""The library API: ``forensics.analyze`` and the types exported lazily from ``forensics``, the pandas
frames, short reprs, and the README's "Python API" example, run as it is written."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import forensics
from forensics.analysis import Options
from forensics.cli import main
from forensics.errors import ForensicsError, UsageError
from forensics.events import Event, MetricSample, Origin, Severity, TsSource
from forensics.timeline.tables import EVENT_COLUMNS, METRIC_COLUMNS, events_frame, metrics_frame

ROOT = Path(__file__).resolve().parent.parent
STALL = ROOT / "samples" / "recorded" / "silent-stall-2gpu" / "bundle"
PUBLIC = ["Analysis", "Event", "Finding", "ForensicsError", "Options", "Verdict", "__version__", "analyze"]


def _run(code: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def stall() -> forensics.Analysis:
    return forensics.analyze(STALL)


# -- the package's surface --------------------------------------------------------------------------

def test_all_is_the_public_surface_and_each_name_resolves() -> None:
    assert forensics.__all__ == PUBLIC
    from forensics import analysis, api, errors, events, findings

    assert forensics.analyze is api.analyze
    assert forensics.Analysis is analysis.Analysis and forensics.Options is analysis.Options
    assert forensics.Event is events.Event and forensics.ForensicsError is errors.ForensicsError
    assert forensics.Finding is findings.Finding and forensics.Verdict is findings.Verdict
    assert set(PUBLIC) <= set(dir(forensics))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        forensics.nope  # noqa: B018


def test_the_stub_declares_what_the_package_exports() -> None:
    """``__init__.pyi`` gives the lazy names their types: the same names, from the same modules."""
    stub = ast.parse((ROOT / "forensics" / "__init__.pyi").read_text())
    imported = {alias.name: node.module for node in stub.body if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    declared = next(ast.literal_eval(node.value) for node in stub.body
                    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__")
    assert declared == forensics.__all__
    assert imported == forensics._EXPORTS


def test_the_package_ships_its_types() -> None:
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["forensics"]
    assert {"py.typed", "__init__.pyi"} <= set(data)
    assert (ROOT / "forensics" / "py.typed").is_file()


def test_importing_forensics_stays_cheap() -> None:
    """The recorder imports ``forensics``: no pandas, no matcher, no parsers, not even ``typing``'s share."""
    out = _run("import sys; before = set(sys.modules); import forensics; "
               "print('\\n'.join(sorted(set(sys.modules) - before)))")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["forensics"]


def test_a_type_imports_only_its_module() -> None:
    out = _run("import sys, forensics; forensics.Event; forensics.Finding; "
               "print('\\n'.join(m for m in sys.modules if m.startswith(('forensics', 'pandas'))))")
    assert out.returncode == 0, out.stderr
    assert set(out.stdout.split()) == {"forensics", "forensics.events", "forensics.findings"}


# -- forensics.analyze --------------------------------------------------------------------------------

def test_analyze_gives_what_the_command_line_prints(stall: forensics.Analysis,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--format", "json", "--quiet", str(STALL)]) == 1
    assert stall.to_json_dict() == json.loads(capsys.readouterr().out)
    assert stall.verdict.root_cause is not None and stall.verdict.root_cause.signature == "silent-worker-stall"


def test_analyze_takes_one_path_or_several(stall: forensics.Analysis) -> None:
    as_text = forensics.analyze(str(STALL))
    as_list = forensics.analyze([STALL])
    assert as_text.to_json_dict() == as_list.to_json_dict() == stall.to_json_dict()


def test_analyze_takes_the_options_as_keywords() -> None:
    full = forensics.analyze(STALL)
    rank1 = forensics.analyze(STALL, ranks="1", max_evidence=2, tz="Europe/Berlin")
    assert rank1.timeline.notes[-1].startswith("filtered (rank 1)")
    assert len(rank1.timeline.events) < len(full.timeline.events)
    assert all(len(f.evidence) <= 4 for f in rank1.findings)  # two per anchor list and two supporting
    late = forensics.analyze(STALL, since="30s", hosts="vm")
    assert "since" in late.timeline.notes[-1] and "host vm" in late.timeline.notes[-1]
    given = forensics.analyze(STALL, Options(max_evidence=1))
    assert all(len(f.evidence) <= 2 for f in given.findings)


@pytest.mark.parametrize(("kwargs", "error", "says"), [
    ({"bogus": 1}, TypeError, "unknown option 'bogus'"),
    ({"since": "in the morning maybe"}, UsageError, "since: cannot read"),
    ({"ranks": "one"}, UsageError, "wants numbers or ranges"),
    ({"tz": "Mars/Olympus"}, UsageError, "unknown time zone"),
    ({"max_evidence": 0}, UsageError, "max_evidence: a number of events, 1 or more"),
])
def test_bad_options_say_why(kwargs: dict[str, Any], error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=says):
        forensics.analyze(STALL, **kwargs)


def test_bad_paths_are_one_forensics_error(tmp_path: Path) -> None:
    with pytest.raises(ForensicsError, match="no such file or directory"):
        forensics.analyze(tmp_path / "missing")
    with pytest.raises(ForensicsError, match="at least one path"):
        forensics.analyze([])


# -- pandas frames ----------------------------------------------------------------------------------

def test_events_frame_has_typed_columns_in_timeline_order(stall: forensics.Analysis) -> None:
    frame = stall.events_frame()
    assert list(frame.columns) == [name for name, _ in EVENT_COLUMNS]
    assert {name: str(frame[name].dtype) for name, _ in EVENT_COLUMNS
            if name not in ("message", "file", "detail")} == {n: d for n, d in EVENT_COLUMNS
                                                              if n not in ("message", "file", "detail")}
    assert all(isinstance(frame[n].dtype, pd.StringDtype) for n in ("message", "file", "detail"))
    assert len(frame) == len(stall.timeline.events)
    first = stall.timeline.events[0]
    assert frame["ts"].iloc[0] == pd.Timestamp(first.ts, unit="ns", tz="UTC")
    assert frame["message"].iloc[0] == first.message and frame["file"].iloc[0] == first.origin.path
    assert frame["severity"].cat.ordered and list(frame["severity"].cat.categories) == [
        "debug", "info", "warning", "error", "critical"]
    errors = frame[frame["severity"] >= "error"]
    assert 0 < len(errors) < len(frame)
    assert set(errors["kind"]) >= {"c10d"}
    derived = frame[frame["kind"] == "derived"]
    assert len(derived) and all("detector" in a for a in derived["attrs"])


def test_metrics_frame_has_a_float_column_per_reading(stall: forensics.Analysis) -> None:
    frame = stall.metrics_frame()
    assert len(frame) == len(stall.timeline.metrics) == 286
    assert list(frame.columns[:4]) == ["ts", "host", "gpu", "source"]
    assert list(frame.columns[4:4 + len(METRIC_COLUMNS)]) == list(METRIC_COLUMNS)
    assert str(frame["ts"].dtype) == "datetime64[ns, UTC]"
    assert all(frame[c].dtype == "float64" for c in METRIC_COLUMNS)
    peak = frame.groupby("gpu", observed=True)["util_gpu_pct"].max()
    assert sorted(peak.index) == ["0000:00:06.0", "0000:00:07.0"] and peak.max() == 100.0


def test_frames_keep_their_types_when_empty_or_untimed() -> None:
    empty = events_frame([])
    assert len(empty) == 0 and str(empty["ts"].dtype) == "datetime64[ns, UTC]" and str(empty["rank"].dtype) == "Int64"
    assert len(metrics_frame([]).columns) == 6 + len(METRIC_COLUMNS)
    untimed = Event(None, TsSource.NONE, "file:x.log", "log", "a line", Origin("x.log", 3), Severity.ERROR,
                    rank=2, attrs={"level": "ERROR"})
    row = events_frame([untimed]).iloc[0]
    assert pd.isna(row["ts"]) and row["rank"] == 2 and pd.isna(row["pid"]) and row["severity"] == "error"
    assert row["line"] == 3 and row["attrs"] == {"level": "ERROR"}
    sample = MetricSample(10**18, TsSource.EXACT, "0", {"power_w": 120, "fan_pct": 40.0}, Origin("n.jsonl", 1))
    m = metrics_frame([sample]).iloc[0]
    assert m["power_w"] == 120.0 and m["fan_pct"] == 40.0 and pd.isna(m["temp_c"])


# -- reprs --------------------------------------------------------------------------------------------

def test_reprs_are_short(stall: forensics.Analysis) -> None:
    text = repr(stall)
    assert text == ("<Analysis root cause silent-worker-stall (high confidence), 3 finding(s), 11 source(s), "
                    f"{len(stall.timeline.events)} event(s), 286 GPU sample(s)>")
    assert repr(stall.verdict).startswith("Verdict(root_cause='silent-worker-stall', confidence='high'")
    assert repr(stall.findings[0]).startswith("Finding('silent-worker-stall', role='root-cause', score=")
    assert "document" not in repr(stall.sources[0])
    for e in stall.timeline.events:
        assert len(repr(e)) <= 150 + len(str(e.origin)) + len(e.source) + len(e.kind)
    long = Event(0, TsSource.EXACT, "kmsg", "xid", "x" * 500, Origin("k.log", 1))
    assert repr(long) == f"Event(1970-01-01T00:00:00.000000Z, 'kmsg', 'xid', '{'x' * 79}…', origin='k.log:1')"


# -- the README ---------------------------------------------------------------------------------------

def readme_example() -> str:
    """The first ``python`` block of the README's "Python API" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Python API", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "README.md: the Python API section has no ```python block"
    return block.group(1)


@pytest.mark.slow
def test_the_readme_example_runs_as_written() -> None:
    code = readme_example()
    assert "samples/recorded/silent-stall-2gpu/bundle" in code
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("<Analysis root cause silent-worker-stall (high confidence)")
    assert "root-cause silent-worker-stall" in out.stdout and "mem_used_mib" in out.stdout
    assert "Verdict(root_cause='silent-worker-stall'" in out.stdout
