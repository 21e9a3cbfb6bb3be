"""Read signature TOML files into :class:`~forensics.match.schema.Signature` objects.

Every problem is reported with the file and line it comes from and, for regexes,
the pattern exactly as written. ``check_file`` returns all problems (for
``forensics lint-signatures``); ``load_file`` raises :class:`SignatureError` on the
first one (for ``analyze``). Shipped signatures live in the package
``forensics.signatures`` and are read with :mod:`importlib.resources`.

Loading the 52 shipped files costs ~0.1 s (TOML, checks, compiling ~230 regexes), more than
the rest of a small analysis, so :func:`load_signatures` keeps the compiled signatures in a
per-user cache file (a pickle: ``regex`` patterns pickle their compiled program). An entry is
keyed by the signature file's path, mtime and size; the file's name by this package's version,
the Python and ``regex`` versions and this module's and the schema's own files, so any change
to what loading produces starts a new cache. It is read only when owned by the user and not
writable by others; any problem with it falls back to loading. ``$FORENSICS_CACHE_DIR`` moves
it; set to an empty value it turns it off.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import regex

from forensics import user_cache
from forensics.errors import SignatureError
from forensics.lazy_re import lazy_compile
from forensics.match.schema import (
    CATEGORIES,
    CORRELATION_TYPES,
    FLAG_BITS,
    GROUP_FIELDS,
    MACHINE_CLASSES,
    PLATFORMS,
    ROLES,
    Correlation,
    Evidence,
    Example,
    RemedyStep,
    Signature,
    Variant,
    parse_duration,
    parse_window,
)
from forensics.user_cache import file_stamps

__all__ = ["Problem", "check_file", "load_file", "load_signatures", "shipped_paths", "signature_files"]

TOP_KEYS = ("id", "title", "category", "platforms", "priority", "consequence_of", "risk", "explain", "remedy",
            "references", "evidence", "correlation", "variants", "examples")
EVIDENCE_KEYS = ("name", "role", "kinds", "sources", "literals", "regex", "flags", "attrs", "weight", "window",
                 "min_count", "risk")
CORRELATION_KEYS = ("type", "group_by", "count", "timespan", "order")
EXAMPLE_KEYS = ("match", "text", "source", "risk")
STEP_KEYS = ("step", "machines")
VARIANT_KEYS = ("when", "title", "explain", "remedy")
_ID = lazy_compile(r"[a-z0-9][a-z0-9-]*")


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong (or worth a look) in a signature file."""

    path: str
    line: int
    message: str
    warning: bool = False

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {'warning: ' if self.warning else ''}{self.message}"


# -- where things are in the file --------------------------------------------------------------
_HEADER = lazy_compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-]+)\s*\]\]?")
_KEY = lazy_compile(r"^\s*([A-Za-z0-9_\-]+)\s*=")


class _Locations:
    """Line numbers of table headers and keys, found by a light scan of the TOML text.

    tomllib gives no positions, so this walks the lines once, skipping multi-line
    strings, and remembers where each ``[[evidence]]``/``[[examples]]`` table starts
    and on which line each key of each table is written.
    """

    def __init__(self, text: str) -> None:
        self.headers: dict[tuple[str, int], int] = {}
        self.keys: dict[tuple[str, int], dict[str, int]] = {("", 0): {}}
        counts: dict[str, int] = {}
        table: tuple[str, int] = ("", 0)
        closing: str | None = None
        for no, line in enumerate(text.splitlines(), 1):
            if closing is not None:
                if closing in line:
                    closing = self._open_delimiter(line[line.index(closing) + 3:])
                continue
            m = _HEADER.match(line)
            if m:
                name = m.group(2)
                idx = counts.get(name, -1) + 1 if m.group(1) == "[[" else 0
                counts[name] = idx
                table = (name, idx)
                self.headers[table] = no
                self.keys.setdefault(table, {})
                continue
            k = _KEY.match(line)
            if k:
                self.keys.setdefault(table, {}).setdefault(k.group(1), no)
            closing = self._open_delimiter(line)

    @staticmethod
    def _open_delimiter(line: str) -> str | None:
        """The triple-quote delimiter left open at the end of ``line``, if any."""
        pos = 0
        while True:
            starts = [(line.find(d, pos), d) for d in ('"""', "'''")]
            starts = [(i, d) for i, d in starts if i >= 0]
            if not starts:
                return None
            i, d = min(starts)
            end = line.find(d, i + 3)
            if end < 0:
                return d
            pos = end + 3

    def line(self, table: str = "", idx: int = 0, key: str | None = None) -> int:
        if key is not None:
            found = self.keys.get((table, idx), {}).get(key)
            if found:
                return found
        return self.headers.get((table, idx), 1 if not table else 0) or 1


