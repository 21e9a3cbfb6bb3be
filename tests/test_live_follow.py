"""forensics/live/follow.py: growing files read from offsets, rotation both ways, new files found."""

from __future__ import annotations

import os
from pathlib import Path

from forensics.live.follow import HOLD_S, FollowedFile, Tree


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def test_complete_lines_only_and_offsets(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"one\ntw")
    f = FollowedFile(log)
    assert f.read(now=0.0) == (0, b"one\n")
    _append(log, b"o\nthree\n")
    assert f.read(now=0.1) == (4, b"two\nthree\n")
    assert f.read(now=0.2) == (14, b"")
    assert f.position == 14


def test_unfinished_last_line_is_handed_out_after_a_while(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"prompt> ")
    f = FollowedFile(log)
    assert f.read(now=0.0) == (0, b"")
    assert f.read(now=HOLD_S + 0.1) == (0, b"prompt> ")
    _append(log, b"answer\n")
    assert f.read(now=HOLD_S + 0.2) == (8, b"answer\n")


def test_copytruncate_starts_again_from_the_top(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"a" * 50 + b"\n")
    f = FollowedFile(log)
    assert f.read()[1] == b"a" * 50 + b"\n"
    with open(log, "r+b") as fh:  # logrotate copytruncate: the copy is elsewhere, the file emptied
        fh.truncate(0)
    _append(log, b"after\n")
    assert f.read() == (0, b"after\n")
    assert f.truncated == 1 and f.generation == 1


def test_rename_rotation_reads_the_old_file_to_its_end_then_the_new_one(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"old 1\n")
    f = FollowedFile(log)
    assert f.read() == (0, b"old 1\n")
    _append(log, b"old 2\n")
    os.rename(log, tmp_path / "train.log.1")  # logrotate create: renamed, a new file made
    log.write_bytes(b"new 1\n")
    assert f.read() == (6, b"old 2\n")  # what the writer appended before the rename is not lost
    assert f.read() == (0, b"new 1\n")
    assert f.generation == 1


def test_a_file_that_does_not_exist_yet_is_waited_for(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    f = FollowedFile(log)
    assert f.read() == (0, b"") and f.gone
    log.write_bytes(b"here\n")
    assert f.read() == (0, b"here\n")


def test_tree_finds_new_files_in_a_directory(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(b"x\n")
    (tmp_path / ".hidden").write_bytes(b"x\n")
    tree = Tree([tmp_path], lambda root, rel: not rel.rsplit("/", 1)[-1].startswith("."))
    assert [f.path.name for f in tree.scan()] == ["a.log"]
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.log").write_bytes(b"y\n")
    assert sorted(f.path.name for f in tree.scan()) == ["a.log", "b.log"]


def test_from_end_skips_what_was_there(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(b"old\n")
    tree = Tree([tmp_path], lambda root, rel: True, from_end=True)
    f = tree.scan()[0]
    assert f.read()[1] == b""
    _append(tmp_path / "a.log", b"new\n")
    assert f.read() == (4, b"new\n")
