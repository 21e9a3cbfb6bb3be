"""Every parser's own samples are detected as that parser and parse cleanly; cross-matching the
samples of all parsers keeps the registry order specific-before-generic."""

from __future__ import annotations

import pytest
from forensics.parsers.common.base import ParseContext
from forensics.parsers.registry import PARSERS, detect

from forensics.events import Event, MetricSample
from forensics.ingest.textdoc import TextDocument

SAMPLES = [(p.name, i, s) for p in PARSERS for i, s in enumerate(p.samples)]


def test_every_parser_has_samples_and_a_unique_name() -> None:
    names = [p.name for p in PARSERS]
    assert len(names) == len(set(names))
    for p in PARSERS:
        assert p.samples, f"parser {p.name} has no samples"


@pytest.mark.parametrize(("name", "index", "sample"), SAMPLES, ids=[f"{n}-{i}" for n, i, _ in SAMPLES])
def test_sample_is_detected_as_its_own_format(name: str, index: int, sample: str) -> None:
    doc = TextDocument.from_bytes(sample.encode(), f"{name}-sample-{index}")
    parser, score = detect(doc.head())
    assert parser.name == name, f"sample {index} of {name} detected as {parser.name} ({score:.2f})"


@pytest.mark.parametrize(("name", "index", "sample"), SAMPLES, ids=[f"{n}-{i}" for n, i, _ in SAMPLES])
def test_sample_parses_without_warnings(name: str, index: int, sample: str) -> None:
    parser = next(p for p in PARSERS if p.name == name)
    doc = TextDocument.from_bytes(sample.encode(), "sample")
    ctx = ParseContext(path="sample", source="file:sample", year=2025, detect=detect)
    records = list(parser.parse(doc, ctx))
    assert not ctx.warnings, ctx.warnings
    assert records, f"sample {index} of {name} produced nothing"
    for r in records:
        assert isinstance(r, Event | MetricSample)
        assert r.origin.path == "sample" and r.origin.line >= 1


def test_as_int_reads_ints_and_decimal_strings_only() -> None:
    from forensics.values import as_int

    assert [as_int(v) for v in (7, "-1", " 160 ", True, "²", "--1", "1.5", "", None, 2.0)] == [
        7, -1, 160, None, None, None, None, None, None, None]
