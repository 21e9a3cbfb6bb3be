"""Parsers declare the producer versions they were tested on (issue 20): ``tested_with`` on each ``PARSER``.

Every claim is checked against the real samples: the version must be written in a real file the parser
reads (the corpus, the development halves of the real cases, the recorded bundles) or in the case note
(``case.toml`` summary and note, a recorded sample's ``README.md``) of a case that holds such a file. The
listing is ``docs/parsers-tested-with.md``; ``UPDATE_GOLDEN=1`` rewrites it from the parsers."""

from __future__ import annotations

import os
import re
import tomllib
from functools import cache
from pathlib import Path

import pytest
from forensics.parsers.common.base import tested_with as declared
from forensics.parsers.common.presentation import learn
from forensics.parsers.flight_recorder import pickle_to_json
from forensics.parsers.registry import PARSERS, detect

from forensics.ingest.safe_pickle import is_pickle
from forensics.ingest.textdoc import TextDocument

ROOT = Path(__file__).resolve().parent.parent
LISTING = ROOT / "docs" / "parsers-tested-with.md"
#: Real samples only: the held-out halves are scored, never read; tests/data holds reconstructions too.
CASE_DIRS = [ROOT / "tests" / "corpus" / "cases", ROOT / "tests" / "realcases" / "dev" / "cases",
             ROOT / "tests" / "realcases2" / "dev" / "cases", ROOT / "samples" / "recorded"]
CLAIMS = [(p.name, producer, version) for p in PARSERS for producer, versions in declared(p).items()
          for version in versions]


def _note(case: Path) -> str:
    if (case / "case.toml").is_file():
        data = tomllib.loads((case / "case.toml").read_text(encoding="utf-8"))
        return f"{data.get('summary', '')} {data.get('note', '')}"
    readme = case / "README.md"
    return readme.read_text(encoding="utf-8") if readme.is_file() else ""


def _files(case: Path) -> list[Path]:
    skip = {"case.toml", "README.md", "expected.toml"}
    return [p for p in sorted(case.rglob("*")) if p.is_file() and p.name not in skip and p.suffix != ".idx"]


@cache
def _cases() -> list[Path]:
    return [c for d in CASE_DIRS for c in sorted(d.iterdir()) if c.is_dir()]


@cache
def _read_by(path: Path) -> str:
    raw = path.read_bytes()
    if is_pickle(raw[:2]):
        raw = pickle_to_json(raw)[0]
    doc = TextDocument.from_bytes(raw, str(path))
    shown = learn(doc)
    parser, _ = detect((shown.doc if shown is not None else doc).head())
    return parser.name


def _holds(text: str, version: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(version)}(?![\w]|\.\d)", text) is not None


@pytest.mark.parametrize(("parser", "producer", "version"), CLAIMS)
def test_each_version_a_parser_claims_is_in_a_real_sample_it_reads(parser: str, producer: str, version: str) -> None:
    for case in _cases():
        note = _holds(_note(case), version)
        for path in _files(case):
            if not note and not _holds(path.read_bytes().decode("utf-8", "replace"), version):
                continue
            if _read_by(path) == parser:
                return
    pytest.fail(f"{parser} claims {producer} {version}, but no real sample it reads (nor its case note) says so")


def test_the_parsers_that_declare_versions() -> None:
    names = {p.name for p in PARSERS if declared(p)}
    assert {"kmsg", "dmesg", "journalctl", "nvidia-smi", "nvidia-smi-q", "nvidia-smi-xml", "nccl-debug",
            "process-output", "flight-recorder", "dcgmi-diag"} <= names
    assert all(isinstance(v, tuple) and v for p in PARSERS for v in declared(p).values())


def listing() -> str:
    rows = ["# Producer versions the parsers were tested on", "",
            "Each parser's `tested_with` (`parsers/*.py`, the contract in `parsers/common/base.py`): the versions",
            "of each producer whose real output its samples and tests hold, taken from that output's own text or",
            "its case note. `tests/test_parsers_tested_with.py` checks each one against the samples and keeps this",
            "listing current (`UPDATE_GOLDEN=1` rewrites it). A parser not listed declares none.", "",
            "| parser | producer | versions |", "|---|---|---|"]
    for p in PARSERS:
        for producer, versions in declared(p).items():
            rows.append(f"| `{p.name}` | {producer} | {', '.join(versions)} |")
    return "\n".join(rows) + "\n"


def test_the_listing_is_current() -> None:
    if os.environ.get("UPDATE_GOLDEN") == "1":
        LISTING.write_text(listing(), encoding="utf-8")
    assert LISTING.read_text(encoding="utf-8") == listing()
