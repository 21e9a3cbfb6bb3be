"""The ``forensics`` command line.

Exit status of ``analyze``: 0 no failure found, 1 a failure was found, 2 bad usage or
nothing readable, 3 no failure found but some inputs could not be read.
``record`` exits with the child's own status (128+N when a signal N killed it).
Heavy imports (pandas, textual) happen inside the subcommand that needs them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

from forensics import __version__
from forensics.errors import ForensicsError, UsageError

if TYPE_CHECKING:
    from forensics.analysis import Options
    from forensics.progress import ProgressLine

__all__ = ["main"]

EXIT_OK, EXIT_FAILURE_FOUND, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3
SIGNATURES_ENV = "FORENSICS_SIGNATURES"


def _signature_dirs(args: argparse.Namespace) -> list[Path]:
    dirs = [Path(d) for d in (args.signatures or [])]
    env = os.environ.get(SIGNATURES_ENV)
    if env:
        dirs += [Path(d) for d in env.split(os.pathsep) if d]
    return dirs


def _parse_offsets(items: Sequence[str]) -> dict[str, float]:
    offsets: dict[str, float] = {}
    for item in items:
        host, sep, value = item.partition("=")
        try:
            if not sep or not host:
                raise ValueError
            offsets[host] = float(value.removesuffix("s"))
        except ValueError:
            raise UsageError(f"--offset wants HOST=SECONDS (e.g. node2=+3.2s), got {item!r}") from None
    return offsets


def _parse_tz(name: str | None) -> tzinfo | None:
    if not name:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"--tz: unknown time zone {name!r} (use an IANA name such as Europe/Berlin or UTC)") from None


def _analysis_options(args: argparse.Namespace) -> Options:
    from forensics.analysis import Options

    return Options(signature_dirs=_signature_dirs(args), tz=_parse_tz(args.tz), offsets=_parse_offsets(args.offset))


def _progress_line(args: argparse.Namespace) -> ProgressLine | None:
    """The progress bar on stderr, unless ``--quiet`` or stderr is not a terminal."""
    if args.quiet or not sys.stderr.isatty():
        return None
    from forensics.progress import ProgressLine

    return ProgressLine(sys.stderr)


def cmd_analyze(args: argparse.Namespace) -> int:
    from forensics.analysis import analyze, dumps
    from forensics.report import render_text

    line = _progress_line(args)
    try:
        analysis = analyze(args.paths, _analysis_options(args), on_progress=line)
    finally:
        if line is not None:
            line.clear()
    if args.format == "json":
        sys.stdout.write(dumps(analysis) + "\n")
    else:
        sys.stdout.write(render_text(analysis))
    if analysis.failed:
        return EXIT_FAILURE_FOUND
    if all(s.kind in ("unreadable", "binary", "empty") for s in analysis.sources):
        sys.stderr.write("forensics: nothing readable in the inputs\n")
        return EXIT_USAGE
    unreadable = any(s.kind in ("unreadable", "binary") for s in analysis.sources)
    return EXIT_PARTIAL if unreadable else EXIT_OK


def cmd_record(args: argparse.Namespace) -> int:
    from forensics.record import run_record

    return run_record(args)


def cmd_open(args: argparse.Namespace) -> int:
    from forensics.tui import run_app

    return run_app(args.paths, _analysis_options(args))


def cmd_eval(args: argparse.Namespace) -> int:
    if args.transforms is not None:
        from forensics.match.invariance import run_invariance

        names = [n for n in args.transforms.split(",") if n] or None
        return run_invariance([Path(c) for c in args.corpus], names, _signature_dirs(args), verbose=args.verbose)
    from forensics.match.evaluate import run_eval

    return max(run_eval(Path(c), _signature_dirs(args), verbose=args.verbose) for c in args.corpus)


def cmd_lint(args: argparse.Namespace) -> int:
    from forensics.match.lint import run_lint

    return run_lint([Path(d) for d in args.dirs])


def _add_analysis_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="bundle, log file, directory or archive")
    p.add_argument("--signatures", action="append", metavar="DIR",
                   help=f"extra signature directory (repeatable; also ${SIGNATURES_ENV})")
    p.add_argument("--tz", metavar="ZONE", help="time zone of local timestamps without one (IANA name)")
    p.add_argument("--offset", action="append", default=[], metavar="HOST=SECONDS",
                   help="shift one host's clock (overrides the estimated offset)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forensics", description="Why did my multi-GPU training run die?")
    parser.add_argument("--version", action="version", version=f"gpu-forensics {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    rec = sub.add_parser("record", help="run a command and record a crash-safe bundle beside it",
                         description="Run CMD exactly as usual and record a forensic bundle beside it.")
    rec.add_argument("--out", default="forensics-runs", metavar="DIR",
                     help="directory to create the bundle in (default: ./forensics-runs)")
    rec.add_argument("--interval", type=float, default=0.1, metavar="SECONDS",
                     help="NVML sampling interval (default 0.1 s = 10 Hz)")
    rec.add_argument("--no-arm", action="store_true",
                     help="do not set PyTorch's forensic environment variables in the child")
    rec.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    rec.set_defaults(func=cmd_record)

    ana = sub.add_parser("analyze", help="explain a failure from a bundle or any logs")
    _add_analysis_flags(ana)
    ana.add_argument("--format", choices=("text", "json"), default="text")
    ana.add_argument("--quiet", action="store_true", help="no progress on stderr")
    ana.set_defaults(func=cmd_analyze)

    opn = sub.add_parser("open", help="show the post-mortem in a terminal UI")
    _add_analysis_flags(opn)
    opn.set_defaults(func=cmd_open)

    ev = sub.add_parser("eval", help="score the analyzer on a folder of labelled cases")
    ev.add_argument("corpus", nargs="+", metavar="CORPUS_DIR")
    ev.add_argument("--signatures", action="append", metavar="DIR")
    ev.add_argument("--verbose", action="store_true")
    ev.add_argument("--transforms", nargs="?", const="", metavar="NAMES",
                    help="instead of scoring, rewrite each case's text (launcher prefixes, line numbers, quoting, "
                         "CRLF, wrapping, excerpts, chatter, locales, gzip; comma-separated names, all by default) "
                         "and report how often the root cause stays the same; cases, bundles and loose logs")
    ev.set_defaults(func=cmd_eval)

    lint = sub.add_parser("lint-signatures", help="check signature files and report errors with file:line")
    lint.add_argument("dirs", nargs="+", metavar="DIR")
    lint.set_defaults(func=cmd_lint)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except ForensicsError as exc:
        sys.stderr.write(f"forensics: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