# -- checking ------------------------------------------------------------------------------------
class _Checker:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.loc = _Locations(text)
        self.problems: list[Problem] = []

    def error(self, line: int, message: str) -> None:
        self.problems.append(Problem(self.path, line, message))

    def warn(self, line: int, message: str) -> None:
        self.problems.append(Problem(self.path, line, message, warning=True))

    def unknown_keys(self, data: dict[str, Any], allowed: Sequence[str], table: str, idx: int, what: str) -> None:
        for key in data:
            if key in allowed:
                continue
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (allowed: {', '.join(allowed)})"
            self.error(self.loc.line(table, idx, key), f"unknown key {key!r} in {what}{hint}")

    def strings(self, value: Any, line: int, what: str, *, allow_single: bool = True) -> tuple[str, ...]:
        if isinstance(value, str) and allow_single:
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.error(line, f"{what} must be a list of strings")
            return ()
        return tuple(value)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_evidence(c: _Checker, item: Any, idx: int, seen: set[str]) -> Evidence | None:
    loc = c.loc
    header = loc.line("evidence", idx)
    if not isinstance(item, dict):
        c.error(header, "[[evidence]] must be a table")
        return None
    c.unknown_keys(item, EVIDENCE_KEYS, "evidence", idx, "[[evidence]]")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        c.error(header, "[[evidence]] needs a non-empty 'name'")
        name = f"evidence#{idx + 1}"
    elif name in seen:
        c.error(loc.line("evidence", idx, "name"), f"evidence name {name!r} is used twice")
    seen.add(name)
    label = f"evidence {name!r}"
    role = item.get("role")
    if role not in ROLES:
        c.error(loc.line("evidence", idx, "role"), f"{label}: role must be one of {', '.join(ROLES)}, got {role!r}")
        role = "supporting"
    kinds = c.strings(item.get("kinds", []), loc.line("evidence", idx, "kinds"), f"{label}: kinds")
    if role == "anchor" and "recording" in kinds:
        c.error(loc.line("evidence", idx, "kinds"),
                f"{label}: 'recording' events (the recorder's own manifest) are never an anchor")
    sources = c.strings(item.get("sources", []), loc.line("evidence", idx, "sources"), f"{label}: sources")
    literals = c.strings(item.get("literals", []), loc.line("evidence", idx, "literals"), f"{label}: literals")
    if any(not lit for lit in literals):
        c.error(loc.line("evidence", idx, "literals"), f"{label}: empty literal (it would match every line)")
        literals = tuple(lit for lit in literals if lit)
    if role == "anchor" and not literals:
        c.error(loc.line("evidence", idx, "literals") if "literals" in item else header,
                f"{label}: an anchor needs 'literals' (the analyzer only sees lines holding one of them)")
    flags_text = item.get("flags", "")
    bits = 0
    if not isinstance(flags_text, str) or any(ch not in FLAG_BITS for ch in flags_text):
        c.error(loc.line("evidence", idx, "flags"),
                f"{label}: flags must be letters from {''.join(FLAG_BITS)!r}, got {flags_text!r}")
        flags_text = ""
    for ch in flags_text:
        bits |= FLAG_BITS[ch]
    pattern = None
    regex_text = item.get("regex", "")
    if "regex" in item:
        if not isinstance(regex_text, str) or not regex_text:
            c.error(loc.line("evidence", idx, "regex"), f"{label}: regex must be a non-empty string")
            regex_text = ""
        else:
            try:
                pattern = regex.compile(regex_text, bits | regex.VERSION0)
            except regex.error as exc:
                pos = getattr(exc, "pos", None)
                reason = getattr(exc, "msg", None) or str(exc)
                where = f" at position {pos}" if pos is not None else ""
                c.error(loc.line("evidence", idx, "regex"),
                        f"{label}: regex does not compile: {reason}{where}: '{regex_text}'")
            else:
                from forensics.match.redos import nested_quantifier

                nested = nested_quantifier(regex_text)
                if nested is not None:
                    c.error(loc.line("evidence", idx, "regex"),
                            f"{label}: regex has a nested quantifier ({nested}) and can take exponential time "
                            f"on a line it does not match: '{regex_text}' (give the inner repeat a required end, "
                            "e.g. (\\w+\\s)+, or make the group atomic: (?>…))")
    elif not literals and not kinds and "attrs" not in item:
        c.error(header, f"{label}: selects every event (give literals, a regex, kinds or attrs)")
    attrs: list[tuple[str, tuple[Any, ...]]] = []
    raw_attrs = item.get("attrs", {})
    if not isinstance(raw_attrs, dict):
        c.error(loc.line("evidence", idx, "attrs"), f"{label}: attrs must be a table, e.g. {{ xid = [79] }}")
    else:
        for key, values in raw_attrs.items():
            vals = values if isinstance(values, list) else [values]
            attrs.append((str(key), tuple(vals)))
    weight = item.get("weight", 1.0)
    if not _number(weight) or weight < 0:
        c.error(loc.line("evidence", idx, "weight"), f"{label}: weight must be a number >= 0, got {weight!r}")
        weight = 1.0
    elif weight > 1:
        c.warn(loc.line("evidence", idx, "weight"), f"{label}: weight {weight} is above 1 and counts as 1")
    window = None
    if "window" in item:
        if role == "anchor":
            c.error(loc.line("evidence", idx, "window"),
                    f"{label}: 'window' is relative to the anchor, so only supporting/excludes evidence has one")
        elif not isinstance(item["window"], str):
            c.error(loc.line("evidence", idx, "window"), f"{label}: window must be a string such as '-10m..+10m'")
        else:
            try:
                window = parse_window(item["window"])
            except ValueError as exc:
                c.error(loc.line("evidence", idx, "window"), f"{label}: {exc}")
    min_count = item.get("min_count", 1)
    if not _int(min_count) or min_count < 1:
        c.error(loc.line("evidence", idx, "min_count"), f"{label}: min_count must be an integer >= 1")
        min_count = 1
    risk = item.get("risk", False)
    if not isinstance(risk, bool):
        c.error(loc.line("evidence", idx, "risk"), f"{label}: risk must be true or false")
        risk = False
    elif risk and role != "anchor":
        c.error(loc.line("evidence", idx, "risk"),
                f"{label}: 'risk' marks an anchor that alone shows a risk; {role} evidence cannot have it")
        risk = False
    return Evidence(name=name, role=role, line=header, kinds=kinds, sources=sources, literals=literals,
                    pattern=pattern, regex_text=regex_text if isinstance(regex_text, str) else "",
                    ignore_case="i" in flags_text, attrs=tuple(attrs), weight=min(float(weight), 1.0),
                    window=window, min_count=min_count, risk=risk)


