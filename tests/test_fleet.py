"""``forensics fleet``: replayed bundles analysed on a real local Dask cluster (2 worker processes), the
DuckDB file and the Parquet files queried with SQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from collections import Counter
from importlib.util import find_spec
from pathlib import Path

import pytest

duckdb = pytest.importorskip("duckdb")
if find_spec("distributed") is None:  # not imported here: Dask stays out of the test process
    pytest.skip("dask[distributed] is not installed", allow_module_level=True)

from forensics.analysis import analyze  # noqa: E402
from forensics.cli import main  # noqa: E402
from forensics.fleet.replay import replay_fleet, samples  # noqa: E402
from forensics.fleet.tasks import analyze_one, expand_paths  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples" / "recorded"
HOT = "device-assert-h200"  # the sample with an Xid (43) naming its GPU


def _fleet(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command in its own interpreter (Dask's imports and clusters never enter pytest's)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "forensics", "fleet", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)


def _expected(sample: str) -> str | None:
    root = tomllib.loads((SAMPLES / sample / "expected.toml").read_text())["root_cause"]
    return None if root == "none" else root


def _shape(path: str | Path) -> list[tuple[str, str, int]]:
    """What analysis says, identity aside: (signature, role, number of GPUs named) per finding."""
    return sorted((f.signature, str(f.role), len(f.gpus)) for f in analyze([str(path)]).findings)


@pytest.mark.slow
def test_replay_keeps_every_finding_and_changes_every_identity(tmp_path: Path) -> None:
    found = samples(SAMPLES)
    placed = replay_fleet(SAMPLES, tmp_path, len(found), seed=3)
    assert {p.sample for p in placed} == {s.name for s in found}
    for p in placed:
        original = SAMPLES / p.sample / "bundle"
        assert _shape(p.path) == _shape(original), p.sample
        manifest = json.loads((Path(p.path) / "manifest.json").read_text())
        assert manifest["host"] == p.host and manifest["start_ns"] == p.start_ns
        old = json.loads((original / "host" / "gpus.json").read_text())["gpus"]
        blob = b"".join(f.read_bytes() for f in Path(p.path).rglob("*") if f.is_file())
        for g in old:  # the recorded GPU's serial and UUID are gone from every file of the copy
            assert g["serial"].encode() not in blob and g["uuid"].encode() not in blob
        row = analyze_one(0, p.path)
        named = {(f["pci"], f["serial"]) for f in row["findings"] if f["pci"]}
        given = {(g["pci"], g["serial"]) for g in p.gpus}
        assert named <= given, (p.sample, named, given)


@pytest.mark.slow
def test_fleet_on_local_dask_cluster_writes_duckdb_and_parquet(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    placed = replay_fleet(SAMPLES, fleet, 40, seed=12, hosts=5)
    bad = fleet / "node-999" / "broken.tar.gz"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\x1f\x8b\x08\x00not really gzip")
    db, pq = tmp_path / "fleet.duckdb", tmp_path / "pq"

    proc = _fleet(str(fleet), str(bad), "--workers", "2", "-o", str(db), "--parquet", str(pq), "--quiet")
    out = proc.stdout
    assert proc.returncode == 3, proc.stderr  # one input could not be analysed; the other 40 were

    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*), count(error) FROM inputs").fetchone() == (41, 1)
    assert con.execute("SELECT path FROM inputs WHERE error IS NOT NULL").fetchone()[0] == str(bad)
    # both worker processes took part
    assert con.execute("SELECT count(DISTINCT worker) FROM inputs WHERE error IS NULL").fetchone()[0] == 2

    want = Counter(v for p in placed if (v := _expected(p.sample)))
    got = dict(con.execute("SELECT verdict, count(*) FROM inputs WHERE verdict IS NOT NULL GROUP BY 1").fetchall())
    assert got == dict(want)
    roots = dict(con.execute("SELECT signature, count(DISTINCT input_id) FROM findings WHERE role = 'root-cause' "
                             "GROUP BY 1").fetchall())
    assert roots == dict(want)
    assert con.execute("SELECT count(*) FROM inputs WHERE verdict IS NULL AND error IS NULL").fetchone()[0] == \
        sum(1 for p in placed if _expected(p.sample) is None)

    # every host, and times spread over the replayed week
    hosts = {h for (h,) in con.execute("SELECT DISTINCT host FROM inputs WHERE error IS NULL").fetchall()}
    assert hosts == {p.host for p in placed}
    days = con.execute("SELECT count(DISTINCT start_time::DATE) FROM inputs WHERE error IS NULL").fetchone()[0]
    assert days == len({p.start_ns // (86400 * 10**9) for p in placed})

    # the GPU that keeps coming back: the Xid's GPU, found by serial, with its UUID and bus id
    hot = [p for p in placed if p.sample == HOT and p.host == "node-000" and p.gpus[0]["slot"] == 3]
    assert len(hot) >= 2
    serial, uuid, pci = hot[0].gpus[0]["serial"], hot[0].gpus[0]["uuid"], hot[0].gpus[0]["pci"]
    rows = con.execute("SELECT serial, any_value(uuid), any_value(pci), any_value(host), count(DISTINCT input_id) "
                       "FROM findings WHERE signature = 'xid-43-stopped-processing' GROUP BY serial "
                       "HAVING count(DISTINCT input_id) >= 2").fetchall()
    assert rows == [(serial, uuid, pci, "node-000", len(hot))]

    # the printed summary says it too
    assert f"serial {serial}" in out
    assert f"cuda-device-side-assert in {want['cuda-device-side-assert']} inputs" in out
    assert f"serial {serial} {len(hot)} times in" in out
    assert "41 inputs on 2 workers (local cluster)" in out and "1 could not be analysed" in out

    # Parquet holds the same rows
    for table in ("inputs", "findings", "gpus"):
        n = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        assert con.execute(f"SELECT count(*) FROM read_parquet('{pq / (table + '.parquet')}')").fetchone()[0] == n


def test_folder_of_bundles_expands_to_its_bundles(tmp_path: Path) -> None:
    placed = replay_fleet(SAMPLES, tmp_path / "f", 5, seed=1, hosts=2)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "dmesg.txt").write_text("[  1.0] hello\n")
    got = expand_paths([str(tmp_path / "f"), str(logs)])
    assert sorted(got[:-1]) == sorted(p.path for p in placed) and got[-1] == str(logs)


def test_fleet_without_dask_says_how_to_install(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)  # import duckdb now raises ImportError
    rc = main(["fleet", str(SAMPLES)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "pip install 'gpu-forensics[fleet]'" in err[0]


def test_fleet_missing_path_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["fleet", str(tmp_path / "nope"), "-o", str(tmp_path / "x.duckdb")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == [f"forensics: no such file or directory: {tmp_path / 'nope'}"]


def test_cli_imports_without_dask_or_duckdb() -> None:
    import subprocess

    code = "import sys, forensics.cli; forensics.cli.build_parser(); print(' '.join(sys.modules))"
    mods = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True).stdout.split())
    assert not {"dask", "distributed", "duckdb"} & mods


@pytest.mark.slow
def test_fleet_on_a_named_scheduler(tmp_path: Path) -> None:
    """--scheduler: the command submits to a cluster it did not start (`dask scheduler` and `dask worker`
    processes started here, as on a real cluster)."""
    placed = replay_fleet(SAMPLES, tmp_path / "f", 6, seed=5, hosts=2)
    db, info = tmp_path / "s.duckdb", tmp_path / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--port", "0",
                                 "--no-dashboard", "--scheduler-file", str(info)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for _ in range(600):
            if info.is_file() and info.stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        started.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                                         "--nworkers", "2", "--nthreads", "1", "--no-dashboard"], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        proc = _fleet(str(tmp_path / "f"), "--scheduler", address, "-o", str(db), "--quiet")
    finally:
        for p in reversed(started):
            p.terminate()
            p.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert f"scheduler {address}" in proc.stdout
    con = duckdb.connect(str(db), read_only=True)
    got = dict(con.execute("SELECT path, coalesce(verdict, 'none') FROM inputs").fetchall())
    assert got == {p.path: _expected(p.sample) or "none" for p in placed}
