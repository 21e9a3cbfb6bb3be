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

__all__ = ["PATTERNS", "REDACTED", "SECRET_KINDS", "Span", "apply_spans", "find_secrets", "has_secret", "mask_text",
           "redact_text", "redact_tree"]

REDACTED = "[REDACTED]"

_SEP = r"(?<![A-Za-z0-9])"  # a token may follow "_" or "=", not another letter or digit
_NAME = (r"(?:passw(?:or)?d|passphrase|secret|token|api[_-]?key|access[_-]?key|secret[_-]?key|"
         r"private[_-]?key|auth[_-]?key|client[_-]?secret|credentials?)")
_VALUE = r"(?P<secret>[^\s'\"\\&,;<>)\]}]+)"
# not secrets: short numbers, hex literals (``startToken = 0x3``), versions and ``==`` pins (``tiktoken==0.14.0``),
# booleans, placeholders, values already redacted
_NOT_A_SECRET = lazy_compile(r"\d{1,6}|0x[0-9a-f]{1,16}|=.*|v?\d+(?:\.\d+)+[a-z0-9.+-]*|true|false|none|null|nil|\*+|x+"
                             r"|-|" + re.escape(REDACTED[:-1]) + r".*", re.I)

_QUOTED = r"""(?:"(?P<dq>[^"\n]{1,256})"|'(?P<sq>[^'\n]{1,256})')"""
_TOKENISH = r"[A-Za-z0-9+/=_.~-]"

