"""The MCP server: :class:`~forensics.mcp.tools.Tools` registered with the official SDK's ``MCPServer``
and run over stdio. Each tool is read-only (annotated so); any failure is an MCP tool error of one line
(``is_error``), never a crash of the server or a traceback on its standard error."""

import logging
import sys
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field
from typing_extensions import TypedDict  # (pydantic reads typing.TypedDict only from Python 3.12 on)

from forensics import __version__
from forensics.errors import ForensicsError
from forensics.mcp.tools import MAX_LIMIT, ToolInputError, Tools

__all__ = ["INSTRUCTIONS", "build_server", "serve"]

INSTRUCTIONS = """\
gpu-forensics explains why a GPU training run died or slowed down, deterministically, with cited evidence.
Start with `analyze` on a recording bundle (forensics-runs/<bundle>) or any logs (dmesg, journalctl, NCCL,
torchrun output, nvidia-smi, .evtx, archives): it returns the verdict (root cause, consequences, contributing
findings, confidence, culprit and victims) and each finding's evidence with file:line origins; quote those.
`explain` says what a signature id means and what to do; `timeline` lists the merged events around a finding
(filter: host:node-a gpu:6 rank:0-3 kind:xid sev:error words /regex/); `report` is the whole post-mortem;
`diff` compares a good and a bad run. Paths must lie below the server's --root directories; relative paths
are read from the first root. Answers have secrets redacted and are capped in size."""

Paths = Annotated[list[str], Field(min_length=1, max_length=100,
                                   description="bundle directories, log files, directories or archives "
                                               "(read together as one job)")]


class Filters(TypedDict, total=False):
    """The timeline filters of ``forensics analyze``, applied before the signatures read it."""

    since: Annotated[str, Field(description="'2026-11-30 14:00', '2026-11-30T14:00:00Z', or relative to the "
                                            "last event: '30m', '2h'")]
    until: Annotated[str, Field(description="same forms as since")]
    hosts: Annotated[list[str] | str, Field(description="keep these hosts' events (and those naming no host)")]
    ranks: Annotated[list[int] | int | str, Field(description="keep these ranks' events (and those naming "
                                                              "none): 3, [0, 1], '0-3,7'")]
    tz: Annotated[str, Field(description="IANA zone of local timestamps that carry none, e.g. Europe/Berlin")]
    all: Annotated[bool, Field(description="keep every matching evidence line, not the first and last ones")]


_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                             open_world_hint=False)
_log = logging.getLogger("forensics.mcp")


def _answer(name: str, call: Any) -> str:
    """Run a tool; every failure becomes one line for the agent (a :class:`ToolError`)."""
    try:
        result: str = call()
        return result
    except (ToolInputError, ForensicsError) as exc:
        raise ToolError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a bug must cost the call, never the server
        _log.warning("tool %s failed: %s: %s", name, type(exc).__name__, exc)
        raise ToolError(f"{name} failed: {type(exc).__name__}: {exc}") from None


def build_server(tools: Tools) -> MCPServer:
    """An ``MCPServer`` with the five read-only tools bound to ``tools``."""
    server: MCPServer = MCPServer("gpu-forensics", version=__version__, instructions=INSTRUCTIONS,
                                  log_level="WARNING")

    def analyze(paths: Paths, filters: Filters | None = None) -> str:
        """Explain a GPU training failure: the JSON verdict of `forensics analyze --format json` (root cause,
        consequences, contributing findings, confidence, blame; each finding's evidence with file:line)."""
        return _answer("analyze", lambda: tools.analyze(paths, dict(filters or {})))

    def report(paths: Paths, format: Literal["md", "json", "html"] = "md") -> str:  # noqa: A002
        """The whole post-mortem of `forensics report`: verdict, evidence with the raw lines, remedy, what was
        ruled out, hardware and software tables, per-GPU memory/utilization/power."""
        return _answer("report", lambda: tools.report(paths, format))

    def diff(a: Annotated[list[str], Field(min_length=1, max_length=100, description="the good run's paths")],
             b: Annotated[list[str], Field(min_length=1, max_length=100, description="the bad run's paths")],
             format: Literal["json", "md", "text"] = "json") -> str:  # noqa: A002
        """What changed between a good run A and a bad run B (`forensics diff`): environment, versions,
        topology, per-GPU peak memory and headroom, pace, findings, and the sentence that ties them."""
        return _answer("diff", lambda: tools.diff(a, b, format))

    def timeline(paths: Paths,
                 query: Annotated[str, Field(max_length=2000, description=(
                     "filter, fields ANDed: host:node-a gpu:6,7 rank:0-3 source:kmsg kind:xid sev:error, "
                     "words, /regex/; empty for every event"))] = "",
                 limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="events to return")] = 50,
                 offset: Annotated[int, Field(ge=0, description="events to skip (paging)")] = 0,
                 filters: Filters | None = None) -> str:
        """The merged timeline of every source and host (derived detector events included), the events
        matching `query` in time order, `limit` at a time from `offset`, with `total` and `more`."""
        return _answer("timeline", lambda: tools.timeline(paths, query, limit, offset, dict(filters or {})))

    def explain(signature_id: Annotated[str, Field(min_length=1, max_length=200, description=(
            "a finding's `signature`, e.g. xid-79-fallen-off-bus"))]) -> str:
        """What a failure signature means, the evidence it looks for, what to do and references."""
        return _answer("explain", lambda: tools.explain(signature_id))

    for fn in (analyze, report, diff, timeline, explain):
        server.add_tool(fn, annotations=_READ_ONLY, structured_output=False)
    return server


def serve(tools: Tools) -> int:
    """Serve ``tools`` over stdio until the client closes the channel."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="forensics mcp: %(message)s")
    build_server(tools).run("stdio")
    return 0
