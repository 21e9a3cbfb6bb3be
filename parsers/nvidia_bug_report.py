"""``nvidia-bug-report.log(.gz)``: many logs in one file, each section between ``____`` rulers and
introduced by the command or file it holds (``/usr/bin/nvidia-smi --query``, ``*** /var/log/kern.log``,
``/usr/bin/lspci -nnvvvxxxx``, ``/bin/dmesg``, ``journalctl -b -0`` …).

Each section's body is detected on its own and handed to that parser (:func:`parse_embedded`, also
used for logs embedded in other records); origins are shifted so they point at the real file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from forensics.parsers.common.base import ParseContext, Record

from forensics.events import Origin
from forensics.ingest.textdoc import Line, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER", "parse_embedded"]

_RULER = lazy_compile(r"^_{20,}\s*$")
_YEAR = lazy_compile(r"^Date:.*\b((?:19|20)\d\d)\s*$")


def parse_embedded(
    doc: TextDocument,
    first: Line,
    end: int,
    ctx: ParseContext,
    exclude: tuple[str, ...] = (),
    min_score: float = 0.0,
    year: int | None = None,
) -> Iterator[Record]:
    """Detect and parse ``doc.data[first.offset:end]`` as a log of its own; its records point at
    the lines of ``doc``. Nothing is produced when no parser (but those in ``exclude``) claims the
    text with at least ``min_score``."""
    sub = TextDocument(doc.data[first.offset:end], doc.path)
    head = sub.head()
    if not head:
        return
    if ctx.detect is None:
        ctx.warn("an embedded log was not read: no format detection was given to the parser", first)
        return
    parser, score = ctx.detect(head, exclude)
    if score < min_score:
        return
    base_receipt = ctx.receipt_ts
    sub_ctx = ParseContext(
        path=ctx.path,
        source=ctx.source,
        host=ctx.host,
        year=year or ctx.year,
        tz=ctx.tz,
        boot_time_ns=ctx.boot_time_ns,
        receipt_ts=(lambda off: base_receipt(off + first.offset)) if base_receipt else None,
        notable=ctx.notable,
        detect=ctx.detect,
    )
    line_shift = first.no - 1
    try:
        for rec in parser.parse(sub, sub_ctx):
            o = rec.origin
            yield replace(rec, origin=Origin(ctx.path, o.line + line_shift, o.offset + first.offset, o.nlines))
    except Exception as exc:  # one broken section costs that section only
        ctx.warn(f"section at line {first.no}: parser {parser.name} failed: {type(exc).__name__}: {exc}")
    for w in sub_ctx.warnings:
        ctx.warn(f"section at line {first.no} ({parser.name}, lines counted from there): {w}")


def _sections(doc: TextDocument) -> Iterator[tuple[str, Line | None, int]]:
    """(header, first body line, end offset) for each ruler-delimited section."""
    header: str | None = None
    body_first: Line | None = None
    last_end = 0
    for line in doc.lines():
        text = line.text
        if _RULER.match(text):
            if header is not None:
                yield header, body_first, last_end
            header, body_first = None, None
            continue
        if header is None:
            if text.strip():
                header = text.strip()
            continue
        if body_first is None:
            if not text.strip() or text.startswith("*** ls:"):
                continue
            body_first = line
        last_end = line.offset + len(line.text.encode()) + 1
    if header is not None:
        yield header, body_first, last_end


class NvidiaBugReportParser:
    name = "nvidia-bug-report"
    samples = (
        # Shape: nvidia-bug-report.sh output (rulers, "Start of NVIDIA bug report log file" banner,
        # command headers); section texts are the real corpus lines of stas00-xid63 and janhq183.
        """____________________________________________

Start of NVIDIA bug report log file.  Please include this file, along
with a detailed description of your problem, when reporting a graphics
driver bug via the NVIDIA Linux forum (see forums.developer.nvidia.com)
or by sending email to 'linux-bugs@nvidia.com'.

nvidia-bug-report.sh Version: 33782476

Date: Wed Jun  7 19:32:10 UTC 2023
uname: Linux node17 5.15.0-72-generic #79-Ubuntu SMP x86_64 x86_64 x86_64 GNU/Linux

____________________________________________

/usr/bin/nvidia-smi --query

==============NVSMI LOG==============

Timestamp                                 : Wed Jun  7 19:32:16 2023
Driver Version                            : 510.73.08
CUDA Version                              : 11.6

Attached GPUs                             : 1
GPU 00000000:10:1C.0
    Product Name                          : NVIDIA A100-SXM4-80GB
    Remapped Rows
        Correctable Error                 : 1
        Uncorrectable Error               : 0
        Pending                           : Yes
        Remapping Failure Occurred        : No

____________________________________________

/sbin/lspci -nnvvvxxxx

10:1c.0 3D controller [0302]: NVIDIA Corporation GA100 [A100 SXM4 80GB] [10de:20b2] (rev a1)
	Capabilities: [78] Express (v2) Endpoint, MSI 00
		LnkCap:	Port #0, Speed 16GT/s, Width x16, ASPM not supported
		LnkSta:	Speed 16GT/s (ok), Width x16 (ok)

____________________________________________
""",
    )

    def detect(self, head: list[str]) -> float:
        text = "\n".join(head[:12])
        if "Start of NVIDIA bug report log file" in text or "nvidia-bug-report.sh Version" in text:
            return 0.99
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        year: int | None = None
        for header, first, end in _sections(doc):
            if first is None:
                continue
            if header.startswith("Start of NVIDIA bug report"):
                for line in doc.lines(first.offset, first.no):
                    if line.offset >= end:
                        break
                    m = _YEAR.match(line.text)
                    if m:
                        year = int(m.group(1))
                continue
            yield from parse_embedded(doc, first, end, ctx, exclude=(self.name,), year=year)


PARSER = NvidiaBugReportParser()
