"""What the MCP server's tools do, in plain Python: paths checked against the roots, the analysis run,
the answer redacted and bounded. :mod:`.server` turns each :class:`ToolInputError` into an MCP tool
error; nothing here imports the SDK, writes a file or reads standard input (the MCP channel).
"""

from __future__ import annotations

import difflib
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics.errors import ForensicsError, UsageError
from forensics.events import Severity

if TYPE_CHECKING:
    from forensics.analysis import Analysis, Options
    from forensics.match.schema import Signature

__all__ = ["CUTS", "DEFAULT_MAX_CHARS", "MAX_LIMIT", "Roots", "ToolInputError", "Tools", "bounded_json", "bounded_text"]

#: The longest answer, in characters (about 25 k tokens: what agents' clients take from one tool call).
DEFAULT_MAX_CHARS = 100_000
#: The most timeline events one call returns.
MAX_LIMIT = 500
#: How a JSON answer over the cap is cut, step by step until it fits: (items kept of every list,
#: characters kept of every string).
CUTS = ((100, 2000), (50, 1000), (20, 500), (10, 300), (5, 200), (2, 120), (1, 80))
#: Analyses run at once (each holds its inputs in memory); more calls wait.
MAX_ANALYSES = 2
REPORT_FORMATS = ("md", "json", "html")
DIFF_FORMATS = ("json", "md", "text")


class ToolInputError(ValueError):
    """A tool call that cannot be answered as asked; the message says why, in one line."""


class Roots:
    """The directories the server may read below (symbolic links resolved, so ``..`` and links cannot
    lead out). A relative path is read from the first root."""

    def __init__(self, dirs: Sequence[str | os.PathLike[str]]) -> None:
        if not dirs:
            raise UsageError("give at least one --root DIR: the server reads only below its roots")
        resolved: list[Path] = []
        for d in dirs:
            path = Path(os.path.realpath(Path(d).expanduser()))
            if not path.is_dir():
                raise UsageError(f"--root {d}: not a directory")
            resolved.append(path)
        self.dirs = resolved

    def __repr__(self) -> str:
        return f"Roots({[str(d) for d in self.dirs]!r})"

    def inside(self, path: Path) -> bool:
        return any(path == d or d in path.parents for d in self.dirs)

    def resolve(self, given: object) -> str:
        """``given`` as a real path below a root, or :class:`ToolInputError` saying why not."""
        if not isinstance(given, str) or not given.strip():
            raise ToolInputError("each path must be a non-empty string")
        if given == "-":
            raise ToolInputError("'-' (standard input) is the MCP channel here; give a file or directory")
        if "\0" in given:
            raise ToolInputError("a path cannot hold a NUL character")
        path = Path(given).expanduser()
        if not path.is_absolute():
            path = self.dirs[0] / path
        real = Path(os.path.realpath(path))
        if not self.inside(real):
            raise ToolInputError(f"{given}: outside the allowed roots ({self._named()}); "
                                 "the server reads only below the directories given with --root")
        if not real.exists():
            raise ToolInputError(f"{given}: no such file or directory")
        if real.is_dir():
            self._no_link_out(real, given)
        return str(real)

    def _no_link_out(self, top: Path, given: str, max_entries: int = 20_000) -> None:
        """A directory whose tree holds a symbolic link to outside the roots is refused (a bundle's reader
        follows a few named files; the walk itself never follows links)."""
        seen = 0
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            for name in (*dirnames, *filenames):
                seen += 1
                if seen > max_entries:
                    return  # the analysis reads no more than this many files either
                entry = Path(dirpath) / name
                if entry.is_symlink() and not self.inside(Path(os.path.realpath(entry))):
                    raise ToolInputError(f"{given}: {entry.relative_to(top)} is a link to outside the allowed "
                                         f"roots ({self._named()}); refused")

    def _named(self) -> str:
        return ", ".join(str(d) for d in self.dirs)


def _redacted(value: Any) -> Any:
    from forensics.secrets import redact_tree

    return redact_tree(value)


def _cut(value: Any, keep: int, chars: int) -> Any:
    """``value`` with every list cut to its first ``keep`` items and every string to ``chars``."""
    if isinstance(value, str):
        return value if len(value) <= chars else value[: chars - 1] + "…"
    if isinstance(value, dict):
        return {k: _cut(v, keep, chars) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cut(v, keep, chars) for v in value[:keep]]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)  # compact: tokens count


