"""Escaping by construction: one function per output kind, and every field read from an input goes
through the one of the output it is written to.

- **Terminal text** (:func:`terminal`): C0 controls but newline and tab, DEL, C1 controls and the
  bidirectional overrides/isolates are removed, so a field cannot clear the screen, set the title,
  write the clipboard (OSC 52), ring the bell or reorder what a person reads.
- **Markdown** (GitHub's cmark-gfm): :func:`md_text` escapes every ASCII punctuation character (no
  emphasis, link, image, HTML, heading, list or table syntax survives) and breaks GFM's autolinks
  (``www.``, ``https://``, e-mail addresses) without changing what is shown; :func:`md_code` is a code
  span whose fence is longer than any backtick run inside it, so it cannot be closed from inside;
  :func:`md_prose` keeps a text's own balanced code spans and escapes the rest (signature remedies).
- **HTML** (:func:`html_text`): :func:`html.escape` after the terminal clean-up (no bidi override).
- **JSON** (:func:`json_dumps`): strict (no ``NaN``/``Infinity``: non-finite numbers are ``null``, and
  :func:`finite` says where), with C1 and bidirectional characters written as ``\\u`` escapes.

Everything is a pure function of its argument; ``tests/test_escaping.py`` renders hostile fields with
cmark-gfm and a GitHub-like sanitizer and checks that nothing the input put there is live.
"""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any

__all__ = ["finite", "html_text", "json_dumps", "md_code", "md_prose", "md_text", "terminal"]

#: U+061C, U+200E/F (marks), U+202A-E (embeddings, overrides), U+2066-9 (isolates)
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_C0 = "".join(chr(c) for c in range(0x20) if chr(c) not in "\n\t")
_C1 = "".join(chr(c) for c in range(0x80, 0xA0))
_STRIP = str.maketrans("", "", _C0 + "\x7f" + _C1 + _BIDI)
_STRIP_ALL = str.maketrans({**{ord(c): None for c in _C0 + "\x7f" + _C1 + _BIDI}, ord("\n"): " ", ord("\t"): " "})


def terminal(text: str, one_line: bool = False) -> str:
    """``text`` without the characters that drive a terminal or reorder text (``one_line``: newlines and
    tabs become spaces too)."""
    return text.translate(_STRIP_ALL if one_line else _STRIP)


# -- Markdown -------------------------------------------------------------------------------------
#: Characters with a meaning anywhere in a line of GFM: emphasis, code, links and images, HTML and
#: entities, table cells, strikethrough, GitHub's math, a heading's closing hashes, and the escape itself.
_INLINE = re.compile(r"([\\`*_\[\]<>&|~$#])")
#: What is special only at the start of a line: a list item, a quote, a setext underline.
_LEADING = re.compile(r"^(?:[-+=>]|(\d{1,9})([.)]))")
#: GFM's extended autolinks and GitHub's references: ``scheme://``, ``www.``, e-mail and @mention
#: (``@`` then a word character), an issue number (``#`` then a digit). A backslash breaks the first two;
#: cmark-gfm and GitHub see through it for the others, so a word joiner (U+2060, invisible) follows.
_SCHEME = re.compile(r"(?<=[A-Za-z0-9]):(?=//)")
_WWW = re.compile(r"(?i)(?<![A-Za-z0-9])(www)\.")
_REFERENCE = re.compile(r"([@#])(?=[A-Za-z0-9])")
WORD_JOINER = "\u2060"


def _one_line(value: Any) -> str:
    return " ".join(terminal(str(value), one_line=True).split())


