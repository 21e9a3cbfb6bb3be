"""The framework / process-output parsers on the real corpus: each file is detected as the right
kind, parses without warnings, and yields the key records with the right attributes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from forensics.parsers import elastic_error_file, plaintext, process_output
from forensics.parsers.common.base import ParseContext
from forensics.parsers.registry import detect
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.events import Event, TsSource
from forensics.ingest.textdoc import TextDocument

CASES = Path(__file__).resolve().parent / "corpus" / "cases"

#: Every corpus file that is process output, with the parser it must be detected as.
EXPECTED_KIND = {
    "childfailed-sigkill-report-block/torchrun.log": "process-output",
    "destroy-pg-devices-busy-via-nccl/traceback.txt": "process-output",
    "device-assert-flood-embedding/traceback.txt": "process-output",
    "devices-busy-thcudacheck-dataparallel/traceback.txt": "process-output",
    "ecc-uncorrectable-framework-view/traceback.txt": "process-output",
    "illegal-address-via-nccl-watchdog/server.log": "process-output",
    "jade194-uncorrectable-ecc-node/train.log": "process-output",
    "nan-gradnorm-step0-sdpa/train.log": "process-output",
    "nccl-init-socket-closed-cuda-oom/nccl.log": "nccl-debug",
    "nccl-remote-error-flattened/train.log": "process-output",
    "nccl-timeout-collective-mismatch/train.log": "process-output",
    "nccl-timeout-tqdm-glued/train.log": "process-output",
    "neg-deepspeed-overflow-recovered/train.log": "process-output",
    "neg-deepspeed-overflow-warmup-success/train.log": "process-output",
    "neg-destroy-process-group-warning/train.log": "process-output",
    "neg-use-reentrant-warning/train.log": "process-output",
    "oom-adam-step-zero2-v100/traceback.txt": "process-output",
    "oom-first-backward-a100-80g/train.log": "process-output",
    "oom-multinode-sdpa-sibling-contexts/train.log": "process-output",
    "p2p-4090-silent-zero-copy/traceback.txt": "process-output",
    "p2p-4090-silent-zero-copy/nccl-tests-hang.log": "nccl-debug",
    "segfault-faulthandler-srun-label/srun.log": "slurm",
    "slurm-cgroup-oom-step-cancelled/slurm.out": "slurm",
    "slurm-exceeded-job-memory-limit/slurm.out": "slurm",
    "terminate-interleaved-illegal-address/server.log": "process-output",
    "terminate-unknown-error-rich-bar/train.log": "process-output",
    "torchrun-sigkill-during-shard-load/torchrun.log": "process-output",
    "vllm-nccl-invalid-usage-graph/vllm.log": "process-output",
    "windows-cross-device-index-select/train.log": "process-output",
    "windows-unknown-error-optimizer-step/train.log": "process-output",
}


def parse(rel: str) -> tuple[str, list[Event], list[str]]:
    raw = (CASES / rel).read_bytes()
    doc = TextDocument.from_bytes(raw, rel)
    parser, _ = detect(doc.head())
    ctx = ParseContext(path=rel, source="file:test", year=2025)
    # the records, not the per-file rank-activity summaries (tests/test_drafter_pipeline.py has those)
    events = [r for r in parser.parse(doc, ctx) if isinstance(r, Event) and r.kind != "rank-activity"]
    return parser.name, events, ctx.warnings


def of_kind(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e.kind == kind]


def test_every_process_output_case_is_listed() -> None:
    """Each case whose labels say process output has its files in the table above."""
    framework_kinds = {"torchrun", "python-traceback", "c10d-watchdog", "nccl-debug", "hf-trainer", "slurm", "tqdm",
                       "deepspeed", "cpp-stacktrace", "cuda-kernel-assert", "train.log", "vllm", "rich-logging",
                       "faulthandler", "lightning-progress", "python-warning", "c10d-warning", "rich-progress"}
    import tomllib

    for case in sorted(CASES.iterdir()):
        meta = tomllib.loads((case / "case.toml").read_text(encoding="utf-8"))
        if not framework_kinds & set(meta.get("log_kinds", [])):
            continue
        listed = [k for k in EXPECTED_KIND if k.startswith(case.name + "/")]
        journald = any(k.startswith("journald") for k in meta["log_kinds"])
        assert listed or journald, f"{case.name} has process output but no expectation here"


@pytest.mark.parametrize("rel", sorted(EXPECTED_KIND))
def test_detected_as_expected_and_parses_cleanly(rel: str) -> None:
    kind, events, warnings = parse(rel)
    assert kind == EXPECTED_KIND[rel]
    assert warnings == []
    for e in events:
        assert e.origin.path == rel and e.origin.line >= 1 and e.origin.nlines >= 1
        assert "\n" not in e.message


def test_tqdm_glued_c10d_record() -> None:
    _, events, _ = parse("nccl-timeout-tqdm-glued/train.log")
    c10d = of_kind(events, "c10d")
    assert len(c10d) == 5
    first = c10d[0]
    assert first.origin.line == 2 and first.rank == 0
    assert first.attrs["seq"] == 96120 and first.attrs["op_type"] == "ALLREDUCE"
    assert first.attrs["timeout_ms"] == 1800000 and first.attrs["ran_for_ms"] == 25624887
    assert first.attrs["timeout"] is True
    assert {e.rank for e in c10d} == {0, 7}
    bar = of_kind(events, "progress")
    assert bar and bar[0].attrs["step"] == 32040 and bar[0].attrs["it_s"] == pytest.approx(1.37)
    assert bar[0].attrs["loss"] == pytest.approx(2.6)
    # The bar comes before the record glued after it.
    assert events.index(bar[0]) < events.index(first)


def test_collective_mismatch_attrs_and_glog_time() -> None:
    _, events, _ = parse("nccl-timeout-collective-mismatch/train.log")
    c10d = of_kind(events, "c10d")
    by_rank = {(e.rank, e.attrs.get("op_type")): e for e in c10d}
    r7 = by_rank[(7, "BROADCAST")]
    r3 = by_rank[(3, "ALLREDUCE")]
    assert r7.attrs["numel_in"] == 5056 and r3.attrs["numel_in"] == 2106881
    assert r7.attrs["seq"] == r3.attrs["seq"] == 80078
    exc = next(e for e in c10d if "last_completed" in e.attrs)
    assert exc.attrs["pg"] == "0" and exc.attrs["pg_name"] == "default_pg"
    assert exc.attrs["last_enqueued"] == 80078 and exc.attrs["last_completed"] == 80077
    # "[E816 01:45:40.183009389": 16 August, no year -> ctx.year, local wall clock.
    assert r7.ts_source == TsSource.LOCAL
    assert r7.ts == 1755308740183009389  # 2025-08-16T01:45:40.183009389 read as UTC


def test_terminate_interleaved_ranks() -> None:
    _, events, _ = parse("terminate-interleaved-illegal-address/server.log")
    c10d = of_kind(events, "c10d")
    assert len(c10d) == 1
    rec = c10d[0]
    assert rec.rank == 5 and rec.attrs["pg"] == "2" and rec.attrs["pg_guid"] == "3"
    assert "illegal memory access" in rec.message
    assert "finishedGPUExecutionInternal" in rec.detail  # the C++ stack is part of the record
    assert rec.origin.nlines > 5
    # The cut-off terminate record before it is kept as its own event.
    assert any(e.message.startswith("terminate called") for e in events if e is not rec)


def test_flattened_line_yields_every_record() -> None:
    _, events, _ = parse("nccl-remote-error-flattened/train.log")
    assert [e.kind for e in events] == ["c10d", "c10d", "traceback"]
    assert all(e.origin.line == 1 for e in events)
    term = events[2]
    assert term.attrs["exc_type"] == "std::runtime_error"
    assert term.message.startswith("NCCL error: remote process exited")
    assert "NET/IB : Got completion from peer" in term.message


@pytest.mark.parametrize(("rel", "expected"), [
    ("oom-adam-step-zero2-v100/traceback.txt",
     {"gpu": 5, "tried_mib": 3.14 * 1024, "total_mib": 31.75 * 1024, "allocated_mib": 28.28 * 1024,
      "free_mib": 1.95 * 1024, "reserved_mib": 28.28 * 1024}),
    ("oom-multinode-sdpa-sibling-contexts/train.log",
     {"gpu": 3, "tried_mib": 4.35 * 1024, "total_mib": 63.42 * 1024, "free_mib": 1.70 * 1024,
      "process_mib": 60.30 * 1024, "allocated_mib": 50.94 * 1024, "reserved_unallocated_mib": 8.56 * 1024}),
    ("oom-first-backward-a100-80g/train.log", {"tried_mib": 86.0}),
])
def test_oom_generations_sizes(rel: str, expected: dict[str, float]) -> None:
    _, events, _ = parse(rel)
    oom = [e for e in events if e.kind == "traceback" and e.attrs.get("oom")]
    assert len(oom) == 1
    attrs = oom[0].attrs
    for key, value in expected.items():
        assert attrs[key] == pytest.approx(value, rel=1e-3), key
    if "gpu" in expected:
        assert oom[0].gpu == str(expected["gpu"])


def test_oom_phase_and_sibling_processes() -> None:
    _, events, _ = parse("oom-first-backward-a100-80g/train.log")
    tb = of_kind(events, "traceback")[0]
    assert tb.attrs["phase"] == "backward"
    assert any("run_backward" in f or "backward" in f for f in tb.attrs["frames"])
    _, events, _ = parse("oom-multinode-sdpa-sibling-contexts/train.log")
    tb = of_kind(events, "traceback")[0]
    assert tb.rank == 11
    assert [p["mib"] for p in tb.attrs["other_processes"]] == [474.0, 474.0, 474.0]
    assert tb.attrs["exc_type"] == "torch.OutOfMemoryError"


def test_optimizer_step_phase_on_windows_paths() -> None:
    _, events, _ = parse("windows-unknown-error-optimizer-step/train.log")
    tb = of_kind(events, "traceback")[0]
    assert tb.message == "RuntimeError: CUDA error: unknown error"
    assert tb.attrs["phase"] == "optimizer-step"
    bar = of_kind(events, "progress")[0]
    assert bar.attrs["step"] == 507 and bar.attrs["s_it"] == pytest.approx(1.86)


def test_childfailed_report_block() -> None:
    _, events, _ = parse("childfailed-sigkill-report-block/torchrun.log")
    runs = of_kind(events, "torchrun")
    assert len(runs) == 1
    r = runs[0]
    assert r.attrs["exitcode"] == -9 and r.attrs["signal"] == "SIGKILL" and r.pid == 14750
    assert r.attrs["rank"] == 0 and r.attrs["local_rank"] == 0 and r.attrs["root_cause"] is True
    assert r.attrs["error_file"] == "<N/A>"
    assert r.host == "mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker"
    assert r.ts_source == TsSource.LOCAL  # "time : 2025-05-21_15:43:03"
    tb = of_kind(events, "traceback")[0]
    assert tb.attrs["exc_type"].endswith("ChildFailedError")
    assert "===" not in tb.detail  # the report box is not swallowed by the agent's traceback


def test_agent_line_glued_to_bar() -> None:
    _, events, _ = parse("torchrun-sigkill-during-shard-load/torchrun.log")
    agent = of_kind(events, "torchrun")[0]
    assert agent.attrs == {"exitcode": -9, "signal": "SIGKILL", "local_rank": 0, "pid": 31631,
                           "binary": "/usr/bin/python3"}
    bar = of_kind(events, "progress")[0]
    assert bar.attrs["desc"].endswith("Loading checkpoint shards")
    assert bar.attrs["step"] == 4 and bar.attrs["total"] == 7


def test_segfault_faulthandler_srun_label() -> None:
    _, events, _ = parse("segfault-faulthandler-srun-label/srun.log")
    fault = of_kind(events, "traceback")[0]
    assert fault.message == "Fatal Python error: Segmentation fault"
    assert fault.rank == 0 and fault.attrs["signal"] == "SIGSEGV"
    assert fault.attrs["frames"][-1].endswith(":barrier")  # innermost frame last
    agent = of_kind(events, "torchrun")[0]
    assert agent.rank == 0 and agent.attrs["exitcode"] == -11 and agent.attrs["signal"] == "SIGSEGV"
    assert agent.pid == 2128869 and agent.ts_source == TsSource.LOCAL


def test_rich_logging_and_two_tracebacks() -> None:
    _, events, _ = parse("windows-cross-device-index-select/train.log")
    tbs = of_kind(events, "traceback")
    assert tbs[0].message.startswith("RuntimeError: Expected all tensors to be on the same device")
    assert tbs[0].attrs["frames"][-1].endswith("train_util.py:get_huber_threshold_if_needed")
    assert len(tbs) == 2  # the second (accelerate's) is cut off in the excerpt


def test_vllm_prefixes() -> None:
    _, events, _ = parse("vllm-nccl-invalid-usage-graph/vllm.log")
    warn = of_kind(events, "nccl")[0]
    assert warn.attrs["src"] == "misc/strongstream.cc:53" and warn.pid == 3615176
    err = of_kind(events, "log")[0]
    assert err.pid == 3615391 and err.attrs["level"] == "ERROR" and "NCCL error: invalid usage" in err.message
    assert err.ts_source == TsSource.LOCAL
    tb = of_kind(events, "traceback")[0]
    assert tb.pid == 3615391
    assert tb.attrs["frames"][-1].endswith("worker.py:_warm_up_model")
    assert "(VllmWorkerProcess" not in tb.detail  # prefixes are peeled off each line


def test_slurm_cancellations() -> None:
    _, events, _ = parse("slurm-cgroup-oom-step-cancelled/slurm.out")
    slurm = of_kind(events, "slurm")
    oom = [e for e in slurm if "oom_kill_events" in e.attrs]
    assert [(e.attrs["job"], e.attrs["step"]) for e in oom] == [("9411285", "0"), ("9411285", "batch")]
    cancel = next(e for e in slurm if e.attrs.get("cancelled"))
    assert cancel.attrs["node"] == "gpu20-15" and cancel.ts is not None
    task = next(e for e in slurm if e.attrs.get("reason") == "Out Of Memory")
    assert task.rank == 0
    _, events, _ = parse("slurm-exceeded-job-memory-limit/slurm.out")
    limit = next(e for e in events if e.attrs.get("mem_limit"))
    assert limit.attrs["mem_used"] == 626359956 and limit.attrs["job"] == "7518"
    steps = [e.attrs["step"] for e in of_kind(events, "progress")]
    assert steps == [89, 91, 93, 95]


def test_nccl_warn_chain_and_init() -> None:
    _, events, _ = parse("nccl-init-socket-closed-cuda-oom/nccl.log")
    warns = of_kind(events, "nccl")
    assert len(warns) == 4
    assert warns[0].attrs["result"] == "ncclRemoteError" and warns[0].origin.nlines == 2
    assert warns[2].message == "Cuda failure 'out of memory'" and warns[2].attrs["cuda_dev"] == 3
    assert warns[3].attrs["code"] == 1
    _, events, _ = parse("oom-first-backward-a100-80g/train.log")
    init = of_kind(events, "nccl")[0]
    assert init.attrs["nranks"] == 1 and init.attrs["bus_id"] == "c9000" and init.gpu == "0000:c9:00.0"


def test_hf_trainer_nan_dicts() -> None:
    _, events, _ = parse("nan-gradnorm-step0-sdpa/train.log")
    prog = of_kind(events, "progress")
    assert len(prog) == 3
    assert all(math.isnan(e.attrs["grad_norm"]) for e in prog)
    assert [e.attrs["loss"] for e in prog] == [0.8728, 0.0, 0.0]


def test_deepspeed_overflow_and_benign_warnings() -> None:
    _, events, _ = parse("neg-deepspeed-overflow-recovered/train.log")
    over = of_kind(events, "progress")
    assert len(over) == 6 and all(e.attrs["overflow"] for e in over)
    assert over[-1].attrs["loss_scale"] == 67108864 and over[0].rank == 0
    assert over[0].ts_source == TsSource.LOCAL
    _, events, _ = parse("neg-destroy-process-group-warning/train.log")
    assert {e.rank for e in events} == {0, 1, 2, 3}
    assert all(e.kind == "c10d" and e.attrs["level"] == "WARNING" and not e.attrs["timeout"] for e in events)
    _, events, _ = parse("neg-use-reentrant-warning/train.log")
    assert [e.kind for e in events] == ["warning"] and events[0].attrs["category"] == "UserWarning"
    assert "warnings.warn(" in events[0].detail


def test_cpp_terminate_and_ecc_traceback() -> None:
    _, events, _ = parse("ecc-uncorrectable-framework-view/traceback.txt")
    tb, term = events
    assert tb.kind == "traceback" and "cudaErrorECCUncorrectable" in tb.message and tb.attrs["phase"] == "backward"
    assert term.kind == "cuda-error" and term.message == "CUDA error: uncorrectable ECC error encountered"
    assert term.attrs["exc_type"] == "c10::Error" and "frame #0" in term.detail
    _, events, _ = parse("terminate-unknown-error-rich-bar/train.log")
    err = of_kind(events, "cuda-error")[0]
    assert err.message == "CUDA error: unknown error" and err.origin.line == 2
    rich = of_kind(events, "progress")[0]
    assert rich.attrs["step"] == 5700 and rich.attrs["it_s"] == pytest.approx(0.18)


def test_rank_prefixed_multiline_exception() -> None:
    _, events, _ = parse("destroy-pg-devices-busy-via-nccl/traceback.txt")
    r1, r7 = events
    assert (r1.rank, r7.rank) == (1, 7)
    assert "busy or unavailable" in r1.detail  # "Last error:" continuation lines belong to the record
    assert r7.attrs["frames"][-1].endswith("distributed_c10d.py:_shutdown_backend")


def test_device_assert_flood_is_one_event() -> None:
    _, events, _ = parse("device-assert-flood-embedding/traceback.txt")
    assert len(events) == 1
    e = events[0]
    assert e.kind == "cuda-error" and e.attrs["count"] == 8 and e.origin.nlines == 8
    assert e.attrs["assertion"] == "srcIndex < srcSelectDimSize"


def test_legacy_thcudacheck_and_dataparallel() -> None:
    _, events, _ = parse("devices-busy-thcudacheck-dataparallel/traceback.txt")
    assert events[0].kind == "cuda-error" and events[0].attrs["cuda_code"] == 46
    assert events[1].attrs["frames"][-1].endswith("data_parallel.py:scatter")


def test_elastic_error_file() -> None:
    sample = elastic_error_file.PARSER.samples[0]
    doc = TextDocument.from_bytes(sample.encode(), "error.json")
    parser, _ = detect(doc.head())
    assert parser.name == "elastic-error-file"
    ctx = ParseContext(path="error.json", source="file:error.json")
    (ev,) = list(parser.parse(doc, ctx))
    assert isinstance(ev, Event)
    assert ev.kind == "traceback" and ev.ts == 1716304983 * 10**9 and ev.ts_source == TsSource.EXACT
    assert ev.attrs["exc_type"] == "RuntimeError" and ev.attrs["phase"] == "backward"


def test_bad_elastic_error_file_warns() -> None:
    doc = TextDocument.from_bytes(b'{"message": {"extraInfo": ', "error.json")
    ctx = ParseContext(path="error.json", source="file:error.json")
    assert list(elastic_error_file.PARSER.parse(doc, ctx)) == []
    assert ctx.warnings


def test_receipt_time_for_unstamped_lines() -> None:
    doc = TextDocument.from_bytes(b"step 1 | loss 2.5000 | 1,024 tokens/s | 10.0 ms/step\n"
                                  b"RuntimeError: CUDA error: an illegal memory access was encountered\n", "stdout")
    ctx = ParseContext(path="stdout", source="stdout", receipt_ts=lambda off: 1_000_000_000 + off)
    events = [e for e in process_output.scan(doc, ctx) if isinstance(e, Event)]
    assert [e.ts_source for e in events] == [TsSource.RECEIPT, TsSource.RECEIPT]
    assert events[1].ts == 1_000_000_000 + events[1].origin.offset
    assert events[0].attrs["tokens_s"] == 1024 and events[0].attrs["s_it"] == pytest.approx(0.01)


@pytest.mark.slow
def test_progress_is_thinned_but_keeps_anomalies_and_the_last_line() -> None:
    lines = [f"{{'loss': {2.0 - i / 1e5:.5f}, 'grad_norm': 1.0, 'learning_rate': 1e-05, 'epoch': {i / 100:.2f}}}"
             for i in range(30000)]
    lines[17000] = "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 170.0}"
    doc = TextDocument.from_bytes(("\n".join(lines) + "\n").encode(), "train.log")
    ctx = ParseContext(path="train.log", source="file:train.log")
    events = [e for e in process_output.scan(doc, ctx) if isinstance(e, Event)]
    assert len(events) <= 2 * 2048 + 64 + 2
    assert any(e.origin.line == 17001 and math.isnan(e.attrs["grad_norm"]) for e in events)
    assert events[-1].origin.line == 30000
    lines_seen = [e.origin.line for e in events]
    assert lines_seen == sorted(lines_seen)


def test_notable_anchor_in_unknown_text() -> None:
    doc = TextDocument.from_bytes(b"boot ok\nsomething odd: XYZZY happened\nbye\n", "misc.txt")
    ctx = ParseContext(path="misc.txt", source="file:misc.txt", notable=(b"XYZZY",))
    events = [e for e in plaintext.PARSER.parse(doc, ctx) if isinstance(e, Event)]
    assert [(e.kind, e.origin.line) for e in events] == [("log", 2)]


def test_hard_wrapped_c10d_record_is_joined() -> None:
    text = ("[rank3]:[E1206 10:11:12.000000001 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=532339, OpTy\npe=BROADCAST, NumelIn=5, NumelOut=5\n164000, "
            "Timeout(ms)=600000) ran for 600094 milliseconds before timing out.\n")
    doc = TextDocument.from_bytes(text.encode(), "wrapped.log")
    ctx = ParseContext(path="wrapped.log", source="file:wrapped.log", year=2024)
    (ev,) = [e for e in process_output.scan(doc, ctx) if isinstance(e, Event)]
    assert ev.attrs["op_type"] == "BROADCAST" and ev.attrs["numel_out"] == 5164000 and ev.attrs["seq"] == 532339
    assert ev.origin.nlines == 3 and ev.rank == 3
    assert ev.ts is not None and ev.ts_source == TsSource.LOCAL  # "E1206" = 6 December


TEXTS = st.text(alphabet=st.characters(codec="utf-8"), max_size=400)
PIECES = st.lists(st.sampled_from([
    "Traceback (most recent call last):\n", '  File "x.py", line 3, in f\n', "RuntimeError: CUDA error: boom\n",
    "terminate called after throwing an instance of 'c10::Error'\n", "  what():  CUDA error: x\n",
    "[rank1]:[E321 02:07:08.1 ProcessGroupNCCL.cpp:1]  WorkNCCL(SeqNum=1, OpType=X\n",
    "\r 1/2 [00:01<00:02, 1.0it/s]", "{'loss': nan, 'grad_norm': inf}\n", "Root Cause (first observed failure):\n",
    "[0]:\n", "  exitcode  : -9 (pid: 1)\n", "=====================\n", "Fatal Python error: Aborted\n",
    "slurmstepd: error: *** JOB 1 ON n CANCELLED AT x ***\n",
    "h:1:2 [0] x.cc:1 NCCL WARN bad\n", "h:1:2 [0] NCCL INFO a.cc:1 -> 6\n", "\n", "0: ", "\x1b[31m", "^M",
]), max_size=40)


@settings(max_examples=150, deadline=None)
@given(raw=st.binary(max_size=600))
def test_any_bytes_never_raise(raw: bytes) -> None:
    for parser in (process_output.PARSER, process_output.SLURM_PARSER, process_output.NCCL_DEBUG_PARSER,
                   plaintext.PARSER, elastic_error_file.PARSER):
        doc = TextDocument.from_bytes(raw, "fuzz")
        parser.detect(doc.head())
        list(parser.parse(doc, ParseContext(path="fuzz", source="file:fuzz", year=2024)))


@settings(max_examples=150, deadline=None)
@given(pieces=PIECES, noise=TEXTS)
@pytest.mark.slow
def test_record_soup_never_raises(pieces: list[str], noise: str) -> None:
    text = "".join(pieces) + noise
    doc = TextDocument.from_bytes(text.encode("utf-8", "surrogatepass"), "soup")
    ctx = ParseContext(path="soup", source="file:soup", year=2024, receipt_ts=lambda off: off)
    for rec in process_output.scan(doc, ctx):
        assert isinstance(rec, Event)
        assert 1 <= rec.origin.line <= text.count("\n") + 1


def test_catalog_shapes_nccl_timestamp_meta_warning_ray_colours() -> None:
    """Line shapes quoted in the framework catalog (§1.2, §1.3, §3) that no corpus case holds."""
    text = ("[2026-05-05 06:16:47] gpu1:4242:4250 [3] transport/net.cc:1302 NCCL WARN NET/IB : Got completion from "
            "peer 10.0.0.2<39138> with error 12, opcode 0, len 0, vendor err 129\n"
            "WARNING:root:Some parameters are on the meta device device because they were offloaded to the cpu.\n"
            "[36m(RayWorkerWrapper pid=4009)[0m ERROR 04-15 00:31:11 worker_base.py:574] Error executing method: "
            "CUDA error: an illegal memory access was encountered\n"
            "rank2 (local rank: 2)exitcode: -9 (pid: 36071)error file: <N/A>\n")
    doc = TextDocument.from_bytes(text.encode(), "mixed.log")
    ctx = ParseContext(path="mixed.log", source="file:mixed.log", year=2025)
    nccl, meta, ray, child = [e for e in process_output.scan(doc, ctx) if isinstance(e, Event)]
    assert nccl.kind == "nccl" and nccl.ts is not None and nccl.attrs["cuda_dev"] == 3 and nccl.host == "gpu1"
    assert meta.kind == "warning" and meta.message.startswith("Some parameters are on the meta device")
    assert ray.kind == "cuda-error" and ray.pid == 4009 and ray.message.startswith("Error executing method")
    assert child.kind == "torchrun" and (child.attrs["rank"], child.attrs["exitcode"], child.pid) == (2, -9, 36071)


def test_python_warning_with_message_on_the_next_lines() -> None:
    text = ("/nix/store/x/lib/python3.11/site-packages/torch/cuda/__init__.py:209: UserWarning:\n"
            "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
            "installation.\nThe current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80.\n")
    doc = TextDocument.from_bytes(text.encode(), "w.log")
    ctx = ParseContext(path="w.log", source="file:w.log")
    (ev,) = [e for e in process_output.scan(doc, ctx) if isinstance(e, Event)]
    assert ev.kind == "warning" and "sm_120 is not compatible" in ev.message and ev.origin.nlines == 3


def test_traceback_glued_to_a_bar_line_longer_than_the_line_cap() -> None:
    """A run that never printed a newline: one 2 MB bar line, the crash glued to its end."""
    bar = "".join(f"\r{i * 100 // 60000:3d}%|#    | {i}/60000 [00:{i % 60:02d}<1:00:00, 9.{i % 10}it/s]"
                  for i in range(60000))
    text = ("start\n" + bar + "Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n"
            "    step()\nRuntimeError: CUDA error: unknown error\n")
    doc = TextDocument.from_bytes(text.encode(), "bar.log")
    assert len(text) > 2 << 20
    ctx = ParseContext(path="bar.log", source="file:bar.log")
    events = [e for e in process_output.scan(doc, ctx) if isinstance(e, Event)]
    tb = [e for e in events if e.kind == "traceback"]
    assert len(tb) == 1 and tb[0].message == "RuntimeError: CUDA error: unknown error" and tb[0].origin.line == 2
    bars = [e for e in events if e.kind == "progress"]
    assert bars and bars[-1].attrs["step"] == 59999
    assert doc.truncated_lines == 0
