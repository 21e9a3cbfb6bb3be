"""Every shipped regular expression runs in linear time on adversarial lines (issue 24).

The ``nvidia-smi -q`` key/value pattern took 143 s on 40 lines of ``x`` and 65,000 tabs, on every
input file (its detector reads every file's head). This test runs each module-level pattern of the
analyzer (every ``lazy_compile`` of ``forensics`` and ``forensics.parsers``) and each shipped
signature's regex, with ``search`` and ``match``, on shapes an attacker controls: a long run of one
character class, the same run between other characters, and near-misses (the pattern's longest
literal cut by one character, before and after the run). Each pattern runs in a forked child that
reports the CPU time of every operation; an operation over :data:`CAP_S` of CPU is a quadratic (or
worse) pattern. With :data:`RUN` characters a linear pattern takes milliseconds and a
quadratic one tens of seconds, so the cap is a hang guard with two orders of magnitude either side.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil
import re
import select
import signal
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not hasattr(os, "fork"), reason="uses fork")]

ROOT = Path(__file__).resolve().parent.parent
#: Modules whose patterns never see an input file: the evaluation's own rewrites of the test corpus.
_NOT_ON_INPUT = ("forensics.evaluation",)
RUN = 50_000
CAP_S = 3.0
CLASSES = ("1", "a", " ", "\t", ":", "[", "(", '"', "/", ".", ",", "=", "-", "\\", "|", "\n", "x1", "a ", "1.")
_LITERAL = re.compile(r"[A-Za-z][A-Za-z ,:_-]{3,}")


def _patterns() -> list[tuple[str, Any, bool]]:
    from forensics import lazy_re

    for pkg in ("forensics", "forensics.parsers"):
        root = importlib.import_module(pkg)
        for mod in pkgutil.walk_packages(root.__path__, pkg + "."):
            if mod.name.endswith("__main__") or ".record" in mod.name or ".tui" in mod.name:
                continue
            importlib.import_module(mod.name)
    found: list[tuple[str, Any, bool]] = [(f"{lp._module}: {lp._source!r}"[:160], lp.compile(), _anchored(lp))
                                          for lp in lazy_re._MADE if lp._module.startswith(("forensics.", "parsers."))
                                          and not lp._module.startswith(_NOT_ON_INPUT)]  # (not a test module's)
    from forensics.match import load_signatures

    for sig in load_signatures(()):
        for ev in sig.evidence:
            if ev.pattern is not None:
                found.append((f"signature {sig.id}/{ev.name}: {ev.pattern.pattern!r}"[:160], ev.pattern, False))
    return found


_SOURCES: list[str] = []


def _anchored(lp: Any) -> bool:
    """Whether the code only ever calls ``match``/``fullmatch`` on this pattern (by the names its module
    binds it to, looked up in every source file): its ``search`` is never run, so never timed."""
    if not _SOURCES:
        for base in ("forensics", "parsers"):
            _SOURCES.extend(p.read_text(encoding="utf-8") for p in (ROOT / base).rglob("*.py"))
    module = sys.modules.get(lp._module)
    names = [n for n, v in vars(module).items() if v is lp] if module else []
    ops = {op for n in names for text in _SOURCES for op in re.findall(rf"\b{re.escape(n)}\.(\w+)\(", text)}
    return bool(ops) and ops <= {"match", "fullmatch"}


def _shapes(pattern: Any) -> Iterator[str | bytes]:
    source = pattern.pattern if isinstance(pattern.pattern, str) else pattern.pattern.decode("latin-1")
    literals = sorted(_LITERAL.findall(source.replace("\\", "")), key=len, reverse=True)[:1]
    for unit in CLASSES:
        run = unit * (RUN // len(unit))
        shapes = [run, "x" + run + "!", "1 " + run + " 1"]
        for lit in literals:
            shapes += [run + lit[:-1], lit + run, lit[:-1] + run + lit[1:]]
        for s in shapes:
            yield s if isinstance(pattern.pattern, str) else s.encode("utf-8", "surrogateescape")


_OP = struct.Struct("<d")


def _slow_operation(pattern: Any, anchored: bool) -> str | None:
    """Run every shape in a child (``search`` too unless the code only anchors it); the first operation
    whose CPU time passes the cap (or that gives no word for ten times the cap: a hang), or None. CPU
    time, not wall time: a loaded machine (two test workers on two CPUs) must not make a linear
    pattern look slow."""
    shapes = list(_shapes(pattern))
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the CPU seconds of each operation
        try:
            os.close(reader)
            for s in shapes:
                before = time.process_time()
                if not anchored:
                    pattern.search(s)
                pattern.match(s)
                os.write(writer, _OP.pack(time.process_time() - before))
        finally:
            os._exit(0)
    os.close(writer)
    done = 0
    buf = b""
    try:
        while done < len(shapes):
            ready, _, _ = select.select([reader], [], [], CAP_S * 10)
            s = shapes[done]
            where = f"{len(s):,} chars starting {s[:12]!r} ending {s[-12:]!r}"
            if not ready:
                return where + " (no answer: a hang)"
            got = os.read(reader, 4096)
            if not got:
                return "the child died"
            buf += got
            while len(buf) >= _OP.size:
                (cpu,), buf = _OP.unpack(buf[:_OP.size]), buf[_OP.size:]
                if cpu > CAP_S:
                    s = shapes[done]
                    return f"{len(s):,} chars starting {s[:12]!r} ending {s[-12:]!r} ({cpu:.1f} s of CPU)"
                done += 1
        return None
    finally:
        os.close(reader)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_every_shipped_pattern_is_linear_on_adversarial_lines() -> None:
    slow = []
    for name, pattern, anchored in _patterns():
        why = _slow_operation(pattern, anchored)
        if why is not None:
            slow.append(f"{name}: over {CAP_S} s on {why}")
    assert not slow, "\n".join(slow)
