"""Stack dumps of a live (usually hung) process, whatever tool took them: the shared model,
the classifier of where a thread waits, and the ``stack`` event's attributes.

The readers live with their formats (:mod:`.py_spy`, :mod:`.gdb_bt`, :mod:`.faulthandler_dump`);
each returns :class:`Dump` objects (one per process) that :func:`event_fields` turns into the
message and attrs of one ``stack`` event. What a thread is doing is read from its frames,
innermost first: the first few frames are searched for the most telling kind of wait
(:data:`CATEGORIES`, most specific first), so a DataLoader's ``_try_get_data`` wins over the
``queue.get`` and ``threading.wait`` it sits in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from forensics.lazy_re import lazy_compile

__all__ = ["CATEGORIES", "WAITS", "Dump", "Frame", "StackThread", "classify", "event_fields", "label_rank"]


@dataclass(frozen=True)
class Frame:
    func: str
    file: str = ""
    line: int | None = None
    native: bool = False

    def show(self) -> str:
        where = f"{self.file}:{self.line}" if self.file and self.line is not None else self.file
        return f"{self.func} ({where})" if where else self.func


@dataclass
class StackThread:
    ident: str
    name: str | None = None
    state: str | None = None  # py-spy: active / idle / active+gil; faulthandler: current
    frames: list[Frame] = field(default_factory=list)  # innermost first
    main: bool = False


@dataclass
class Dump:
    tool: str  # py-spy | faulthandler | gdb
    threads: list[StackThread] = field(default_factory=list)
    pid: int | None = None
    command: str | None = None
    rank: int | None = None
    rank_source: str | None = None
    lines: list[str] = field(default_factory=list)
    timeout: str | None = None  # faulthandler.dump_traceback_later's "Timeout (0:10:00)!"


_COLLECTIVE_FUNCS = lazy_compile(
    r"^(?:all_reduce|allreduce\w*|all_gather\w*|allgather\w*|_all_gather_base|reduce_scatter\w*|"
    r"_reduce_scatter_base|broadcast\w*|barrier|monitored_barrier|all_to_all\w*|alltoall\w*|reduce|gather|"
    r"gather_object|scatter\w*|send|recv|isend|irecv|batch_isend_irecv|_coalescing_manager)$")
_NATIVE_COLLECTIVE = lazy_compile(r"ProcessGroupNCCL|ncclAllReduce|ncclAllGather|ncclReduceScatter|ncclBroadcast|"
                                  r"ncclSend|ncclRecv|ncclGroupEnd|c10d::\w*[Bb]arrier|WorkNCCL::wait|"
                                  r"ProcessGroupGloo|gloo::|MPI_\w+|PMPI_\w+|ccl_\w*(?:allreduce|allgather|wait)")
#: Files of libraries whose collective-named functions (all_gather_coalesced, reduce_scatter …) are collectives.
_DIST_LIBS = ("distributed_c10d.py", "torch/distributed/", "deepspeed/", "megatron/", "fairscale/", "apex/",
              "colossalai/", "nemo/", "vllm/distributed/", "sglang/srt/distributed/", "accelerate/utils/operations.py")
_STORE = lazy_compile(r"TCPStore|PrefixStore|store\.py|rendezvous|_store_based_barrier|c10d_rendezvous_backend")
_DATALOADER_FUNCS = ("_next_data", "_get_data", "_try_get_data", "_worker_loop", "_pin_memory_loop")
_SYNC = lazy_compile(r"^(?:synchronize|_local_scalar_dense\w*|item|tolist|cpu)$|cudaStreamSynchronize|"
                     r"cudaDeviceSynchronize|cuStreamSynchronize|cuCtxSynchronize|cudaEventSynchronize|cudaMemcpy\b|"
                     r"cudaMemcpyAsync|_local_scalar_dense|at::native::\w*item")
_LOCK = lazy_compile(r"^(?:acquire|wait|join|_wait_for_tstate_lock|wait_for)$|pthread_mutex_lock|__lll_lock_wait|"
                     r"sem_wait|PyThread_acquire_lock")
_SLEEP = lazy_compile(r"^(?:sleep|<built-in method sleep.*)$|nanosleep|clock_nanosleep|usleep")
_IO = lazy_compile(r"^(?:read|readinto|readline|recv|recv_into|recvfrom|send|sendall|write|flush|select|poll|"
                   r"accept|connect|urlopen|getresponse|_read_status|epoll_wait)$|__libc_read|__libc_write|"
                   r"__GI___poll|\bpoll\b|\bread\b|\bwrite\b|epoll_wait|\baccept4?\b|fsync")
_IO_FILES = ("socket.py", "ssl.py", "selectors.py", "http/client.py", "urllib", "requests/", "urllib3/",
             "huggingface_hub/", "fsspec/", "s3fs/", "boto", "subprocess.py", "connection.py")
_CHECKPOINT = lazy_compile(r"(?:^|_)save(?:_checkpoint|_pretrained|_model|_state|_to_disk)?$|^_save\w*|"
                           r"save_checkpoint|^dcp_save$|^torch_save")
_CHECKPOINT_FILES = ("torch/serialization.py", "distributed/checkpoint/", "safetensors/")
_EVAL = lazy_compile(r"^(?:evaluate|evaluation_loop|prediction_step|predict|validate|validation_step|_run_eval\w*|"
                     r"generate|eval_step|test_step)$")
_COMPUTE = lazy_compile(r"^(?:forward|_call_impl|_wrapped_call_impl|backward|_engine_run_backward|run_backward|"
                        r"step|training_step|train_step|_conv_forward|linear|matmul)$")

#: The kinds of wait, most specific first (the order decides when a stack shows several).
CATEGORIES = ("collective", "store", "dataloader", "queue", "cuda-sync", "checkpoint", "lock", "sleep", "io",
              "evaluation", "compute", "running", "background")
#: Helper threads that always wait (NCCL proxy and IB threads, c10d's watchdog, thread pools, tqdm's
#: monitor, the pin-memory thread): where they are says nothing about a hang.
_BACKGROUND = lazy_compile(r"ncclProxy|ncclIbAsyncThread|persistentThread|ncclCommWatchdog|watchdogHandler|"
                           r"heartbeatMonitor|ThreadPool::main_loop|_pin_memory_loop|tqdm/_monitor|"
                           r"_handle_workers|_handle_results|_handle_tasks")
#: The categories that mean the thread waits for something else (a hang's usual shape).
WAITS = frozenset({"collective", "store", "dataloader", "queue", "cuda-sync", "lock", "sleep", "io"})
#: How many innermost frames are searched for the kind of wait.
DEPTH = 14

_WORDS = {"collective": "a collective", "store": "the rendezvous store", "dataloader": "the DataLoader",
          "queue": "a queue get", "cuda-sync": "a CUDA synchronization", "checkpoint": "a checkpoint save",
          "lock": "a lock", "sleep": "a sleep", "io": "I/O", "evaluation": "evaluation", "compute": "compute",
          "running": "running code", "background": "only helper threads (NCCL proxy, watchdog, pools)"}


def _category(f: Frame) -> str | None:
    func, path = f.func, f.file.replace("\\", "/")
    base = func.rsplit("::", 1)[-1].rsplit(".", 1)[-1]
    if f.native or not path.endswith(".py"):
        if _NATIVE_COLLECTIVE.search(func):
            return "collective"
        if "TCPStore" in func:
            return "store"
        if _SYNC.search(func):
            return "cuda-sync"
    if any(lib in path for lib in _DIST_LIBS) and _COLLECTIVE_FUNCS.match(base):
        return "collective"
    if "distributed_c10d.py" in path and base in ("wait", "_wait"):
        return "collective"
    if _STORE.search(func) or _STORE.search(path) and base in ("get", "wait", "_wait", "barrier"):
        return "store"
    if "torch/utils/data/" in path and base in _DATALOADER_FUNCS:
        return "dataloader"
    if base == "get" and (path.endswith("queue.py") or path.endswith("queues.py")):
        return "queue"
    if ("torch/cuda" in path and base in ("synchronize", "wait_stream", "wait_event", "query")) \
            or (f.native and _SYNC.search(func)):
        return "cuda-sync"
    if _CHECKPOINT.search(base) or any(p in path for p in _CHECKPOINT_FILES):
        return "checkpoint"
    if _LOCK.search(base) and (path.endswith(("threading.py", "synchronize.py", "queue.py")) or f.native):
        return "lock"
    if _SLEEP.search(base) or "sleep" in func and "built-in" in func:
        return "sleep"
    if any(p in path for p in _IO_FILES) or (f.native and _IO.search(func)):
        return "io"
    if _EVAL.match(base):
        return "evaluation"
    if _COMPUTE.match(base) or "torch/nn/" in path or "torch/autograd/" in path:
        return "compute"
    return None


def classify(frames: list[Frame]) -> tuple[str, Frame | None]:
    """What a thread does, from its frames (innermost first): the category and the frame that shows it."""
    best: tuple[int, Frame] | None = None
    for f in frames[:DEPTH]:
        cat = _category(f)
        if cat is None:
            continue
        rank = CATEGORIES.index(cat)
        if best is None or rank < best[0]:
            best = (rank, f)
    if best is None:
        py = [f for f in frames if not f.native] or frames
        return "running", py[0] if py else None
    cat, frame = CATEGORIES[best[0]], best[1]
    if cat == "collective":
        # The API frame (all_reduce, barrier) rather than the wrapper around it.
        api = [f for f in frames[:DEPTH] if _category(f) == "collective" and _COLLECTIVE_FUNCS.match(
            f.func.rsplit(".", 1)[-1])]
        frame = api[0] if api else frame
    return cat, frame


def _context(frames: list[Frame]) -> str | None:
    """Work that only some ranks do, further out on the stack (a checkpoint save, an evaluation)."""
    for f in frames:
        cat = _category(f)
        if cat in ("checkpoint", "evaluation"):
            return cat
    return None


def _position(dump: Dump) -> tuple[StackThread | None, str, Frame | None]:
    """The thread that tells where the process is: one waiting in a collective (the autograd or
    comm thread of a DDP/ZeRO rank), else the main thread, else the most telling thread."""
    framed = [t for t in dump.threads if t.frames]
    scored = [(t, *classify(t.frames)) for t in framed if not _background(t)]
    if not scored:
        return (framed[0], "background", framed[0].frames[0]) if framed else (None, "running", None)
    for t, cat, fr in scored:
        if cat == "collective":
            return t, cat, fr
    main = [s for s in scored if s[0].main]
    if main:
        return main[0]
    return min(scored, key=lambda s: CATEGORIES.index(s[1]))


def _background(t: StackThread) -> bool:
    return any(_BACKGROUND.search(f.func) or _BACKGROUND.search(f.file) for f in t.frames[:DEPTH])


def words(category: str) -> str:
    return _WORDS.get(category, category)


def event_fields(dump: Dump) -> tuple[str, dict[str, Any]]:
    """The message and attrs of the ``stack`` event for one dump."""
    thread, cat, frame = _position(dump)
    who = f"pid {dump.pid}" if dump.pid is not None else "a process"
    if dump.rank is not None:
        who += f" (rank {dump.rank})"
    name = ""
    if thread is not None:
        name = f" thread {thread.name or thread.ident}"
    where = frame.show() if frame is not None else "no Python frame"
    context = _context(thread.frames) if thread is not None else None
    message = f"{dump.tool} stack dump of {who}:{name} in {where} — {words(cat)}"
    if context and context != cat:
        message += f", within {words(context)}"
    attrs: dict[str, Any] = {"tool": dump.tool, "waiting_in": cat, "threads_dumped": len(dump.threads)}
    if frame is not None:
        attrs["frame"] = frame.show()
        attrs["op"] = frame.func.rsplit(".", 1)[-1].rsplit("::", 1)[-1]
    if thread is not None:
        attrs["thread"] = thread.name or thread.ident
        attrs["frames"] = [f.show() for f in thread.frames[:40]]
    if context:
        attrs["context"] = context
    if dump.pid is not None:
        attrs["pid"] = dump.pid
    if dump.command:
        attrs["process"] = dump.command[:300]
    if dump.rank is not None:
        attrs["rank"] = dump.rank
        attrs["rank_source"] = dump.rank_source or "label"
    if dump.timeout:
        attrs["timeout"] = dump.timeout
    others = []
    for t in dump.threads:
        if t is thread or not t.frames:
            continue
        c, f = ("background", t.frames[0]) if _background(t) else classify(t.frames)
        others.append(f"{t.name or t.ident}: {words(c)}" + (f" ({f.show()})" if f is not None else ""))
    if others:
        attrs["other_threads"] = others[:20]
    return message, attrs


_RANK_LABEL = lazy_compile(r"(?:^|[\s=\[(#:-])(?:global[ _]?)?rank[\s_]*[:=#]?\s*(\d{1,6})\b", re.I)
_LOCAL_RANK_ARG = lazy_compile(r"--(?:local[-_]rank|rank)[= ](\d{1,6})\b|\b(?:LOCAL_RANK|RANK)=(\d{1,6})\b")


def label_rank(text: str) -> int | None:
    """The rank a label line or command line names (``== rank 3 ==``, ``[rank3]``, ``--local_rank=3``)."""
    m = _LOCAL_RANK_ARG.search(text)
    if m:
        return int(m.group(1) or m.group(2))
    m = _RANK_LABEL.search(text)
    return int(m.group(1)) if m else None
