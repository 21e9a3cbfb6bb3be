"""``forensics fleet PATH... [--scheduler ADDR] [--workers N] [-o fleet.duckdb] [--parquet DIR]``
(light to import: Dask and DuckDB load inside the handler, and their absence is one line)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from forensics.errors import UsageError

__all__ = ["add_command", "cmd_fleet"]

EPILOG = """\
Each bundle (a folder of bundles stands for its bundles; any other folder, a log file or an archive is one
input) is analysed on its own, as `forensics analyze` would, by a Dask worker process. Results go to DuckDB
tables `inputs`, `findings` and `gpus` (docs/fleet.md has the columns and example SQL).

examples:
  forensics fleet /srv/incidents/ -o fleet.duckdb
  forensics fleet /shared/bundles --scheduler tcp://sched:8786 --parquet out/
  duckdb fleet.duckdb "SELECT signature, count(*) FROM findings GROUP BY 1"

Every input is a row of `inputs`, whatever happens to it: one that cannot be read, that DuckDB refuses,
or that is still running at --deadline (killed there) carries its error; the summary is always printed.
Only regular files are read inside a folder or a bundle (a FIFO or a link to /dev/zero is never opened).

exit status:
  0  every input analysed
  2  bad usage (or Dask/DuckDB not installed)
  3  some inputs could not be analysed (their rows in `inputs` carry the error)"""


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``fleet`` on the main parser's subcommands."""
    p = sub.add_parser("fleet", help="analyze thousands of bundles on Dask; results in DuckDB/Parquet",
                       description="Analyze many bundles or log sets in parallel on a Dask cluster (a local one "
                                   "by default) and write one row per finding to DuckDB for SQL.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH", help="bundle, folder of bundles, log file or log folder")
    p.add_argument("--scheduler", metavar="ADDR",
                   help="a running Dask scheduler (tcp://host:8786); its workers need gpu-forensics and the paths")
    p.add_argument("--workers", type=int, metavar="N",
                   help="local worker processes (default: one per CPU core, at least 2)")
    p.add_argument("-o", "--output", default="fleet.duckdb", metavar="FILE",
                   help="DuckDB file to write (tables replaced; default fleet.duckdb)")
    p.add_argument("--parquet", metavar="DIR", help="also write inputs/findings/gpus .parquet files here")
    p.add_argument("--signatures", action="append", metavar="DIR", help="extra signature directory (repeatable)")
    p.add_argument("--tz", metavar="ZONE", help="time zone of local timestamps without one (IANA name)")
    p.add_argument("--deadline", type=float, default=None, metavar="SECONDS",
                   help="kill one input's analysis after this long; it becomes an error row (default 600, 0: none)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_fleet)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    dirs = [str(Path(d).resolve()) for d in (args.signatures or [])]
    env = os.environ.get("FORENSICS_SIGNATURES")
    if env:
        dirs += [str(Path(d).resolve()) for d in env.split(os.pathsep) if d]
    if args.tz:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(args.tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise UsageError(f"unknown time zone: {args.tz}") from None
    from forensics.fleet.tasks import DEADLINE_S

    deadline = DEADLINE_S if args.deadline is None else args.deadline
    if deadline < 0:
        raise UsageError("--deadline must be 0 (none) or a number of seconds")
    return {"signature_dirs": dirs, "tz": args.tz, "deadline_s": deadline}


def cmd_fleet(args: argparse.Namespace) -> int:
    from forensics.fleet.engine import default_workers, require, run_fleet

    require()
    from forensics.fleet.store import FleetStore
    from forensics.fleet.tasks import expand_paths

    missing = [p for p in args.paths if not os.path.lexists(p)]  # a link loop is an input (its row says so)
    if missing:
        raise UsageError(f"no such file or directory: {missing[0]}")
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.scheduler and args.workers is not None:
        raise UsageError("--workers sizes the local cluster; with --scheduler the cluster's own workers run")
    inputs = [os.path.abspath(p) for p in expand_paths(args.paths)]
    options = _options(args)
    workers = args.workers or default_workers()
    store = FleetStore(args.output)
    done = errors = 0
    say = not args.quiet and sys.stderr.isatty()
    started = time.perf_counter()

    reported: set[int] = set()

    def on_results(results: list[dict[str, Any]]) -> None:
        nonlocal done, errors
        results = store.add(results)
        reported.update(int(r["input"]["input_id"]) for r in results)
        done += len(results)
        errors += sum(1 for r in results if r["input"]["error"])
        if say:
            sys.stderr.write(f"\rforensics fleet: {done}/{len(inputs)} inputs")
            sys.stderr.flush()

    run = None
    failure = ""
    try:
        try:
            run = run_fleet(inputs, options, args.scheduler, workers, on_results)
        except UsageError:
            raise
        except Exception as exc:  # the cluster itself failed: what was stored is kept, the rest are rows
            failure = f"{type(exc).__name__}: {exc}"
        missing_rows = [(i, p) for i, p in enumerate(inputs) if i not in reported]
        if missing_rows:
            from forensics.fleet.engine import lost_rows

            on_results(lost_rows(missing_rows, f"not analysed: {failure or 'no result came back'}"))
        wall = time.perf_counter() - started
        if say:
            sys.stderr.write("\n")
        if args.parquet:
            store.to_parquet(args.parquet)
        sys.stdout.write(_summary(store, run, done, errors, wall, args) + "\n")
        if failure:
            sys.stderr.write(f"forensics: the cluster failed: {failure}\n")
    finally:
        store.close()
    return 3 if errors else 0


def _summary(store: Any, run: Any, done: int, errors: int, wall: float, args: argparse.Namespace) -> str:
    """The run in a few lines and the SQL summary, as terminal text (no control or bidi character)."""
    from forensics.escape import terminal
    from forensics.fleet.store import headline, render_sections, summary_sections

    where = ("local cluster" if run.local else f"scheduler {run.scheduler}") if run is not None else "no cluster"
    threads = run.threads if run is not None else 0
    rate = done / wall if wall > 0 else 0.0
    plural = "s" if threads != 1 else ""
    out = [f"{done} inputs on {threads} worker{plural} ({where}) in {wall:.1f} s: "
           f"{rate:.1f} per second, {rate / max(1, threads):.1f} per second per worker"
           + (f"; {errors} could not be analysed" if errors else ""),
           f"tables inputs, findings, gpus in {args.output}" + (f"; Parquet in {args.parquet}" if args.parquet else ""),
           ""]
    lines = headline(store.con)
    if lines:
        out += ["Root causes:"] + [f"  {x}" for x in lines] + [""]
    out.append(render_sections(summary_sections(store.con)))
    return terminal("\n".join(out).rstrip())
