"""Run one parser over one document so that a bad record costs that record, not the file.

A parser is a generator: once it raises, it is finished, and everything after the bad line
would be lost (one 5,000-digit number in a dmesg cost the Xid 79 beside it). So when a parser
raises, one of the last lines it read (:attr:`TextDocument.recent`, newest first: it may have
read ahead) is blanked — replaced by spaces, so offsets and line numbers stay — and the parse
runs again. If the same failure comes back, that line was not the culprit: it is restored and
the next one is tried. A warning names each line skipped. After :data:`MAX_ATTEMPTS` parses,
or when no line read is left to try, the parse stops at the failure and keeps what came out
before it (as before this guard). Retries cost time only on files that hold a bad record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from forensics.parsers.common.base import ParseContext, Parser

from forensics.events import Event, MetricSample
from forensics.ingest.textdoc import TextDocument

__all__ = ["MAX_ATTEMPTS", "Parsed", "parse_guarded"]

#: Parses of one file (the first and its retries around bad lines) before the rest is given up;
#: a file of :data:`BIG_BYTES` or more gets :data:`BIG_ATTEMPTS` (each retry reads it all again).
MAX_ATTEMPTS = 12
BIG_BYTES = 64 << 20
BIG_ATTEMPTS = 3

Span = tuple[int, int]


@dataclass
class Parsed:
    events: list[Event] = field(default_factory=list)
    metrics: list[MetricSample] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: Exception | None = None
    recent: list[Span] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)  # how a paste of several sources was split (paste.py)

    def key(self) -> tuple[str, Span | None] | None:
        """What failed and where, to tell one failure from another."""
        if self.error is None:
            return None
        return _why(self.error), self.recent[-1] if self.recent else None


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:160] + '…' if len(text) > 160 else text}"


def _attempt(parser: Parser, doc: TextDocument, ctx: ParseContext, blank: list[Span]) -> Parsed:
    first_warning = len(ctx.warnings)
    work = doc.without(blank) if blank else doc
    if work is not doc:
        work.progress = doc.progress
    out = Parsed()
    work.recent.clear()
    try:
        for rec in parser.parse(work, ctx):
            if isinstance(rec, MetricSample):
                out.metrics.append(rec)
            else:
                out.events.append(rec)
    except Exception as exc:  # noqa: BLE001 - a parser bug or a hostile record costs one record
        out.error = exc
        out.recent = list(work.recent)
    finally:
        out.warnings = ctx.warnings[first_warning:]
        del ctx.warnings[first_warning:]
        if work is not doc:
            work.progress = None
            doc.truncated_lines = max(doc.truncated_lines, work.truncated_lines)
    return out


def parse_guarded(parser: Parser, doc: TextDocument, ctx: ParseContext) -> Parsed:
    """Every record ``parser`` yields from ``doc``; ``ctx.warnings`` says what was skipped."""
    skipped: list[tuple[Span, str]] = []
    out = _attempt(parser, doc, ctx, [])
    attempts = 1
    limit = MAX_ATTEMPTS if len(doc) < BIG_BYTES else BIG_ATTEMPTS
    while out.error is not None:
        failure = out.key()
        cured = None
        for span in reversed(out.recent):
            if attempts >= limit:
                break
            if any(span == s for s, _ in skipped):
                continue
            retry = _attempt(parser, doc, ctx, [s for s, _ in skipped] + [span])
            attempts += 1
            if retry.key() != failure:  # blanking that line cured this failure (another may follow)
                cured = retry
                skipped.append((span, failure[0] if failure else ""))
                break
        if cured is None:
            break
        out = cured
    ctx.warnings.extend(out.warnings)
    for span, why in skipped:
        ctx.warn(f"line {doc.line_no_at(span[0])}: parser {parser.name} could not read this record ({why}); "
                 "skipped it")
    if out.error is not None:
        ctx.warn(f"parser {parser.name} failed: {_why(out.error)}; the rest of the file was not read")
    return out
