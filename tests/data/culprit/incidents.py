"""Incidents of issue 21 written by hand in ordinary shapes, each a function returning ``{file name: text}``.

The shapes are what launchers and people produce: torchrun ``--tee`` (``[default6]:`` / ``[rank6]:``),
a rank only inside the message, a Ctrl-C tail, a dmesg and a training log (as two files or pasted as one
text), an aggregated watchdog log of N ranks in arrival order, a gloo stall. ``tests/test_culprit.py``
reads them; ``forensics eval --transforms`` rewrites them into more shapes.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from random import Random

T0 = datetime(2026, 5, 14, 3, 0, 0)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"


def _glog(t: datetime, lv: str = "W") -> str:
    return f"{lv}{t.strftime('%m%d %H:%M:%S')}.{t.microsecond:06d}"


def _prefix(style: str, rank: int) -> str:
    return {"default": f"[default{rank}]:", "rank": f"[rank{rank}]:", "none": ""}[style]


def pipeline(prefix: str = "default", ctrl_c: bool = True, stopped: tuple[int, ...] = (6, 7)) -> dict[str, str]:
    """Eight ranks under ``torchrun --tee 3``: targets 0-4 feed drafters 5-7 through queues; the drafters in
    ``stopped`` print their steps for ten minutes and then nothing; rank 0's monitor line falls from 21.5K to
    5.6K tok/s and every queue reads 64/64. With ``prefix="none"`` the rank is only in the message
    (``[rank 6]``). ``ctrl_c``: the user stops the job with Ctrl-C at the end."""
    out = [f"{_glog(T0)} 140123 torch/distributed/run.py:793] ",
           f"{_glog(T0)} 140123 torch/distributed/run.py:793] *****************************************",
           f"{_glog(T0)} 140123 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for "
           "each process to be 1 in default, to avoid your system being overloaded, please further tune the "
           "variable for optimal performance in your application as needed. ",
           f"{_glog(T0)} 140123 torch/distributed/run.py:793] *****************************************"]

    def line(rank: int, t: datetime, text: str) -> str:
        if prefix == "none":
            return f"{_iso(t)} INFO [rank {rank}] {text}"
        return f"{_prefix(prefix, rank)}{_iso(t)} INFO {text}"

    t = T0 + timedelta(seconds=20)
    for r in range(8):
        role = "target" if r < 5 else "drafter"
        out.append(line(r, t + timedelta(milliseconds=90 * r), f"{role} {r} ready on cuda:{r}"))
    stop_at = 20  # minutes
    for minute in range(1, 46):
        now = T0 + timedelta(minutes=minute)
        late = minute > stop_at
        rate = "5.6K" if late else "21.5K"
        q = "64/64" if late else f"{10 + minute % 5}/64"
        out.append(line(0, now, f"monitor: step={minute * 10} throughput={rate} tok/s q_pre={q} q_hs={q}"))
        for r in range(1, 5):
            if not late or minute % 4 == 0:  # targets blocked behind the full queue put a batch now and then
                out.append(line(r, now + timedelta(milliseconds=130 * r), f"target {r}: put batch {minute * 40} "
                                f"(256 seqs)"))
        for r in range(5, 8):
            if late and r in stopped:
                continue
            out.append(line(r, now + timedelta(milliseconds=170 * r),
                            f"drafter {r}: step {minute * 40} loss={2.5 - minute / 100:.3f} lr=1.0e-04"))
    if ctrl_c:
        end = T0 + timedelta(minutes=45, seconds=30)
        out.append(f"^C{_glog(end)} 140123 torch/distributed/elastic/agent/server/api.py:704] Received "
                   "Signals.SIGINT death signal, shutting down workers")
        for r in range(8):
            out.append(f"{_glog(end)} 140123 torch/distributed/elastic/multiprocessing/api.py:897] Sending process "
                       f"{140200 + r} closing signal SIGINT")
        for r in (0, 5, 1, 6, 2, 7, 3, 4):
            p = _prefix(prefix, r) if prefix != "none" else ""
            out += [f"{p}Traceback (most recent call last):",
                    f'{p}  File "/workspace/pipeline.py", line 312, in <module>',
                    f"{p}    main()",
                    f'{p}  File "/workspace/pipeline.py", line 298, in main',
                    f"{p}    time.sleep(1.0)",
                    f"{p}KeyboardInterrupt"]
        out += ["Traceback (most recent call last):",
                '  File "/usr/local/bin/torchrun", line 8, in <module>',
                "    sys.exit(main())",
                '  File "/usr/local/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py", '
                "line 84, in _terminate_process_handler",
                "    raise SignalException(f\"Process {os.getpid()} got signal: {sigval}\", sigval=sigval)",
                "torch.distributed.elastic.multiprocessing.api.SignalException: Process 140123 got signal: 2"]
    return {"torchrun.log": "\n".join(out) + "\n"}


_BUS = {0: "1b000", 1: "1c000", 2: "3d000", 3: "3e000", 4: "b1000", 5: "c1000", 6: "d1000", 7: "e1000"}


def xid_and_training(paste: bool = False, kernel_first: bool = True) -> dict[str, str]:
    """Xid 79 on the GPU at 0000:c1:00.0 in dmesg; the training log's NCCL init lines put rank 5 there and
    the other ranks time out in the watchdog. As two files, or pasted as one text (either order)."""
    dmesg = ["[Thu May 14 03:12:01 2026] NVRM: GPU at PCI:0000:c1:00: GPU-5b1e6c2a-8f0e-4c38-9d8a-1a2b3c4d5e6f",
             "[Thu May 14 03:12:01 2026] NVRM: GPU Board Serial Number: 1654922001234",
             "[Thu May 14 03:12:01 2026] NVRM: Xid (PCI:0000:c1:00): 79, pid=48211, name=python, GPU has fallen "
             "off the bus.",
             "[Thu May 14 03:12:01 2026] NVRM: GPU 0000:c1:00.0: GPU has fallen off the bus.",
             "[Thu May 14 03:12:01 2026] NVRM: A GPU crash dump has been created. If possible, please run",
             "[Thu May 14 03:12:01 2026] NVRM: nvidia-bug-report.sh as root to collect this data before",
             "[Thu May 14 03:12:01 2026] NVRM: the NVIDIA driver is unloaded."]
    train = [f"gpu-node07:{48206 + r}:{48206 + r} [{r}] NCCL INFO comm 0x55d{r}c0 rank {r} nranks 8 cudaDev {r} "
             f"nvmlDev {r} busId {_BUS[r]} commId 0x7c1a2b3c4d5e6f70 - Init COMPLETE" for r in range(8)]
    t = T0 + timedelta(minutes=1)
    for step in range(1, 11):
        train.append(f"[rank0]:{_iso(t + timedelta(minutes=step))} INFO train: step {step * 50} | loss "
                     f"{2.1 - step / 50:.3f} | 41,200 tokens/s")
    end = T0 + timedelta(minutes=22, seconds=1)
    for r in (0, 1, 2, 3, 4, 6, 7):
        train.append(f"[rank{r}]:[E514 03:22:01.{123456 + r:06d}000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog "
                     "caught collective operation timeout: WorkNCCL(SeqNum=5501, OpType=ALLREDUCE, NumelIn=262144, "
                     "NumelOut=262144, Timeout(ms)=600000) ran for 600047 milliseconds before timing out.")
    del end
    if not paste:
        return {"dmesg.txt": "\n".join(dmesg) + "\n", "train.log": "\n".join(train) + "\n"}
    parts = [dmesg, train] if kernel_first else [train, dmesg]
    return {"paste.txt": "\n".join(parts[0] + parts[1]) + "\n"}


def watchdog_world(n: int, missing: int, seed: int = 0, prefix: str = "rank") -> dict[str, str]:
    """``n`` ranks of which all but ``missing`` print the watchdog timeout of one collective, in arrival order
    (shuffled, as an aggregated Slurm / torchrun log has them); the world size is in every NCCL init line."""
    rng = Random(seed)
    lines = [f"[rank{r}]:node{r // 8:03d}:{3000 + r}:{3000 + r} [{r % 8}] NCCL INFO comm 0x7f{r:04x} rank {r} "
             f"nranks {n} cudaDev {r % 8} busId {_BUS[r % 8]} - Init COMPLETE" for r in range(n)]
    if prefix != "rank":
        lines = [ln.split("]:", 1)[1] for ln in lines]
    waits = []
    for r in range(n):
        if r == missing:
            continue
        us = rng.randrange(0, 999999)
        p = f"[rank{r}]:" if prefix == "rank" else ""
        waits.append(f"{p}[E514 03:40:{rng.randrange(1, 5):02d}.{us:06d}000 ProcessGroupNCCL.cpp:616] [Rank {r}] "
                     "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=90211, OpType=ALLREDUCE, "
                     "NumelIn=50331648, NumelOut=50331648, Timeout(ms)=1800000) ran for 1800088 milliseconds before "
                     "timing out.")
    rng.shuffle(waits)
    return {"job.out": "\n".join(lines + waits) + "\n"}


def gloo_stall() -> dict[str, str]:
    """Two ranks on gloo (CPU): rank 1 prints ``loading next shard...`` and goes quiet; rank 0 times out in
    ``all_reduce`` 30 minutes later (gloo's own wording)."""
    out = []
    t = T0
    for step in range(1, 21):
        for r in (0, 1):
            out.append(f"[rank{r}]:{_iso(t + timedelta(seconds=30 * step, milliseconds=40 * r))} INFO step {step} "
                       f"loss={1.9 - step / 100:.3f} samples/s=812.4")
    last = t + timedelta(seconds=30 * 20 + 5)
    out.append(f"[rank1]:{_iso(last)} INFO loading next shard...")
    fail = last + timedelta(minutes=30)
    out += ["[rank0]:Traceback (most recent call last):",
            '[rank0]:  File "/work/train.py", line 88, in <module>',
            "[rank0]:    dist.all_reduce(loss_t)",
            '[rank0]:  File "/usr/lib/python3/dist-packages/torch/distributed/c10d_logger.py", line 81, in wrapper',
            "[rank0]:    return func(*args, **kwargs)",
            '[rank0]:  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 2806, '
            "in all_reduce",
            "[rank0]:    work.wait()",
            "[rank0]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
            "1800000ms for recv operation to complete",
            f"E{fail.strftime('%m%d %H:%M:%S')}.101000 2231 torch/distributed/elastic/multiprocessing/api.py:869] "
            "failed (exitcode: 1) local_rank: 0 (pid: 2240) of binary: /usr/bin/python3"]
    return {"train.log": "\n".join(out) + "\n"}


def _nvml_header(host: str, pci: str) -> dict[str, object]:
    return {"format": "gpu-forensics-nvml", "version": 1, "time": "unix-ms",
            "columns": {"mu": "mem_used_mib", "mt": "mem_total_mib", "ug": "util_gpu_pct", "pw": "power_w"},
            "interval_s": 1.0, "host": host, "gpus": [{"i": 0, "pci": pci, "name": "NVIDIA H200", "uuid": "GPU-1"}],
            "segment": 1}


def write_bundle(folder: Path, *, start_ns: int, child_pid: int, kmsg: list[tuple[int, str]],
                 stdout: list[tuple[int, str]], stderr: list[tuple[int, str]], nvml: list[dict[str, object]],
                 host: str = "gpu-node-03", pci: str = "0000:00:06.0", exit_code: int = 1) -> Path:
    """A recorder bundle (docs/bundle-format.md) from (ns, line) pairs: the kernel log as ``/dev/kmsg``
    records (boot-relative µs), the streams with their receipt indexes, NVML lines under a header."""
    import json
    import struct

    boot = start_ns - 600 * 10**9
    folder.mkdir(parents=True, exist_ok=True)
    end_ns = max(t for t, _ in stdout + stderr + kmsg) + 10**9
    (folder / "manifest.json").write_text(json.dumps({
        "format": "gpu-forensics-bundle", "version": 1, "status": "finished", "host": host,
        "command": ["python3", "workers.py"], "start_ns": start_ns, "end_ns": end_ns, "exit_code": exit_code,
        "signal": None, "child_pid": child_pid, "boot_time_ns": boot, "tz_name": "Etc/UTC",
        "sources": {"nvml": {"status": "ok", "gpus": 1}, "kernel_log": {"status": "ok"}}}), encoding="utf-8")
    (folder / "kmsg.log").write_text("".join(f"3,{i + 100},{(t - boot) // 1000},-;{text}\n"
                                             for i, (t, text) in enumerate(kmsg)), encoding="utf-8")
    for name, lines in (("stdout", stdout), ("stderr", stderr)):
        data, idx = b"", bytearray(b"GFRIDX1\n")
        for t, text in lines:
            data += text.encode() + b"\n"
            idx += struct.pack("<QQ", len(data), t)
        (folder / f"{name}.log").write_bytes(data)
        (folder / f"{name}.idx").write_bytes(bytes(idx))
    compact = (",", ":")
    rows = [json.dumps(_nvml_header(host, pci), separators=compact)] + [json.dumps(r, separators=compact) for r in nvml]
    (folder / "nvml.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def shared_gpu_bundle(folder: Path) -> Path:
    """Four worker processes share one GPU; worker 2 hits an illegal memory access at step 20. The kernel
    log the recorder keeps from before the start holds an Xid 31 of another, earlier run (another pid,
    36 s before this recording began); this run's own Xid 31 names worker 2's pid."""
    s = 1_796_000_000 * 10**9
    pids = {w: 3100 + w for w in range(4)}
    kmsg = [(s - 36 * 10**9, "NVRM: Xid (PCI:0000:00:06): 31, pid=1999, name=python3, channel 0x00000008, intr "
                             "00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f12_34560000. Fault "
                             "is of type FAULT_PDE ACCESS_TYPE_VIRT_READ"),
            (s + 25 * 10**9, f"NVRM: Xid (PCI:0000:00:06): 31, pid={pids[2]}, name=python3, channel 0x00000009, intr "
                             "00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_2 faulted @ 0x7f99_00000000. Fault "
                             "is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE")]
    stdout = [(s + 2 * 10**9 + w * 10**8, f"[worker {w}] pid {pids[w]} on cuda:0") for w in range(4)]
    for step in range(1, 31):
        for w in range(4):
            if w == 2 and step > 19:
                continue
            stdout.append((s + (3 + step) * 10**9 + w * 10**8, f"[worker {w}] step {step} loss {1 / step:.4f}"))
    stderr = [(s + 25 * 10**9 + 2 * 10**8, "[worker 2] failed at step 20: CUDA error: an illegal memory access was "
                                         "encountered")]
    nvml = []
    for sec in range(0, 36):
        procs = [[pids[w], 900 + 300 * min(sec, 5)] for w in range(4)]
        nvml.append({"t": (s + sec * 10**9) // 10**6, **({"k": 1} if sec == 0 else {}),
                     "g": {"0": {"mu": 4000 + 1200 * min(sec, 5), "mt": 143771, "ug": 60, "pw": 300.0}},
                     "p": {"0": procs}})
    return write_bundle(folder, start_ns=s, child_pid=3090, kmsg=kmsg, stdout=stdout, stderr=stderr, nvml=nvml)


def frozen_drafters_bundle(folder: Path, steps: bool = True, freeze_s: int = 40, duration_s: int = 120) -> Path:
    """One GPU, five targets (ranks 0-4) feed three drafters (ranks 5-7); drafters 6 and 7 grow their memory to
    the GPU's cap at ``freeze_s``, their worker swallows the OOM and they sit idle holding it, while drafter 5
    keeps working below them. ``steps``: the drafters print their steps (else only their ready line). NVML's
    per-process memory and utilization (``p``, ``pu``) once a second; the monitor line every 3 s."""
    s = 1_796_100_000 * 10**9
    pid = {r: 4100 + r for r in range(8)}
    frozen = (6, 7)
    stdout = [(s + 10**9, "pipeline: 5 targets + 3 drafters on one GPU")]
    stdout += [(s + 2 * 10**9 + r * 10**7, f"[rank {r}] {'target' if r < 5 else 'drafter'} ready (pid {pid[r]})")
               for r in range(8)]
    for t in range(3, duration_s, 3):
        late = t > freeze_s
        rate, q = ("5.5K", "[50,50,50,50,50] q_hs=[60]") if late else ("16.2K", f"[{t % 7},3,4,2,5] q_hs=[{t % 9}]")
        stdout.append((s + t * 10**9, f"t={t}s | {rate} tok/s | tokens={t * 5000} | q_pre={q}"))
        for r in (5, 6, 7):
            if steps and not (late and r in frozen):
                stdout.append((s + t * 10**9 + r * 10**7, f"[rank {r}] drafter step {t * 30} loss 0.{t:04d}"))
    nvml = []
    for sec in range(duration_s):
        procs, util = [], []
        for r in range(8):
            if r < 5:
                mib, sm = 2800, 30
            elif r in frozen:
                mib = 2052 if sec < 5 else min(9000, 2052 + (sec - 5) * 200) if sec < freeze_s else 9000
                sm = 60 if sec < freeze_s else None
            else:
                mib, sm = (2052 if sec < 5 else 5992), 60
            procs.append([pid[r], mib])
            if sm is not None:
                util.append([pid[r], sm, 20])
        nvml.append({"t": (s + sec * 10**9) // 10**6, **({"k": 1} if sec == 0 else {}),
                     "g": {"0": {"mu": sum(m for _, m in procs) + 4000, "mt": 143771, "ug": 90, "pw": 420.0}},
                     "p": {"0": procs}, "pu": {"0": util}})
    return write_bundle(folder, start_ns=s, child_pid=4090, kmsg=[(s + 10**9, "NVRM: loading NVIDIA UNIX x86_64 "
                                                                               "Kernel Module  580.159.04")],
                        stdout=stdout, stderr=[(s + 5 * 10**8, "")][:0] or [(s + 10**9, "starting")], nvml=nvml,
                        exit_code=0)