def _check_correlation(c: _Checker, data: Any, names: set[str]) -> Correlation | None:
    loc = c.loc
    header = loc.line("correlation")
    if not isinstance(data, dict):
        c.error(header, "[correlation] must be a table")
        return None
    c.unknown_keys(data, CORRELATION_KEYS, "correlation", 0, "[correlation]")
    ctype = data.get("type")
    if ctype not in CORRELATION_TYPES:
        c.error(loc.line("correlation", 0, "type"),
                f"correlation type must be one of {', '.join(CORRELATION_TYPES)}, got {ctype!r}")
        return None
    group_by = c.strings(data.get("group_by", []), loc.line("correlation", 0, "group_by"), "group_by")
    for g in group_by:
        if g not in GROUP_FIELDS and not (g.startswith("attrs.") and len(g) > 6):
            c.error(loc.line("correlation", 0, "group_by"),
                    f"group_by field {g!r} is not one of {', '.join(GROUP_FIELDS)} or attrs.<key>")
    count = data.get("count", 1)
    if not _int(count) or count < 1:
        c.error(loc.line("correlation", 0, "count"), "correlation count must be an integer >= 1")
        count = 1
    if ctype == "event_count" and "count" not in data:
        c.error(header, "event_count correlation needs 'count'")
    timespan = None
    if "timespan" in data:
        try:
            if not isinstance(data["timespan"], str):
                raise ValueError("timespan must be a string such as '60s'")
            timespan = abs(parse_duration(data["timespan"]))
            if timespan == 0:
                raise ValueError("timespan must be longer than 0")
        except ValueError as exc:
            c.error(loc.line("correlation", 0, "timespan"), str(exc))
    order = c.strings(data.get("order", []), loc.line("correlation", 0, "order"), "order")
    if ctype == "temporal_ordered":
        if len(order) < 2:
            c.error(loc.line("correlation", 0, "order") if "order" in data else header,
                    "temporal_ordered correlation needs 'order' with at least two evidence names")
        for n in order:
            if n not in names:
                c.error(loc.line("correlation", 0, "order"), f"order names evidence {n!r}, which does not exist")
    return Correlation(type=ctype, group_by=group_by, count=count, timespan_ns=timespan, order=order)


