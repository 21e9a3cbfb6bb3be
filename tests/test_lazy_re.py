"""Module-level patterns compiled on first use (forensics/lazy_re.py): they answer as compiled
patterns do, compile only when used, and every one in the package compiles."""

from __future__ import annotations

import importlib
import pickle
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import forensics
from forensics import lazy_re
from forensics.lazy_re import lazy_compile


def test_a_lazy_pattern_answers_as_the_compiled_one() -> None:
    source, text = r"(?P<rank>\d+): (NCCL \w+)", "rank 3: NCCL WARN, 12: NCCL INFO"
    lazy, compiled = lazy_compile(source, re.I), re.compile(source, re.I)
    assert lazy.search(text).groupdict() == compiled.search(text).groupdict()  # type: ignore[union-attr]
    assert lazy.findall(text) == compiled.findall(text)
    assert lazy.sub(r"<\1>", text) == compiled.sub(r"<\1>", text)
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in compiled.finditer(text)]
    assert (lazy.pattern, lazy.flags, lazy.groups, lazy.groupindex) == \
           (compiled.pattern, compiled.flags, compiled.groups, compiled.groupindex)
    assert lazy_compile(rb"\d+").findall(b"a1b22") == [b"1", b"22"]


def test_it_compiles_only_when_first_used() -> None:
    lazy = lazy_compile(r"Xid \d+")
    assert lazy._compiled is None  # type: ignore[attr-defined]
    assert lazy.match("Xid 79")
    assert lazy._compiled is not None  # type: ignore[attr-defined]


def test_it_pickles_as_the_pattern_itself() -> None:
    lazy = lazy_compile(r"ECC \w+", re.M)
    again = pickle.loads(pickle.dumps(lazy))
    assert isinstance(again, re.Pattern) and again == re.compile(r"ECC \w+", re.M)


def test_a_bad_pattern_fails_when_all_are_compiled() -> None:
    bad = lazy_compile(r"(unclosed")
    with pytest.raises(re.error):
        lazy_re.compile_all()
    lazy_re._MADE[:] = [made for made in lazy_re._MADE if made is not bad]


def test_every_pattern_in_the_package_compiles() -> None:
    for module in pkgutil.walk_packages(forensics.__path__, "forensics."):
        if module.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(module.name)
        except ImportError:  # a module for another platform (record.platform.windows …)
            continue
    assert lazy_re.compile_all() > 300


@pytest.mark.slow
def test_reading_a_short_log_compiles_a_minority_of_them(tmp_path: Path) -> None:
    """What the laziness is for: a one-line kernel log needs few of the patterns."""
    log = tmp_path / "dmesg.log"
    log.write_text("[  12.5] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")
    code = ("import sys; from forensics.analysis import analyze; from forensics import lazy_re\n"
            "analysis = analyze([sys.argv[1]])\n"
            "made = lazy_re._MADE; used = sum(p._compiled is not None for p in made)\n"
            "print(analysis.verdict.root_cause.signature if analysis.verdict.root_cause else None, used, len(made))")
    out = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, check=True)
    verdict, used, made = out.stdout.split()
    assert verdict == "xid-79-fallen-off-bus" and int(made) > 300 and int(used) < int(made) / 2
