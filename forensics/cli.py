"""The ``forensics`` command line.

Exit statuses are in each subcommand's ``--help`` (the ``EPILOG_*`` texts below). Of ``analyze``:
0 no failure found, 1 a failure was found, 2 bad usage or nothing readable, 3 no failure found but
some inputs could not be read. ``record`` exits with the child's own status (128+N when a signal N
killed it).
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
    from forensics.analysis import Analysis, Options
    from forensics.ingest.meter import ProgressLine
    from forensics.timeline.filters import TimelineFilter

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


def _timeline_filter(args: argparse.Namespace, tz: tzinfo | None) -> TimelineFilter | None:
    from forensics.timeline.filters import TimelineFilter, parse_bound, parse_ranks

    since, until = getattr(args, "since", None), getattr(args, "until", None)  # commands without the filters
    hosts = frozenset(h.strip() for item in (getattr(args, "host", None) or []) for h in item.split(",") if h.strip())
    f = TimelineFilter(since=parse_bound(since, "--since", tz) if since else None,
                       until=parse_bound(until, "--until", tz) if until else None,
                       hosts=hosts, ranks=parse_ranks(getattr(args, "rank", None) or []))
    return f if f.active else None


def _analysis_options(args: argparse.Namespace) -> Options:
    from forensics.analysis import Options

    tz = _parse_tz(args.tz)
    return Options(signature_dirs=_signature_dirs(args), tz=tz, offsets=_parse_offsets(args.offset),
                   timeline_filter=_timeline_filter(args, tz))


def _plan(args: argparse.Namespace, mode: str) -> list[list[str]]:
    """The analyses to run: a directory of several bundles stands for its newest unless ``--each`` or
    ``--merge`` (``forensics/ingest/run_dirs.py``); the choice is said on stderr."""
    from forensics.ingest.run_dirs import plan

    p = plan(args.paths, mode)
    for notice in p.notices:
        from forensics.escape import terminal

        sys.stderr.write(f"forensics: {terminal(notice, one_line=True)}\n")  # bundle folder names are input
    return p.groups


def _progress_line(args: argparse.Namespace) -> ProgressLine | None:
    """The progress bar on stderr, unless ``--quiet`` or stderr is not a terminal."""
    if args.quiet or not sys.stderr.isatty():
        return None
    from forensics.ingest.meter import ProgressLine

    return ProgressLine(sys.stderr)


def _status(analysis: Analysis, say: bool = True) -> int:
    if analysis.failed:
        return EXIT_FAILURE_FOUND
    if all(s.kind in ("unreadable", "binary", "empty") for s in analysis.sources):
        if say:
            from forensics.text_report import nothing_readable

            sys.stderr.write(f"forensics: {nothing_readable(analysis)}\n")
        return EXIT_USAGE
    unreadable = any(s.kind in ("unreadable", "binary") for s in analysis.sources)
    return EXIT_PARTIAL if unreadable else EXIT_OK


def _run_analysis(paths: Sequence[str], args: argparse.Namespace, options: Options) -> Analysis:
    from dataclasses import replace

    from forensics.analysis import analyze

    line = _progress_line(args)
    if args.all:  # every matching line on the finding, not the first and last few
        options = replace(options, max_evidence=None)
    try:
        return analyze(paths, options, on_progress=line)
    finally:
        if line is not None:
            line.clear()


def cmd_analyze(args: argparse.Namespace) -> int:
    from forensics.analysis import dumps
    from forensics.colour import write_report
    from forensics.text_report import render_text

    if args.each and args.merge:
        raise UsageError("--each and --merge exclude each other")
    options = _analysis_options(args)
    groups = _plan(args, "each" if args.each else "merge" if args.merge else "newest")
    if not args.each:
        analysis = _run_analysis(groups[0], args, options)
        status = _status(analysis)
        if status == EXIT_USAGE:  # nothing readable: the one line on stderr, no report that reads as healthy
            return status
        if args.format == "json":
            sys.stdout.write(dumps(analysis) + "\n")
        else:
            write_report(render_text(analysis, full=args.all), sys.stdout)
        return status
    return _analyze_each(groups, args, options)


def _analyze_each(groups: list[list[str]], args: argparse.Namespace, options: Options) -> int:
    """``--each``: one analysis per bundle (or path), one summary line each (text) or one entry each (JSON)."""
    from forensics.analysis import JSON_VERSION, to_json_dict
    from forensics.colour import write_report
    from forensics.escape import json_dumps

    statuses: list[int] = []
    runs: list[dict[str, object]] = []
    lines: list[str] = []
    for group in groups:
        analysis = _run_analysis(group, args, options)
        statuses.append(_status(analysis, say=False))
        if args.format == "json":
            runs.append({"paths": group, "status": statuses[-1], "analysis": to_json_dict(analysis)})
        else:
            lines.append(_summary_line(" ".join(group), analysis))
    if args.format == "json":
        sys.stdout.write(json_dumps({"version": JSON_VERSION, "runs": runs}, indent=2) + "\n")
    else:
        write_report("\n".join(lines) + f"\n{len(groups)} run(s) analyzed one by one; "
                     "forensics analyze BUNDLE for the whole report of one\n", sys.stdout)
    for wanted in (EXIT_FAILURE_FOUND, EXIT_PARTIAL, EXIT_OK):
        if wanted in statuses:
            return wanted
    sys.stderr.write("forensics: nothing readable in the inputs\n")
    return EXIT_USAGE


def cmd_record(args: argparse.Namespace) -> int:
    from forensics.live.flags import alert_argv, check_alert_flags
    from forensics.record import run_record

    check_alert_flags(args)
    args.watch_argv = None if args.no_watch else alert_argv(args)
    return run_record(args)


def cmd_watch(args: argparse.Namespace) -> int:
    from forensics.live.watch_cli import run_watch

    return run_watch(args)


def cmd_open(args: argparse.Namespace) -> int:
    from forensics.tui import run_app

    if "-" in args.paths:
        raise UsageError("open cannot read standard input (the terminal UI reads the keyboard there); "
                         "save it to a file first, or use: forensics analyze -")
    options = _analysis_options(args)
    return run_app(_plan(args, "merge" if args.merge else "newest")[0], options, follow=2.0 if args.follow else None)


def cmd_completion(args: argparse.Namespace) -> int:
    """Print the shell's completion script (argcomplete); see README, "Shell completion"."""
    import argcomplete

    sys.stdout.write(argcomplete.shellcode(["forensics"], shell=args.shell))
    return EXIT_OK


