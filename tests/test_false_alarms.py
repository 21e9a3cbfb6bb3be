"""Healthy look-alikes stay healthy: real logs of runs that worked, which once drew a finding
(nccl-tests header read as a hang, a dxgkrnl WARNING splat read as a crash), and the parser facts
the fixes rest on."""

from __future__ import annotations

from pathlib import Path

import pytest
from forensics.parsers.producers.nccl_debug import nccl_tests_outcome

from forensics.analysis import Options, analyze

DATA = Path(__file__).parent / "data" / "health"


@pytest.mark.parametrize("name", [
    "wsl40580-dxg-fortify-warning.dmesg",
    "wsl9029-dxg-ioctl-fscache.dmesg",
    "nccltests82-broadcast-healthy.log",
    "wsl11939-dxg-boot-ioctl.dmesg",
    "dcgm272-nvvs-debug-warnings.log",
    "dcgm174-hostengine-nvswitch-noise.log",
    "stas00-dmesg-grep-limited-by.txt",
    "rpi712-bridge-x1-limited.dmesg",
])
def test_healthy_real_log_has_no_root_cause(name: str) -> None:
    analysis = analyze([str(DATA / name)], Options())
    assert analysis.verdict.root_cause is None, [f.signature for f in analysis.findings]
    assert [f.signature for f in analysis.findings if not f.risk] == []


def test_nccl_tests_outcome_counts_rows_after_the_header() -> None:
    data = (DATA / "nccltests82-broadcast-healthy.log").read_bytes()
    start = data.index(b"# nThread")
    got = nccl_tests_outcome(data, start)
    assert got == {"result_rows": 1, "passed": False, "device_list_cut": False}
    # the same header with nothing after it: no rows
    head_end = data.index(b"\n", start)
    assert nccl_tests_outcome(data[:head_end + 1], start)["result_rows"] == 0


def test_nccl_tests_outcome_reads_prefixed_rows_and_the_summary() -> None:
    text = (b"# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20\n"
            b"0:   133169160      33292290     float     sum      -1   2666.0   49.95   95.74      0   2660.4"
            b"   50.06   95.94      0\n# Out of bounds values : 0 OK\n")
    assert nccl_tests_outcome(text, 0) == {"result_rows": 1, "passed": True, "device_list_cut": False}


def test_header_without_rows_still_reads_as_a_hang() -> None:
    corpus = Path(__file__).parent / "corpus" / "cases" / "p2p-4090-silent-zero-copy" / "nccl-tests-hang.log"
    analysis = analyze([str(corpus)], Options())
    assert analysis.verdict.root_cause is not None
    assert analysis.verdict.root_cause.signature == "nccl-p2p-failure"


def test_a_device_list_cut_short_is_a_paste_not_a_hang(tmp_path: Path) -> None:
    # nccl-tests prints every rank's line at once: all 4 then silence is a hang; 2 of 4 is a cut paste.
    data = (DATA / "nccl257-allreduce-hang-4gpu.log").read_bytes()
    start = data.index(b"# nThread")
    assert nccl_tests_outcome(data, start, 4)["device_list_cut"] is False
    hung = analyze([str(DATA / "nccl257-allreduce-hang-4gpu.log")], Options())
    assert hung.verdict.root_cause is not None
    assert any("nThread 1 nGpus 4" in e.message for f in hung.findings for e in f.evidence)
    cut_at = data.index(b"#   Rank  2")
    assert nccl_tests_outcome(data[:cut_at], start, 4)["device_list_cut"] is True
    (tmp_path / "cut.log").write_bytes(data[:cut_at])
    cut = analyze([str(tmp_path / "cut.log")], Options())
    assert cut.verdict.root_cause is None, [f.signature for f in cut.findings]
