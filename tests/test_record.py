"""The recorder runs the child as if it were not there: exit status, signals, output bytes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from recorder_helpers import bundle, env, manifest, recorder_argv, run

PY = sys.executable


@pytest.mark.parametrize("code", [0, 3])
@pytest.mark.slow
def test_exit_code_passes_through(tmp_path: Path, code: int) -> None:
    res = run(tmp_path, PY, "-c", f"import sys; print('hi'); sys.exit({code})")
    assert res.returncode == code
    assert res.stdout == b"hi\n"
    m = manifest(tmp_path)
    assert m["status"] == "finished" and m["exit_code"] == code and m["signal"] is None
    assert m["format"] == "gpu-forensics-bundle" and m["version"] == 1


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGABRT, signal.SIGSEGV])
@pytest.mark.slow
def test_child_killed_by_signal_gives_128_plus_n(tmp_path: Path, sig: signal.Signals) -> None:
    code = ("import os, resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); "
            f"os.kill(os.getpid(), {int(sig)})")
    res = run(tmp_path, PY, "-c", code)
    assert res.returncode == 128 + sig
    m = manifest(tmp_path)
    assert m["status"] == "finished" and m["signal"] == sig and m["signal_name"] == sig.name
    assert m["exit_code"] is None


HANDLER = """
import signal, sys, time
def on(sig, frame):
    print(f"child got {signal.Signals(sig).name}", flush=True)
    sys.exit(0)
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, on)
print("ready", flush=True)
time.sleep(30)
print("not interrupted", flush=True)
sys.exit(5)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.slow
def test_signal_to_recorder_reaches_child_once(tmp_path: Path, sig: signal.Signals) -> None:
    proc = subprocess.Popen(recorder_argv(tmp_path, PY, "-c", HANDLER), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env(), stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == f"child got {sig.name}\n".encode()
    b = bundle(tmp_path)
    assert (b / "stdout.log").read_bytes() == f"ready\nchild got {sig.name}\n".encode()
    m = manifest(tmp_path)
    assert m["forwarded_signals"] == [sig.name]
    assert m["exit_code"] == 0


JUNK = r"""
import os, sys
out, err = sys.stdout.buffer, sys.stderr.buffer
out.write(bytes(range(256)) * 3)
err.write(b"warning: \x1b[31mred\x1b[0m\n")
for i in range(300):
    out.write(b"\rprogress %d%%" % (i % 101))
out.write(b"\n" + b"x" * 70000 + b"\n")
out.flush()
for i in range(20000):
    out.write(b"line %d of a chatty log\n" % i)
err.write(b"no newline at the end")
"""


@pytest.mark.slow
def test_output_is_byte_for_byte_what_the_child_wrote(tmp_path: Path) -> None:
    direct = subprocess.run([PY, "-c", JUNK], capture_output=True, timeout=60)
    res = run(tmp_path / "out", PY, "-c", JUNK)
    assert res.returncode == direct.returncode == 0
    assert res.stdout == direct.stdout
    assert res.stderr == direct.stderr
    b = bundle(tmp_path / "out")
    assert (b / "stdout.log").read_bytes() == direct.stdout
    assert (b / "stderr.log").read_bytes() == direct.stderr
    assert len(direct.stdout) > 500_000


@pytest.mark.slow
def test_bad_usage_is_one_line_and_leaves_no_bundle(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    for args, expect in (([], "no command"), (["definitely-not-a-command-xyz"], "command not found"),
                         (["./missing.sh"], "command not found")):
        res = subprocess.run([PY, "-m", "forensics", "record", "--out", str(out), "--", *args], capture_output=True,
                             env=env(), timeout=30)
        assert res.returncode == 2
        assert res.stderr.decode().count("\n") == 1 and expect in res.stderr.decode()
        assert b"Traceback" not in res.stderr
    assert not out.exists()
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    res = subprocess.run([PY, "-m", "forensics", "record", "--out", str(blocker / "sub"), "--", "true"],
                         capture_output=True, env=env(), timeout=30)
    assert res.returncode == 2 and res.stderr.decode().count("\n") == 1
    assert "cannot create a bundle" in res.stderr.decode()
    res = subprocess.run([PY, "-m", "forensics", "record", "--interval", "0", "--", "true"], capture_output=True,
                         env=env(), timeout=30, cwd=tmp_path)
    assert res.returncode == 2 and "--interval" in res.stderr.decode()
    assert not (tmp_path / "forensics-runs").exists()


@pytest.mark.slow
def test_command_that_cannot_execute_leaves_a_bundle_marked_as_such(tmp_path: Path) -> None:
    script = tmp_path / "bad.sh"
    script.write_bytes(b"\x7fELF garbage, not a program")
    script.chmod(0o755)
    res = run(tmp_path / "out", str(script))
    assert res.returncode == 2
    assert res.stderr.decode().count("\n") == 1 and "cannot run" in res.stderr.decode()
    m = manifest(tmp_path / "out")
    assert m["status"] == "failed-to-start" and "cannot run" in m["error"]


@pytest.mark.slow
def test_child_environment_is_armed_unless_set_or_disabled(tmp_path: Path) -> None:
    show = "import os\nfor k in ('TORCHELASTIC_ERROR_FILE', 'TORCH_NCCL_TRACE_BUFFER_SIZE', 'PYTHONFAULTHANDLER'):\n" \
           "    print(os.environ.get(k))"
    res = run(tmp_path / "a", PY, "-c", show, TORCH_NCCL_TRACE_BUFFER_SIZE="123")
    error_file, buffer, faulthandler = res.stdout.decode().splitlines()
    b = bundle(tmp_path / "a")
    assert error_file == str(b / "torch" / "elastic-error.json")
    assert buffer == "123" and faulthandler == "1"
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in manifest(tmp_path / "a")["armed"]
    res = run(tmp_path / "b", PY, "-c", show, extra=("--no-arm",))
    assert res.stdout.decode().splitlines() == ["None", "None", "None"]
    assert manifest(tmp_path / "b")["armed"] == {}


SECRETS = {
    "HF_TOKEN": "hf_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY",
    "DB_PASSWORD": "correct-horse-battery",
    "PIP_INDEX_URL": "https://alice:s3cr3tpass@pypi.corp.example/simple",
}


@pytest.mark.slow
def test_secrets_in_env_and_argv_never_reach_the_bundle(tmp_path: Path) -> None:
    res = run(tmp_path, PY, "-c", "print('ok')", "--token", "tok-ARGV-1111", "--api-key=ARGV-KEY-2222",
              "wandb.api_key=ARGV-KEY-3333", "https://bob:ARGV-PASS-4444@host/x", **SECRETS)
    assert res.returncode == 0
    leaked = [*SECRETS.values(), "s3cr3tpass", "tok-ARGV-1111", "ARGV-KEY-2222", "ARGV-KEY-3333", "ARGV-PASS-4444"]
    b = bundle(tmp_path)
    for path in b.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in leaked:
                assert secret.encode() not in data, f"{secret} leaked into {path.name}"
    env_json = (b / "host" / "env.json").read_text()
    assert "pypi.corp.example" in env_json and "HF_TOKEN" in env_json


CHATTY = """
import os, sys, time
side = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
i = 0
while True:
    line = f"line {i}\\n"
    sys.stdout.write(line); sys.stdout.flush()  # goes on after the recorder's death (the keeper); the test ends it
    os.write(side, f"{time.time()} {line}".encode())
    i += 1
    time.sleep(0.02)
"""


@pytest.mark.slow
def test_recorder_sigkilled_leaves_a_readable_interrupted_bundle(tmp_path: Path) -> None:
    side = tmp_path / "printed.txt"
    out = tmp_path / "out"
    proc = subprocess.Popen(recorder_argv(out, PY, "-c", CHATTY, str(side)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env(), stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    for _ in range(60):
        proc.stdout.readline()
    time.sleep(1.2)  # at least one heartbeat
    killed_at = time.time()
    proc.kill()
    proc.wait(timeout=10)
    b = bundle(out)
    m = manifest(out)
    child = m["child_pid"]
    with_suppress_kill(child)
    proc.communicate(timeout=30)  # EOF: the keeper passed the output on to the child's end, then left
    assert m["status"] == "running"
    recorded = (b / "stdout.log").read_bytes()
    printed = [ln.split(" ", 1) for ln in side.read_text().splitlines()]
    due = [text for t, text in printed if float(t) < killed_at - 1.0]
    assert len(due) > 50
    for text in due:
        assert f"{text}\n".encode() in recorded
    from forensics.analysis import analyze

    analysis = analyze([str(b)])
    [rec] = analysis.recordings
    assert rec["status"] == "interrupted" and rec["manifest_status"] == "running"
    died = [e for e in analysis.timeline.events if e.kind == "recorder" and e.attrs.get("reason") == "recorder-died"]
    assert died and died[0].ts is not None and died[0].ts <= int(killed_at * 1e9)


def with_suppress_kill(pid: int) -> None:
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        time.sleep(0.05)


DAEMON = """
import os, sys, time
go, side = sys.argv[1], sys.argv[2]
end = time.monotonic() + 120  # a failed test never touches ``go``: leave anyway (the keeper follows)
while not os.path.exists(go) and time.monotonic() < end:
    time.sleep(0.02)
try:
    print("late line from the daemon", flush=True)
    outcome = "wrote"
except BrokenPipeError:
    outcome = "EPIPE"
with open(side, "w") as fh:
    fh.write(outcome)
"""

LEAVES_A_DAEMON = """
import subprocess, sys
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]], start_new_session=True)
print("bye", flush=True)
"""


def _wait_for(check: Any, what: str, limit: float = 60) -> None:
    end = time.monotonic() + limit
    while not check():
        assert time.monotonic() < end, f"never happened: {what}"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_daemon_the_child_leaves_writing_to_stdout_lives_on(tmp_path: Path) -> None:
    """The child forks a daemon that keeps its stdout and writes later: the recorder ends with the child
    (exit status, finished manifest), and the daemon's later line still reaches the same file and the
    bundle, its write never failing (without the keeper it died of SIGPIPE once the recorder left)."""
    go, side, log = tmp_path / "go", tmp_path / "side", tmp_path / "out.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(recorder_argv(tmp_path / "out", PY, "-c", LEAVES_A_DAEMON, DAEMON, str(go), str(side)),
                                stdout=fh, stderr=subprocess.STDOUT, env=env(), stdin=subprocess.DEVNULL)
        assert proc.wait(timeout=60) == 0  # the daemon has not written yet: it waits for ``go``
    m = manifest(tmp_path / "out")
    assert m["status"] == "finished" and m["exit_code"] == 0
    assert "(python" in m["sources"]["stdout"]["held_open"] and "keeper" in m["sources"]["stdout"]["held_open"]
    go.touch()
    _wait_for(side.exists, "the daemon wrote its outcome")
    _wait_for(lambda: side.read_text() != "", "the outcome is complete")
    assert side.read_text() == "wrote"
    stdout_log = bundle(tmp_path / "out") / "stdout.log"
    _wait_for(lambda: b"late line" in stdout_log.read_bytes(), "the keeper appended the daemon's line")
    assert log.read_bytes().count(b"bye\n") == 1 and b"late line from the daemon\n" in log.read_bytes()
    assert stdout_log.read_bytes() == b"bye\nlate line from the daemon\n"