def cmd_eval(args: argparse.Namespace) -> int:
    if args.transforms is not None:
        from forensics.evaluation.invariance import run_invariance

        names = [n for n in args.transforms.split(",") if n] or None
        return run_invariance([Path(c) for c in args.corpus], names, _signature_dirs(args), verbose=args.verbose)
    from forensics.evaluation.evaluate import run_eval

    return max(run_eval(Path(c), _signature_dirs(args), verbose=args.verbose) for c in args.corpus)


def cmd_catalogs(args: argparse.Namespace) -> int:
    from forensics.evaluation import coverage

    rows = coverage.figures(probes=args.probes)
    render = {"text": coverage.render_text, "md": coverage.render_markdown, "json": coverage.render_json}
    sys.stdout.write(render[args.format](rows))
    return 0


def cmd_lint(args: argparse.Namespace) -> int:
    from forensics.evaluation.lint import run_lint

    return run_lint([Path(d) for d in args.dirs])


def _add_analysis_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="bundle, log file, directory or archive; - reads standard input")
    p.add_argument("--signatures", action="append", metavar="DIR",
                   help=f"extra signature directory (repeatable; also ${SIGNATURES_ENV})")
    p.add_argument("--tz", metavar="ZONE", help="time zone of local timestamps without one (IANA name)")
    p.add_argument("--offset", action="append", default=[], metavar="HOST=SECONDS",
                   help="shift one host's clock (overrides the estimated offset)")
    f = p.add_argument_group("filters (applied to the timeline before the signatures read it)")
    f.add_argument("--since", metavar="TIME",
                   help="only events at or after TIME: '2026-11-30 14:00' (zone of --tz, else UTC), "
                        "'2026-11-30T14:00Z', or relative to the last event: '2h', '30m ago', '1h30m'")
    f.add_argument("--until", metavar="TIME", help="only events at or before TIME (same forms as --since)")
    f.add_argument("--host", action="append", metavar="HOST",
                   help="only this host's events and those naming no host (repeatable, or a,b)")
    f.add_argument("--rank", action="append", metavar="RANKS",
                   help="only these ranks' events and those naming no rank, e.g. 3 or 0-3,7 (repeatable)")
    p.add_argument("--merge", action="store_true",
                   help="a directory of several bundles is one job: read them all together "
                        "(default: only the newest bundle)")


