"""``forensics pack``: no planted secret survives anywhere in the archive (members read raw and
gzip-decoded), the receipt indexes still match the redacted logs, ``--anonymize`` is consistent
across files and bundles, ``--max-size`` downsamples NVML keeping the peaks, and the archive opens
with ``analyze``, ``report`` and ``open``."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from forensics.analysis import analyze, bundle_facts
from forensics.cli import main
from forensics.ingest.bundle import IDX_MAGIC, pack_receipt, receipt_lookup
from forensics.postmortem.pack import downsample_nvml, pack, parse_size

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "samples" / "recorded"

HF = "hf_" + "Q7pX2mN9vB4kL8sD3fG6hJ1wE5rT0yU"
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
GH_PAT = "github_pat_" + "11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789"
SK = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"
AKIA = "AKIA" + "Z7Q2W4E6R8T0Y1U3"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8v2Lm4Pn"
BEARER = "eyZ0b2tlbi1mb3ItYmVhcmVyLTk4NzY1NDMyMQ"
AUTH = "Basic dXNlcjpzM2NyM3RwYXNzd29yZA=="
URL_PW = "Pa55-in-the-url-9731"
PW = "hunter2-plain-password"
TOKEN = "tok-5f1e2d3c4b5a69788796"
DB_PW = "db-env-secret-8841"
SECRETS = (HF, GHP, GH_PAT, SK, AKIA, AWS_SECRET, BEARER, AUTH, URL_PW, PW, TOKEN, DB_PW)


def _stream_with_index(lines: list[str], t0: int) -> tuple[bytes, bytes]:
    raw = b""
    idx = bytearray(IDX_MAGIC)
    for i, line in enumerate(lines):
        raw += line.encode() + b"\n"
        idx += pack_receipt(len(raw), t0 + i * 1_000_000_000)
    return raw, bytes(idx)


def _planted_bundle(tmp: Path, source: str = "healthy") -> Path:
    b = tmp / "run" / "bundle"
    shutil.copytree(RECORDED / source / "bundle", b)
    env = json.loads((b / "host/env.json").read_text())
    env.update({"HF_TOKEN": HF, "MY_SERVICE_CONF": f"url=https://svc:{URL_PW}@svc.internal/x", "DB_PASSWORD": DB_PW,
                "AWS_ACCESS_KEY_ID": AKIA, "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "NOTE": f"gh {GHP}"})
    (b / "host/env.json").write_text(json.dumps(env))
    argv = ["python3", "train.py", "--hf-token", HF, f"--api-key={SK}", f"--password={PW}",
            f"--push=https://me:{URL_PW}@hub.example.com/r", f"token={TOKEN}"]
    cmd = json.loads((b / "host/command.json").read_text())
    cmd["argv"] = argv
    (b / "host/command.json").write_text(json.dumps(cmd))
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["command"] = argv
    (b / "manifest.json").write_text(json.dumps(manifest))
    with (b / "host/pip-freeze.txt").open("a") as fh:
        fh.write(f"private-pkg @ git+https://{GHP}@github.com/o/r.git\nother @ https://bob:{URL_PW}@pypi.example.com/x.whl\n"
                 f"pat-pkg @ git+https://{GH_PAT}@github.com/o/p.git\n")
    start = int(manifest["start_ns"])
    child = [f"login with {HF}", f"GITHUB_TOKEN={GHP} and {GH_PAT}", f"openai key {SK}",
             f"aws {AKIA} aws_secret_access_key={AWS_SECRET}", f"curl -H 'Authorization: {AUTH}'",
             f"header Bearer {BEARER}", f"pushing to https://me:{URL_PW}@hub.example.com",
             f"password={PW} token={TOKEN}"]
    for name in ("stdout", "stderr"):
        old = (b / f"{name}.log").read_bytes()
        raw, idx = _stream_with_index(child, start)
        (b / f"{name}.log").write_bytes(raw + old)
        # the old records, shifted by the planted prefix, after ours
        old_idx = (b / f"{name}.idx").read_bytes()[len(IDX_MAGIC):]
        shifted = bytearray()
        for k in range(0, len(old_idx) - len(old_idx) % 16, 16):
            end, ns = int.from_bytes(old_idx[k:k + 8], "little"), int.from_bytes(old_idx[k + 8:k + 16], "little")
            shifted += pack_receipt(end + len(raw), max(ns, start + len(child) * 1_000_000_000))
        (b / f"{name}.idx").write_bytes(idx + bytes(shifted))
    (b / "host/extra-notes.txt.gz").write_bytes(gzip.compress(f"note: {HF} password: {PW}\n".encode()))
    return b


def _members(archive: Path) -> dict[str, bytes]:
    out = {}
    with tarfile.open(archive, "r:gz") as tar:
        for m in tar:
            if m.isfile():
                fh = tar.extractfile(m)
                assert fh is not None
                out[m.name] = fh.read()
    return out


def test_no_planted_secret_survives_anywhere(tmp_path: Path) -> None:
    bundle = _planted_bundle(tmp_path)
    raw_text = b"".join(p.read_bytes() for p in bundle.rglob("*") if p.is_file())
    assert all(s.encode() in raw_text or s.encode() in gzip.decompress((bundle / "host/extra-notes.txt.gz")
                                                                       .read_bytes()) for s in SECRETS)
    out = tmp_path / "case.tar.gz"
    assert main(["pack", str(bundle), "-o", str(out)]) == 0
    members = _members(out)
    for name, data in members.items():
        views = [data, gzip.decompress(data)] if data[:2] == b"\x1f\x8b" else [data]
        for view in views:
            for secret in SECRETS:
                assert secret.encode() not in view, f"{secret[:6]}… survived in {name}"
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    report = members["case/bundle/REDACTIONS.txt" if "case/bundle/REDACTIONS.txt" in members else "case/REDACTIONS.txt"]
    text = report.decode()
    for kind in ("huggingface-token", "github-token", "api-key", "aws-access-key-id", "assignment",
                 "authorization", "bearer-token", "url-credentials"):
        assert f"{kind}: " in text
    assert all(s not in text for s in SECRETS)


def test_receipt_indexes_follow_the_redacted_logs(tmp_path: Path) -> None:
    bundle = _planted_bundle(tmp_path)
    out = tmp_path / "case.tar.gz"
    pack([str(bundle)], out)
    members = _members(out)
    for name in ("stdout", "stderr"):
        before_log, before_idx = (bundle / f"{name}.log").read_bytes(), (bundle / f"{name}.idx").read_bytes()
        after_log, after_idx = members[f"case/bundle/{name}.log"], members[f"case/bundle/{name}.idx"]
        old_at, new_at = receipt_lookup(before_idx), receipt_lookup(after_idx)
        assert old_at is not None and new_at is not None
        old_lines, new_lines = before_log.splitlines(keepends=True), after_log.splitlines(keepends=True)
        assert len(old_lines) == len(new_lines) and after_log != before_log
        o = n = 0
        for old, new in zip(old_lines, new_lines, strict=True):
            assert old_at(o) == new_at(n)  # every line keeps its receipt time
            o, n = o + len(old), n + len(new)


@pytest.mark.slow
def test_pack_round_trip_analyze_report_and_open(tmp_path: Path) -> None:
    src = RECORDED / "silent-stall-2gpu" / "bundle"  # the verdict rests on the flight-recorder pickles
    out = tmp_path / "case.tar.gz"
    assert main(["pack", str(src), "-o", str(out)]) == 0
    before, after = analyze([str(src)]), analyze([str(out)])
    assert after.verdict.root_cause_id == before.verdict.root_cause_id == "silent-worker-stall"
    assert sorted(f.signature for f in after.findings) == sorted(f.signature for f in before.findings)
    assert len(after.timeline.metrics) == len(before.timeline.metrics)
    assert {e.kind for e in after.timeline.events} == {e.kind for e in before.timeline.events}
    facts = bundle_facts([str(out)])
    assert len(facts) == 1 and facts[0].gpus()[0].name == "NVIDIA H200"
    md = tmp_path / "r.md"
    assert main(["report", str(out), "-o", str(md)]) == 0
    text = md.read_text()
    assert "silent-worker-stall" in text and "| 0 | NVIDIA H200 |" in text and "torchrun" in text
    assert main(["analyze", "--quiet", str(out)]) == 1

    from forensics.tui.app import ForensicsApp

    async def run() -> None:
        app = ForensicsApp([str(out)])
        app.animation_level = "none"
        async with app.run_test(size=(100, 30)) as pilot:
            for _ in range(300):  # the loader is a thread worker: wait until its result is shown
                await pilot.app.workers.wait_for_complete()
                await pilot.pause(0.1)
                if app.model is not None or app.load_error:
                    break
            assert app.model is not None, app.load_error
            assert app.model.analysis.verdict.root_cause_id == "silent-worker-stall"

    asyncio.run(run())


@pytest.mark.slow
def test_anonymize_uses_one_pseudonym_per_name_in_every_file(tmp_path: Path) -> None:
    a = _planted_bundle(tmp_path / "a")
    b = tmp_path / "b" / "bundle"
    shutil.copytree(RECORDED / "oom-first-backward" / "bundle", b)
    for bundle, host in ((a, "gpu-node-07"), (b, "gpu-node-08")):
        for rel in ("manifest.json", "host/system.json"):
            data = json.loads((bundle / rel).read_text())
            data["host" if rel == "manifest.json" else "hostname"] = host
            if rel == "manifest.json":
                data["cwd"] = "/home/alice/proj"
            (bundle / rel).write_text(json.dumps(data))
        with (bundle / "stderr.log").open("a") as fh:
            fh.write(f"{host}:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.1.2.3<0> home /home/alice/x\n")
    out = tmp_path / "case.tar.gz"
    assert main(["pack", str(a), str(b), "-o", str(out), "--anonymize"]) == 0
    members = _members(out)
    blob = b"".join(members.values())
    for word in (b"gpu-node-07", b"gpu-node-08", b"10.1.2.3", b"alice"):
        assert word not in blob
    assert b"/home/user1/" in blob
    manifests = {n: json.loads(d) for n, d in members.items() if n.endswith("/manifest.json")}
    hosts = sorted(m["host"] for m in manifests.values())
    assert hosts == ["host-01", "host-02"]
    for name, m in manifests.items():  # the same pseudonym in the bundle's other files
        prefix = name[: -len("manifest.json")]
        assert json.loads(members[prefix + "host/system.json"])["hostname"] == m["host"]
        assert f"{m['host']}:1234:1234".encode() in members[prefix + "stderr.log"]
    assert blob.count(b"192.0.2.1<0>") == 2  # one address, one pseudonym, in both bundles
    text = members["case/REDACTIONS.txt"].decode()
    # the two set here, the recorder's own 'vm' in the NVML headers, and svc.internal from a planted URL
    assert "host names: 4" in text
    nvml_hosts = {json.loads(d.splitlines()[0])["host"] for n, d in members.items() if n.endswith("/nvml.jsonl")}
    assert nvml_hosts == {"host-03"}
    assert analyze([str(out)]).verdict.root_cause_id == "torch-cuda-oom"


@pytest.mark.slow
def test_max_size_downsamples_nvml_and_keeps_the_memory_peak(tmp_path: Path) -> None:
    src = RECORDED / "memory-margin" / "bundle"
    full = pack([str(src)], tmp_path / "full.tar.gz")
    assert full.downsampled == 1
    small = pack([str(src)], tmp_path / "small.tar.gz", max_size=full.size - 2000)
    assert small.downsampled > 1 and small.size < full.size
    members = _members(tmp_path / "small.tar.gz")
    assert len(members["case/bundle/nvml.jsonl"].splitlines()) < len((src / "nvml.jsonl").read_bytes().splitlines())
    assert f"downsampled 1:{small.downsampled}" in members["case/REDACTIONS.txt"].decode()

    def peaks(path: Path) -> dict[str, float]:
        an = analyze([str(path)])
        out: dict[str, float] = {}
        for m in an.timeline.metrics:
            if m.source == "nvml" and "mem_used_mib" in m.values:
                out[m.gpu] = max(out.get(m.gpu, 0.0), m.values["mem_used_mib"])
        return out

    assert peaks(tmp_path / "small.tar.gz") == peaks(src)
    assert analyze([str(tmp_path / "small.tar.gz")]).findings[0].signature == "memory-margin"


def test_downsample_writes_keyframes_with_full_state() -> None:
    header = {"format": "gpu-forensics-nvml", "version": 1, "columns": {"mu": "mem_used_mib"}, "interval_s": 0.1,
              "gpus": [{"i": 0, "pci": "0000:01:00.0"}]}
    lines = [json.dumps(header), json.dumps({"t": 1000, "k": 1, "g": {"0": {"mu": 10, "pw": 50.0, "cr": 1}}})]
    lines += [json.dumps({"t": 1000 + 100 * i, "g": {"0": {"mu": 10 + i}}}) for i in range(1, 9)]
    lines += [json.dumps({"t": 2000, "g": {"0": {"cr": 4}}})]  # a clock-event reason change: always kept
    out = [json.loads(x) for x in downsample_nvml(("\n".join(lines) + "\n").encode(), 4).splitlines()]
    assert out[0]["interval_s"] == 0.4 and out[0]["downsampled"] == 4
    ticks = out[1:]
    assert all(t["k"] == 1 and set(t["g"]["0"]) == {"mu", "pw", "cr"} for t in ticks)
    assert [t["g"]["0"]["mu"] for t in ticks][:2] == [13, 17]
    assert ticks[-1]["t"] == 2000 and ticks[-1]["g"]["0"]["cr"] == 4


def test_bad_inputs_are_one_line_and_a_non_zero_exit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pack", str(tmp_path / "missing"), "-o", str(tmp_path / "x.tar.gz")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err
    args = ["pack", str(RECORDED / "healthy" / "bundle"), "-o", str(tmp_path / "x.tgz"), "--max-size", "lots"]
    assert main(args) == 2
    assert "--max-size" in capsys.readouterr().err
    assert parse_size("20M") == 20 << 20 and parse_size("1.5g") == int(1.5 * (1 << 30)) and parse_size("512") == 512


def test_a_packed_archive_holds_only_the_case_directory(tmp_path: Path) -> None:
    out = tmp_path / "case.tar.gz"
    pack([str(RECORDED / "healthy" / "bundle"), str(RECORDED / "healthy-h200" / "bundle")], out)
    with tarfile.open(out, "r:gz") as tar:
        names = tar.getnames()
    assert all(n.startswith("case/") and ".." not in n for n in names)
    assert "case/bundle/manifest.json" in names and "case/healthy-h200/bundle/manifest.json" in names
    assert not any(n.endswith(".tmp") for n in names)
    assert io.BytesIO(out.read_bytes()).read(2) == b"\x1f\x8b"
