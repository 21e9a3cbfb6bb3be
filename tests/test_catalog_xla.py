"""The XLA catalogue (JAX's runtime) on real JAX output it was not written from (tests/data/catalogs/xla/real,
sources in SOURCES.md), on a healthy multi-host log, and on the prefixes JAX puts before XLA's messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import Options, analyze

REAL = Path(__file__).resolve().parent / "data" / "catalogs" / "xla" / "real"

CASES = [
    ("gpu-recipes-2.log", "rendezvous-timeout"),
    ("afprofile-8.log", "torch-cuda-oom"),
    ("colabfold-65.log", "torch-cuda-oom"),
]


def _verdict(path: Path) -> str | None:
    root = analyze([str(path)], Options()).verdict.root_cause
    if root is None:
        return None
    if root.signature == "unrecognized-failure":
        cat = root.facts.get("catalog")
        return f"unrecognized-failure:{cat[0].get('class')}" if isinstance(cat, list) and cat else root.signature
    return root.signature


@pytest.mark.parametrize(("name", "expect"), CASES)
def test_real_jax_output_is_called_the_failure_it_is(name: str, expect: str) -> None:
    assert _verdict(REAL / name) == expect


@pytest.mark.parametrize("name", ["afprofile-8.log", "colabfold-65.log"])
def test_an_xla_out_of_memory_gets_jax_words_and_remedies(name: str) -> None:
    """The OOM signature's XLA variant: JAX's allocator settings, never PyTorch's."""
    root = analyze([str(REAL / name)], Options()).verdict.root_cause
    assert root is not None and "XLA / JAX" in root.title
    steps = " ".join(root.remedy)
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" in steps and "PYTORCH_CUDA_ALLOC_CONF" not in steps


def test_a_pytorch_out_of_memory_keeps_pytorch_words(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                   "capacity of 79.10 GiB of which 1.20 GiB is free.\n")
    root = analyze([str(log)], Options()).verdict.root_cause
    assert root is not None and root.signature == "torch-cuda-oom" and "XLA" not in root.title
    assert any("PYTORCH_CUDA_ALLOC_CONF" in s for s in root.remedy)


def test_a_healthy_multi_host_start_is_no_failure() -> None:
    """A register retry that then connects, the agent's connect / shutdown lines and training steps."""
    assert _verdict(REAL / "healthy-initialize.log") is None


@pytest.mark.parametrize("prefix", [
    "",
    "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: ",
    "jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: ",
    "E1204 12:00:00.000000  1234 coordination_service.cc:512] ",
    "2024-12-04 12:00:00.000000: E external/xla/xla/pjrt/distributed/client.cc:96] ",
    "[host-3] E1204 12:00:00.000000  1234 coordination_service_agent.cc:77] DEADLINE_EXCEEDED: ",
])
def test_the_status_code_and_glog_prefixes_do_not_hide_a_barrier_timeout(prefix: str, tmp_path: Path) -> None:
    log = tmp_path / "task0.log"
    log.write_text(prefix + "Barrier timed out. Barrier_id: PjRT_Client_Connect. Timed out task names:\n"
                   "/job:jax_worker/replica:0/task:3\n")
    assert _verdict(log) == "rendezvous-timeout"


def test_register_task_deadline_exceeded_is_a_rendezvous_failure(tmp_path: Path) -> None:
    log = tmp_path / "task7.log"
    log.write_text(
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Deadline Exceeded\n"
        "Additional GRPC error information from remote target unknown_target_for_coordination_leader while "
        "calling /tensorflow.CoordinationService/RegisterTask:\n"
        ':{"created":"@1733313600.0","description":"Deadline Exceeded","grpc_status":4}\n')
    assert _verdict(log) == "rendezvous-timeout"


def test_a_heartbeat_timeout_names_the_xla_class(tmp_path: Path) -> None:
    log = tmp_path / "task0.log"
    log.write_text("E1204 12:00:00.000000  1234 coordination_service.cc:512] Task 5 heartbeat timeout. This "
                   "indicates that the remote task has failed, got preempted, or crashed unexpectedly. Check the "
                   "task logs for an earlier error or scheduler events (e.g. preemption, eviction) to debug "
                   "further.\n")
    assert _verdict(log) == "unrecognized-failure:xla-coordination-task-lost"
