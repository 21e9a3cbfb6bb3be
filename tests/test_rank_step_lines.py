"""Per-rank step lines written by a program's own logger: ``[rank 5] drafter step 100 loss 0.0001``
(a space after ``rank``, no colon; ``step N loss X`` without separators). Lines as printed by
``samples/scenarios/drafter_pipeline.py`` in the coordinator's recorded pair
(``samples/recorded/drafter-pipeline-fits`` / ``-margin``, 2026-12-02); ``forensics diff`` names the
ranks that stop printing them."""

from __future__ import annotations

from forensics.parsers.common.base import ParseContext
from forensics.parsers.common.stream_text import split_body
from forensics.parsers.process_output import scan

from forensics.events import Event
from forensics.ingest.textdoc import TextDocument

REAL = """\
pipeline: 5 targets + 3 drafters on one GPU, capacity 28207 MiB (ballast 114422 MiB), CUDA_MODULE_LOADING=LAZY
[rank 3] target ready: 1041 MiB allocated
[rank 6] drafter ready: weights+grads 1665 MiB
t=3s | 14.9K tok/s | tokens=44800 | q_pre=[50,50,50,50,50] q_hs=[60]
[rank 5] drafter step 100 loss 0.0001
[rank 6] drafter step 100 loss 0.0001
[rank 7] drafter step 100 loss 0.0001
t=6s | 16.2K tok/s | tokens=93440 | q_pre=[50,50,49,50,50] q_hs=[60]
"""


def test_rank_prefix_with_a_space_and_no_colon() -> None:
    b = split_body("[rank 5] drafter step 100 loss 0.0001")
    assert (b.rank, b.text) == (5, "drafter step 100 loss 0.0001")
    b = split_body("[rank7]: Traceback (most recent call last):")
    assert (b.rank, b.text) == (7, "Traceback (most recent call last):")
    assert split_body("[rank5]x").rank is None  # no separator: not a prefix
    assert split_body("[ranking] top 5").rank is None


def test_step_loss_lines_without_separators_are_progress_with_their_rank() -> None:
    ctx = ParseContext(path="stdout.log", source="stdout", year=2026)
    events = [r for r in scan(TextDocument.from_bytes(REAL.encode(), "stdout.log"), ctx) if isinstance(r, Event)]
    steps = [(e.rank, e.attrs.get("step"), e.attrs.get("loss")) for e in events if e.kind == "progress" and e.rank]
    assert steps == [(5, 100, 0.0001), (6, 100, 0.0001), (7, 100, 0.0001)]
    rates = [e.attrs["tokens_s"] for e in events if e.kind == "progress" and e.rank is None]
    assert rates == [14900.0, 16200.0]
    assert not any(e.kind == "progress" for e in events if "ready" in e.message)
