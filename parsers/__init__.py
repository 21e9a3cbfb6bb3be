"""Log-format parsers, one module per format, and the registry that orders them.

Installed as ``forensics.parsers``. ``PARSERS`` is the explicit registry: detection
asks each parser for a confidence from the file's first lines and takes the best;
on a tie the earlier entry wins, so specific formats come before generic ones
(the cross-matching test in tests/test_parsers.py keeps this order honest).
"""

from __future__ import annotations

from forensics.parsers import plaintext
from forensics.parsers.base import ParseContext, Parser, Record

__all__ = ["PARSERS", "ParseContext", "Parser", "Record", "detect", "parser_by_name"]

PARSERS: tuple[Parser, ...] = (
    # Specific formats first; each module exposes one PARSER.
    plaintext.PARSER,  # always last: the catch-all
)


def detect(head: list[str]) -> tuple[Parser, float]:
    """The parser that claims ``head`` most confidently (ties go to the earlier entry)."""
    best, best_score = PARSERS[-1], -1.0
    for parser in PARSERS:
        try:
            score = parser.detect(head)
        except Exception:  # a detector bug must not stop the analysis
            score = 0.0
        if score > best_score:
            best, best_score = parser, score
    return best, best_score


def parser_by_name(name: str) -> Parser:
    for parser in PARSERS:
        if parser.name == name:
            return parser
    raise KeyError(name)