def _check_examples(c: _Checker, data: Any) -> list[Example]:
    out: list[Example] = []
    if not isinstance(data, list):
        c.error(c.loc.line("examples"), "[[examples]] must be an array of tables")
        return out
    for idx, item in enumerate(data):
        header = c.loc.line("examples", idx)
        if not isinstance(item, dict):
            c.error(header, "[[examples]] must be a table")
            continue
        c.unknown_keys(item, EXAMPLE_KEYS, "examples", idx, "[[examples]]")
        match, text, source = item.get("match"), item.get("text"), item.get("source", "")
        if not isinstance(match, bool):
            c.error(c.loc.line("examples", idx, "match"), "example needs 'match = true' or 'match = false'")
            continue
        if not isinstance(text, str) or not text.strip():
            c.error(c.loc.line("examples", idx, "text"), "example needs a non-empty 'text'")
            continue
        if not isinstance(source, str):
            c.error(c.loc.line("examples", idx, "source"), "example 'source' must be a string")
            source = ""
        risk = item.get("risk")
        if risk is not None and (not isinstance(risk, bool) or not match):
            c.error(c.loc.line("examples", idx, "risk"),
                    "example 'risk' must be true or false, on an example with match = true")
            risk = None
        out.append(Example(match=match, text=text, source=source, line=header, risk=risk))
    return out


def _check_remedy(c: _Checker, value: Any, line: int, what: str = "remedy") -> tuple[RemedyStep, ...]:
    """A remedy list: plain strings (for every machine) and ``{ step = "…", machines = ["datacenter"] }``
    tables (for those classes of machine only), in the order they are shown."""
    if not isinstance(value, list):
        c.error(line, f"{what} must be a list of steps")
        return ()
    out: list[RemedyStep] = []
    for item in value:
        if isinstance(item, str):
            out.append(RemedyStep(item))
            continue
        if not isinstance(item, dict) or not isinstance(item.get("step"), str) or not item["step"].strip():
            c.error(line, f"{what}: a step is a string or a table {{ step = \"…\", machines = [...] }}")
            continue
        for key in item:
            if key not in STEP_KEYS:
                c.error(line, f"{what}: unknown key {key!r} in a step (allowed: {', '.join(STEP_KEYS)})")
        machines = c.strings(item.get("machines", []), line, f"{what}: machines", allow_single=False)
        for m in machines:
            if m not in MACHINE_CLASSES:
                c.error(line, f"{what}: machine class {m!r} is not one of {', '.join(MACHINE_CLASSES)}")
        if not machines:
            c.warn(line, f"{what}: a step table without 'machines' is for every machine; write it as a string")
        out.append(RemedyStep(item["step"], tuple(machines)))
    return tuple(out)


def _check_variants(c: _Checker, data: Any, names: set[str]) -> list[Variant]:
    out: list[Variant] = []
    if not isinstance(data, list):
        c.error(c.loc.line("variants"), "[[variants]] must be an array of tables")
        return out
    for idx, item in enumerate(data):
        header = c.loc.line("variants", idx)
        if not isinstance(item, dict):
            c.error(header, "[[variants]] must be a table")
            continue
        c.unknown_keys(item, VARIANT_KEYS, "variants", idx, "[[variants]]")
        when = c.strings(item.get("when", []), c.loc.line("variants", idx, "when"), "variant 'when'")
        if not when:
            c.error(header, "a variant needs 'when': the evidence names whose anchor lines it words")
        for n in when:
            if n not in names:
                c.error(c.loc.line("variants", idx, "when"),
                        f"variant 'when' names evidence {n!r}, which does not exist")
        title, explain = item.get("title", ""), item.get("explain", "")
        if not isinstance(title, str) or not isinstance(explain, str):
            c.error(header, "a variant's title and explain are strings")
            title, explain = "", ""
        remedy = _check_remedy(c, item["remedy"], c.loc.line("variants", idx, "remedy"), "variant remedy") \
            if "remedy" in item else ()
        out.append(Variant(when=when, title=title.strip(), explain=explain.strip(), remedy=remedy, line=header))
    return out


