"""The NCCL id's get on the c10d store failing because the store's host went away (not only timing
out): a real paste the wording family was not written from (tests/data/c10d_store/README.md)."""

from __future__ import annotations

from pathlib import Path

from forensics.analysis import analyze

DATA = Path(__file__).parent / "data" / "c10d_store"


def test_a_store_reset_under_the_nccl_id_get_is_a_rendezvous_failure() -> None:
    analysis = analyze([str(DATA / "pytorch_131781_store_reset.log")])
    root = analysis.verdict.root_cause
    assert root is not None and root.signature == "rendezvous-timeout"
    assert any("[15] is setting up NCCL communicator" in e.message and "Connection reset by peer" in e.message
               for e in root.evidence)
