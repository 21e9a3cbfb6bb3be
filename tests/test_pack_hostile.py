"""``forensics pack`` on hostile bundles (issue 23): a gzip bomb member is left out with a line, not the
whole pack and not 6 GiB of memory; a member over its cap likewise; a crash-cut ``.gz`` is kept as far
as it decompresses, and said; a hard link to a file outside the bundle is refused; links, FIFOs and
devices inside a bundle are never read; member names hold no backslash, newline or control."""

from __future__ import annotations

import gzip
import os
import tarfile
from pathlib import Path

import pytest
from bombs import gzip_of_zeros
from hostile import bundle, cli, fine, replace_with_fifo, replace_with_link

from forensics.postmortem.pack import member_name, pack


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive, "r:gz") as tar:
        return {m.name: (tar.extractfile(m) or open(os.devnull, "rb")).read() for m in tar.getmembers()}


@pytest.mark.slow
def test_a_gzip_bomb_member_is_left_out_with_a_line(tmp_path: Path) -> None:
    b = bundle(tmp_path, "b")
    (b / "nvml.1.jsonl.gz").write_bytes(gzip_of_zeros(1024))  # 1 MB of gzip, 1 GiB of zeros
    out = tmp_path / "case.tar.gz"
    ran = cli("pack", str(b), "-o", str(out))  # under the 3 GiB cap (was killed at 2 GiB; 2 MB: 6 GiB)
    assert fine(ran, (0,)), ran.err
    assert "nvml.1.jsonl.gz: left out" in ran.err and "compression bomb" in ran.err
    members = _members(out)
    assert "case/b/nvml.1.jsonl.gz" not in members and "case/b/manifest.json" in members
    assert b"nvml.1.jsonl.gz: left out" in members["case/REDACTIONS.txt"]


def test_a_truncated_gzip_segment_is_kept_as_far_as_it_decompresses(tmp_path: Path) -> None:
    b = bundle(tmp_path, "b")
    lines = b"".join(f"line {i} of the rotated log\n".encode() for i in range(20_000))
    whole = gzip.compress(lines)
    (b / "stdout.log.1.gz").write_bytes(whole[: len(whole) // 2])  # cut by a crash
    result = pack([str(b)], tmp_path / "case.tar.gz")
    kept = gzip.decompress(_members(tmp_path / "case.tar.gz")["case/b/stdout.log.1.gz"])
    assert 0 < len(kept) < len(lines) and lines.startswith(kept)
    assert any("stdout.log.1.gz" in n and "truncated" in n for n in result.notes), result.notes
    assert "truncated" in result.summary()


def test_a_hard_link_to_a_file_outside_the_bundle_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "id_rsa"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY----- outside\n")
    b = bundle(tmp_path, "b")
    os.link(secret, b / "notes.txt")
    result = pack([str(b)], tmp_path / "case.tar.gz")
    members = _members(tmp_path / "case.tar.gz")
    assert "case/b/notes.txt" not in members
    assert not any(b"PRIVATE KEY" in data for data in members.values())
    assert any("notes.txt: left out: a hard link to a file outside" in n for n in result.notes)


def test_two_links_to_one_file_inside_the_bundle_are_both_packed(tmp_path: Path) -> None:
    b = bundle(tmp_path, "b")
    (b / "a.txt").write_text("inside\n")
    os.link(b / "a.txt", b / "b.txt")
    pack([str(b)], tmp_path / "case.tar.gz")
    members = _members(tmp_path / "case.tar.gz")
    assert members["case/b/a.txt"] == members["case/b/b.txt"] == b"inside\n"


def test_links_fifos_and_devices_inside_a_bundle_are_never_read(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("outside content\n")
    b = bundle(tmp_path, "b")
    replace_with_link(b / "stdout.log", str(tmp_path / "outside.txt"))
    replace_with_link(b / "kmsg.log", "/dev/zero")
    replace_with_fifo(b / "recorder.log")
    pack([str(b)], tmp_path / "case.tar.gz")  # would hang on the FIFO or fill memory from /dev/zero
    members = _members(tmp_path / "case.tar.gz")
    assert "case/b/stdout.log" not in members and "case/b/kmsg.log" not in members
    assert "case/b/recorder.log" not in members
    assert not any(b"outside content" in data for data in members.values())


def test_member_names_are_normalised(tmp_path: Path) -> None:
    b = bundle(tmp_path, "b")
    for name in ("a\\..\\..\\evil.log", "line\nbreak.log", "ctl\x1b[2J.log", "bidi\u202egol.txt"):
        (b / name).write_text("x\n")
    pack([str(b)], tmp_path / "case.tar.gz")
    names = list(_members(tmp_path / "case.tar.gz"))
    assert all(not any(c in n for c in "\\\n\x1b\u202e") for n in names), names
    assert "case/b/a_.._.._evil.log" in names and "case/b/line_break.log" in names
    assert member_name("..") == "__" and member_name(".") == "_" and member_name("") == "_"


@pytest.mark.slow
def test_a_member_over_its_cap_is_left_out_not_the_whole_pack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from forensics.postmortem import pack as pack_module

    monkeypatch.setattr(pack_module, "_MAX_FILE", 1 << 20)  # 1 MiB instead of 1 GiB: the same path, quickly
    b = bundle(tmp_path, "b")
    (b / "big.log").write_bytes(b"x" * (2 << 20))
    result = pack([str(b)], tmp_path / "case.tar.gz")
    assert any("big.log: left out: larger than 1 MiB" in n for n in result.notes)
    assert "case/b/manifest.json" in _members(tmp_path / "case.tar.gz")


def test_a_lone_surrogate_and_a_name_that_is_not_utf8_pack(tmp_path: Path) -> None:
    """Found by fuzzing: an env.json holding ``"\\ud800"`` beside a secret (rewritten after redaction)
    was a UnicodeEncodeError; a file name of bytes that are not UTF-8 could not be listed."""
    b = bundle(tmp_path, "b")
    (b / "host" / "env.json").write_text('{"HF_TOKEN": "hf_Q7pX2mN9vB4kL8sD3fG6hJ1wE5rT0yU", "X": "\\ud800"}')
    os.close(os.open(os.fsencode(b) + b"/bad\xff.log", os.O_CREAT | os.O_WRONLY, 0o644))
    result = pack([str(b)], tmp_path / "case.tar.gz")
    members = _members(tmp_path / "case.tar.gz")
    assert "case/b/bad_.log" in members and b"hf_Q7pX" not in members["case/b/host/env.json"]
    assert result.files == len(members)