def check_text(text: str, path: str, stem: str | None = None) -> tuple[Signature | None, list[Problem]]:
    """Validate and compile one signature file's text. Returns the signature (None if it
    has errors) and every problem found, warnings included."""
    import tomllib  # only when a file is compiled, not when the cache has it

    c = _Checker(path, text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)|\(at end of document\)", msg)
        line = (int(m.group(1)) if m.group(1) else max(1, len(text.splitlines()))) if m else 0
        reason = msg[: m.start()].rstrip() if m else msg
        c.error(line, f"TOML syntax error: {reason}")
        return None, c.problems
    loc = c.loc
    c.unknown_keys(data, TOP_KEYS, "", 0, "the signature")
    sid = data.get("id")
    if not isinstance(sid, str) or not _ID.fullmatch(sid):
        c.error(loc.line(key="id"), f"'id' must be lowercase words joined by '-', got {sid!r}")
        sid = stem or "?"
    elif stem is not None and sid != stem:
        c.error(loc.line(key="id"), f"id {sid!r} differs from the file name {stem!r}.toml")
    title = data.get("title")
    if not isinstance(title, str) or not title.strip():
        c.error(loc.line(key="title"), "'title' is required (plain words a stressed engineer understands)")
        title = sid
    category = data.get("category")
    if category not in CATEGORIES:
        c.error(loc.line(key="category"), f"category must be one of {', '.join(CATEGORIES)}, got {category!r}")
    platforms = c.strings(data.get("platforms", ["any"]), loc.line(key="platforms"), "platforms")
    for p in platforms:
        if p not in PLATFORMS:
            c.error(loc.line(key="platforms"), f"platform {p!r} is not one of {', '.join(PLATFORMS)}")
    priority = data.get("priority", 50)
    if not _int(priority) or not 0 <= priority <= 100:
        c.error(loc.line(key="priority"), f"priority must be an integer from 0 to 100, got {priority!r}")
        priority = 50
    consequence_of = c.strings(data.get("consequence_of", []), loc.line(key="consequence_of"), "consequence_of")
    risk = data.get("risk", False)
    if not isinstance(risk, bool):
        c.error(loc.line(key="risk"), "risk must be true or false")
        risk = False
    explain = data.get("explain", "")
    if not isinstance(explain, str):
        c.error(loc.line(key="explain"), "explain must be a string")
        explain = ""
    remedy = _check_remedy(c, data.get("remedy", []), loc.line(key="remedy"))
    references = c.strings(data.get("references", []), loc.line(key="references"), "references")
    evidence: list[Evidence] = []
    raw_evidence = data.get("evidence", [])
    if not isinstance(raw_evidence, list):
        c.error(loc.line(key="evidence"), "evidence must be [[evidence]] tables")
        raw_evidence = []
    seen: set[str] = set()
    for idx, item in enumerate(raw_evidence):
        ev = _check_evidence(c, item, idx, seen)
        if ev is not None:
            evidence.append(ev)
    if not any(e.role == "anchor" for e in evidence):
        c.error(loc.line("evidence", 0) if raw_evidence else 1, "a signature needs at least one anchor evidence")
    risky = [e for e in evidence if e.risk]
    if risky and risk:
        c.warn(loc.line("evidence", 0), f"evidence {risky[0].name!r}: 'risk' on evidence changes nothing when the "
               "whole signature is risk = true")
    elif risky and all(e.risk for e in evidence if e.role == "anchor"):
        c.warn(loc.line("evidence", 0), "every anchor is risk evidence: say risk = true on the signature instead")
    correlation = None
    if "correlation" in data:
        correlation = _check_correlation(c, data["correlation"], {e.name for e in evidence})
    variants = _check_variants(c, data.get("variants", []), {e.name for e in evidence})
    examples = _check_examples(c, data.get("examples", []))
    if not explain.strip():
        c.warn(loc.line(key="explain"), "no 'explain': say what it means in plain words")
    if not remedy:
        c.warn(loc.line(key="remedy"), "no 'remedy': say what to do")
    if not any(e.match for e in examples) or not any(not e.match for e in examples):
        c.warn(1, "examples should include at least one match = true and one match = false")
    if any(not p.warning for p in c.problems):
        return None, c.problems
    sig = Signature(id=sid, title=title.strip(), category=str(category), path=path, platforms=platforms,
                    priority=priority, consequence_of=consequence_of, risk=risk, explain=explain.strip(),
                    remedy=remedy, references=references, evidence=tuple(evidence), correlation=correlation,
                    variants=tuple(variants), examples=tuple(examples))
    return sig, c.problems