def bounded_json(value: dict[str, Any], max_chars: int) -> str:
    """``value`` (redacted) as JSON text of at most ``max_chars``: when it is longer, every list is cut to
    its first items (fewer and fewer until it fits) and a ``truncated`` key says so."""
    value = _redacted(value)
    text = _dumps(value)
    if len(text) <= max_chars:
        return text
    for keep, chars in CUTS:
        note = (f"the answer was {len(text):,} characters, over this server's cap of {max_chars:,}: every list "
                f"is cut to its first {keep} item(s), every string to {chars} characters; ask a narrower "
                "question (filters, a timeline query, fewer paths) for the rest")
        cut = _dumps({"truncated": note, **_cut(value, keep, chars)})
        if len(cut) <= max_chars:
            return cut
    raise ToolInputError(f"the answer is {len(text):,} characters even cut down, over this server's cap of "
                         f"{max_chars:,} (forensics mcp --max-chars); ask a narrower question")


def bounded_text(text: str, max_chars: int, what: str) -> str:
    """``text`` (redacted), cut at a line end to ``max_chars`` with a last line that says so."""
    from forensics.secrets import redact_text

    text = redact_text(text)[0]
    if len(text) <= max_chars:
        return text
    note = (f"\n[cut: the {what} is {len(text):,} characters, over this server's cap of {max_chars:,}; "
            "ask for format json, or a narrower question]\n")
    head = text[: max(0, max_chars - len(note))]
    return head[: head.rfind("\n") + 1 if "\n" in head else len(head)] + note


@dataclass
class Tools:
    """The tools, bound to the server's roots and options (signature directories, the answer cap)."""

    roots: Roots
    signature_dirs: Sequence[Path] = ()
    max_chars: int = DEFAULT_MAX_CHARS
    _running: threading.BoundedSemaphore = field(default_factory=lambda: threading.BoundedSemaphore(MAX_ANALYSES))

    # -- helpers ----------------------------------------------------------------------------------
    def _paths(self, paths: object, what: str = "paths") -> list[str]:
        if isinstance(paths, str):
            paths = [paths]
        if not isinstance(paths, list | tuple) or not paths:
            raise ToolInputError(f"{what}: give a list of one or more files or directories")
        if len(paths) > 100:
            raise ToolInputError(f"{what}: at most 100 paths at once (a directory stands for what it holds)")
        return [self.roots.resolve(p) for p in paths]

    def _options(self, filters: dict[str, Any] | None) -> Options:
        from forensics.api import options

        f = dict(filters or {})
        every = bool(f.pop("all", False))
        known = {"since", "until", "hosts", "ranks", "tz"}
        if set(f) - known:
            raise ToolInputError(f"filters: unknown key {sorted(set(f) - known)[0]!r} "
                                 f"(known: {', '.join(sorted(known | {'all'}))})")
        chosen = {k: v for k, v in f.items() if v not in (None, "", [])}
        if every:  # every evidence line, as `forensics analyze --all`
            chosen["max_evidence"] = None
        try:
            return options(signature_dirs=list(self.signature_dirs), **chosen)
        except (TypeError, ValueError, ForensicsError) as exc:
            raise ToolInputError(f"filters: {exc}") from None

    def _analyze(self, paths: list[str], options: Options) -> Analysis:
        from forensics.analysis import analyze

        with self._running:
            analysis = analyze(paths, options)
        if all(s.kind in ("unreadable", "binary", "empty") for s in analysis.sources):
            raise ToolInputError(f"nothing readable in {', '.join(paths)}")
        return analysis

    # -- the tools --------------------------------------------------------------------------------
    def analyze(self, paths: list[str], filters: dict[str, Any] | None = None) -> str:
        """The JSON verdict of ``forensics analyze --format json``."""
        from forensics.analysis import to_json_dict

        return bounded_json(to_json_dict(self._analyze(self._paths(paths), self._options(filters))), self.max_chars)

    def report(self, paths: list[str], format: str = "md") -> str:  # noqa: A002 - the tool's argument name
        """The post-mortem of ``forensics report`` (Markdown, JSON or HTML)."""
        from forensics.analysis import bundle_facts
        from forensics.postmortem import render_report

        if format not in REPORT_FORMATS:
            raise ToolInputError(f"format: one of {', '.join(REPORT_FORMATS)}, not {format!r}")
        resolved = self._paths(paths)
        analysis = self._analyze(resolved, self._options(None))
        text = render_report(analysis, bundle_facts(resolved), format)
        if format == "json":
            return bounded_json(json.loads(text), self.max_chars)
        if format == "html" and len(text) > self.max_chars:
            raise ToolInputError(f"the HTML report is {len(text):,} characters, over this server's cap of "
                                 f"{self.max_chars:,}; ask for format md or json")
        return bounded_text(text, self.max_chars, "report")

    def diff(self, a: list[str], b: list[str], format: str = "json") -> str:  # noqa: A002
        """What changed between a good run ``a`` and a bad run ``b`` (``forensics diff``)."""
        from forensics.analysis import bundle_facts
        from forensics.postmortem import diff

        if format not in DIFF_FORMATS:
            raise ToolInputError(f"format: one of {', '.join(DIFF_FORMATS)}, not {format!r}")
        side_a, side_b = self._paths(a, "a"), self._paths(b, "b")
        options = self._options(None)
        compared = diff.compare(self._analyze(side_a, options), bundle_facts(side_a),
                                self._analyze(side_b, options), bundle_facts(side_b))
        if format == "json":
            return bounded_json(compared, self.max_chars)
        text = diff.render_diff_markdown(compared) if format == "md" else diff.render_diff_text(compared)
        return bounded_text(text, self.max_chars, "diff")

    def timeline(self, paths: list[str], query: str = "", limit: int = 50, offset: int = 0,
                 filters: dict[str, Any] | None = None) -> str:
        """The merged timeline's events that match ``query`` (the filter language of ``forensics open``)."""
        from forensics.timeline.query import EventIndex, QueryError, parse_query
        from forensics.units import iso

        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise ToolInputError(f"limit: 1 to {MAX_LIMIT}")
        if not isinstance(offset, int) or offset < 0:
            raise ToolInputError("offset: 0 or more")
        try:
            parsed = parse_query(query or "")
        except QueryError as exc:
            raise ToolInputError(f"query: {exc}") from None
        analysis = self._analyze(self._paths(paths), self._options(filters))
        events = analysis.timeline.events
        try:
            rows = EventIndex(events).select(parsed)
        except QueryError as exc:
            raise ToolInputError(f"query: {exc}") from None
        page = [events[int(i)] for i in rows[offset:offset + limit]]
        return bounded_json({
            "query": query, "total": int(len(rows)), "offset": offset, "returned": len(page),
            "more": offset + len(page) < len(rows),
            "events": [{"ts": iso(e.ts), "ts_source": str(e.ts_source), "host": e.host, "gpu": e.gpu,
                        "rank": e.rank, "source": e.source, "kind": e.kind, "severity": _severity(e.severity),
                        "message": e.message, "origin": str(e.origin), "attrs": dict(e.attrs)} for e in page],
        }, self.max_chars)

    def explain(self, signature_id: str) -> str:
        """What a signature means, what it looks for and what to do (its TOML, as data)."""
        from forensics.match import load_signatures

        signatures = {s.id: s for s in load_signatures(self.signature_dirs)}
        sig = signatures.get((signature_id or "").strip())
        if sig is None:
            close = difflib.get_close_matches((signature_id or "").strip(), list(signatures), n=5, cutoff=0.4)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ToolInputError(f"unknown signature {signature_id!r}{hint} ({len(signatures)} known: the "
                                 "'signature' of each finding that analyze returns is one)")
        return bounded_json(_signature_json(sig), self.max_chars)


