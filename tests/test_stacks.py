"""Hang stacks as evidence, C++ excerpts cut in the middle, and unrecognized-failure.

Real texts in tests/data/stacks (sources in its SOURCES.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from forensics.parsers.producers.hang_stack import Frame, classify

from forensics.analysis import analyze

DATA = Path(__file__).parent / "data" / "stacks"
HEALTHY = Path(__file__).parents[1] / "samples" / "recorded" / "healthy" / "bundle"


def _stacks(name: str) -> list:
    return [e for e in analyze([str(DATA / name)]).timeline.events if e.kind == "stack"]


def _root(paths: list[str]) -> tuple[str | None, str]:
    a = analyze(paths)
    return a.verdict.root_cause_id, a.verdict.summary


def test_pyspy_four_ranks_names_the_one_elsewhere() -> None:
    path = str(DATA / "pyspy-4ranks-one-elsewhere.txt")
    a = analyze([path])
    stacks = [e for e in a.timeline.events if e.kind == "stack"]
    assert [(e.rank, e.attrs["waiting_in"]) for e in stacks] == [
        (0, "collective"), (1, "collective"), (2, "compute"), (3, "collective")]
    assert all(e.attrs["tool"] == "py-spy" for e in stacks)
    assert a.verdict.root_cause_id == "silent-worker-stall"
    assert a.verdict.root_cause is not None and a.verdict.root_cause.ranks == [2]
    assert "Rank 2 is elsewhere (compute: forward at " in a.verdict.summary
    assert "while ranks 0–1, 3 wait in all_gather_into_tensor" in a.verdict.summary
    assert "modeling_llama.py:311" in a.verdict.summary


def test_pyspy_different_collective_is_a_desync(tmp_path: Path) -> None:
    text = (DATA / "pyspy-4ranks-one-elsewhere.txt").read_text()
    head, rank2 = text.split("== rank 2 ==")
    rank2, tail = rank2.split("== rank 3 ==")
    rank2 = rank2.replace("    forward (transformers/models/llama/modeling_llama.py:311)\n",
                          "    broadcast (torch/distributed/distributed_c10d.py:1914)\n")
    p = tmp_path / "dump.txt"
    p.write_text(head + "== rank 2 ==" + rank2 + "== rank 3 ==" + tail)
    root, summary = _root([str(p)])
    assert root == "nccl-desync"
    assert "rank 2 in broadcast" in summary


def test_single_process_dataloader_hang() -> None:
    (e,) = _stacks("pyspy-dataloader.txt")
    assert e.attrs["waiting_in"] == "dataloader" and "_try_get_data" in e.attrs["frame"]
    root, summary = _root([str(DATA / "pyspy-dataloader.txt")])
    assert root == "hang-stack" and "the DataLoader" in summary


def test_zero3_rank_autograd_thread_in_collective() -> None:
    (e,) = _stacks("pyspy-zero3-rank.txt")
    assert e.attrs["waiting_in"] == "collective" and e.attrs["op"] == "all_gather_into_tensor"
    assert any("MainThread: compute" in t for t in e.attrs["other_threads"])


def test_faulthandler_dump_rank_from_harness_line() -> None:
    (e,) = _stacks("faulthandler-timeout.txt")
    assert e.attrs["tool"] == "faulthandler" and e.rank == 3
    assert e.attrs["waiting_in"] == "collective" and e.attrs["op"] == "barrier"


def test_gdb_py_bt_and_thread_apply_all_bt() -> None:
    (e,) = _stacks("gdb-pybt-allreduce.txt")
    assert e.attrs["tool"] == "gdb" and e.attrs["op"] == "all_reduce"
    (g,) = _stacks("gdb-rank0.txt")
    assert g.rank == 0 and g.attrs["waiting_in"] == "background"  # only NCCL proxy threads were pasted
    root, _ = _root([str(DATA / "gdb-rank0.txt")])
    assert root == "unrecognized-failure"  # a dump, but nothing in it says where the hang is


@pytest.mark.parametrize(("func", "file", "native", "want"), [
    ("_next_data", "torch/utils/data/dataloader.py", False, "dataloader"),
    ("get", "queue.py", False, "queue"),
    ("acquire", "threading.py", False, "lock"),
    ("synchronize", "torch/cuda/__init__.py", False, "cuda-sync"),
    ("cudaStreamSynchronize", "libcudart.so.12", True, "cuda-sync"),
    ("c10d::ProcessGroupNCCL::WorkNCCL::wait", "libtorch_cuda.so", True, "collective"),
    ("save", "torch/serialization.py", False, "checkpoint"),
    ("recv_into", "socket.py", False, "io"),
    ("forward", "model.py", False, "compute"),
])
def test_classifier(func: str, file: str, native: bool, want: str) -> None:
    assert classify([Frame(func, file, 1, native)])[0] == want


def test_cut_cpp_stacks_yield_their_heads_event() -> None:
    for name in ("cut-raised-checktimeout.txt", "cut-frames-checktimeout.txt"):
        a = analyze([str(DATA / name)])
        assert a.verdict.root_cause_id == "nccl-watchdog-timeout", name
        (c,) = [e for e in a.timeline.events if e.kind == "c10d"]
        assert c.attrs["excerpt"] is True and c.attrs["timeout"] is True
    kinds = {e.kind for e in analyze([str(DATA / "cut-frames-cuda-watchdog.txt")]).timeline.events}
    assert "cuda-error" in kinds
    a = analyze([str(DATA / "cut-raised-ncclcommwatchdog.txt")])
    assert a.verdict.root_cause_id == "unrecognized-failure"
    assert "ncclCommWatchdog" in a.verdict.summary


def _bundle(tmp_path: Path, **manifest: object) -> str:
    dst = tmp_path / "bundle"
    shutil.copytree(HEALTHY, dst)
    p = dst / "manifest.json"
    data = json.loads(p.read_text())
    data.update(manifest)
    p.write_text(json.dumps(data))
    return str(dst)


def test_healthy_bundle_stays_healthy() -> None:
    assert analyze([str(HEALTHY)]).verdict.root_cause is None


def test_nonzero_exit_is_unrecognized_failure_with_last_lines(tmp_path: Path) -> None:
    a = analyze([_bundle(tmp_path, exit_code=3)])
    f = a.verdict.root_cause
    assert f is not None and f.signature == "unrecognized-failure" and a.failed
    assert f.facts["exit_code"] == 3 and "exited with status 3" in a.verdict.summary
    assert f.facts["last_lines"]["stdout.log"][-1] == "training finished"
    assert len(f.facts["last_lines"]["stdout.log"]) == 20
    from forensics.text_report import render_text

    text = render_text(a)
    assert "Last lines of stdout.log:" in text and "| training finished" in text


def test_killed_by_signal_says_so(tmp_path: Path) -> None:
    a = analyze([_bundle(tmp_path, exit_code=None, signal=9, signal_name="SIGKILL")])
    assert a.verdict.root_cause_id == "unrecognized-failure"
    assert "killed by signal 9 (SIGKILL)" in a.verdict.summary
    assert a.verdict.root_cause is not None and "signal 9 (SIGKILL)" in a.verdict.root_cause.title


def test_interrupted_recording(tmp_path: Path) -> None:
    a = analyze([_bundle(tmp_path, exit_code=None, status="running", end=None, end_ns=None)])
    assert a.verdict.root_cause_id == "unrecognized-failure"
    assert "interrupted" in a.verdict.summary


def test_uncaught_exception_without_signature(tmp_path: Path) -> None:
    p = tmp_path / "out.log"
    # Real shape: https://github.com/deepspeedai/DeepSpeed/issues/7568 (frames), an exception no signature knows.
    p.write_text("Traceback (most recent call last):\n"
                 '  File "/home/yanzhen/distributed_test/deepspeed-test/bug1.py", line 114, in main\n'
                 "    model_engine.step()\n"
                 "KeyError: 'exp_avg'\n")
    root, summary = _root([str(p)])
    assert root == "unrecognized-failure" and "KeyError: 'exp_avg'" in summary


def test_known_signature_wins_over_unrecognized(tmp_path: Path) -> None:
    p = tmp_path / "out.log"
    p.write_text(Path(DATA / "cut-raised-checktimeout.txt").read_text())
    root, _ = _root([_bundle(tmp_path, exit_code=1), str(p)])
    assert root == "nccl-watchdog-timeout"


def test_unseen_zero3_main_thread_in_deepspeed_allgather() -> None:
    (e,) = _stacks("pyspy-zero3-forward-allgather.txt")
    assert e.attrs["waiting_in"] == "collective" and e.attrs["op"] == "all_gather_coalesced"


def test_unseen_faulthandler_threads_of_a_grpo_run() -> None:
    (e,) = _stacks("faulthandler-swift-threads.txt")
    assert e.attrs["tool"] == "faulthandler" and e.attrs["threads_dumped"] == 3
    assert e.attrs["thread"] == "0x00007f56e58844c0" and "unmap_and_release" in e.attrs["frame"]
    assert any("background" not in t for t in e.attrs["other_threads"])
    root, _ = _root([str(DATA / "faulthandler-swift-threads.txt")])
    assert root == "unrecognized-failure"  # a dump of running code: a failure, but no known pattern


def test_rank_prefixed_faulthandler_dumps_of_three_ranks(tmp_path: Path) -> None:
    """The real dump of faulthandler-timeout.txt as three ranks print it through a launcher that
    prefixes every line with [rankN]: (rank 1 moved into the DataLoader)."""
    body = (DATA / "faulthandler-timeout.txt").read_text().split("\n", 1)[1]
    out = []
    for r in range(3):
        text = body if r != 1 else body.replace('"torch/distributed/distributed_c10d.py", line 2477 in barrier',
                                                 '"torch/utils/data/dataloader.py", line 1310 in _try_get_data')
        out += [f"[rank{r}]:Timeout (0:10:00)!", *(f"[rank{r}]:{line}" for line in text.splitlines())]
    p = tmp_path / "stderr.txt"
    p.write_text("\n".join(out) + "\n")
    a = analyze([str(p)])
    stacks = [e for e in a.timeline.events if e.kind == "stack"]
    assert [(e.rank, e.attrs["rank_source"], e.attrs["timeout"]) for e in stacks] == [
        (0, "prefix", "0:10:00"), (1, "prefix", "0:10:00"), (2, "prefix", "0:10:00")]
    assert a.verdict.root_cause_id == "silent-worker-stall"
    assert "Rank 1 is elsewhere (the DataLoader: _try_get_data" in a.verdict.summary


def test_unseen_lhotse_dataloader_dump() -> None:
    (e,) = _stacks("pyspy-lhotse-dataloader.txt")
    assert e.attrs["waiting_in"] == "dataloader" and e.attrs["pid"] == 3740553
    assert _root([str(DATA / "pyspy-lhotse-dataloader.txt")])[0] == "hang-stack"


def test_rank_elsewhere_saving_a_checkpoint_is_single_rank_long_work() -> None:
    a = analyze([str(DATA / "pyspy-rank0-saving.txt")])
    assert a.verdict.root_cause_id == "single-rank-long-work"
    assert a.verdict.root_cause is not None and a.verdict.root_cause.ranks == [0]
    assert [f.signature for f in a.verdict.consequences] == ["silent-worker-stall"]
    assert "Rank 0 is elsewhere (a checkpoint save" in a.verdict.summary
