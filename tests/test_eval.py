"""``forensics eval``: the scoring itself on a tiny corpus, and the real corpus bar."""

from pathlib import Path

import pytest

from forensics.cli import main
from forensics.evaluation.evaluate import evaluate

CORPUS = Path(__file__).parent / "corpus"


def _case(root: Path, name: str, primary: str, log: str, confidence: str = "inferred",
          accept: str = "") -> None:
    d = root / "cases" / name
    d.mkdir(parents=True)
    # The summary names a failure line: it must never be analyzed (only the log files are).
    (d / "case.toml").write_text(
        f'id = "{name}"\nprimary = "{primary}"\nalso = []\n{accept}\nconfidence = "{confidence}"\n'
        'summary = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."\n')
    (d / "app.log").write_text(log)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    _case(tmp_path, "oom", "torch-cuda-oom",
          "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 40.00 GiB.\n", "thread-confirmed")
    _case(tmp_path, "healthy", "none", "epoch 1 step 10 loss 2.31\n")
    _case(tmp_path, "missed", "xid-79-fallen-off-bus", "all quiet here\n")
    _case(tmp_path, "accepted", "nccl-error", "RuntimeError: CUDA error: an illegal memory access was encountered\n",
          accept='accept = ["cuda-illegal-memory-access"]')
    return tmp_path


def test_scores_and_confusions(tiny: Path) -> None:
    report = evaluate(tiny)
    assert report.top1 == (3, 4)
    assert report.confirmed == (1, 1)
    assert report.false_alarms == (0, 1)
    assert [(r.case, r.primary, r.predicted) for r in report.misses] == [("missed", "xid-79-fallen-off-bus", "none")]


def test_eval_command_prints_the_report(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(tiny), "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "MISS missed" in out
    assert "top-1 accuracy:        3/4 (75%)" in out
    assert "false alarms on none:  0/1 (0%)" in out
    assert "  xid-79-fallen-off-bus → none\n" in out


def test_eval_of_a_folder_without_cases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(tmp_path)]) == 2
    assert "no case folders" in capsys.readouterr().err


@pytest.mark.slow
def test_corpus_accuracy_bar() -> None:
    """The issue's bar: at least 95 % top-1 on the corpus and no false alarm on a healthy case."""
    report = evaluate(CORPUS)
    assert len(report.results) >= 60
    assert not [r.error for r in report.results if r.error]
    n, d = report.top1
    misses = [(r.case, r.primary, r.predicted) for r in report.misses]
    assert n / d >= 0.95, misses
    assert report.false_alarms[0] == 0, misses