def md_text(value: Any, line_start: bool = True) -> str:
    """``value`` as inline Markdown text that renders as itself on GitHub, in a paragraph, a heading, a
    quote, a list item or a table cell: one line; every character with a Markdown or HTML meaning escaped
    (a ``|`` too, so a cell stays one cell); no autolink, mention or issue reference. ``line_start=False``
    (a table cell, never at a line's start): a leading ``1.``, ``-`` or ``>`` is left as it is."""
    text = _INLINE.sub(r"\\\1", _one_line(value))
    text = _REFERENCE.sub(lambda m: m.group(1) + WORD_JOINER, text)
    text = _WWW.sub(r"\1\\.", _SCHEME.sub("\\:", text))
    m = _LEADING.match(text) if line_start else None
    if m:
        text = (m.group(1) + "\\" + m.group(2) if m.group(1) else "\\" + text[0]) + text[m.end():]
    return text


def md_code(value: Any, in_table: bool = True) -> str:
    """``value`` as one code span that nothing inside can close: its fence is one backtick longer than
    the longest run of backticks in it; padded with a space when it starts or ends with a backtick.
    ``in_table``: pipes escaped (GFM splits a table row on them even inside a code span); empty is an
    en dash."""
    text = _one_line(value)
    if not text:
        return "–"
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")):
        text = f" {text} "
    if in_table:
        text = text.replace("|", "\\|")
    return f"{fence}{text}{fence}"


def md_prose(value: Any) -> str:
    """Text with its own code spans (a signature's remedy: ``set `NCCL_P2P_DISABLE=1` and rerun``): the
    spans CommonMark would see (a run of backticks closed by the next run of the same length) kept as
    code (:func:`md_code`), the rest as :func:`md_text`."""
    text = _one_line(value)
    runs = [(m.start(), m.end()) for m in re.finditer(r"`+", text)]
    out: list[str] = []
    pos = i = 0
    while i < len(runs):
        start, end = runs[i]
        close = next((j for j in range(i + 1, len(runs)) if runs[j][1] - runs[j][0] == end - start), None)
        if close is None:
            i += 1
            continue
        inner = text[end:runs[close][0]]
        if inner.strip():
            out += [md_text(text[pos:start]), md_code(inner.strip(" ") if inner.strip(" ") else inner, in_table=False)]
            pos = runs[close][1]
        i = close + 1
    out.append(md_text(text[pos:]))
    return "".join(out)


def html_text(value: Any, quote: bool = True) -> str:
    """``value`` escaped for HTML text or an attribute, without terminal controls or bidi overrides."""
    return html.escape(terminal(str(value)), quote=quote)


# -- JSON -----------------------------------------------------------------------------------------
def finite(value: Any, notes: list[str] | None = None, where: str = "") -> Any:
    """``value`` (dicts, lists, tuples) with every non-finite float as ``None``; ``notes`` gets one
    entry per replacement (its path). No recursion (a deep tree is walked with a stack)."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        _note(notes, where)
        return None
    if not isinstance(value, dict | list | tuple):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, str]] = [(value, root, 0, where)]
    while stack:
        item, parent, key, path = stack.pop()
        if isinstance(item, dict):
            new: Any = {}
            parent[key] = new
            for k, v in item.items():
                stack.append((v, new, k, f"{path}.{k}"))
        elif isinstance(item, list | tuple):
            new = [None] * len(item)
            parent[key] = new
            for i, v in enumerate(item):
                stack.append((v, new, i, f"{path}[{i}]"))
        elif isinstance(item, float) and not math.isfinite(item):
            _note(notes, path)
            parent[key] = None
        else:
            parent[key] = item
    return root[0]


def _note(notes: list[str] | None, where: str) -> None:
    if notes is not None:
        notes.append(where.lstrip(".") or "(value)")


_JSON_UNSAFE = re.compile("[" + "\x7f" + _C1 + _BIDI + "\u2028\u2029]")


def json_dumps(value: Any, **kwargs: Any) -> str:
    """Strict JSON (``allow_nan=False``) of ``value`` with non-finite numbers as ``null`` — callers that
    want to say so pass the value through :func:`finite` with a list of notes first — and the characters
    that would drive a terminal written as ``\\u`` escapes (valid JSON, the same string once parsed)."""
    kwargs.setdefault("ensure_ascii", False)
    text = json.dumps(finite(value), allow_nan=False, **kwargs)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
