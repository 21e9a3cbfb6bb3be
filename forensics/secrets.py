"""What a credential looks like, in one place: the recorder's own files, ``analyze`` output
and ``pack`` all redact through :func:`redact_text`.

Kinds (:data:`SECRET_KINDS`), each found wherever it appears in a text:

* known token shapes: Hugging Face ``hf_…``, GitHub ``ghp_…``/``gho_…``/``github_pat_…``,
  OpenAI/Anthropic ``sk-…``, Slack ``xoxb-…``/``xoxp-…``, GitLab ``glpat-…``, AWS access key
  ids ``AKIA…``/``ASIA…``, JWTs ``eyJ….eyJ….…``, PEM private-key blocks — also glued to other
  text (``conf_hf_…``), since a value under a harmless name (``MY_SERVICE_CONF=…``) is still one;
* credentials in a URL (``https://user:pass@host``: the user info goes, the URL stays);
* an ``Authorization:`` / ``Proxy-Authorization:`` header value (after ``Bearer``/``Basic``), and a
  ``Bearer …`` token anywhere;
* a value after a name that says secret: ``password=…``, ``passwd: …``, ``token=…``,
  ``secret=…``, ``api_key: …``, ``DB_PASSWORD=…`` — also inside a shell string such as
  ``sh -c "mysql --password=… db"`` — and the word after ``--password``/``--token`` options.

Only the secret is replaced (by :data:`REDACTED`, or by as many ``*`` with :func:`mask_text`,
which keeps byte offsets for ``pack``'s receipt indexes); the name, the scheme, the header stay, so
the line still reads. Each kind has literals one of which every match contains (:data:`_LITERALS`):
a text without any skips that regex, so clean logs cost a few ``in`` scans. Numbers of six digits
or fewer, ``true``/``false``/``none``/``null`` and values already redacted are not taken for secrets
(``max_token=512`` is a setting).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from forensics.lazy_re import lazy_compile

__all__ = ["PATTERNS", "REDACTED", "SECRET_KINDS", "has_secret", "mask_text", "redact_text", "redact_tree"]

REDACTED = "[REDACTED]"

_SEP = r"(?<![A-Za-z0-9])"  # a token may follow "_" or "=", not another letter or digit
_NAME = (r"(?:passw(?:or)?d|passphrase|secret|token|api[_-]?key|access[_-]?key|secret[_-]?key|"
         r"private[_-]?key|auth[_-]?key|client[_-]?secret|credentials?)")
_VALUE = r"(?P<secret>[^\s'\"\\&,;<>)\]}]+)"
_NOT_A_SECRET = lazy_compile(r"\d{1,6}|true|false|none|null|nil|\*+|x+|-|" + re.escape(REDACTED[:-1]) + r".*", re.I)

#: (kind, pattern). A pattern's ``secret`` group is what is replaced (the whole match when it has none).
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("private-key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]{0,8192}?-----END [A-Z ]*PRIVATE KEY-----"),
    ("url-credentials", r"[A-Za-z][A-Za-z0-9+.-]{0,30}://(?P<secret>[^/\s@:'\"]{1,256}(?::[^/\s@'\"]{0,256})?)@"),
    ("huggingface-token", _SEP + r"hf_[A-Za-z0-9]{20,}"),
    ("github-token", _SEP + r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    ("api-key", _SEP + r"sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"),
    ("aws-access-key-id", _SEP + r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])"),
    ("slack-token", _SEP + r"xox[abprs]-[A-Za-z0-9-]{10,}"),
    ("gitlab-token", _SEP + r"glpat-[A-Za-z0-9_-]{20,}"),
    ("jwt", _SEP + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("authorization", r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?"
                      + _VALUE),
    ("bearer-token", r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})"),
    ("option", r"(?i)(?<![A-Za-z0-9])--?[a-z0-9-]{0,30}" + _NAME + r"(?:=|\s+)['\"]?" + r"(?!-)" + _VALUE),
    ("assignment", r"(?i)(?<![A-Za-z0-9])[a-z0-9_.]{0,40}" + _NAME + r"[\"']?\s{0,3}[:=]\s{0,3}['\"]?" + _VALUE),
)
#: The kinds :func:`redact_text` counts, in the order it looks for them.
SECRET_KINDS: tuple[str, ...] = tuple(kind for kind, _ in _PATTERNS)
#: (kind, compiled pattern), in the order :func:`redact_text` applies them.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((kind, re.compile(pattern)) for kind, pattern in _PATTERNS)
_SECRET_NAMES = ("pass", "secret", "token", "key", "credential")
#: kind -> lower-case literals one of which every match contains (``in`` is a memchr; a regex that
#: starts with a look-behind scans many times slower)
_LITERALS: dict[str, tuple[str, ...]] = {
    "private-key": ("private key",), "url-credentials": ("://",), "huggingface-token": ("hf_",),
    "github-token": ("gh", "github_pat_"), "api-key": ("sk-",), "aws-access-key-id": ("akia", "asia"),
    "slack-token": ("xox",), "gitlab-token": ("glpat-",), "jwt": ("eyj",), "bearer-token": ("bearer",),
    "authorization": ("authorization",), "option": _SECRET_NAMES, "assignment": _SECRET_NAMES,
}
#: Longest text redacted at once; longer texts go line by line (no regex sees a huge line whole).
_CHUNK = 1 << 16


def _candidates(text: str) -> list[tuple[str, re.Pattern[str]]]:
    lowered = text.lower()
    return [(kind, p) for kind, p in PATTERNS if any(lit in lowered for lit in _LITERALS[kind])]


def _substitute(text: str, counts: Counter[str], hide: Callable[[str], str]) -> str:
    for kind, pattern in _candidates(text):
        def replace(m: re.Match[str], kind: str = kind) -> str:
            if "secret" not in (m.re.groupindex or {}):
                counts[kind] += 1
                return hide(m.group(0))
            value = m.group("secret")
            if _NOT_A_SECRET.fullmatch(value):
                return m.group(0)
            counts[kind] += 1
            start, end = m.span("secret")
            base = m.start()
            whole = m.group(0)
            return whole[: start - base] + hide(value) + whole[end - base :]

        text = pattern.sub(replace, text)
    return text


def _apply(text: str, counts: Counter[str] | None, hide: Callable[[str], str]) -> tuple[str, Counter[str]]:
    counts = Counter() if counts is None else counts
    if not text:
        return text, counts
    if len(text) <= _CHUNK:
        return _substitute(text, counts, hide), counts
    return "".join(_substitute(line, counts, hide) for line in text.splitlines(keepends=True)), counts


def redact_text(text: str, counts: Counter[str] | None = None) -> tuple[str, Counter[str]]:
    """``text`` with every credential replaced by :data:`REDACTED`, and how many of each kind
    (see :data:`SECRET_KINDS`) were found (added to ``counts`` when given)."""
    return _apply(text, counts, lambda _secret: REDACTED)


def mask_text(text: str, counts: Counter[str] | None = None) -> tuple[str, Counter[str]]:
    """Like :func:`redact_text`, but each secret becomes as many ``*``: the text keeps its length."""
    return _apply(text, counts, lambda secret: "*" * len(secret))


def has_secret(text: str) -> bool:
    """Does ``text`` hold anything :func:`redact_text` would replace?"""
    return bool(redact_text(text)[1])


def redact_tree(value: Any) -> Any:
    """A copy of a JSON-like value (dicts, lists, strings …) with every string redacted."""
    if isinstance(value, str):
        return redact_text(value)[0]
    if isinstance(value, Mapping):
        return {k: redact_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v) for v in value]
    return value
