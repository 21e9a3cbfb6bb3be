"""Are lines spliced when stdout and stderr lead to one file (``forensics record -- CMD > log 2>&1``)?

    python bench/bench_splice.py [--runs 200] [--hogs 4] [--steps 5] [--period 0.01] [--writer print|whole]

Each run starts ``forensics record -- python -u CHILD > out.log 2>&1`` (the recorder's stdout and
stderr are one file, as under Slurm, nohup or a shell redirection) while ``--hogs`` CPU-bound processes
(``stress --cpu N`` where installed, else Python busy loops) compete for the CPUs. The child prints a
stdout line and a stderr line each ``--period`` seconds: ``--writer print`` with ``print`` under
``python -u`` (the text and the newline are two writes: the case that splices), ``--writer split``
with ``--gap`` seconds between a line's text and its newline (what a CPU hog does to the child between
those two writes, made certain), ``--writer whole`` with one ``os.write`` per line. A line of
``out.log`` that is not one of the child's lines is spliced.
The same child runs without the recorder first (``plain``); ``in_the_childs_order`` counts the runs
whose ``out.log`` is byte for byte the child's lines in the order it wrote them (what the plain run
gives).

``--forensics PATH`` runs another checkout's recorder (``PYTHONPATH=PATH``), e.g. the code before a
change (``git archive <rev> | tar -x -C /tmp/before``). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHILD = """
import os, sys, time
steps, period, writer, gap = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], float(sys.argv[4])
for i in range(1, steps + 1):
    out = f"step {i}/{steps} loss={1.0 / i:.3f} tok/s=12000"
    err = f"[rank0] progress {100 * i // steps}%"
    if writer == "print":
        print(out)
        print(err, file=sys.stderr)
    elif writer == "split":  # the text, a pause (the child descheduled between two writes), the newline
        os.write(1, out.encode())
        time.sleep(gap)
        os.write(1, b"\\n")
        os.write(2, (err + "\\n").encode())
    else:
        os.write(1, (out + "\\n").encode())
        os.write(2, (err + "\\n").encode())
    time.sleep(period)
"""

HOG = "while True:\n    pass\n"


def expected(steps: int) -> list[str]:
    """The child's lines in the order it writes them."""
    return [line for i in range(1, steps + 1)
            for line in (f"step {i}/{steps} loss={1.0 / i:.3f} tok/s=12000", f"[rank0] progress {100 * i // steps}%")]


def start_hogs(n: int) -> list[subprocess.Popen[bytes]]:
    if n <= 0:
        return []
    stress = shutil.which("stress")
    if stress:
        return [subprocess.Popen([stress, "--cpu", str(n)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    return [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(n)]


def one_run(argv: list[str], log: Path, env: dict[str, str]) -> bytes:
    with log.open("wb") as fh:  # cwd: not a checkout (``-m`` would import the package under the cwd first)
        subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, timeout=120,
                       check=False, cwd=log.parent)
    return log.read_bytes()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--hogs", type=int, default=(os.cpu_count() or 2) * 2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--period", type=float, default=0.01)
    ap.add_argument("--writer", choices=("print", "split", "whole"), default="print")
    ap.add_argument("--gap", type=float, default=0.005, help="split: seconds between a line's text and newline")
    ap.add_argument("--forensics", help="another checkout's source tree to run the recorder from")
    args = ap.parse_args()
    want = set(expected(args.steps))
    canonical = "".join(line + "\n" for line in expected(args.steps)).encode()
    env = {**os.environ, "FORENSICS_KERNEL_LOG": "none", "FORENSICS_FAKE_NVML": "nogpu",
           "FORENSICS_HOST_EVENTS": "none", "FORENSICS_SNAPSHOT_END": "cut", "FORENSICS_SNAPSHOT_WAIT_S": "0"}
    if args.forensics:
        env["PYTHONPATH"] = args.forensics
    tmp = Path(tempfile.mkdtemp(prefix="bench-splice-"))
    child = [sys.executable, "-u", "-c", CHILD, str(args.steps), str(args.period), args.writer, str(args.gap)]
    recorded = [sys.executable, "-m", "forensics", "record", "--no-arm", "--out", str(tmp / "runs"), "--", *child]
    hogs = start_hogs(args.hogs)
    result: dict[str, Any] = {"runs": args.runs, "hogs": args.hogs, "stress": bool(shutil.which("stress")),
                              "steps": args.steps, "period_s": args.period, "writer": args.writer, "gap_s": args.gap,
                              "cpus": os.cpu_count(), "recorder": args.forensics or "this checkout"}
    try:
        for mode, argv in (("plain", child), ("recorded", recorded)):
            spliced = runs_spliced = identical = 0
            examples: list[str] = []
            t0 = time.monotonic()
            for n in range(args.runs):
                data = one_run(argv, tmp / f"{mode}-{n}.log", env)
                bad = [line for line in data.decode(errors="replace").splitlines() if line and line not in want]
                spliced += len(bad)
                runs_spliced += bool(bad)
                examples += bad[: max(0, 3 - len(examples))]
                identical += data == canonical
                shutil.rmtree(tmp / "runs", ignore_errors=True)
                (tmp / f"{mode}-{n}.log").unlink()
            result[mode] = {"spliced_lines": spliced, "runs_with_splices": runs_spliced,
                            "in_the_childs_order": identical, "seconds": round(time.monotonic() - t0, 1),
                            "examples": examples}
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
