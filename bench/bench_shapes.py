"""``forensics analyze`` against ``grep -c -E -f`` on three log shapes, timed side by side in one run.

Shapes (each seeded, so every run reads the same bytes):

* ``training``: the process-output log of ``bench_analyze.py`` (bars, loss dicts, NCCL bursts,
  one failure at the end);
* ``mixed``: the mix of issue 12 — NCCL_DEBUG=INFO chatter from 8 ranks, Megatron iteration lines,
  HF Trainer loss dicts, tqdm redraws, a rank-prefixed c10d warning repeated on every rank, a
  benign ``nvidia-peermem`` kernel line, and a real-format failure line every 100,003 lines (the
  idea of the shared ``gen_mixed_log.py``, re-written here so the repository stands alone);
* ``kernel``: a long dmesg of a GPU host — AER corrected-error storms with their ``PCIe Bus
  Error`` / ``device [10de:…]`` / ``[ 0] RxErr`` lines, NVRM and nvidia-nvlink chatter, systemd /
  EXT4 / audit noise, and an uncorrectable AER then Xid 79 near the end.

For each shape and size: the log is generated (or reused with ``--keep DIR``), the page cache is
warmed, then ``forensics analyze --format json --quiet`` and ``grep -c -E -f PATTERNS`` run in turns
(``--reps`` times). PATTERNS are the literals ``bench_analyze.anchor_literals`` gives grep. Each
child's own user+sys CPU and peak RSS come from ``os.wait4``.

``--big GB`` adds one run on a ``mixed`` log of that many GB: the 1 GB ``mixed`` log, generated (or
kept) as above, concatenated ``GB`` times with ``os.copy_file_range`` (generating 20 GB at ~30 MB/s
would take ten minutes; its counters restart every GB, which the analyzer reads as restarts), timed
once against grep and deleted afterwards (analyze's JSON is kept beside it).

Usage::

    python bench/bench_shapes.py --sizes 100,1000 --shapes mixed,kernel,training --keep /tmp/shapes
    python bench/bench_shapes.py --sizes 1000,4000 --shapes mixed --rss-only   # RSS against size
    python bench/bench_shapes.py --sizes 100 --shapes mixed --big 20 --keep /tmp/shapes   # + 20 GB
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_analyze  # noqa: E402

HOST = "node-a12"
MIXED_FAILURES = (
    "[ 8123.456789] NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, name=python3, GPU has fallen off the bus.",
    "[rank3]:[E1129 15:21:07.408271257 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran "
    "for 600015 milliseconds before timing out.",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1024.00 MiB. GPU 0 has a total capacity of "
    "79.10 GiB of which 639.12 MiB is free. Including non-PyTorch memory, this process has 78.17 GiB memory in use.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "[ 9001.000001] Out of memory: Killed process 48213 (python3) total-vm:123456789kB, anon-rss:98765432kB, "
    "file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:200000kB oom_score_adj:0",
    "[ 7000.123456] pcieport 0000:00:03.0: AER: Uncorrected (Fatal) error received: 0000:00:03.0",
)


def gen_mixed(path: Path, size_mb: float, seed: int = 1234) -> None:
    """The issue-12 mix, about ``size_mb`` MB (10^6 bytes)."""
    rnd = random.Random(seed)
    limit = int(size_mb * 1_000_000)
    written, i, it = 0, 0, 0
    with path.open("w", encoding="utf-8", newline="\n") as f:
        buf: list[str] = []
        while written < limit:
            i += 1
            r = rnd.random()
            rank = rnd.randrange(8)
            if i % 100_003 == 0:
                line = MIXED_FAILURES[(i // 100_003) % len(MIXED_FAILURES)]
            elif r < 0.45:
                line = (f"{HOST}:{48211 + rank}:{48300 + rank} [{rank}] NCCL INFO Channel {rnd.randrange(32):02d}/0 : "
                        f"{rank}[{rank}] -> {(rank + 1) % 8}[{(rank + 1) % 8}] via P2P/IPC/read")
            elif r < 0.60:
                it += 1
                line = (f" iteration {it:8d}/  100000 | consumed samples: {it * 256:10d} | elapsed time per iteration "
                        f"(ms): {800 + rnd.random() * 40:.1f} | learning rate: 2.000E-05 | global batch size:   256 | "
                        f"lm loss: {2 + rnd.random():.6E} | loss scale: 1.0 | grad norm: {rnd.random():.3f} | "
                        "number of skipped iterations:   0 | number of nan iterations:   0 |")
            elif r < 0.72:
                line = (f"{{'loss': {1 + rnd.random():.4f}, 'grad_norm': {rnd.random():.4f}, 'learning_rate': 2e-05, "
                        f"'epoch': {it / 10000:.2f}}}")
            elif r < 0.84:
                pct = it % 100
                line = (f"\r {pct:3d}%|{'█' * (pct // 10)}{' ' * (10 - pct // 10)}| {it}/100000 "
                        f"[12:34<1:23:45,  {1 + rnd.random():.2f}it/s]")
            elif r < 0.92:
                line = (f"[rank{rank}]:[W1129 15:{rnd.randrange(60):02d}:{rnd.randrange(60):02d}."
                        f"{rnd.randrange(10**9):09d} ProcessGroupNCCL.cpp:{rnd.randrange(500, 5000)}] Warning: "
                        "TORCH_NCCL_AVOID_RECORD_STREAMS=1 has no effect for point-to-point collectives. "
                        "(function operator())")
            else:
                line = (f"[{1000 + i / 1000:12.6f}] nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected "
                        "invalid context, skipping further processing")
            buf.append(line)
            written += len(line.encode()) + 1
            if len(buf) >= 20_000:
                f.write("\n".join(buf) + "\n")
                buf = []
        f.write("\n".join(buf) + "\n")


_BUS = ("0000:18:00.0", "0000:2a:00.0", "0000:3b:00.0", "0000:5d:00.0")
_ROOT = ("0000:17:01.0", "0000:29:01.0", "0000:3a:01.0", "0000:5c:01.0")
_NOISE = (
    "systemd[1]: Started Session {n} of User slurm.",
    "systemd-journald[812]: Data hash table of /run/log/journal/{n:x}/system.journal has a fill level at 75.0",
    "EXT4-fs (nvme0n1p2): re-mounted. Opts: (null)",
    "audit: type=1400 audit({t:.3f}:{n}): apparmor=\"DENIED\" operation=\"open\" profile=\"snap.lxd\" pid={p}",
    "NVRM: GPU at PCI:{bus}: GPU-6f1c{k:04x}-2b7a-9c44-0d51-{k:012x}",
    "NVRM: GPU Board Serial Number: 165200000{k:04d}",
    "nvidia-nvlink: Nvlink Core is being initialized, major device number 234",
    "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  535.129.03",
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023",
    "IPv6: ADDRCONF(NETDEV_CHANGE): ib{k}: link becomes ready",
    "mlx5_core 0000:{k}1:00.0: mlx5_pcie_event:301:(pid {p}): PCIe slot advertised sufficient power (75W).",
    "perf: interrupt took too long ({n} > {p}), lowering kernel.perf_event_max_sample_rate to 50000",
    "nvidia 0000:{k}b:00.0: enabling device (0000 -> 0003)",
    "igb 0000:05:00.0 eno1: igb: eno1 NIC Link is Up 1000 Mbps Full Duplex, Flow Control: RX",
)


def gen_kernel(path: Path, size_mb: float, seed: int = 4321, fresh_uuids: bool = False) -> None:
    """A long dmesg of a GPU host: AER corrected storms, NVRM chatter, noise; a fatal AER and Xid 79 near the end.
    ``fresh_uuids``: every ``NVRM: GPU at PCI:…`` line names a new UUID (an earlier draft of this generator,
    which made the identity join quadratic)."""
    rnd = random.Random(seed)
    serial = 0
    limit = int(size_mb * 1_000_000)
    written, t = 0, 5.0
    with path.open("w", encoding="utf-8", newline="\n") as f:
        buf: list[str] = []
        while written < limit:
            t += rnd.random() * 0.02
            if rnd.random() < 0.35:  # one corrected AER report: 4 lines
                k = rnd.randrange(4)
                lines = [
                    f"pcieport {_ROOT[k]}: AER: Corrected error received: {_BUS[k]}",
                    f"nvidia {_BUS[k]}: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
                    f"nvidia {_BUS[k]}:   device [10de:2330] error status/mask=00000001/0000e000",
                    f"nvidia {_BUS[k]}:    [ 0] RxErr                  (First)",
                ]
            else:
                k = rnd.randrange(4)
                tmpl = _NOISE[rnd.randrange(len(_NOISE))]
                serial += 1
                lines = [tmpl.format(n=rnd.randrange(1 << 16), p=rnd.randrange(1, 99999), t=1.7e9 + t,
                                     k=serial if fresh_uuids and "GPU-" in tmpl else k + 1, bus=_BUS[k])]
            for body in lines:
                line = f"[{t:12.6f}] {body}"
                buf.append(line)
                written += len(line) + 1
            if len(buf) >= 20_000:
                f.write("\n".join(buf) + "\n")
                buf = []
        t += 1
        buf += [
            f"[{t:12.6f}] pcieport 0000:3a:01.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0",
            f"[{t:12.6f}] nvidia 0000:3b:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
            "(Receiver ID)",
            f"[{t + 0.5:12.6f}] NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, name=python3, GPU has fallen off the bus.",
            f"[{t + 0.5:12.6f}] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
        ]
        f.write("\n".join(buf) + "\n")


def gen_training(path: Path, size_mb: float) -> None:
    bench_analyze.generate(path, size_mb)


def gen_kernel_uuids(path: Path, size_mb: float) -> None:
    gen_kernel(path, size_mb, fresh_uuids=True)


SHAPES: dict[str, Callable[[Path, float], None]] = {"mixed": gen_mixed, "kernel": gen_kernel,
                                                    "kernel-uuids": gen_kernel_uuids, "training": gen_training}


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux ``/proc``)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):  # (it ended meanwhile)
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
    return out


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeMemory(threading.Thread):
    """The peak, while a child runs, of the proportional set size (PSS: shared pages split among the
    processes that map them) summed over the child and its worker processes, polled every 50 ms.
    ``wait4``'s peak RSS is the largest single process's; this is what the whole tree held."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_kib = pid, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.05):
            self.peak_kib = max(self.peak_kib, sum(_pss_kib(p) for p in _tree(self.pid)))


