"""The culprit in any shape (issue 21): the incidents of tests/data/culprit/incidents.py, written by hand in
ordinary shapes, name the same rank, GPU, process or node however they arrive."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from forensics.analysis import analyze, to_json_dict
from forensics.findings import Blame
from forensics.text_report import render_text

DATA = Path(__file__).parent / "data" / "culprit"
sys.path.insert(0, str(DATA))
import incidents  # noqa: E402


def _analyze(tmp: Path, files: dict[str, str]) -> tuple[Blame | None, str | None]:
    for name, text in files.items():
        (tmp / name).write_text(text, encoding="utf-8")
    a = analyze([str(tmp / n) for n in files])
    return a.verdict.blame, a.verdict.root_cause_id


@pytest.mark.parametrize("prefix,ctrl_c", [("default", True), ("rank", True), ("default", False), ("none", True)])
def test_drafters_that_stop_printing_are_the_culprits(tmp_path: Path, prefix: str, ctrl_c: bool) -> None:
    """Drafters 6, 7 stop printing while the rest go on and the queues fill: they are the culprits (not 'victims
    that timed out'), whether the rank is in torchrun's prefix or only inside the message, with or without the
    Ctrl-C tail in which every rank prints a KeyboardInterrupt."""
    blame, root = _analyze(tmp_path, incidents.pipeline(prefix, ctrl_c))
    assert root == "silent-worker-stall"
    assert blame is not None and blame.culprit_ranks == [6, 7] and blame.victim_ranks == [0, 1, 2, 3, 4, 5]
    assert "stopped printing" in blame.why and "timed out" not in blame.why
    assert "queues q_hs, q_pre full (64/64)" in blame.why  # back-pressure: the consumers stopped


@pytest.mark.parametrize("paste,kernel_first", [(False, True), (True, True), (True, False)])
def test_an_xid_and_the_training_log_pasted_as_one(tmp_path: Path, paste: bool, kernel_first: bool) -> None:
    """dmesg and the training log as two files or as one paste (either order): the Xid's GPU is joined to rank 5
    through NCCL's busId the same way."""
    blame, root = _analyze(tmp_path, incidents.xid_and_training(paste, kernel_first))
    assert root == "xid-79-fallen-off-bus"
    assert blame is not None and blame.culprits == "rank 5 (GPU 0000:c1:00.0)"
    assert blame.culprit_gpus == ["0000:c1:00.0"] and blame.victims == "7 ranks (0–4, 6, 7)"


def test_a_paste_is_read_as_its_two_sources(tmp_path: Path) -> None:
    files = incidents.xid_and_training(paste=True)
    (tmp_path / "paste.txt").write_text(files["paste.txt"], encoding="utf-8")
    a = analyze([str(tmp_path / "paste.txt")])
    (source,) = a.sources
    assert any("one paste of 2 sources split: dmesg-ctime + process-output" in p for p in source.presentation)
    xid = next(e for e in a.timeline.events if e.kind == "xid")
    assert xid.gpu == "0000:c1:00.0" and xid.origin.line == 3  # the raw line, offsets kept


@pytest.mark.parametrize("n", [8, 64, 512, 2048])
def test_one_silent_rank_among_many_timeouts(tmp_path: Path, n: int) -> None:
    """n ranks, all but rank 3 (n = 8) or 33 print the watchdog timeout, in arrival order: a counted line stands
    for every rank it was seen on, so the missing rank is the only culprit, and the victims are counted."""
    missing = 3 if n == 8 else 33
    blame, _ = _analyze(tmp_path, incidents.watchdog_world(n, missing))
    assert blame is not None and blame.culprit_ranks == [missing]
    assert len(blame.victim_ranks) == n - 1
    assert blame.victims.startswith(f"{n - 1} ranks (") if missing != n - 1 else True
    assert len(blame.line()) < 1000  # bounded at any scale
    assert len(json.dumps(blame.to_json())) < 40_000


def test_rank_in_message_only_names_the_missing_rank(tmp_path: Path) -> None:
    blame, _ = _analyze(tmp_path, incidents.watchdog_world(64, 33, prefix="none"))
    assert blame is not None and blame.culprit_ranks == [33]


def test_a_gloo_stall_names_the_quiet_rank_and_says_gloo(tmp_path: Path) -> None:
    files = incidents.gloo_stall()
    (tmp_path / "train.log").write_text(files["train.log"], encoding="utf-8")
    a = analyze([str(tmp_path / "train.log")])
    b = a.verdict.blame
    assert b is not None and b.culprit_ranks == [1] and b.victim_ranks == [0]
    assert "loading next shard..." in b.why
    assert all("NCCL" not in f.title for f in a.findings)
    assert any("gloo timeout" in f.title.lower() for f in a.findings)


@pytest.mark.parametrize("steps", [True, False])
def test_frozen_drafters_on_one_gpu_are_named_with_their_processes(tmp_path: Path, steps: bool) -> None:
    """Two drafters grow to the GPU's cap and sit idle (their worker swallowed the OOM) while the third keeps
    working below them: per-process utilization names the two, not the healthy one (memory alone called the
    healthy drafter 'stunted'), and the root is the stall, not the throughput fall."""
    bundle = incidents.frozen_drafters_bundle(tmp_path / "bundle", steps=steps)
    a = analyze([str(bundle)])
    b = a.verdict.blame
    assert a.verdict.root_cause_id == "silent-worker-stall"
    assert b is not None and b.culprit_ranks == [6, 7] and b.culprit_pids == [4106, 4107]
    assert b.victim_ranks == [5]
    assert "memory frozen at their peak, 9,000 MiB" in b.why
    derived = {e.attrs.get("detector") for e in a.timeline.events if e.kind == "derived"}
    assert "stunted-workers" not in derived  # the busy drafter is not stunted


def test_this_run_before_the_runs_past(tmp_path: Path) -> None:
    """The kernel log from before the recording holds another run's Xid 31 on the same GPU: this run's own Xid
    (its worker's pid) is the root's first evidence, and worker 2 (that pid) the culprit."""
    a = analyze([str(incidents.shared_gpu_bundle(tmp_path / "bundle"))])
    v = a.verdict
    assert v.root_cause is not None and "pid=3102" in v.root_cause.evidence[0].message
    assert v.blame is not None and v.blame.culprit_ranks == [2] and v.blame.culprit_pids == [3102]
    assert "1999" not in v.blame.line()
    assert render_text(a).startswith("CULPRIT: rank 2 (GPU 0); pid 3102 (python3)")


def test_single_rank_failures_carry_blame_in_json() -> None:
    """Rank 62's OOM in a 64-GPU job, a worker's SIGSEGV, the OOM killer's victim: the JSON names them."""
    cases = Path(__file__).parent / "realcases2" / "dev" / "cases"
    corpus = Path(__file__).parent / "corpus" / "cases"
    want = {cases / "msswift3327-8node-rank62-oom-step330": ([62], [], ["6"]),
            cases / "dsexamples626-local-rank1-return-code-11": ([1], [], []),
            corpus / "deepseekvl2-90-host-oom-killer": ([], [576419], [])}
    for folder, (ranks, pids, gpus) in want.items():
        d = to_json_dict(analyze([str(p) for p in folder.iterdir() if p.name != "case.toml"]))
        b = d["verdict"]["blame"]
        assert b is not None, folder.name
        assert (b["culprit_ranks"], b["culprit_pids"], b["culprit_gpus"]) == (ranks, pids, gpus), folder.name


def test_a_fingerprint_mismatch_names_the_odd_rank() -> None:
    """PyTorch's collective fingerprint check (real log, realcases2 simpletuner2712): rank 4 is at ALLGATHER #101,
    rank 7 at REDUCE #0: rank 7 runs the collective the others do not."""
    cases = Path(__file__).parent / "realcases2" / "dev" / "cases"
    folder = cases / "simpletuner2712-circuit-breaker-collective-mismatch"
    b = analyze([str(p) for p in folder.iterdir() if p.name != "case.toml"]).verdict.blame
    assert b is not None and b.culprit_ranks == [7] and b.victim_ranks == [4]


def test_a_p2p_failure_names_both_gpus_of_the_pair() -> None:
    """A P2P failure is between two GPUs: both are named, by NCCL's NVML numbers where it prints them (realcases2
    nccl606: CUDA_VISIBLE_DEVICES=2,3 renumbers them 0, 1, ``Setting affinity for GPU 2/3`` does not), else by
    the bus ids of nccl-tests' device list (nccl#1320, another thread: two A100s, ACS on)."""
    real = DATA / "real" / "nccl1320-a100-two-gpu-p2p-hang.log"
    v = analyze([str(real)]).verdict
    assert v.root_cause is not None and v.root_cause.signature == "nccl-p2p-failure"
    assert v.blame is not None and v.blame.culprit_gpus == ["0000:56:00.0", "0000:57:00.0"]
    assert "peer-to-peer path between GPU 0000:56:00.0 and GPU 0000:57:00.0" in v.blame.why
    folder = Path(__file__).parent / "realcases2" / "dev" / "cases" / "nccl606-a6000-gpu2-gpu3-p2p-hang-acs"
    b = analyze([str(p) for p in folder.iterdir() if p.name != "case.toml"]).verdict.blame
    assert b is not None and b.culprit_gpus == ["2", "3"] and b.culprits == "GPUs 2, 3"


def test_culprit_invariance_bar() -> None:
    """The issue's bar for the culprit: the incidents (tests/data/culprit/cases) name the same culprit in every
    shape — one paste, the rank only in the message, other launchers' labels, shuffled ranks, 64 ranks (512 and
    2048 too with FORENSICS_FULL_INVARIANCE=1: minutes on a small machine)."""
    import os

    from forensics.evaluation import transforms
    from forensics.evaluation.invariance import find_targets, invariance

    names = [n for n in transforms.CULPRIT_TRANSFORMS
             if os.environ.get("FORENSICS_FULL_INVARIANCE") == "1" or n not in ("scale-512", "scale-2048")]
    report = invariance([], names, targets=find_targets(DATA / "cases"))
    for name in names:
        k, m = report.culprit_rate(name)
        assert m and k / m >= 0.98, (name, k, m, [(o.target, o.culprit_want, o.culprit_got)
                                                  for o in report.changed if o.transform == name])
