"""Finding facts: the phase an error happened in (and whether it was the first step) and an
OOM's sizes, in the finding's JSON, the verdict summary and the terminal report."""

from __future__ import annotations

from pathlib import Path

from matchkit import ev

from forensics.analysis import analyze, to_json_dict
from forensics.match.facts import finding_facts, oom_sentence
from forensics.text_report import render_text

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "recorded"
OOM_TEXT = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total capacity "
            "of 139.80 GiB of which 201.12 MiB is free.")


def _oom(phase: str | None, frames: list[str], line: int = 10, path: str = "app.log", **sizes: object) -> object:
    attrs = {"exc_type": "torch.OutOfMemoryError", "frames": frames, "oom": "cuda", **sizes}
    if phase:
        attrs["phase"] = phase
    return ev(OOM_TEXT, kind="traceback", line=line, path=path, **attrs)


ADAM = ["train.py:<module>", "torch/optim/optimizer.py:wrapper", "torch/optim/adam.py:step",
        "torch/optim/adam.py:_init_group"]


def test_optimizer_state_creation_is_the_first_step() -> None:
    facts = finding_facts([_oom("optimizer-step", ADAM, tried_mib=256.0, free_mib=201.12, total_mib=143155.2)])
    assert facts == {"phase": "optimizer-step", "first": True, "oom": "cuda", "tried_mib": 256.0,
                     "free_mib": 201.12, "total_mib": 143155.2}
    later = finding_facts([_oom("optimizer-step", ADAM[:3], tried_mib=256.0)])
    assert later == {"phase": "optimizer-step", "oom": "cuda", "tried_mib": 256.0}


def test_a_progress_bar_at_zero_means_the_first_step() -> None:
    oom = _oom("backward", ["train.py:<module>", "torch/_tensor.py:backward"], line=5, tried_mib=86.0)
    at_zero = [ev("0%| | 0/30033 [00:00<?, ?it/s]", kind="progress", line=2, step=0, total=30033)]
    assert finding_facts([oom], lambda: at_zero)["first"] is True
    moved_on = [*at_zero, ev("1/30033", kind="progress", line=3, step=1, total=30033)]
    assert "first" not in finding_facts([oom], lambda: moved_on)
    elsewhere = [ev("0/10", kind="progress", line=2, step=0, total=10, path="other.log")]
    assert "first" not in finding_facts([oom], lambda: elsewhere)
    plain_step = [ev("step 0 loss 2.1", kind="progress", line=2, step=0)]  # printed after step 0 finished
    assert "first" not in finding_facts([oom], lambda: plain_step)


def test_oom_sentences() -> None:
    full = {"phase": "optimizer-step", "first": True, "oom": "cuda", "tried_mib": 256.0, "free_mib": 201.12,
            "total_mib": 143155.2}
    assert oom_sentence(full) == ("CUDA out of memory at the first optimizer step (tried 256 MiB with 201 MiB "
                                  "free of 139.8 GiB)")
    assert oom_sentence({"phase": "load", "oom": "hip", "tried_mib": 3072.0, "total_mib": 65536.0}) == \
        "HIP out of memory while loading the model (tried 3.0 GiB on a 64.0 GiB GPU)"
    assert oom_sentence({"oom": "cuda"}) == "CUDA out of memory"
    assert oom_sentence({"phase": "backward"}) == ""


def test_facts_need_an_error_with_a_phase_or_an_oom() -> None:
    assert finding_facts([ev("Xid 79", kind="xid", xid=79)]) == {}
    assert finding_facts([ev("RuntimeError: boom", kind="traceback", frames=["a.py:f"])]) == {}
    assert finding_facts([ev("RuntimeError: boom", kind="traceback", phase="forward")]) == {"phase": "forward"}


def test_recorded_oom_at_the_first_optimizer_step_says_so_everywhere() -> None:
    analysis = analyze([str(SAMPLES / "oom-optimizer-step" / "bundle")])
    sentence = "CUDA out of memory at the first optimizer step (tried 256 MiB with 201 MiB free of 139.8 GiB)"
    assert sentence in analysis.verdict.summary
    assert sentence in " ".join(render_text(analysis).split())
    [root] = [f for f in to_json_dict(analysis)["findings"] if f["role"] == "root-cause"]
    assert root["facts"]["phase"] == "optimizer-step" and root["facts"]["first"] is True
    assert root["facts"]["tried_mib"] == 256.0


def test_recorded_oom_in_the_backward_pass() -> None:
    analysis = analyze([str(SAMPLES / "oom-first-backward" / "bundle")])
    assert "CUDA out of memory in the backward pass (tried 128 MiB with 31 MiB free of 139.8 GiB)" \
        in analysis.verdict.summary
