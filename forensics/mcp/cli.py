"""``forensics mcp --root DIR [--root DIR …]`` (light to import: the MCP SDK loads inside the handler, and
its absence is one line)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from forensics.errors import UsageError

__all__ = ["add_command", "cmd_mcp"]

EPILOG = """\
Speaks MCP over standard input and output: an agent's client starts it (README, "For agents").
Read-only: it reads inputs below the --root directories (links resolved; '..' and links out refused),
writes nothing (not even the compiled-signature cache) and redacts secrets as reports do.

tools: analyze(paths, filters), report(paths, format), diff(a, b, format),
       timeline(paths, query, limit, offset, filters), explain(signature_id)

example:
  forensics mcp --root ~/forensics-runs --root /var/log/gpu

exit status: 0 when the client closes the channel, 2 bad usage (no --root, or the mcp extra missing)."""


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``mcp`` on the main parser's subcommands."""
    p = sub.add_parser("mcp", help="serve the analysis to AI agents (MCP over stdio, read-only)",
                       description="A Model Context Protocol server over stdio: agents call analyze, report,\n"
                                   "diff, timeline and explain on the inputs below the given roots.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", action="append", required=True, metavar="DIR",
                   help="a directory the tools may read below (repeatable); relative paths start at the first")
    p.add_argument("--signatures", action="append", metavar="DIR",
                   help="extra signature directory (repeatable; also $FORENSICS_SIGNATURES)")
    p.add_argument("--max-chars", type=int, default=None, metavar="N",
                   help="longest answer in characters (default 100000, about 25k tokens)")
    p.set_defaults(func=cmd_mcp)


def cmd_mcp(args: argparse.Namespace) -> int:
    from forensics.mcp.tools import DEFAULT_MAX_CHARS, Roots, Tools

    try:
        import mcp  # noqa: F401 - the SDK (the optional extra), checked before anything starts
    except ImportError:
        raise UsageError("forensics mcp needs the MCP SDK: pip install 'gpu-forensics[mcp]'") from None
    max_chars = DEFAULT_MAX_CHARS if args.max_chars is None else args.max_chars
    if max_chars < 1000:
        raise UsageError("--max-chars: at least 1000")
    dirs = [Path(d) for d in (args.signatures or [])]
    env = os.environ.get("FORENSICS_SIGNATURES")
    if env:
        dirs += [Path(d) for d in env.split(os.pathsep) if d]
    roots = Roots(args.root)
    os.environ["FORENSICS_CACHE_DIR"] = ""  # read-only: the compiled signatures are not cached on disk
    from forensics.match import load_signatures

    load_signatures(dirs)  # a bad signature directory is bad usage, said now, not at the first call
    from forensics.mcp.server import serve

    return serve(Tools(roots, dirs, max_chars))