EPILOG_ANALYZE = """\
A directory that holds several bundles (forensics-runs/) stands for its newest bundle;
--each analyzes every bundle on its own, --merge reads them all as one job.

examples:
  forensics analyze forensics-runs/
  dmesg | forensics analyze -
  forensics analyze --since '30m ago' --rank 3 node*.log

exit status:
  0  no failure found
  1  a failure was found (with --each: in at least one run)
  2  bad usage, nothing readable in the inputs (one line on stderr, nothing on stdout),
     or a filter (--host, --rank, --since, --until) that matched nothing (the line says what exists)
  3  no failure found, but some inputs could not be read

A folder is read for its logs: source code, Markdown/README, TOML/YAML/JSON configs and images
found in it are skipped and counted (name a file to read it anyway).
"""
EPILOG_RECORD = """\
While CMD runs, a watcher process (low priority) reads the bundle as it grows and tells
what goes wrong: one line on stderr between CMD's lines when stderr is a terminal
(--announce: also through a pipe; --quiet: never), always in <bundle>/live.jsonl, and
through --notify / --notify-cmd. --no-watch turns it off.

exit status: the child's own (128+N when signal N killed it); 2 when the recording
could not start (bad --out, command not found). The bundle's path is printed on stderr
at the start and the end when stderr is a terminal (--announce: always; --quiet: never).
"""
EPILOG_WATCH = """\
examples:
  forensics watch train.log                      # a run started without forensics record
  forensics watch --notify 'ntfy://my-topic' logs/
  forensics watch --notify-cmd 'jq .line >> alerts.txt' forensics-runs/<bundle>

Rotated logs (copytruncate or rename) and new files in a directory are followed.

exit status:
  0  stopped (Ctrl-C, --duration, --exit-when-done) without an alert
  1  stopped after at least one alert
  2  bad usage
"""
EPILOG_OPEN = """\
exit status:
  0  the UI was closed
  2  bad usage, nothing readable in the inputs (the one line, no UI), a filter that matched
     nothing, the inputs could not be analyzed, or the UI itself failed
"""
EPILOG_EVAL = """\
Each case is a folder with case.toml (the primary signature wanted, optionally a [culprit] table:
ranks, gpus, hosts, pids) and its logs. forensics eval tests/corpus --transforms culprit rewrites each
case into the shapes workers come in and reports root and culprit invariance per transform.

exit status:
  0  every case was analyzed (the scores are printed; a miss is not an error)
  1  some case could not be analyzed
  2  bad usage (no case folders, bad signature directory)
"""
EPILOG_CATALOGS = """\
exit status:
  0  the figures were printed
  2  bad usage
"""