#: (kind, pattern). A pattern's ``secret`` group (or ``dq``/``sq``: a quoted value) is what is replaced
#: (the whole match when it has none).
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("private-key", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,16384}?"
                    r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"),
    ("kubeconfig-key", r"(?i)\b(?:client-key-data|client_key_data)[\"']?\s*:\s*[\"']?(?P<secret>[A-Za-z0-9+/=]{16,})"),
    # user info up to the last "@" before a host: a password may hold "/" or "@"
    ("url-credentials", r"[A-Za-z][A-Za-z0-9+.-]{0,30}://(?P<secret>[^/\s@:'\"]{1,256}"
                        r"(?::[^\s'\"]{0,256}?)?)@(?=[A-Za-z0-9\[][A-Za-z0-9.\-\[\]:]*(?:[/?#:'\"\s]|$))"),
    ("slack-webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9/_-]{20,})"),
    ("discord-webhook", r"discord(?:app)?\.com/api/webhooks/(?P<secret>\d{5,}/[A-Za-z0-9_-]{20,})"),
    ("huggingface-token", _SEP + r"hf_[A-Za-z0-9]{20,}"),
    ("github-token", _SEP + r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    ("api-key", _SEP + r"sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"),
    ("stripe-key", _SEP + r"(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}"),
    ("aws-access-key-id", _SEP + r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])"),
    ("slack-token", _SEP + r"(?:xox[abprse]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})"),
    ("gitlab-token", _SEP + r"glpat-[A-Za-z0-9_-]{20,}"),
    ("pypi-token", _SEP + r"pypi-[A-Za-z0-9_-]{40,}"),
    ("npm-token", _SEP + r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
    ("google-api-key", _SEP + r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
    ("azure-key", r"(?i)\b(?:AccountKey|SharedAccessKey|SharedAccessSignature|sig)=(?P<secret>[A-Za-z0-9+/%]{16,}=*)"),
    ("jwt", _SEP + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("authorization", r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?"
                      + _VALUE),
    ("bearer-token", r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})"),
    ("mysql-password", r"(?i)\b(?:mysql|mysqldump|mysqladmin|mariadb|mysqlimport)\b[^\n|;&]{0,200}?\s-p"
                       r"(?P<secret>[^\s'\"]+)"),
    ("curl-user", r"(?i)\b(?:curl|wget|http)\b[^\n|;&]{0,200}?\s(?:-u|--user|--proxy-user)(?:\s+|=)?['\"]?"
                  r"[^\s:'\"]{1,128}:(?P<secret>[^\s'\"]+)"),
    ("option", r"(?i)(?<![A-Za-z0-9])--?[a-z0-9-]{0,30}" + _NAME + r"(?:=|\s+)(?:" + _QUOTED + r"|['\"]?(?!-)"
               + _VALUE + ")"),
    ("assignment", r"(?i)(?<![A-Za-z0-9])[a-z0-9_.]{0,40}" + _NAME + r"[\"']?\s{0,3}[:=]\s{0,3}(?:" + _QUOTED
                   + r"|['\"]?" + _VALUE + ")"),
    # DB_PASS=…, smtp.pass: … (``pass`` as a word of the name, not "bypass" or "passed")
    ("pass-assignment", r"(?i)(?<![A-Za-z0-9])(?:[a-z0-9]+[_.-])*pass[\"']?\s{0,3}[:=]\s{0,3}(?:" + _QUOTED
                        + r"|['\"]?" + _VALUE + ")"),
    # wandb_key='4f3e…', signing_key: …: a ``*_key`` whose value looks like a token (letters and digits, 16+)
    ("key-assignment", r"(?i)(?<![A-Za-z0-9])[a-z0-9_.-]{0,40}[_.-]key[\"']?\s{0,3}[:=]\s{0,3}['\"]?(?P<secret>"
                       r"(?=" + _TOKENISH + r"*\d)(?=" + _TOKENISH + r"*[A-Za-z])" + _TOKENISH + r"{16,})"),
)
#: The kinds :func:`redact_text` counts: the shapes, in the order it looks for them, and the values the
#: recorder classed as secret.
SECRET_KINDS: tuple[str, ...] = tuple(kind for kind, _ in _PATTERNS)
VALUE_KIND = "known-value"
#: (kind, compiled pattern), in the order :func:`redact_text` applies them.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((kind, re.compile(pattern)) for kind, pattern in _PATTERNS)
_SECRET_NAMES = ("pass", "secret", "token", "key", "credential")
#: kind -> lower-case literals one of which every match contains (``in`` is a memchr; a regex that
#: starts with a look-behind scans many times slower)
_LITERALS: dict[str, tuple[str, ...]] = {
    "private-key": ("private key",), "kubeconfig-key": ("key-data", "key_data"), "url-credentials": ("://",),
    "slack-webhook": ("hooks.slack.com",), "discord-webhook": ("/api/webhooks/",), "huggingface-token": ("hf_",),
    "github-token": ("gh", "github_pat_"), "api-key": ("sk-",), "stripe-key": ("_live_", "_test_"),
    "aws-access-key-id": ("akia", "asia"), "slack-token": ("xox", "xapp-"), "gitlab-token": ("glpat-",),
    "pypi-token": ("pypi-",), "npm-token": ("npm_",), "google-api-key": ("aiza",),
    "azure-key": ("accountkey=", "sharedaccesskey=", "sharedaccesssignature=", "sig="), "jwt": ("eyj",),
    "bearer-token": ("bearer",), "authorization": ("authorization",), "mysql-password": ("mysql", "mariadb"),
    "curl-user": ("curl", "wget", "http"), "option": _SECRET_NAMES, "assignment": _SECRET_NAMES,
    "pass-assignment": ("pass",), "key-assignment": ("key",),
}
#: Texts longer than this are searched in pieces cut at line ends (no regex sees a huge text whole); a
#: private-key block is found over the whole text first, so a block is never cut.
_CHUNK = 1 << 16


def _candidates(text: str) -> list[tuple[str, re.Pattern[str]]]:
    lowered = text.lower()
    return [(kind, p) for kind, p in PATTERNS if any(lit in lowered for lit in _LITERALS[kind])]


#: A secret found in a text: (start, end, kind), offsets into that text.
Span = tuple[int, int, str]


def _secret_span(m: re.Match[str]) -> tuple[int, int] | None:
    """The part of a match to hide, or ``None`` when the value is no secret (``token: 42``)."""
    groups = m.re.groupindex or {}
    for name in ("dq", "sq", "secret"):
        if name in groups and m.group(name) is not None:
            if _NOT_A_SECRET.fullmatch(m.group(name)):
                return None
            return m.span(name)
    if "secret" in groups or "dq" in groups:
        return None
    return m.span()


def _shape_spans(text: str, base: int, out: list[Span]) -> None:
    for kind, pattern in _candidates(text):
        if kind == "private-key":
            continue
        for m in pattern.finditer(text):
            span = _secret_span(m)
            if span is not None and span[1] > span[0]:
                out.append((base + span[0], base + span[1], kind))


def _pieces(text: str) -> list[tuple[int, str]]:
    """``text`` cut at line ends into pieces of about :data:`_CHUNK` characters."""
    if len(text) <= _CHUNK:
        return [(0, text)]
    out = []
    pos = 0
    while pos < len(text):
        end = text.find("\n", pos + _CHUNK)
        end = len(text) if end < 0 else end + 1
        out.append((pos, text[pos:end]))
        pos = end
    return out


def _merge(spans: list[Span]) -> list[Span]:
    """Non-overlapping spans in order: where two overlap, the one that starts first (then the longer) wins
    and is widened to cover both."""
    merged: list[Span] = []
    for start, end, kind in sorted(spans, key=lambda s: (s[0], -s[1])):
        if merged and start < merged[-1][1]:
            s0, e0, k0 = merged[-1]
            merged[-1] = (s0, max(e0, end), k0)
        else:
            merged.append((start, end, kind))
    return merged


def find_secrets(text: str, values: bool = True) -> list[Span]:
    """Every secret in ``text`` as non-overlapping ``(start, end, kind)`` spans: the shapes (a private key
    as one block, whatever the text's size) and, with ``values``, every value the recorder classed as secret
    (:mod:`forensics.secret_values`, kind ``known-value``), in the text as it is and across a line break."""
    if not text:
        return []
    spans: list[Span] = []
    if "private key" in text.lower():
        spans += [(m.start(), m.end(), "private-key") for m in PATTERNS[0][1].finditer(text)]
    for base, piece in _pieces(text):
        _shape_spans(piece, base, spans)
    if values:
        from forensics.secret_values import KNOWN

        spans += [(a, b, "known-value") for a, b in KNOWN.find(text)]
    return _merge(spans)


def apply_spans(text: str, spans: list[Span], hide: Callable[[str], str],
                counts: Counter[str] | None = None) -> str:
    """``text`` with each span replaced by ``hide(secret)``, counted per kind."""
    if not spans:
        return text
    out = []
    pos = 0
    for start, end, kind in spans:
        out.append(text[pos:start])
        out.append(hide(text[start:end]))
        if counts is not None:
            counts[kind] += 1
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _apply(text: str, counts: Counter[str] | None, hide: Callable[[str], str]) -> tuple[str, Counter[str]]:
    counts = Counter() if counts is None else counts
    if not text:
        return text, counts
    return apply_spans(text, find_secrets(text), hide, counts), counts


def redact_text(text: str, counts: Counter[str] | None = None) -> tuple[str, Counter[str]]:
    """``text`` with every credential replaced by :data:`REDACTED`, and how many of each kind
    (see :data:`SECRET_KINDS`) were found (added to ``counts`` when given)."""
    return _apply(text, counts, lambda _secret: REDACTED)


def mask_text(text: str, counts: Counter[str] | None = None) -> tuple[str, Counter[str]]:
    """Like :func:`redact_text`, but each secret becomes as many ``*``: the text keeps its length."""
    return _apply(text, counts, lambda secret: "*" * len(secret))


def has_secret(text: str) -> bool:
    """Does ``text`` hold anything :func:`redact_text` would replace?"""
    return bool(find_secrets(text))


def redact_tree(value: Any) -> Any:
    """A copy of a JSON-like value (dicts, lists, strings …) with every string redacted."""
    if isinstance(value, str):
        return redact_text(value)[0]
    if isinstance(value, Mapping):
        return {k: redact_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v) for v in value]
    return value
