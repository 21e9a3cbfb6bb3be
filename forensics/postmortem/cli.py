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

    analysis = analyze(args.paths, options_of(args))
    if all(s.kind in ("unreadable", "binary", "empty") for s in analysis.sources):
        sys.stderr.write("forensics: nothing readable in the inputs\n")
        return 2
    _write(render_report(analysis, bundle_facts(args.paths), _guess_format(args)), args.output)
    return 0


def cmd_diff(args: argparse.Namespace, options_of: OptionsOf) -> int:
    from forensics.analysis import analyze, bundle_facts
    from forensics.postmortem import diff

    options = options_of(args)
    a, b = analyze(args.a, options), analyze(args.b, options)
    for side, an in (("A", a), ("B", b)):
        if all(s.kind in ("unreadable", "binary", "empty") for s in an.sources):
            raise UsageError(f"nothing readable in {side} ({', '.join(args.a if side == 'A' else args.b)})")
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
                                     "metrics in one file; secrets redacted.")
    add_analysis_flags(rep)
    rep.add_argument("--format", choices=("md", "html", "json"),
                     help="default: from -o's suffix (.html, .json), else md")
    rep.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    rep.set_defaults(func=lambda args: cmd_report(args, options_of))

    dif = sub.add_parser("diff", help="what changed between a good run A and a bad run B",
                         description="Compare two runs (bundles or log sets): environment, topology, peak memory "
                                     "and headroom per GPU, pace, findings. Several inputs per side: A1,A2 "
                                     "(comma-separated).")
    dif.add_argument("a", metavar="A", type=lambda s: [p for p in s.split(",") if p], help="good run (path[,path…])")
    dif.add_argument("b", metavar="B", type=lambda s: [p for p in s.split(",") if p], help="bad run (path[,path…])")
    dif.add_argument("--format", choices=("text", "md", "json"), help="default text")
    dif.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    dif.add_argument("--signatures", action="append", metavar="DIR", help="extra signature directory")
    dif.add_argument("--tz", metavar="ZONE", help="time zone of local timestamps without one (IANA name)")
    dif.set_defaults(offset=[], func=lambda args: cmd_diff(args, options_of))

    pk = sub.add_parser("pack", help="one redacted archive of bundles to send to a vendor or a colleague",
                        description="Copy bundles into a .tar.gz with secrets redacted everywhere (also the "
                                    "program's own output), REDACTIONS.txt listing kinds and counts.")
    pk.add_argument("paths", nargs="+", metavar="BUNDLE", help="bundle directory (or a folder of bundles)")
    pk.add_argument("-o", "--output", required=True, metavar="CASE.tar.gz", help="the archive to write")
    pk.add_argument("--anonymize", action="store_true",
                    help="also replace host names, user names, IP addresses and home paths by pseudonyms")
    pk.add_argument("--max-size", metavar="SIZE", help="cap the archive (e.g. 20M); NVML series are downsampled")
    pk.set_defaults(func=lambda args: cmd_pack(args, options_of))
