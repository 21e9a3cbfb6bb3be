"""Writes tests/data/culprit/cases/: the text incidents of incidents.py as labelled case folders, so that
``forensics eval tests/data/culprit/cases`` scores their culprits and ``--transforms culprit`` rewrites them into
other shapes. Run from this folder to regenerate; the files are committed."""

from __future__ import annotations

import shutil
from pathlib import Path

import incidents

CASES: dict[str, tuple[dict[str, str], str, str, str]] = {
    # name: (files, primary, culprit table body, basis)
    "pipeline-drafters-stop-torchrun-tee": (incidents.pipeline("default"), "silent-worker-stall", "ranks = [6, 7]",
                                            "written so: drafters 6 and 7 stop printing, the queues fill"),
    "pipeline-drafters-stop-rank-prefix": (incidents.pipeline("rank", ctrl_c=False), "silent-worker-stall",
                                           "ranks = [6, 7]", "written so: as above, [rankN]: prefixes, no Ctrl-C"),
    "pipeline-drafters-stop-rank-in-message": (incidents.pipeline("none"), "silent-worker-stall", "ranks = [6, 7]",
                                               "written so: as above, the rank only inside the message"),
    "xid79-rank5-dmesg-and-training": (incidents.xid_and_training(), "xid-79-fallen-off-bus",
                                       'ranks = [5]\ngpus = ["0000:c1:00.0"]',
                                       "written so: Xid 79 on 0000:c1:00.0, NCCL puts rank 5 there"),
    "watchdog-8-ranks-rank3-silent": (incidents.watchdog_world(8, 3), "silent-worker-stall", "ranks = [3]",
                                      "written so: every rank but 3 prints the watchdog timeout"),
    "watchdog-64-ranks-rank33-silent": (incidents.watchdog_world(64, 33), "silent-worker-stall", "ranks = [33]",
                                        "written so: 63 of 64 ranks print the watchdog timeout, shuffled"),
    "gloo-rank1-loading-next-shard": (incidents.gloo_stall(), "silent-worker-stall", "ranks = [1]",
                                      "written so: rank 1 goes quiet after 'loading next shard...', rank 0 times out"),
}


def main() -> None:
    root = Path(__file__).parent / "cases"
    shutil.rmtree(root, ignore_errors=True)
    for name, (files, primary, body, basis) in CASES.items():
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "case.toml").write_text(f'id = "{name}"\nprimary = "{primary}"\nconfidence = "thread-confirmed"\n'
                                          f'source = "tests/data/culprit/incidents.py"\n\n[culprit]\n{body}\n'
                                          f'basis = "{basis}"\n', encoding="utf-8")
        for fname, text in files.items():
            (folder / fname).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
