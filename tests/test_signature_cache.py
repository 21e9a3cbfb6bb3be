"""The per-user cache of compiled signatures (``forensics.match.loader``): used when valid, never
trusted when stale, foreign or broken."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from forensics import user_cache
from forensics.match import loader
from forensics.match.loader import load_signatures, shipped_paths


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh process, as far as the loader knows, with its cache in a temporary directory."""
    directory = tmp_path / "cache"
    monkeypatch.setenv(user_cache.CACHE_ENV, str(directory))
    monkeypatch.setattr(loader, "_loaded", {})
    return directory


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record which files are compiled from TOML from now on."""
    compiled: list[str] = []
    real: Callable[[str, int, int], loader.Signature] = loader._load_cached.__wrapped__

    def compile_file(path: str, mtime_ns: int, size: int) -> loader.Signature:
        compiled.append(Path(path).name)
        return real(path, mtime_ns, size)

    monkeypatch.setattr(loader, "_load_cached", compile_file)
    return compiled


def _user_signature(directory: Path, title: str) -> Path:
    """A copy of a shipped signature under a new id, as a user would write one."""
    source = next(p for p in shipped_paths() if p.stem == "torch-cuda-oom")
    lines = source.read_text(encoding="utf-8").splitlines()
    lines = [('id = "my-oom"' if line.startswith("id = ") else f'title = "{title}"' if line.startswith("title = ")
              else line) for line in lines]
    text = "\n".join(lines) + "\n"
    directory.mkdir(exist_ok=True)
    path = directory / "my-oom.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_second_process_reads_the_cache_instead_of_compiling(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = load_signatures()
    files = list(cache.glob("signatures-*.pickle"))
    assert len(files) == 1 and files[0].stat().st_mode & 0o077 == 0
    monkeypatch.setattr(loader, "_loaded", {})  # a new process
    compiled = _counting(monkeypatch)
    second = load_signatures()
    assert compiled == []
    assert [s.id for s in second] == [s.id for s in first]
    patterns = [(e.regex_text, e.pattern.pattern) for s in second for e in s.evidence if e.pattern is not None]
    assert patterns and all(text == compiled_text for text, compiled_text in patterns)


def test_a_changed_user_file_is_compiled_again(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "mine"
    _user_signature(user, "Mine, first")
    assert {s.id: s.title for s in load_signatures([user])}["my-oom"] == "Mine, first"
    monkeypatch.setattr(loader, "_loaded", {})
    _user_signature(user, "Mine, second version")  # another size: another key
    compiled = _counting(monkeypatch)
    assert {s.id: s.title for s in load_signatures([user])}["my-oom"] == "Mine, second version"
    assert compiled == ["my-oom.toml"]


@pytest.mark.parametrize("spoil", ["writable by others", "garbage"])
def test_a_suspect_or_broken_cache_is_ignored(cache: Path, monkeypatch: pytest.MonkeyPatch, spoil: str) -> None:
    load_signatures()
    (path,) = cache.glob("signatures-*.pickle")
    if spoil == "garbage":
        path.write_bytes(b"\x80\x05not a pickle at all")
    else:
        path.chmod(0o666)
    monkeypatch.setattr(loader, "_loaded", {})
    compiled = _counting(monkeypatch)
    assert len(load_signatures()) == len(shipped_paths())
    assert len(compiled) == len(shipped_paths())


def test_an_empty_setting_turns_the_cache_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(user_cache.CACHE_ENV, "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(loader, "_loaded", {})
    assert load_signatures()
    assert user_cache.cache_dir() is None and not any(tmp_path.iterdir())
