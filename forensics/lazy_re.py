"""Module-level regular expressions compiled on first use.

The parsers and the detectors define some 400 patterns at module level; compiling them all
is about a third of ``forensics``'s start-up, and one run uses a third of them (a training
log never needs the Windows or ``nvidia-smi`` patterns). :func:`lazy_compile` takes the same
arguments as :func:`re.compile` and gives an object that compiles the pattern the first time
one of its attributes is read, then answers like the compiled pattern: its methods are stored
on the object, so a call costs what it costs on the pattern itself.

It is duck-typed: ``isinstance(p, re.Pattern)`` is false, and it cannot be handed to
``re.sub(p, …)``; call its methods (``p.sub(…)``). :func:`compile_all` compiles every pattern
made so far — a test calls it, so a bad pattern still fails at once, not in some rare path.
"""

from __future__ import annotations

import re
import sys
from typing import Any, AnyStr, cast

__all__ = ["compile_all", "lazy_compile"]

#: what a compiled pattern offers; copied onto the lazy pattern at its first use
_ATTRIBUTES = ("match", "search", "fullmatch", "finditer", "findall", "sub", "subn", "split",
               "pattern", "flags", "groups", "groupindex", "scanner")
_MADE: list[_LazyPattern] = []


class _LazyPattern:
    def __init__(self, pattern: str | bytes, flags: int, module: str = "") -> None:
        self._source = pattern
        self._flags = flags
        self._compiled: re.Pattern[Any] | None = None
        self._module = module  # where it was made (tests/test_regex_linear.py names it)

    def compile(self) -> re.Pattern[Any]:
        if self._compiled is None:
            compiled = re.compile(self._source, self._flags)
            for name in _ATTRIBUTES:
                setattr(self, name, getattr(compiled, name))
            self._compiled = compiled
        return self._compiled

    def __getattr__(self, name: str) -> Any:  # only for names not yet on the object
        if name.startswith("__") or name in ("_source", "_flags", "_compiled", "_module"):
            raise AttributeError(name)
        return getattr(self.compile(), name)

    def __repr__(self) -> str:
        return repr(self.compile())

    def __reduce__(self) -> tuple[Any, ...]:  # pickled (a worker, a cache) as the pattern itself
        return re.compile, (self._source, self._flags)


def lazy_compile(pattern: AnyStr, flags: int | re.RegexFlag = 0) -> re.Pattern[AnyStr]:
    """Like :func:`re.compile`, compiled when first used."""
    made = _LazyPattern(pattern, int(flags), sys._getframe(1).f_globals.get("__name__", ""))
    _MADE.append(made)
    return cast("re.Pattern[AnyStr]", made)


def compile_all() -> int:
    """Compile every lazy pattern made so far (in the modules imported so far); how many there are."""
    for made in _MADE:
        made.compile()
    return len(_MADE)
