"""Secret shapes, in one place for everything that writes text down: the recorder
(``forensics/record/redact.py``), reports and ``forensics pack``.

:data:`PATTERNS` is an ordered tuple of ``(kind, regex, keep)``: a match is replaced by its
``keep`` group(s) (the part that says what it was, e.g. ``Bearer ``) followed by
:data:`REDACTED`. :func:`redact_text` applies them all and counts the replacements per kind — the
counts (never the values) are what ``REDACTIONS.txt`` lists. Pure ``re``; imports in microseconds
(the recorder uses it).
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["PATTERNS", "REDACTED", "has_secret", "redact_text"]

REDACTED = "[REDACTED]"

_NAMES = (r"(?:password|passwd|passphrase|token|access[_-]?token|auth[_-]?token|api[_-]?key|secret"
          r"|client[_-]?secret)")

#: (kind, pattern, number of leading groups kept). Order matters: a header before the token in it.
PATTERNS: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("authorization-header",
     re.compile(r"(?i)(\bauthorization[\"']?\s*[:=]\s*+[\"']?+)(?!\[REDACTED\])[^\r\n\"']+"), 1),
    ("bearer-token", re.compile(r"(?i)(\bbearer\s++)(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{8,}"), 1),
    ("url-credentials", re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)(?!\[REDACTED\])[^/\s@:]+(?::[^/\s@]*)?(?=@)"), 1),
    ("aws-secret-key", re.compile(
        r"(?i)(aws_?secret_?access_?key[\"']?\s*[:=]\s*+[\"']?+)(?!\[REDACTED\])[A-Za-z0-9/+=]{30,}"), 1),
    ("hf-token", re.compile(r"\bhf_[A-Za-z0-9]{20,}"), 0),
    ("github-token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"), 0),
    ("openai-style-key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"), 0),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), 0),
    ("slack-token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), 0),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), 0),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0),
    ("password-or-token-value", re.compile(
        rf"(?i)(?<![A-Za-z0-9_])({_NAMES}[\"']?\s*[=:]\s*+[\"']?+)(?!\[REDACTED\])[^\s&\"',;]{{3,}}"), 1),
)


#: kind -> lower-case literals one of which every match contains: a text without any of them skips the
#: regex (``in`` is a memchr; a regex that starts with ``\b`` scans ~10 times slower)
_LITERALS: dict[str, tuple[str, ...]] = {
    "authorization-header": ("authorization",), "bearer-token": ("bearer",), "url-credentials": ("://",),
    "aws-secret-key": ("secret",), "hf-token": ("hf_",), "github-token": ("gh", "github_pat_"),
    "openai-style-key": ("sk-",), "aws-access-key": ("akia", "asia"), "slack-token": ("xox",),
    "gitlab-token": ("glpat-",), "jwt": ("eyj",),
    "password-or-token-value": ("pass", "token", "api", "secret"),
}


def _candidates(text: str) -> list[tuple[str, re.Pattern[str], int]]:
    lowered = text.lower()
    return [(kind, p, keep) for kind, p, keep in PATTERNS
            if any(lit in lowered for lit in _LITERALS.get(kind, ("",)))]


def has_secret(text: str) -> bool:
    """Does ``text`` hold anything :func:`redact_text` would replace? (One search: the fast path.)"""
    return any(p.search(text) for _kind, p, _keep in _candidates(text))


def redact_text(text: str, counts: Counter[str] | None = None) -> tuple[str, Counter[str]]:
    """``text`` with every secret shape replaced, and how many of each kind were (added to ``counts``)."""
    counts = Counter() if counts is None else counts
    if not text:
        return text, counts
    for kind, pattern, keep in _candidates(text):
        def repl(m: re.Match[str], kind: str = kind, keep: int = keep) -> str:
            counts[kind] += 1
            return "".join(m.group(i + 1) or "" for i in range(keep)) + REDACTED

        text = pattern.sub(repl, text)
    return text, counts
