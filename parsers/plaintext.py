"""Last-resort parser for any text that no specific format claims.

Unknown text is read like process output (a pasted traceback can sit anywhere in it): the
stream scan of ``process_output`` finds tracebacks, CUDA errors, c10d records and the other
framework records, and in addition any line holding a signature anchor (``ctx.notable``) or a
generic error word becomes a ``log`` event. Everything else stays in the file, reachable by offset.
"""

from __future__ import annotations

from collections.abc import Iterator

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.process_output import scan

from forensics.ingest.textdoc import TextDocument


class PlainTextParser:
    name = "text"
    samples = ("backup started\nbackup.sh: error: disk /dev/sdb1 is full\n",)

    def detect(self, head: list[str]) -> float:
        return 0.01 if head else 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        return scan(doc, ctx, generic=True)


PARSER = PlainTextParser()
