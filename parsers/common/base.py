"""The contract every log-format parser meets.

A parser is a small object with:

``name``
    the format's id, reported as the source ``kind`` (``dmesg``, ``journalctl-json``,
    ``windows-event-xml``, ``torchrun`` …);
``samples``
    real example texts of the format (each a whole small file); the test suite
    checks that each sample is detected as this format and parses without warnings;
``detect(head)``
    0–1 confidence from the first non-empty lines of a file;
``parse(doc, ctx)``
    yields :class:`~forensics.events.Event` and :class:`~forensics.events.MetricSample`;
``tested_with`` (optional)
    producer → versions whose real output the parser's samples and tests hold (``{"NCCL": ("2.8.2",)}``),
    each taken from a real sample's own text or its case note, never guessed; read it with
    :func:`tested_with` (``tests/test_parsers_tested_with.py`` checks every claim against the samples and
    keeps the listing in ``docs/parsers-tested-with.md``).

Parsers never raise on bad content: they skip what they cannot read and call
``ctx.warn``. They never drop raw text: every event's ``origin`` points at its lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any, Protocol

from forensics.events import Event, MetricSample, Origin
from forensics.ingest.reader import loads_bounded
from forensics.ingest.textdoc import Line, TextDocument

__all__ = ["ParseContext", "Parser", "Record", "json_objects", "whole_text"]

Record = Event | MetricSample


@dataclass
class ParseContext:
    """What a parser knows about the file beyond its text.

    ``path`` is the name shown to users; ``source`` the Event.source to stamp
    (``file:<name>`` for loose files, ``kmsg``/``stdout``/``nvml`` inside a bundle).
    ``year`` fills year-less stamps (from the bundle or the file's mtime; ``mtime_ns`` is that
    modification time itself, the latest moment the log can describe); ``tz`` is the
    zone of local wall-clock stamps when known (bundle, ``--tz``), else ``None``;
    ``boot_time_ns`` anchors boot-relative stamps when known; ``receipt_ts`` maps a
    byte offset to the recorder's receipt time for streams that carry none;
    ``notable`` are literal anchors (from the signatures) that make a line of a chatty
    log worth an event; ``detect`` is the registry's detection, for formats that embed others.
    """

    path: str
    source: str
    host: str | None = None
    year: int | None = None
    mtime_ns: int | None = None
    tz: tzinfo | None = None
    boot_time_ns: int | None = None
    receipt_ts: Callable[[int], int | None] | None = None
    notable: tuple[bytes, ...] = ()
    #: The registry's detection, for formats that hold other formats (an nvidia-bug-report's sections, a
    #: Windows export's guest log). Given by whoever runs the parsers, so no parser imports the registry.
    detect: Callable[[list[str], tuple[str, ...]], tuple[Parser, float]] | None = None
    warnings: list[str] = field(default_factory=list)

    def warn(self, message: str, line: Line | None = None) -> None:
        where = f"{self.path}:{line.no}: " if line is not None else f"{self.path}: "
        if len(self.warnings) < 50:
            self.warnings.append(where + message)
        elif len(self.warnings) == 50:
            self.warnings.append(f"{self.path}: more warnings suppressed")

    def origin(self, line: Line, nlines: int = 1) -> Origin:
        return Origin(self.path, line.no, line.offset, nlines)


def whole_text(doc: TextDocument, ctx: ParseContext) -> bytes | None:
    """``doc`` as one ``bytes``, for a parser of whole documents (JSON, XML, CSV); None, with a
    warning, when it is a mapped file too large to copy (``TextDocument.whole``)."""
    data = doc.whole()
    if data is None:
        ctx.warn(f"too large to read as one document ({len(doc) >> 20} MiB); skipped")
    return data


def json_objects(doc: TextDocument, ctx: ParseContext) -> Iterator[tuple[Line, dict[str, Any]]]:
    """The JSON objects of a JSON-lines file with their lines. A line that is not JSON is skipped
    with a warning, except the last one: a torn last line is what a crash leaves."""
    lines = doc.lines()
    line = next(lines, None)
    while line is not None:
        nxt = next(lines, None)  # one line ahead: is this the last one?
        text = line.text.strip()
        if text:
            try:
                obj = loads_bounded(text)
            except (ValueError, RecursionError):  # RecursionError: nesting deeper than the stack
                if nxt is not None:
                    ctx.warn("not a JSON line", line)
            else:
                if isinstance(obj, dict):
                    yield line, obj
        line = nxt


#: Producer → versions of its real output a parser was tested on.
TestedWith = Mapping[str, tuple[str, ...]]


def tested_with(parser: object) -> TestedWith:
    """A parser's ``tested_with`` (empty when it declares none)."""
    found = getattr(parser, "tested_with", None)
    return found if isinstance(found, Mapping) else {}


class Parser(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def samples(self) -> tuple[str, ...]: ...

    def detect(self, head: list[str]) -> float: ...

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]: ...
