"""``forensics mcp``: the server run as an agent's client runs it (``python -m forensics mcp --root …`` over
stdio), talked to with the official SDK's own client; and its path checks and bounds in-process."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip("mcp")  # the `mcp` extra; in `.[test]`, so CI runs these

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from forensics.analysis import analyze, to_json_dict  # noqa: E402
from forensics.cli import main  # noqa: E402
from forensics.mcp.tools import Roots, ToolInputError, bounded_json, bounded_text  # noqa: E402
from forensics.secrets import REDACTED  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples" / "recorded"
TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123"
PASSWORD = "hunter2-correct-horse"
SECRET_LOG = f"""\
2026-11-30 14:00:00,000 INFO starting with HF_TOKEN={TOKEN}
Traceback (most recent call last):
  File "train.py", line 12, in <module>
    loss.backward()
RuntimeError: CUDA error: an illegal memory access was encountered (db password={PASSWORD})
"""
TOOLS = {"analyze", "report", "diff", "timeline", "explain"}


class Session:
    """One server process and the SDK's client session to it, held by a thread of its own so that
    plain tests can make calls one after another."""

    def __init__(self, args: list[str], cwd: Path, errlog: Path, env: dict[str, str] | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._ready: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.errlog = errlog
        params = StdioServerParameters(command=sys.executable, args=["-m", "forensics", "mcp", *args],
                                       cwd=str(cwd), env=env)
        self._held = asyncio.run_coroutine_threadsafe(self._hold(params), self.loop)
        self.client = self._ready.result(timeout=180)

    async def _hold(self, params: StdioServerParameters) -> None:
        try:
            with self.errlog.open("w") as err:
                async with Client(stdio_client(params, errlog=err), read_timeout_seconds=180) as client:
                    self._stop = asyncio.Event()
                    self._ready.set_result(client)
                    await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        """(is_error, the text) of one tool call."""
        result = asyncio.run_coroutine_threadsafe(self.client.call_tool(name, arguments), self.loop).result(300)
        return bool(result.is_error), "".join(getattr(c, "text", "") for c in result.content)

    def tools(self) -> list[Any]:
        return list(asyncio.run_coroutine_threadsafe(self.client.list_tools(), self.loop).result(60).tools)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._held.result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def _tree(path: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(path)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in path.rglob("*")}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A root with two bundles, a log holding secrets and a link out; a file outside it; a cache home."""
    base = tmp_path_factory.mktemp("mcp")
    root = base / "runs"
    root.mkdir()
    shutil.copytree(SAMPLES / "silent-stall-2gpu" / "bundle", root / "stall")
    shutil.copytree(SAMPLES / "drafter-pipeline-fits" / "bundle", root / "fits")
    shutil.copytree(SAMPLES / "drafter-pipeline-margin" / "bundle", root / "margin")
    (root / "logs").mkdir()
    (root / "logs" / "train.log").write_text(SECRET_LOG)
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.log").write_text("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")
    (root / "escape.log").symlink_to(outside / "secret.log")
    (root / "linked").mkdir()
    (root / "linked" / "dmesg.txt").write_text("[  1.0] hello\n")
    (root / "linked" / "host").symlink_to(outside)
    cache = base / "cache"
    cache.mkdir()
    return {"base": base, "root": root, "outside": outside, "cache": cache}


@pytest.fixture(scope="module")
def server(world: dict[str, Path]) -> Iterator[Session]:
    session = Session(["--root", str(world["root"])], cwd=world["base"], errlog=world["base"] / "server.err",
                      env={"XDG_CACHE_HOME": str(world["cache"])})
    before = _tree(world["root"])
    yield session
    session.close()
    assert _tree(world["root"]) == before, "the server wrote below its root"
    assert list(world["cache"].iterdir()) == [], "the server wrote a cache"
    err = (world["base"] / "server.err").read_text()
    assert "Traceback" not in err, err


# -- over stdio, with the SDK's client ---------------------------------------------------------------

