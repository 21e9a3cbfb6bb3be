"""The terminal report: a person can act on the first screen."""

from matchkit import ev, fixture_signatures, timeline

from forensics.analysis import Analysis, SourceReport
from forensics.match import diagnose
from forensics.text_report import render_text


def _analysis(events: list) -> Analysis:
    t = timeline(events)
    findings, verdict = diagnose(t, fixture_signatures())
    return Analysis([SourceReport("dmesg.txt", "dmesg", None, len(events))], t, findings, verdict)


def test_root_cause_screen() -> None:
    events = [
        ev("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", t=0, path="dmesg.txt",
           line=1843, gpu="0000:3b:00.0"),
        ev("RuntimeError: CUDA error: unknown error", t=3, path="train.log", line=12),
        ev("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity "
           "of 79.15 GiB of which 3.00 MiB is free.", t=1, path="train.log", line=9),
    ]
    text = render_text(_analysis(events))
    lines = text.splitlines()
    assert lines[0] == "ROOT CAUSE: GPU fell off the PCIe bus (Xid 79)"
    assert lines[1].startswith("  [xid-79-fallen-off-bus · ")
    assert "  Evidence (Δt from the root cause's first event):" in text
    assert "    2023-11-14 22:13:20Z       +0 s dmesg.txt:1843  NVRM: Xid (PCI:0000:3b:00): 79" in text
    assert "What followed (consequences, not causes):" in text
    assert "    - cuda-unknown-error: CUDA reported an unknown error — follows xid-79-fallen-off-bus 3 s later" \
        "  [train.log:12, Δt +3 s]" in text
    assert "    1. Reseat or replace the GPU" in text
    assert "Risks and contributing findings:" in text and "[memory-margin]" in text
    assert "Considered and ruled out:\n    - torch-cuda-oom: " in text
    # What to do comes before the long explanation, on the first screen.
    assert text.index("What to do:") < text.index("What it means:")


def test_healthy_screen() -> None:
    text = render_text(_analysis([ev("epoch 1 step 10 loss 2.31", kind="progress")]))
    assert text.startswith("NO FAILURE FOUND (medium confidence)\n  No failure signature matched 1 notable event(s).")
    assert "Read 1 file(s): dmesg.txt (dmesg, 1 events)" in text
