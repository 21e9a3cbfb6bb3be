"""Values the recorder classed as secret, found again wherever they appear — without ever storing them.

A token printed without its name (``wandb key 4f3e…``, ``Namespace(wandb_key='4f3e…')``) has no shape a
pattern could know; the recorder knows it is secret because it saw it under ``WANDB_API_KEY`` or after
``--token``. It writes ``host/secret-values.json``: for each such value its length and a **keyed hash**
(BLAKE2b with a per-user key kept outside the bundle, :func:`key`), plus the same for its *anchor* (its
longest run without white space, with the anchor's offset and character class). The bundle never holds
a value, and without the key its hashes cannot even be tested against guesses.

Finding them (:meth:`ValueSet.find`): for each anchor class and length, the runs of that class in the
text are cut into windows (at the run's ends and after punctuation inside it: a value glued after
``key=`` or in quotes), each window's hash is looked up, and a hit is confirmed by the whole value's hash
at the same place. The text is also searched with its line breaks taken out, so a value wrapped onto two
lines is found. Readers (``analyze``, ``report``, ``pack``) load the bundle's hashes into :data:`KNOWN`,
which :func:`forensics.secrets.find_secrets` consults; texts are decoded first (UTF-16, gzip, archives:
the callers), so one search serves every encoding.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets as _random
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FILE", "KEY_ENV", "KNOWN", "MIN_LEN", "ValueSet", "key", "learn_bundle", "write_values"]

FILE = "secret-values.json"  # under the bundle's host/
FORMAT = "gpu-forensics-secret-values"
KEY_ENV = "FORENSICS_SECRET_KEY_FILE"
MIN_LEN = 6  # shorter values are not tracked: they would be found everywhere
_DIGEST = 16
#: character classes of an anchor, narrowest first: (name, regex class, punctuation where a window may start)
_CLASSES: tuple[tuple[str, str], ...] = (
    ("hex", "0-9A-Fa-f"),
    ("alnum", "0-9A-Za-z"),
    ("token", "0-9A-Za-z_.~+/=-"),
    ("graph", "!-~"),
)
_PUNCT = frozenset("=:'\"([{,;<>/@_.-+~")


def _default_key_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "forensics" / "secret-key"


def key_path() -> Path:
    return Path(os.environ.get(KEY_ENV) or _default_key_path())


def key(create: bool = False) -> bytes | None:
    """This user's hashing key (32 random bytes, mode 0600), made on first use when ``create``."""
    path = key_path()
    with contextlib.suppress(OSError):
        data = path.read_bytes()
        if len(data) >= 16:
            return data
    if not create:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fresh = _random.token_bytes(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(fresh)
        return fresh
    except FileExistsError:  # another recorder made it at the same moment
        return key(create=False)
    except OSError:
        return None


def _h(k: bytes, text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), key=k[:64], digest_size=_DIGEST).hexdigest()


def key_id(k: bytes) -> str:
    return _h(k, "\0forensics key id")[:16]


def _class_of(text: str) -> str:
    for name, cls in _CLASSES:
        if re.fullmatch(f"[{cls}]+", text):
            return name
    return "graph"


def _anchor(value: str) -> tuple[int, str]:
    best = (0, "")
    for m in re.finditer(r"\S+", value):
        if len(m.group()) > len(best[1]):
            best = (m.start(), m.group())
    return best


def fingerprint(k: bytes, value: str) -> dict[str, Any] | None:
    """What the bundle keeps of one secret value (``None``: too short to track)."""
    value = value.strip()
    off, anchor = _anchor(value)
    if len(value) < MIN_LEN or len(anchor) < 4:
        return None
    return {"n": len(value), "h": _h(k, value), "a": [off, len(anchor), _class_of(anchor), _h(k, anchor)]}