@pytest.mark.slow
def test_the_five_tools_are_listed_read_only(server: Session) -> None:
    tools = {t.name: t for t in server.tools()}
    assert set(tools) == TOOLS
    for t in tools.values():
        assert t.annotations is not None and t.annotations.read_only_hint is True
        assert t.annotations.destructive_hint is False and t.description
    assert tools["timeline"].input_schema["properties"]["limit"]["maximum"] == 500
    assert tools["analyze"].input_schema["required"] == ["paths"]


@pytest.mark.slow
def test_analyze_answers_what_forensics_analyze_prints(server: Session, world: dict[str, Path]) -> None:
    error, text = server.call("analyze", {"paths": ["stall"]})  # relative: from the first root
    assert not error, text
    stall = str(world["root"] / "stall")
    assert json.loads(text) == json.loads(json.dumps(to_json_dict(analyze([stall]))))
    assert json.loads(text)["verdict"]["root_cause"] == "silent-worker-stall"
    error, text = server.call("analyze", {"paths": [stall], "filters": {"ranks": "0", "all": True}})
    assert not error, text
    assert json.loads(text)["timeline"]["notes"][-1].startswith("filtered (rank 0)")
    error, text = server.call("analyze", {"paths": [stall], "filters": {"ranks": [1], "hosts": "vm", "since": "2m"}})
    assert not error, text
    assert "host vm; rank 1" in json.loads(text)["timeline"]["notes"][-1]


@pytest.mark.slow
def test_paths_outside_the_roots_are_refused(server: Session, world: dict[str, Path]) -> None:
    refused = {
        "../outside/secret.log": "outside the allowed roots",
        str(world["outside"] / "secret.log"): "outside the allowed roots",
        "stall/../../outside": "outside the allowed roots",
        "escape.log": "outside the allowed roots",  # a link out, resolved before the check
        "linked": "host is a link to outside the allowed roots",
        "-": "(standard input) is the MCP channel",
        "no-such-bundle": "no such file or directory",
    }
    for path, says in refused.items():
        error, text = server.call("analyze", {"paths": [path]})
        assert error and says in text and "Traceback" not in text, (path, text)
        assert text.count("\n") == 0, text  # one line
    error, text = server.call("timeline", {"paths": ["stall", "../outside"]})
    assert error and "outside the allowed roots" in text


@pytest.mark.slow
def test_bad_input_is_a_tool_error_and_the_server_goes_on(server: Session) -> None:
    bad = [
        ("timeline", {"paths": ["stall"], "query": "/[unclosed/"}, "query: bad regex"),
        ("timeline", {"paths": ["stall"], "limit": 0}, "greater than or equal to 1"),
        ("timeline", {"paths": ["stall"], "limit": 10_000}, "less than or equal to 500"),
        ("timeline", {"paths": ["stall"], "query": "sev:loud"}, "unknown severity"),
        ("analyze", {"paths": ["stall"], "filters": {"since": "when the moon is full"}}, "since: cannot read"),
        ("analyze", {"paths": ["stall"], "filters": {"tz": "Mars/Olympus"}}, "unknown time zone"),
        ("analyze", {"paths": []}, "at least 1 item"),
        ("analyze", {"paths": "stall"}, "valid list"),
        ("analyze", {}, "paths"),
        ("report", {"paths": ["stall"], "format": "pdf"}, "'md', 'json' or 'html'"),
        ("explain", {"signature_id": "silent-worker-stal"}, "did you mean silent-worker-stall"),
        ("nonexistent-tool", {}, "nonexistent-tool"),
    ]
    for name, arguments, says in bad:
        error, text = server.call(name, arguments)
        assert error and says in text and "Traceback" not in text, (name, arguments, text)
    assert {t.name for t in server.tools()} == TOOLS  # still serving
    error, _ = server.call("explain", {"signature_id": "xid-79-fallen-off-bus"})
    assert not error