def timed(cmd: list[str], env: dict[str, str] | None = None,
          sink: Path | None = None) -> tuple[float, float, float, int, int]:
    """(wall s, user s, sys s, peak RSS KiB, peak PSS KiB of the process tree; 0 where ``/proc`` has none)
    of one run; ``grep``'s exit 1 (no match) is fine. Its standard output goes to ``sink`` when given."""
    t0 = time.perf_counter()
    # Run outside the checkout: ``python -m`` puts the working directory first on sys.path, which
    # would shadow ``--code``.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tempfile.gettempdir())
    memory = TreeMemory(proc.pid)
    memory.start()
    # Drain the pipes in this thread while the child runs, then reap it with wait4 for its own rusage.
    assert proc.stdout is not None and proc.stderr is not None
    errs: list[bytes] = []
    stderr = proc.stderr
    t = threading.Thread(target=lambda: errs.append(stderr.read()), daemon=True)
    t.start()
    with sink.open("wb") if sink is not None else open(os.devnull, "wb") as out:
        while chunk := proc.stdout.read(1 << 16):
            out.write(chunk)
    t.join()
    memory.done.set()
    memory.join()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1, 3):
        sys.exit(f"{cmd[0]} failed ({proc.returncode}): {b''.join(errs).decode(errors='replace')[-500:]}")
    return wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss, memory.peak_kib