def write_values(path: Path, values: Iterable[str]) -> int:
    """Write the fingerprints of ``values`` (the recorder); returns how many, 0 when there is no key."""
    k = key(create=True)
    if k is None:
        return 0
    seen: dict[str, dict[str, Any]] = {}
    for v in values:
        fp = fingerprint(k, v)
        if fp is not None:
            seen[fp["h"]] = fp
    if not seen:
        return 0
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        json.dump({"format": FORMAT, "version": 1, "key_id": key_id(k), "hash": "blake2b-128",
                   "values": list(seen.values())}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return len(seen)


@dataclass
class ValueSet:
    """Fingerprints of secret values (from one or more bundles recorded with the same key)."""

    k: bytes | None = None
    full: set[str] = field(default_factory=set)
    #: (class, anchor length) -> {anchor hash: [(anchor offset, value length)]}
    anchors: dict[tuple[str, int], dict[str, list[tuple[int, int]]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __bool__(self) -> bool:
        return bool(self.full)

    def add(self, k: bytes, fp: dict[str, Any]) -> None:
        with self._lock:
            if self.k is not None and self.k != k:
                return  # another user's key: its hashes mean nothing here
            self.k = k
            off, alen, cls, ah = fp["a"]
            self.full.add(fp["h"])
            self.anchors.setdefault((cls, int(alen)), {}).setdefault(ah, []).append((int(off), int(fp["n"])))

    def add_values(self, values: Iterable[str]) -> None:
        """Track raw values (the recorder, tests): fingerprinted with this user's key."""
        k = self.k or key(create=True) or _random.token_bytes(32)
        for v in values:
            fp = fingerprint(k, v)
            if fp is not None:
                self.add(k, fp)

    def clear(self) -> None:
        with self._lock:
            self.k = None
            self.full.clear()
            self.anchors.clear()

    def find(self, text: str) -> list[tuple[int, int]]:
        """Spans of ``text`` that are a tracked value (also when a line break was put inside one)."""
        if not self.full or self.k is None:
            return []
        spans = self._find(text)
        if "\n" in text:
            spans += self._find_wrapped(text)
        return spans

    def _hits(self, text: str, r0: int, r1: int, cls: str, alen: int,
              table: dict[str, list[tuple[int, int]]]) -> list[tuple[int, int]]:
        k = self.k
        assert k is not None
        found = []
        for s in _starts(text, r0, r1, alen, cls):
            hits = table.get(_h(k, text[s:s + alen]))
            for off, n in hits or ():
                v0 = s - off
                if v0 >= 0 and v0 + n <= len(text) and _h(k, text[v0:v0 + n]) in self.full:
                    found.append((v0, v0 + n))
        return found

    def _find(self, text: str) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for (cls, alen), table in list(self.anchors.items()):
            for run in _runs(cls, alen).finditer(text):  # only runs long enough (the regex engine skips the rest)
                found += self._hits(text, run.start(), run.end(), cls, alen, table)
        return found

    def _find_wrapped(self, text: str) -> list[tuple[int, int]]:
        """Values without white space cut by one line break (and the indentation after it): the two runs
        that meet at a break are joined and searched, their offsets mapped back."""
        found: list[tuple[int, int]] = []
        for (cls, alen), table in list(self.anchors.items()):
            chars = _CHARSETS[cls]
            for m in _junctions(cls).finditer(text):
                a1, b0 = m.start(), m.end()
                a0 = a1
                while a0 > 0 and a1 - a0 < alen and text[a0 - 1] in chars:
                    a0 -= 1
                b1 = b0
                while b1 < len(text) and b1 - b0 < alen and text[b1] in chars:
                    b1 += 1
                if (a1 - a0) + (b1 - b0) < alen:
                    continue
                joined = text[a0:a1] + text[b0:b1]
                cut = a1 - a0
                for v0, v1 in self._hits(joined, 0, len(joined), cls, alen, table):
                    if v0 < cut < v1:  # across the break (a whole value on one side is found by _find)
                        found.append((a0 + v0, b0 + (v1 - cut)))
        return found


def _runs(cls: str, alen: int) -> re.Pattern[str]:
    key = (cls, alen)
    pattern = _RUNS.get(key)
    if pattern is None:
        c = dict(_CLASSES)[cls]
        pattern = _RUNS[key] = re.compile(f"(?<![{c}])[{c}]{{{alen},}}")  # from a run's start only
    return pattern


def _junctions(cls: str) -> re.Pattern[str]:
    pattern = _JUNCTIONS.get(cls)
    if pattern is None:
        c = dict(_CLASSES)[cls]
        pattern = _JUNCTIONS[cls] = re.compile(f"(?<=[{c}]{{4}})\\r?\\n[ \\t]*(?=[{c}]{{4}})")
    return pattern


_RUNS: dict[tuple[str, int], re.Pattern[str]] = {}
_CHARSETS = {name: frozenset(chr(c) for c in range(0x20, 0x7f) if re.fullmatch(f"[{cls}]", chr(c)))
             for name, cls in _CLASSES}
_LONG_RUN = 512
_JUNCTIONS: dict[str, re.Pattern[str]] = {}


def _starts(text: str, r0: int, r1: int, alen: int, cls: str) -> Iterable[int]:
    """Where a window of ``alen`` may start inside the run ``text[r0:r1]``: anywhere in a hex or
    alphanumeric run; in runs that hold punctuation, at the run's start and after a punctuation mark; in a
    run longer than :data:`_LONG_RUN`, at its two ends only."""
    last = r1 - alen
    if r1 - r0 > _LONG_RUN:  # a blob (base64, a hex dump): a value is at its ends or not a value of its own
        return (r0, last)
    if cls in ("hex", "alnum") or r1 - r0 <= alen + 2:
        return range(r0, last + 1)
    return [r0, *(i + 1 for i in range(r0, last) if text[i] in _PUNCT)]


#: The values every reader in this process redacts (filled from the bundles it reads).
KNOWN = ValueSet()


def learn_bundle(bundle: Path | str) -> int:
    """Load a bundle's ``host/secret-values.json`` into :data:`KNOWN` (needs this user's key); returns how
    many fingerprints were taken."""
    path = Path(bundle) / "host" / FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return 0
    return learn_data(data)


def learn_data(data: Any) -> int:
    k = key()
    if k is None or not isinstance(data, dict) or data.get("key_id") != key_id(k):
        return 0
    n = 0
    for fp in data.get("values") or []:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            KNOWN.add(k, fp)
            n += 1
    return n