EPILOG_LINT = """\
exit status:
  0  no errors (warnings may be printed)
  1  at least one error, printed as FILE:LINE: message
  2  bad usage
"""
EPILOG_COMPLETION = """\
bash:  eval "$(forensics completion bash)"            (in ~/.bashrc)
zsh:   eval "$(forensics completion zsh)"             (in ~/.zshrc)
fish:  forensics completion fish | source             (in ~/.config/fish/config.fish)

exit status: 0, or 2 for a shell it does not know
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forensics", description="Why did my multi-GPU training run die?")
    parser.add_argument("--version", action="version", version=f"gpu-forensics {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    fmt = argparse.RawDescriptionHelpFormatter
    from forensics.live.flags import add_alert_flags

    rec = sub.add_parser("record", help="run a command and record a crash-safe bundle beside it",
                         description="Run CMD exactly as usual and record a forensic bundle beside it.",
                         epilog=EPILOG_RECORD, formatter_class=fmt)
    rec.add_argument("--out", default="forensics-runs", metavar="DIR",
                     help="directory to create the bundle in (default: ./forensics-runs)")
    rec.add_argument("--interval", type=float, default=0.1, metavar="SECONDS",
                     help="NVML sampling interval (default 0.1 s = 10 Hz)")
    rec.add_argument("--no-arm", action="store_true",
                     help="do not set PyTorch's forensic environment variables in the child")
    said = rec.add_mutually_exclusive_group()
    said.add_argument("--announce", action="store_true",
                      help="print the bundle's path on stderr even when it is not a terminal")
    said.add_argument("--quiet", action="store_true", help="never print the bundle's path on stderr")
    rec.add_argument("--no-watch", action="store_true",
                     help="no live watcher: the bundle is only explained afterwards (forensics analyze)")
    add_alert_flags(rec)
    rec.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...",
                     help="the command to run, after --, exactly as you would run it")
    rec.set_defaults(func=cmd_record)

    wat = sub.add_parser("watch", help="watch a run that is going: log files, a directory of logs, a bundle",
                         description="Follow log files, a directory of logs or a bundle being written, and tell "
                                     "what goes wrong while the run goes on (the same verdict as analyze).",
                         epilog=EPILOG_WATCH, formatter_class=fmt)
    wat.add_argument("paths", nargs="+", metavar="PATH",
                     help="a log file (it may not exist yet), a directory of logs, or a bundle being recorded")
    wat.add_argument("--signatures", action="append", metavar="DIR",
                     help=f"extra signature directory (repeatable; also ${SIGNATURES_ENV})")
    add_alert_flags(wat)
    wat.add_argument("--format", choices=("text", "json"), default="text",
                     help="each alert as one line of text (default) or one JSON object (docs/live.md)")
    wat.add_argument("--jsonl", metavar="FILE", help="also append each alert to FILE as a JSON line")
    wat.add_argument("--from-end", action="store_true",
                     help="start at the end of the files already there (default: read them from the start)")
    wat.add_argument("--exit-when-done", action="store_true",
                     help="stop once every bundle followed has finished recording")
    wat.add_argument("--duration", type=float, metavar="SECONDS", help="stop after this long")
    wat.add_argument("--time-scale", type=float, default=1.0, help=argparse.SUPPRESS)  # accelerated replays
    wat.add_argument("--stats", metavar="FILE", help=argparse.SUPPRESS)  # the watcher's figures (bench/)
    wat.set_defaults(func=cmd_watch)

    ana = sub.add_parser("analyze", help="explain a failure from a bundle or any logs",
                         description="Explain a failure from bundles or any logs, with the lines that prove it.",
                         epilog=EPILOG_ANALYZE, formatter_class=fmt)
    _add_analysis_flags(ana)
    ana.add_argument("--each", action="store_true",
                     help="analyze every bundle (or PATH) on its own: one summary line each")
    ana.add_argument("--format", choices=("text", "json"), default="text",
                     help="text for people (default), or JSON (schema: docs/analyze.schema.json)")
    ana.add_argument("--all", action="store_true",
                     help="show every matching line, file and warning where the text report elides them")
    ana.add_argument("--quiet", action="store_true", help="no progress on stderr")
    ana.set_defaults(func=cmd_analyze)

    opn = sub.add_parser("open", help="show the post-mortem in a terminal UI",
                         description="Show the post-mortem in a terminal UI (press ? in it for the keys).",
                         epilog=EPILOG_OPEN, formatter_class=fmt)
    _add_analysis_flags(opn)
    opn.add_argument("--follow", action="store_true",
                     help="a run still being recorded: look again every 2 s, new findings shown as they come")
    opn.set_defaults(func=cmd_open)

    from forensics.postmortem.cli import add_commands

    add_commands(sub, _add_analysis_flags, _analysis_options)

    from forensics.fleet.cli import add_command as add_fleet

    add_fleet(sub)

    from forensics.mcp.cli import add_command as add_mcp

    add_mcp(sub)

    ev = sub.add_parser("eval", help="score the analyzer on a folder of labelled cases",
                        description="Score the analyzer on a folder of labelled cases: top-1/top-3 accuracy, "
                                    "false alarms, and the culprit score over cases with a [culprit] table.",
                        epilog=EPILOG_EVAL, formatter_class=fmt)
    ev.add_argument("corpus", nargs="+", metavar="CORPUS_DIR",
                    help="folder of case folders, each with case.toml and its logs (e.g. tests/corpus); "
                         "with --transforms also bundles and loose logs")
    ev.add_argument("--signatures", action="append", metavar="DIR",
                    help=f"extra signature directory (repeatable; also ${SIGNATURES_ENV})")
    ev.add_argument("--verbose", action="store_true",
                    help="one line per case: ok/MISS, wanted and found signature, confidence")
    ev.add_argument("--transforms", nargs="?", const="", metavar="NAMES",
                    help="instead of scoring, rewrite each case's text (launcher prefixes, line numbers, quoting, "
                         "CRLF, wrapping, excerpts, chatter, locales, gzip; 'culprit': one paste, ranks only in the "
                         "message, other launchers' labels, shuffled and scaled ranks; comma-separated names, all "
                         "by default) and report how often the root cause and the culprit stay the same; cases, "
                         "bundles and loose logs")
    ev.set_defaults(func=cmd_eval)

    lint = sub.add_parser("lint-signatures", help="check signature files and report errors with file:line",
                          description="Check signature files: schema, regexes, ids, and that every example "
                                      "fires (or stays silent) as it says.", epilog=EPILOG_LINT, formatter_class=fmt)
    lint.add_argument("dirs", nargs="+", metavar="DIR",
                      help="signature directory or .toml file (e.g. signatures/)")
    lint.set_defaults(func=cmd_lint)

    cat = sub.add_parser("catalogs", help="what the producers' message catalogues cover",
                         description="Per producer (NCCL, PyTorch, CUDA, the NVIDIA driver, DCGM …): the pinned "
                                     "version, messages, error-level messages that map to a signature or only to a "
                                     "class, and the coverage (docs/catalogs.md).",
                         epilog=EPILOG_CATALOGS, formatter_class=fmt)
    cat.add_argument("--probes", action="store_true",
                     help="also run each catalogue's probe lines (from a checkout's tests/data/catalogs) through "
                          "the analysis")
    cat.add_argument("--format", choices=("text", "md", "json"), default="text", help="output format")
    cat.set_defaults(func=cmd_catalogs)

    comp = sub.add_parser("completion", help="print the shell completion script (bash, zsh or fish)",
                          description="Print the tab-completion script for your shell (argcomplete).",
                          epilog=EPILOG_COMPLETION, formatter_class=fmt)
    comp.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell to complete in")
    comp.set_defaults(func=cmd_completion)
    return parser


def _complete(parser: argparse.ArgumentParser) -> None:
    """Answer a completion request from the shell (argcomplete sets _ARGCOMPLETE) and exit."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    argcomplete.autocomplete(parser)


