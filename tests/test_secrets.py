"""The shared secret shapes (forensics/secrets.py): each kind caught in context, counted, kept
parts kept; look-alikes in training logs left alone; the literal prefilter never hides a pattern."""

from __future__ import annotations

import pytest

from forensics.secrets import _LITERALS, PATTERNS, REDACTED, has_secret, redact_text

CASES = [
    ("authorization-header", "curl -H 'Authorization: token abcdef0123456789'", "curl -H 'Authorization: [REDACTED]'"),
    ("bearer-token", "sent Bearer eyZabc.def-0123456789", "sent Bearer [REDACTED]"),
    ("url-credentials", "git+https://bob:pa55@git.example.com/r", "git+https://[REDACTED]@git.example.com/r"),
    ("aws-secret-key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLE",
     "aws_secret_access_key = [REDACTED]"),
    ("hf-token", "HfApi(token) hf_" + "x" * 30, "HfApi(token) [REDACTED]"),
    ("github-token", "ghp_" + "a" * 36, "[REDACTED]"),
    ("github-token", "github_pat_" + "B" * 40, "[REDACTED]"),
    ("openai-style-key", "key sk-proj-" + "c" * 30 + " ok", "key [REDACTED] ok"),
    ("aws-access-key", "id AKIAIOSFODNN7EXAMPLE.", "id [REDACTED]."),
    ("slack-token", "xoxb-1234567890-abcdef", "[REDACTED]"),
    ("gitlab-token", "glpat-" + "d" * 20, "[REDACTED]"),
    ("jwt", "eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeK", "[REDACTED]"),
    ("password-or-token-value", "db password=hunter22 port=5432", "db password=[REDACTED] port=5432"),
    ("password-or-token-value", '{"token": "abc123xyz"}', '{"token": "[REDACTED]"}'),
]


@pytest.mark.parametrize(("kind", "text", "want"), CASES)
def test_each_kind_is_redacted_and_counted(kind: str, text: str, want: str) -> None:
    out, counts = redact_text(text)
    assert out == want and counts[kind] >= 1
    assert has_secret(text) and not has_secret(out)
    assert redact_text(out)[0] == out  # idempotent: a redacted value is not redacted twice


@pytest.mark.parametrize("text", [
    "step 12 | loss 0.12 | 524,288 tokens/s", "max_token=5 num_tokens: 2048", '"PWD": "/work/main"',
    "Authorization header missing", "https://github.com/pytorch/pytorch/issues/1", "sk-learn", "the hf_hub cache",
    "passed 3 tests", "api version 2",
])
def test_training_log_look_alikes_are_left_alone(text: str) -> None:
    assert redact_text(text) == (text, {}) and not has_secret(text)


def test_every_pattern_has_a_prefilter_that_its_matches_contain() -> None:
    assert {k for k, _, _ in PATTERNS} == set(_LITERALS)
    for kind, text, _want in CASES:
        matched = [m.group(0).lower() for k, p, _ in PATTERNS if k == kind for m in p.finditer(text)]
        assert matched and all(any(lit in m for lit in _LITERALS[kind]) for m in matched)
    assert REDACTED == "[REDACTED]"
