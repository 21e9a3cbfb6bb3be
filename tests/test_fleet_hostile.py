"""``forensics fleet`` on a shared incidents directory where anyone may write a folder (issue 24): one
hostile input is one row with its error, the good inputs' rows are kept, the summary is printed and
the run shuts down cleanly. Real Dask cluster (2 worker processes), real DuckDB, the real CLI in its
own interpreter under a time and memory cap."""

from __future__ import annotations

import os
from importlib.util import find_spec
from pathlib import Path

import pytest
from hostile import bundle, cli, edit_manifest, fine, replace_with_fifo, replace_with_link

duckdb = pytest.importorskip("duckdb")
if find_spec("distributed") is None:
    pytest.skip("dask[distributed] is not installed", allow_module_level=True)

pytestmark = pytest.mark.slow


def _rows(db: Path) -> list[tuple[str, str | None, str | None]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT path, verdict, error FROM inputs ORDER BY input_id").fetchall()
    finally:
        con.close()


def _fleet(tmp: Path, *args: str, deadline: str = "60") -> tuple[object, list[tuple[str, str | None, str | None]]]:
    db = tmp / "fleet.duckdb"
    ran = cli("fleet", "--workers", "2", "--deadline", deadline, "-o", str(db), *args, timeout=400)
    return ran, _rows(db) if db.exists() else []


def _two_good(root: Path) -> None:
    bundle(root, "good-1", "healthy")
    bundle(root, "good-2", "oom-first-backward")


@pytest.mark.parametrize("what", ["manifest-dev-zero", "manifest-fifo", "smi-q-fifo", "nvml-fifo", "huge-host"])
def test_one_hostile_bundle_is_one_error_row_and_the_rest_is_kept(tmp_path: Path, what: str) -> None:
    root = tmp_path / "incidents"
    root.mkdir()
    _two_good(root)
    bad = bundle(root, "bad", "healthy")
    if what == "manifest-dev-zero":
        replace_with_link(bad / "manifest.json", "/dev/zero")
    elif what == "manifest-fifo":
        replace_with_fifo(bad / "manifest.json")
    elif what == "smi-q-fifo":
        replace_with_fifo(bad / "host" / "nvidia-smi-q.xml")
    elif what == "nvml-fifo":
        replace_with_fifo(bad / "nvml.jsonl")
    else:
        edit_manifest(bad, host="h" * (100 << 20))  # a 100 MB host name (the DuckDB insert failed)
    ran, rows = _fleet(tmp_path, str(root))
    assert fine(ran, (0, 3)), (ran.code, ran.err[-3000:])
    assert "CommClosedError" not in ran.err and "Traceback" not in ran.err
    paths = [Path(p).name for p, _v, _e in rows]
    assert "good-1" in paths and "good-2" in paths, rows
    verdicts = {Path(p).name: v for p, v, _e in rows}
    assert verdicts["good-2"] == "torch-cuda-oom"
    assert "inputs on" in ran.out  # the summary
    for _p, _v, e in rows:
        assert e is None or len(e) <= 500


def test_a_bundle_whose_manifest_is_gone_or_a_folder_is_still_a_row(tmp_path: Path) -> None:
    """Found by the fuzzer (fleet, seed 2): a folder of bundles where one bundle lost its manifest and
    another's is a directory gave 246 rows for 250 bundles; every bundle the recorder wrote is an input."""
    root = tmp_path / "in"
    root.mkdir()
    _two_good(root)
    gone = bundle(root, "no-manifest", "oom-first-backward")
    (gone / "manifest.json").unlink()
    folder = bundle(root, "manifest-dir", "healthy")
    (folder / "manifest.json").unlink()
    (folder / "manifest.json").mkdir()
    ran, rows = _fleet(tmp_path, str(root))
    assert fine(ran, (0, 1, 3)), (ran.code, ran.err[-3000:])
    assert sorted(Path(p).name for p, _v, _e in rows) == ["good-1", "good-2", "manifest-dir", "no-manifest"]
    verdicts = {Path(p).name: v for p, v, _e in rows}
    assert verdicts["no-manifest"] == "torch-cuda-oom"  # its logs are read as logs


def test_a_symlink_loop_among_the_arguments_is_a_row(tmp_path: Path) -> None:
    root = tmp_path / "in"
    root.mkdir()
    _two_good(root)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    ran, rows = _fleet(tmp_path, str(root / "good-1"), str(loop), str(root / "good-2"))
    assert fine(ran, (3,)), (ran.code, ran.err[-3000:])
    errors = {Path(p).name: e for p, _v, e in rows}
    assert errors["good-1"] is None and errors["good-2"] is None
    assert "symbolic links" in (errors["loop"] or ""), rows
    assert "could not be analysed" in ran.out


def test_a_hung_input_is_killed_at_its_deadline_and_becomes_a_row(tmp_path: Path) -> None:
    """A log file that is a FIFO named on the command line is read (the user named it) — a writer that
    never writes holds the read: the per-input deadline kills that input, the others are kept."""
    root = tmp_path / "in"
    root.mkdir()
    _two_good(root)
    fifo = tmp_path / "held.log"
    os.mkfifo(fifo)
    holder = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer that never writes
    try:
        ran, rows = _fleet(tmp_path, str(root / "good-1"), str(fifo), str(root / "good-2"), deadline="15")
    finally:
        os.close(holder)
    assert fine(ran, (3,)), (ran.code, ran.err[-3000:])
    errors = {Path(p).name: e for p, _v, e in rows}
    assert errors["good-1"] is None and errors["good-2"] is None
    assert "deadline" in (errors["held.log"] or ""), rows
