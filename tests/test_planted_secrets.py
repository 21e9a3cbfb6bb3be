"""Every secret kind, planted everywhere a run can put it, is absent from what leaves: ``pack`` (every member
unpacked, nested archives and member names too, in UTF-8 and UTF-16), ``analyze`` (text and JSON) and
``report`` (Markdown and HTML).

The recorder is a real subprocess; the secrets reach it in its environment and on the command line, and
the child prints them as ``NAME=value``, bare, inside a Python repr and wrapped onto two lines. Values that
have no shape (a W&B key is 40 hex digits) are found because the recorder classed them as secret: the
bundle keeps only keyed hashes of them (``host/secret-values.json``)."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import zipfile
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from recorder_helpers import bundle, run

from forensics.cli import main
from forensics.secret_values import KNOWN

WANDB = "4f3e9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzQ8v2Lm4Pn"
SERVICE = "svc-Zq81mXp2Lk7Rt5Wv"
DB_PASS = "Tr0ub4dor&3-horse"
HF = "hf_" + "Q7pX2mN9vB4kL8sD3fG6hJ1wE5rT0yUa"
URL_PW = "pa/ss@w0rd-91"
ARG_TOKEN = "tokArg-7d1e2f3a4b5c6d7e"
ARG_KEY = "keyArg-0a9b8c7d6e5f4a3b"
HYDRA_KEY = "hydraKey-55aa66bb77cc88dd"
PEM_BODY = "MIIEowIBAAKCAQEAz1x2y3w4v5u6t7s8r9q0p1o2n3m4l5k6j7i8h9g0f1e2d3c4"
XAPP = "xapp-1-A0123456789-1234567890123-abcdef0123456789abcdef0123456789"
SLACK_HOOK = "T01234567/B0123456789/abcdefghijklmnopqrstuvwx"
PYPI = "pypi-AgEIcHlwaS5vcmcCJGQ1ZDk1MjVhLWI5YzQtNDc5Zi1hMmE3LTFkNmJkMTBhZmQ4MwACKlsz"
NPM = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GOOGLE = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
STRIPE = "sk_live_" + "51H8xYz2eZvKYlo2C0123456789abcd"
AZURE = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
TWO_WORDS = "correct horse staple"
MYSQL = "Mysq1Pass-4421"
CURL = "curlPass-99x8y7"
FILE_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"

SECRETS = [WANDB, AWS_SECRET, SERVICE, DB_PASS, HF, URL_PW, ARG_TOKEN, ARG_KEY, HYDRA_KEY, PEM_BODY, XAPP,
           SLACK_HOOK, PYPI, NPM, GOOGLE, STRIPE, AZURE, TWO_WORDS, MYSQL, CURL, FILE_TOKEN]

CHILD = r'''
import argparse, json, sys
sys.argv[1:] = json.load(open(sys.argv[1]))  # the values, from a file outside the bundle
ns = argparse.Namespace(wandb_key=sys.argv[1], lr=0.1)
w = sys.argv[1]
print(f"wandb key {w}")
print(ns)
print(f"WANDB_API_KEY={w}")
print(f"aws {sys.argv[2]} and service {sys.argv[3]}", file=sys.stderr)
print(f"db {sys.argv[4]} token {sys.argv[5]}")
print(f"wrapped: {w[:17]}\n{w[17:]}")
print("-----BEGIN RSA PRIVATE KEY-----\n" + sys.argv[6] + "\nAbCdEf0123456789\n-----END RSA PRIVATE KEY-----")
print(f"slack {sys.argv[7]} https://hooks.slack.com/services/{sys.argv[8]}")
print(f"publish {sys.argv[9]} npm {sys.argv[10]} maps {sys.argv[11]} pay {sys.argv[12]}")
print(f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={sys.argv[13]};EndpointSuffix=x")
print(f'password: "{sys.argv[14]}"')
print(f"DB_PASS={sys.argv[4]}")
print(f"mysql -u root -p{sys.argv[15]} db")
print(f"curl -u alice:{sys.argv[16]} https://api.internal.example/x")
print(f"pushing to https://bob:{sys.argv[17]}@git.corp.internal/r.git")
print("RuntimeError: CUDA error: an illegal memory access was encountered", file=sys.stderr)
sys.exit(1)
'''


def _everything(name: str, raw: bytes, depth: int = 0) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of a member and of everything nested in it (gzip, zip, tar)."""
    out = [(name, raw)]
    if depth > 4:
        return out
    if raw[:2] == b"\x1f\x8b":
        out += _everything(name + "!gunzip", gzip.decompress(raw), depth + 1)
    elif raw[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            for info in z.infolist():
                out += _everything(f"{name}!{info.filename}", z.read(info), depth + 1)
    elif len(raw) > 262 and raw[257:262] == b"ustar":
        with tarfile.open(fileobj=io.BytesIO(raw)) as t:
            for m in t:
                fh = t.extractfile(m) if m.isfile() else None
                out += _everything(f"{name}!{m.name}", fh.read() if fh else b"", depth + 1)
    return out


def _leaks(blob: bytes, where: str) -> list[str]:
    found = []
    for s in SECRETS:
        for enc in ("utf-8", "utf-16-le", "utf-16-be"):
            if s.encode(enc) in blob:
                found.append(f"{s!r} ({enc}) in {where}")
    return found


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FORENSICS_SECRET_KEY_FILE", str(tmp_path / "key"))
    KNOWN.clear()
    args = [WANDB, AWS_SECRET, SERVICE, DB_PASS, ARG_TOKEN, PEM_BODY, XAPP, SLACK_HOOK, PYPI, NPM, GOOGLE, STRIPE,
            AZURE, TWO_WORDS, MYSQL, CURL, URL_PW]
    (tmp_path / "values.json").write_text(json.dumps(args))
    res = run(tmp_path / "out", "python3", "-c", CHILD, str(tmp_path / "values.json"), "--token", ARG_TOKEN,
              f"--api-key={ARG_KEY}", f"wandb.api_key={HYDRA_KEY}", FORENSICS_SECRET_KEY_FILE=str(tmp_path / "key"),
              WANDB_API_KEY=WANDB, AWS_SECRET_ACCESS_KEY=AWS_SECRET, MY_SERVICE_APIKEY=SERVICE, DB_PASS=DB_PASS,
              HF_TOKEN=HF, PIP_INDEX_URL=f"https://alice:{URL_PW}@pypi.corp.example/simple")
    assert res.returncode == 1
    b = bundle(tmp_path / "out")
    assert (b / "host" / "secret-values.json").exists()
    values = (b / "host" / "secret-values.json").read_bytes()
    assert not _leaks(values, "secret-values.json")  # keyed hashes only
    host = b / "host"
    with (host / "pip-freeze.txt").open("a") as fh:
        fh.write(f"private @ git+https://{FILE_TOKEN}@github.com/o/r.git\nwandb-key-pkg=={WANDB}\n")
    (host / "nvidia-smi-q.xml").write_text(f"<nvidia_smi_log><note>token {HF} key {WANDB}</note></nvidia_smi_log>\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "utf16.log").write_bytes(f"wandb {WANDB}\r\nsk {STRIPE}\r\n".encode("utf-16"))
    (logs / f"run-{FILE_TOKEN}.log").write_text("a file whose name holds a token\n")
    (logs / "nested.gz").write_bytes(gzip.compress(gzip.compress(f"inner {WANDB} {HF}\n".encode())))
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as z:
        z.writestr(f"member-{NPM}.txt", f"key {GOOGLE} db {DB_PASS}\n")
        z.writestr("deep.gz", gzip.compress(f"aws {AWS_SECRET}\n".encode()))
    (logs / "bundle.zip").write_bytes(zbuf.getvalue())
    (logs / "dump.bin").write_bytes(b"\x80\x04\x95\x00\x00" + f"tok {WANDB}".encode("utf-16-le") + b"\x00\x01"
                                    + SERVICE.encode() + b"\x00")
    return tmp_path


def test_pack_leaves_no_planted_secret_anywhere(recorded: Path) -> None:
    out = recorded / "case.tar.gz"
    files = [str(bundle(recorded / "out")), *map(str, sorted((recorded / "logs").iterdir()))]
    assert main(["pack", *files, "-o", str(out)]) == 0
    leaks: list[str] = []
    names = []
    with tarfile.open(out) as tar:
        for m in tar:
            names.append(m.name)
            fh = tar.extractfile(m) if m.isfile() else None
            for name, data in _everything(m.name, fh.read() if fh else b""):
                leaks += _leaks(name.encode(), f"the name {name}")
                leaks += _leaks(data, name)
    assert not leaks, "\n".join(leaks)
    assert not any(n.endswith("secret-values.json") for n in names)
    with tarfile.open(out) as tar:
        fh = tar.extractfile(next(n for n in names if n.endswith("REDACTIONS.txt")))
        assert fh is not None
        redactions = fh.read().decode()
    assert "known-value" in redactions and "private-key" in redactions


@pytest.mark.parametrize("args", [["analyze"], ["analyze", "--format", "json"], ["analyze", "--all"]])
def test_analyze_shows_no_planted_secret(recorded: Path, args: list[str]) -> None:
    buf = io.StringIO()
    with redirect_stdout(buf):
        main([*args, str(bundle(recorded / "out"))])
    leaks = _leaks(buf.getvalue().encode(), " ".join(args))
    assert not leaks, "\n".join(leaks)
    if "json" in args:
        json.loads(buf.getvalue())


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_report_shows_no_planted_secret(recorded: Path, fmt: str) -> None:
    out = recorded / f"report.{fmt}"
    assert main(["report", str(bundle(recorded / "out")), "-o", str(out)]) == 0
    leaks = _leaks(out.read_bytes(), out.name)
    assert not leaks, "\n".join(leaks)
