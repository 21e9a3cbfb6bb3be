"""The ``report``, ``diff`` and ``pack`` subcommands: arguments and handlers (light to import; the
work modules load inside the handlers)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from forensics.errors import UsageError

if TYPE_CHECKING:
    from forensics.analysis import Options

__all__ = ["add_commands"]

OptionsOf = Callable[[argparse.Namespace], "Options"]

EPILOG_REPORT = """\
exit status:
  0  the report was written (whatever it concludes)
  2  bad usage, nothing readable in the inputs, a filter that matched nothing, or -o not writable
"""
EPILOG_DIFF = """\
Warnings of either side (inputs cut, skipped or unreadable) are printed on stderr.

exit status:
  0  the comparison was written
  2  bad usage, nothing readable on one side, a filter that matched nothing, or -o not writable
"""
EPILOG_PACK = """\
Only regular files are packed from a bundle: links, FIFOs and devices are never read, a hard link to a
file outside the bundle is left out; a gzip segment that expands like a bomb, or a file over 1 GiB, is
left out and a crash-cut one kept as far as it decompresses — each said on stderr and in REDACTIONS.txt.

exit status:
  0  the archive was written (files left out are listed on stderr and in REDACTIONS.txt)
  2  bad usage, nothing to pack, or the archive could not be written
"""


def _write(text: str, out: str | None) -> None:
    if not out or out == "-":
        sys.stdout.write(text)
        return
    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    sys.stderr.write(f"forensics: wrote {out} ({len(text):,} characters)\n")


def _guess_format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format)
    suffix = Path(args.output or "").suffix.lower()
    return {".html": "html", ".htm": "html", ".json": "json"}.get(suffix, "md")


def cmd_report(args: argparse.Namespace, options_of: OptionsOf) -> int:
    from forensics.analysis import analyze, bundle_facts
    from forensics.postmortem import render_report
    from forensics.text_report import nothing_readable, readable

    analysis = analyze(args.paths, options_of(args))
    if not readable(analysis):
        sys.stderr.write(f"forensics: {nothing_readable(analysis)}\n")
        return 2
    _write(render_report(analysis, bundle_facts(args.paths), _guess_format(args)), args.output)
    return 0


def cmd_diff(args: argparse.Namespace, options_of: OptionsOf) -> int:
    from forensics.analysis import analyze, bundle_facts
    from forensics.escape import terminal
    from forensics.postmortem import diff

    options = options_of(args)
    a, b = analyze(args.a, options), analyze(args.b, options)
    for side, an in (("A", a), ("B", b)):
        if all(s.kind in ("unreadable", "binary", "empty") for s in an.sources):
            raise UsageError(f"nothing readable in {side} ({', '.join(args.a if side == 'A' else args.b)})")
    for side, an in (("A", a), ("B", b)):  # what was cut or skipped on either side bears on the comparison
        for w in an.warnings[:5]:
            sys.stderr.write(f"forensics: {side}: warning: {terminal(w, one_line=True)}\n")
        if len(an.warnings) > 5:
            more = len(an.warnings) - 5
            sys.stderr.write(f"forensics: {side}: {more} more warning(s); forensics analyze shows them\n")
    d = diff.compare(a, bundle_facts(args.a), b, bundle_facts(args.b))
    fmt = args.format or "text"
    text = diff.dumps(d) if fmt == "json" else diff.render_diff_markdown(d) if fmt == "md" else diff.render_diff_text(d)
    _write(text, args.output)
    return 0


def cmd_pack(args: argparse.Namespace, options_of: OptionsOf) -> int:
    from forensics.postmortem.pack import pack, parse_size

    result = pack(args.paths, Path(args.output), anonymize=args.anonymize,
                  max_size=parse_size(args.max_size) if args.max_size else None)
    sys.stderr.write(result.summary() + "\n")
    return 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 add_analysis_flags: Callable[[argparse.ArgumentParser], None], options_of: OptionsOf) -> None:
    """Register ``report``, ``diff`` and ``pack`` on the main parser's subcommands."""
    rep = sub.add_parser("report", help="write a self-contained post-mortem (Markdown, HTML or JSON)",
                         description="The verdict, evidence, remedy, hardware, software, the run and per-GPU "
                                     "metrics in one file; secrets redacted.", epilog=EPILOG_REPORT,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    add_analysis_flags(rep)
    rep.add_argument("--format", choices=("md", "html", "json"),
                     help="default: from -o's suffix (.html, .json), else md")
    rep.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    rep.set_defaults(func=lambda args: cmd_report(args, options_of))

    dif = sub.add_parser("diff", help="what changed between a good run A and a bad run B",
                         description="Compare two runs (bundles or log sets): environment, topology, peak memory "
                                     "and headroom per GPU, pace, findings. Several inputs per side: A1,A2 "
                                     "(comma-separated).", epilog=EPILOG_DIFF,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    dif.add_argument("a", metavar="A", type=lambda s: [p for p in s.split(",") if p], help="good run (path[,path…])")
    dif.add_argument("b", metavar="B", type=lambda s: [p for p in s.split(",") if p], help="bad run (path[,path…])")
    dif.add_argument("--format", choices=("text", "md", "json"), help="default text")
    dif.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    dif.add_argument("--signatures", action="append", metavar="DIR", help="extra signature directory")
    dif.add_argument("--tz", metavar="ZONE", help="time zone of local timestamps without one (IANA name)")
    dif.set_defaults(offset=[], func=lambda args: cmd_diff(args, options_of))

    pk = sub.add_parser("pack", help="one redacted archive of bundles to send to a vendor or a colleague",
                        description="Copy bundles into a .tar.gz with secrets redacted everywhere (also the "
                                    "program's own output), REDACTIONS.txt listing kinds and counts.",
                        epilog=EPILOG_PACK, formatter_class=argparse.RawDescriptionHelpFormatter)
    pk.add_argument("paths", nargs="+", metavar="BUNDLE", help="bundle directory (or a folder of bundles)")
    pk.add_argument("-o", "--output", required=True, metavar="CASE.tar.gz", help="the archive to write")
    pk.add_argument("--anonymize", action="store_true",
                    help="also replace host names, user names, IP addresses and home paths by pseudonyms")
    pk.add_argument("--max-size", metavar="SIZE", help="cap the archive (e.g. 20M); NVML series are downsampled")
    pk.set_defaults(func=lambda args: cmd_pack(args, options_of))