#: numpy's BLAS starts a thread per CPU when it is imported; the analyzer never multiplies a matrix, and
#: on a 16-CPU machine those threads' spinning cost more CPU than reading a 100 MB log.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def quiet_blas_threads() -> None:
    """One BLAS thread (unless the user chose otherwise), set before numpy is first imported."""
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


#: Subcommands that run the analyzer in this process.
_ANALYZING = frozenset({"analyze", "open", "report", "diff", "pack", "eval", "mcp"})


def _import_analyzer() -> None:
    """Import the analyzer (parsers, signatures' loader, matcher) with the garbage collector paused,
    then freeze what the imports made: ~10^5 objects that live as long as the process, which every
    full collection of a long analysis would otherwise walk again. (Saves ~15 % of the imports' time
    and a few tens of milliseconds per 100 MB analyzed.)"""
    import gc

    gc.disable()
    try:
        import forensics.analysis  # noqa: F401
    finally:
        gc.freeze()
        gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    _complete(parser)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.command != "record":  # the recorded command inherits the environment: leave it as it was
        quiet_blas_threads()
        if args.command in _ANALYZING:
            if argv is None:  # run as the program (a caller of main(argv) keeps its one process)
                from forensics.ingest.map_guard import guard

                guard([*getattr(args, "paths", ()), *getattr(args, "a", ()), *getattr(args, "b", ())])
            _import_analyzer()
    try:
        return int(args.func(args))
    except ForensicsError as exc:  # one line, whatever an input put in it (a host name from a filter's answer)
        from forensics.escape import terminal

        sys.stderr.write(f"forensics: {terminal(str(exc), one_line=True)}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())


def _summary_line(name: str, analysis: Analysis) -> str:
    """One line for ``--each``: the run, how it ended (when recorded), and the verdict."""
    v = analysis.verdict
    parts = [name]
    for rec in analysis.recordings[:1]:
        ended = rec.get("status") or "?"
        if rec.get("signal"):
            ended += f", signal {rec['signal']}"
        elif rec.get("exit_code") is not None:
            ended += f", exit {rec['exit_code']}"
        parts.append(f"[{ended}]")
    if v.root_cause is not None:
        parts.append(f"ROOT CAUSE: {v.root_cause.title} ({v.root_cause.signature}, {v.confidence} confidence)")
    else:
        parts.append(f"no failure found ({v.confidence} confidence)")
    return "  ".join(parts)
