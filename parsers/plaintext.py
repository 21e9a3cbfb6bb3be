"""Last-resort parser for any text that no specific format claims.

It keeps only notable lines: those holding a signature anchor (``ctx.notable``) or
a generic error word. Everything else stays in the file, reachable by offset.
"""

from __future__ import annotations

from collections.abc import Iterator

from forensics.events import Event, Severity, TsSource
from forensics.parsers.base import ParseContext, Record
from forensics.textdoc import TextDocument

GENERIC_NOTABLE = (b"Error", b"ERROR", b"error:", b"Traceback", b"FATAL", b"Fatal", b"Killed", b"panic")


class PlainTextParser:
    name = "text"
    samples = ("something happened\nRuntimeError: something failed\n",)

    def detect(self, head: list[str]) -> float:
        return 0.01 if head else 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        for line in doc.candidate_lines(ctx.notable + GENERIC_NOTABLE):
            text = line.text.strip()
            if not text:
                continue
            ts = ctx.receipt_ts(line.offset) if ctx.receipt_ts else None
            yield Event(
                ts=ts,
                ts_source=TsSource.RECEIPT if ts is not None else TsSource.NONE,
                source=ctx.source,
                kind="log",
                message=text,
                origin=ctx.origin(line),
                severity=Severity.ERROR if "rror" in text or "Killed" in text else Severity.INFO,
                host=ctx.host,
            )


PARSER = PlainTextParser()
