"""End-to-end speed of ``forensics analyze`` on a big mixed training log, against ``grep``.

Generates (seeded, so every run reads the same bytes) a realistic process-output log of the
chosen size: NCCL_DEBUG=INFO chatter from 8 ranks, tqdm bars redrawn with ``\\r``, HF Trainer
loss dicts, DeepSpeed step lines, Python warnings, and near the end a CUDA OOM traceback, c10d
watchdog timeouts on the other ranks and torchrun's ChildFailedError report. Then times, in
interleaved repetitions on the same file:

* ``forensics analyze FILE --format json`` (a subprocess, end to end: start-up, read, detect,
  scan, parse, match, JSON out), and
* ``grep -c -E -f PATTERNS FILE`` where PATTERNS are the signatures' anchor literals
  (``forensics.match.notable_literals``) plus the parsers' trigger literals, each escaped,

and the fixed start-up cost: ``forensics analyze`` on a one-line file.

The child interpreters cache their bytecode (in a temporary ``PYTHONPYCACHEPREFIX``, even where
``PYTHONDONTWRITEBYTECODE`` is set) and one warm-up run precedes the timing, as for an installed
package that has run once: compiling ~90 modules from source would add ~0.1 s to every run.
``--code DIR`` times another checkout of the project (e.g. an older commit from ``git archive``).

Usage::

    python bench/bench_analyze.py --size 100          # MB; 1000 for the 1 GB run
    python bench/bench_analyze.py --size 1000 --reps 3 --keep /tmp/big.log
    python bench/bench_analyze.py --size 100 --code /tmp/before   # git archive OLD | tar -x -C /tmp/before

Prints MB/s for both, by wall clock and by CPU time (user+sys of the child, which a busy machine
disturbs less), and the ratios; ``bench/README.md`` (Analyzer) records the figures.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HOST = "gpu-node-07"
RANKS = 8

NCCL_INFO = (
    "NCCL INFO Channel {c:02d}/0 : {r}[{r}] -> {n}[{n}] via P2P/IPC/read",
    "NCCL INFO Channel {c:02d}/1 : {r}[{r}] -> {n}[{n}] via P2P/IPC/read",
    "NCCL INFO Connected all rings",
    "NCCL INFO Connected all trees",
    "NCCL INFO threadThresholds 8/8/64 | 64/8/64 | 512 | 512",
    "NCCL INFO {c} coll channels, 0 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer",
    "NCCL INFO Trees [0] {n}/-1/-1->{r}->{p} [1] {n}/-1/-1->{r}->{p}",
    "NCCL INFO P2P Chunksize set to 524288",
    "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.0.{r}<0>",
    "NCCL INFO Using non-device net plugin version 0",
    "NCCL INFO [Proxy Service] Device {r} CPU core 1{c}",
    "NCCL INFO Setting affinity for GPU {r} to ffff0000,00000000,ffff0000,00000000",
)
COMM_INIT = (
    "NCCL INFO ncclCommInitRank comm 0x{h:x} rank {r} nranks 8 cudaDev {r} nvmlDev {r} busId {b}000 commId 0x{h:x}"
    " - Init START",
    "NCCL INFO comm 0x{h:x} rank {r} nranks 8 cudaDev {r} busId {b}000 commId 0x{h:x} - Init COMPLETE",
)
BUS = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
WARNINGS = (
    "/opt/conda/lib/python3.10/site-packages/torch/utils/checkpoint.py:429: UserWarning: torch.utils.checkpoint: "
    "please pass in use_reentrant=True or use_reentrant=False explicitly. The default value of use_reentrant will "
    "be updated to be False in the future.\n  warnings.warn(\n",
    "/opt/conda/lib/python3.10/site-packages/transformers/trainer.py:2821: FutureWarning: `tokenizer` is "
    "deprecated and will be removed in version 5.0.0.\n  warnings.warn(\n",
)
TAIL = """\
Traceback (most recent call last):
  File "/workspace/train.py", line 412, in <module>
    main()
  File "/workspace/train.py", line 398, in main
    trainer.train()
  File "/opt/conda/lib/python3.10/site-packages/transformers/trainer.py", line 1885, in train
    return inner_training_loop(
  File "/opt/conda/lib/python3.10/site-packages/transformers/trainer.py", line 2216, in _inner_training_loop
    tr_loss_step = self.training_step(model, inputs)
  File "/opt/conda/lib/python3.10/site-packages/torch/_tensor.py", line 522, in backward
    torch.autograd.backward(
  File "/opt/conda/lib/python3.10/site-packages/torch/autograd/__init__.py", line 266, in backward
    Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.15 GiB \
of which 1.21 GiB is free. Process 41872 has 77.93 GiB memory in use. Of the allocated memory 74.10 GiB is allocated \
by PyTorch, and 2.31 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try \
setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory \
Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
W0321 02:07:09.104000 41801 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 41870 closing \
signal SIGTERM
"""
C10D = (
    "[rank{r}]:[E321 02:17:08.{ns:09d} ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=48211, OpType=ALLREDUCE, NumelIn=16777216, NumelOut=16777216, Timeout(ms)=600000) "
    "ran for 600047 milliseconds before timing out.\n"
    "[rank{r}]:[E321 02:17:08.{ns2:09d} ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank {r}] Exception (either an "
    "error or timeout) detected by watchdog at work: 48211, last enqueued NCCL work: 48211, last completed NCCL "
    "work: 48210.\n"
)
REPORT = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-03-21_02:07:09
  host      : gpu-node-07
  rank      : 3 (local_rank: 3)
  exitcode  : 1 (pid: 41872)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def _chunks(rng: random.Random) -> Iterator[str]:
    """An endless training run: chatter, bars and step logs in realistic proportions."""
    step = 0
    pid0 = 41860
    while True:
        # A burst of NCCL INFO chatter (a new communicator, or NCCL_DEBUG_SUBSYS=ALL noise).
        lines = []
        for _ in range(rng.randint(40, 160)):
            r = rng.randrange(RANKS)
            tmpl = NCCL_INFO[rng.randrange(len(NCCL_INFO))]
            body = tmpl.format(c=rng.randrange(32), r=r, n=(r + 1) % RANKS, p=(r - 1) % RANKS,
                               h=0x55D0_0000_0000 + rng.randrange(1 << 32), b=BUS[r])
            lines.append(f"{HOST}:{pid0 + r}:{pid0 + 100 + rng.randrange(50)} [{r}] {body}\n")
        if rng.random() < 0.01:  # a new communicator: every rank reports its init
            h = 0x55D0_0000_0000 + rng.randrange(1 << 32)
            for r in range(RANKS):
                for tmpl in COMM_INIT:
                    lines.append(f"{HOST}:{pid0 + r}:{pid0 + 100 + r} [{r}] {tmpl.format(r=r, h=h, b=BUS[r])}\n")
        yield "".join(lines)
        # A tqdm bar redrawn with \r for a few dozen steps, then a Trainer log dict on its own line.
        segs = []
        for _ in range(rng.randint(10, 40)):
            step += 1
            rate = 1.0 + rng.random()
            pct = step * 100 // 500_000
            segs.append(f"\r{pct:3d}%|{'█' * (pct // 10):<10}| {step}/500000 [{step // 3600:d}:{step % 3600 // 60:02d}:"
                        f"{step % 60:02d}<99:00:00, {rate:.2f}it/s]")
        yield "".join(segs)
        loss = 2.5 * (0.9995 ** (step / 10)) + rng.random() * 0.05
        yield (f"\n{{'loss': {loss:.4f}, 'grad_norm': {rng.uniform(0.5, 2):.6f}, 'learning_rate': "
               f"{2e-5 * (1 - step / 500000):.10e}, 'epoch': {step / 50000:.2f}}}\n")
        if rng.random() < 0.3:
            yield (f"[2024-03-21 01:{step // 60 % 60:02d}:{step % 60:02d},{rng.randrange(1000):03d}] [INFO] "
                   f"[logging.py:96:log_dist] [Rank 0] step={step}, skipped=0, lr=[1.99e-05], mom=[(0.9, 0.999)]\n")
        if rng.random() < 0.05:
            yield WARNINGS[rng.randrange(len(WARNINGS))]


def generate(path: Path, size_mb: float, seed: int = 7) -> int:
    """Write a log of about ``size_mb`` MB to ``path`` that ends in a failure; returns its size."""
    rng = random.Random(seed)
    target = int(size_mb * 1_000_000)
    written = 0
    with path.open("w", encoding="utf-8", newline="") as fh:
        buf: list[str] = []
        pending = 0
        for chunk in _chunks(rng):
            buf.append(chunk)
            pending += len(chunk)
            if pending > 1 << 20:
                text = "".join(buf)
                fh.write(text)
                written += len(text.encode("utf-8"))
                buf, pending = [], 0
                if written >= target:
                    break
        fh.write("".join(buf) + "\n")
        fh.write(TAIL)
        for r in (0, 1, 2, 4, 5, 6, 7):
            fh.write(C10D.format(r=r, ns=rng.randrange(10**9), ns2=rng.randrange(10**9)))
        fh.write(REPORT)
    return path.stat().st_size


def anchor_literals() -> list[bytes]:
    """What grep is given: the signatures' anchors plus the parsers' own trigger literals."""
    from forensics.parsers import process_output

    from forensics import match

    lits = set(match.notable_literals(match.load_signatures()))
    lits.update(process_output.TRIGGER_LITERALS + process_output.BAR_LITERALS)
    return sorted(lit for lit in lits if lit)


def _child_env(pycache: Path, code: str | None) -> dict[str, str]:
    """The environment of the timed commands: bytecode cached as an installed package's is."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    if code:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (code, env.get("PYTHONPATH")) if p)
    return env


def _time(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+sys) of one run of ``cmd``."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # Output goes to a pipe, not /dev/null: GNU grep stops at the first match when it sees /dev/null.
    # Outside the checkout: ``python -m`` puts the working directory first on sys.path (it shadowed ``--code``).
    proc = subprocess.run(cmd, capture_output=True, check=False, env=env, cwd=tempfile.gettempdir())
    if proc.returncode not in (0, 1, 3):
        err = proc.stderr.decode(errors="replace")[-500:]
        sys.exit(f"{cmd[0]} failed ({proc.returncode}): {err}")
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=float, default=100, help="log size in MB (default 100; 1000 for 1 GB)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions (default 3)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", metavar="PATH", help="write the log here and keep it (reused if the size matches)")
    ap.add_argument("--code", metavar="DIR", help="time the project checked out in DIR (put first on PYTHONPATH)")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-analyze-"))
    try:
        log = Path(args.keep) if args.keep else tmp / "train.log"
        if not (args.keep and log.exists() and abs(log.stat().st_size - args.size * 1e6) < 5e6):
            t0 = time.perf_counter()
            generate(log, args.size, args.seed)
            print(f"generated {log} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        size_mb = log.stat().st_size / 1e6
        patterns = tmp / "patterns"
        lits = anchor_literals()
        patterns.write_text("".join(re.escape(lit.decode()) + "\n" for lit in lits), encoding="utf-8")
        env = _child_env(tmp / "pycache", args.code)
        one_line = tmp / "one.log"
        one_line.write_text("hello\n", encoding="utf-8")
        analyze = [sys.executable, "-m", "forensics", "analyze", "--format", "json", "--quiet"]
        forensics = [*analyze, str(log)]
        grep = [shutil.which("grep") or "grep", "-c", "-E", "-f", str(patterns), str(log)]
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=False)  # warm the page cache
        _time([*analyze, str(one_line)], env)  # warm-up: bytecode (and any per-user cache) written
        ours: list[tuple[float, float]] = []
        theirs: list[tuple[float, float]] = []
        startup: list[tuple[float, float]] = []
        for _ in range(args.reps):
            ours.append(_time(forensics, env))
            theirs.append(_time(grep))
            startup.append(_time([*analyze, str(one_line)], env))
        print(f"file: {size_mb:.0f} MB, {len(lits)} literals, {args.reps} interleaved repetitions (median)")
        for label, runs in (("forensics analyze --format json", ours), ("grep -c -E -f patterns", theirs)):
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"{label:33s} wall {wall:6.2f} s {size_mb / wall:6.0f} MB/s | "
                  f"cpu {cpu:6.2f} s {size_mb / cpu:6.0f} MB/s")
        print(f"{'start-up (a one-line file)':33s} wall {statistics.median(w for w, _ in startup):6.2f} s"
              f"             | cpu {statistics.median(c for _, c in startup):6.2f} s")
        ratio_wall = statistics.median(w for w, _ in theirs) / statistics.median(w for w, _ in ours)
        ratio_cpu = statistics.median(c for _, c in theirs) / statistics.median(c for _, c in ours)
        print(f"speed relative to grep (grep time / analyze time): wall {ratio_wall:.2f}x, cpu {ratio_cpu:.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