def _severity(level: int) -> str:
    try:
        return Severity(level).name.lower()
    except ValueError:
        return str(level)


def _signature_json(sig: Signature) -> dict[str, Any]:
    def window(ev: Any) -> list[float] | None:
        return None if ev.window is None else [ev.window.before_ns / 1e9, ev.window.after_ns / 1e9]

    corr = sig.correlation
    return {
        "id": sig.id, "title": sig.title, "category": sig.category, "risk": sig.risk, "priority": sig.priority,
        "platforms": list(sig.platforms), "consequence_of": list(sig.consequence_of),
        "explain": sig.explain, "remedy": list(sig.remedy), "references": list(sig.references),
        "evidence": [{"name": ev.name, "role": ev.role, "kinds": list(ev.kinds), "sources": list(ev.sources),
                      "literals": list(ev.literals), "regex": ev.regex_text or None, "weight": ev.weight,
                      "min_count": ev.min_count, "window_s": window(ev), "risk": ev.risk} for ev in sig.evidence],
        "correlation": None if corr is None else {
            "type": corr.type, "group_by": list(corr.group_by), "count": corr.count, "order": list(corr.order),
            "timespan_s": None if corr.timespan_ns is None else corr.timespan_ns / 1e9},
        "examples": [{"match": ex.match, "text": ex.text} for ex in sig.examples[:3]],
        "file": os.path.basename(sig.path),
    }