def concatenated(src: Path, dst: Path, times: int) -> None:
    """``src`` written ``times`` times into ``dst``, copied in the kernel (no Python per byte)."""
    size = src.stat().st_size
    with dst.open("wb") as out:
        for _ in range(times):
            with src.open("rb") as f:
                done = 0
                while done < size:
                    n = os.copy_file_range(f.fileno(), out.fileno(), size - done)
                    if n == 0:
                        raise OSError(f"copy of {src} stopped at {done} bytes")
                    done += n


Run = tuple[float, float, float, int, int]


def row(shape: str, mb: float, ours: list[Run], theirs: list[Run]) -> str:
    a_cpu = statistics.median(r[1] + r[2] for r in ours)
    a_wall = statistics.median(r[0] for r in ours)
    rss = max(r[3] for r in ours) / 1024
    pss = max(r[4] for r in ours) / 1024
    if not theirs:
        return f"{shape:9s} {mb:6.0f} | {a_cpu:9.2f} s {a_wall:5.2f}s {rss:7.0f} {pss:7.0f} |"
    g_cpu = statistics.median(r[1] + r[2] for r in theirs)
    g_wall = statistics.median(r[0] for r in theirs)
    return (f"{shape:9s} {mb:6.0f} | {a_cpu:9.2f} s {a_wall:5.2f}s {rss:7.0f} {pss:7.0f} | {g_cpu:6.2f} s "
            f"{g_wall:5.2f}s | {g_cpu / a_cpu:9.2f}x {g_wall / a_wall:5.2f}x")