@pytest.mark.slow
def test_timeline_pages_through_matching_events(server: Session, world: dict[str, Path]) -> None:
    error, text = server.call("timeline", {"paths": ["stall"], "query": "kind:c10d", "limit": 3})
    assert not error, text
    page = json.loads(text)
    assert page["returned"] == 3 and page["total"] > 3 and page["more"] is True
    assert {e["kind"] for e in page["events"]} == {"c10d"}
    every = [e for e in analyze([str(world["root"] / "stall")]).timeline.events if e.kind == "c10d"]
    assert page["total"] == len(every)
    assert [e["origin"] for e in page["events"]] == [str(e.origin) for e in every[:3]]
    error, text = server.call("timeline", {"paths": ["stall"], "query": "kind:c10d", "limit": 500,
                                           "offset": page["total"] - 1})
    last = json.loads(text)
    assert last["returned"] == 1 and last["more"] is False and last["events"][0]["origin"] == str(every[-1].origin)
    error, text = server.call("timeline", {"paths": ["stall"], "query": "rank:1 sev:error", "limit": 5})
    assert not error and all(e["rank"] in (1, None) for e in json.loads(text)["events"])


@pytest.mark.slow
def test_secrets_never_leave_the_server(server: Session) -> None:
    answers = [server.call("analyze", {"paths": ["logs"]}), server.call("timeline", {"paths": ["logs"]}),
               server.call("report", {"paths": ["logs"]}), server.call("report", {"paths": ["logs"], "format": "json"})]
    for error, text in answers:
        assert not error, text
        assert TOKEN not in text and PASSWORD not in text
        assert REDACTED in text
    assert json.loads(answers[0][1])["verdict"]["root_cause"] == "cuda-illegal-memory-access"


@pytest.mark.slow
def test_report_diff_and_explain(server: Session) -> None:
    error, text = server.call("report", {"paths": ["stall"]})
    assert not error and text.startswith("# GPU training post-mortem") and "silent-worker-stall" in text
    error, text = server.call("report", {"paths": ["stall"], "format": "json"})
    assert not error and json.loads(text)["verdict"]["root_cause"] == "silent-worker-stall"
    error, text = server.call("report", {"paths": ["stall"], "format": "html"})
    assert not error and text.lstrip().lower().startswith("<!doctype html")
    error, text = server.call("diff", {"a": ["fits"], "b": ["margin"]})
    assert not error, text
    d = json.loads(text)
    assert d["summary"] and d["b"]["verdict"]["root_cause"] == "silent-worker-stall" and d["memory"]
    error, text = server.call("diff", {"a": ["fits"], "b": ["margin"], "format": "md"})
    assert not error and text.startswith("#")
    error, text = server.call("explain", {"signature_id": "silent-worker-stall"})
    sig = json.loads(text)
    assert not error and sig["id"] == "silent-worker-stall" and sig["remedy"] and sig["evidence"]
    assert sig["file"] == "silent-worker-stall.toml"


@pytest.mark.slow
def test_answers_are_capped(world: dict[str, Path]) -> None:
    session = Session(["--root", str(world["root"]), "--max-chars", "4000"], cwd=world["base"],
                      errlog=world["base"] / "small.err")
    try:
        error, text = session.call("analyze", {"paths": ["stall"]})
        assert not error, text
        assert len(text) <= 4000
        cut = json.loads(text)
        assert "over this server's cap of 4,000" in cut["truncated"]
        assert cut["verdict"]["root_cause"] == "silent-worker-stall"
        error, text = session.call("report", {"paths": ["stall"]})
        assert not error and len(text) <= 4000 and "[cut: the report is" in text
        error, text = session.call("report", {"paths": ["stall"], "format": "html"})
        assert error and "ask for format md or json" in text
    finally:
        session.close()


# -- the command line ---------------------------------------------------------------------------------

