"""One paste, several sources: a text holding kernel lines and a program's output is read as both.

People paste ``dmesg`` and the training log into one issue, one file, one chat message. Detection
picks one format for the whole text, so the other's lines were read by the wrong reader: an Xid line
read as process output names no GPU, and the join from the GPU to the rank that used it is lost.

:func:`parse_paste` splits such a text before parsing: the *kernel lines* (a kernel log's stamp —
``[ 1234.567890]``, ``dmesg -T``'s ``[Thu May 14 03:12:01 2026]``, ``dmesg --time-format iso``, a syslog
``host kernel:`` — or a kernel subsystem's words at the line's start, ``NVRM:``, ``pcieport``,
``Out of memory: Killed process`` …) form one document, the other lines another, each with the other
part's bytes blanked (offsets and line numbers stay, so every event points at its raw line). Each part
is detected again on its own lines and parsed by its reader; the events are merged in file order.

Split only when the text was detected as one family and holds lines of the other: a process-output
or plain-text paste with a kernel line, or a kernel log with lines that are no kernel's. A file
detected as anything else (a journal, syslog, a bug report, JSON) is read as before.
"""

from __future__ import annotations

import re

from forensics.parsers.common.base import ParseContext, Parser
from forensics.parsers.common.guard import Parsed, parse_guarded

from forensics.ingest.textdoc import Data, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["KERNEL_KINDS", "STREAM_KINDS", "kernel_lines", "parse_paste"]

#: Formats of a program's output (what a training log is detected as).
STREAM_KINDS = frozenset({"process-output", "plaintext", "slurm", "nccl-debug"})
#: Kernel log formats whose every line is the kernel's (a journal or syslog holds user space too).
KERNEL_KINDS = frozenset({"dmesg", "dmesg-ctime", "dmesg-iso", "dmesg-delta", "kmsg"})
#: Pastes above this are not split (a big log is one program's output or one kernel's).
MAX_BYTES = 64 << 20
_STAMP = (rb"(?:<\d>)?(?:\[\s*\d+\.\d+\]"  # dmesg
          rb"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\]"  # dmesg -T
          rb"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:?\d\d"  # dmesg --time-format iso
          rb"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]+ kernel:)")
_WORDS = (rb"(?:NVRM: |nvidia-\w+ |nvidia \d{4}:|pcieport \d{4}:|pci \d{4}:|Out of memory: Killed process|"
          rb"oom-kill:|oom_reaper:|\w+ invoked oom-killer|INFO: task \S+ blocked|watchdog: BUG: soft lockup|"
          rb"DMAR: |AMD-Vi: |\{\d+\}\[Hardware Error\]|mce: |EDAC |nvidia-nvswitch\d*: |NVRM:)")
#: A kernel line: a kernel stamp first, or a kernel subsystem's words at the start.
_KERNEL = lazy_compile(rb"^[ \t]*(?:" + _STAMP + rb"|" + _WORDS + rb")", re.M)


def kernel_lines(data: Data) -> list[tuple[int, int]]:
    """(start, end) of every kernel line of ``data`` (see the module docstring)."""
    out = []
    for m in _KERNEL.finditer(data):
        end = data.find(b"\n", m.start())
        out.append((m.start(), len(data) if end < 0 else end))
    return out


#: Every byte but a newline becomes a space: a document of blank lines with the same line breaks.
_BLANK = bytes(10 if b == 10 else 32 for b in range(256))


def _only(data: Data, spans: list[tuple[int, int]]) -> bytes:
    """``data`` with every byte outside ``spans`` blanked (newlines kept: offsets and line numbers stay)."""
    out = bytearray(data[:].translate(_BLANK))
    for start, end in spans:
        out[start:end] = data[start:end]
    return bytes(out)


def _split(doc: TextDocument, parser: Parser, ctx: ParseContext) -> list[tuple[Parser, TextDocument]] | None:
    if ctx.detect is None or len(doc) > MAX_BYTES:
        return None
    if parser.name not in STREAM_KINDS and parser.name not in KERNEL_KINDS:
        return None
    data = doc.data if isinstance(doc.data, bytes) else doc.data[:]  # (a mapped file: at most MAX_BYTES copied)
    kernel = kernel_lines(data)
    if not kernel:
        return None
    lines = data.count(b"\n") + (0 if data[-1:] == b"\n" else 1)
    other = lines - len(kernel) - data.count(b"\n\n") - (1 if data[:1] == b"\n" else 0)  # (blank lines left out)
    if other < (2 if parser.name in KERNEL_KINDS else 1):  # a kernel log with a stray line stays one
        return None
    kernel_doc = TextDocument(_only(data, kernel), doc.path, doc.encoding)
    other_doc = doc.without(kernel)
    if not other_doc.head():
        return None
    kparser, _ = ctx.detect(kernel_doc.head(), ())
    oparser = parser if parser.name in STREAM_KINDS else ctx.detect(other_doc.head(), tuple(KERNEL_KINDS))[0]
    if kparser.name in STREAM_KINDS or oparser.name in KERNEL_KINDS:  # the lines do not read as two sources
        return None
    return [(kparser, kernel_doc), (oparser, other_doc)]


def parse_paste(parser: Parser, doc: TextDocument, ctx: ParseContext) -> Parsed:
    """Every record of ``doc``: of each source a paste holds, read by that source's parser."""
    parts = _split(doc, parser, ctx)
    if parts is None:
        return parse_guarded(parser, doc, ctx)
    out = Parsed()
    for part_parser, part in parts:
        parsed = parse_guarded(part_parser, part, ctx)
        doc.truncated_lines = max(doc.truncated_lines, part.truncated_lines)
        out.events += parsed.events
        out.metrics += parsed.metrics
        out.warnings += parsed.warnings
        out.error = out.error or parsed.error
    out.events.sort(key=lambda e: e.origin.offset)
    out.parts = [f"one paste of {len(parts)} sources split: " + " + ".join(p.name for p, _ in parts)]
    return out
