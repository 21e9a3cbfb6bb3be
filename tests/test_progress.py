"""Progress lines of every shape, and the thinner."""

from __future__ import annotations

import math

import pytest
from forensics.parsers.producers.training_progress import Thinner, is_anomalous, parse_progress


@pytest.mark.parametrize(("line", "expected"), [
    ("{'loss': 3.5534, 'grad_norm': 1.4142135381698608, 'learning_rate': 2.0454545454545457e-06, 'epoch': 0.01}",
     {"loss": 3.5534, "grad_norm": 1.4142135381698608, "lr": 2.0454545454545457e-06, "epoch": 0.01}),
    ("{'train_runtime': 184.9061, 'train_tokens_per_second': 1416.33, 'train_loss': 1.2}",
     {"tokens_s": 1416.33, "loss": 1.2}),
    ("steps:  18%|███▊     | 507/2800 [15:41<1:10:59,  1.86s/it, avr_loss=0.134]",
     {"step": 507, "total": 2800, "s_it": 1.86, "loss": 0.134, "desc": "steps"}),
    ("Processed prompts: 100%|██| 1/1 [00:00<00:00,  5.91it/s, est. speed input: 218.76 toks/s, "
     "output: 88.68 toks/s]",
     {"it_s": 5.91, "tokens_s": 88.68}),
    ("[INFO] [timer.py:166:stop] 0/150, SamplesPerSec=29.515393227502443", {"samples_s": 29.515393227502443}),
    (" iteration      182/  250000 | consumed samples:       186368 | elapsed time per iteration (ms): 126995.3 | "
     "learning rate: 1.365E-05 | lm loss: 2.382640E+00 | loss scale: 1.0 | grad norm: 0.227 | "
     "number of skipped iterations:   0 | number of nan iterations:   0 |",
     {"step": 182, "total": 250000, "s_it": 126.9953, "loss": 2.38264, "grad_norm": 0.227, "loss_scale": 1.0}),
    ("step 12 | loss 0.1234 | 524,288 tokens/s | 12.3 ms/step", {"step": 12, "loss": 0.1234, "tokens_s": 524288}),
    ("rate 21.5 Ktok/s tgt=0.27 b/s", {"tokens_s": 21500}),
    ("throughput 5.5K tok/s", {"tokens_s": 5500}),
    ("Epoch: [1][2000/4682]\tTime 0.499s (0.496s)\tSpeed 64.1 samples/s\tLoss 2.3",
     {"samples_s": 64.1, "loss": 2.3}),
    ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
     {"overflow": True, "loss_scale": 32768, "attempted_loss_scale": 65536, "rank": 0}),
    ("Training ━━━━━━━╸━━━━  19% step: 5700 loss: 0.028 :: Speed: 0.18it/s :: Elapsed: 0:21:08",
     {"step": 5700, "loss": 0.028, "it_s": 0.18}),
])
def test_shapes(line: str, expected: dict[str, object]) -> None:
    attrs = parse_progress(line)
    assert attrs is not None
    for key, value in expected.items():
        if isinstance(value, float):
            assert attrs[key] == pytest.approx(value, rel=1e-4), key
        else:
            assert attrs[key] == value, key


@pytest.mark.parametrize("line", ["[INFO] [loss_scaler.py:183:update_scale] hello", "plain text", "step into it",
                                  "RuntimeError: something"])
def test_not_progress(line: str) -> None:
    assert parse_progress(line) is None


def test_anomalies() -> None:
    nan_dict = parse_progress("{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.0, 'epoch': 0.01}")
    assert nan_dict is not None and math.isnan(nan_dict["grad_norm"]) and is_anomalous(nan_dict)
    assert not is_anomalous({"loss": 1.0, "grad_norm": 0.5})
    assert is_anomalous({"overflow": True})


def test_thinner_keeps_an_even_bounded_series() -> None:
    t = Thinner(cap=100, head=10)
    for _ in range(10_000):
        seq = t.next_seq()
        if t.wanted(seq):
            t.hold(seq, seq)
    kept = t.kept((9999, 9999))
    assert len(kept) <= 2 * 100 + 10 + 1
    assert kept[:10] == list(range(10)) and kept[-1] == 9999
    gaps = {b - a for a, b in zip(kept[10:-1], kept[11:-1], strict=False)}
    assert len(gaps) == 1  # evenly spaced after the head


def test_thinner_starts_sparse_for_big_files() -> None:
    assert Thinner(cap=2048, size_hint=10).stride == 1
    assert Thinner(cap=2048, size_hint=1 << 30).stride >= 64
