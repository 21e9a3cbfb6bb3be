"""Writes the report-2 test logs (tests/data/report2/): an 8-rank pipeline whose drafter ranks 6 and 7
died silently after their first step, with the numbers of /work/shared/reports/2-eight-gpu-pipeline-silent-crash.txt
(8 x RTX PRO 6000 Blackwell, 5 targets + 3 drafters, resumed from step 690; GPUs 2, 3, 5 at 100 %, 0, 1, 4, 6, 7
at 0 %; GPUs 6 and 7 hold ~59 GB, the others 91-97 GB; 5.5 Ktok/s, tgt=0.27 b/s, q_pre=[50,50,50,50,50] q_hs=[60];
the previous run did 21.5 Ktok/s). Run it from this folder to regenerate the files; they are committed."""

from datetime import datetime, timedelta

T0 = datetime(2026, 5, 14, 3, 0, 0)
RESTART = T0 + timedelta(hours=2, minutes=36)  # the restart, 5 min after the previous run's last step
STEP_S = 390  # 5.5 Ktok/s where the previous run did 21.5 Ktok/s in 100 s steps
STEPS = 25  # the restarted run is observed for 2.6 h


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"


def previous_run() -> list[str]:
    """The run before the restart: 5 targets + 3 drafters at 21.5 Ktok/s, steps 600-690 every 100 s, a checkpoint
    at step 690, then the log ends (the operator stopped it to restart with the expanded dataset)."""
    out = [f"{stamp(T0)} INFO dflash.train: launching 8 ranks (5 targets, 3 drafters), world_size=8"]
    t = T0 + timedelta(seconds=40)
    for step in range(600, 691):
        out.append(f"{stamp(t)} INFO dflash.train: step {step} | loss 1.{900 - step:03d} | 21.5 Ktok/s | "
                   f"tgt=1.05 b/s | q_pre=[12,11,12,10,12] q_hs=[8]")
        t += timedelta(seconds=100)
    out.append(f"{stamp(t)} INFO dflash.train: saved checkpoint step 690 to /ckpt/step_690")
    return out


def restarted_run(silent: tuple[int, ...] = (6, 7)) -> list[str]:
    """The restart: resumes from step 690; every rank logs its own steps; ``silent`` ranks stop after step 1."""
    out = [f"{stamp(RESTART)} INFO dflash.train: launching 8 ranks (5 targets, 3 drafters), world_size=8",
           f"{stamp(RESTART + timedelta(seconds=5))} INFO dflash.train: resuming from checkpoint /ckpt/step_690 "
           f"(step 690)"]
    t = RESTART + timedelta(seconds=60)
    for step in range(1, STEPS + 1):
        for rank in range(8):
            if rank in silent and step > 1:
                continue
            role = "drafter" if rank >= 5 else "target"
            out.append(f"[rank{rank}]:{stamp(t + timedelta(milliseconds=37 * rank))} INFO dflash.{role}: "
                       f"step {step} | loss 2.{400 - step:03d} | 5.5 Ktok/s | tgt=0.27 b/s | "
                       f"q_pre=[50,50,50,50,50] q_hs=[60]")
        t += timedelta(seconds=STEP_S)
    return out


def smi_csv(silent: tuple[int, ...] = (6, 7)) -> list[str]:
    """nvidia-smi --query-gpu=timestamp,index,pci.bus_id,utilization.gpu,memory.used,memory.total,power.draw,
    power.limit --format=csv -l 5, for the last 3 minutes of the restarted run."""
    mem = {0: 95312, 1: 94874, 2: 96120, 3: 95980, 4: 93420, 5: 97480, 6: 60416, 7: 60398}  # MiB: 6, 7 ~59 GiB
    busy = {2, 3, 5}
    out = ["timestamp, index, pci.bus_id, utilization.gpu [%], memory.used [MiB], memory.total [MiB], "
           "power.draw [W], power.limit [W]"]
    t = RESTART + timedelta(seconds=60 + STEP_S * (STEPS - 1) - 180)
    for _ in range(36):
        for gpu in range(8):
            util, power = (100, 571.3) if gpu in busy else (0, 71.8 if gpu not in silent else 38.2)
            out.append(f"{t.strftime('%Y/%m/%d %H:%M:%S')}.000, {gpu}, 00000000:{0x41 + 0x10 * gpu:02X}:00.0, "
                       f"{util} %, {mem[gpu]} MiB, 97887 MiB, {power:.2f} W, 600.00 W")
        t += timedelta(seconds=5)
    return out


if __name__ == "__main__":
    for name, lines in (("previous-run.log", previous_run()), ("restart.log", restarted_run()),
                        ("nvidia-smi.csv", smi_csv())):
        with open(name, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
