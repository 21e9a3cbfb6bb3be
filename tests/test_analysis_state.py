"""One analysis's state is its own: ``--all`` goes through :class:`Options`, no caller changes a module
global, and two analyses in two threads at once give what each gives alone."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from forensics import analysis
from forensics.analysis import Options, analyze, to_json_dict
from forensics.cli import main
from forensics.match import matcher
from forensics.match.detectors import context
from forensics.match.detectors.frames import frames_by_host

ROOT = Path(__file__).resolve().parent.parent
STALL = ROOT / "samples" / "recorded" / "silent-stall-2gpu" / "bundle"
OOM = ROOT / "samples" / "recorded" / "oom-optimizer-step" / "bundle"


def _oom_log(path: Path, n: int = 40) -> Path:
    path.write_text("".join(f"[  {100 + i}.000000] Out of memory: Killed process {1000 + i} (python) "
                            f"total-vm:1000kB, anon-rss:{900 + i}kB, file-rss:0kB\n" for i in range(n)))
    return path


def _oom_finding(a: analysis.Analysis) -> Any:
    return next(f for f in a.findings if f.matched == 40)


def test_max_evidence_defaults_to_the_matchers_cap() -> None:
    assert Options().max_evidence == matcher.MAX_EVIDENCE


def test_max_evidence_is_an_option(tmp_path: Path) -> None:
    log = _oom_log(tmp_path / "oom.log")
    capped = _oom_finding(analyze([str(log)]))
    every = _oom_finding(analyze([str(log)], Options(max_evidence=None)))
    few = _oom_finding(analyze([str(log)], Options(max_evidence=4)))
    assert len(capped.evidence) == matcher.MAX_EVIDENCE
    assert len(every.evidence) == 40
    assert len(few.evidence) == 4 and few.evidence[0].message == every.evidence[0].message  # first and last
    assert few.evidence[-1].message == every.evidence[-1].message
    assert matcher.MAX_EVIDENCE == 16  # nobody changed it


def test_all_goes_through_options_and_leaves_the_matcher_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    log = _oom_log(tmp_path / "oom.log")
    seen: list[tuple[int | None, int]] = []
    real = analysis.analyze

    def spy(paths: Any, options: Options | None = None, *args: Any, **kwargs: Any) -> analysis.Analysis:
        assert options is not None
        seen.append((options.max_evidence, matcher.MAX_EVIDENCE))
        return real(paths, options, *args, **kwargs)

    monkeypatch.setattr(analysis, "analyze", spy)
    assert main(["analyze", "--all", "--quiet", "--format", "json", str(log)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert seen == [(None, 16)]
    assert any(f["matched"] == 40 and len(f["evidence"]) == 40 for f in out["findings"])


# -- the detectors' shared results -------------------------------------------------------------------

def test_detector_results_are_kept_only_inside_a_context() -> None:
    built: list[int] = []

    def build(data: Any) -> int:
        built.append(len(data))
        return len(built)

    data = [1, 2, 3]
    assert context.memo("x", data, build) == 1 and context.memo("x", data, build) == 2  # nothing kept outside
    with context.active(context.DetectorContext()):
        assert context.memo("x", data, build) == 3 and context.memo("x", data, build) == 3
        data.append(4)  # the same list, grown: built again
        assert context.memo("x", data, build) == 4
        with context.active(context.DetectorContext()):  # another analysis: its own
            assert context.memo("x", data, build) == 5
        assert context.memo("x", data, build) == 4
    assert context.memo("x", data, build) == 6


def test_each_thread_has_its_own_detector_context() -> None:
    """A thread started while another's context is current does not see it."""
    samples = analyze([str(STALL)]).timeline.metrics
    with context.active(context.DetectorContext()):
        mine = frames_by_host(samples)
        assert frames_by_host(samples) is mine
        theirs: list[object] = []
        t = threading.Thread(target=lambda: theirs.append(frames_by_host(samples)))
        t.start()
        t.join()
    assert theirs and theirs[0] is not mine and theirs[0] == mine


def _training_log(path: Path, lines: int, seed: int, last: str) -> Path:
    """A chatty training log of ~110 bytes a line ending in ``last`` (big enough for the Hyperscan scans)."""
    rnd = random.Random(seed)
    with path.open("w") as f:
        for i in range(lines):
            f.write(f"2026-11-30 14:{i // 6000 % 60:02d}:{i // 100 % 60:02d},{i % 1000:03d} INFO worker "
                    f"{rnd.randrange(8)}: step {i} loss {rnd.random():.4f} lr 3e-4 NCCL INFO comm "
                    f"{rnd.randrange(1 << 30):x} rank {rnd.randrange(8)} nranks 8\n")
        f.write(last)
    return path


@pytest.mark.slow
def test_two_analyses_in_two_threads_give_what_each_gives_alone(tmp_path: Path) -> None:
    """Different inputs (bundles with NVML series for the detectors, 2 MB logs for the scans) analysed
    at once in two threads: each result is the one it has alone. (The Hyperscan databases are shared
    between threads, their scratch was too: records were skipped with ScratchInUseError.)"""
    a = [str(_training_log(tmp_path / "a.log", 20000, 1, (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 79.10 GiB of which 1.00 GiB is free.\n"))), str(STALL)]
    b = [str(_training_log(tmp_path / "b.log", 20000, 2, (
        "[rank3]:[E ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 "
        "milliseconds before timing out.\n"))), str(OOM)]
    alone = {"a": to_json_dict(analyze(a)), "b": to_json_dict(analyze(b))}
    assert alone["a"] != alone["b"]
    together: dict[str, Any] = {}
    errors: list[BaseException] = []

    def run(name: str, paths: list[str]) -> None:
        try:
            together[name] = to_json_dict(analyze(paths))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(name, paths)) for name, paths in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert together == alone
