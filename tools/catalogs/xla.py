"""Extract the failure messages of XLA's distributed runtime and GPU runtime as JAX users meet them
(https://github.com/openxla/xla, docs/catalogs.md), from a snapshot of a JAX release as its wheels ship it.
The XLA repository (over 500 MB) is too large to bring here whole; the wheels are the build of one JAX
commit, whose ``third_party/xla/revision.bzl`` pins one XLA commit, and they hold the compiled C++ whose
messages a user sees, so each message below is checked against the compiled literal (``strings``-style
search; the build fails if one is gone) and the list cannot drift silently.

The snapshot is a folder holding:

* ``jaxlib/`` — the ``jaxlib`` package of the jaxlib wheel (``libjax_common.so``: the coordination service
  and its agent, the distributed client, the preemption sync manager, the gRPC status conversion);
* ``jax_plugins/xla_cuda12/`` — the package of the jax-cuda12-pjrt wheel (``xla_cuda_plugin.so``: the
  XLA GPU runtime, its allocators, CUDA and NCCL wrappers);
* ``jax/`` — the jax wheel's package (``jax/_src/distributed.py``: ``jax.distributed.initialize``'s own
  errors, read as text);
* optionally ``older/jaxlib-0.4.23/jaxlib/`` — the jaxlib 0.4.23 wheel's package (``xla_extension.so``),
  where the older wordings of ``_OLDER`` are checked when it is there (jax 0.4.x is what most public
  multi-host logs come from: ``jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out.
  Barrier_id: …``).

What is taken: only message texts, their status codes and levels (facts). ``format`` is the message as the
source writes it: a printf format (``absl::StrFormat``) as is; the operands of an ``absl::StrCat`` or a
``LOG() <<`` chain, and the ``$N`` of an ``absl::Substitute``, written ``%s``. Where a message is built from
pieces, the literal checked is its longest piece. ``where`` names the XLA source file (at the pinned
commit) and the compiled file the literal was found in, with its byte offset; ``level`` is the absl status
constructor or the log level; ``code`` the gRPC / absl status code a line prints before the message
(``DEADLINE_EXCEEDED: Barrier timed out…``).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

_COMMON = "jaxlib/libjax_common.so"
_CUDA = "jax_plugins/xla_cuda12/xla_cuda_plugin.so"
_JAX = "jax/_src/distributed.py"
_OLD = "older/jaxlib-0.4.23/jaxlib/xla_extension.so"

_CS = "xla/pjrt/distributed/coordination/coordination_service.cc"
_AGENT = "xla/pjrt/distributed/coordination/coordination_service_agent.cc"
_CLIENT = "xla/pjrt/distributed/client.cc"
_TOPO = "xla/pjrt/distributed/topology_util.cc"
_GRPC = "xla/tsl/distributed_runtime/rpc/grpc_util.h"
_PREEMPT = "xla/pjrt/distributed/preemption/preemption_notifier.cc"
_RENDEZVOUS = "xla/service/rendezvous.cc"
_BFC = "xla/tsl/framework/bfc_allocator.cc"
_ADAPTER = "xla/stream_executor/integrations/tf_allocator_adapter.cc"
_SE_CUDA = "xla/stream_executor/cuda/cuda_executor.cc"
_NCCL = "xla/backends/gpu/collectives/nccl_errors.cc"
_CLIQUE = "xla/backends/gpu/collectives/gpu_clique_locking.cc"
_CMDBUF = "xla/stream_executor/cuda/cuda_command_buffer.cc"

_HEARTBEAT_TAIL = (" heartbeat timeout. This indicates that the remote task has failed, got preempted, or crashed "
                   "unexpectedly. Check the task logs for an earlier error or scheduler events (e.g. preemption, "
                   "eviction) to debug further.")
_STOPPED_TAIL = (" failed. This usually implies an earlier error that caused coordination service to shut down "
                 "before the workers disconnect gracefully. Check the task leader's logs for an earlier error or "
                 "scheduler events (e.g. preemption, eviction) to debug the root cause.")

#: (id, XLA source file, compiled file, level, code, format, the literal to find in the compiled file)
_MESSAGES: list[tuple[str, str, str, str, str, str, str]] = [
    # -- the coordination service (the leader, task 0) ------------------------------------------------
    ("xla.coordination.barrier-timed-out", _CS, _COMMON, "DeadlineExceededError", "DEADLINE_EXCEEDED",
     "Barrier timed out. Id: %s. This usually happens because a task triggered the barrier too early or too "
     "slowly. Please look at the task logs (both timed out and first task) to debug further.\n"
     "# of tasks that reached the barrier: %d/%d.\nThe first task at the barrier: %d. Some timed out task "
     "names:\n%s",
     "Barrier timed out. Id: %s. This usually happens because a task triggered the barrier too early or too "
     "slowly. Please look at the task logs (both timed out and first task) to debug further."),
    ("xla.coordination.cluster-registration-failed", _CS, _COMMON, "LOG(ERROR)", "",
     "Stopping coordination service as cluster registration failed. This may be due to 1) some tasks crashed "
     "earlier before connecting, 2) some tasks were never scheduled, or 3) scheduling delays. Consider setting "
     "a longer initialization timeout if such delays are expected, the timeout is currently set to: %s",
     "Stopping coordination service as cluster registration failed. This may be due to 1) some tasks crashed "
     "earlier before connecting, 2) some tasks were never scheduled, or 3) scheduling delays."),
    ("xla.coordination.task-heartbeat-timeout", _CS, _COMMON, "UnavailableError", "UNAVAILABLE",
     "Task %s" + _HEARTBEAT_TAIL, _HEARTBEAT_TAIL),
    ("xla.coordination.tasks-unhealthy-stopped-heartbeats", _CS, _COMMON, "UnavailableError", "UNAVAILABLE",
     "The following tasks are unhealthy (stopped sending heartbeats):\n%s\nThe tasks have crashed. Check the "
     "task logs for an earlier error, or scheduler events (e.g. preemption, eviction) to debug further.",
     "The following tasks are unhealthy (stopped sending heartbeats):"),
    ("xla.coordination.heartbeat-incarnation-mismatch", _CS, _COMMON, "AbortedError", "ABORTED",
     "%s Heartbeat: Incarnation ID mismatch: expecting %s but got %s. The task has restarted and likely "
     "crashed earlier - check for any earlier errors or any scheduler events (e.g. preemption, eviction) to "
     "debug further.",
     ". The task has restarted and likely crashed earlier - check for any earlier errors or any scheduler "
     "events (e.g. preemption, eviction) to debug further."),
    ("xla.coordination.task-reconnected-different-incarnation", _CS, _COMMON, "AbortedError", "ABORTED",
     "%s unexpectedly tried to connect with a different incarnation. It has likely restarted.",
     " unexpectedly tried to connect with a different incarnation. It has likely restarted."),
    ("xla.coordination.task-connect-while-in-error", _CS, _COMMON, "AbortedError", "ABORTED",
     "%s unexpectedly tried to connect while it is already in error. ResetTask() should be called before a "
     "subsequent connect attempt. Existing error: %s",
     " unexpectedly tried to connect while it is already in error. ResetTask() should be called before a "
     "subsequent connect attempt. Existing error: "),
    ("xla.coordination.heartbeat-from-unregistered-task", _CS, _COMMON, "InvalidArgumentError",
     "INVALID_ARGUMENT",
     "%s must be registered before sending heartbeat messages. The service might have restarted, please "
     "restart / reset and register again.",
     " must be registered before sending heartbeat messages. The service might have restarted, please "
     "restart / reset and register again."),
    ("xla.coordination.all-tasks-set-to-error", _CS, _COMMON, "LOG(ERROR)", "",
     "All tasks were set to error because coordination service encountered an error, but was unable to "
     "inform clients. Error: %s",
     "All tasks were set to error because coordination service encountered an error, but was unable to "
     "inform clients. Error: "),
    ("xla.coordination.shutdown-barrier-failed", _CS, _COMMON, "InternalError", "INTERNAL",
     "Shutdown barrier has failed.\nBarrier result: '%s", "Shutdown barrier has failed."),
    ("xla.coordination.barrier-failed-service-shutting-down", _CS, _COMMON, "AbortedError", "ABORTED",
     "Barrier failed because service is shutting down. Barrier_id: %s",
     "Barrier failed because service is shutting down. Barrier_id: "),
    ("xla.coordination.register-task-after-stop", _CS, _COMMON, "InternalError", "INTERNAL",
     "Coordination service has stopped. RegisterTask() from task: %s" + _STOPPED_TAIL,
     "Coordination service has stopped. RegisterTask() from task: "),
    ("xla.coordination.heartbeat-after-stop", _CS, _COMMON, "InternalError", "INTERNAL",
     "Coordination service has stopped. RecordHeartbeat() from task: %s" + _STOPPED_TAIL,
     "Coordination service has stopped. RecordHeartbeat() from task: "),
    ("xla.coordination.task-in-error-before-barrier", _CS, _COMMON, "InternalError", "INTERNAL",
     "%s) is already in error before the barrier was called. Barrier Id: %s",
     ") is already in error before the barrier was called. Barrier Id: "),
    ("xla.coordination.conflicting-barrier-tasks", _CS, _COMMON, "InvalidArgumentError", "INVALID_ARGUMENT",
     "Conflicting tasks specified by different processes for the same barrier: %s",
     "Conflicting tasks specified by different processes for the same barrier: "),
    ("xla.coordination.tasks-not-polling-for-errors", _CS, _COMMON, "LOG(WARNING)", "",
     "The following %d tasks in the cluster has not sent request to poll for error. Error will not be "
     "propagated to these tasks: %s",
     "The following %d tasks in the cluster has not sent request to poll for error. Error will not be "
     "propagated to these tasks: %s"),
    # -- the agent (every task) -------------------------------------------------------------------------
    ("xla.coordination-agent.register-attempt-failed", _AGENT, _COMMON, "LOG(WARNING)", "",
     "Coordination service agent failed to register with the leader (attempt #$0, will try again after $1, "
     "deadline is $2, now is $3,total timeout is $4). Error status: $5",
     "Coordination service agent failed to register with the leader (attempt #$0, will try again after $1, "
     "deadline is $2, now is $3,total timeout is $4). Error status: $5"),
    ("xla.coordination-agent.leader-incarnation-mismatch", _AGENT, _COMMON, "AbortedError", "ABORTED",
     "Leader incarnation ID mismatch: the coordination  leader (usually slice 0 task 0) has restarted. Check "
     "for earlier errors or any scheduler events (e.g. preemption, eviction) to debug further.",
     "Leader incarnation ID mismatch: the coordination  leader (usually slice 0 task 0) has restarted."),
    ("xla.coordination-agent.failed-to-send-rpc", _AGENT, _COMMON, "LOG(ERROR)", "",
     "Failed to send RPC to coordination service. Either the leader task was preempted/died/restarted "
     "unexpectedly or this task is experiencing network issues. Check earlier logs from 1) this task, 2) the "
     "leader (usually slice 0 task 0), and 3) cluster scheduler to debug further.",
     "Failed to send RPC to coordination service. Either the leader task was preempted/died/restarted "
     "unexpectedly or this task is experiencing network issues."),
    ("xla.coordination-agent.polled-error", _AGENT, _COMMON, "LOG(ERROR)", "",
     "Polled an error from coordination service (this can be an error from this or another task).",
     "Polled an error from coordination service (this can be an error from this or another task)."),
    ("xla.coordination-agent.failed-to-initialize", _AGENT, _COMMON, "LOG(ERROR)", "",
     "Coordination agent failed to initialize: %s", "Coordination agent failed to initialize: "),
    ("xla.coordination-agent.shutdown-in-error-state", _AGENT, _COMMON, "LOG(ERROR)", "",
     "Shutdown() was called while coordination agent is in error state, implying that distributed execution "
     "failed. Note: agent will still shutdown anyway. Agent status: %s",
     "Shutdown() was called while coordination agent is in error state, implying that distributed execution "
     "failed. Note: agent will still shutdown anyway. Agent status: %s"),
    ("xla.coordination-agent.failed-to-disconnect", _AGENT, _COMMON, "LOG(WARNING)", "",
     "Failed to disconnect from coordination service with status: %s",
     "Failed to disconnect from coordination service with status: "),
    ("xla.coordination-agent.get-key-value-timed-out", _AGENT, _COMMON, "DeadlineExceededError",
     "DEADLINE_EXCEEDED", "GetKeyValue() timed out with key: %s and duration: %s",
     "GetKeyValue() timed out with key: %s and duration: %s"),
    # -- the distributed client (jax.distributed.initialize) --------------------------------------------
    ("xla.client.connect-waited-too-long", _CLIENT, _COMMON, "DeadlineExceededError", "DEADLINE_EXCEEDED",
     "Failed to connect to distributed JAX controller: waited too long for some tasks to show up. This may "
     "be due to 1) some tasks crashed earlier before connecting, 2) some tasks were never scheduled, or 3) "
     "scheduling delays. Consider setting a longer initialization timeout if such delays are expected, the "
     "timeout is currently set to: %s",
     "Failed to connect to distributed JAX controller: waited too long for some tasks to show up."),
    ("xla.client.failed-to-connect", _CLIENT, _COMMON, "LOG(ERROR)", "",
     "Failed to connect to distributed JAX controller: %s", "Failed to connect to distributed JAX controller: "),
    ("xla.client.terminating-service-detected-fatal-errors", _CLIENT, _COMMON, "LOG(QFATAL)", "",
     "Terminating process because the JAX distributed service detected fatal errors. This most likely "
     "indicates that another task died; see the other task logs for more details. Disable Python buffering, "
     "i.e. `python -u`, to be sure to see all the previous output. absl::Status: %s",
     "Terminating process because the JAX distributed service detected fatal errors. This most likely "
     "indicates that another task died; see the other task logs for more details."),
    ("xla.topology.getting-local-topologies-failed", _TOPO, _COMMON, "InternalError", "INTERNAL",
     "Getting local topologies failed: %s", "Getting local topologies failed: "),
    ("xla.grpc.additional-error-information", _GRPC, _COMMON, "FromGrpcStatus", "",
     "%s\nAdditional GRPC error information from remote target %s while calling %s:\n%s",
     "Additional GRPC error information"),
    ("xla.preemption.received-notice", _PREEMPT, _COMMON, "LOG(INFO)", "",
     "Received preemption notice with death_time %s", "Received preemption notice with death_time "),
    # -- the in-process rendezvous of the local devices' threads ------------------------------------------
    ("xla.rendezvous.termination-timeout", _RENDEZVOUS, _COMMON, "LOG(QFATAL)", "",
     "[id=%d] Termination timeout for `%s` of %d seconds exceeded. Exiting to ensure a consistent program "
     "state. Expected %d threads to join the rendezvous, but only %d of them arrived on time.",
     "Termination timeout for `%s` of %d seconds exceeded. Exiting to ensure a consistent program state."),
    ("xla.rendezvous.thread-may-be-stuck", _RENDEZVOUS, _COMMON, "LOG(ERROR)", "",
     "[id=%d] This thread has been waiting for `%s` for %d seconds and may be stuck. Expected %d threads to "
     "join the rendezvous, but not all of them arrived on time.",
     "This thread has been waiting for `%s` for %d seconds and may be stuck."),
    # -- the GPU runtime (jax-cuda12-pjrt) --------------------------------------------------------------
    ("xla.gpu.failed-to-allocate-request", _ADAPTER, _CUDA, "ResourceExhaustedError", "RESOURCE_EXHAUSTED",
     "Failed to allocate request for %s (%uB) on device ordinal %d",
     "Failed to allocate request for %s (%uB) on device ordinal %d"),
    ("xla.gpu.out-of-memory-while-trying-to-allocate", _ADAPTER, _CUDA, "ResourceExhaustedError",
     "RESOURCE_EXHAUSTED", "Out of memory while trying to allocate %s bytes.",
     "memory while trying to allocate "),
    ("xla.gpu.bfc-allocator-ran-out-of-memory", _BFC, _CUDA, "LOG(WARNING)", "",
     "Allocator (%s) ran out of memory trying to allocate %s (rounded to %s)requested by op %s",
     ") ran out of memory trying "),
    ("xla.gpu.command-buffer-out-of-memory", _CMDBUF, _CUDA, "ResourceExhaustedError", "RESOURCE_EXHAUSTED",
     "Underlying backend ran out of memory trying to instantiate command buffer with %d (total of %d alive "
     "graphs in the process). You can try to (a) Give more memory to the driver by reducing "
     "XLA_CLIENT_MEM_FRACTION (b) Disable command buffers with 'XLA_FLAGS=--xla_gpu_enable_command_buffer=' "
     "(empty set). Original error: %s",
     "Underlying backend ran out of memory trying to instantiate command buffer with %d (total of %d alive "
     "graphs in the process)."),
    ("xla.gpu.cumemallocasync-failed", "xla/stream_executor/gpu/gpu_cudamallocasync_allocator.cc", _CUDA,
     "ResourceExhaustedError", "RESOURCE_EXHAUSTED", "%s cuMemAllocAsync failed to allocate %s",
     " cuMemAllocAsync failed to allocate "),
    ("xla.nccl.operation-failed", _NCCL, _CUDA, "InternalError", "INTERNAL",
     "NCCL operation %s failed: %s. Last NCCL warning(error) log entry (may be unrelated) '%s'.",
     "NCCL operation %s failed: %s. Last NCCL warning(error) log entry (may be unrelated) '%s'."),
    ("xla.nccl.last-nccl-error", _NCCL, _CUDA, "InternalError", "INTERNAL",
     "%s. Last NCCL error (maybe unrelated): %s", "%s. Last NCCL error (maybe unrelated): %s"),
    ("xla.gpu.failed-to-initialize-gpu-clique", _CLIQUE, _CUDA, "InternalError", "INTERNAL",
     "Failed to initialize GPU clique %s", "Failed to initialize GPU clique "),
    ("xla.gpu.failed-to-synchronize-device-activity", _CLIQUE, _CUDA, "InternalError", "INTERNAL",
     "Failed to synchronize device activity on rank %d. Do not attempt to initialize GPU clique.",
     "Failed to synchronize device activity on rank %d. Do not attempt to initialize GPU clique."),
    ("xla.gpu.failed-to-complete-all-kernels", _SE_CUDA, _CUDA, "InternalError", "INTERNAL",
     "Failed to complete all kernels launched on stream %p: %s",
     "Failed to complete all kernels launched on stream %p: %s"),
    ("xla.gpu.failed-to-launch-cuda-kernel", _SE_CUDA, _CUDA, "InternalError", "INTERNAL",
     "Failed to launch CUDA kernel: %s", "Failed to launch CUDA kernel: "),
    ("xla.gpu.failed-to-launch-cuda-graph", _SE_CUDA, _CUDA, "InternalError", "INTERNAL",
     "Failed to launch CUDA graph", "Failed to launch CUDA graph"),
    ("xla.gpu.failed-to-load-cubin", _SE_CUDA, _CUDA, "InternalError", "INTERNAL",
     "Failed to load in-memory CUBIN (compiled for a different GPU?).",
     "Failed to load in-memory CUBIN (compiled for a different GPU?)."),
    ("xla.gpu.failed-call-to-cuinit", "xla/stream_executor/cuda/cuda_platform.cc", _CUDA, "LOG(ERROR)", "",
     "failed call to cuInit: %s", "failed call to cuInit: "),
    ("xla.gpu.error-loading-cuda-libraries", "xla/pjrt/gpu/se_gpu_pjrt_client.cc", _CUDA, "LOG(WARNING)", "",
     "Error loading CUDA libraries. GPU will not be used.", "Error loading CUDA libraries. GPU will not be used."),
]

#: id -> [(format, the literal to find in the older jaxlib, first, last release)]: older wordings.
_OLDER: dict[str, list[tuple[str, str, str, str]]] = {
    "xla.coordination.barrier-timed-out": [
        ("Barrier timed out. Barrier_id: %s. Timed out task names:\n%s", "Barrier timed out. Barrier_id: ",
         "0.4", "0.4")],
    "xla.coordination.task-heartbeat-timeout": [
        ("Task %s heartbeat timeout. This indicates that the remote task has failed, got preempted, or crashed "
         "unexpectedly. Check the task logs for an earlier error to debug further.",
         " heartbeat timeout. This indicates that the remote task has failed, got preempted, or crashed "
         "unexpectedly. Check the task logs for an earlier error to debug further.", "0.4", "0.4")],
    "xla.coordination.tasks-unhealthy-stopped-heartbeats": [
        ("Stopping coordination service as the following tasks are unhealthy (stopped sending heartbeats):\n"
         "%s\nCheck the task logs for an earlier error to debug further.",
         "Stopping coordination service as the following tasks are unhealthy (stopped sending heartbeats):",
         "0.4", "0.4")],
    "xla.coordination.register-task-after-stop": [
        ("Coordination service has stopped. RegisterTask() from task: %s failed. This usually implies an "
         "earlier error that caused coordination service to shut down before the workers disconnect. Check "
         "the task leader's logs for an earlier error to debug the root cause.",
         ". This usually implies an earlier error that caused coordination service to shut down before the "
         "workers disconnect. Check the task leader's logs for an earlier error to debug the root cause.",
         "0.4", "0.4")],
    "xla.coordination-agent.leader-incarnation-mismatch": [
        ("Leader incarnation ID mismatch: the coordination leader has restarted.",
         "Leader incarnation ID mismatch: the coordination leader has restarted.", "0.4", "0.4")],
    "xla.coordination.heartbeat-from-unregistered-task": [
        ("%s must be registered before sending heartbeat messages",
         " must be registered before sending heartbeat messages", "0.4", "0.4")],
    "xla.client.terminating-service-detected-fatal-errors": [
        ("Terminating process because the coordinator detected missing heartbeats. This most likely indicates "
         "that another task died; see the other task logs for more details. Disable Python buffering, i.e. "
         "`python -u`, to be sure to see all the previous output. Status: %s",
         "Terminating process because the coordinator detected missing heartbeats.", "0.4", "0.4"),
        ("Terminating process because of missing heartbeat response from the coordinator. This most likely "
         "indicates that the coordinator task died; see the coordinator's task logs for more details. Disable "
         "Python buffering, i.e. `python -u`, to be sure to see all the previous output. Status: %s",
         "Terminating process because of missing heartbeat response from the coordinator.", "0.4", "0.4")],
}

#: Messages of the older jaxlib only (id, XLA source file, level, format, literal), checked when it is there.
_OLDER_ONLY: list[tuple[str, str, str, str, str]] = [
    ("xla.client.agent-in-error-status@0.4", _CLIENT, "LOG(ERROR)",
     "Coordination service agent in error status: %s", "Coordination service agent in error status: "),
]

#: jax.distributed.initialize's own errors (id, exception class, message as the source writes it).
_PYTHON: list[tuple[str, str, str]] = [
    ("xla.jax-distributed.initialize-after-backend", "RuntimeError",
     "jax.distributed.initialize() must be called before any JAX calls that might initialise the XLA backend. "
     "This includes any computation, but also calls to jax.devices, jax.device_put, and others."),
    ("xla.jax-distributed.initialize-called-twice", "RuntimeError",
     "distributed.initialize should only be called once."),
    ("xla.jax-distributed.coordinator-address-undefined", "ValueError", "coordinator_address should be defined."),
    ("xla.jax-distributed.num-processes-undefined", "ValueError", "Number of processes must be defined."),
    ("xla.jax-distributed.process-id-undefined", "ValueError",
     "The process id of the current process must be defined."),
    ("xla.jax-distributed.process-id-out-of-range", "ValueError",
     "process_id and num_processes must be nonnegative, with process_id < num_processes. "),
    ("xla.jax-distributed.preemption-sync-manager-twice", "RuntimeError",
     "Preemption sync manager should only be initialized once."),
]

_PLACEHOLDER = re.compile(r"%%|%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?[diouxXeEfgGcsp]|\$\d")


def _text(fmt: str) -> str:
    """The matcher's text: every value placeholder written ``{}``, literal braces doubled."""
    out, pos = [], 0
    for m in _PLACEHOLDER.finditer(fmt):
        out.append(fmt[pos:m.start()].replace("{", "{{").replace("}", "}}"))
        out.append("%" if m.group() == "%%" else "{}")
        pos = m.end()
    out.append(fmt[pos:].replace("{", "{{").replace("}", "}}"))
    return "".join(out)


