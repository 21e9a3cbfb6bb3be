"""One file must not stop a command (issue 24): a bundle whose ``manifest.json`` is a link to
``/dev/zero`` or a FIFO, a ``.tar.gz`` bundle that expands 1500:1, manifests and host files of the
wrong shape (8 MB of ``[``, JSON nested 100,000 deep, a ``status`` that is a number, a 1,000-digit
``end``), a ``[rank0]:`` line over 1 MiB. Each is the reproducer measured on ``main`` (b3cf0ce: killed
at 2-4 GiB, waiting for ever, a traceback), run as the real CLI under a time and memory cap."""

from __future__ import annotations

import gzip
import io
import json
import re
import tarfile
from pathlib import Path

import pytest
from hostile import bundle, cli, edit_manifest, fine, replace_with_fifo, replace_with_link

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("make", ["dev-zero", "fifo"])
@pytest.mark.parametrize("command", ["analyze", "report", "diff"])
def test_a_manifest_that_is_dev_zero_or_a_fifo_stops_nothing(tmp_path: Path, make: str, command: str) -> None:
    good = bundle(tmp_path, "good")
    bad = bundle(tmp_path, "bad")
    if make == "fifo":
        replace_with_fifo(bad / "manifest.json")
    else:
        replace_with_link(bad / "manifest.json", "/dev/zero")
    args = [command, str(bad)] if command != "diff" else ["diff", str(good), str(bad)]
    ran = cli(*args)
    assert fine(ran), (ran.code, ran.err[-2000:])
    assert "not a regular file" in ran.err or command != "analyze" or ran.code in (0, 1, 3)


def test_a_fifo_beside_logs_in_a_folder_is_counted_not_read(tmp_path: Path) -> None:
    (tmp_path / "train.log").write_text("step 1 loss 2.0\n")
    replace_fifo = tmp_path / "pipe.log"
    import os

    os.mkfifo(replace_fifo)
    ran = cli("analyze", str(tmp_path))
    assert fine(ran, (0,)), ran.err
    assert "1 FIFO" in ran.out


def _tar_gz(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _bomb_bundle_archive(tmp: Path) -> Path:
    """A packed bundle whose one log member is 3 GiB of zeros: a 3 MB ``.tar.gz`` (1000:1)."""
    b = bundle(tmp, "src")
    members = [(f"b/{p.relative_to(b).as_posix()}", p.read_bytes()) for p in sorted(b.rglob("*")) if p.is_file()]
    head = _tar_gz(members)  # the real bundle first, then the bomb member streamed after it
    path = tmp / "case.tar.gz"
    with gzip.open(path, "wb", compresslevel=9) as gz:
        gz.write(gzip.decompress(head)[:-1024])  # the real members without the end-of-archive blocks
        info = tarfile.TarInfo("b/zeros.log")
        info.size = 3 << 30
        gz.write(info.tobuf())
        zeros = bytes(16 << 20)
        for _ in range(info.size // len(zeros)):
            gz.write(zeros)
        gz.write(bytes(1024))
    return path


def test_report_and_diff_read_a_bomb_archive_within_memory(tmp_path: Path) -> None:
    archive = _bomb_bundle_archive(tmp_path)
    assert archive.stat().st_size < 8 << 20
    good = bundle(tmp_path, "good")
    for args in (["report", str(archive)], ["diff", str(good), str(archive)]):
        ran = cli(*args)  # under the 3 GiB cap (was 3.1 GiB RSS for a 2 MB archive)
        assert fine(ran), (args, ran.code, ran.err[-2000:])
        assert "compression bomb" in ran.out + ran.err


def _hostile(tmp: Path, what: str) -> Path:
    b = bundle(tmp, what)
    if what == "brackets":
        (b / "manifest.json").write_bytes(b"[" * (8 << 20))
    elif what == "deep-host-json":
        for name in ("gpus.json", "env.json", "versions.json", "system.json"):
            (b / "host" / name).write_bytes(b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
    elif what == "typed-status":
        edit_manifest(b, status=3, host=["x"], start=7, end={"a": 1}, exit_code="x", signal_name=9, command="cmd")
    elif what == "inf-end":
        raw = (b / "manifest.json").read_text()
        data = json.loads(raw)
        data["end"] = "@@END@@"
        (b / "manifest.json").write_text(json.dumps(data).replace('"@@END@@"', "1e999"))
        xml = (b / "host" / "nvidia-smi-q.xml").read_text()
        (b / "host" / "nvidia-smi-q.xml").write_text(re.sub(r"<(current|max)_link_width>[^<]*<",
                                                             lambda m: f"<{m[1]}_link_width>{'9' * 1000}x<", xml))
    elif what == "long-rank-line":
        with (b / "stderr.log").open("ab") as fh:
            fh.write(b"[rank0]: " + b"x" * ((1 << 20) + 10) + b"\n[rank0]: RuntimeError: CUDA error: an illegal "
                     b"memory access was encountered\n")
    return b


@pytest.mark.parametrize("what", ["brackets", "deep-host-json", "typed-status", "inf-end", "long-rank-line"])
def test_odd_manifests_and_host_files_give_no_traceback(tmp_path: Path, what: str) -> None:
    b = _hostile(tmp_path, what)
    good = bundle(tmp_path, "good")
    for args in (["analyze", str(b)], ["analyze", "--format", "json", str(b)], ["report", str(b)],
                 ["report", "--format", "json", str(b)], ["report", "--format", "html", str(b)],
                 ["diff", str(good), str(b)], ["diff", "--format", "json", str(good), str(b)],
                 ["diff", "--format", "md", str(good), str(b)]):
        ran = cli(*args)
        assert fine(ran), (args, ran.code, ran.err[-3000:])
        if "json" in args:
            json.loads(ran.out, parse_constant=_refuse)  # strict: no NaN, no Infinity


def _refuse(name: str) -> None:
    raise AssertionError(f"{name} in JSON output")


def test_json_says_where_a_number_was_not_finite(tmp_path: Path) -> None:
    """``nvidia-smi -q -x`` with a 1,000-digit link width (a float of it is inf): null, and said where."""
    b = _hostile(tmp_path, "inf-end")
    for args in (["analyze", "--format", "json"], ["report", "--format", "json"]):
        ran = cli(*args, str(b / "host" / "nvidia-smi-q.xml"))
        data = json.loads(ran.out, parse_constant=_refuse)
        assert any("not a finite number, written as null: topology.gpus[0].width" in w for w in data["warnings"])
