"""The alert channels, each against a real receiver: Apprise's json:// to a local HTTP server this test
starts, --notify-cmd to a real shell command; a channel that hangs is killed at its deadline."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from forensics.live.alerts import Alert
from forensics.live.channels import Channels

pytestmark = pytest.mark.slow


class _Receiver(BaseHTTPRequestHandler):
    got: list[tuple[str, dict[str, object]]] = []
    hang = False
    release: threading.Event

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if type(self).hang:
            type(self).release.wait(30)
        type(self).got.append((self.path, json.loads(body)))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


def _server(hang: bool = False) -> tuple[HTTPServer, type[_Receiver]]:
    handler = type("Receiver", (_Receiver,), {"got": [], "hang": hang, "release": threading.Event()})
    srv = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, handler


def _stop(srv: HTTPServer, handler: type[_Receiver]) -> None:
    """Let a hanging handler go, stop serving and close the listening socket."""
    handler.release.set()
    srv.shutdown()
    srv.server_close()


def _alert() -> Alert:
    return Alert(kind="new", incident="i-0001", key="torch-cuda-oom|rank:2", signature="torch-cuda-oom",
                 title="A GPU ran out of memory (CUDA out of memory)", confidence="high",
                 summary="A GPU ran out of memory on rank 2.", culprit="Culprit: rank 2 · victims: ranks 0, 1, 3",
                 culprits={"rank": ["2"], "gpu": [], "host": []},
                 evidence=[{"ts": None, "origin": "run/stderr.log:7", "source": "stderr", "kind": "traceback",
                            "message": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}],
                 remedy="Lower the batch size", remedies=["Lower the batch size"], first_seen_ns=None,
                 observed_until_ns=time.time_ns(), id="a-0001", time_ns=time.time_ns())


def test_json_webhook_through_apprise_reaches_a_real_server(tmp_path: Path) -> None:
    srv, handler = _server()
    try:
        ch = Channels(jsonl=tmp_path / "live.jsonl", urls=[f"json://127.0.0.1:{srv.server_port}/hook"],
                      run={"host": "node-7", "bundle": "/runs/b"})
        ch.send([_alert()])
        assert ch.wait(30) == 0
        assert [d.ok for d in ch.deliveries] == [True], ch.deliveries
        [(path, body)] = handler.got
        assert path == "/hook"
        assert "torch-cuda-oom" in str(body["title"]) or "out of memory" in str(body["title"])
        assert "Culprit: rank 2" in str(body["message"]) and "Lower the batch size" in str(body["message"])
        [line] = (tmp_path / "live.jsonl").read_text().splitlines()
        assert json.loads(line)["run"]["host"] == "node-7"
    finally:
        _stop(srv, handler)


def test_notify_cmd_gets_the_alert_as_json_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    ch = Channels(commands=[f"cat > {out}"])
    ch.send([_alert()])
    assert ch.wait(30) == 0
    got = json.loads(out.read_text())
    assert got["signature"] == "torch-cuda-oom" and got["culprits"]["rank"] == ["2"]
    assert got["format"] == "gpu-forensics-live" and got["line"].startswith("forensics ALERT")


def test_a_hung_channel_is_killed_at_its_deadline_and_a_failing_one_is_counted(tmp_path: Path) -> None:
    srv, handler = _server(hang=True)
    try:
        ch = Channels(jsonl=tmp_path / "live.jsonl", deadline_s=2.0,
                      urls=[f"json://127.0.0.1:{srv.server_port}/hook"], commands=["sleep 60", "exit 3"])
        start = time.monotonic()
        ch.send([_alert()])  # returns at once: deliveries run on their own
        assert time.monotonic() - start < 1.0
        assert ch.wait(20) == 0
        assert time.monotonic() - start < 15
        by = {d.channel: d for d in ch.deliveries}
        assert by["command sleep 60"].ok is False and "killed" in by["command sleep 60"].why
        assert by["command exit 3"].ok is False and "exit 3" in by["command exit 3"].why
        assert by["apprise"].ok is False
        assert (tmp_path / "live.jsonl").read_text().count("\n") == 1  # the file channel has it regardless
    finally:
        _stop(srv, handler)


def test_a_suppressed_alert_is_only_written_to_the_file(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    a = _alert()
    a.suppressed = "rate limit"
    ch = Channels(jsonl=tmp_path / "live.jsonl", commands=[f"cat > {out}"])
    ch.send([a])
    ch.wait(10)
    assert not out.exists() and ch.deliveries == []
    assert json.loads((tmp_path / "live.jsonl").read_text())["suppressed"] == "rate limit"