class _Binaries:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._data: dict[str, bytes] = {}

    def offset(self, rel: str, literal: str) -> int:
        if rel not in self._data:
            self._data[rel] = (self.root / rel).read_bytes()
        at = self._data[rel].find(literal.encode())
        if at < 0:
            raise SystemExit(f"xla: {literal!r} is not in {rel}")
        return at


def extract(root: Path) -> list[dict[str, Any]]:
    bins = _Binaries(root)
    older = (root / _OLD).is_file()
    out: list[dict[str, Any]] = []
    for ident, src, binary, level, code, fmt, literal in _MESSAGES:
        at = bins.offset(binary, literal)
        entry = {"id": ident, "format": fmt, "text": _text(fmt),
                 "where": f"{src} ({binary}, literal at byte {at})", "level": level}
        if code:
            entry["code"] = code
        out.append(entry)
        for n, (old, old_literal, first, last) in enumerate(_OLDER.get(ident, [])):
            where = f"{src} of jaxlib 0.4.23 (xla_extension.so)"
            if older:
                where = f"{src} of jaxlib 0.4.23 (xla_extension.so, literal at byte {bins.offset(_OLD, old_literal)})"
            suffix = f"@{last}" + (f"-{n + 1}" if n else "")
            out.append({**entry, "id": f"{ident}{suffix}", "format": old, "text": _text(old), "where": where,
                        "versions": [first, last]})
    for ident, src, level, fmt, literal in _OLDER_ONLY:
        where = f"{src} of jaxlib 0.4.23 (xla_extension.so)"
        if older:
            where = f"{src} of jaxlib 0.4.23 (xla_extension.so, literal at byte {bins.offset(_OLD, literal)})"
        out.append({"id": ident, "format": fmt, "text": _text(fmt), "where": where, "level": level,
                    "versions": ["0.4", "0.4"]})
    source = (root / _JAX).read_text()
    lines = source.splitlines()
    for ident, exc, msg in _PYTHON:
        head = msg.split(". ")[0][:40]
        lineno = next((i + 1 for i, line in enumerate(lines) if head in line), None)
        if lineno is None:
            raise SystemExit(f"xla: {head!r} is not in {_JAX}")
        text = msg.replace("{", "{{").replace("}", "}}")
        if ident.endswith("process-id-out-of-range"):
            text += "Got process_id={}, num_processes={}."
            msg += "Got process_id={process_id}, num_processes={num_processes}."
        out.append({"id": ident, "format": msg, "text": text, "where": f"{_JAX}:{lineno}", "level": exc})
    return out


if __name__ == "__main__":
    import json
    json.dump(extract(Path(sys.argv[1])), sys.stdout, indent=1, ensure_ascii=False)
