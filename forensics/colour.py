"""Colour for the text report on a terminal, through ``rich`` (it ships with Textual).

The report stays plain text (:func:`forensics.text_report.render_text`: it pastes into a ticket); this
only styles its lines when they go to a terminal. Never when the output is a pipe or a file, nor
when ``NO_COLOR`` is set (https://no-color.org); ``FORCE_COLOR`` forces it, as rich reads it.
"""

from __future__ import annotations

import os
from typing import TextIO

__all__ = ["use_colour", "write_report"]

_STYLES = (  # (line prefix, style); the first that matches wins
    ("ROOT CAUSE:", "bold red"),
    ("NO FAILURE FOUND", "bold green"),
    ("warning:", "yellow"),
    ("  [", "dim"),
    ("  Evidence:", "bold"),
    ("  What followed", "bold"),
    ("  What to do:", "bold green"),
    ("  What it means:", "bold"),
    ("  Risks and contributing", "bold"),
    ("  Considered and ruled out:", "bold"),
    ("Read ", "dim"),
    ("Time:", "dim"),
    ("Clocks", "dim"),
)


def use_colour(stream: TextIO) -> bool:
    """Colour only for a terminal, never with ``NO_COLOR`` (any non-empty value)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def write_report(text: str, stream: TextIO) -> None:
    """Write the report: plain as it is, or with its headings styled on a terminal; either way without
    the control and bidi characters an input may have put in it (:func:`forensics.escape.terminal`)."""
    from forensics.escape import terminal

    text = terminal(text)
    if not use_colour(stream):
        stream.write(text)
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(file=stream, force_terminal=True, highlight=False, soft_wrap=True, emoji=False,
                      markup=False)
    for line in text.rstrip("\n").split("\n"):
        style = next((st for prefix, st in _STYLES if line.startswith(prefix)), "")
        console.print(Text(line, style=style))