def big_run(keep: Path, gb: int, analyze: list[str], patterns: Path, env: dict[str, str]) -> str:
    """One turn of analyze and grep on a ``gb`` GB mixed log made by concatenation (then deleted)."""
    one = (keep / "mixed-1000.log").resolve()
    if not one.exists():
        gen_mixed(one, 1000)
    big = (keep / f"mixed-{gb}x1000.log").resolve()
    t0 = time.perf_counter()
    concatenated(one, big, gb)
    print(f"  (concatenated {big} in {time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    try:
        subprocess.run(["cat", str(big)], stdout=subprocess.DEVNULL, check=False)
        ours = [timed([*analyze, str(big)], env, keep / f"mixed-{gb}x1000.json")]  # the verdict, kept
        theirs = [timed(["grep", "-c", "-E", "-f", str(patterns), str(big)])]
        return row("mixed", big.stat().st_size / 1e6, ours, theirs)
    finally:
        big.unlink()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100", help="comma-separated sizes in MB (default 100)")
    ap.add_argument("--shapes", default="mixed,kernel,training", help="comma-separated shapes")
    ap.add_argument("--reps", type=int, default=2, help="turns of analyze and grep (default 2; medians)")
    ap.add_argument("--keep", metavar="DIR", help="keep the generated logs here (reused when present)")
    ap.add_argument("--code", metavar="DIR", help="time the project checked out in DIR (first on PYTHONPATH)")
    ap.add_argument("--rss-only", action="store_true", help="run analyze once per file, no grep")
    ap.add_argument("--big", type=int, metavar="GB", help="also one run on GB concatenated copies of mixed 1 GB")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-shapes-"))
    keep = Path(args.keep) if args.keep else tmp
    keep.mkdir(parents=True, exist_ok=True)
    try:
        patterns = tmp / "patterns"
        lits = bench_analyze.anchor_literals()
        patterns.write_text("".join(re.escape(lit.decode()) + "\n" for lit in lits), encoding="utf-8")
        env = bench_analyze._child_env(tmp / "pycache", args.code)
        one = tmp / "one.log"
        one.write_text("hello\n", encoding="utf-8")
        analyze = [sys.executable, "-m", "forensics", "analyze", "--format", "json", "--quiet"]
        timed([*analyze, str(one)], env)  # warm-up: bytecode and the signature cache written
        print(f"{len(lits)} grep literals; medians of {args.reps} turns; CPU = user+sys of the child and its "
              "workers; RSS: the largest process's peak; PSS: the peak of the whole tree's")
        print(f"{'shape':9s} {'MB':>6s} | {'analyze cpu':>11s} {'wall':>6s} {'RSS MB':>7s} {'PSS MB':>7s} | "
              f"{'grep cpu':>8s} {'wall':>6s} | {'x grep cpu':>10s} {'wall':>6s}")
        for shape in args.shapes.split(","):
            for size in (float(s) for s in args.sizes.split(",")):
                log = (keep / f"{shape}-{size:g}.log").resolve()
                if not log.exists():
                    t0 = time.perf_counter()
                    SHAPES[shape](log, size)
                    print(f"  (generated {log} in {time.perf_counter() - t0:.0f} s)", file=sys.stderr)
                mb = log.stat().st_size / 1e6
                subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=False)
                ours: list[Run] = []
                theirs: list[Run] = []
                for _ in range(1 if args.rss_only else args.reps):
                    ours.append(timed([*analyze, str(log)], env))
                    if not args.rss_only:
                        theirs.append(timed(["grep", "-c", "-E", "-f", str(patterns), str(log)]))
                print(row(shape, mb, ours, theirs), flush=True)
        if args.big:
            print(big_run(keep, args.big, analyze, patterns, env), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
