"""Repeated records of one template: parsed a bounded number of times, counted, evidence kept."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from forensics.parsers.common import kernlog, templates
from forensics.parsers.common.base import ParseContext
from forensics.parsers.common.templates import FULL, TAIL, Templates
from forensics.parsers.process_output import scan
from forensics.parsers.registry import parser_by_name

from forensics.analysis import analyze
from forensics.events import Event
from forensics.ingest.textdoc import TextDocument

# The c10d warning PyTorch 2.4+ prints on every rank for every point-to-point collective
# (pytorch/pytorch#137440 shows it on each rank of a run); the watchdog record is the real format.
WARN = ("[rank{r}]:[W1129 15:{m:02d}:{s:02d}.{ns:09d} ProcessGroupNCCL.cpp:{ln}] Warning: "
        "TORCH_NCCL_AVOID_RECORD_STREAMS=1 has no effect for point-to-point collectives. (function operator())")
WATCHDOG = ("[rank3]:[E1129 15:59:07.408271257 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
            "Timeout(ms)=600000) ran for 600015 milliseconds before timing out.")
ITER = (" iteration {i:8d}/  100000 | consumed samples: {c:10d} | elapsed time per iteration (ms): {ms:.1f} | "
        "learning rate: 2.000E-05 | global batch size:   256 | lm loss: {loss:.6E} | loss scale: 1.0 | "
        "grad norm: 0.512 | number of skipped iterations:   0 | number of nan iterations: {nan:3d} |")


def _parse(text: str) -> list[Event]:
    doc = TextDocument.from_bytes(text.encode(), "train.log")
    return list(scan(doc, ParseContext(path="train.log", source="file:train.log", year=2026)))  # type: ignore[misc]


def _warnings(n: int, rnd: random.Random) -> list[str]:
    return [WARN.format(r=i % 8, m=i * 59 // n, s=rnd.randrange(60), ns=rnd.randrange(10**9),
                        ln=rnd.randrange(500, 5000)) for i in range(n)]


def test_a_repeated_warning_is_one_template_with_its_count_ranks_and_span() -> None:
    rnd = random.Random(3)
    lines = _warnings(2000, rnd) + [WATCHDOG]
    events = _parse("\n".join(lines) + "\n")
    warns = [e for e in events if "TORCH_NCCL_AVOID_RECORD_STREAMS" in e.message]
    assert FULL <= len(warns) < 200  # bounded: the first ones, one per stretch of the file, the last ones
    first = warns[0]
    assert first.attrs["count"] == 2000
    assert first.attrs["ranks"] == list(range(8))
    assert first.attrs["first"] == first.ts and first.attrs["last"] == warns[-1].ts
    assert first.attrs["first_line"] == 1 and first.attrs["last_line"] == 2000
    assert warns[-1].origin.line == 2000  # the last occurrence is a real event
    assert all("count" not in e.attrs for e in warns[1:])
    timeouts = [e for e in events if "Watchdog caught" in e.message]
    assert len(timeouts) == 1 and timeouts[0].origin.line == 2001


def test_a_template_that_reads_following_lines_is_never_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    # A Python warning reads its ``warnings.warn(`` line: each occurrence is parsed (torch's checkpoint warning).
    w = ("/opt/conda/lib/python3.10/site-packages/torch/utils/checkpoint.py:{n}: UserWarning: torch.utils.checkpoint:"
         " please pass in use_reentrant=True or use_reentrant=False explicitly.\n  warnings.warn(\n")
    text = "".join(w.format(n=400 + i) for i in range(40))
    collapsed = [e for e in _parse(text) if e.kind == "warning"]
    monkeypatch.setattr(templates, "FULL", 1 << 30)  # every occurrence parsed: the reference
    every = [e for e in _parse(text) if e.kind == "warning"]
    assert len(collapsed) == len(every) == 40
    assert [e.origin for e in collapsed] == [e.origin for e in every]


@pytest.mark.slow
def test_megatron_lines_are_sampled_and_a_nan_iteration_is_never_sampled_away() -> None:
    rnd = random.Random(5)
    lines = [ITER.format(i=i, c=i * 256, ms=800 + rnd.random() * 40, loss=2 + rnd.random(), nan=3 if i == 7777 else 0)
             for i in range(1, 12001)]
    events = _parse("\n".join(lines) + "\n")
    progress = [e for e in events if e.kind == "progress"]
    assert len(progress) < 12000
    assert [e.origin.line for e in progress if e.attrs.get("nan_iterations")] == [7777]


def test_dmesg_storm_is_counted_and_the_aer_signature_still_fires(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    monkeypatch.setattr(kernlog, "FULL_PARSE_BYTES", 1000)  # the literal-scan path of big files
    out, t = [], 100.0
    for _ in range(3000):
        t += 0.05
        out.append(f"[{t:12.6f}] pcieport 0000:3a:01.0: AER: Corrected error received: 0000:3b:00.0")
        out.append(f"[{t:12.6f}] nvidia 0000:3b:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
                   "(Receiver ID)")
    t += 1
    out.append(f"[{t:12.6f}] pcieport 0000:3a:01.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0")
    out.append(f"[{t:12.6f}] NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, name=python3, GPU has fallen off the bus.")
    text = "\n".join(out) + "\n"
    doc = TextDocument.from_bytes(text.encode(), "dmesg")
    events = list(parser_by_name("dmesg").parse(doc, ParseContext(path="dmesg", source="file:dmesg")))
    received = [e for e in events if "Corrected error received" in e.message]
    assert FULL + TAIL <= len(received) < 200
    assert received[0].attrs["count"] == 3000 and received[0].attrs["last_line"] == 5999
    assert received[-1].origin.line == 5999
    log = tmp_path / "dmesg.log"
    log.write_text(text)
    found = {f.signature for f in analyze([str(log)]).findings}
    assert {"xid-79-fallen-off-bus", "pcie-aer"} <= found


def test_templates_delete_digits_only() -> None:
    """A template is the line without its digits: numbers of any length are one template; the words
    and the spacing around them are not masked (a literal with a space in it still means what it says)."""
    data = b"[  125.1] a 1\n[  123.4] a 22\n[  123.4] b 22\n[    5.1] a 1\n"
    t = Templates(len(data))
    a = t.lookup(data, 0, 13)
    assert a is not None and t.lookup(data, 14, 28) is a
    assert t.lookup(data, 29, 43) is not a
    assert t.lookup(data, 44, 57) is not a  # padded otherwise: another template
    assert t.lookup(b"x\ry", 0, 3) is None  # a bar redraw is never a template
