"""The registered parsers for files that are stack dumps of live processes: ``py-spy``,
``faulthandler`` and ``gdb`` (readers in :mod:`.py_spy`, :mod:`.faulthandler_dump`,
:mod:`.gdb_bt`). They read like process output (a dump pasted between log lines is read there
too); only detection and the source kind differ."""

from __future__ import annotations

from forensics.parsers.process_output import StreamParser
from forensics.parsers.producers import faulthandler_dump, gdb_bt, py_spy

__all__ = ["FAULTHANDLER_PARSER", "GDB_PARSER", "PY_SPY_PARSER"]

PY_SPY_PARSER = StreamParser("py-spy", py_spy.detect, (
    # huggingface/accelerate#3104 (one rank of a ZeRO-3 job; the excerpt's complete frames)
    'Thread 42 (idle): "MainThread"\n'
    "    backward (torch/autograd/__init__.py:266)\n"
    "    backward (torch/_tensor.py:522)\n"
    "    backward (deepspeed/runtime/fp16/loss_scaler.py:63)\n"
    "    backward (deepspeed/runtime/zero/stage3.py:2213)\n"
    "    backward (accelerate/accelerator.py:2126)\n"
    'Thread 928 (idle): "Thread-1"\n'
    "    wait (threading.py:324)\n"
    "    wait (threading.py:607)\n"
    "    run (tqdm/_monitor.py:60)\n"
    "Thread 4079 (active)\n"
    "    all_gather_into_tensor (torch/distributed/distributed_c10d.py:2709)\n"
    "    wrapper (torch/distributed/c10d_logger.py:72)\n"
    "    all_gather_into_tensor (deepspeed/comm/torch.py:219)\n",
))
FAULTHANDLER_PARSER = StreamParser("faulthandler", faulthandler_dump.detect, (
    # pytorch/pytorch#54818 (a timed-out test process; complete frames of the excerpt)
    "Process 3 timed out with traceback:\n"
    "Current thread 0x00007ff3363ff700 (most recent call first):\n"
    '  File "torch/testing/_internal/common_distributed.py", line 373 in _event_listener\n'
    '  File "threading.py", line 870 in run\n'
    "\n"
    "Thread 0x00007ff406132180 (most recent call first):\n"
    '  File "torch/distributed/distributed_c10d.py", line 2477 in barrier\n'
    '  File "torch/testing/_internal/distributed/rpc/rpc_test.py", line 838 in test_reinit\n',
))
GDB_PARSER = StreamParser("gdb", gdb_bt.detect, (
    # NVIDIA/nccl#901 (rank 0 of 4, two of its threads)
    "========rank0=================\n"
    "(gdb) thread apply all bt\n"
    "\n"
    "Thread 10 (Thread 0x7f322e3fa000 (LWP 496156)):\n"
    "#0  futex_wait_cancelable (private=<optimized out>, expected=0, futex_word=0x7f322e7fb158) at "
    "../sysdeps/nptl/futex-internal.h:183\n"
    "#1  __pthread_cond_wait_common (abstime=0x0, clockid=0, mutex=0x7f322e7fb108, cond=0x7f322e7fb130) at "
    "pthread_cond_wait.c:508\n"
    "#3  0x00007f326f3d9740 in ncclProxyGetPostedOps (added=<synthetic pointer>, proxyState=0x5603cb96d1e0) at "
    "proxy.cc:713\n"
    "#4  ncclProxyProgress (proxyState_=0x5603cb96d1e0) at proxy.cc:868\n",
))
