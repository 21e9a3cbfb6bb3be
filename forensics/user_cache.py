"""The per-user cache of things that cost more to build than to read: compiled signatures, the parsed
catalogues, compiled multi-literal databases.

One directory (``$FORENSICS_CACHE_DIR``; empty: no cache; else ``$XDG_CACHE_HOME`` or ``~/.cache``, on
Windows ``%LOCALAPPDATA%``, ``/gpu-forensics``). A file is read only when it is owned by the user and not
writable by others (a pickle runs code when read), and replaced atomically; a file that cannot be read or
written is no error: the caller builds the thing instead.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir", "cache_path", "file_stamps", "read", "write"]

CACHE_ENV = "FORENSICS_CACHE_DIR"


def cache_dir() -> Path | None:
    """Where cached things are kept (``None``: nowhere)."""
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("LOCALAPPDATA") if os.name == "nt" else os.environ.get("XDG_CACHE_HOME")
    return Path(base or Path.home() / ".cache") / "gpu-forensics"


def file_stamps(paths: Iterable[str | Path]) -> list[str]:
    """``path:mtime_ns:size`` of each file, for a cache key that changes when any of them does."""
    out = []
    for p in paths:
        st = os.stat(p)
        out.append(f"{p}:{st.st_mtime_ns}:{st.st_size}")
    return out


def cache_path(kind: str, stamp: Iterable[str]) -> Path | None:
    """The file of one cached ``kind`` whose content depends on ``stamp`` (versions, file stamps …)."""
    directory = cache_dir()
    if directory is None:
        return None
    digest = hashlib.blake2b("\0".join(stamp).encode("utf-8", "replace"), digest_size=12).hexdigest()
    return directory / f"{kind}-{digest}.pickle"


def read(path: Path | None) -> object | None:
    """The cached object, or ``None`` when missing, foreign, writable by others or unreadable."""
    if path is None:
        return None
    try:
        with path.open("rb") as fh:
            st = os.fstat(fh.fileno())
            if (hasattr(os, "getuid") and st.st_uid != os.getuid()) or st.st_mode & 0o022:
                return None
            return pickle.load(fh)
    except Exception:  # missing, truncated, or written by code that no longer matches: build instead
        return None


#: Files kept per kind (other versions of the code or data that may still be in use side by side).
KEEP_PER_KIND = 4


def _prune(path: Path) -> None:
    kind = path.stem.rsplit("-", 1)[0]
    siblings = sorted(path.parent.glob(f"{kind}-*.pickle"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in siblings[KEEP_PER_KIND:]:
        old.unlink(missing_ok=True)


def write(path: Path | None, obj: object) -> None:
    """Replace the cache file atomically (and drop the oldest of its kind beyond :data:`KEEP_PER_KIND`);
    a cache that cannot be written is no error."""
    if path is None:
        return
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        _prune(path)
    except Exception:
        pass