def check_file(path: Path, display: str | None = None) -> tuple[Signature | None, list[Problem]]:
    """Validate one file on disk (see :func:`check_text`)."""
    shown = display or str(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [Problem(shown, 0, f"not UTF-8 text ({exc.reason} at byte {exc.start})")]
    except OSError as exc:
        return None, [Problem(shown, 0, f"cannot read: {exc.strerror or exc}")]
    return check_text(text, shown, path.stem)


@lru_cache(maxsize=512)
def _load_cached(path: str, mtime_ns: int, size: int) -> Signature:
    sig, problems = check_file(Path(path))
    errors = [p for p in problems if not p.warning]
    if sig is None or errors:
        more = f" (and {len(errors) - 1} more problem(s); run: forensics lint-signatures)" if len(errors) > 1 else ""
        raise SignatureError(f"{errors[0]}{more}" if errors else f"{path}: invalid signature")
    return sig


def load_file(path: Path) -> Signature:
    """One signature file, compiled; raises :class:`SignatureError` naming file:line."""
    try:
        st = path.stat()
    except OSError as exc:
        raise SignatureError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return _load_cached(str(path), st.st_mtime_ns, st.st_size)


def signature_files(directory: Path) -> list[Path]:
    """The ``*.toml`` files of one signature directory, sorted."""
    if not directory.is_dir():
        raise SignatureError(f"{directory}: signature directory not found")
    return sorted(p for p in directory.iterdir() if p.suffix == ".toml" and p.is_file())


def shipped_paths() -> list[Path]:
    """The signature files shipped inside the package."""
    root = resources.files("forensics.signatures")
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".toml"))


# -- the per-user cache of compiled signatures (forensics/user_cache.py) -------------------------------

_Key = tuple[str, int, int]  # path, mtime_ns, size
#: Signatures this process has loaded or read from the cache file.
_loaded: dict[_Key, Signature] = {}


def _cache_file() -> Path | None:
    from forensics import __version__, findings
    from forensics.match import schema

    try:
        modules = file_stamps([__file__, schema.__file__ or "", findings.__file__ or ""])
    except OSError:
        return None
    return user_cache.cache_path("signatures", [__version__, sys.version, str(getattr(regex, "__version__", "")),
                                                *modules])


def _read_cache(path: Path) -> dict[_Key, Signature]:
    """The cache file's entries; empty when it is missing, foreign, writable by others or unreadable."""
    data = user_cache.read(path)
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, Signature)}


def _write_cache(path: Path, entries: dict[_Key, Signature]) -> None:
    user_cache.write(path, entries)


def _key(path: Path) -> _Key:
    try:
        st = path.stat()
    except OSError as exc:
        raise SignatureError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return str(path), st.st_mtime_ns, st.st_size


def load_signatures(extra_dirs: Iterable[Path] = ()) -> list[Signature]:
    """The shipped signatures plus those in ``extra_dirs``; a later file with the same id
    replaces an earlier one (so a user can override a shipped signature). Compiled signatures
    come from this process's memory, else the cache file (see the module docstring)."""
    paths = shipped_paths()
    for d in extra_dirs:
        paths += signature_files(Path(d))
    keys = [_key(path) for path in paths]
    cache = None
    if any(k not in _loaded for k in keys) and (cache := _cache_file()) is not None:
        stored = _read_cache(cache)
        _loaded.update((k, stored[k]) for k in keys if k in stored and k not in _loaded)
    compiled = False
    by_id: dict[str, Signature] = {}
    for key in keys:
        sig = _loaded.get(key)
        if sig is None:
            sig = _loaded[key] = _load_cached(*key)
            compiled = True
        by_id[sig.id] = sig
    if compiled and cache is not None:
        _write_cache(cache, {k: _loaded[k] for k in keys})
    if len(_loaded) > 4096:
        _loaded.clear()
    return list(by_id.values())
