"""Secrets never reach the bundle: environment and command line are redacted before writing.

Three rules, applied everywhere a value is written:

* a **name** that says secret (``*_TOKEN``, ``*_KEY``, ``*_SECRET``, ``*PASSWORD*``,
  ``HF_TOKEN``, ``WANDB_API_KEY``, ``AWS_ACCESS_KEY_ID`` …) hides its whole value;
* **credentials inside a URL** (``https://user:pass@host``) are replaced, the rest of
  the URL is kept;
* **well-known token shapes** (``hf_…``, ``ghp_…``, ``sk-…``, ``AKIA…``, ``xox?-…``, JWTs),
  values after ``password=`` / ``token=`` / ``Authorization:`` and the like are hidden wherever
  they appear, also inside one argument such as ``sh -c "… --password=…"`` or under a
  harmless name (``MY_SERVICE_CONF=…hf_…``): :func:`forensics.secrets.redact_text`, the one
  list of credential shapes, shared with ``analyze`` output and ``pack``.

On the command line, ``--token xyz``, ``--api-key=xyz`` and ``key=xyz`` style overrides
are redacted by the same name rule. The stdout/stderr streams are kept raw (a program
that prints its own secret prints it to the bundle too): the docs say so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from forensics.lazy_re import lazy_compile
from forensics.secrets import REDACTED, find_secrets, redact_text

__all__ = ["REDACTED", "is_secret_name", "redact_argv", "redact_env", "redact_value", "secret_values"]


_SECRET_NAME = lazy_compile(
    r"TOKENS?(?:_|$)|SECRET|PASSW(?:OR)?D|PASSPHRASE|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|AUTH_?KEY"
    r"|(?:^|_)KEYS?(?:_|$)|(?:^|_)PWD$|(?:^|_)PASS$|COOKIE|SESSION_?ID|SIGNING|(?:^|_)DSN$|(?:^|_)SAS(?:_|$)"
    r"|AUTHORIZATION|BEARER|WEBHOOK",
)
_NOT_SECRET = frozenset({"PWD", "OLDPWD", "KEYTIMEOUT"})

def is_secret_name(name: str) -> bool:
    """Does a variable or option name say that its value is a secret?"""
    norm = re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_")
    return norm not in _NOT_SECRET and bool(_SECRET_NAME.search(norm))


def redact_value(value: str) -> str:
    """Hide URL credentials, token shapes and ``password=``-style values inside an arbitrary value
    (the patterns live in :mod:`forensics.secrets`, shared with reports and ``pack``)."""
    return redact_text(value)[0]


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` fit to be written down."""
    return {k: (REDACTED if is_secret_name(k) and v else redact_value(v)) for k, v in env.items()}


def _shaped(value: str) -> list[str]:
    """The secrets the shapes find inside ``value`` (a URL's ``user:pass`` also as ``pass``)."""
    found = []
    for start, end, kind in find_secrets(value, values=False):
        secret = value[start:end]
        found.append(secret)
        if kind == "url-credentials" and ":" in secret:
            found.append(secret.split(":", 1)[1])
    return found


def secret_values(env: Mapping[str, str], argv: Sequence[str]) -> list[str]:
    """Every value the recorder hides in ``env`` and ``argv`` — by name, by shape — so that readers can find
    them again wherever the program printed them (:mod:`forensics.secret_values` keeps only keyed hashes)."""
    found: list[str] = []
    for k, v in env.items():
        if is_secret_name(k) and v:
            found.append(v)
        found += _shaped(v)
    hide_next = False
    for arg in argv:
        if hide_next:
            found.append(arg)
            hide_next = False
            continue
        name, eq, value = arg.partition("=")
        if arg.startswith("-") and len(arg) > 1 and is_secret_name(name.lstrip("-")):
            if eq:
                found.append(value)
            else:
                hide_next = True
        elif eq and not arg.startswith(("/", ".")) and name and " " not in name \
                and is_secret_name(name.rsplit(".", 1)[-1]):
            found.append(value)
        found += _shaped(arg)
    return [v for v in found if v and v != REDACTED]


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A copy of ``argv`` fit to be written down."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if arg.startswith("-") and len(arg) > 1:
            name, eq, _value = arg.partition("=")
            if is_secret_name(name.lstrip("-")):
                if eq:
                    out.append(f"{name}={REDACTED}")
                else:
                    out.append(arg)
                    hide_next = True
                continue
        elif "=" in arg and not arg.startswith(("/", ".")) and not any(c.isspace() for c in arg):
            key, _, _value = arg.partition("=")
            # hydra / key=value overrides: the last dotted part is the name.
            if key and " " not in key and is_secret_name(key.rsplit(".", 1)[-1]):
                out.append(f"{key}={REDACTED}")
                continue
        out.append(redact_value(arg))
    return out
