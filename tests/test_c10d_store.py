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


def test_the_rank_whose_store_went_away_is_the_culprit_and_the_waiting_rank_its_victim() -> None:
    """The rule was written from a LlamaFactory pdsh paste (ranks 14 and 15 waiting for rank 0);
    this paste is another job's."""
    blame = analyze([str(DATA / "pytorch_131781_store_reset.log")]).verdict.blame
    assert blame is not None and blame.culprit_ranks == [0] and blame.victim_ranks == [15]
    assert "lost the c10d store (Connection reset by peer) while waiting for rank 0's NCCL id" in blame.why


def test_a_store_get_that_only_timed_out_singles_out_no_rank(tmp_path: Path) -> None:
    """Rank 0 may only be slow to publish the id: no culprit from a timeout alone."""
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: [3] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via "
                   "c10d key-value store by key '0', but store->get('0') got exception: Socket Timeout\n")
    analysis = analyze([str(log)])
    assert analysis.verdict.root_cause is not None and analysis.verdict.root_cause.signature == "rendezvous-timeout"
    assert analysis.verdict.blame is None
