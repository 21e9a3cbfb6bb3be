"""Metamorphic transforms (forensics/evaluation/transforms.py) and the invariance bar (``eval --transforms``).

The full product (every target of tests/corpus, tests/heldout and samples/ under every transform,
~1400 analyses) runs when ``FORENSICS_FULL_INVARIANCE=1``; the normal run holds the bar on a
deterministic subset (every third target) so that CI stays fast.
"""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path

import pytest

from forensics.cli import main
from forensics.evaluation import transforms
from forensics.evaluation.invariance import find_targets, invariance

HERE = Path(__file__).parent
ROOTS = [HERE / "corpus", HERE / "heldout", HERE.parent / "samples"]
TEXT = ("Traceback (most recent call last):\n"
        '  File "/w/train.py", line 8, in main\n'
        "    loss.backward()\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. " + "x" * 60 + "\n"
        "epoch 1 step 10 loss 2.31\n")


def test_every_transform_is_seeded_and_deterministic() -> None:
    info = transforms.FileInfo("train.log", kind="process-output", decisive=[(4, 1)],
                               chatter=["h:1:2 [0] NCCL INFO Bootstrap : Using eth0"])
    text = TEXT * 4
    for name in transforms.names():
        a = transforms.apply(name, text.encode(), info, seed=3)
        b = transforms.apply(name, text.encode(), info, seed=3)
        assert a == b, name


def test_the_shapes_the_transforms_write() -> None:
    info = transforms.FileInfo("train.log", kind="process-output", decisive=[(4, 1)])
    raw = TEXT.encode()

    def lines(name: str) -> list[str]:
        out = transforms.apply(name, raw, info)
        assert out is not None, name
        return out.decode().split("\n")

    assert lines("srun")[0].split(":")[0].isdigit()
    assert lines("torchx")[0].startswith("trainer/")
    assert lines("ray")[0].startswith("(RayTrainWorker pid=")
    assert lines("k8s")[0].startswith("[pod/trainer-worker-") and "Z Traceback" in lines("k8s")[0]
    assert " | Traceback" in lines("compose")[0]
    assert all(len(x) <= 80 for x in lines("wrap80"))
    assert transforms.apply("crlf", raw, info) == TEXT.replace("\n", "\r\n").encode()
    gz = transforms.apply("gzip", raw, info)
    assert gz is not None and gzip.decompress(gz) == raw
    numbered = lines("line-numbers")[:3]
    digits = [int("".join(c for c in x.split("Traceback")[0].split("File")[0] if c.isdigit()) or -1) for x in numbered]
    assert digits[1] == digits[0] + 1
    assert transforms.apply("windows-locale", raw, info) is None  # not a Windows export
    assert transforms.apply("strip-timestamps", b"[  12.5] NVRM: Xid 79\n", info) == b"NVRM: Xid 79\n"


def test_an_excerpt_keeps_the_decisive_lines() -> None:
    text = "".join(f"line {i}\n" for i in range(40))
    info = transforms.FileInfo("a.log", decisive=[(20, 2)])
    for seed in range(10):
        out = transforms.apply("excerpt", text.encode(), info, seed)
        assert out is not None
        kept = out.decode()
        assert "line 19\nline 20\n" in kept and len(kept) < len(text)


def test_a_localized_windows_export() -> None:
    details = ("Log Name:      System\nSource:        nvlddmkm\nDate:          2024-01-02T03:04:05.000\n"
               "Event ID:      153\nLevel:         Error\nComputer:      pc\nDescription:\nreset\n")
    info = transforms.FileInfo("e.txt", kind="windows-event-text")
    outs = {transforms.apply("windows-locale", details.encode(), info, seed).decode() for seed in range(12)}
    assert any("Ereignis-ID:" in o and "Fehler" in o for o in outs)
    assert any("ID de l'événement :" in o and "Erreur" in o for o in outs)
    assert any("事件 ID:" in o and "错误" in o for o in outs)


def test_receipts_follow_the_prefixed_lines() -> None:
    old = b"ab\ncd\nef\n"
    new = b"0: ab\n0: cd\n0: ef\n"
    rec = struct.Struct("<QQ")
    idx = b"GFRIDX1\n" + rec.pack(3, 10) + rec.pack(6, 20) + rec.pack(9, 30)
    moved = transforms.remap_receipts(idx, old, new)
    assert moved is not None
    assert [e for e, _ in rec.iter_unpack(moved[8:])] == [6, 12, 18]


@pytest.mark.slow
def test_eval_transforms_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = tmp_path / "cases" / "oom"
    case.mkdir(parents=True)
    (case / "case.toml").write_text('id = "oom"\nprimary = "torch-cuda-oom"\n')
    (case / "app.log").write_text(TEXT)
    assert main(["eval", str(tmp_path), "--transforms", "srun,quote,gzip"]) == 0
    out = capsys.readouterr().out
    assert "srun              1/1 (100.0%)" in out and "overall           3/3 (100.0%)" in out
    assert main(["eval", str(tmp_path), "--transforms", "nonsense"]) == 2
    assert "unknown nonsense" in capsys.readouterr().err


@pytest.mark.slow
def test_invariance_bar() -> None:
    """The issue's bar: ≥ 98 % of transformed cases keep their root cause (and ≥ 90 % per transform)."""
    targets = [t for r in ROOTS for t in find_targets(r)]
    assert len(targets) >= 100
    if os.environ.get("FORENSICS_FULL_INVARIANCE") != "1":
        targets = targets[::3]
    report = invariance([], targets=targets)
    n, d = report.rate()
    assert d >= 200 and n / d >= 0.98, [(o.target, o.transform, o.baseline, o.got) for o in report.changed]
    for name in transforms.names():
        k, m = report.rate(name)
        assert not m or k / m >= 0.9, (name, k, m)
