"""Reading C and C++ source for the extractors: the arguments of one call, a printf format as a catalogue text."""

from __future__ import annotations

import re

__all__ = ["call_args", "printf_text"]


def call_args(code: str, open_paren: int, *, newline_ends_string: bool = True) -> tuple[list[str], int] | None:
    """The top-level comma-separated arguments of the call whose '(' is at ``open_paren``, and the offset of
    its ')'; None when it does not close. A quoted string ends at its quote (or, with
    ``newline_ends_string``, at the end of its line: a stray quote in a comment costs one line, not the file)."""
    depth, i, start, args = 0, open_paren, open_paren + 1, []
    n = len(code)
    while i < n:
        c = code[i]
        if c in "\"'":
            j = i + 1
            while j < n and code[j] != c and not (newline_ends_string and code[j] == "\n"):
                j += 2 if code[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(code[start:i])
                return args, i
        elif c == "," and depth == 1:
            args.append(code[start:i])
            start = i + 1
        i += 1
    return None


def printf_text(fmt: str, conversions: re.Pattern[str]) -> str:
    """A printf format as a catalogue ``text``: each conversion ``conversions`` matches is ``{}`` (``%%`` is
    ``%``), literal braces doubled."""
    out: list[str] = []
    pos = 0
    for m in conversions.finditer(fmt):
        out.append(fmt[pos:m.start()].replace("{", "{{").replace("}", "}}"))
        out.append("%" if m.group(0) == "%%" else "{}")
        pos = m.end()
    out.append(fmt[pos:].replace("{", "{{").replace("}", "}}"))
    return "".join(out)
