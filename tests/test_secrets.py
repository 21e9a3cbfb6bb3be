"""Credential shapes (forensics/secrets.py): what is redacted, what is left alone, and that the
recorder's files and analyze output (text and JSON) go through it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.record.redact import redact_argv, redact_env
from forensics.secrets import (
    _LITERALS,
    PATTERNS,
    REDACTED,
    SECRET_KINDS,
    has_secret,
    mask_text,
    redact_text,
    redact_tree,
)

HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01"
GHP = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36P"


@pytest.mark.parametrize(("text", "kept", "kind"), [
    (f"token {HF} here", "token [REDACTED] here", "huggingface-token"),
    (f"MY_SERVICE_CONF=user_{HF}", "MY_SERVICE_CONF=user_[REDACTED]", "huggingface-token"),
    (f"git clone https://{GHP}@github.com/o/r", "git clone https://[REDACTED]@github.com/o/r", "url-credentials"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijkl", REDACTED, "github-token"),
    ("OPENAI_API_KEY sk-proj-abcdefghijklmnopqrstuvwx", "OPENAI_API_KEY [REDACTED]", "api-key"),
    ("slack xoxb-123456789012-abcdefghij", "slack [REDACTED]", "slack-token"),
    ("id AKIAIOSFODNN7EXAMPLE.", "id [REDACTED].", "aws-access-key-id"),
    (f"jwt={JWT}", "jwt=[REDACTED]", "jwt"),
    ("curl -H 'Authorization: Bearer abc.def-ghi' url", "curl -H 'Authorization: Bearer [REDACTED]' url",
     "authorization"),
    ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [REDACTED]", "authorization"),
    ("mysql --password=hunter2 -u root db", "mysql --password=[REDACTED] -u root db", "option"),
    ("mysql --password hunter2 db", "mysql --password [REDACTED] db", "option"),
    ("PGPASSWORD=hunter2 psql -h db", "PGPASSWORD=[REDACTED] psql -h db", "assignment"),
    ("db passwd: s3cr3t!", "db passwd: [REDACTED]", "assignment"),
    ('{"password": "s3cr3t", "user": "me"}', '{"password": "[REDACTED]", "user": "me"}', "assignment"),
    ("url?token=abcdef123&x=1", "url?token=[REDACTED]&x=1", "assignment"),
    ("secret=topsecretvalue", "secret=[REDACTED]", "assignment"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", REDACTED, "private-key"),
])
def test_credential_shapes_are_redacted(text: str, kept: str, kind: str) -> None:
    out, counts = redact_text(text)
    assert out == kept
    assert counts.get(kind, 0) >= 1 and set(counts) <= set(SECRET_KINDS)


@pytest.mark.parametrize("text", [
    "max_tokens=512 temperature=0.7",
    "token: 42",
    "password: ",
    "use_auth_token=true",
    "tokenizer=/models/llama/tokenizer.json tokens_per_second=1234.5",
    "[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5)",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
    "plain/path:with:colons and a sha 3f786850e387550fdab836ed7e6dc881de23001b",
    f"already {REDACTED} and password={REDACTED}",
])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == (text, {})


def test_a_long_text_is_redacted_line_by_line() -> None:
    text = ("x" * 100 + "\n") * 2000 + f"token={HF}\n"
    out, counts = redact_text(text)
    assert out.endswith("token=[REDACTED]\n") and sum(counts.values()) == 1


def test_tree_redaction_keeps_the_shape() -> None:
    assert redact_tree({"a": [f"x {HF}", 3, None], "b": {"c": "password=x1y2z3"}}) == {
        "a": [f"x {REDACTED}", 3, None], "b": {"c": f"password={REDACTED}"}}


def test_recorder_argv_and_env_redact_a_shell_string_and_harmless_names() -> None:
    argv = ["sh", "-c", "PGPASSWORD=hunter2 psql -h db && curl -H 'Authorization: Bearer abcdefgh' x"]
    assert redact_argv(argv) == ["sh", "-c", f"PGPASSWORD={REDACTED} psql -h db && curl -H "
                                 f"'Authorization: Bearer {REDACTED}' x"]
    assert redact_env({"MY_SERVICE_CONF": f"endpoint=x;key_{HF}", "PATH": "/bin"}) == {
        "MY_SERVICE_CONF": f"endpoint=x;key_{REDACTED}", "PATH": "/bin"}


def test_analyze_output_redacts_what_the_child_printed(tmp_path: Path) -> None:
    from contextlib import redirect_stdout
    from io import StringIO

    from forensics.cli import main

    log = tmp_path / "train.log"
    log.write_text("Traceback (most recent call last):\n"
                   '  File "train.py", line 3, in <module>\n'
                   f"RuntimeError: CUDA error: an illegal memory access was encountered (token={HF})\n")
    for fmt in ("text", "json"):
        out = StringIO()
        with redirect_stdout(out):
            main(["analyze", "--format", fmt, str(log)])
        assert HF not in out.getvalue() and REDACTED in out.getvalue(), out.getvalue()
        if fmt == "json":
            json.loads(out.getvalue())
    assert HF in log.read_text()  # the input itself is never touched


@pytest.mark.slow
def test_a_recording_keeps_secrets_out_of_its_own_files_but_not_out_of_the_output(tmp_path: Path) -> None:
    from recorder_helpers import bundle, run

    script = "echo connecting with --password=hunter2; echo done"
    res = run(tmp_path, "sh", "-c", script, MY_SERVICE_CONF=f"endpoint=x;key_{HF}")
    assert res.returncode == 0
    b = bundle(tmp_path)
    for name in ("manifest.json", "host/command.json", "host/env.json"):
        text = (b / name).read_text()
        assert "hunter2" not in text and HF not in text, name
    assert "--password=[REDACTED]" in (b / "host" / "command.json").read_text()
    assert b"--password=hunter2" in (b / "stdout.log").read_bytes()  # the child's output: byte for byte


# Shapes in context (from the pack/report side): kind, text, the text redacted.
SHAPES = [
    ("authorization", "curl -H 'Authorization: token abcdef0123456789'", "curl -H 'Authorization: token [REDACTED]'"),
    ("bearer-token", "sent Bearer eyZabc.def-0123456789", "sent Bearer [REDACTED]"),
    ("url-credentials", "git+https://bob:pa55@git.example.com/r", "git+https://[REDACTED]@git.example.com/r"),
    ("assignment", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLE",
     "aws_secret_access_key = [REDACTED]"),
    ("huggingface-token", "HfApi(token) hf_" + "x" * 30, "HfApi(token) [REDACTED]"),
    ("github-token", "ghp_" + "a" * 36, "[REDACTED]"),
    ("github-token", "github_pat_" + "B" * 40, "[REDACTED]"),
    ("api-key", "key sk-proj-" + "c" * 30 + " ok", "key [REDACTED] ok"),
    ("aws-access-key-id", "id AKIAIOSFODNN7EXAMPLE.", "id [REDACTED]."),
    ("slack-token", "xoxb-1234567890-abcdef", "[REDACTED]"),
    ("gitlab-token", "glpat-" + "d" * 20, "[REDACTED]"),
    ("jwt", "eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeK", "[REDACTED]"),
    ("assignment", "db password=hunter22 port=5432", "db password=[REDACTED] port=5432"),
    ("assignment", '{"token": "abc123xyz"}', '{"token": "[REDACTED]"}'),
]


@pytest.mark.parametrize(("kind", "text", "want"), SHAPES)
def test_each_shape_is_redacted_counted_and_masked(kind: str, text: str, want: str) -> None:
    out, counts = redact_text(text)
    assert out == want and counts[kind] >= 1
    assert has_secret(text) and not has_secret(out)
    assert redact_text(out)[0] == out  # idempotent: a redacted value is not redacted twice
    masked, mcounts = mask_text(text)
    assert len(masked) == len(text) and mcounts == counts and not has_secret(masked)


@pytest.mark.parametrize("text", [
    "step 12 | loss 0.12 | 524,288 tokens/s", "max_token=5 num_tokens: 2048", '"PWD": "/work/main"',
    "Authorization header missing", "https://github.com/pytorch/pytorch/issues/1", "sk-learn", "the hf_hub cache",
    "passed 3 tests", "api version 2",
])
def test_training_log_look_alikes_are_left_alone_by_every_function(text: str) -> None:
    assert redact_text(text) == (text, {}) and not has_secret(text)


def test_every_pattern_has_a_prefilter_that_its_matches_contain() -> None:
    assert {k for k, _ in PATTERNS} == set(_LITERALS) == set(SECRET_KINDS)
    for kind, text, _want in SHAPES:
        matched = [m.group(0).lower() for k, p in PATTERNS if k == kind for m in p.finditer(text)]
        assert matched and all(any(lit in m for lit in _LITERALS[kind]) for m in matched)
    assert REDACTED == "[REDACTED]"
