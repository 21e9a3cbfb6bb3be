"""The shipped catalogues as objects: :class:`Catalog`, its :class:`MessageClass` es and :class:`Message` s.

Read from ``forensics/catalogs/*.jsonl`` (written by ``tools/catalogs/build.py``; format in
docs/catalogs.md) once per process.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

from forensics import user_cache
from forensics.catalogs import text as text_module
from forensics.catalogs.text import (
    MIN_FIXED,
    distinctive,
    fixed_chars,
    key_literal,
    match_line,
    pieces,
    without_function,
)

__all__ = ["Catalog", "CatalogError", "Message", "MessageClass", "all_classes", "parse_catalog", "shipped"]

SEVERITIES = ("error", "warning", "info")


class CatalogError(ValueError):
    """A catalogue file that does not hold what docs/catalogs.md says."""


@dataclass(frozen=True, slots=True)
class MessageClass:
    """What a family of a producer's messages means for a run, and what to read next."""

    id: str
    title: str  # lower case with its article: "an NCCL network error"
    severity: str
    next: tuple[str, ...]
    producer: str


@dataclass(frozen=True)  # no slots: thousands are unpickled from the cache, and __dict__ ones unpickle in C
class Message:
    """One message a producer defines, as its catalogue maps it."""

    id: str
    producer: str
    text: str  # the format string with ``{}`` for each value
    where: str  # path:line in the pinned source
    level: str  # the producer's own level word
    severity: str  # ours: error | warning | info
    class_id: str | None
    signature: str | None
    code: str | None
    pieces: tuple[str, ...]  # the fixed pieces of the matched line, in order
    key: str  # the longest piece: what the literal index looks for
    fixed: int  # fixed characters of the matched line
    distinctive: bool  # matched without a marker word (docs/catalogs.md)
    alternate: bool = False  # the wording without the function name it starts with (``function_prefix``)

    @property
    def matchable(self) -> bool:
        return self.fixed >= MIN_FIXED


@dataclass(frozen=True, slots=True)
class Catalog:
    producer: str
    title: str  # how a verdict names the program: "NCCL"
    source: str
    version: str
    commit: str
    markers: tuple[str, ...]  # a line must hold one of these for a short message to match
    classes: dict[str, MessageClass]
    messages: tuple[Message, ...]
    #: The messages again without a leading function name, where the producer renames its functions between
    #: releases (header ``function_prefix = "optional"``); matched, never counted.
    alternates: tuple[Message, ...] = ()

    def counts(self) -> dict[str, int]:
        """Messages by severity, how many map to a signature or only to a class, and how many match."""
        errors = [m for m in self.messages if m.severity == "error"]
        return {
            "messages": len(self.messages),
            "error": len(errors),
            "warning": sum(m.severity == "warning" for m in self.messages),
            "error_to_signature": sum(m.signature is not None for m in errors),
            "error_class_only": sum(m.signature is None and m.class_id is not None for m in errors),
            "error_matchable": sum(m.matchable for m in errors),
        }


def _str(obj: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = obj.get(key, default)
    if not isinstance(value, str):
        raise CatalogError(f"{where}: {key!r} must be a string")
    return value


def parse_catalog(lines: Iterable[str], name: str = "<catalogue>") -> Catalog:
    """A catalogue from its JSON lines; :class:`CatalogError` naming the line for anything malformed."""
    header: dict[str, Any] | None = None
    classes: dict[str, MessageClass] = {}
    messages: list[Message] = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name}:{no}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise CatalogError(f"{where}: not JSON ({exc})") from None
        if not isinstance(obj, dict) or len(obj) != 1:
            raise CatalogError(f"{where}: expected one of {{\"catalog\"|\"class\"|\"message\": {{…}}}}")
        (kind, body), = obj.items()
        if not isinstance(body, dict):
            raise CatalogError(f"{where}: {kind} must be an object")
        if kind == "catalog":
            header = body
            continue
        if header is None:
            raise CatalogError(f"{where}: the first line must be the catalogue's header")
        producer = _str(header, "producer", where)
        if kind == "class":
            severity = _str(body, "severity", where)
            cls = MessageClass(_str(body, "id", where), _str(body, "title", where), severity,
                               tuple(str(s) for s in body.get("next", ())), producer)
            classes[cls.id] = cls
        elif kind == "message":
            text = _str(body, "text", where)
            severity = _str(body, "severity", where)
            if severity not in SEVERITIES:
                raise CatalogError(f"{where}: severity {severity!r} is not one of {SEVERITIES}")
            code = body.get("code")
            messages.append(Message(
                id=_str(body, "id", where), producer=producer, text=text, where=_str(body, "where", where, ""),
                level=_str(body, "level", where, ""), severity=severity, class_id=body.get("class"),
                signature=body.get("signature"), code=None if code is None else str(code),
                pieces=pieces(text), key=key_literal(text), fixed=fixed_chars(match_line(text)),
                distinctive=distinctive(text)))
        else:
            raise CatalogError(f"{where}: unknown entry {kind!r}")
    if header is None:
        raise CatalogError(f"{name}: empty catalogue")
    alternates: list[Message] = []
    if header.get("function_prefix") == "optional":
        for m in messages:
            rest = without_function(m.text)
            if rest is not None:
                alternates.append(replace(m, pieces=pieces(rest), key=key_literal(rest),
                                          fixed=fixed_chars(match_line(rest)), distinctive=distinctive(rest),
                                          alternate=True))
    return Catalog(
        producer=_str(header, "producer", name), title=_str(header, "title", name),
        source=_str(header, "source", name, ""), version=_str(header, "version", name, ""),
        commit=_str(header, "commit", name, ""), markers=tuple(str(m) for m in header.get("markers", ())),
        classes=classes, messages=tuple(messages), alternates=tuple(alternates))


@cache
def shipped() -> tuple[Catalog, ...]:
    """Every catalogue shipped in the package, in producer order; parsed once per user and version
    (forensics/user_cache.py: 3,700 messages take ~0.3 s to parse, a few ms to unpickle)."""
    root = resources.files("forensics.catalogs")
    entries = sorted((e for e in root.iterdir() if e.name.endswith(".jsonl")), key=lambda e: e.name)
    try:
        stamp = user_cache.file_stamps([str(e) for e in entries] + [__file__, text_module.__file__ or ""])
    except OSError:
        stamp = []
    path = user_cache.cache_path("catalogs", stamp) if stamp else None
    cached = user_cache.read(path)
    if isinstance(cached, tuple) and all(isinstance(c, Catalog) for c in cached):
        return cached
    found = tuple(parse_catalog(e.read_text(encoding="utf-8").splitlines(), f"catalogs/{e.name}") for e in entries)
    user_cache.write(path, found)
    return found


@cache
def all_classes() -> dict[str, MessageClass]:
    """Every class of every shipped catalogue, by id."""
    return {cid: cls for cat in shipped() for cid, cls in cat.classes.items()}
