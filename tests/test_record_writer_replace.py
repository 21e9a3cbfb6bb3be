"""The manifest's atomic replace on Windows: a reader holding the old file open makes the rename fail
for as long as it holds it; the writer tries again for about a second instead of losing the manifest."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from forensics.record import writer


def test_a_held_target_is_replaced_once_the_reader_lets_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.replace
    calls = []

    def held_twice(src: object, dst: object) -> None:
        calls.append(dst)
        if len(calls) <= 2:
            raise PermissionError(13, "The process cannot access the file because it is being used")
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(writer.sys, "platform", "win32")
    monkeypatch.setattr(writer.os, "replace", held_twice)
    monkeypatch.setattr(writer.time, "sleep", lambda s: None)
    path = tmp_path / "manifest.json"
    writer.atomic_write_json(path, {"status": "running"})
    assert len(calls) == 3 and json.loads(path.read_text()) == {"status": "running"}


def test_a_target_held_for_good_is_reported_not_hidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def always(src: object, dst: object) -> None:
        raise PermissionError(13, "in use")

    monkeypatch.setattr(writer.sys, "platform", "win32")
    monkeypatch.setattr(writer.os, "replace", always)
    monkeypatch.setattr(writer.time, "sleep", lambda s: None)
    with pytest.raises(PermissionError):
        writer.atomic_write_json(tmp_path / "manifest.json", {"status": "running"})


def test_on_posix_a_permission_error_is_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def denied(src: object, dst: object) -> None:
        calls.append(dst)
        raise PermissionError(13, "denied")

    monkeypatch.setattr(writer.sys, "platform", "linux")
    monkeypatch.setattr(writer.os, "replace", denied)
    with pytest.raises(PermissionError):
        writer.atomic_write_json(tmp_path / "manifest.json", {})
    assert len(calls) == 1
