"""The culprit line at scale: analyze time (CPU) and the blame line's and JSON's size from 8 to 2048 ranks.

Two incidents of tests/data/culprit/incidents.py, grown the way ``forensics eval --transforms scale-N`` grows
them: all ranks but one print the watchdog timeout of one collective (shuffled, as an aggregated log has
them), and the drafter pipeline whose drafters 6, 7 stop printing (bystander ranks added). Prints one row per
size: seconds of CPU for ``analyze``, the blame line's length, the JSON blame's size, and what it names.

    python bench/bench_culprit_scale.py [--sizes 8,64,512,2048]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "data" / "culprit"))

import incidents  # noqa: E402

from forensics.analysis import analyze  # noqa: E402
from forensics.evaluation import transforms  # noqa: E402


def _watchdog(n: int) -> dict[str, str]:
    return incidents.watchdog_world(n, 3 if n == 8 else 33)


def _pipeline(n: int) -> dict[str, str]:
    files = incidents.pipeline("default")
    if n == 8:
        return files
    info = transforms.FileInfo("torchrun.log", kind="process-output", culprits=[6, 7], bystander=5)
    grown = transforms.apply(f"scale-{n}", files["torchrun.log"].encode(), info)
    return {"torchrun.log": (grown or b"").decode()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,64,512,2048")
    args = ap.parse_args()
    print(f"{'incident':<10} {'ranks':>6} {'MB':>6} {'cpu s':>7} {'line':>6} {'json':>7}  culprits")
    for name, make in (("watchdog", _watchdog), ("pipeline", _pipeline)):
        for n in (int(x) for x in args.sizes.split(",")):
            with tempfile.TemporaryDirectory() as d:
                paths = []
                for fname, text in make(n).items():
                    (Path(d) / fname).write_text(text, encoding="utf-8")
                    paths.append(str(Path(d) / fname))
                size = sum(Path(p).stat().st_size for p in paths) / 1e6
                t0 = time.process_time()
                b = analyze(paths).verdict.blame
                cpu = time.process_time() - t0
            line = b.line() if b else ""
            blob = json.dumps(b.to_json()) if b else ""
            print(f"{name:<10} {n:>6} {size:>6.1f} {cpu:>7.2f} {len(line):>6} {len(blob):>7}  "
                  f"{b.culprits if b else '-'}")


if __name__ == "__main__":
    main()
