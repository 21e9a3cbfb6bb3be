"""TextDocument's literal scan: the Hyperscan and pure-Python paths agree with a naive line-by-line
reference, line numbers are right, caps / tail literals / sampling behave as documented, and
over-long lines yield the window around their hits."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import forensics.ingest.textdoc as textdoc
from forensics.ingest.textdoc import Line, TextDocument

ENGINES = ["hyperscan", "find"]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once with Hyperscan (even on small inputs, in small chunks) and once with find()."""
    if request.param == "hyperscan":
        pytest.importorskip("hyperscan")
        monkeypatch.setattr(textdoc, "HS_MIN_BYTES", 0)
        monkeypatch.setattr(textdoc, "_HS_CHUNK", 64)
        monkeypatch.setattr(textdoc, "USE_HYPERSCAN", True)
    else:
        monkeypatch.setattr(textdoc, "USE_HYPERSCAN", False)
    return str(request.param)


def naive(data: bytes, literals: list[bytes]) -> list[tuple[int, int, str]]:
    out = []
    pos = 0
    for no, raw in enumerate(data.split(b"\n"), 1):
        if raw and any(lit in raw for lit in literals):
            text = raw.removesuffix(b"\r").decode("utf-8", "replace")
            out.append((no, pos, text))
        pos += len(raw) + 1
    return out


def got(lines: list[Line]) -> list[tuple[int, int, str]]:
    return [(line.no, line.offset, line.text) for line in lines]


def test_hits_in_file_order_each_once(engine: str) -> None:
    data = b"alpha\nError one Error two\nbeta\n\nTraceback here\nError at end"
    doc = TextDocument(data, "x")
    lits = [b"Error", b"Traceback"]
    assert got(list(doc.candidate_lines(lits))) == naive(data, lits)


def test_no_literals_and_no_hits(engine: str) -> None:
    doc = TextDocument(b"nothing here\n", "x")
    assert list(doc.candidate_lines([])) == []
    assert list(doc.candidate_lines([b""])) == []
    assert list(doc.candidate_lines([b"absent"])) == []


def test_limited_literal_stops_after_limit_lines(engine: str) -> None:
    rows = [b"chatter via P2P" if i % 2 else b"plain" for i in range(400)]
    rows[333] = b"real Error"
    rows[335] = b"Error and via P2P"
    data = b"\n".join(rows) + b"\n"
    doc = TextDocument(data, "x")
    lines = list(doc.candidate_lines([b"Error"], limited=[b"via P2P"], limit=10))
    p2p = [line for line in lines if "via P2P" in line.text and "Error" not in line.text]
    assert len(p2p) == 10 and p2p[0].no == 2
    assert [line.no for line in lines if "Error" in line.text] == [334, 336]


def test_tail_literal_counts_only_after_the_last_carriage_return(engine: str) -> None:
    data = (b" 1/9 [00:01<00:02, 1.0it/s]\r 2/9 [00:01<00:02, 1.0it/s]\n"  # hit in the last segment
            b" 3/9 [00:01<00:02, 1.0it/s]\rloading\n"  # only in an earlier segment: no hit
            b"crlf 4/9 1.0it/s\r\n"  # a CRLF line end is not a bar redraw
            b"plain\n")
    doc = TextDocument(data, "x")
    assert [line.no for line in doc.candidate_lines([], tail=[b"it/s"])] == [1, 3]


def test_sampled_lines_are_thinned_but_others_kept(engine: str) -> None:
    rows = [f"{{'loss': {i}}}" for i in range(1000)]
    rows[500] = "{'loss': 1} RuntimeError: boom"
    doc = TextDocument(("\n".join(rows) + "\n").encode(), "x")
    starts = doc.candidate_starts([b"Error"], sampled=[b"'loss'"], every=10)
    number = doc.line_numberer()
    nos = [number(s) for s in starts]
    assert 501 in nos  # a line with another hit is always kept
    assert nos[-1] == 1000  # the last sampled line is always kept
    assert 95 <= len(nos) <= 110


def test_line_numbers_with_numpy_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Big documents count newlines with numpy; small spans and big ones agree with bytes.count."""
    pytest.importorskip("numpy")
    monkeypatch.setattr(textdoc, "NUMPY_COUNT_MIN", 8 << 20)
    rng = random.Random(3)
    data = b"".join(rng.choice([b"x" * rng.randrange(0, 300), b"Error"]) + b"\n" for _ in range(20000))
    counter = textdoc._newline_counter(data)
    assert counter(0, len(data)) == data.count(b"\n")
    big = data * ((9 << 20) // len(data) + 1)  # over the (lowered) size where numpy takes over
    fast = textdoc._newline_counter(big)
    for a, b in [(0, 10), (5, 40 << 10), (1000, 5 << 20), (0, len(big)), (3, len(big) - 7)]:
        assert fast(a, b) == big.count(b"\n", a, b)


def test_long_line_yields_windows_around_hits(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textdoc, "MAX_LINE_BYTES", 256)
    bar = "".join(f"\r {i}/500 [00:01<00:02, 1.0it/s]" for i in range(200))
    data = ("Error first\n" + bar + "Traceback (most recent call last):\n  File \"x.py\", line 1\n").encode()
    doc = TextDocument(data, "x")
    lines = list(doc.candidate_lines([b"Error", b"Traceback"], tail=[b"it/s"]))
    assert lines[0] == Line(1, 0, "Error first")
    tail = lines[-1]
    assert tail.no == 2 and tail.text.endswith("Traceback (most recent call last):")
    assert len(tail.text) < 256 and doc.truncated_lines == 0
    assert next(doc.lines_from(tail)).text == '  File "x.py", line 1'


def test_lines_at_and_numberer_going_backwards() -> None:
    doc = TextDocument(b"a\nb\nc\n", "x")
    number = doc.line_numberer()
    assert number(4) == 3 and number(2) == 2 and number(0) == 1
    assert doc.lines_at(2, 2) == [Line(2, 2, "b")]


def test_flood_of_a_limited_literal_is_bounded_on_a_big_buffer() -> None:
    """The real Hyperscan path (chunked, resumed after a cap) on a few MB of chatter."""
    pytest.importorskip("hyperscan")
    chatter = b"h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n" * 60000
    data = chatter + b"RuntimeError: CUDA error: boom\n" + chatter
    doc = TextDocument(data, "x")
    lines = list(doc.candidate_lines([b"Error"], limited=[b"via P2P", b"P2P/IPC"], limit=100))
    assert len(lines) <= 201
    assert any(line.text.startswith("RuntimeError") and line.no == 60001 for line in lines)


LINES = st.lists(st.sampled_from(["", "Error", "xErrorx", "Traceback", "plain", "a\rError", "Error\rb", "é ü",
                                  "tok", "\r"]), max_size=60)


@settings(max_examples=200, deadline=None)
@given(rows=LINES, use_hs=st.booleans())
@pytest.mark.slow
def test_matches_the_naive_reference(rows: list[str], use_hs: bool) -> None:
    data = "\n".join(rows).encode()
    old = (textdoc.USE_HYPERSCAN, textdoc.HS_MIN_BYTES, textdoc._HS_CHUNK)
    try:
        textdoc.USE_HYPERSCAN, textdoc.HS_MIN_BYTES, textdoc._HS_CHUNK = use_hs, 0, 16
        lits = [b"Error", b"Traceback"]
        assert got(list(TextDocument(data, "x").candidate_lines(lits))) == naive(data, lits)
    finally:
        textdoc.USE_HYPERSCAN, textdoc.HS_MIN_BYTES, textdoc._HS_CHUNK = old
