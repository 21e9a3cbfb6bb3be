"""Does a text hold any of many literals? One compiled matcher per set of literals, cached.

With the ``hyperscan`` package, one multi-literal database (thousands of literals cost no more per
text than a few); without it, one regular-expression alternation. Used where each candidate line of
a log is asked whether it holds one of the signatures' or catalogues' anchors.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["any_of", "hyperscan_database", "scratch_for"]

_CACHE: dict[tuple[str, ...], Callable[[str], bool]] = {}
_BY_INPUT: dict[tuple[str | bytes, ...], Callable[[str], bool]] = {}  # the tuple given -> its matcher
_THREAD = threading.local()


def scratch_for(db: object) -> object:
    """The scratch space to scan ``db`` with in this thread. A cached database is shared by every
    thread, its own scratch must not be: two scans on one scratch at once fail (``ScratchInUseError``),
    so two analyses in two threads would each lose hits. The main thread uses the database's own."""
    if threading.current_thread() is threading.main_thread():
        return db.scratch  # type: ignore[attr-defined]
    kept: dict[int, tuple[object, object]] = _THREAD.__dict__.setdefault("scratch", {})
    got = kept.get(id(db))
    if got is None or got[0] is not db:
        import hyperscan

        if len(kept) > 16:
            kept.clear()
        got = kept[id(db)] = (db, hyperscan.Scratch(db))  # type: ignore[arg-type]
    return got[1]

_DATABASES: dict[tuple[tuple[str, ...], bool], object] = {}


def _expression(word: str) -> bytes:
    return re.escape(word).encode("utf-8")  # Hyperscan reads PCRE: a backslash before any non-letter is literal


def hyperscan_database(words: tuple[str, ...], caseless: bool = False) -> object | None:
    """A compiled Hyperscan block-mode database of ``words`` (pattern id = index), or ``None`` without the
    package. Compiling thousands of literals takes a few hundred ms, so the compiled form is kept in memory
    and in the per-user cache (forensics/user_cache.py)."""
    key = (words, caseless)
    db = _DATABASES.get(key)
    if db is not None:
        return db
    try:
        import hyperscan
    except ImportError:
        return None
    from forensics import user_cache

    path = user_cache.cache_path("hyperscan", [str(getattr(hyperscan, "__version__", "")), str(caseless), *words])
    blob = user_cache.read(path)
    try:
        if isinstance(blob, bytes):
            db = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
            db.scratch = hyperscan.Scratch(db)
        else:
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            flag = hyperscan.HS_FLAG_CASELESS if caseless else 0
            db.compile(expressions=[_expression(w) for w in words], ids=list(range(len(words))),
                       elements=len(words), flags=[flag] * len(words))
            user_cache.write(path, hyperscan.dumpb(db))
    except Exception:  # an engine problem must never cost the analysis: callers fall back
        return None
    if len(_DATABASES) > 8:
        _DATABASES.clear()
    _DATABASES[key] = db
    return db


def _never(text: str) -> bool:
    return False


def _hyperscan(words: tuple[str, ...]) -> Callable[[str], bool] | None:
    db: Any = hyperscan_database(words)
    if db is None:
        return None

    def stop(*_: object) -> bool:
        return True  # the first literal found answers the question: end the scan

    import hyperscan

    def holds(text: str) -> bool:
        try:
            db.scan(text.encode("utf-8", "replace"), match_event_handler=stop, scratch=scratch_for(db))
        except hyperscan.ScanTerminated:  # stop() ended it, so a literal is there
            return True
        return False

    return holds


def any_of(literals: Iterable[str | bytes]) -> Callable[[str], bool]:
    """``holds(text)``: whether ``text`` holds one of ``literals`` (case-sensitive)."""
    if isinstance(literals, tuple) and literals in _BY_INPUT:  # the same set again (one per parse of a file)
        return _BY_INPUT[literals]
    words = tuple(sorted({w.decode("utf-8", "replace") if isinstance(w, bytes) else w for w in literals} - {""},
                         key=lambda w: (-len(w), w)))  # one order for one set: the cache key
    fn = _CACHE.get(words)
    if fn is not None:
        return fn
    if not words:
        fn = _never
    else:
        fn = _hyperscan(words)
        if fn is None:
            search = re.compile("|".join(re.escape(w) for w in words)).search

            def fn(text: str) -> bool:
                return search(text) is not None
    if len(_CACHE) > 8:
        _CACHE.clear()
        _BY_INPUT.clear()
    _CACHE[words] = fn
    if isinstance(literals, tuple):
        _BY_INPUT[literals] = fn
    return fn