def test_mcp_wants_a_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["mcp"])
    assert exit_.value.code == 2 and "--root" in capsys.readouterr().err
    assert main(["mcp", "--root", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == f"forensics: --root {tmp_path / 'missing'}: not a directory\n"
    assert main(["mcp", "--root", str(tmp_path), "--max-chars", "10"]) == 2
    assert "at least 1000" in capsys.readouterr().err


def test_mcp_without_the_extra_says_how_to_install_it(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['mcp'] = None; from forensics.cli import main; "
            f"sys.exit(main(['mcp', '--root', {str(tmp_path)!r}]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr == "forensics: forensics mcp needs the MCP SDK: pip install 'gpu-forensics[mcp]'\n"


# -- in-process: the roots and the bounds -----------------------------------------------------------

def test_roots_resolve_inside_and_refuse_outside(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.log").write_text("x\n")
    twin = tmp_path / "root-evil"  # shares the prefix, not the directory
    twin.mkdir()
    (twin / "y.log").write_text("y\n")
    roots = Roots([str(root)])
    assert roots.resolve(str(root)) == str(root)
    (root / "b").mkdir()
    (root / "b" / "up").symlink_to(tmp_path)
    assert roots.resolve("a/x.log") == str(root / "a" / "x.log")
    assert roots.resolve(str(root / "a" / ".." / "a" / "x.log")) == str(root / "a" / "x.log")
    assert roots.resolve("a") == str(root / "a")
    for bad in (str(twin / "y.log"), "../root-evil/y.log", "b/up/root-evil/y.log", "b/up", "/", "", "-"):
        with pytest.raises(ToolInputError):
            roots.resolve(bad)
    for tree in ("b", ".", str(root)):
        with pytest.raises(ToolInputError, match="up is a link to outside"):
            roots.resolve(tree)


def test_roots_are_resolved_themselves(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "f.log").write_text("f\n")
    (tmp_path / "alias").symlink_to(real)
    roots = Roots([str(tmp_path / "alias")])
    assert roots.dirs == [real]
    assert roots.resolve(str(tmp_path / "alias" / "f.log")) == str(real / "f.log")


def test_bounded_json_cuts_lists_until_it_fits() -> None:
    value = {"verdict": {"root_cause": "x"}, "findings": [{"evidence": ["e" * 50] * 40}] * 40}
    whole = bounded_json(value, 10**6)
    assert json.loads(whole) == value
    cut = bounded_json(value, 3000)
    assert len(cut) <= 3000
    data = json.loads(cut)
    assert data["verdict"] == {"root_cause": "x"} and "cut to its first" in data["truncated"]
    with pytest.raises(ToolInputError, match="even cut down"):
        bounded_json({f"key{i}": i for i in range(500)}, 1000)
    assert TOKEN not in bounded_json({"line": f"token={TOKEN}"}, 1000)


def test_bounded_text_cuts_at_a_line_end() -> None:
    text = "".join(f"line {i}\n" for i in range(1000))
    cut = bounded_text(text, 500, "report")
    assert len(cut) <= 500 and cut.endswith("ask for format json, or a narrower question]\n")
    assert cut.split("\n[cut:")[0].endswith("\n") or cut.startswith("\n[cut:")
    assert bounded_text(f"password={PASSWORD}\n", 500, "report") == f"password={REDACTED}\n"


def test_the_readme_client_configurations_start_this_server() -> None:
    """The JSON and TOML snippets of README's "For agents" run `forensics mcp` with arguments it takes."""
    import tomllib

    from forensics.cli import build_parser

    text = (ROOT / "README.md").read_text()
    section = text.split("\n## For agents: `forensics mcp`", 1)[1].split("\n## ", 1)[0]
    config = json.loads(section.split("```json\n", 1)[1].split("```", 1)[0])["mcpServers"]["gpu-forensics"]
    codex = tomllib.loads(section.split("```toml\n", 1)[1].split("```", 1)[0])["mcp_servers"]["gpu-forensics"]
    claude = next(line for line in section.splitlines() if "claude mcp add" in line).split("--", 1)[1].split("#")[0]
    for command, args in ((config["command"], config["args"]), (codex["command"], codex["args"]),
                          (claude.split()[0], claude.split()[1:])):
        assert Path(command).name == "forensics"
        parsed = build_parser().parse_args(args)
        assert parsed.command == "mcp" and parsed.root
